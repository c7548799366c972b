"""The attention kernel: weights from queries and keys, and gradients from weights.

Every attention in the library, the functional
:func:`~attention_lib.scaled_dot_product_attention`, its backward pass and
the layer :class:`~attention_lib.nn.MultiHeadAttention`, computes its
weights here and nowhere else::

    S = (Q * scale) K^T (+ M)      scores, masked
    P = softmax(S)                 row by row, max subtracted first

and its backward pass from those weights. Inputs are already checked:
arrays of one floating dtype whose batch axes broadcast, a mask that is
``None``, boolean (True = may attend) or floating (added), broadcastable
to the scores.
"""

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from threadpoolctl import ThreadpoolController

from ._checks import (
    as_bool,
    as_int,
    as_mask,
    as_numeric,
    as_scale,
    float_dtype,
    max_abs,
    overflow_bound,
    require_finite,
    require_ndim,
)
from .masks import causal_mask
from .softmax import softmax_backward, softmax_inplace


def advice(dtype, what="pass smaller query or key, or a smaller scale"):
    """What to do about an overflow: rescale, or use float64 if not already."""
    if dtype == np.float64:
        return what + " (float64 is the widest dtype)"
    return what + ", or convert the inputs to float64"


def attention_inputs(query, key, value, attn_mask, is_causal, scale):
    """Convert and check the arguments; return ``q, k, v, mask, scale``.

    ``mask`` is ``None``, a boolean array (True = may attend) or a float array
    to add to the scores, already checked to broadcast to ``(..., L, S)``.
    """
    q, k, v = (
        as_numeric(a, name) for a, name in ((query, "query"), (key, "key"), (value, "value"))
    )
    dtype = float_dtype(q, k, v)
    q, k, v = (a.astype(dtype, copy=False) for a in (q, k, v))
    require_ndim(q, "query", 2, "(..., L, E)")
    require_ndim(k, "key", 2, "(..., S, E)")
    require_ndim(v, "value", 2, "(..., S, Ev)")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"query has {q.shape[-1]} features but key has {k.shape[-1]}: the last axes must match"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"key has {k.shape[-2]} positions but value has {v.shape[-2]}: "
            f"every key needs one value (axis -2 must match)"
        )
    try:
        batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except ValueError:
        raise ValueError(
            f"the batch axes of query {q.shape}, key {k.shape} and value "
            f"{v.shape} do not broadcast (all but the last two axes must)"
        ) from None
    for a, name in ((q, "query"), (k, "key"), (v, "value")):
        require_finite(a, name)
    L, S = q.shape[-2], k.shape[-2]
    scores_shape = batch + (L, S)

    is_causal = as_bool(is_causal, "is_causal")
    mask = None
    if attn_mask is not None:
        mask = as_mask(attn_mask, "attn_mask")
        try:
            fits = np.broadcast_shapes(mask.shape, scores_shape) == scores_shape
        except ValueError:
            fits = False
        if not fits:
            raise ValueError(
                f"attn_mask of shape {mask.shape} cannot broadcast to the "
                f"scores' shape (..., L, S) = {scores_shape}"
            )
        if mask.dtype.kind != "b" and (np.isnan(mask).any() or np.isposinf(mask).any()):
            raise ValueError("attn_mask contains NaN or +inf; use -inf or False to mask")
    if is_causal:
        mask = and_causal(mask, causal_mask(L, S))

    if scale is None:
        scale = 1.0 / np.sqrt(q.shape[-1]) if q.shape[-1] else 1.0
    else:
        scale = as_scale(scale, "scale")
    if abs(scale) > float(np.finfo(dtype).max):
        raise ValueError(
            f"scale = {scale:.3g} overflows {dtype} (largest "
            f"{np.finfo(dtype).max:.3g}), so neither it nor the scores query @ "
            f"key.T * scale can be represented: " + advice(dtype, "pass a smaller scale")
        )
    # Each output is a weighted sum of up to S values with weights <= 1 (the
    # normalisation may come last), so |value| * S must fit in the dtype.
    biggest = float(np.finfo(dtype).max)
    if overflow_bound(max_abs(v), max(S, 1)) > biggest / 2:
        raise ValueError(
            f"value holds magnitudes up to {max_abs(v):.3g}: the weighted sum "
            f"over S = {S} keys could overflow {dtype} (largest {biggest:.3g}): "
            + advice(dtype, "scale value down (and the output back up)")
        )
    if mask is not None and mask.dtype.kind != "b":
        scores_bound = overflow_bound(max_abs(q), abs(scale), max_abs(k), max(q.shape[-1], 1))
        mask = float_mask(mask, dtype, scores_bound)
    return q, k, v, mask, dtype.type(scale)


