"""Layer normalisation, and its backward pass."""

import numpy as np

from .._checks import as_int


class LayerNorm:
    """Normalise each row to mean 0 and variance 1, then scale and shift.

    ``y = gamma * (x - mean(x)) / sqrt(var(x) + eps) + beta``, the mean and
    (biased) variance taken over the last axis of each row, as
    ``torch.nn.functional.layer_norm(x, (d,), weight=gamma, bias=beta)``.

    Parameters
    ----------
    d : int
        Size of the rows (the last axis).
    eps : float, optional
        Keeps the division finite for a constant row (default 1e-5).

    Notes
    -----
    With ``x_hat = (x - mean) / sigma`` and ``g = d loss / d y``:
    ``d gamma = sum of g * x_hat`` and ``d beta = sum of g`` over the rows;
    for the input, with ``h = g * gamma``::

        dx = (h - mean(h) - x_hat * mean(h * x_hat)) / sigma

    the means over the last axis. The two subtractions remove what the
    normalisation throws away: a shift of the row (its mean) and a change of
    its scale (the component along ``x_hat``).

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.nn import LayerNorm
    >>> y = LayerNorm(3).forward(np.array([[1.0, 2.0, 3.0]]))
    >>> print(y.round(4))
    [[-1.2247  0.      1.2247]]
    """

    def __init__(self, d, eps=1e-5):
        d = as_int(d, "d", 1)
        if not eps > 0:
            raise ValueError(f"eps must be positive, got {eps!r}")
        self.eps = float(eps)
        self.params = {"gamma": np.ones(d), "beta": np.zeros(d)}
        self.grads = {}

    def forward(self, x):
        d = self.params["gamma"].shape[0]
        if x.shape[-1] != d:
            raise ValueError(f"x has {x.shape[-1]} features but LayerNorm was "
                             f"built for d = {d}: the last axes must match")
        centred = x - x.mean(axis=-1, keepdims=True)
        self.inv_sigma = 1.0 / np.sqrt((centred**2).mean(axis=-1, keepdims=True)
                                       + self.eps)
        self.x_hat = centred * self.inv_sigma
        return self.x_hat * self.params["gamma"] + self.params["beta"]

    def backward(self, grad):
        x_hat, d = self.x_hat, self.x_hat.shape[-1]
        self.grads["gamma"] = (grad * x_hat).reshape(-1, d).sum(axis=0)
        self.grads["beta"] = grad.reshape(-1, d).sum(axis=0)
        h = grad * self.params["gamma"]
        return self.inv_sigma * (h - h.mean(axis=-1, keepdims=True)
                                 - x_hat * (h * x_hat).mean(axis=-1, keepdims=True))


class RMSNorm:
    """Divide each row by its root mean square, then scale: Llama's normalisation.

    ``y = gamma * x / sqrt(mean(x^2) + eps)``, the mean over the last axis,
    as ``torch.nn.RMSNorm(d, eps=eps)`` (Zhang and Sennrich, 2019). Unlike
    :class:`LayerNorm` it does not subtract the row's mean and has no
    ``beta``: it fixes the size of a row but not where it is centred, which
    costs one reduction less and, in practice, trains as well.

    Parameters
    ----------
    d : int
        Size of the rows (the last axis).
    eps : float, optional
        Keeps the division finite for a row of zeros (default 1e-5, Llama's
        and llama2.c's value).

    Notes
    -----
    With ``r = 1 / sqrt(mean(x^2) + eps)``, ``x_hat = r x`` and
    ``g = d loss / d y``: ``d gamma = sum of g * x_hat`` over the rows; for
    the input, with ``h = g * gamma``::

        dx = r (h - x_hat * mean(h * x_hat))

    the mean over the last axis: LayerNorm's formula without the ``mean(h)``
    term, because no mean was subtracted.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.nn import RMSNorm
    >>> y = RMSNorm(3).forward(np.array([[1.0, 2.0, 2.0]]))
    >>> print(y.round(4))                   # the row's root mean square is sqrt(3)
    [[0.5773 1.1547 1.1547]]
    """

    def __init__(self, d, eps=1e-5):
        d = as_int(d, "d", 1)
        if not eps > 0:
            raise ValueError(f"eps must be positive, got {eps!r}")
        self.eps = float(eps)
        self.params = {"gamma": np.ones(d)}
        self.grads = {}

    def forward(self, x):
        d = self.params["gamma"].shape[0]
        if x.shape[-1] != d:
            raise ValueError(f"x has {x.shape[-1]} features but RMSNorm was "
                             f"built for d = {d}: the last axes must match")
        self.r = 1.0 / np.sqrt((x * x).mean(axis=-1, keepdims=True) + self.eps)
        self.x_hat = x * self.r
        return self.x_hat * self.params["gamma"]

    def backward(self, grad):
        x_hat, d = self.x_hat, self.x_hat.shape[-1]
        self.grads["gamma"] = (grad * x_hat).reshape(-1, d).sum(axis=0)
        h = grad * self.params["gamma"]
        return self.r * (h - x_hat * (h * x_hat).mean(axis=-1, keepdims=True))
