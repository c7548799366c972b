"""Pictures of attention: weight matrices and masks.

Every chapter draws the same two kinds of picture, so they are drawn one way:
rows are queries (the thing doing the attending), columns are keys. The
default colour map, ``cividis``, is readable in greyscale and by readers with
colour-vision deficiencies, and the colour scale starts at 0 so that a pale
cell really is a small weight (``imshow`` would otherwise stretch whatever
range the data has over the full colour map).

matplotlib is imported lazily, so the numerical modules never need it.
"""

import numpy as np


def _axes(ax, figsize):
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    return ax


def _labels(labels, n, name, what):
    """``labels`` as a list of ``n`` entries, or a ``ValueError`` naming them."""
    labels = list(labels)
    if len(labels) != n:
        raise ValueError(
            f"{name} has {len(labels)} entries but the matrix has {n} {what}: "
            f"give one label per {what[:-1]}"
        )
    return labels


def _label_axes(ax, shape, row_labels, col_labels, xlabel, ylabel):
    if col_labels is not None:
        col_labels = _labels(col_labels, shape[1], "col_labels", "columns")
        ax.set_xticks(np.arange(shape[1]), labels=col_labels, rotation=90)
    if row_labels is not None:
        row_labels = _labels(row_labels, shape[0], "row_labels", "rows")
        ax.set_yticks(np.arange(shape[0]), labels=row_labels)
    ax.xaxis.tick_top()
    ax.xaxis.set_label_position("top")
    if xlabel:
        ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)