def and_causal(mask, causal):
    """``mask`` (None, boolean, or float and added) restricted to the boolean ``causal``."""
    if mask is None:
        return causal
    if mask.dtype.kind == "b":
        return mask & causal
    return np.where(causal, mask, -np.inf).astype(mask.dtype, copy=False)


def float_mask(mask, dtype, scores_bound, name="attn_mask"):
    """A float mask in ``dtype``, without turning finite biases into ``-inf``.

    A float64 bias such as ``-1e39`` becomes ``-inf`` in float32, which masks
    the key instead of biasing it (and a row of such biases would be fully
    masked). The softmax of a row does not change when a constant is added to
    it, so when the finite biases do not fit the dtype each row of the mask is
    first shifted by its largest finite bias (in the mask's own precision).
    After the shift every bias is <= 0; one still below ``-finfo.max`` becomes
    ``-inf``, which is exact when it lies further below the row's best bias
    than the scores can make up (``2 * scores_bound``), and is refused otherwise.
    """
    biggest = float(np.finfo(dtype).max)
    finite = np.isfinite(mask)
    if max_abs(mask[finite]) <= biggest:
        return mask.astype(dtype, copy=False)
    wide = mask.astype(np.result_type(mask.dtype, np.float64), copy=False)
    row_best = np.max(np.where(finite, wide, -np.inf), axis=-1, keepdims=True)
    row_best[np.isneginf(row_best)] = 0.0  # rows with nothing finite
    shifted = wide - row_best  # <= 0 where finite
    lost = finite & (shifted < -biggest)
    if lost.any() and not float(-shifted[lost].max()) > 2 * scores_bound:
        raise ValueError(
            f"{name} holds finite biases up to {max_abs(mask[finite]):.3g} that differ "
            f"within a row by more than {dtype} can hold (largest {biggest:.3g}) while "
            f"the scores are large enough to matter: use -inf (or a boolean mask) to "
            f"mask, and finite biases well inside {biggest:.3g}, or float64 inputs"
        )
    with np.errstate(over="ignore"):
        return shifted.astype(dtype)


def _largest(a):
    """``max |a|`` as a Python float, without an array of ``|a|`` (0 if empty)."""
    return max(float(np.max(a, initial=0)), -float(np.min(a, initial=0)))


def overflow_risk(q, k, scale, mask):
    """Whether ``q @ k.T * scale (+ mask)`` could overflow; two bools.

    A cheap bound from the largest magnitudes, ``|q| |scale| |k| E``, so the
    exact check (one pass over the scores) runs only near the dtype's limit.
    """
    half = float(np.finfo(q.dtype).max) / 2
    scaled_q = overflow_bound(_largest(q), abs(scale))
    bound = overflow_bound(scaled_q, _largest(k), max(q.shape[-1], 1))
    scores_may = scaled_q > half or bound > half
    masked_may = scores_may
    if mask is not None and mask.dtype.kind == "f":
        finite = mask[np.isfinite(mask)]
        masked_may = scores_may or bound + max_abs(finite) > half
    return scores_may, masked_may


