"""Multi-head (causal) self-attention as a layer: all heads at once, with a KV cache."""

import numpy as np

from .._checks import as_int
from ..backward import scaled_dot_product_attention_backward
from ..dot_product import scaled_dot_product_attention
from ..positions import rotary as rotate
from ..softmax import softmax_backward
from .dropout import Dropout
from .layers import _init, _sum_to_matrix


class KVCache:
    """The keys and values one attention layer has computed so far.

    When a model generates one token at a time, the keys and values of the
    earlier positions do not change (a causal layer never lets them see the
    new token), so they are kept here and each step appends one more row
    instead of recomputing the whole prefix.

    Attributes
    ----------
    k, v : ndarray, shape (B, H, S, d_head), or None before the first step
    """

    def __init__(self):
        self.k = self.v = None

    def __len__(self):
        return 0 if self.k is None else self.k.shape[-2]

    @property
    def nbytes(self):
        """Memory held by the cached keys and values, in bytes."""
        return 0 if self.k is None else self.k.nbytes + self.v.nbytes

    def append(self, k, v):
        """Add the new rows ``k, v`` (B, H, T, d_head); return all keys and values."""
        if self.k is None:
            self.k, self.v = k, v
        else:
            self.k = np.concatenate([self.k, k], axis=-2)
            self.v = np.concatenate([self.v, v], axis=-2)
        return self.k, self.v


