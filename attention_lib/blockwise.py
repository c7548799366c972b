"""Blockwise attention with the online softmax: exact attention in bounded memory.

:func:`scaled_dot_product_attention` builds the whole ``(L, S)`` score matrix
``Q K^T`` before the softmax. At ``L = S = 16384`` in float32 that is 1 GiB,
and it grows with the square of the sequence length.

The output never needs that matrix. Row ``i`` of the output is

    o_i = sum_j exp(s_ij - m) v_j / sum_j exp(s_ij - m)

for *any* shift ``m`` (the stable softmax of chapter 2 takes ``m = max_j s_ij``).
So the keys can be visited one block at a time, keeping per query only

    m    the largest score seen so far             (the running max)
    ell  sum_j exp(s_ij - m) over keys seen so far (the running sum)
    acc  sum_j exp(s_ij - m) v_j                   (the unnormalised output)

When a new block raises the running max from ``m`` to ``m'``, everything summed
so far was shifted by the old ``m``; multiplying it by ``exp(m - m')`` re-shifts
it by ``m'``. After the last block, ``o_i = acc / ell``: the same number the full
softmax gives, up to rounding. This is the online softmax of Milakov and
Gimelshein (2018), used for attention by Rabe and Staats (2021) and by
FlashAttention (Dao et al., 2022).

Blocking the queries as well bounds the scores held at any moment by
``query_block_size x block_size`` per batch element, whatever ``L`` and ``S``.
"""

import numpy as np

from ._checks import (
    as_bool,
    as_numeric,
    float_dtype,
    require_finite,
    require_ndim,
)
from ._kernel import (
    attention_inputs,
    block_sizes,
    blocks,
    masked_block,
    check_masked_scores,
    check_scores,
    mask_block,
    overflow_risk,
)


def online_softmax_step(running_max, running_sum, output, scores, value):
    """Fold one block of keys into the running max, running sum and output.

    Parameters
    ----------
    running_max : ndarray, shape (..., L)
        Largest score seen so far for each query; ``-inf`` before the first
        block (or while every key seen so far was masked).
    running_sum : ndarray, shape (..., L)
        ``sum_j exp(s_ij - running_max_i)`` over the keys seen so far.
    output : ndarray, shape (..., L, Ev)
        ``sum_j exp(s_ij - running_max_i) v_j`` over the keys seen so far:
        the output before it is divided by ``running_sum``.
    scores : ndarray, shape (..., L, B)
        This block's scores, ``-inf`` where a key is masked.
    value : ndarray, shape (..., B, Ev)
        This block's values.

    Returns
    -------
    running_max, running_sum, output : ndarray
        The three statistics after this block (new arrays; the inputs are not
        modified), in the floating dtype of the inputs (integers in float64).

    Raises
    ------
    TypeError
        If an input is not real numbers.
    ValueError
        If the shapes do not fit together (the message names them), if
        ``scores`` or ``running_max`` hold NaN or ``+inf``, ``running_sum``
        is negative or not finite, ``output`` or ``value`` is not finite, or
        the new output would overflow the dtype.

    Notes
    -----
    A query whose scores are all ``-inf`` so far keeps ``running_max = -inf``
    and ``running_sum = 0``; it is shifted by 0 instead of ``-inf`` so that no
    ``-inf - (-inf) = nan`` appears.

    Examples
    --------
    Two blocks of one query's scores give the same weights as one softmax:

    >>> import numpy as np
    >>> from attention_lib import online_softmax_step, softmax
    >>> s = np.array([[1.0, 3.0, 2.0, 5.0]])           # (L=1, S=4)
    >>> v = np.eye(4)                                   # value j = basis vector j
    >>> m, ell, acc = np.full(1, -np.inf), np.zeros(1), np.zeros((1, 4))
    >>> m, ell, acc = online_softmax_step(m, ell, acc, s[:, :2], v[:2])
    >>> float(m[0]), round(float(ell[0]), 6)
    (3.0, 1.135335)
    >>> m, ell, acc = online_softmax_step(m, ell, acc, s[:, 2:], v[2:])
    >>> float(m[0])
    5.0
    >>> bool(np.allclose(acc / ell[:, None], softmax(s)))
    True
    """
    arrays = [
        as_numeric(a, name)
        for a, name in (
            (running_max, "running_max"),
            (running_sum, "running_sum"),
            (output, "output"),
            (scores, "scores"),
            (value, "value"),
        )
    ]
    dtype = float_dtype(*arrays)
    m, ell, acc, s, v = (a.astype(dtype, copy=False) for a in arrays)
    require_ndim(s, "scores", 2, "(..., L, B)")
    require_ndim(v, "value", 2, "(..., B, Ev)")
    if s.shape[-1] != v.shape[-2]:
        raise ValueError(
            f"scores has {s.shape[-1]} keys (axis -1) but value has "
            f"{v.shape[-2]} (axis -2): one value per key"
        )
    if m.shape[-1:] != s.shape[-2:-1]:
        raise ValueError(
            f"scores has {s.shape[-2]} queries (axis -2) but running_max has "
            f"{m.shape[-1] if m.ndim else 'no axis'} (axis -1): one statistic per query"
        )
    if ell.shape != m.shape:
        raise ValueError(
            f"running_sum must have the shape of running_max {m.shape}, got {ell.shape}"
        )
    if acc.shape != m.shape + v.shape[-1:]:
        raise ValueError(
            f"output must have shape {m.shape + v.shape[-1:]} "
            f"(running_max's shape + (Ev,)), got {acc.shape}"
        )
    for a, name in ((s, "scores"), (m, "running_max")):
        if np.isnan(a).any() or np.isposinf(a).any():
            raise ValueError(
                f"{name} contains NaN or +inf: scores must be finite, or -inf where a key is masked"
            )
    if not (np.isfinite(ell).all() and (ell >= 0).all()):
        raise ValueError("running_sum must be finite and non-negative (start from zeros)")
    require_finite(acc, "output")
    require_finite(v, "value")
    with np.errstate(over="ignore", invalid="ignore"):  # checked just below
        new = _online_softmax_step(m, ell, acc, s, v)
    if not (np.isfinite(new[1]).all() and np.isfinite(new[2]).all()):
        raise ValueError(
            f"the output overflows {dtype}: output + weights @ value exceeds "
            f"{np.finfo(dtype).max:.3g}; scale value down, or pass float64 arrays"
        )
    return new


