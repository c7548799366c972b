"""Draw an encoder-decoder with one fixed vector beside one with attention.

    python scripts/diagrams/encoder_decoder.py [--out DIR]

writes ``encoder_decoder.svg`` into ``DIR`` (default ``book/_static/diagrams``);
chapters 1 and 2 show it. Both panels translate the same four English words
into three French ones (the two lengths need not match). In the top panel
the decoder sees only the encoder's last state; in the bottom panel the
decoder step that writes "pleut" reads a context vector built from all four
encoder states, with line widths that stand for its attention weights.

The output is deterministic (fixed hash salt, no date), has an opaque white
background (it reads in the site's dark theme too), and uses Okabe-Ito
colours, which colour-blind readers can tell apart; the parts also differ in
shape and line style, so the picture reads in greyscale.
"""

from _diagram import canvas, BLUE, FILL, GREEN, GREY, INK, ORANGE, VERMILLION, write_svg
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch

WIDTH, HEIGHT = 7.0, 5.2  # inches: fits the 7.2-inch text column
FONT = 10.5  # points, at the size the page shows


SOURCE = ["it", "is", "raining", "today"]  # K = 4 encoder states
TARGET = ["il", "pleut", "aujourd'hui"]  # T = 3 decoder steps
ENC_X = [0.85, 1.7, 2.55, 3.4]  # box centres, inches
DEC_X = [4.7, 5.55, 6.4]
BOX_W, BOX_H = 0.62, 0.42
WEIGHTS = [0.05, 0.45, 0.42, 0.08]  # alpha_2j, illustrative


def box(ax, x, y, label, colour):
    ax.add_patch(
        FancyBboxPatch(
            (x - BOX_W / 2, y - BOX_H / 2),
            BOX_W,
            BOX_H,
            boxstyle="round,pad=0.02,rounding_size=0.06",
            facecolor=FILL[colour],
            edgecolor=colour,
            linewidth=1.4,
        )
    )
    ax.text(x, y, label, ha="center", va="center", fontsize=FONT + 1, color=INK)


def arrow(ax, start, end, colour=INK, width=1.2, style="-|>", dashed=False, shrink=0.0):
    ax.add_patch(
        FancyArrowPatch(
            start,
            end,
            arrowstyle=style,
            mutation_scale=11,
            color=colour,
            linewidth=width,
            linestyle="--" if dashed else "-",
            shrinkA=shrink,
            shrinkB=shrink,
        )
    )


def chains(ax, y_enc, y_dec):
    """Encoder and decoder boxes, their recurrences, inputs and outputs."""
    for j, (x, word) in enumerate(zip(ENC_X, SOURCE), start=1):
        box(ax, x, y_enc, f"$h_{j}$", BLUE)
        ax.text(
            x, y_enc - 0.5, word, ha="center", va="center", fontsize=FONT, color=INK, style="italic"
        )
        arrow(ax, (x, y_enc - 0.38), (x, y_enc - BOX_H / 2 - 0.02), colour=GREY)
    for a, b in zip(ENC_X, ENC_X[1:]):
        arrow(ax, (a + BOX_W / 2, y_enc), (b - BOX_W / 2, y_enc), colour=BLUE)
    for i, (x, word) in enumerate(zip(DEC_X, TARGET), start=1):
        box(ax, x, y_dec, f"$s_{i}$", VERMILLION)
        ax.text(
            x, y_dec + 0.5, word, ha="center", va="center", fontsize=FONT, color=INK, style="italic"
        )
        arrow(ax, (x, y_dec + BOX_H / 2 + 0.02), (x, y_dec + 0.38), colour=GREY)
    for a, b in zip(DEC_X, DEC_X[1:]):
        arrow(ax, (a + BOX_W / 2, y_dec), (b - BOX_W / 2, y_dec), colour=VERMILLION)
    ax.text(
        ENC_X[0] - BOX_W / 2 - 0.08,
        y_enc,
        "encoder",
        ha="right",
        va="center",
        fontsize=FONT,
        color=BLUE,
        rotation=90,
    )
    ax.text(
        DEC_X[-1] + BOX_W / 2 + 0.08,
        y_dec,
        "decoder",
        ha="left",
        va="center",
        fontsize=FONT,
        color=VERMILLION,
        rotation=90,
    )