def check_scores(scores, dtype):
    """Raise ``ValueError`` if the raw scores of finite inputs overflowed."""
    if not np.isfinite(scores).all():
        raise ValueError(
            f"the scores query @ key.T * scale overflow {dtype} (largest "
            f"{np.finfo(dtype).max:.3g}) although the inputs are finite: " + advice(dtype)
        )


def check_masked_scores(scores, mask, dtype):
    """Raise if adding a float mask pushed finite scores past the dtype's range."""
    if (~np.isfinite(scores) & np.isfinite(mask)).any():
        raise ValueError(
            f"adding attn_mask to the scores overflows {dtype}: use -inf (or a "
            f"boolean mask) to mask, and finite biases well inside "
            f"{np.finfo(dtype).max:.3g}"
        )


def attention_weights(q, k, scale, mask=None, normalise=True, check=True):
    """The weights ``softmax((q * scale) k^T + mask)`` over the last axis.

    Parameters
    ----------
    q, k : ndarray, shapes (..., L, E) and (..., S, E)
    scale : floating scalar of the inputs' dtype
    mask : None, or boolean / floating ndarray broadcastable to (..., L, S)
    normalise : bool
        Divide each row by its sum (default). With False the rows are left
        unnormalised and the caller divides the (smaller) output instead.
    check : bool
        Raise ``ValueError`` when finite inputs overflow the scores.

    Returns
    -------
    weights : ndarray (..., L, S)
        Rows with nothing to attend to are all zero, not NaN.
    total : ndarray (..., L, 1)
        The row sums before normalising (1 for fully masked rows).
    """
    scores_may, masked_may = overflow_risk(q, k, scale, mask) if check else (False, False)
    # Scale the (L, E) queries rather than the (L, S) scores: fewer multiplies.
    with np.errstate(over="ignore", invalid="ignore"):
        scores = (q * scale) @ np.swapaxes(k, -1, -2)  # (..., L, S)
    if scores_may:
        check_scores(scores, q.dtype)
    if mask is not None:  # in place: the mask broadcasts to the scores
        full = np.broadcast_shapes(scores.shape, mask.shape)
        if scores.shape != full:  # batch axes that only the mask has
            scores = np.broadcast_to(scores, full).copy()
        if mask.dtype.kind == "b":
            np.copyto(scores, -np.inf, where=~mask)
        else:
            with np.errstate(over="ignore"):
                scores += mask
            if masked_may:
                check_masked_scores(scores, mask, q.dtype)
    if scores.shape[-1] == 0:  # no keys at all: nothing to attend to
        return scores, np.ones(scores.shape[:-1] + (1,), scores.dtype)
    return softmax_inplace(scores, normalise=normalise)  # in place: no (L, S) copies


def attention_backward(d_out, q, k, v, weights, scale, used=None, dropout=None):
    """``dQ, dK, dV`` of ``O = drop(P) V`` from the weights ``P`` of the forward pass.

    ``used`` is ``drop(P)``, what multiplied ``v`` (default ``weights``), and
    ``dropout`` the layer whose ``backward`` carries ``dP`` back through it.
    The result has the broadcast batch shape; callers sum over broadcast axes::

        dV = drop(P)^T dO,  dP = drop'(dO V^T),  dS = P * (dP - rowsum(dP * P)),
        dQ = scale dS K,    dK = scale dS^T Q
    """
    used = weights if used is None else used
    dV = np.swapaxes(used, -1, -2) @ d_out  # (..., S, Ev)
    dS = d_out @ np.swapaxes(v, -1, -2)  # dP, (..., L, S)
    if dropout is not None:
        dS = dropout.backward(dS)
    dS = softmax_backward(dS, weights, overwrite=True)  # in place: no second (L, S)
    dQ = (dS @ k) * scale  # (..., L, E)
    dK = (np.swapaxes(dS, -1, -2) @ q) * scale  # (..., S, E)
    return dQ, dK, dV