def _online_softmax_step(running_max, running_sum, output, scores, value):
    """:func:`online_softmax_step` without the checks, for trusted callers."""
    new_max = np.maximum(running_max, scores.max(axis=-1, initial=-np.inf))
    # Rows with nothing to attend to yet: shift by 0 (exp(-inf - 0) = 0).
    shift = np.where(np.isneginf(new_max), 0, new_max)
    weights = scores - shift[..., None]  # unnormalised, (..., L, B)
    np.exp(weights, out=weights)
    rescale = np.exp(running_max - shift)  # exp(m - m'): <= 1
    new_sum = running_sum * rescale + weights.sum(axis=-1)
    new_output = output * rescale[..., None] + weights @ value
    return new_max, new_sum, new_output


def blockwise_attention(
    query,
    key,
    value,
    attn_mask=None,
    is_causal=False,
    scale=None,
    block_size=512,
    query_block_size=None,
    return_logsumexp=False,
):
    """Scaled dot-product attention computed block by block (online softmax).

    Gives the same result as :func:`scaled_dot_product_attention` (up to
    rounding) without ever holding the ``(L, S)`` score matrix: queries are
    taken ``query_block_size`` at a time and keys and values ``block_size``
    at a time, so the scores in memory at any moment are
    ``query_block_size x block_size`` per batch element.

    Parameters
    ----------
    query : array_like, shape (..., L, E)
        Queries ``Q``.
    key : array_like, shape (..., S, E)
        Keys ``K``.
    value : array_like, shape (..., S, Ev)
        Values ``V``.
    attn_mask : array_like, optional
        Broadcastable to ``(..., L, S)``; boolean (``True`` = may attend) or
        floating (added to the scores), as in
        :func:`scaled_dot_product_attention`; integer masks are refused. A
        ``(B, S)`` key-padding mask needs a query axis, ``mask[:, None, :]``:
        passed as it is, it broadcasts silently when ``B == L`` (see
        :func:`scaled_dot_product_attention`).
    is_causal : bool, optional
        Query ``i`` sees keys ``j <= i`` only. The causal mask is made block
        by block (never as an ``(L, S)`` array), and blocks lying entirely
        above the diagonal are skipped, which halves the work for ``L = S``.
    scale : float, optional
        Multiplies ``Q K^T``; defaults to ``1 / sqrt(E)``.
    block_size : int, optional
        Number of keys (and values) per block. Default 512.
    query_block_size : int, optional
        Number of queries per block; defaults to ``block_size``.
    return_logsumexp : bool, optional
        Also return ``log sum_j exp(s_ij)`` for each query, from which any
        attention weight can be recomputed, one block at a time:
        ``alpha_ij = exp(s_ij - logsumexp_i)``.

    Returns
    -------
    output : ndarray, shape (..., L, Ev)
        Same as ``scaled_dot_product_attention(query, key, value, ...)``.
        Query rows with every key masked are zero.
    logsumexp : ndarray, shape (..., L)
        Only with ``return_logsumexp=True``. ``-inf`` for fully masked rows.

    Raises
    ------
    TypeError
        If an input is not real numbers, ``attn_mask`` is neither boolean nor
        floating, ``scale`` is not one real number, a flag is not a bool, or a
        block size is not an integer.
    ValueError
        For inputs whose shapes do not fit together, NaN inputs, or scores or
        sums that would overflow the dtype (as in
        :func:`scaled_dot_product_attention`), or a block size below 1.

    Notes
    -----
    There is no ``return_weights``: the weights *are* the ``(L, S)`` matrix
    this function exists to avoid. Use ``return_logsumexp`` and recompute the
    block of weights you need, or call :func:`scaled_dot_product_attention`.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib import blockwise_attention, scaled_dot_product_attention
    >>> rng = np.random.default_rng(0)
    >>> q, k, v = rng.normal(size=(10, 8)), rng.normal(size=(13, 8)), rng.normal(size=(13, 3))
    >>> out = blockwise_attention(q, k, v, is_causal=True, block_size=4)
    >>> out.shape
    (10, 3)
    >>> bool(np.allclose(out, scaled_dot_product_attention(q, k, v, is_causal=True)))
    True
    """
    is_causal = as_bool(is_causal, "is_causal")
    return_logsumexp = as_bool(return_logsumexp, "return_logsumexp")
    block_size, query_block_size = block_sizes(block_size, query_block_size)
    # Causality is handled here, block by block, not as an (L, S) array.
    q, k, v, mask, scale = attention_inputs(query, key, value, attn_mask, False, scale)
    dtype = q.dtype
    L, S, Ev = q.shape[-2], k.shape[-2], v.shape[-1]
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    scores_may, masked_may = overflow_risk(q, k, scale, mask)
    with np.errstate(over="ignore"):  # overflow is checked per block
        q = q * scale  # scale the (L, E) queries once
    k_t = np.swapaxes(k, -1, -2)  # (..., E, S), a view

    output = np.empty(batch + (L, Ev), dtype=dtype)
    logsumexp = np.empty(batch + (L,), dtype=dtype)
    for rows, all_cols in blocks(L, S, query_block_size, block_size, is_causal):
        m = np.full(batch + (rows.stop - rows.start,), -np.inf, dtype=dtype)
        ell = np.zeros(batch + (rows.stop - rows.start,), dtype=dtype)
        acc = np.zeros(batch + (rows.stop - rows.start, Ev), dtype=dtype)
        for cols in all_cols:
            with np.errstate(over="ignore", invalid="ignore"):
                s = q[..., rows, :] @ k_t[..., :, cols]  # (..., bq, bk)
            if scores_may:
                check_scores(s, dtype)
            with np.errstate(over="ignore"):
                s = masked_block(s, mask, rows, cols, is_causal)
            if masked_may and mask is not None and mask.dtype.kind == "f":
                check_masked_scores(s, mask_block(mask, rows, cols), dtype)
            m, ell, acc = _online_softmax_step(m, ell, acc, s, v[..., cols, :])
        empty = ell == 0  # nothing to attend to: output 0
        output[..., rows, :] = acc / np.where(empty, 1, ell)[..., None]
        with np.errstate(divide="ignore"):  # log(0) = -inf for empty rows
            logsumexp[..., rows] = m + np.log(ell)
    if return_logsumexp:
        return output, logsumexp
    return output


