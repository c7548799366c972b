"""Draw the shape of every array through a multi-head attention layer.

    python scripts/diagrams/multi_head_shapes.py [--out DIR]

writes ``multi_head_shapes.svg`` into ``DIR`` (default
``book/_static/diagrams``); chapter 6 shows it. From top to bottom: the
inputs, their three learned projections, the split into ``H`` heads of
``d = E / H`` features (a reshape and a transpose, drawn as a stack of
``H`` cards), the ``(N, H, L, S)`` weights, the heads' outputs, their
concatenation and the output projection. Shapes follow PyTorch's
``batch_first=True`` layout and the book's symbols.

The output is deterministic (fixed hash salt, no date), has an opaque white
background (it reads in the site's dark theme too), and uses Okabe-Ito
colours; queries, keys and values also differ in their outline's line
style, so the picture reads in greyscale.
"""

from _diagram import canvas, BLUE, FILL, GREEN, GREY, INK, VERMILLION, write_svg
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

WIDTH, HEIGHT = 7.0, 7.0  # inches: fits the 7.2-inch text column
FONT = 10.5  # points, at the size the page shows

FILL = {**FILL, GREY: "#ececec"}
STYLE = {BLUE: "-", VERMILLION: "--", GREEN: "-.", GREY: "-"}  # not colour alone

COLS = {"q": 1.0, "k": 2.95, "v": 4.9}  # column centres, inches
BOX_W, BOX_H = 1.7, 0.46


def box(ax, x, y, label, colour, stack=0, width=BOX_W):
    """A rounded box; ``stack`` > 0 draws that many cards behind it (heads)."""
    for s in range(stack, -1, -1):
        dx = dy = 0.07 * s
        ax.add_patch(
            FancyBboxPatch(
                (x - width / 2 + dx, y - BOX_H / 2 + dy),
                width,
                BOX_H,
                boxstyle="round,pad=0.02,rounding_size=0.06",
                facecolor=FILL[colour],
                edgecolor=colour,
                linewidth=1.3,
                linestyle=STYLE[colour],
                zorder=2 + stack - s,
            )
        )
    ax.text(x, y, label, ha="center", va="center", fontsize=FONT, color=INK, zorder=10)


def arrow(ax, start, end, colour=INK):
    ax.add_patch(
        FancyArrowPatch(
            start, end, arrowstyle="-|>", mutation_scale=11, color=colour, linewidth=1.2, zorder=1
        )
    )


def note(ax, x, y, text, ha="left", colour=GREY):
    ax.text(x, y, text, ha=ha, va="center", fontsize=FONT - 0.5, color=colour)


def draw():
    """The figure, on an opaque white page."""
    fig, ax = canvas(WIDTH, HEIGHT)
    top, gap = BOX_H / 2 + 0.03, BOX_H / 2 + 0.12
    colours = {"q": BLUE, "k": VERMILLION, "v": GREEN}

    # 1. Inputs and 2. their projections.
    y_in, y_proj, y_heads = 6.35, 5.2, 4.0
    inputs = {"q": "query (N, L, E)", "k": "key (N, S, E)", "v": "value (N, S, E)"}
    projected = {
        "q": "Q = X W$_Q$  (N, L, E)",
        "k": "K = X W$_K$  (N, S, E)",
        "v": "V = X W$_V$  (N, S, E)",
    }
    split = {"q": "Q  (N, H, L, d)", "k": "K  (N, H, S, d)", "v": "V  (N, H, S, d)"}
    for name, x in COLS.items():
        c = colours[name]
        box(ax, x, y_in, inputs[name], GREY)
        arrow(ax, (x, y_in - top), (x, y_proj + gap), c)
        box(ax, x, y_proj, projected[name], c, width=BOX_W + 0.1)
        arrow(ax, (x, y_proj - top), (x, y_heads + gap + 0.14), c)
        box(ax, x, y_heads, split[name], c, stack=3)
    note(
        ax,
        COLS["v"] + 1.1,
        (y_in + y_proj) / 2 + 0.02,
        "learned\n$E \\times E$\nmatrices",
        ha="left",
    )
    note(
        ax,
        COLS["v"] + 1.1,
        (y_proj + y_heads) / 2 + 0.05,
        "reshape to\n(N, L, H, d),\ntranspose",
        ha="left",
    )
    note(
        ax,
        0.1,
        6.82,
        "self-attention: query = key = value = X, S = L;   d = E / H",
        ha="left",
        colour=INK,
    )

    # 3. Scores and weights from Q and K, one L x S map per head.
    y_w, y_out = 2.8, 1.75
    x_w = (COLS["q"] + COLS["k"]) / 2
    arrow(ax, (COLS["q"], y_heads - top), (x_w - 0.4, y_w + gap + 0.14), BLUE)
    arrow(ax, (COLS["k"], y_heads - top), (x_w + 0.4, y_w + gap + 0.14), VERMILLION)
    box(ax, x_w, y_w, "A  (N, H, L, S)", GREY, stack=3, width=2.0)
    note(ax, x_w + 1.2, y_w - 0.1, r"A = softmax$(Q K^\top / \sqrt{d} + M)$", ha="left", colour=INK)

    # 4. Each head's output, A V.
    x_o = COLS["k"]
    arrow(ax, (x_w, y_w - top), (x_o - 0.35, y_out + gap + 0.14))
    arrow(ax, (COLS["v"], y_heads - top), (x_o + 0.45, y_out + gap + 0.14), GREEN)
    box(ax, x_o, y_out, "heads = A V  (N, H, L, d)", GREY, stack=3, width=2.4)

    # 5. Concatenate the heads, 6. project.
    y_cat, y_final = 0.8, 0.25
    arrow(ax, (x_o, y_out - top), (x_o, y_cat + BOX_H / 2 + 0.04))
    note(
        ax,
        x_o + 0.15,
        (y_out + y_cat) / 2 - 0.03,
        "transpose, reshape: concatenate the H heads",
        ha="left",
    )
    ax.text(
        x_o, y_cat, "concat  (N, L, H d = E)", ha="center", va="center", fontsize=FONT, color=INK
    )
    ax.text(
        x_o,
        y_final,
        r"output = concat W$_O$  (N, L, E)",
        ha="center",
        va="center",
        fontsize=FONT,
        color=INK,
        fontweight="bold",
    )
    arrow(ax, (x_o, y_cat - 0.15), (x_o, y_final + 0.15))
    return fig


def main(argv=None):
    write_svg(draw, "multi_head_shapes", argv)


if __name__ == "__main__":
    main()
