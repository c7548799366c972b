"""Activations: the GELU of GPT-2 and BERT (exact and tanh), and Llama's SiLU."""

import numpy as np
from numpy.typing import ArrayLike

from .._checks import as_float_input, as_output_grad

# Python floats, not NumPy scalars: a float64 scalar would promote float32
# activations to float64 (NEP 50) and halve the speed of float32 training.
_SQRT_2_OVER_PI = float(np.sqrt(2.0 / np.pi))
_SQRT_HALF = float(np.sqrt(0.5))
_INV_SQRT_2PI = float(1.0 / np.sqrt(2.0 * np.pi))

# float32 Phi(x) = 1 - Q(|x|) or Q(|x|), with the upper tail Q(z) = erfc(z / sqrt 2) / 2
# written as t exp(P(t) - z^2 / 2), t = 1 / (1 + z / (2 sqrt 2)): the Chebyshev fit of
# Press et al., Numerical Recipes, 2nd ed., section 6.2 (fractional error < 1.2e-7), with
# ln(1/2) folded into P's constant term. scipy's erf calls a scalar double-precision
# routine per element, which makes it about 25 times slower than np.exp on float32.
_TAIL_P = np.float32(
    [-1.26551223 - np.log(2.0), 1.00002368, 0.37409196, 0.09678418, -0.18628806]
    + [0.27886807, -1.13520398, 1.48851587, -0.82215223, 0.17087277]
)
_CHUNK = 1 << 14  # elements per pass: three float32 buffers stay in the L2 cache


def _chunks(*arrays):
    """Matching cache-sized slices of the flattened ``arrays`` (all of one size)."""
    flat = [a.reshape(-1) for a in arrays]
    for start in range(0, flat[0].size, _CHUNK):
        yield [a[start : start + _CHUNK] for a in flat]


def _normal_cdf_float32(x: np.ndarray) -> np.ndarray:
    """``Phi(x)`` for float32 ``x``, elementwise; relative error below 1e-6 for |x| < 4.

    Unlike ``(1 + erf(x / sqrt 2)) / 2`` in float32, small values in the lower tail
    keep their relative accuracy (no ``1 + erf`` cancellation).
    """
    out = np.empty(x.shape, np.float32)  # C order, so that its chunks are views
    t, p, h = (np.empty(min(x.size, _CHUNK), np.float32) for _ in range(3))
    one, half = np.float32(1.0), np.float32(0.5)
    for xs, o in _chunks(x, out):
        t_, p_, h_ = t[: xs.size], p[: xs.size], h[: xs.size]
        np.abs(xs, out=t_)
        t_ *= np.float32(0.5 * _SQRT_HALF)
        t_ += one
        np.reciprocal(t_, out=t_)
        np.multiply(t_, _TAIL_P[-1], out=p_)
        for c in _TAIL_P[-2:0:-1]:  # Horner's rule
            p_ += c
            p_ *= t_
        p_ += _TAIL_P[0]
        np.multiply(xs, xs, out=h_)
        h_ *= half
        p_ -= h_
        np.exp(p_, out=p_)
        p_ *= t_  # Q(|x|)
        np.multiply(p_, np.float32(-2.0), out=o)
        o += one
        np.greater(xs, 0, out=h_, casting="unsafe")  # 1 where x > 0, else 0
        o *= h_
        o += p_  # Q(|x|) + [x > 0] (1 - 2 Q(|x|))
    return out