# The tiled path of :class:`~attention_lib.nn.MultiHeadAttention` (``block_size``).
#
# Queries and keys carry their positions (``q_pos``, ``k_pos``: increasing
# integers), from which each tile makes its own causal, sliding-window,
# sink and ALiBi terms: no (T, S) array is ever made. Between the forward
# and the backward only the output O and the log-sum-exp are kept.


def tile_mask(q_pos, k_pos, causal, window, sinks):
    """Which keys each query of a tile may see, boolean ``(bq, bk)``, or None for all.

    ``causal``: key position <= query position. ``window``: and the key is
    one of the query's last ``window`` positions, or one of the first
    ``sinks`` positions of the sequence.
    """
    qp, kp = q_pos[:, None], k_pos[None, :]
    allowed = None
    if causal and k_pos[-1] > q_pos[0]:
        allowed = kp <= qp
    if window is not None and k_pos[0] <= q_pos[-1] - window:
        near = (qp - kp < window) | (kp < sinks)
        allowed = near if allowed is None else allowed & near
    return allowed


def tile_skipped(q_pos, k_pos, causal, window, sinks):
    """True when no query of the tile may see any of its keys (the tile is not computed)."""
    if causal and k_pos[0] > q_pos[-1]:
        return True
    return window is not None and k_pos[-1] <= q_pos[0] - window and k_pos[0] >= sinks


