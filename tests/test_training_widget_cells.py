"""The training widgets' cells in chapters 9 and 11 (scripts/add_training_widgets.py).

Each cell's static figure carries, as its alt text, the description the figure gives
of itself (its SVG <desc>): regenerating the figure (scripts/make_train_fallbacks.mjs)
with other numbers must be followed by rewriting the cell, or the page says one thing
in its alt text and shows another.
"""

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location(
    "add_training_widgets", ROOT / "scripts" / "add_training_widgets.py"
)
widgets = importlib.util.module_from_spec(spec)
spec.loader.exec_module(widgets)


def widget_cell(chapter):
    nb = json.loads((ROOT / chapter).read_text(encoding="utf8"))
    (cell,) = [c for c in nb["cells"] if "data-train=" in "".join(c["source"])]
    return cell


def test_every_training_widget_is_in_place_and_current():
    assert widgets.main(["--check"]) == 0


def test_a_stale_alt_text_is_found_and_rewritten():
    chapter = next(iter(widgets.PLACES))
    cell = widget_cell(chapter)
    alt = widgets.figure_alt(widgets.PLACES[chapter]["figure"])
    cell["source"] = "".join(cell["source"]).replace(alt, alt + " (old numbers)")
    assert widgets.refresh(chapter, cell)  # stale: rewritten
    assert "(old numbers)" not in "".join(cell["source"])
    assert not widgets.refresh(chapter, cell)  # now current