def plot_weights(
    weights,
    row_labels=None,
    col_labels=None,
    ax=None,
    vmin=0.0,
    vmax=None,
    cmap="cividis",
    annotate=False,
    fmt="{:.2f}",
    colorbar=True,
    xlabel="key",
    ylabel="query",
    figsize=(5, 4),
):
    """Draw a weight (or score) matrix as a labelled heat map.

    Parameters
    ----------
    weights : array_like, shape (L, S)
        One row per query, one column per key.
    row_labels, col_labels : sequence of str, optional
        Tick labels for the queries (rows) and keys (columns).
    ax : matplotlib Axes, optional
        Where to draw; a new figure is made if omitted.
    vmin, vmax : float, optional
        The colour scale. ``vmin`` defaults to 0 so colours are honest about
        small weights; ``vmax=None`` uses the largest value. Pass ``vmax=1``
        to compare weights on an absolute scale.
    cmap : str, optional
        A perceptually uniform, greyscale-safe colour map (default cividis).
    annotate : bool, optional
        Write each value in its cell with ``fmt``.
    colorbar : bool, optional
        Add a colour bar.
    xlabel, ylabel : str, optional
        Axis titles.

    Returns
    -------
    matplotlib.axes.Axes
    """
    w = np.asarray(weights, dtype=float)
    if w.ndim != 2:
        raise ValueError(f"weights must be 2-D (L, S), got shape {w.shape}")
    ax = _axes(ax, figsize)
    image = ax.imshow(w, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    _label_axes(ax, w.shape, row_labels, col_labels, xlabel, ylabel)
    if annotate:
        threshold = (image.norm.vmin + image.norm.vmax) / 2
        for (i, j), value in np.ndenumerate(w):
            colour = "black" if value > threshold else "white"
            ax.text(j, i, fmt.format(value), ha="center", va="center", fontsize=8, color=colour)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return ax


def plot_mask(
    mask,
    row_labels=None,
    col_labels=None,
    ax=None,
    title=None,
    xlabel="key position j",
    ylabel="query position i",
    figsize=(3, 3),
):
    """Draw a boolean mask: dark cells may attend, light cells are masked.

    Each cell is also marked with a symbol (a filled dot for "may attend"),
    so the picture does not rely on colour at all.

    Parameters
    ----------
    mask : array_like of bool, shape (L, S)
        ``True`` where query ``i`` may attend to key ``j``.
    row_labels, col_labels : sequence of str, optional
        Tick labels; positions ``0, 1, ...`` by default.
    ax : matplotlib Axes, optional
        Where to draw.
    title : str, optional
        Title above the picture.

    Returns
    -------
    matplotlib.axes.Axes
    """
    m = np.asarray(mask)
    if m.ndim != 2 or m.dtype != bool:
        raise ValueError(f"mask must be a 2-D boolean array, got {m.dtype} of shape {m.shape}")
    ax = _axes(ax, figsize)
    ax.imshow(m, cmap="Greys", vmin=-0.3, vmax=1.3, aspect="equal")
    rows = row_labels if row_labels is not None else range(m.shape[0])
    cols = col_labels if col_labels is not None else range(m.shape[1])
    _label_axes(ax, m.shape, rows, cols, xlabel, ylabel)
    i, j = np.nonzero(m)
    ax.scatter(j, i, s=18, color="white", marker="o")
    ax.set_xticks(np.arange(m.shape[1]) - 0.5, minor=True)
    ax.set_yticks(np.arange(m.shape[0]) - 0.5, minor=True)
    ax.grid(which="minor", color="0.6", linewidth=0.5)
    ax.tick_params(which="minor", length=0)
    if title:
        ax.set_title(title, pad=24 if col_labels is not None else 18)
    return ax


#: Each style of :func:`mark_cells`: its marker, default area (points squared) and colours.
_MARKERS = {
    "square": ("s", 150, {"facecolors": "none", "edgecolors": "white"}),
    "dot": ("o", 30, {"facecolors": "none", "edgecolors": "white"}),
    "cross": ("x", 40, {"color": "white"}),
}


def _heat_map_shape(ax):
    """The ``(L, S)`` shape of the last heat map drawn on ``ax`` (None if none)."""
    images = ax.get_images()
    return images[-1].get_array().shape[:2] if images else None


def mark_cells(ax, cells, style="square", label=None, size=None):
    """Mark cells of a heat map, e.g. the gold links of a word alignment.

    Each mark is drawn white with a black outline, so it stays visible on
    both ends of any colour map and in greyscale; the three styles differ in
    shape, not colour.

    Parameters
    ----------
    ax : matplotlib Axes
        An Axes holding a heat map drawn by :func:`plot_weights`.
    cells : iterable of (int, int)
        ``(row, column)`` of each cell to mark. For an alignment drawn with
        French queries as rows, an English-French link ``(i, j)`` is the
        cell ``(j, i)``.
    style : {"square", "dot", "cross"}, optional
        ``square``: a hollow square around the cell (e.g. Sure links);
        ``dot``: a small hollow circle (e.g. Possible links); ``cross``: an
        x (e.g. predicted links).
    label : str, optional
        Legend entry for these marks.
    size : float, optional
        Marker area in points squared; a style-dependent default otherwise.

    Returns
    -------
    matplotlib.collections.PathCollection
        The marks (empty if ``cells`` is empty).

    Raises
    ------
    ValueError
        If ``style`` is unknown, a cell is not a pair of integers, or a cell
        lies outside the heat map already on ``ax``.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from attention_lib.presentation.plotting import plot_weights, mark_cells
    >>> ax = plot_weights([[0.9, 0.1], [0.2, 0.8]])
    >>> marks = mark_cells(ax, [(0, 0), (1, 1)], style="square", label="gold")
    >>> marks.get_offsets().tolist()     # (x, y) = (column, row)
    [[0.0, 0.0], [1.0, 1.0]]
    """
    import matplotlib.patheffects as pe

    if style not in _MARKERS:
        raise ValueError(f"style must be one of {', '.join(_MARKERS)}, got {style!r}")
    cells = [tuple(c) for c in cells]
    if any(len(c) != 2 or not all(isinstance(v, (int, np.integer)) for v in c) for c in cells):
        raise ValueError("cells must be (row, column) pairs of integers")
    shape = _heat_map_shape(ax)
    outside = [
        c
        for c in cells
        if shape is not None and not (0 <= c[0] < shape[0] and 0 <= c[1] < shape[1])
    ]
    if outside:
        raise ValueError(
            f"cells {outside[:3]} lie outside the heat map of shape {shape} "
            f"on ax: each cell is (row, column) with 0 <= row < {shape[0]} "
            f"and 0 <= column < {shape[1]}"
        )
    rows = np.array([c[0] for c in cells], dtype=float)
    cols = np.array([c[1] for c in cells], dtype=float)
    marker, default_size, colours = _MARKERS[style]
    return ax.scatter(
        cols,
        rows,
        s=size or default_size,
        marker=marker,
        linewidths=1.5,
        label=label,
        path_effects=[pe.withStroke(linewidth=3, foreground="black")],
        **colours,
    )


def hatch_masked(ax, mask, label="masked"):
    """Hatch the cells of a heat map where ``mask`` is False.

    Masked cells get zero weight and would otherwise look like small
    weights; the hatching says "not computed" instead.

    Parameters
    ----------
    ax : matplotlib Axes
        An Axes holding a heat map of the same shape as ``mask``.
    mask : array_like of bool, shape (L, S)
        ``True`` where attention was allowed (the library's convention).
    label : str, optional
        Legend entry for the hatching (used once, however many cells).

    Returns
    -------
    int
        The number of cells hatched.

    Raises
    ------
    ValueError
        If ``mask`` is not a 2-D boolean array, or not of the shape of the
        heat map already on ``ax``.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np
    >>> from attention_lib.presentation.plotting import plot_weights, hatch_masked
    >>> ax = plot_weights([[0.5, 0.5], [1.0, 0.0]])
    >>> hatch_masked(ax, np.array([[True, True], [True, False]]))
    1
    """
    from matplotlib.patches import Rectangle

    m = np.asarray(mask)
    if m.ndim != 2 or m.dtype != bool:
        raise ValueError(f"mask must be a 2-D boolean array, got {m.dtype} of shape {m.shape}")
    shape = _heat_map_shape(ax)
    if shape is not None and m.shape != shape:
        raise ValueError(
            f"mask has shape {m.shape} but the heat map on ax has shape "
            f"{shape}: the mask must cover the heat map cell for cell"
        )
    masked = list(zip(*np.nonzero(~m)))
    hatching = dict(fill=False, hatch="////", edgecolor="0.75", linewidth=0)
    for n, (i, j) in enumerate(masked):
        ax.add_patch(
            Rectangle((j - 0.5, i - 0.5), 1, 1, label=label if n == 0 else None, **hatching)
        )
    return len(masked)


#: Widest figure, in inches, that fits the book's text column at the
#: figure resolution below (100 dpi: one inch is 100 CSS pixels on the page).
COLUMN_WIDTH_IN = 7.2

#: The PNG text chunk in which a figure records the height of its smallest text,
#: in image pixels; scripts/browser_check.py reads it to check that every figure
#: stays readable on a phone, where it is shown smaller (or enlarged on a tap).
PNG_SMALLEST_TEXT_KEY = "Smallest text px"

#: The PNG text chunk in which a figure records every text it draws, one per
#: line; ``tests/test_notation.py`` reads it to check the figures' symbols.
PNG_DRAWN_TEXT_KEY = "Drawn text"


def _drawn_texts(fig):
    """``(text, font size)`` of every visible, non-empty text the figure draws."""
    from matplotlib.axes import Axes
    from matplotlib.axis import Axis
    from matplotlib.text import Text

    fig.draw_without_rendering()  # tick labels get their text when drawn
    found = []

    def walk(artist):
        if not artist.get_visible():
            return
        if isinstance(artist, Text) and artist.get_text().strip():
            found.append((artist.get_text(), float(artist.get_fontsize())))
        for child in artist.get_children():
            if not (isinstance(artist, Axes) and isinstance(child, Axis) and not artist.axison):
                walk(child)

    walk(fig)
    return found


def drawn_text(fig):
    """Every text a figure draws (titles, labels, ticks, legends, annotations), in order.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> fig, ax = plt.subplots()
    >>> _ = ax.axis("off")
    >>> _ = ax.text(0.5, 0.5, "$y_{i-1}$")
    >>> drawn_text(fig)
    ['$y_{i-1}$']
    >>> plt.close(fig)
    """
    return [text for text, _ in _drawn_texts(fig)]


def smallest_font_size(fig):
    """The size, in points, of the smallest text a figure draws (None if it has none).

    Only what is drawn counts: visible text that is not empty, and no tick
    labels of an axis that is switched off.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> fig, ax = plt.subplots()
    >>> _ = ax.set_xticks([0, 1], labels=["a", "b"], fontsize=12)
    >>> _ = ax.set_yticks([])
    >>> _ = ax.text(0.5, 0.5, "small", fontsize=7)
    >>> smallest_font_size(fig)
    7.0
    >>> plt.close(fig)
    """
    sizes = [size for _, size in _drawn_texts(fig)]
    return min(sizes) if sizes else None


def _record_smallest_text(png_formatter):
    """Wrap IPython's PNG formatter so that each PNG records its smallest text.

    The value is the font size in image pixels (points / 72 x the PNG's dots
    per inch: twice the figure's for a retina PNG), in the text chunk
    :data:`PNG_SMALLEST_TEXT_KEY`, and every text it draws in
    :data:`PNG_DRAWN_TEXT_KEY`.
    """
    from IPython.core.pylabtools import retina_figure

    keywords = getattr(png_formatter, "keywords", {})
    retina = getattr(png_formatter, "func", None) is retina_figure

    def png(fig):
        texts = _drawn_texts(fig)
        if not texts:
            return png_formatter(fig)
        size = min(size for _, size in texts)
        dpi = keywords.get("dpi") or fig.dpi * (2 if retina else 1)
        metadata = {
            PNG_SMALLEST_TEXT_KEY: f"{size * dpi / 72:.1f}",
            PNG_DRAWN_TEXT_KEY: "\n".join(" ".join(text.split()) for text, _ in texts),
        }
        return png_formatter(fig, metadata=metadata)

    return png


def use_book_style():
    """Draw figures as the book prints them: sharp, and sized for its column.

    Sets matplotlib to 100 dots per inch, 10-point text, a default size that
    fits the text column (at most :data:`COLUMN_WIDTH_IN` inches wide) and
    constrained layout; in a Jupyter kernel, figures are also sent as
    ``retina`` PNGs (twice the pixels, shown at half size), so they stay sharp
    on HiDPI screens, and each PNG records the size of its smallest text
    (:data:`PNG_SMALLEST_TEXT_KEY`, :func:`smallest_font_size`). Call it once,
    after the imports of a chapter.

    Examples
    --------
    >>> import matplotlib
    >>> use_book_style()
    >>> matplotlib.rcParams["figure.dpi"]
    100.0
    """
    import matplotlib
    import matplotlib.pyplot as plt  # noqa: F401  (sets up the inline backend first)

    matplotlib.rcParams.update(
        {
            "figure.dpi": 100,
            "figure.figsize": (6.4, 3.6),
            "figure.constrained_layout.use": True,
            "font.size": 10,
            "axes.titlesize": 11,
            "axes.labelsize": 10,
            "legend.fontsize": 9,
            "xtick.labelsize": 9,
            "ytick.labelsize": 9,
        }
    )
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython is always there in the book
        return
    shell = get_ipython()
    if shell is not None:
        from matplotlib.figure import Figure
        from matplotlib_inline.backend_inline import set_matplotlib_formats

        set_matplotlib_formats("retina")
        formatter = shell.display_formatter.formatters["image/png"]
        formatter.for_type(Figure, _record_smallest_text(formatter.lookup_by_type(Figure)))