def tile_scores(q, k, rows, cols, q_pos, k_pos, geometry, mask):
    """One tile of scores ``(..., bq, bk)``: ``q`` is pre-scaled; masks and ALiBi applied."""
    causal, window, sinks, slopes = geometry
    s = q[..., rows, :] @ np.swapaxes(k[..., cols, :], -1, -2)
    qp, kp = q_pos[rows], k_pos[cols]
    if slopes is not None:  # ALiBi: -m_h (i - j), made for this tile only
        s = s + slopes * (kp[None, :] - qp[:, None]).astype(s.dtype)
    if mask is not None:
        block = mask_block(mask, rows, cols)
        s = np.where(block, s, -np.inf) if block.dtype.kind == "b" else s + block
    allowed = tile_mask(qp, kp, causal, window, sinks)
    if allowed is not None:
        s = np.where(allowed, s, -np.inf)
    return s


def tile_keep(seed, rows, cols, shape, p, dtype):
    """The dropout mask of one tile, scaled by ``1 / (1 - p)``, regenerated from a counter.

    The tile's random numbers come from ``(seed, first row, first column)``
    alone, so the backward pass draws exactly the mask the forward pass used
    without anything being stored (FlashAttention keeps a Philox seed and
    offset for the same reason).
    """
    rng = np.random.default_rng([seed, rows.start, cols.start])
    keep = rng.random(shape, dtype=np.float32 if dtype == np.float32 else np.float64) >= p
    return keep * dtype.type(1.0 / (1.0 - p))


def _tiles(T, S, block_size):
    for i0 in range(0, T, block_size):
        rows = slice(i0, min(i0 + block_size, T))
        yield rows, [slice(j, min(j + block_size, S)) for j in range(0, S, block_size)]


