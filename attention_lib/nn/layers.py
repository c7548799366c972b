"""Layers with parameters: the affine map and the embedding lookup.

See :mod:`attention_lib.nn` for the protocol every layer follows
(``params``, ``grads``, ``forward``, ``backward``).
"""

import numpy as np

from .._checks import as_int, as_numeric

def _sum_to_matrix(x, grad):
    """``sum over batch of x_b^T grad_b``: the gradient of a shared weight."""
    return x.reshape(-1, x.shape[-1]).T @ grad.reshape(-1, grad.shape[-1])


def _init(rng, n_in, n_out):
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

    def __init__(self, n_in, n_out, rng, bias=True):
        n_in, n_out = as_int(n_in, "n_in", 1), as_int(n_out, "n_out", 1)
        self.params = {"W": _init(rng, n_in, n_out)}
        if bias:
            self.params["b"] = np.zeros(n_out)
        self.grads = {}

    def forward(self, x):
        self.x = x
        y = x @ self.params["W"]
        return y + self.params["b"] if "b" in self.params else y

    def backward(self, grad):
        self.grads["W"] = _sum_to_matrix(self.x, grad)
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

    def __init__(self, n_tokens, d, rng):
        n_tokens, d = as_int(n_tokens, "n_tokens", 1), as_int(d, "d", 1)
        self.params = {"E": rng.normal(size=(n_tokens, d))}
        self.grads = {}

    def forward(self, tokens):
        tokens = as_numeric(tokens, "tokens")
        n = self.params["E"].shape[0]
        if tokens.dtype.kind not in "iu" or tokens.size and (
                tokens.min() < 0 or tokens.max() >= n):
            raise ValueError(f"tokens must be integers in [0, {n}), "
                             f"the rows of the embedding table")
        self.tokens = tokens
        return self.params["E"][tokens]

    def backward(self, grad):
        E = self.params["E"]
        self.grads["E"] = np.zeros_like(E)
        np.add.at(self.grads["E"], self.tokens.reshape(-1),
                  grad.reshape(-1, E.shape[1]))
