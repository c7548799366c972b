"""The few pieces a tiny attention model needs, each with its backward pass.

Every layer works the same way, and there is nothing else to learn:

- ``params``: a dict of the arrays it learns;
- ``forward(...)``: computes the output and keeps what the backward needs;
- ``backward(grad)``: takes ``d loss / d output``, stores
  ``d loss / d param`` in ``grads`` (same keys as ``params``) and returns the
  gradient with respect to its input(s).

No autograd, no graph: a model calls the forwards in order and the backwards
in reverse order, and every gradient is a line of NumPy a reader can check.
:class:`Adam` then updates the parameters of a list of layers.

Vectors are rows, as everywhere in the book: a linear layer maps ``x`` to
``x @ W + b``, with any number of leading batch axes.
"""

import numpy as np

from ._checks import as_int, as_numeric
from .backward import scaled_dot_product_attention_backward
from .dot_product import scaled_dot_product_attention


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


def softmax_cross_entropy(logits, targets):
    """Mean cross-entropy of a softmax over the last axis, and its gradient.

    Parameters
    ----------
    logits : array_like, shape (..., C)
        Unnormalised scores over ``C`` classes.
    targets : array_like of int, shape (...)
        The correct class of each row.

    Returns
    -------
    loss : float
        ``mean(-log softmax(logits)[target])`` over all rows.
    grad : ndarray, shape (..., C)
        ``d loss / d logits = (softmax(logits) - onehot(target)) / N``, with
        ``N`` the number of rows.

    Notes
    -----
    The log-softmax is computed as ``z - logsumexp(z)`` with the maximum
    subtracted first, so large logits do not overflow.

    Examples
    --------
    Equal logits over 4 classes cost ``log 4`` whatever the target:

    >>> import numpy as np
    >>> from attention_lib.nn import softmax_cross_entropy
    >>> loss, grad = softmax_cross_entropy(np.zeros((2, 4)), np.array([0, 3]))
    >>> round(loss, 6), round(float(np.log(4)), 6)
    (1.386294, 1.386294)
    >>> grad[0]
    array([-0.375,  0.125,  0.125,  0.125])
    """
    z = as_numeric(logits, "logits").astype(float, copy=False)
    t = as_numeric(targets, "targets")
    if t.dtype.kind not in "iu" or t.shape != z.shape[:-1]:
        raise ValueError(f"targets must be integers of shape {z.shape[:-1]} "
                         f"(one class per row of logits), got {t.dtype} {t.shape}")
    if t.size and (t.min() < 0 or t.max() >= z.shape[-1]):
        raise ValueError(f"targets must lie in [0, {z.shape[-1]})")
    shifted = z - z.max(axis=-1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    picked = np.take_along_axis(log_p, t[..., None], axis=-1)
    n = t.size
    grad = np.exp(log_p)
    np.put_along_axis(grad, t[..., None],
                      np.take_along_axis(grad, t[..., None], axis=-1) - 1, axis=-1)
    return float(-picked.sum() / n), grad / n


class Attention:
    """One attention head with learned projections ``W_Q, W_K, W_V, W_O``.

    ``out = softmax(Q K^T / sqrt(d_k) + M) V W_O`` with ``Q = x_q W_Q``,
    ``K = x_kv W_K``, ``V = x_kv W_V``: the queries come from ``x_q``, the
    keys and values from ``x_kv`` (the same array for self-attention).

    Parameters
    ----------
    d_model : int
        Size of the input and output rows.
    d_k, d_v : int
        Sizes of the queries/keys and of the values.
    rng : numpy.random.Generator
        Draws the four matrices with variance ``1 / fan-in``.

    Notes
    -----
    The backward goes through the same steps in reverse: ``dW_O = C^T g``
    and ``dC = g W_O^T`` for the context ``C``; then
    :func:`scaled_dot_product_attention_backward` gives ``dQ, dK, dV``; then
    ``dW_Q = x_q^T dQ`` and ``dx_q = dQ W_Q^T`` (likewise for ``K`` and
    ``V``, whose input gradients add up in ``dx_kv``).

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.nn import Attention
    >>> att = Attention(8, 4, 4, np.random.default_rng(0))
    >>> x = np.random.default_rng(1).normal(size=(2, 5, 8))
    >>> att.forward(x, x).shape, att.weights.shape
    ((2, 5, 8), (2, 5, 5))
    >>> dx_q, dx_kv = att.backward(np.ones((2, 5, 8)))
    >>> sorted(att.grads), dx_q.shape
    (['W_K', 'W_O', 'W_Q', 'W_V'], (2, 5, 8))
    """

    def __init__(self, d_model, d_k, d_v, rng):
        d_model = as_int(d_model, "d_model", 1)
        d_k, d_v = as_int(d_k, "d_k", 1), as_int(d_v, "d_v", 1)
        self.params = {"W_Q": _init(rng, d_model, d_k),
                       "W_K": _init(rng, d_model, d_k),
                       "W_V": _init(rng, d_model, d_v),
                       "W_O": _init(rng, d_v, d_model)}
        self.grads = {}

    def forward(self, x_q, x_kv, attn_mask=None, is_causal=False):
        p = self.params
        self.x_q, self.x_kv = x_q, x_kv
        self.mask, self.is_causal = attn_mask, is_causal
        self.q, self.k, self.v = x_q @ p["W_Q"], x_kv @ p["W_K"], x_kv @ p["W_V"]
        self.context, self.weights = scaled_dot_product_attention(
            self.q, self.k, self.v, attn_mask, is_causal, return_weights=True)
        return self.context @ p["W_O"]

    def backward(self, grad):
        p, g = self.params, self.grads
        g["W_O"] = _sum_to_matrix(self.context, grad)
        d_context = grad @ p["W_O"].T
        dq, dk, dv = scaled_dot_product_attention_backward(
            d_context, self.q, self.k, self.v, self.mask, self.is_causal)
        g["W_Q"] = _sum_to_matrix(self.x_q, dq)
        g["W_K"] = _sum_to_matrix(self.x_kv, dk)
        g["W_V"] = _sum_to_matrix(self.x_kv, dv)
        dx_q = dq @ p["W_Q"].T
        dx_kv = dk @ p["W_K"].T + dv @ p["W_V"].T
        return dx_q, dx_kv


class Adam:
    """The Adam optimiser (Kingma and Ba, 2015).

    For every parameter ``theta`` with gradient ``g``, at step ``t = 1, 2, ...``::

        m = beta1 m + (1 - beta1) g          running mean of the gradient
        v = beta2 v + (1 - beta2) g**2       running mean of its square
        m_hat = m / (1 - beta1**t)           undo the bias towards the
        v_hat = v / (1 - beta2**t)           zero starting values
        theta -= lr m_hat / (sqrt(v_hat) + eps)

    Each parameter moves by about ``lr`` per step whatever the size of its
    gradient: the ratio ``m_hat / sqrt(v_hat)`` is near +-1 when the
    gradient keeps its sign, and small when it flips from step to step.

    Parameters
    ----------
    layers : sequence
        Objects with ``params`` and ``grads`` dicts (the layers of this
        module); their ``params`` arrays are updated in place.
    lr : float, optional
        Step size (default 1e-3, the paper's).
    betas : (float, float), optional
        Decay rates of the two running means (default (0.9, 0.999)).
    eps : float, optional
        Keeps the division finite (default 1e-8).

    Examples
    --------
    The first step moves every parameter by ``lr`` against the sign of its
    gradient (``m_hat = g`` and ``v_hat = g**2``):

    >>> import numpy as np
    >>> from attention_lib.nn import Adam, Linear
    >>> layer = Linear(2, 1, np.random.default_rng(0), bias=False)
    >>> before = layer.params["W"].copy()
    >>> layer.grads["W"] = np.array([[3.0], [-0.5]])
    >>> Adam([layer], lr=0.1).step()
    >>> (layer.params["W"] - before).round(6)
    array([[-0.1],
           [ 0.1]])
    """

    def __init__(self, layers, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
        self.layers = list(layers)
        self.lr, (self.beta1, self.beta2), self.eps = lr, betas, eps
        self.t = 0
        self.m = [{k: np.zeros_like(a) for k, a in layer.params.items()}
                  for layer in self.layers]
        self.v = [{k: np.zeros_like(a) for k, a in layer.params.items()}
                  for layer in self.layers]

    def step(self):
        """Update every parameter once from the gradients in ``grads``."""
        self.t += 1
        b1, b2 = self.beta1, self.beta2
        for layer, m, v in zip(self.layers, self.m, self.v):
            for name, theta in layer.params.items():
                g = layer.grads[name]
                m[name] = b1 * m[name] + (1 - b1) * g
                v[name] = b2 * v[name] + (1 - b2) * g**2
                m_hat = m[name] / (1 - b1**self.t)
                v_hat = v[name] / (1 - b2**self.t)
                theta -= self.lr * m_hat / (np.sqrt(v_hat) + self.eps)