def fixed_vector_panel(ax, y0):
    """Top panel: only h_K reaches the decoder."""
    y_enc, y_dec = y0 + 0.7, y0 + 0.7
    ax.text(
        0.02,
        y0 + 1.62,
        "(a) One fixed vector: the decoder sees only the last encoder state",
        ha="left",
        va="center",
        fontsize=FONT + 0.5,
        color=INK,
        fontweight="bold",
    )
    chains(ax, y_enc, y_dec)
    start = (ENC_X[-1] + BOX_W / 2, y_enc)
    end = (DEC_X[0] - BOX_W / 2, y_dec)
    arrow(ax, start, end, colour=ORANGE, width=3.0)
    ax.text(
        (start[0] + end[0]) / 2,
        y_enc + 0.3,
        "$c = h_4$",
        ha="center",
        va="center",
        fontsize=FONT + 1,
        color=INK,
    )
    ax.text(
        (start[0] + end[0]) / 2,
        y_enc - 0.3,
        "fixed size",
        ha="center",
        va="center",
        fontsize=FONT - 1,
        color=GREY,
    )


def attention_panel(ax, y0):
    """Bottom panel: step 2 of the decoder attends over every encoder state."""
    y_enc, y_dec = y0 + 0.7, y0 + 2.45
    ax.text(
        0.02,
        y0 + 3.12,
        "(b) Attention: each decoder step reads all encoder states",
        ha="left",
        va="center",
        fontsize=FONT + 0.5,
        color=INK,
        fontweight="bold",
    )
    chains(ax, y_enc, y_dec)
    for i, x in enumerate(DEC_X, start=1):
        drawn = i == 2  # the weights are drawn for s_2
        y_c = y_dec - (0.85 if drawn else 0.5)  # context c_i, below s_i
        colour = GREEN if drawn else GREY
        ax.add_patch(
            Circle(
                (x, y_c),
                0.17,
                facecolor=FILL[GREEN] if drawn else "white",
                edgecolor=colour,
                linewidth=1.4,
                linestyle="-" if drawn else "--",
                zorder=3,
            )
        )
        ax.text(x, y_c, f"$c_{i}$", ha="center", va="center", fontsize=FONT, color=INK, zorder=4)
        arrow(ax, (x, y_c + 0.17), (x, y_dec - BOX_H / 2 - 0.01), colour=colour, width=1.4)
    y_c = y_dec - 0.85
    for x, w in zip(ENC_X, WEIGHTS):
        ax.add_patch(
            FancyArrowPatch(
                (x, y_enc + BOX_H / 2 + 0.02),
                (DEC_X[1], y_c),
                arrowstyle="-",
                color=GREEN,
                linewidth=0.6 + 9 * w,
                shrinkB=12,
                connectionstyle="arc3,rad=0",
            )
        )
    ax.text(
        1.75,
        y_c + 0.05,
        r"weights $\alpha_{2j}$" "\n(line width)",
        ha="center",
        va="center",
        fontsize=FONT - 0.5,
        color=GREEN,
        linespacing=1.2,
    )
    ax.text(
        DEC_X[1] + 0.3,
        y_c - 0.42,
        r"$c_2 = \sum_{j=1}^{4} \alpha_{2j} h_j$",
        ha="left",
        va="center",
        fontsize=FONT,
        color=INK,
    )


def draw():
    """The figure, on an opaque white page."""
    fig, ax = canvas(WIDTH, HEIGHT)
    fixed_vector_panel(ax, 3.4)
    ax.plot([0.05, WIDTH - 0.05], [3.4, 3.4], color="#bbbbbb", linewidth=0.8)
    attention_panel(ax, 0.0)
    return fig


def main(argv=None):
    write_svg(draw, "encoder_decoder", argv)


if __name__ == "__main__":
    main()