class GELU:
    """Gaussian error linear unit: ``x Phi(x)``, ``Phi`` the normal CDF.

    A smooth ReLU: large positive inputs pass, large negative ones give 0,
    and near 0 the input is scaled by the probability that a standard normal
    variable lies below it (Hendrycks and Gimpel, 2016).

    Parameters
    ----------
    approximate : {"none", "tanh"}, optional
        ``"none"`` (default): ``Phi(x) = (1 + erf(x / sqrt 2)) / 2``.
        ``"tanh"``: GPT-2's approximation
        ``(1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) / 2``. The two match
        ``torch.nn.GELU(approximate=...)``.

    Notes
    -----
    No parameters (``params`` is empty). The derivative of ``x Phi(x)`` is
    ``Phi(x) + x phi(x)``, ``phi`` the normal density; for the tanh form,
    with ``u = sqrt(2/pi) (x + 0.044715 x^3)`` and ``t = tanh u``, it is
    ``(1 + t) / 2 + x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2) / 2``.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.nn import GELU
    >>> print(GELU().forward(np.array([-3.0, 0.0, 1.0, 3.0])).round(4))
    [-0.004   0.      0.8413  2.996 ]
    """

    def __init__(self, approximate: str = "none") -> None:
        if approximate not in ("none", "tanh"):
            raise ValueError(f'approximate must be "none" or "tanh", got {approximate!r}')
        self.approximate = approximate
        self.params, self.grads = {}, {}
        self.x = None

    def forward(self, x: ArrayLike) -> np.ndarray:
        x = self.x = as_float_input(x, "x")
        if self.approximate == "tanh":
            self.t = np.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * (x * x * x)))
            return 0.5 * x * (1.0 + self.t)
        if x.dtype == np.float32:
            self.cdf = _normal_cdf_float32(x)
        else:
            from scipy.special import erf  # here: SciPy's import is slow

            self.cdf = 0.5 * (1.0 + erf(x * _SQRT_HALF))
        return x * self.cdf

    def backward(self, grad: ArrayLike) -> np.ndarray:
        grad = as_output_grad(grad, self, None if self.x is None else self.x.shape)
        x = self.x
        if self.approximate == "tanh":
            t = self.t
            du = _SQRT_2_OVER_PI * (1.0 + 3 * 0.044715 * (x * x))
            return grad * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t**2) * du)
        if x.dtype != np.float32 or grad.dtype != np.float32:
            pdf = np.exp(-0.5 * (x * x)) * _INV_SQRT_2PI
            return grad * (self.cdf + x * pdf)
        out = np.empty(x.shape, np.float32)
        for xs, cdf, g, o in _chunks(x, self.cdf, grad, out):  # grad (cdf + x pdf)
            np.multiply(xs, xs, out=o)
            o *= np.float32(-0.5)
            np.exp(o, out=o)
            o *= xs
            o *= np.float32(_INV_SQRT_2PI)
            o += cdf
            o *= g
        return out


class SiLU:
    """Sigmoid linear unit (swish): ``x sigma(x)``, ``sigma`` the logistic sigmoid.

    Like GELU, a smooth ReLU, with the logistic function in place of the
    normal CDF (Elfwing et al., 2018; Ramachandran et al., 2017). Llama's
    feed-forward layer uses it as a gate (:class:`~attention_lib.nn.SwiGLU`).
    Matches ``torch.nn.functional.silu``.

    Notes
    -----
    No parameters. The derivative of ``x sigma(x)`` is
    ``sigma(x) (1 + x (1 - sigma(x)))``. ``sigma`` is ``scipy.special.expit``,
    which neither overflows for large negative ``x`` nor changes float32 to
    float64.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.nn import SiLU
    >>> print(SiLU().forward(np.array([-3.0, 0.0, 1.0, 3.0])).round(4))
    [-0.1423  0.      0.7311  2.8577]
    """

    def __init__(self):
        self.params, self.grads = {}, {}
        self.x = self.sigma = None

    def forward(self, x: ArrayLike) -> np.ndarray:
        from scipy.special import expit  # here: SciPy's import is slow

        self.x = as_float_input(x, "x")
        self.sigma = expit(self.x)
        return self.x * self.sigma

    def backward(self, grad: ArrayLike) -> np.ndarray:
        grad = as_output_grad(grad, self, None if self.x is None else self.x.shape)
        s = self.sigma
        return grad * (s * (1.0 + self.x * (1.0 - s)))
