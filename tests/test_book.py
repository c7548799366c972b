"""The chapters, checked as files: what nbval and the build cannot see.

nbval re-runs each notebook and compares outputs; the book build checks links
and references. These tests pin the rest of the book's promises: every chapter
is executed and in the table of contents, every figure has alt text and a
caption, no chapter redefines a function the library provides, and the Colab
set-up cell points at the repository named in _config.yml.
"""

import ast
import importlib.util
import json
import re
from pathlib import Path

import pytest
import yaml
from IPython.core.inputtransformer2 import TransformerManager

import attention_lib

ROOT = Path(__file__).resolve().parents[1]


def toc_files():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc.get("parts", []):
        files += [entry["file"] for entry in part["chapters"]]
    return files


CHAPTERS = sorted(p for p in (ROOT / "book").glob("*.ipynb"))


def code_cells(path):
    cells = json.loads(path.read_text(encoding="utf8"))["cells"]
    return [c for c in cells if c["cell_type"] == "code"]


def source(cell):
    return "".join(cell["source"])


def test_every_notebook_is_in_the_table_of_contents():
    listed = set(toc_files())
    for path in CHAPTERS:
        assert f"book/{path.stem}" in listed, f"{path.name} is not in _toc.yml"
    for entry in listed:
        candidates = [ROOT / f"{entry}{ext}" for ext in (".md", ".ipynb")]
        assert any(c.exists() for c in candidates), f"_toc.yml lists {entry}, which does not exist"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_is_executed_without_errors(path):
    for cell in code_cells(path):
        if not source(cell).strip():
            continue
        assert cell["execution_count"] is not None, (
            f"{path.name}: unexecuted cell {source(cell)[:60]!r}"
        )
        errors = [o for o in cell["outputs"] if o["output_type"] == "error"]
        assert not errors, f"{path.name}: cell {source(cell)[:60]!r} raised {errors[0]['ename']}"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_figure_has_alt_text_and_a_caption(path):
    for cell in code_cells(path):
        if not any("image/png" in o.get("data", {}) for o in cell["outputs"]):
            continue
        meta = cell["metadata"].get("mystnb", {})
        alt = meta.get("image", {}).get("alt", "")
        caption = meta.get("figure", {}).get("caption", "")
        where = f"{path.name}: figure from {source(cell)[:60]!r}"
        assert len(alt.split()) >= 8, f"{where} has no descriptive alt text"
        assert caption.strip(), f"{where} has no caption"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_defines_none_of_the_library_functions(path):
    public = set(attention_lib.__all__)
    for cell in code_cells(path):
        # IPython syntax (!shell, %magic) becomes plain Python first.
        text = TransformerManager().transform_cell(source(cell))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                assert node.name not in public, (
                    f"{path.name} redefines attention_lib.{node.name}; call the library instead"
                )


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_imports_the_library(path):
    assert any(
        re.search(r"^\s*(from|import) attention_lib", source(c), re.M) for c in code_cells(path)
    ), f"{path.name} does not import attention_lib"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_colab_cell_fetches_the_configured_repository(path):
    """Colab opens a lone notebook: its first code cell fetches the repository."""
    url = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
    first = source(code_cells(path)[0])
    assert '"google.colab" in sys.modules' in first, f"{path.name}: no Colab set-up cell first"
    assert f'REPOSITORY = "{url}"' in first, (
        f"{path.name}: the Colab cell's REPOSITORY is not _config.yml's repository url {url}"
    )


def _colab_template():
    spec = importlib.util.spec_from_file_location(
        "sync_colab_cell", ROOT / "scripts" / "sync_colab_cell.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_colab_cell_is_up_to_date_and_installs_the_library(path):
    """The set-up cell must install attention_lib, not only put it on the
    kernel's sys.path: chapter 4 runs ``python -m attention_lib.align`` in a
    subprocess, which failed on Colab with No module named 'attention_lib'.
    If this fails, run ``python scripts/sync_colab_cell.py``."""
    sync = _colab_template()
    url = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
    expected = sync.cell_source(url)
    assert '"-e", home' in expected and "sys.path.insert(0, home)" in expected
    assert source(code_cells(path)[0]) == expected, (
        f"{path.name}: the Colab set-up cell is out of date; run python scripts/sync_colab_cell.py"
    )


# A string that names a file through the repository's layout: "../data/...",
# "./data/x", "data/x", "book/x", "_static/x". A reader who downloads a chapter
# from the site runs it from wherever they saved it, where none of these exist.
RELATIVE_PATH = re.compile(r"^(\.\.?[/\\]|(data|book|_static|benchmarks|scripts)[/\\])")


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_reads_no_file_through_a_path_relative_to_the_repository(path):
    """Every chapter runs as a lone notebook from any working directory.

    Data come from the library (``attention_lib.data_dir()`` and the loaders),
    which finds them beside the installed package, never from ``../data``.
    """
    for cell in code_cells(path):
        if '"google.colab" in sys.modules' in source(cell):
            continue  # the Colab set-up cell
        text = TransformerManager().transform_cell(source(cell))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert not RELATIVE_PATH.match(node.value), (
                    f"{path.name} reads {node.value!r}, a path relative to book/: it fails "
                    f"when the notebook runs elsewhere (Colab, a download); use "
                    f"attention_lib.data_dir() / ... instead"
                )
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "chdir":
                raise AssertionError(f"{path.name} changes the working directory")
