"""The backward pass of scaled dot-product attention, by hand.

Training needs, for a loss ``ell`` that depends on the attention output
``O = P V`` with weights ``P = softmax(S)`` and scores ``S = scale Q K^T + M``,
the gradients ``dQ, dK, dV`` from the gradient ``dO = d ell / d O``. The chain
rule, one step at a time (``*`` is elementwise, ``rowsum`` keeps dims)::

    dV = P^T dO                       O = P V, read as a sum over keys
    dP = dO V^T                       the same product, the other factor
    dS = P * (dP - rowsum(dP * P))    the softmax Jacobian, applied row by row
    dQ = scale dS K
    dK = scale dS^T Q

The softmax line is the only one that is not a matrix product. Row ``i`` of
the weights depends on the whole row of scores: ``d p_j / d s_k =
p_j (delta_jk - p_k)``. Multiplying that Jacobian by ``dp`` gives
``p_k (dp_k - sum_j dp_j p_j)``: each weight's gradient minus the
weight-averaged gradient of its row, scaled by the weight. So a masked key
(``p = 0``) gets no gradient, and a query that may attend to nothing (a row
of zeros) gets ``dS = 0`` and zero gradients, never NaN.

:func:`blockwise_attention_backward` computes the same gradients block by
block, recomputing each block of weights from the log-sum-exp saved by
:func:`blockwise_attention`, as FlashAttention does (Dao et al., 2022): no
``(L, S)`` matrix is ever held.
"""

import numpy as np

from ._checks import as_bool, as_numeric, require_finite
from ._kernel import (
    attention_backward,
    attention_inputs,
    attention_weights,
    block_sizes,
    blocks,
    masked_block,
)


def _unbroadcast(grad, shape):
    """Sum ``grad`` over the axes along which an input of ``shape`` was broadcast."""
    extra = grad.ndim - len(shape)
    grad = grad.sum(axis=tuple(range(extra))) if extra else grad
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    return grad.sum(axis=axes, keepdims=True) if axes else grad


def _grad_output(grad_output, q, k, v, dtype):
    """Check ``grad_output`` against the output's shape ``(..., L, Ev)``."""
    g = as_numeric(grad_output, "grad_output").astype(dtype, copy=False)
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    expected = batch + (q.shape[-2], v.shape[-1])
    if g.shape != expected:
        raise ValueError(
            f"grad_output has shape {g.shape} but the attention output has "
            f"shape (..., L, Ev) = {expected}: pass one gradient per output entry"
        )
    require_finite(g, "grad_output")
    return g


def scaled_dot_product_attention_backward(
    grad_output, query, key, value, attn_mask=None, is_causal=False, scale=None
):
    """Gradients of :func:`scaled_dot_product_attention` with respect to Q, K, V.

    Parameters
    ----------
    grad_output : array_like, shape (..., L, Ev)
        ``dO``: the gradient of the loss with respect to the attention output.
    query, key, value, attn_mask, is_causal, scale
        Exactly as passed to :func:`scaled_dot_product_attention` (same
        shapes, broadcasting batch axes, boolean or float masks).

    Returns
    -------
    grad_query : ndarray, shape of ``query``
        ``dQ = scale dS K``.
    grad_key : ndarray, shape of ``key``
        ``dK = scale dS^T Q``.
    grad_value : ndarray, shape of ``value``
        ``dV = P^T dO``.

    Raises
    ------
    TypeError
        If an input is not real numbers.
    ValueError
        If the inputs do not fit together (as in
        :func:`scaled_dot_product_attention`), or ``grad_output`` does not
        have the output's shape, or holds NaN or infinity.

    Notes
    -----
    With ``P`` the weights and ``*`` the elementwise product::

        dP = dO V^T,   dS = P * (dP - rowsum(dP * P)),
        dQ = scale dS K,   dK = scale dS^T Q,   dV = P^T dO.

    The weights are recomputed from ``Q`` and ``K`` (one more product than
    keeping them from the forward pass, and no ``(L, S)`` array to carry
    between the two). A masked key gets zero weight, hence zero gradient; a
    query with nothing to attend to gets zero gradients, not NaN. Where a
    batch axis of an input was broadcast, its gradient is summed over that
    axis, so each gradient has the shape of its input. The dtype is that of
    the forward pass (float32 stays float32; integers give float64).

    Examples
    --------
    The gradient of ``sum(O)`` with respect to the values is the column sums
    of the weights, how much each value row is used:

    >>> import numpy as np
    >>> from attention_lib import (scaled_dot_product_attention,
    ...                            scaled_dot_product_attention_backward)
    >>> rng = np.random.default_rng(0)
    >>> q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    >>> out, w = scaled_dot_product_attention(q, k, v, return_weights=True)
    >>> dq, dk, dv = scaled_dot_product_attention_backward(np.ones_like(out), q, k, v)
    >>> dq.shape, dk.shape, dv.shape
    ((3, 4), (5, 4), (5, 2))
    >>> bool(np.allclose(dv, w.sum(axis=0)[:, None]))
    True

    Keys that no query may see get no gradient, and a query that may see
    no key at all gets zero gradient:

    >>> mask = np.array([[True, False, False], [False, False, False]])
    >>> dq, dk, dv = scaled_dot_product_attention_backward(
    ...     np.ones((2, 2)), q[:2], k[:3], v[:3], attn_mask=mask)
    >>> bool(dq[1].any()), bool(dk[1:].any()), bool(dv[1:].any())
    (False, False, False)
    """
    q, k, v, mask, scale = attention_inputs(query, key, value, attn_mask, is_causal, scale)
    d_out = _grad_output(grad_output, q, k, v, q.dtype)
    P, _ = attention_weights(q, k, scale, mask)  # (..., L, S)
    dQ, dK, dV = attention_backward(d_out, q, k, v, P, scale)
    return (_unbroadcast(dQ, q.shape), _unbroadcast(dK, k.shape), _unbroadcast(dV, v.shape))


