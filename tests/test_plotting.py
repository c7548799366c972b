"""plotting: marks and hatching drawn where they belong, and bad arguments refused."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from attention_lib.presentation.plotting import hatch_masked, mark_cells, plot_weights  # noqa: E402


@pytest.fixture
def ax():
    axes = plot_weights(np.full((3, 4), 0.25))
    yield axes
    plt.close(axes.figure)


@pytest.mark.parametrize("style", ["square", "dot", "cross"])
def test_mark_cells_puts_one_mark_at_each_cell_column_first(ax, style):
    cells = [(0, 3), (2, 1)]  # (row, column)
    marks = mark_cells(ax, cells, style=style, label="gold")
    assert marks.get_offsets().tolist() == [[3.0, 0.0], [1.0, 2.0]]  # (x, y)
    assert marks.get_label() == "gold"


def test_mark_cells_styles_differ_in_shape_not_only_colour(ax):
    paths = [mark_cells(ax, [(0, 0)], style=s).get_paths()[0] for s in ("square", "dot", "cross")]
    vertex_counts = {len(p.vertices) for p in paths}
    assert len(vertex_counts) == 3


def test_mark_cells_accepts_no_cells(ax):
    assert len(mark_cells(ax, []).get_offsets()) == 0


@pytest.mark.parametrize(
    "cells, style, message",
    [
        ([(0, 0)], "star", "style must be one of square, dot, cross, got 'star'"),
        ([(0.5, 1)], "square", r"cells must be \(row, column\) pairs of integers"),
        ([(0, 1, 2)], "dot", r"cells must be \(row, column\) pairs of integers"),
    ],
)
def test_mark_cells_rejects_bad_arguments(ax, cells, style, message):
    with pytest.raises(ValueError, match=message):
        mark_cells(ax, cells, style=style)


def test_hatch_masked_covers_exactly_the_masked_cells(ax):
    mask = np.ones((3, 4), dtype=bool)
    mask[:, 2] = False  # an unknown key word
    mask[1, :] = False  # an unknown query word
    before = len(ax.patches)
    assert hatch_masked(ax, mask) == int((~mask).sum())
    corners = sorted(p.get_xy() for p in ax.patches[before:] if isinstance(p, Rectangle))
    expected = sorted((j - 0.5, i - 0.5) for i, j in zip(*np.nonzero(~mask)))
    assert corners == expected


def test_hatch_masked_labels_the_legend_once(ax):
    hatch_masked(ax, np.zeros((3, 4), dtype=bool), label="unknown word")
    labels = [p.get_label() for p in ax.patches]
    assert labels.count("unknown word") == 1


def test_hatch_masked_needs_a_boolean_matrix(ax):
    with pytest.raises(
        ValueError, match=r"mask must be a 2-D boolean array, got int64 of shape \(3,\)"
    ):
        hatch_masked(ax, np.array([1, 0, 1], dtype=np.int64))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(row_labels=["a", "b"]), "row_labels has 2 entries but the matrix has 3 rows"),
        (dict(col_labels=list("abcde")), "col_labels has 5 entries but the matrix has 4 columns"),
    ],
)
def test_plot_weights_names_labels_of_the_wrong_length(kwargs, message):
    # matplotlib's own message speaks of a FixedLocator, not of the labels
    with pytest.raises(ValueError, match=message):
        plot_weights(np.full((3, 4), 0.25), **kwargs)
    plt.close("all")


def test_hatch_masked_refuses_a_mask_of_another_shape_than_the_heat_map(ax):
    with pytest.raises(ValueError, match=r"mask has shape \(4, 3\) but the heat map"):
        hatch_masked(ax, np.ones((4, 3), dtype=bool))


@pytest.mark.parametrize("cell", [(3, 0), (0, 4), (-1, 0)])
def test_mark_cells_refuses_cells_outside_the_heat_map(ax, cell):
    with pytest.raises(ValueError, match=r"outside the heat map of shape \(3, 4\)"):
        mark_cells(ax, [(0, 0), cell])


def _png_text_chunks(data):
    import struct

    chunks, pos = {}, 8
    while pos + 8 <= len(data):
        length, tag = struct.unpack(">I4s", data[pos : pos + 8])
        if tag == b"tEXt":
            key, _, value = data[pos + 8 : pos + 8 + length].partition(b"\0")
            chunks[key.decode("latin-1")] = value.decode("latin-1")
        pos += 12 + length
    return chunks


def test_smallest_font_size_counts_only_drawn_text():
    from attention_lib.presentation.plotting import smallest_font_size

    fig, (left, right) = plt.subplots(1, 2)
    left.set_title("title", fontsize=14)
    left.tick_params(labelsize=11)
    right.axis("off")  # its tick labels are not drawn
    right.tick_params(labelsize=3)
    hidden = left.text(0, 0, "hidden", fontsize=2)
    hidden.set_visible(False)
    left.text(0, 0, "   ", fontsize=1)  # nothing to read
    assert smallest_font_size(fig) == 11
    left.text(0.5, 0.5, "note", fontsize=6.5)
    assert smallest_font_size(fig) == 6.5
    plt.close(fig)
    empty = plt.figure()
    assert smallest_font_size(empty) is None
    plt.close(empty)


def test_retina_pngs_record_their_smallest_text_in_image_pixels():
    pytest.importorskip("IPython")
    from functools import partial

    from IPython.core.pylabtools import retina_figure

    from attention_lib.presentation.plotting import PNG_SMALLEST_TEXT_KEY, _record_smallest_text

    fig, ax = plt.subplots(figsize=(3, 2), dpi=100)
    ax.tick_params(labelsize=9)
    ax.text(0.5, 0.5, "note", fontsize=7.2)
    png = _record_smallest_text(partial(retina_figure, base64=False))
    data, size = png(fig)
    plt.close(fig)
    # 7.2 pt at 200 dots per inch (a retina PNG of a 100-dpi figure) is 20 px
    assert _png_text_chunks(data)[PNG_SMALLEST_TEXT_KEY] == "20.0"
    assert size["width"] * 2 == struct_width(data)


def struct_width(data):
    import struct

    return struct.unpack(">I", data[16:20])[0]
