"""What every diagram script shares: the palette and the deterministic SVG writer.

Not a diagram itself (tests/test_diagrams.py skips files starting with ``_``).
Each script draws one figure and ends with ``write_svg(draw, "<name>", argv)``,
which parses ``--out DIR`` and writes ``<DIR>/<name>.svg`` with no date and
fixed element ids, on an opaque white background (legible in dark mode too).
"""

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = ROOT / "book" / "_static" / "diagrams"

# Okabe-Ito colours, readable by colour-blind readers: dark outlines, light fills.
BLUE, VERMILLION, GREEN = "#0072B2", "#D55E00", "#009E73"
ORANGE, PURPLE = "#E69F00", "#CC79A7"
INK, GREY = "#111111", "#555555"
FILL = {
    BLUE: "#cfe3f1",
    VERMILLION: "#f6d5bf",
    GREEN: "#c4ebdf",
    ORANGE: "#fbe7bf",
    PURPLE: "#f2d9e7",
}


def canvas(width, height):
    """A white figure ``width`` x ``height`` inches whose axes are the page, in inches.

    Returns ``(fig, ax)``: ``ax`` fills the figure, has no frame or ticks, and one
    unit along either axis is one inch, so shapes drawn in it keep their size.
    """
    plt.rcParams["font.family"] = "DejaVu Sans"
    fig = plt.figure(figsize=(width, height), facecolor="white")
    ax = fig.add_axes([0, 0, 1, 1])
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.set_aspect("equal")
    ax.axis("off")
    return fig, ax


def write_svg(draw, name, argv=None):
    """Parse ``--out DIR``, call ``draw()`` and write its figure as ``name.svg``."""
    parser = argparse.ArgumentParser(description=f"Draw book/_static/diagrams/{name}.svg.")
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help=f"folder to write {name}.svg into (default: book/_static/diagrams)",
    )
    args = parser.parse_args(argv)
    plt.rcParams["svg.hashsalt"] = "attention-from-scratch"
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"{name}.svg"
    fig = draw()
    fig.savefig(path, format="svg", facecolor="white", metadata={"Date": None})
    plt.close(fig)
    print(f"wrote {path}")
    return path
