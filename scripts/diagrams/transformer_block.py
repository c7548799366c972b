"""Draw the decoder-only Transformer: a pre-LN block on its residual stream.

    python scripts/diagrams/transformer_block.py [--out DIR]

writes ``transformer_block.svg`` into ``DIR`` (default ``book/_static/diagrams``);
chapter 9 shows it. Read from the bottom: tokens become vectors (token
embedding plus position), which flow up a residual stream (the thick line);
each of the block's two halves reads the stream through a LayerNorm and adds
its result back at a circled plus: first masked multi-head self-attention,
then the feed-forward layer. Dropout sits where each branch rejoins the
stream (and, inside attention, on the weights). After n_layers blocks a final
LayerNorm and a linear layer give one score per vocabulary token.

Deterministic (fixed hash salt, no date), opaque white background, Okabe-Ito
colours; the two branches also differ in line style (solid, dashed), so the
picture reads in greyscale.
"""

from _diagram import canvas, BLUE, FILL, GREEN, GREY, INK, ORANGE, PURPLE, VERMILLION, write_svg
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch, Rectangle

WIDTH, HEIGHT = 6.4, 7.35  # inches: fits the 7.2-inch text column
FONT = 10.5  # points
STREAM_X = 1.6  # the residual stream
BRANCH_X = 4.0  # centre of the branch boxes
BOX_W, BOX_H = 3.0, 0.38
STEP = 0.55  # between the centres of a branch's boxes
FIRST = 0.42  # from a branch's start to its first box


def box(ax, x, y, label, colour, width=BOX_W, dashed=False):
    ax.add_patch(
        FancyBboxPatch(
            (x - width / 2, y - BOX_H / 2),
            width,
            BOX_H,
            boxstyle="round,pad=0.02,rounding_size=0.06",
            facecolor=FILL[colour],
            edgecolor=colour,
            linewidth=1.4,
            linestyle="--" if dashed else "-",
        )
    )
    ax.text(x, y, label, ha="center", va="center", fontsize=FONT, color=INK)


def arrow(ax, points, colour=INK, width=1.3, dashed=False):
    """A polyline through ``points`` with an arrowhead on its last segment."""
    for a, b in zip(points[:-2], points[1:-1]):
        ax.plot(
            [a[0], b[0]],
            [a[1], b[1]],
            color=colour,
            lw=width,
            ls="--" if dashed else "-",
            solid_capstyle="butt",
        )
    ax.add_patch(
        FancyArrowPatch(
            points[-2],
            points[-1],
            arrowstyle="-|>",
            mutation_scale=11,
            color=colour,
            linewidth=width,
            linestyle="--" if dashed else "-",
            shrinkA=0,
            shrinkB=0,
        )
    )


def plus(ax, y):
    ax.add_patch(Circle((STREAM_X, y), 0.13, facecolor="white", edgecolor=INK, lw=1.4))
    ax.text(STREAM_X, y - 0.01, "+", ha="center", va="center", fontsize=FONT + 3, color=INK)


def branch(ax, y0, boxes, colour, dashed, note):
    """A half of the block: LN, its layer(s), dropout, added back at y0 + top."""
    y_last = y0 + FIRST + STEP * (len(boxes) - 1) + BOX_H / 2
    y_top = y_last + 0.22
    arrow(
        ax,
        [(STREAM_X, y0), (BRANCH_X, y0), (BRANCH_X, y0 + FIRST - BOX_H / 2)],
        colour,
        dashed=dashed,
    )
    for i, (label, c) in enumerate(boxes):
        y = y0 + FIRST + STEP * i
        box(ax, BRANCH_X, y, label, c, dashed=dashed and c == colour)
        if i:
            arrow(
                ax,
                [(BRANCH_X, y - STEP + BOX_H / 2), (BRANCH_X, y - BOX_H / 2)],
                colour,
                dashed=dashed,
            )
    arrow(
        ax, [(BRANCH_X, y_last), (BRANCH_X, y_top), (STREAM_X + 0.13, y_top)], colour, dashed=dashed
    )
    plus(ax, y_top)
    ax.text(
        BRANCH_X + BOX_W / 2 + 0.12,
        y0 + FIRST + STEP * (len(boxes) - 1) / 2,
        note,
        ha="left",
        va="center",
        fontsize=FONT - 1,
        color=GREY,
        rotation=90,
    )
    return y_top


def draw():
    fig, ax = canvas(WIDTH, HEIGHT)
    # Inputs: tokens, embedding + position.
    ax.text(
        STREAM_X,
        0.2,
        "tokens $t_1 \\ldots t_T$",
        ha="center",
        va="center",
        fontsize=FONT,
        color=INK,
        style="italic",
    )
    box(ax, STREAM_X, 0.72, "token embedding + position", GREEN, width=2.7)
    arrow(ax, [(STREAM_X, 0.32), (STREAM_X, 0.72 - BOX_H / 2)])
    # The block, framed.
    y_in = 1.2
    y1 = branch(
        ax,
        y_in + 0.3,
        [("LayerNorm", ORANGE), ("masked multi-head attention", BLUE), ("dropout", PURPLE)],
        BLUE,
        False,
        "attention",
    )
    y2 = branch(
        ax,
        y1 + 0.35,
        [
            ("LayerNorm", ORANGE),
            ("feed-forward: Linear, GELU, Linear", VERMILLION),
            ("dropout", PURPLE),
        ],
        VERMILLION,
        True,
        "feed-forward",
    )
    ax.add_patch(
        Rectangle(
            (0.2, y_in),
            WIDTH - 0.4,
            y2 + 0.3 - y_in,
            facecolor="none",
            edgecolor=GREY,
            lw=1.0,
            ls=":",
        )
    )
    ax.text(0.3, y2 + 0.12, "block (x n_layers)", ha="left", va="center", fontsize=FONT, color=GREY)
    # The residual stream itself: a thick line from the embedding to the top.
    for a, b in ((0.72 + BOX_H / 2, y1 - 0.13), (y1 + 0.13, y2 - 0.13)):
        ax.plot([STREAM_X, STREAM_X], [a, b], color=INK, lw=3)
    ax.text(
        STREAM_X - 0.12,
        (y1 + y2) / 2,
        "residual stream",
        ha="right",
        va="center",
        fontsize=FONT - 1,
        color=INK,
        rotation=90,
    )
    # Output head.
    box(ax, STREAM_X, y2 + 0.7, "final LayerNorm", ORANGE, width=2.0)
    arrow(ax, [(STREAM_X, y2 + 0.13), (STREAM_X, y2 + 0.7 - BOX_H / 2)], width=2.2)
    box(ax, STREAM_X, y2 + 1.25, "Linear: a score per token", GREEN, width=2.7)
    arrow(ax, [(STREAM_X, y2 + 0.7 + BOX_H / 2), (STREAM_X, y2 + 1.25 - BOX_H / 2)])
    ax.text(
        STREAM_X + 1.5,
        y2 + 1.25,
        "logits (B, T, V)",
        ha="left",
        va="center",
        fontsize=FONT,
        color=INK,
        style="italic",
    )
    ax.text(
        STREAM_X + 1.5,
        0.72,
        "x: (B, T, d_model)",
        ha="left",
        va="center",
        fontsize=FONT,
        color=INK,
        style="italic",
    )
    return fig


def main(argv=None):
    write_svg(draw, "transformer_block", argv)


if __name__ == "__main__":
    main()
