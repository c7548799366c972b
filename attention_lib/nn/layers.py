"""Layers with parameters: the affine map and the embedding lookup.

See :mod:`attention_lib.nn` for the protocol every layer follows
(``params``, ``grads``, ``forward``, ``backward``).
"""

import numpy as np
from numpy.random import Generator
from numpy.typing import ArrayLike

from .._checks import as_float_input, as_int, as_numeric, as_rng, require_forward


def sum_to_matrix(x: np.ndarray, grad: np.ndarray) -> np.ndarray:
    """``sum over batch of x_b^T grad_b``: the gradient of a shared weight."""
    return x.reshape(-1, x.shape[-1]).T @ grad.reshape(-1, grad.shape[-1])


def init_weight(rng: Generator, n_in: int, n_out: int) -> np.ndarray:
    """Weights drawn with variance ``1 / n_in`` (LeCun), so outputs start O(1)."""
    return rng.normal(scale=1.0 / np.sqrt(n_in), size=(n_in, n_out))


class Linear:
    """An affine map ``y = x W + b``.

    Parameters
    ----------
    n_in, n_out : int
        Sizes of the input and output rows.
    rng : numpy.random.Generator
        Draws ``W`` with variance ``1 / n_in``; ``b`` starts at zero.
    bias : bool, optional
        Include ``b`` (default True).

    Notes
    -----
    With ``g = d loss / d y``: ``dW = x^T g`` (summed over the batch),
    ``db = sum of the rows of g``, ``dx = g W^T``.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.nn import Linear
    >>> layer = Linear(3, 2, np.random.default_rng(0))
    >>> x = np.ones((4, 3))
    >>> layer.forward(x).shape
    (4, 2)
    >>> layer.backward(np.ones((4, 2))).shape, layer.grads["b"]
    ((4, 3), array([4., 4.]))
    """

    def __init__(self, n_in: int, n_out: int, rng: Generator, bias: bool = True) -> None:
        n_in, n_out = as_int(n_in, "n_in", 1), as_int(n_out, "n_out", 1)
        self.params = {"W": init_weight(as_rng(rng), n_in, n_out)}
        if bias:
            self.params["b"] = np.zeros(n_out)
        self.grads = {}
        self.x = None

    def forward(self, x: ArrayLike) -> np.ndarray:
        x = as_float_input(x, "x")
        n_in = self.params["W"].shape[0]
        if x.ndim == 0 or x.shape[-1] != n_in:
            got = f"{x.shape[-1]} features" if x.ndim else "no axes (a scalar)"
            raise ValueError(
                f"x has {got} but the layer expects {n_in}: x must have shape (..., {n_in})"
            )
        self.x = x
        W = self.params["W"]
        if x.ndim > 2:  # (B, T, E): one (B T, E) product, not a stack of B (T, E) ones
            y = (x.reshape(-1, n_in) @ W).reshape(x.shape[:-1] + W.shape[1:])
        else:
            y = x @ W
        return y + self.params["b"] if "b" in self.params else y

    def backward(self, grad: np.ndarray) -> np.ndarray:
        require_forward(self.x, self)
        grad = as_float_input(grad, "grad")
        want = self.x.shape[:-1] + (self.params["W"].shape[1],)
        if grad.shape != want:
            raise ValueError(
                f"grad must have the shape of forward's output {want}, got {grad.shape}"
            )
        self.grads["W"] = sum_to_matrix(self.x, grad)
        if "b" in self.params:
            self.grads["b"] = grad.reshape(-1, grad.shape[-1]).sum(axis=0)
        return grad @ self.params["W"].T


class Embedding:
    """A lookup table: token ``t`` becomes row ``t`` of ``E``.

    Parameters
    ----------
    n_tokens, d : int
        Vocabulary size and vector size.
    rng : numpy.random.Generator
        Draws ``E`` from a standard normal distribution.

    Notes
    -----
    The lookup is a product with a one-hot matrix, so its gradient adds each
    row of ``g = d loss / d output`` into the row of its token:
    ``np.add.at(dE, tokens, g)`` (a token used twice receives both rows).

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.nn import Embedding
    >>> emb = Embedding(5, 2, np.random.default_rng(0))
    >>> tokens = np.array([[1, 3, 1]])
    >>> emb.forward(tokens).shape
    (1, 3, 2)
    >>> emb.backward(np.ones((1, 3, 2)))
    >>> emb.grads["E"][:, 0]
    array([0., 2., 0., 1., 0.])
    """

    def __init__(self, n_tokens: int, d: int, rng: Generator) -> None:
        n_tokens, d = as_int(n_tokens, "n_tokens", 1), as_int(d, "d", 1)
        self.params = {"E": as_rng(rng).normal(size=(n_tokens, d))}
        self.grads = {}
        self.tokens = None

    def forward(self, tokens: ArrayLike) -> np.ndarray:
        tokens = as_numeric(tokens, "tokens")
        n = self.params["E"].shape[0]
        if tokens.dtype.kind not in "iu" or tokens.size and (tokens.min() < 0 or tokens.max() >= n):
            raise ValueError(
                f"tokens must be integers in [0, {n}), the rows of the embedding table"
            )
        self.tokens = tokens
        return self.params["E"][tokens]

    def backward(self, grad: np.ndarray) -> np.ndarray:
        require_forward(self.tokens, self)
        E = self.params["E"]
        grad = as_float_input(grad, "grad")
        if grad.shape != self.tokens.shape + (E.shape[1],):
            raise ValueError(
                f"grad must have the shape of forward's output "
                f"{self.tokens.shape + (E.shape[1],)}, got {grad.shape}"
            )
        self.grads["E"] = np.zeros_like(E)
        np.add.at(self.grads["E"], self.tokens.reshape(-1), grad.reshape(-1, E.shape[1]))
