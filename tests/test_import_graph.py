"""One way in, no circles: the import graph of ``attention_lib``, built statically.

Every module of the package is parsed with :mod:`ast` (nothing is imported);
each ``import`` and ``from ... import`` anywhere in it (at the top, inside a
function: the lazy imports, or under ``if TYPE_CHECKING``) is resolved to the
package's own modules, relative or absolute. The graph must have no cycle, and
nothing under ``attention_lib/models/`` may import ``attention_lib/train/``
(the trainers use the models, never the other way round).
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "attention_lib"


def module_names(root: Path = PACKAGE) -> dict[str, Path]:
    """``{dotted name: file}`` of every module under ``root`` (a package's is its ``__init__``)."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def resolve(name: str, modules: dict) -> str | None:
    """``name`` if it is one of ``modules``, else its longest prefix that is, else None."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str, path: Path, modules: dict) -> set[str]:
    """The package's modules that ``module`` (in ``path``) imports, anywhere in its code."""
    is_package = path.name == "__init__.py"
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf8"), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = module.split(".")
                keep = len(parts) - node.level + (1 if is_package else 0)
                if keep < 1:
                    raise ValueError(f"{path}:{node.lineno}: relative import beyond the package")
                base = ".".join(parts[:keep] + ([node.module] if node.module else []))
            else:
                base = node.module
            # ``from .models import gpt`` imports the module models.gpt;
            # ``from .gpt import TinyGPT`` imports gpt (TinyGPT is a name in it).
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            target = resolve(name, modules)
            if target is not None and target != module:
                targets.add(target)
    return targets


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    modules = module_names(root)
    return {m: imports_of(m, p, modules) for m, p in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as ``[a, b, ..., a]``, or None if it is acyclic."""
    state = {}  # 1: on the current path, 2: done
    path = []

    def visit(node):
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_graph_is_built_from_every_module():
    graph = import_graph()
    assert "attention_lib.models.gpt" in graph
    assert "attention_lib.nn.block" in graph["attention_lib.models.gpt"]
    # a function-level (lazy) import is an edge too
    assert "attention_lib.models.kv_cache" in graph["attention_lib.models.gpt"]


def test_the_cycle_finder_finds_a_cycle_and_its_absence():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_a_package_and_a_lazy_relative_import_are_resolved(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .sub import b\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("def f():\n    from ..c import g\n")
    (pkg / "c.py").write_text("import pkg.sub.b\n")
    graph = import_graph(pkg)
    assert graph["pkg"] == {"pkg.sub", "pkg.sub.b"}
    assert graph["pkg.sub.b"] == {"pkg.c"}
    cycle = find_cycle(graph)
    assert cycle[0] == cycle[-1] and set(cycle) == {"pkg.c", "pkg.sub.b"}


def test_attention_lib_has_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_models_never_import_the_trainers():
    graph = import_graph()
    if "attention_lib.train" not in graph:
        pytest.fail("attention_lib/train/ is missing: the trainers live there")
    wrong = sorted(
        f"{m} imports {t}"
        for m, targets in graph.items()
        if m == "attention_lib.models" or m.startswith("attention_lib.models.")
        for t in targets
        if t == "attention_lib.train" or t.startswith("attention_lib.train.")
    )
    assert not wrong, "; ".join(wrong)


def test_the_models_folder_holds_no_trainer():
    scripts = sorted(
        p.name for p in (PACKAGE / "models").glob("*.py") if "__main__" in p.read_text("utf8")
    )
    assert not scripts, f"command-line scripts under models/: {scripts} (they belong in train/)"
