"""Every command-line script answers ``--help``: it builds an ``argparse.ArgumentParser``.

A script without one runs its whole job when asked for ``--help`` (and may rewrite a
committed data file), or crashes. Static and fast: each of ``scripts/*.py`` and
``benchmarks/*.py`` is parsed with :mod:`ast`, nothing is imported or run. A file with an
``if __name__ == "__main__":`` block must call ``ArgumentParser`` (``argparse.ArgumentParser``
or the bare name), or call a helper that does: a top-level function of ``scripts/``,
``benchmarks/`` or ``attention_lib/_cli.py`` that builds one (such as
``scripts/browser_site.py``'s ``arguments``), imported by name from its module.
"""

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT_DIRS = ("scripts", "benchmarks")


def script_files():
    return sorted(p for d in SCRIPT_DIRS for p in (ROOT / d).glob("*.py"))


def parse(path):
    return ast.parse(path.read_text(encoding="utf8"), filename=str(path))


def is_main_guard(node):
    """``if __name__ == "__main__":`` (either operand order)."""
    if not (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)):
        return False
    test = node.test
    if len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq):
        return False
    sides = [test.left, test.comparators[0]]
    names = [s.id for s in sides if isinstance(s, ast.Name)]
    consts = [s.value for s in sides if isinstance(s, ast.Constant)]
    return names == ["__name__"] and consts == ["__main__"]


def has_main_guard(tree):
    return any(is_main_guard(node) for node in tree.body)


def is_argument_parser_call(node):
    """``ArgumentParser(...)`` or ``argparse.ArgumentParser(...)``."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Name):
        return func.id == "ArgumentParser"
    return (
        isinstance(func, ast.Attribute)
        and func.attr == "ArgumentParser"
        and isinstance(func.value, ast.Name)
        and func.value.id == "argparse"
    )


def builds_parser(tree):
    return any(is_argument_parser_call(node) for node in ast.walk(tree))


@functools.cache
def parser_helpers():
    """``{module: {function, ...}}``: top-level functions that build an ArgumentParser."""
    modules = {p.stem: p for p in script_files()}
    modules["attention_lib._cli"] = ROOT / "attention_lib" / "_cli.py"
    helpers = {}
    for module, path in modules.items():
        for node in parse(path).body:
            if isinstance(node, ast.FunctionDef) and builds_parser(node):
                helpers.setdefault(module, set()).add(node.name)
    return helpers


def calls_parser_helper(tree, helpers):
    """True when ``tree`` imports a helper by name (``from m import f [as g]``) and calls it."""
    local = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in helpers:
            for alias in node.names:
                if alias.name in helpers[node.module]:
                    local.add(alias.asname or alias.name)
    return any(
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in local
        for node in ast.walk(tree)
    )


def has_parser(path, helpers):
    tree = parse(path)
    return builds_parser(tree) or calls_parser_helper(tree, helpers)


COMMANDS = [p for p in script_files() if has_main_guard(parse(p))]


def test_there_are_command_line_scripts_to_check():
    assert len(COMMANDS) > 20, [p.name for p in COMMANDS]


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_script_builds_an_argument_parser(path):
    rel = path.relative_to(ROOT).as_posix()
    assert has_parser(path, parser_helpers()), (
        f'{rel} has an `if __name__ == "__main__":` block but builds no '
        "argparse.ArgumentParser (directly or through a helper such as "
        "scripts/browser_site.py's arguments): `python "
        f"{rel} --help` would run the script's work instead of printing its usage"
    )
