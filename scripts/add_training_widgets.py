"""Insert the training widgets into chapters 9 and 11, one markdown cell each.

Each cell is raw HTML (the stylesheets, a ``<div class="aft-widget"
data-train="...">`` holding the static figure shown without JavaScript, and the
module script that mounts it; ``book/_static/runtime/widget-train.mjs`` draws
the widget), placed after the cell whose source holds an anchor sentence.
Only that cell is added: every other cell, and every output, is left as it
was, so the chapters need not be executed again. Running it again does nothing
(a chapter that already has the widget is skipped).

    python scripts/add_training_widgets.py          # edit book/10_*.ipynb, book/12_*.ipynb
    python scripts/add_training_widgets.py --check  # exit 1 if a widget is missing
"""

import argparse
import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STATIC = "../_static/"

INDUCTION = """\
You can watch this division of labour appear. The widget below trains this two-layer
model on the copy task in your browser (in a background thread, with a JavaScript copy
of the library's backward passes, `book/_static/runtime/train.mjs`): press **Train** and watch the loss fall, and the
attention maps of both layers on one held-out sequence change every ten steps. The
outlined cells are where a previous-token head (layer 0) and an induction head (layer 1)
would look. For a while little happens; then layer 0 finds the previous position, layer 1
finds the position after the earlier occurrence, and the loss drops. Training is random:
yours will not drop at exactly the step of the loss curve above.
"""

TEXT = """\
### A model of your own text

The same training, on any text you give it: paste a text (up to about 1 MB; the
tutorial's Tiny Shakespeare fits), choose a size, and press **Train**. A character model
learns it in your browser, nothing leaves the page; the last 10% of the text is held out,
and its loss (orange) says how well the model predicts characters it never trained on.
**Generate** writes with the model as it is at any moment, and **Download** saves it as the
two files the book's runtime loads (`my-text.json`, `my-text.bin`).

Or start from this chapter's trained model instead of from scratch, and finetune it on your
text: **full finetuning** trains every weight; **LoRA** trains only two small matrices beside
the query and value weights of each block (their product is added to the frozen weight, as
`attention_lib.nn.lora` does; the widget says how many numbers that is) and leaves the rest
as it was. The model is measured before its first step and then as it trains, on two held-out
texts side by side: the end of yours (what finetuning is for) and Shakespeare it never trained
on (what it forgets). Your text keeps only the characters the model knows; the widget says
which it left out.
"""

#: chapter -> where the cell goes (after the cell whose source holds the anchor), its
#: prose, and its widget: data-train kind, accessible name, static figure, figure caption
PLACES = {
    "book/09_transformer.ipynb": {
        "anchor": "mark_cells(axes[1], [(t, t - m + 1)",
        "prose": INDUCTION,
        "kind": "induction",
        "label": "Train chapter 9's two-layer model in your browser and watch an induction "
        "head form",
        "figure": "train-induction.fallback.svg",
        "caption": "Chapter 9's model trained on the copy task by the widget's own code: its "
        "loss and both layers' attention maps.",
    },
    "book/11_shakespeare.ipynb": {
        "anchor": 'widget_html("shakespeare")',
        "prose": TEXT,
        "kind": "text",
        "label": "Train a character model of your own text in your browser",
        "figure": "train-text.fallback.svg",
        "caption": "The small model trained on Tiny Shakespeare by the widget's own code: its "
        "training and held-out loss, and what it writes.",
    },
}


def figure_alt(name):
    """The figure's own description (its SVG <desc>), as the image's alt text."""
    svg = (ROOT / "book" / "_static" / "fallbacks" / name).read_text(encoding="utf8")
    start = svg.index('<desc id="d">') + len('<desc id="d">')
    return svg[start : svg.index("</desc>", start)].replace('"', "&quot;")


def figure_size(name):
    """``width="..." height="..."`` of the figure, from its SVG."""
    svg = (ROOT / "book" / "_static" / "fallbacks" / name).read_text(encoding="utf8")
    head = svg[: svg.index(">")]
    width = head.split(' width="')[1].split('"')[0]
    height = head.split(' height="')[1].split('"')[0]
    return f'width="{width}" height="{height}"'


def widget_html(kind, label, figure, caption):
    """The stylesheets, the widget's ``<div>`` (its static figure inside) and its script."""
    return f"""\
<link rel="stylesheet" href="{STATIC}runtime/widgets.css">
<link rel="stylesheet" href="{STATIC}runtime/widget-train.css">
<div class="aft-widget" data-train="{kind}" role="region" aria-label="{label}">
<figure class="aft-fallback"><img src="{STATIC}fallbacks/{figure}" \
alt="{figure_alt(figure)}" {figure_size(figure)}>
<figcaption>{caption} With JavaScript on, this becomes a live widget.</figcaption></figure>
</div>
<script type="module">import("{STATIC}runtime/widgets.mjs").then((m) => m.mountAll()).catch(() => {{}});</script>
"""


def cell_text(chapter):
    place = PLACES[chapter]
    widget = (place[k] for k in ("kind", "label", "figure", "caption"))
    return place["prose"] + "\n" + widget_html(*widget)


def add(chapter, nb):
    """Insert the chapter's widget cell into ``nb`` after the cell holding its anchor."""
    anchor = PLACES[chapter]["anchor"]
    where = [i for i, c in enumerate(nb["cells"]) if anchor in "".join(c["source"])]
    if len(where) != 1:
        raise SystemExit(f"{chapter}: the anchor {anchor!r} is in {len(where)} cells, not one")
    source = cell_text(chapter)
    cell = {
        "cell_type": "markdown",
        "id": hashlib.sha256(source.encode()).hexdigest()[:8],
        "metadata": {},
        "source": source.splitlines(keepends=True),
    }
    nb["cells"].insert(where[0] + 1, cell)


def write_notebook(path, nb):
    """As Jupyter writes a notebook: one-space indent, sorted keys, UTF-8, final newline."""
    text = json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    path.write_text(text, encoding="utf8")


def refresh(chapter, cell):
    """Rewrite the widget part of ``cell`` as :func:`widget_html` writes it now (the
    prose before it kept); True if it changed (a regenerated figure's description)."""
    place = PLACES[chapter]
    expected = widget_html(*(place[k] for k in ("kind", "label", "figure", "caption")))
    source = "".join(cell["source"])
    start = source.index(expected.splitlines()[0])
    if source[start:] == expected:
        return False
    cell["source"] = (source[:start] + expected).splitlines(keepends=True)
    return True


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check",
        action="store_true",
        help="only report widgets that are missing, or stale (their alt text is not "
        "their figure's description)",
    )
    args = parser.parse_args(argv)
    missing, stale = [], []
    for chapter in PLACES:
        path = ROOT / chapter
        nb = json.loads(path.read_text(encoding="utf8"))
        cells = [c for c in nb["cells"] if "data-train=" in "".join(c["source"])]
        if args.check:
            if not cells:
                missing.append(chapter)
            elif refresh(chapter, cells[0]):
                stale.append(chapter)
        elif not cells:
            add(chapter, nb)
            write_notebook(path, nb)
            print(f"{chapter}: added the training widget")
        elif refresh(chapter, cells[0]):
            write_notebook(path, nb)
            print(f"{chapter}: refreshed the training widget (its figure changed)")
        else:
            print(f"{chapter}: already has it")
    if missing:
        print("missing the training widget: " + ", ".join(missing))
    if stale:
        print(
            "training widget stale (not as its figure describes itself; run "
            "python scripts/add_training_widgets.py): " + ", ".join(stale)
        )
    return 1 if missing or stale else 0


if __name__ == "__main__":
    sys.exit(main())
