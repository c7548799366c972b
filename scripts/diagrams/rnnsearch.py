"""Draw RNNsearch: a bidirectional encoder, and one decoder step that attends over it.

    python scripts/diagrams/rnnsearch.py [--out DIR]

writes ``rnnsearch.svg`` into ``DIR`` (default ``book/_static/diagrams``);
chapter 3 shows it. Bottom: the source words, a forward GRU (left to right)
and a backward GRU (right to left) whose states are stacked into
``h_j = [h->_j ; h<-_j]``. Top: one decoder step, ``s_{i-1} -> s_i``, with the
three inputs of the update ``s_i = f(s_{i-1}, y_{i-1}, c_i)`` and the context
``c_i`` made from every ``h_j`` by the attention weights ``alpha_ij`` (line
widths). Shapes are written beside each array. RNNencdec is the same picture
with ``c_i`` replaced by the two final states (dashed).
"""

from _diagram import BLUE, FILL, GREEN, GREY, INK, ORANGE, VERMILLION, canvas, write_svg
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch

WIDTH, HEIGHT = 7.0, 4.85
FONT = 10.5
SOURCE = ["the", "black", "cat", "sleeps"]
XS = [0.9, 2.0, 3.1, 4.2]
WEIGHTS = [0.04, 0.10, 0.80, 0.06]  # illustrative: writing "chat" reads "cat"
BOX_W, BOX_H = 0.6, 0.36


def box(ax, x, y, label, colour, w=BOX_W, h=BOX_H, dashed=False):
    ax.add_patch(
        FancyBboxPatch(
            (x - w / 2, y - h / 2),
            w,
            h,
            boxstyle="round,pad=0.02,rounding_size=0.06",
            facecolor=FILL[colour],
            edgecolor=colour,
            linewidth=1.4,
            linestyle="--" if dashed else "-",
        )
    )
    ax.text(x, y, label, ha="center", va="center", fontsize=FONT, color=INK)


def arrow(ax, start, end, colour=INK, width=1.2, dashed=False, rad=0.0, shrink=0):
    ax.add_patch(
        FancyArrowPatch(
            start,
            end,
            arrowstyle="-|>",
            mutation_scale=10,
            color=colour,
            linewidth=width,
            linestyle="--" if dashed else "-",
            shrinkA=shrink,
            shrinkB=shrink,
            connectionstyle=f"arc3,rad={rad}",
        )
    )


def encoder(ax):
    y_fwd, y_bwd, y_h = 0.85, 1.45, 2.15
    for j, (x, word) in enumerate(zip(XS, SOURCE), start=1):
        ax.text(x, 0.3, word, ha="center", va="center", fontsize=FONT, style="italic")
        arrow(ax, (x, 0.45), (x, y_fwd - BOX_H / 2), colour=GREY)
        box(ax, x, y_fwd, rf"$\overrightarrow{{h}}_{j}$", BLUE)
        box(ax, x, y_bwd, rf"$\overleftarrow{{h}}_{j}$", ORANGE)
        box(ax, x, y_h, f"$h_{j}$", GREEN, w=0.7)
        arrow(ax, (x, y_fwd + BOX_H / 2), (x, y_bwd - BOX_H / 2), colour=GREY)
        arrow(ax, (x, y_bwd + BOX_H / 2), (x, y_h - BOX_H / 2), colour=GREY)
    for a, b in zip(XS, XS[1:]):
        arrow(ax, (a + BOX_W / 2, y_fwd), (b - BOX_W / 2, y_fwd), colour=BLUE)
        arrow(ax, (b - BOX_W / 2, y_bwd), (a + BOX_W / 2, y_bwd), colour=ORANGE, dashed=True)
    ax.text(
        XS[-1] + 0.45,
        y_fwd,
        "forward GRU  (B, K, n)",
        ha="left",
        va="center",
        fontsize=FONT - 1,
        color=BLUE,
    )
    ax.text(
        XS[-1] + 0.45,
        y_bwd,
        "backward GRU  (B, K, n)",
        ha="left",
        va="center",
        fontsize=FONT - 1,
        color=ORANGE,
    )
    ax.text(
        XS[-1] + 0.45,
        y_h,
        r"$h_j = [\overrightarrow{h}_j ; \overleftarrow{h}_j]$"
        "  (B, K, 2n)",
        ha="left",
        va="center",
        fontsize=FONT - 1,
        color=INK,
    )
    return y_h


