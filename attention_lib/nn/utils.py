"""Training utilities that act on a list of layers."""

import numpy as np


def clip_grad_norm(layers, max_norm):
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

    Returns
    -------
    float
        The total norm *before* clipping, as PyTorch returns it.

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
    max_norm = float(max_norm)
    if not np.isfinite(max_norm) or max_norm <= 0:
        raise ValueError(f"max_norm must be a positive finite number, got {max_norm}")
    grads = [g for layer in layers for g in layer.grads.values()]
    total = float(np.sqrt(sum(float(np.sum(np.square(g, dtype=np.float64))) for g in grads)))
    scale = max_norm / (total + 1e-6)
    if scale < 1:
        for g in grads:
            g *= g.dtype.type(scale)
    return total
