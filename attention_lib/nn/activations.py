"""Activations: the GELU of GPT-2 and BERT (exact and tanh), and Llama's SiLU."""

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import erf, expit

from .._checks import as_float_input, as_output_grad

# Python floats, not NumPy scalars: a float64 scalar would promote float32
# activations to float64 (NEP 50) and halve the speed of float32 training.
_SQRT_2_OVER_PI = float(np.sqrt(2.0 / np.pi))
_SQRT_HALF = float(np.sqrt(0.5))
_INV_SQRT_2PI = float(1.0 / np.sqrt(2.0 * np.pi))


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
        self.cdf = 0.5 * (1.0 + erf(x * _SQRT_HALF))
        return x * self.cdf

    def backward(self, grad: ArrayLike) -> np.ndarray:
        grad = as_output_grad(grad, self, None if self.x is None else self.x.shape)
        x = self.x
        if self.approximate == "tanh":
            t = self.t
            du = _SQRT_2_OVER_PI * (1.0 + 3 * 0.044715 * (x * x))
            return grad * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t**2) * du)
        pdf = np.exp(-0.5 * (x * x)) * _INV_SQRT_2PI
        return grad * (self.cdf + x * pdf)


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
        self.x = as_float_input(x, "x")
        self.sigma = expit(self.x)
        return self.x * self.sigma

    def backward(self, grad: ArrayLike) -> np.ndarray:
        grad = as_output_grad(grad, self, None if self.x is None else self.x.shape)
        s = self.sigma
        return grad * (s * (1.0 + self.x * (1.0 - s)))
