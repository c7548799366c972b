"""The conceptual diagrams are reproducible: each script rewrites its SVG exactly.

Every ``scripts/diagrams/<name>.py`` is run as the README there describes,
``python scripts/diagrams/<name>.py --out DIR``, into a temporary folder, and
what it writes must be byte-identical to the committed
``book/_static/diagrams/<name>.svg`` the chapters show. A diagram edited by
hand, a script changed without regenerating its SVG, or a script whose output
depends on the date or the run (hash salt, metadata) fails here.
"""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(
    p for p in (ROOT / "scripts" / "diagrams").glob("*.py") if not p.name.startswith("_")
)  # _diagram.py is shared code
COMMITTED = ROOT / "book" / "_static" / "diagrams"


def run_script(script, out_dir):
    result = subprocess.run(
        [sys.executable, str(script), "--out", str(out_dir)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, f"{script.name} failed:\n{result.stderr}"
    return out_dir / f"{script.stem}.svg"


def test_there_are_diagram_scripts():
    assert SCRIPTS, "no scripts in scripts/diagrams"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_script_reproduces_its_committed_svg(script, tmp_path):
    committed = COMMITTED / f"{script.stem}.svg"
    assert committed.exists(), (
        f"{committed.relative_to(ROOT)} is missing: run "
        f"python scripts/diagrams/{script.name} and commit its output"
    )
    written = run_script(script, tmp_path)
    assert written.exists(), f"{script.name} --out {tmp_path} wrote no {written.name}"
    assert written.read_bytes() == committed.read_bytes(), (
        f"{script.name} no longer writes the committed {committed.name}: "
        f"rerun python scripts/diagrams/{script.name} and commit the SVG"
    )


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_svg_is_self_contained_and_undated(script):
    svg = (COMMITTED / f"{script.stem}.svg").read_text(encoding="utf8")
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    assert "<dc:date>" not in svg, "save with metadata={'Date': None}"
    assert "http://" not in svg.replace("http://www.w3.org/", "").replace(
        "http://purl.org/dc/", ""
    ).replace("http://creativecommons.org/", "").replace("http://matplotlib.org/", ""), (
        "the SVG loads something from the network"
    )


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_every_diagram_is_shown_in_the_book(script):
    pages = list((ROOT / "book").glob("*.ipynb")) + list((ROOT / "book").glob("*.md"))
    target = f"_static/diagrams/{script.stem}.svg"
    assert any(target in page.read_text(encoding="utf8") for page in pages), (
        f"no chapter shows {target}"
    )