def blockwise_attention_backward(
    grad_output,
    query,
    key,
    value,
    output,
    logsumexp,
    attn_mask=None,
    is_causal=False,
    scale=None,
    block_size=512,
    query_block_size=None,
):
    """The gradients of :func:`blockwise_attention`, block by block.

    Gives the same ``dQ, dK, dV`` as
    :func:`scaled_dot_product_attention_backward` (up to rounding) without
    holding the ``(L, S)`` weights: each ``query_block_size x block_size``
    block of weights is recomputed from the scores and the saved log-sum-exp,
    ``p_ij = exp(s_ij - logsumexp_i)``, used, and dropped.

    Parameters
    ----------
    grad_output : array_like, shape (..., L, Ev)
        ``dO``: the gradient of the loss with respect to the output.
    query, key, value : array_like
        As passed to :func:`blockwise_attention`.
    output : array_like, shape (..., L, Ev)
        The output of :func:`blockwise_attention` for these inputs.
    logsumexp : array_like, shape (..., L)
        The log-sum-exp it returned with ``return_logsumexp=True``
        (``-inf`` for queries with nothing to attend to).
    attn_mask, is_causal, scale, block_size, query_block_size
        As passed to :func:`blockwise_attention`.

    Returns
    -------
    grad_query, grad_key, grad_value : ndarray
        Shapes of ``query``, ``key`` and ``value``.

    Raises
    ------
    TypeError
        If an input is not real numbers, or a block size is not an integer.
    ValueError
        If the shapes do not fit together, or a block size is below 1.

    Notes
    -----
    The row sums ``rowsum(dP * P)`` need every key of the row; they equal
    ``rowsum(dO * O)``, which needs only the saved output. Blocks lying
    entirely above the diagonal of a causal mask are skipped.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib import (blockwise_attention, blockwise_attention_backward,
    ...                            scaled_dot_product_attention_backward)
    >>> rng = np.random.default_rng(1)
    >>> q, k, v = rng.normal(size=(7, 4)), rng.normal(size=(9, 4)), rng.normal(size=(9, 3))
    >>> out, lse = blockwise_attention(q, k, v, is_causal=True, block_size=4,
    ...                                return_logsumexp=True)
    >>> d_out = rng.normal(size=out.shape)
    >>> grads = blockwise_attention_backward(d_out, q, k, v, out, lse,
    ...                                      is_causal=True, block_size=4)
    >>> plain = scaled_dot_product_attention_backward(d_out, q, k, v, is_causal=True)
    >>> all(np.allclose(g, p, rtol=0, atol=1e-12) for g, p in zip(grads, plain))
    True
    """
    is_causal = as_bool(is_causal, "is_causal")
    block_size, query_block_size = block_sizes(block_size, query_block_size)
    q, k, v, mask, scale = attention_inputs(query, key, value, attn_mask, False, scale)
    dtype = q.dtype
    d_out = _grad_output(grad_output, q, k, v, dtype)
    out = as_numeric(output, "output").astype(dtype, copy=False)
    if out.shape != d_out.shape:
        raise ValueError(
            f"output has shape {out.shape}; expected {d_out.shape}, "
            f"the shape of the attention output"
        )
    lse = as_numeric(logsumexp, "logsumexp").astype(dtype, copy=False)
    if lse.shape != d_out.shape[:-1]:
        raise ValueError(
            f"logsumexp has shape {lse.shape}; expected {d_out.shape[:-1]}, one number per query"
        )
    L, S = q.shape[-2], k.shape[-2]
    batch = d_out.shape[:-2]
    # Fully masked rows: shift by +inf, so every weight exp(s - inf) is 0.
    lse = np.where(np.isneginf(lse), np.inf, lse)[..., None]  # (..., L, 1)
    row = np.sum(d_out * out, axis=-1, keepdims=True)  # (..., L, 1)
    qs = q * scale
    dQ = np.zeros(batch + q.shape[-2:], dtype=dtype)
    dK = np.zeros(batch + k.shape[-2:], dtype=dtype)
    dV = np.zeros(batch + v.shape[-2:], dtype=dtype)
    for rows, all_cols in blocks(L, S, query_block_size, block_size, is_causal):
        for cols in all_cols:
            s = qs[..., rows, :] @ np.swapaxes(k[..., cols, :], -1, -2)
            P = np.exp(masked_block(s, mask, rows, cols, is_causal) - lse[..., rows, :])
            dV[..., cols, :] += np.swapaxes(P, -1, -2) @ d_out[..., rows, :]
            dS = d_out[..., rows, :] @ np.swapaxes(v[..., cols, :], -1, -2)
            dS -= row[..., rows, :]
            dS *= P
            dQ[..., rows, :] += dS @ k[..., cols, :]
            dK[..., cols, :] += np.swapaxes(dS, -1, -2) @ q[..., rows, :]
    dQ *= scale
    dK *= scale
    return (_unbroadcast(dQ, q.shape), _unbroadcast(dK, k.shape), _unbroadcast(dV, v.shape))