class SelfAttention:
    """Multi-head self-attention with learned projections, batched over heads.

    For input rows ``x`` (B, T, d_model): ``Q, K, V = x W_QKV + b_QKV`` split
    into ``n_heads`` heads of ``d_head = d_model / n_heads`` features each,
    one :func:`~attention_lib.scaled_dot_product_attention` over the axes
    (B, H) at once, the heads' contexts concatenated again and mixed by
    ``W_O``: the layer of :class:`~attention_lib.MultiHeadAttention`
    (chapter 7), here with a backward pass.

    Parameters
    ----------
    d_model : int
        Size of the input and output rows.
    n_heads : int
        Number of heads; must divide ``d_model``.
    rng : numpy.random.Generator
        Draws the weights (variance ``1 / fan-in``) and the dropout masks.
    dropout : float, optional
        Probability of dropping an attention weight while training
        (default 0): a query then ignores a random few of its keys.
    causal : bool, optional
        Let position ``i`` see only positions ``j <= i`` (default True).
    rotary : bool, optional
        Rotate queries and keys by their positions
        (:func:`~attention_lib.rotary`) before the scores (default False).

    Attributes
    ----------
    weights : ndarray, shape (B, H, T, S)
        The attention weights of the last forward pass, before dropout.

    Notes
    -----
    ``W_QKV`` is ``W_Q``, ``W_K`` and ``W_V`` side by side, so one product
    makes all three. The backward runs the forward in reverse:
    ``dW_O = C^T g``; :func:`~attention_lib.scaled_dot_product_attention_backward`
    gives ``dQ, dK, dV`` for all heads at once; rotary's gradient is the
    rotation back (a rotation's inverse is its transpose); then
    ``dW_QKV = x^T [dQ dK dV]`` and ``dx = [dQ dK dV] W_QKV^T``.
    With attention dropout the output is ``drop(P) V`` and the library
    backward does not apply; the same chain rule is then written out here.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.nn import SelfAttention
    >>> att = SelfAttention(8, 2, np.random.default_rng(0))
    >>> x = np.random.default_rng(1).normal(size=(3, 5, 8))
    >>> att.forward(x).shape, att.weights.shape
    ((3, 5, 8), (3, 2, 5, 5))
    >>> att.backward(np.ones((3, 5, 8))).shape, sorted(att.grads)
    ((3, 5, 8), ['W_O', 'W_QKV', 'b_O', 'b_QKV'])
    """

    def __init__(self, d_model, n_heads, rng, dropout=0.0, causal=True,
                 rotary=False):
        d_model = as_int(d_model, "d_model", 1)
        n_heads = as_int(n_heads, "n_heads", 1)
        if d_model % n_heads:
            raise ValueError(f"n_heads = {n_heads} does not divide d_model = "
                             f"{d_model}: each head gets d_model / n_heads features")
        if rotary and (d_model // n_heads) % 2:
            raise ValueError(f"rotary needs an even head size, got d_model / "
                             f"n_heads = {d_model // n_heads}")
        self.n_heads, self.causal, self.rotary = n_heads, bool(causal), bool(rotary)
        self.params = {"W_QKV": _init(rng, d_model, 3 * d_model),
                       "b_QKV": np.zeros(3 * d_model),
                       "W_O": _init(rng, d_model, d_model),
                       "b_O": np.zeros(d_model)}
        self.grads = {}
        self.dropout = Dropout(dropout, rng)

    def forward(self, x, cache=None):
        """Attend within ``x`` (B, T, d_model); with a ``cache``, also to its earlier positions."""
        p, H = self.params, self.n_heads
        B, T, d = x.shape
        self.x = x
        qkv = (x @ p["W_QKV"] + p["b_QKV"]).reshape(B, T, 3, H, d // H)
        q, k, v = qkv.transpose(2, 0, 3, 1, 4)              # each (B, H, T, d_head)
        start = 0 if cache is None else len(cache)
        self.positions = np.arange(start, start + T)
        if self.rotary:                     # one call rotates both
            q, k = rotate(np.stack([q, k]), self.positions)
        if cache is not None:
            k, v = cache.append(k, v)                       # (B, H, S, d_head)
        mask = None
        if self.causal and start > 0:       # new queries see the whole prefix
            mask = np.arange(k.shape[-2]) <= self.positions[:, None]
        self.q, self.k, self.v, self.mask = q, k, v, mask
        is_causal = self.causal and start == 0
        context, self.weights = scaled_dot_product_attention(
            q, k, v, mask, is_causal, return_weights=True)
        if self.dropout.training and self.dropout.p > 0:
            self.dropped = self.dropout.forward(self.weights)
            context = self.dropped @ v
        else:
            self.dropout.mask = None
        self.context = context.transpose(0, 2, 1, 3).reshape(B, T, d)
        return self.context @ p["W_O"] + p["b_O"]

    def backward(self, grad):
        p, g, H = self.params, self.grads, self.n_heads
        B, T, d = grad.shape
        g["W_O"] = _sum_to_matrix(self.context, grad)
        g["b_O"] = grad.reshape(-1, d).sum(axis=0)
        d_context = (grad @ p["W_O"].T).reshape(B, T, H, d // H).transpose(0, 2, 1, 3)
        if self.dropout.mask is None:
            dq, dk, dv = scaled_dot_product_attention_backward(
                d_context, self.q, self.k, self.v, self.mask,
                self.causal and self.mask is None)
        else:                    # O = drop(P) V: the same steps, one mask more
            P, scale = self.weights, float(1.0 / np.sqrt(d // H))
            dv = np.swapaxes(self.dropped, -1, -2) @ d_context
            dP = self.dropout.backward(d_context @ np.swapaxes(self.v, -1, -2))
            dS = softmax_backward(dP, P)
            dq, dk = scale * dS @ self.k, scale * np.swapaxes(dS, -1, -2) @ self.q
        if self.rotary:                 # rotate back: R(-p) = R(p)^T
            dq, dk = rotate(np.stack([dq, dk]), -self.positions)
        d_qkv = np.empty((B, T, 3, H, d // H), dtype=grad.dtype)
        for i, d_part in enumerate((dq, dk, dv)):     # back to (B, T, 3 d_model)
            d_qkv[:, :, i] = d_part.transpose(0, 2, 1, 3)
        d_qkv = d_qkv.reshape(B, T, 3 * d)
        g["W_QKV"] = _sum_to_matrix(self.x, d_qkv)
        g["b_QKV"] = d_qkv.reshape(-1, 3 * d).sum(axis=0)
        return d_qkv @ p["W_QKV"].T
