"""Draw the three kinds of attention with their masks (chapter 5).

    python scripts/diagrams/three_kinds.py [--out DIR]

writes ``three_kinds.svg`` into ``DIR`` (default ``book/_static/diagrams``).
One column per kind: encoder-decoder (cross) attention, causal
self-attention and bidirectional self-attention. Each column shows where the
queries and the keys come from (a row of keys above a row of queries), the
keys one query may look at (arrows from query 2), and the mask that says so:
an L x S grid whose dark cells with a dot may attend and whose light cells
are masked, the same picture ``attention_lib.presentation.plotting.plot_mask`` draws.
The row of query 2 is framed in the mask, so the arrows and the mask can be
read against each other.

The output is deterministic (fixed hash salt, no date), has an opaque white
background (it reads in the site's dark theme too), and uses Okabe-Ito
colours, which colour-blind readers can tell apart; no information is carried
by colour alone (sequences are also named, allowed cells also carry a dot).
"""

from _diagram import BLUE, FILL, GREEN, INK, ORANGE, canvas, write_svg
import numpy as np
from matplotlib.patches import FancyArrowPatch, Rectangle

WIDTH, HEIGHT = 7.0, 5.2  # inches: fits the 7.2-inch text column
COLUMN = WIDTH / 3
FONT = 10  # points, at the size the page shows
CELL = 0.3  # inches per mask cell
TOKEN = 0.3  # inches per token box
QUERY = 2  # the query whose arrows and mask row are drawn

FADED = "#9a9a9a"
ALLOWED, MASKED = "#3a3a3a", "#ececec"

KINDS = [
    # title, keys (name, colour, count), queries (name, colour, count), mask,
    # mask caption, typical use
    (
        "Encoder-decoder\n(cross) attention",
        ("encoder: keys, values", BLUE, 5),
        ("decoder: queries", ORANGE, 4),
        np.ones((4, 5), dtype=bool),
        "all allowed, L × S",
        "translation",
    ),
    (
        "Causal\nself-attention",
        ("sequence: keys, values", GREEN, 5),
        ("same sequence: queries", GREEN, 5),
        np.tril(np.ones((5, 5), dtype=bool)),
        "lower triangle, L × L",
        "generating text (GPT)",
    ),
    (
        "Bidirectional\nself-attention",
        ("sequence: keys, values", GREEN, 5),
        ("same sequence: queries", GREEN, 5),
        np.ones((5, 5), dtype=bool),
        "all allowed, L × L",
        "reading a text (BERT)",
    ),
]


def tokens(ax, centre, y, count, colour, label, label_above):
    """A row of ``count`` token boxes centred on ``centre``; returns their x."""
    xs = centre + (np.arange(count) - (count - 1) / 2) * (TOKEN + 0.06)
    for i, x in enumerate(xs):
        ax.add_patch(
            Rectangle(
                (x - TOKEN / 2, y - TOKEN / 2),
                TOKEN,
                TOKEN,
                facecolor=FILL[colour],
                edgecolor=colour,
                linewidth=1.2,
            )
        )
        ax.text(x, y, str(i), ha="center", va="center", fontsize=FONT - 1, color=INK)
    dy = TOKEN / 2 + 0.06
    ax.text(
        centre,
        y + dy if label_above else y - dy,
        label,
        ha="center",
        va="bottom" if label_above else "top",
        fontsize=FONT - 1,
        color=INK,
    )
    return xs


def mask_grid(ax, centre, y_top, mask):
    """The mask as a grid: dark cells with a dot may attend, light are masked."""
    rows, cols = mask.shape
    x0 = centre - cols * CELL / 2
    for i in range(rows):
        for j in range(cols):
            x, y = x0 + j * CELL, y_top - (i + 1) * CELL
            ax.add_patch(
                Rectangle(
                    (x, y),
                    CELL,
                    CELL,
                    linewidth=0.8,
                    facecolor=ALLOWED if mask[i, j] else MASKED,
                    edgecolor="#bdbdbd",
                )
            )
            if mask[i, j]:
                ax.plot(x + CELL / 2, y + CELL / 2, "o", color="white", markersize=3.2)
    ax.add_patch(
        Rectangle(
            (x0, y_top - (QUERY + 1) * CELL),
            cols * CELL,
            CELL,
            fill=False,
            edgecolor=INK,
            linewidth=2.2,
        )
    )
    for i in range(rows):  # query index beside each row
        ax.text(
            x0 - 0.06,
            y_top - (i + 0.5) * CELL,
            str(i),
            ha="right",
            va="center",
            fontsize=FONT - 1,
            color=INK,
            fontweight="bold" if i == QUERY else "normal",
        )
    for j in range(cols):  # key index above each column
        ax.text(
            x0 + (j + 0.5) * CELL,
            y_top + 0.04,
            str(j),
            ha="center",
            va="bottom",
            fontsize=FONT - 1,
            color=INK,
        )
    ax.text(centre, y_top + 0.26, "key j", ha="center", va="bottom", fontsize=FONT - 1, color=INK)
    ax.text(
        x0 - 0.3,
        y_top - rows * CELL / 2,
        "query i",
        ha="center",
        va="center",
        rotation=90,
        fontsize=FONT - 1,
        color=INK,
    )


def draw():
    fig, ax = canvas(WIDTH, HEIGHT)

    for c, (title, keys, queries, mask, mask_caption, use) in enumerate(KINDS):
        centre = (c + 0.5) * COLUMN
        ax.text(
            centre,
            HEIGHT - 0.08,
            title,
            ha="center",
            va="top",
            fontsize=FONT + 1,
            fontweight="bold",
            color=INK,
            linespacing=1.25,
        )
        # Where keys and queries come from; arrows from query QUERY.
        y_keys, y_queries = HEIGHT - 1.15, HEIGHT - 2.1
        kx = tokens(ax, centre, y_keys, keys[2], keys[1], keys[0], True)
        qx = tokens(ax, centre, y_queries, queries[2], queries[1], queries[0], False)
        for j, x in enumerate(kx):
            allowed = mask[QUERY, j]
            ax.add_patch(
                FancyArrowPatch(
                    (qx[QUERY], y_queries + TOKEN / 2),
                    (x, y_keys - TOKEN / 2),
                    arrowstyle="-|>",
                    mutation_scale=9,
                    shrinkA=1,
                    shrinkB=1,
                    color=INK if allowed else FADED,
                    linewidth=1.3,
                    linestyle="-" if allowed else (0, (2, 2)),
                )
            )
        # The mask, with the row of query QUERY framed.
        mask_grid(ax, centre + 0.12, HEIGHT - 3.1, mask)
        bottom = HEIGHT - 3.1 - 5 * CELL  # below the tallest mask
        ax.text(
            centre, bottom - 0.1, mask_caption, ha="center", va="top", fontsize=FONT - 1, color=INK
        )
        ax.text(
            centre,
            bottom - 0.38,
            f"e.g. {use}",
            ha="center",
            va="top",
            fontsize=FONT - 1,
            color="#555555",
            style="italic",
        )
    for c in (1, 2):  # thin rules between the columns
        ax.plot([c * COLUMN, c * COLUMN], [0.1, HEIGHT - 0.1], color="#d0d0d0", linewidth=0.8)
    return fig


def main(argv=None):
    write_svg(draw, "three_kinds", argv)


if __name__ == "__main__":
    main()
