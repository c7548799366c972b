"""Llama's feed-forward layer: a SiLU-gated linear unit (SwiGLU)."""

import numpy as np
from numpy.random import Generator
from numpy.typing import ArrayLike

from .._checks import as_features, as_int, as_output_grad
from .activations import SiLU
from .layers import init_weight, sum_to_matrix


class SwiGLU:
    """``y = (SiLU(x W1) * (x W3)) W2``: a feed-forward layer with a gate.

    GPT-2's feed-forward layer is ``GELU(x W1 + b1) W2 + b2``. Llama's has a
    second input matrix ``W3``: each of the ``d_ff`` hidden units is the
    product of a *gate* ``SiLU(x W1)`` and a plain linear unit ``x W3``, so
    the layer can switch a feature on or off by how much of it there is
    (Shazeer, 2020, "GLU variants improve Transformer"; his ``W``, ``V``,
    ``W2`` are ``W1``, ``W3``, ``W2`` here, as in Llama's code). No biases.
    With three matrices instead of two, Llama takes ``d_ff`` about ``8/3 E``
    instead of ``4 E``, to keep the parameter count.

    Parameters
    ----------
    d_model, d_ff : int
        Size of the rows (``E``) and number of hidden units.
    rng : numpy.random.Generator
        Draws the weights with variance ``1 / n_in``.

    Notes
    -----
    With ``a = x W1``, ``u = x W3``, ``s = SiLU(a)``, ``z = s * u`` and
    ``g = d loss / d y``: ``dW2 = z^T g`` and ``dz = g W2^T``; the product
    sends ``dz * u`` to the gate and ``dz * s`` to ``u``, so
    ``da = dz * u * SiLU'(a)``, ``dW1 = x^T da``, ``dW3 = x^T (dz * s)`` and
    ``dx = da W1^T + (dz * s) W3^T`` (sums over the batch).

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.nn import SwiGLU
    >>> ffn = SwiGLU(8, 24, np.random.default_rng(0))
    >>> ffn.forward(np.ones((2, 5, 8))).shape, sorted(ffn.params)
    ((2, 5, 8), ['W1', 'W2', 'W3'])
    """

    def __init__(self, d_model: int, d_ff: int, rng: Generator) -> None:
        d_model, d_ff = as_int(d_model, "d_model", 1), as_int(d_ff, "d_ff", 1)
        self.params = {
            "W1": init_weight(rng, d_model, d_ff),
            "W3": init_weight(rng, d_model, d_ff),
            "W2": init_weight(rng, d_ff, d_model),
        }
        self.grads = {}
        self.silu = SiLU()
        self.x = None

    def forward(self, x: ArrayLike) -> np.ndarray:
        d = self.params["W1"].shape[0]
        x = as_features(x, d, "SwiGLU", "d_model")
        self.x = x
        self.u = x @ self.params["W3"]
        self.s = self.silu.forward(x @ self.params["W1"])
        self.z = self.s * self.u
        return self.z @ self.params["W2"]

    def backward(self, grad: np.ndarray) -> np.ndarray:
        grad = as_output_grad(grad, self, None if self.x is None else self.x.shape)
        p = self.params
        self.grads["W2"] = sum_to_matrix(self.z, grad)
        dz = grad @ p["W2"].T
        du = dz * self.s
        da = self.silu.backward(dz * self.u)
        self.grads["W1"] = sum_to_matrix(self.x, da)
        self.grads["W3"] = sum_to_matrix(self.x, du)
        return da @ p["W1"].T + du @ p["W3"].T