def decoder(ax, y_h):
    y_s, y_c = 4.0, 3.2
    x_prev, x_new, x_c = 1.3, 4.1, 2.7
    box(ax, x_prev, y_s, "$s_{i-1}$", VERMILLION, w=0.75)
    box(ax, x_new, y_s, "$s_i$", VERMILLION, w=0.75)
    arrow(ax, (x_prev + 0.4, y_s), (x_new - 0.4, y_s), colour=VERMILLION, width=1.6)
    ax.text(
        (x_prev + x_new) / 2,
        y_s + 0.2,
        "GRU",
        ha="center",
        va="bottom",
        fontsize=FONT - 1,
        color=VERMILLION,
    )
    ax.text(x_prev - 0.45, y_s, "(B, n)", ha="right", va="center", fontsize=FONT - 1, color=GREY)
    ax.add_patch(Circle((x_c, y_c), 0.2, facecolor=FILL[GREEN], edgecolor=GREEN, linewidth=1.4))
    ax.text(x_c, y_c, "$c_i$", ha="center", va="center", fontsize=FONT)
    ax.text(x_c - 0.3, y_c, "(B, 2n)", ha="right", va="center", fontsize=FONT - 1, color=GREY)
    arrow(ax, (x_c + 0.18, y_c + 0.1), (x_new - 0.2, y_s - BOX_H / 2), colour=GREEN, width=1.4)
    arrow(ax, (x_prev + 0.1, y_s - BOX_H / 2), (x_c - 0.12, y_c + 0.16), colour=GREY, dashed=True)
    ax.text(
        x_prev - 0.05,
        y_c + 0.25,
        "scores\n$e_{ij}$",
        ha="right",
        va="center",
        fontsize=FONT - 1.5,
        color=GREY,
        linespacing=1.1,
    )
    for x, w in zip(XS, WEIGHTS):
        ax.add_patch(
            FancyArrowPatch(
                (x, y_h + BOX_H / 2),
                (x_c, y_c - 0.2),
                arrowstyle="-",
                color=GREEN,
                linewidth=0.5 + 7 * w,
            )
        )
    ax.text(
        3.55,
        2.75,
        r"$\alpha_{ij}$ (line width)",
        ha="left",
        va="center",
        fontsize=FONT - 1,
        color=GREEN,
    )
    ax.text(x_new + 0.2, y_s - 0.55, "$y_{i-1}$", ha="center", va="center", fontsize=FONT)
    arrow(ax, (x_new + 0.2, y_s - 0.42), (x_new + 0.15, y_s - BOX_H / 2), colour=GREY)
    arrow(ax, (x_new + 0.4, y_s), (x_new + 0.95, y_s), colour=GREY)
    ax.text(
        x_new + 1.0,
        y_s,
        r"$p(y_i)$ from $[s_i ; c_i ; y_{i-1}]$",
        ha="left",
        va="center",
        fontsize=FONT - 1,
    )
    ax.text(
        0.05,
        HEIGHT - 0.12,
        r"decoder step $i$:  $s_i = f(s_{i-1}, y_{i-1}, c_i)$,"
        r"  $c_i = \sum_j \alpha_{ij} h_j$",
        ha="left",
        va="top",
        fontsize=FONT,
        color=INK,
    )


def draw():
    fig, ax = canvas(WIDTH, HEIGHT)
    decoder(ax, encoder(ax))
    return fig


def main(argv=None):
    write_svg(draw, "rnnsearch", argv)


if __name__ == "__main__":
    main()
