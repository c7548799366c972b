"""Every chapter sets matplotlib's backend itself (``%matplotlib inline``), before it draws.

With ``MPLBACKEND=agg`` in the environment (common on CI machines and servers) a
notebook that relies on the default backend draws nothing, and nbval fails on every
CPU (issue 38: the appendix did). scripts/check-nbval-repeat.sh runs one nbval pass
with ``MPLBACKEND=agg`` on two chapters to show it.
"""

import json
from pathlib import Path

import pytest

BOOK = Path(__file__).resolve().parents[1] / "book"
NOTEBOOKS = sorted(BOOK.glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_notebook_sets_matplotlib_inline_before_its_first_figure(path):
    cells = [c for c in json.loads(path.read_text(encoding="utf8"))["cells"]]
    code = [
        (i, "".join(c["source"]))
        for i, c in enumerate(cells)
        if c["cell_type"] == "code" and "remove-cell" not in c.get("metadata", {}).get("tags", [])
    ]
    first_magic = next((i for i, src in code if "%matplotlib inline" in src.splitlines()), None)
    assert first_magic is not None, f"{path.name} never sets %matplotlib inline"
    draws = next(
        (
            i
            for i, c in enumerate(cells)
            if any("image/png" in o.get("data", {}) for o in c.get("outputs", []))
        ),
        None,
    )
    assert draws is None or first_magic <= draws, (
        f"{path.name}: cell {draws} draws a figure before %matplotlib inline (cell {first_magic})"
    )
