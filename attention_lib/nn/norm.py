"""Layer normalisation, and its backward pass."""

import numpy as np
from numpy.typing import ArrayLike

from .._checks import as_features, as_int, as_output_grad


class _RowNorm:
    """Normalise each row over its last axis: the code LayerNorm and RMSNorm share.

    ``centre`` says whether the row's mean is subtracted first (LayerNorm, with
    a shift ``beta``) or not (RMSNorm); ``inv`` keeps ``1 / sigma`` (or ``1 / rms``).
    """

    def __init__(self, d: int, eps: float = 1e-5) -> None:
        d = as_int(d, "d", 1)
        if not eps > 0:
            raise ValueError(f"eps must be positive, got {eps!r}")
        self.eps = float(eps)
        self.params = (
            {"gamma": np.ones(d), "beta": np.zeros(d)} if self.centre else {"gamma": np.ones(d)}
        )
        self.grads = {}
        self.x_hat = self.inv = None

    def forward(self, x: ArrayLike) -> np.ndarray:
        d = self.params["gamma"].shape[0]
        x = as_features(x, d, type(self).__name__, "d")
        with np.errstate(over="ignore", invalid="ignore"):  # checked on the next line
            c = x - x.mean(axis=-1, keepdims=True) if self.centre else x
            mean_square = (c * c).mean(axis=-1, keepdims=True)
        if np.isfinite(mean_square).all():
            self.inv = 1.0 / np.sqrt(mean_square + self.eps)
            self.x_hat = c * self.inv
        else:  # a square overflowed (or x is not finite): see _scaled
            self.x_hat, self.inv = self._scaled(x)
        y = self.x_hat * self.params["gamma"]
        return y + self.params["beta"] if self.centre else y

    def _scaled(self, x):
        """``x_hat`` and ``1 / sigma`` for rows whose squares overflow.

        A float32 row of values near 2e19 has a finite mean and a finite
        normalised row, but its squares are infinite, and ``1 / sqrt(inf)``
        is 0: the layer would return ``beta`` and pass no gradient, hiding
        the diverging activation. Dividing each row by its largest magnitude
        first (for LayerNorm twice: before and after centring) keeps every
        square finite; the result is the same up to rounding, and a row that
        holds NaN or infinity still gives NaN. Only used when the direct
        route overflows, so ordinary inputs give exactly the same bits.
        """
        scale = _row_max(x)
        with np.errstate(invalid="ignore"):  # inf / inf: NaN, as it should be
            u = x / scale
        if self.centre:
            u = u - u.mean(axis=-1, keepdims=True)
            m = _row_max(u)
            u, scale = u / m, scale * m  # sigma = scale * sqrt(mean(u^2) + eps / scale^2)
        return _unit_rms(u, scale, self.eps)

    def backward(self, grad: np.ndarray) -> np.ndarray:
        grad = as_output_grad(grad, self, None if self.x_hat is None else self.x_hat.shape)
        x_hat, d = self.x_hat, self.x_hat.shape[-1]
        self.grads["gamma"] = (grad * x_hat).reshape(-1, d).sum(axis=0)
        if self.centre:
            self.grads["beta"] = grad.reshape(-1, d).sum(axis=0)
        h = grad * self.params["gamma"]
        along = (h * x_hat).mean(axis=-1, keepdims=True)  # the component along x_hat
        if self.centre:
            h = h - h.mean(axis=-1, keepdims=True)
        return self.inv * (h - x_hat * along)


class LayerNorm(_RowNorm):
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

    centre = True


class RMSNorm(_RowNorm):
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

    centre = False


def _row_max(a):
    """Each row's largest magnitude (1 for a row of zeros), in ``a``'s dtype."""
    m = np.max(np.abs(a), axis=-1, keepdims=True)
    return np.where(m > 0, m, 1).astype(a.dtype)


def _unit_rms(u, scale, eps):
    """``u / root`` and ``1 / (root * scale)``: ``root * scale`` is the RMS of ``u * scale``.

    ``u`` is a row divided by ``scale`` (its largest magnitude, or 1), so its squares
    cannot overflow; ``eps`` is divided by ``scale**2`` to match (it underflows to 0
    when ``scale**2`` would overflow, where it no longer matters).
    """
    with np.errstate(over="ignore"):
        tiny_eps = eps / np.square(scale.astype(np.float64))
    root = np.sqrt((u * u).mean(axis=-1, keepdims=True) + tiny_eps.astype(u.dtype))
    with np.errstate(over="ignore", under="ignore"):
        inv = (1.0 / root) / scale
    return u / root, inv
