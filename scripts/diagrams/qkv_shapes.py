"""Draw the QKV computation with the shape of every array (chapter 4).

    python scripts/diagrams/qkv_shapes.py [--out DIR]

writes ``qkv_shapes.svg`` into ``DIR`` (default ``book/_static/diagrams``).
Each array is drawn as a grid with one square per number, for L = 3
queries, S = 5 keys and values, d_k = 4 and d_v = 2, so every size can be
counted. One query row, one key column and the score they make are
outlined, to show that each score is one query compared with one key.

The output is deterministic (fixed hash salt, no date), has an opaque white
background (it reads in the site's dark theme too), and uses Okabe-Ito
colours, which colour-blind readers can tell apart; every colour is also
named in the text beside it.
"""

from _diagram import canvas, BLUE, FILL, GREEN, GREY, INK, ORANGE, PURPLE, write_svg
from matplotlib.patches import FancyArrowPatch, Rectangle

L, S, D_K, D_V = 3, 5, 4, 2
CELL = 0.27  # inches per array entry
WIDTH, HEIGHT = 6.9, 4.85  # inches: fits the 7.2-inch text column

FILL = {**FILL, GREY: "#e6e6e6"}  # each array is also named, not colour alone
FONT = 10.5  # points, at the size the page shows


def grid(ax, x, y_top, rows, cols, colour, name, shape, note=None):
    """An array as a grid of squares; its name above and its shape below."""
    for r in range(rows):
        for c in range(cols):
            ax.add_patch(
                Rectangle(
                    (x + c * CELL, y_top - (r + 1) * CELL),
                    CELL,
                    CELL,
                    facecolor=FILL[colour],
                    edgecolor=colour,
                    linewidth=0.8,
                )
            )
    centre = x + cols * CELL / 2
    ax.text(
        centre,
        y_top + 0.1,
        name,
        ha="center",
        va="bottom",
        fontsize=FONT + 1,
        color=INK,
        fontweight="bold",
    )
    ax.text(
        centre, y_top - rows * CELL - 0.08, shape, ha="center", va="top", fontsize=FONT, color=INK
    )
    if note:
        ax.text(
            centre,
            y_top - rows * CELL - 0.34,
            note,
            ha="center",
            va="top",
            fontsize=FONT - 1,
            color=GREY,
            style="italic",
        )
    return x + cols * CELL


def outline(ax, x, y_top, row, col, rows=1, cols=1):
    """A thick black frame around a block of entries."""
    ax.add_patch(
        Rectangle(
            (x + col * CELL, y_top - (row + rows) * CELL),
            cols * CELL,
            rows * CELL,
            fill=False,
            edgecolor=INK,
            linewidth=2.2,
        )
    )


def symbol(ax, x, y, text, size=FONT + 4):
    ax.text(x, y, text, ha="center", va="center", fontsize=size, color=INK)


def draw():
    fig, ax = canvas(WIDTH, HEIGHT)

    # Row 1: scores = Q K^T / sqrt(d_k)
    top = HEIGHT - 0.75  # top of the tallest array in row 1 (K^T)
    ax.text(
        0.05,
        HEIGHT - 0.08,
        "1   score every key against every query",
        ha="left",
        va="top",
        fontsize=FONT + 1,
        color=INK,
        fontweight="bold",
    )
    mid = top - D_K * CELL / 2
    q_top = mid + L * CELL / 2
    x_q = 0.45
    end = grid(ax, x_q, q_top, L, D_K, BLUE, "Q", r"$L \times d_k$", "one row per query")
    outline(ax, x_q, q_top, 1, 0, cols=D_K)
    symbol(ax, end + 0.35, mid, r"$\times$")
    x_k = end + 0.7
    end = grid(
        ax, x_k, top, D_K, S, ORANGE, r"$\mathbf{K}^\top$", r"$d_k \times S$", "one column per key"
    )
    outline(ax, x_k, top, 0, 3, rows=D_K)
    symbol(ax, end + 0.5, mid, r"$/\sqrt{d_k}$", size=FONT + 2)
    symbol(ax, end + 1.05, mid, "=")
    x_s = end + 1.4
    grid(ax, x_s, q_top, L, S, GREY, "scores", r"$L \times S$", r"$e_{ij}$: query $i$, key $j$")
    outline(ax, x_s, q_top, 1, 3)

    # Row 2: A = softmax(scores) over each row; output = A V
    top2 = HEIGHT - 3.0  # top of the tallest array in row 2 (V)
    ax.text(
        0.05,
        HEIGHT - 2.4,
        "2   weigh the values and blend them",
        ha="left",
        va="top",
        fontsize=FONT + 1,
        color=INK,
        fontweight="bold",
    )
    mid2 = top2 - S * CELL / 2
    a_top = mid2 + L * CELL / 2
    ax.text(
        0.45,
        mid2,
        "softmax of\neach row of\nthe scores",
        ha="left",
        va="center",
        fontsize=FONT,
        color=INK,
        linespacing=1.3,
    )
    x_a = 1.85
    ax.add_patch(
        FancyArrowPatch(
            (x_a - 0.42, mid2), (x_a - 0.08, mid2), arrowstyle="-|>", mutation_scale=12, color=INK
        )
    )
    end = grid(ax, x_a, a_top, L, S, PURPLE, "A", r"$L \times S$", "each row sums to 1")
    outline(ax, x_a, a_top, 1, 0, cols=S)
    symbol(ax, end + 0.35, mid2, r"$\times$")
    x_v = end + 0.7
    end = grid(ax, x_v, top2, S, D_V, GREEN, "V", r"$S \times d_v$", "one row per key")
    symbol(ax, end + 0.5, mid2, "=")
    x_o = end + 1.05
    grid(
        ax, x_o, a_top, L, D_V, GREEN, "O (output)", r"$L \times d_v$", "row i blends the rows of V"
    )
    outline(ax, x_o, a_top, 1, 0, cols=D_V)
    return fig


def main(argv=None):
    write_svg(draw, "qkv_shapes", argv)


if __name__ == "__main__":
    main()