# The blocks of the blockwise forward and backward passes (blockwise.py, backward.py).


def block_sizes(block_size, query_block_size):
    """Checked ``(block_size, query_block_size)``; the second defaults to the first."""
    block_size = as_int(block_size, "block_size", minimum=1)
    if query_block_size is None:
        return block_size, block_size
    return block_size, as_int(query_block_size, "query_block_size", minimum=1)


def blocks(L, S, query_block_size, block_size, is_causal):
    """``(rows, [cols, ...])`` for each row of blocks of the ``(L, S)`` scores, as slices.

    Under a causal mask the blocks lying entirely above the diagonal are left out.
    """
    for i0 in range(0, L, query_block_size):
        i1 = min(i0 + query_block_size, L)
        last = min(S, i1) if is_causal else S  # keys a query of this block may see
        yield slice(i0, i1), [slice(j, min(j + block_size, S)) for j in range(0, last, block_size)]


def mask_block(mask, rows, cols):
    """The part of a mask broadcastable to ``(..., L, S)`` covering rows x cols."""
    if mask.ndim < 2:
        mask = mask.reshape((1,) * (2 - mask.ndim) + mask.shape)
    # An axis of length 1 broadcasts: it covers every block.
    return mask[
        ...,
        rows if mask.shape[-2] != 1 else slice(None),
        cols if mask.shape[-1] != 1 else slice(None),
    ]


def masked_block(s, mask, rows, cols, is_causal):
    """A block of scores with ``mask`` (boolean, or float and added) and the causal mask applied."""
    if mask is not None:
        block = mask_block(mask, rows, cols)
        s = np.where(block, s, -np.inf) if block.dtype.kind == "b" else s + block
    if is_causal and cols.stop - 1 > rows.start:  # the block crosses the diagonal
        allowed = np.arange(cols.start, cols.stop) <= np.arange(rows.start, rows.stop)[:, None]
        s = np.where(allowed, s, -np.inf)
    return s


_THREADS = {}  # the BLAS controller and the thread pool, made on first use


def _forget_threads_after_fork():
    """In a forked child, drop the parent's pool: its threads do not exist there.

    ``fork`` copies only the calling thread, but the copied executor still
    believes its workers are alive and idle, so work submitted to it in the
    child would wait forever. The next :func:`run_in_threads` builds a new
    pool (and a new BLAS controller) in the child.
    """
    _THREADS.clear()


if hasattr(os, "register_at_fork"):  # POSIX; Windows has no fork
    os.register_at_fork(after_in_child=_forget_threads_after_fork)


def run_in_threads(work, groups):
    """``work(some_groups)`` on as many threads (this one included) as BLAS has threads.

    The ``groups`` (independent pieces of one computation) are dealt out to
    ``n = min(len(groups), BLAS threads)`` shares: this thread takes the first
    and ``n - 1`` pool threads the others. While they run, BLAS uses one
    thread, so every product and every elementwise pass runs on a core of its
    own; a product on one BLAS thread gives the same bits as on several (the
    threads share out blocks of the output). With one BLAS thread, or one
    group, ``work(groups)`` runs here. An error in any share is raised here,
    after every share has finished. A process forked after the pool was
    made gets a pool of its own (the parent's threads do not survive a fork).
    """
    if not _THREADS:
        _THREADS["blas"] = ThreadpoolController().select(user_api="blas")
        _THREADS["pool"] = ThreadPoolExecutor(max(1, (os.cpu_count() or 1) - 1))
    blas = _THREADS["blas"]
    n = min([len(groups)] + [lib.num_threads for lib in blas.lib_controllers])
    if n < 2 or not blas.lib_controllers:
        return work(groups)
    with blas.limit(limits=1):
        others = [_THREADS["pool"].submit(work, groups[i::n]) for i in range(1, n)]
        try:
            work(groups[0::n])
        finally:
            for future in others:
                future.exception()  # wait for it (its error is raised below)
        for future in others:
            future.result()
