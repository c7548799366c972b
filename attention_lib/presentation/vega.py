"""Vega-Lite helpers shared by the chart builders (:mod:`.charts`).

The book's look (font sizes as large as the body text, Okabe-Ito colours),
ordinal axes labelled with words, charts as wide as the text column, and the
softmax computed by Vega transforms in the reader's browser. Altair is
imported only when a chart is built: the numerical modules never need it.
"""

import json

OKABE_ITO_BLUE, OKABE_ITO_ORANGE, GREY = "#0072B2", "#E69F00", "#BBBBBB"
FONT_SIZE = 14  # CSS px of tick labels, legends and text marks
TITLE_FONT_SIZE = 16  # CSS px of titles and axis titles: the body text's size
LABEL_CHAR_WIDTH = 0.62 * FONT_SIZE  # CSS px per character, roughly (DejaVu Sans)


def altair():
    """The ``altair`` module, or an ``ImportError`` that says how to install it."""
    try:
        import altair as alt
    except ImportError:  # pragma: no cover - said plainly instead of a traceback
        raise ImportError(
            "attention_lib's interactive charts need Altair: "
            "pip install -r requirements.txt (altair==6.3.0)"
        ) from None
    return alt


def heat_map_width(n_keys, step, row_labels):
    """A heat map's width on a wide screen: its cells, the row labels, the colour legend."""
    return n_keys * step + max(len(w) for w in row_labels) * LABEL_CHAR_WIDTH + 30 + 80


def word_axis(alt, labels, title, step=None):
    """An ordinal axis over indices whose labels are the words (repeats stay apart).

    The key axis runs along the top; when its longest word is wider than a
    column (``step`` px, less a small gap) its labels are turned by 45 degrees
    so that neighbours do not overprint each other.
    """
    widest = max(len(w) for w in labels) * LABEL_CHAR_WIDTH
    angle = -45 if title == "key" and step is not None and widest > step - 4 else 0
    return alt.Axis(
        title=title,
        labelExpr=f"{json.dumps(labels)}[datum.value]",
        labelAngle=angle,
        orient="top" if title == "key" else "left",
        **({"labelAlign": "left"} if angle else {}),
    )


def fit_column(chart, max_width, axes=0):
    """Make ``chart`` as wide as the text column, up to ``max_width`` CSS px.

    The width is Vega-Lite's ``"container"``: the chart takes the width of the
    element it is drawn in, and redraws when the window is resized, so it fits
    a phone's column as well as a desktop's. A single or layered chart fits
    whole (``autosize`` fit-x, axes and legend included); a concatenation
    cannot, so its panels take the column less ``axes`` px for the axes beside
    them. :func:`~attention_lib.presentation.embed.chart_html` reads both numbers
    from the spec's ``usermeta``.
    """
    if axes:  # a concatenation: every panel as wide as the container
        chart.vconcat = [panel.properties(width="container") for panel in chart.vconcat]
    else:
        chart = chart.properties(
            width="container", autosize={"type": "fit-x", "contains": "padding"}
        )
    return chart.properties(
        usermeta={"attention_lib": {"max_width": int(max_width), "axes": int(axes)}}
    )


def finish(chart, description):
    """``chart`` with its screen-reader ``description`` and the book's fonts."""
    return (
        chart.properties(description=description)
        .configure_axis(
            labelFontSize=FONT_SIZE, titleFontSize=TITLE_FONT_SIZE, titleFontWeight="normal"
        )
        .configure_legend(labelFontSize=FONT_SIZE, titleFontSize=FONT_SIZE)
        .configure_title(fontSize=TITLE_FONT_SIZE)
        .configure_view(stroke=None)
    )


def row_softmax(alt, chart, value, groupby, allowed="true"):
    """Vega transforms: ``weight`` = softmax of ``value`` over each group (masked -> 0)."""
    return (
        chart.transform_calculate(allowed=allowed)
        .transform_calculate(kept=f"datum.allowed ? {value} : null")
        .transform_window(row_max="max(kept)", frame=[None, None], groupby=groupby)
        .transform_calculate(e="datum.allowed ? exp(datum.kept - datum.row_max) : 0")
        .transform_window(row_sum="sum(e)", frame=[None, None], groupby=groupby)
        .transform_calculate(weight="datum.e / datum.row_sum")
    )
