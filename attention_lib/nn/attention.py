"""One attention head with learned projections, and its backward pass."""

from .._checks import as_int
from ..backward import scaled_dot_product_attention_backward
from ..dot_product import scaled_dot_product_attention
from .layers import _init, _sum_to_matrix

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