def tiled_forward(q, k, v, scale, q_pos, k_pos, geometry, mask, block_size, drop=None):
    """Attention tile by tile: the output ``(..., T, dv)`` and log-sum-exp ``(..., T)``.

    ``q`` (..., T, d), ``k`` and ``v`` (..., S, d) broadcast over their batch
    axes; ``geometry = (causal, window, sinks, slopes)``; ``mask`` a user mask
    broadcastable to the scores or None; ``drop = (seed, p)`` or None.
    Rows with nothing to attend to give 0 and a log-sum-exp of ``-inf``.
    """
    dtype = q.dtype
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    T, S, dv = q.shape[-2], k.shape[-2], v.shape[-1]
    qs = q * scale
    out = np.zeros(batch + (T, dv), dtype)
    lse = np.full(batch + (T,), -np.inf, dtype)
    for rows, all_cols in _tiles(T, S, block_size):
        n = rows.stop - rows.start
        m = np.full(batch + (n,), -np.inf, dtype)
        ell = np.zeros(batch + (n,), dtype)
        acc = np.zeros(batch + (n, dv), dtype)
        for cols in all_cols:
            if tile_skipped(q_pos[rows], k_pos[cols], *geometry[:3]):
                continue
            s = tile_scores(qs, k, rows, cols, q_pos, k_pos, geometry, mask)
            s = np.broadcast_to(s, batch + s.shape[-2:])
            new_m = np.maximum(m, s.max(axis=-1))
            shift = np.where(np.isneginf(new_m), 0, new_m)
            w = np.exp(s - shift[..., None])
            ell = ell * np.exp(m - shift) + w.sum(axis=-1)
            if drop is not None:  # O = drop(P) V; the sums keep the undropped weights
                w = w * tile_keep(drop[0], rows, cols, w.shape, drop[1], dtype)
            acc = acc * np.exp(m - shift)[..., None] + w @ v[..., cols, :]
            m = new_m
        empty = ell == 0
        out[..., rows, :] = acc / np.where(empty, 1, ell)[..., None]
        with np.errstate(divide="ignore"):
            lse[..., rows] = np.where(empty, -np.inf, m + np.log(np.where(empty, 1, ell)))
    return out, lse


def tiled_backward(
    d_out, q, k, v, out, lse, scale, q_pos, k_pos, geometry, mask, block_size, drop=None
):
    """``dQ, dK, dV`` of :func:`tiled_forward` from its output and log-sum-exp alone.

    Each tile's weights are recomputed, ``P = exp(S - lse)``; the row term
    ``D = rowsum(dO * O)`` replaces ``rowsum(dP * P)``, which would need the
    whole row. ``dK`` and ``dV`` are summed over the batch axes ``k`` and
    ``v`` were broadcast along (grouped query heads).
    """
    dtype = q.dtype
    T, S = q.shape[-2], k.shape[-2]
    qs = q * scale
    D = np.sum(d_out * out, axis=-1, keepdims=True)  # (..., T, 1)
    shift = np.where(np.isneginf(lse), np.inf, lse)[..., None]  # empty rows: P = 0
    dQ = np.zeros(np.broadcast_shapes(q.shape, d_out.shape[:-1] + q.shape[-1:]), dtype)
    dK = np.zeros(k.shape, dtype)
    dV = np.zeros(v.shape, dtype)
    k_axes = tuple(i for i, n in enumerate(k.shape[:-2]) if n == 1 and d_out.shape[i] != 1)
    v_axes = tuple(i for i, n in enumerate(v.shape[:-2]) if n == 1 and d_out.shape[i] != 1)
    for rows, all_cols in _tiles(T, S, block_size):
        dO, Dr, qr = d_out[..., rows, :], D[..., rows, :], q[..., rows, :]
        for cols in all_cols:
            if tile_skipped(q_pos[rows], k_pos[cols], *geometry[:3]):
                continue
            s = tile_scores(qs, k, rows, cols, q_pos, k_pos, geometry, mask)
            P = np.exp(s - shift[..., rows, :])  # the weights, recomputed
            dP = dO @ np.swapaxes(v[..., cols, :], -1, -2)
            used = P
            if drop is not None:
                keep = tile_keep(drop[0], rows, cols, P.shape, drop[1], dtype)
                used, dP = P * keep, dP * keep
            dS = P * (dP - Dr)
            dv_tile = np.swapaxes(used, -1, -2) @ dO
            dk_tile = np.swapaxes(dS, -1, -2) @ qr
            dV[..., cols, :] += dv_tile.sum(axis=v_axes, keepdims=True) if v_axes else dv_tile
            dK[..., cols, :] += dk_tile.sum(axis=k_axes, keepdims=True) if k_axes else dk_tile
            dQ[..., rows, :] += dS @ k[..., cols, :]
    return dQ * scale, dK * scale, dV
