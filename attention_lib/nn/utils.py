"""Training utilities that act on a list of layers."""

from collections.abc import Sequence

import numpy as np


def clip_grad_norm(layers: Sequence, max_norm: float, error_if_nonfinite: bool = False) -> float:
    """Scale every gradient down so that together they have norm at most ``max_norm``.

    Mirrors :func:`torch.nn.utils.clip_grad_norm_`: the norm is taken over
    all gradients of all layers as one long vector; if it exceeds
    ``max_norm`` every gradient is multiplied by
    ``max_norm / (norm + 1e-6)``, which keeps their direction. Recurrent
    networks need it: a gradient pushed back through many steps can blow up
    (Pascanu, Mikolov and Bengio, 2013).

    Parameters
    ----------
    layers : sequence
        Objects with a ``grads`` dict (the layers of :mod:`attention_lib.nn`).
    max_norm : float
        The largest norm allowed (positive).
    error_if_nonfinite : bool, optional
        Raise ``FloatingPointError`` if the total norm is NaN or infinite,
        before any gradient changes (PyTorch's ``error_if_nonfinite=True``).
        Default False: as in PyTorch, every gradient is then multiplied by
        ``max_norm / (norm + 1e-6)``, which is NaN (or 0 for an infinite
        norm), so the damage is visible in every parameter the optimiser
        touches next instead of passing unclipped.

    Returns
    -------
    float
        The total norm *before* clipping, as PyTorch returns it.

    Raises
    ------
    ValueError
        If ``max_norm`` is not a positive finite number, or the same
        gradient array appears twice (a layer listed twice, or a model with
        its own sub-layers): it would count twice and be scaled twice.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.nn import Linear, clip_grad_norm
    >>> layer = Linear(1, 1, np.random.default_rng(0))
    >>> layer.grads = {"W": np.array([[3.0]]), "b": np.array([4.0])}
    >>> clip_grad_norm([layer], 1.0)
    5.0
    >>> layer.grads["W"].round(4), layer.grads["b"].round(4)
    (array([[0.6]]), array([0.8]))
    """
    if isinstance(max_norm, (bool, np.bool_)) or not isinstance(
        max_norm, (int, float, np.integer, np.floating)
    ):
        raise TypeError(f"max_norm must be a real number, got {max_norm!r}")
    max_norm = float(max_norm)
    if not np.isfinite(max_norm) or max_norm <= 0:
        raise ValueError(f"max_norm must be a positive finite number, got {max_norm}")
    grads, seen = [], {}
    for i, layer in enumerate(layers):
        for name, g in layer.grads.items():
            if id(g) in seen:
                raise ValueError(
                    f"the gradient {name!r} of layer {i} ({type(layer).__name__}) is also "
                    f"{seen[id(g)]}: list each layer once (a model's layers() already "
                    f"holds its sub-layers)"
                )
            seen[id(g)] = f"{name!r} of layer {i}"
            grads.append(g)
    total = float(np.sqrt(sum(float(np.sum(np.square(g, dtype=np.float64))) for g in grads)))
    if not np.isfinite(total):
        if error_if_nonfinite:
            raise FloatingPointError(
                f"the total norm of the gradients is {total}: some gradient holds NaN "
                f"or infinity, so clipping cannot bound them"
            )
        for g in grads:  # PyTorch's default: the NaN (or 0) scale reaches every gradient
            with np.errstate(invalid="ignore"):
                g *= g.dtype.type(max_norm / (total + 1e-6))
        return total
    scale = max_norm / (total + 1e-6)
    if scale < 1:
        for g in grads:
            g *= g.dtype.type(scale)
    return total
