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


def _label_axes(ax, shape, row_labels, col_labels, xlabel, ylabel):
    if col_labels is not None:
        ax.set_xticks(np.arange(shape[1]), labels=list(col_labels), rotation=90)
    if row_labels is not None:
        ax.set_yticks(np.arange(shape[0]), labels=list(row_labels))
    ax.xaxis.tick_top()
    ax.xaxis.set_label_position("top")
    if xlabel:
        ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)


def plot_weights(weights, row_labels=None, col_labels=None, ax=None,
                 vmin=0.0, vmax=None, cmap="cividis", annotate=False,
                 fmt="{:.2f}", colorbar=True, xlabel="key", ylabel="query",
                 figsize=(5, 4)):
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
            ax.text(j, i, fmt.format(value), ha="center", va="center",
                    fontsize=8, color="black" if value > threshold else "white")
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return ax


def plot_mask(mask, row_labels=None, col_labels=None, ax=None, title=None,
              xlabel="key position j", ylabel="query position i",
              figsize=(3, 3)):
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
        raise ValueError(
            f"mask must be a 2-D boolean array, got {m.dtype} of shape {m.shape}")
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
