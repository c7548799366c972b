"""Scaled dot-product (QKV) attention.

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k) + M) V

Each query (a row of ``Q``) is compared with every key (a row of ``K``) by a
dot product; the scaled scores become weights through a softmax over the keys;
the output is the weighted average of the values (rows of ``V``).

The signature and conventions are those of PyTorch's
``torch.nn.functional.scaled_dot_product_attention``, so what a reader learns
here transfers unchanged. Shapes, with any number of broadcastable leading
batch axes ``...``::

    query (..., L, E)    key (..., S, E)    value (..., S, Ev)  ->  (..., L, Ev)
"""

import numpy as np

from ._checks import (as_bool, as_mask, as_numeric, as_scale, float_dtype,
                      max_abs, overflow_bound, require_finite, require_ndim)
from .masks import causal_mask

def _advice(dtype, what="pass smaller query or key, or a smaller scale"):
    """What to do about an overflow: rescale, or use float64 if not already."""
    if dtype == np.float64:
        return what + " (float64 is the widest dtype)"
    return what + ", or convert the inputs to float64"


def _attention_inputs(query, key, value, attn_mask, is_causal, scale):
    """Convert and check the arguments; return ``q, k, v, mask, scale``.

    ``mask`` is ``None``, a boolean array (True = may attend) or a float array
    to add to the scores, already checked to broadcast to ``(..., L, S)``.
    """
    q, k, v = (as_numeric(a, name) for a, name in
               ((query, "query"), (key, "key"), (value, "value")))
    dtype = float_dtype(q, k, v)
    q, k, v = (a.astype(dtype, copy=False) for a in (q, k, v))
    require_ndim(q, "query", 2, "(..., L, E)")
    require_ndim(k, "key", 2, "(..., S, E)")
    require_ndim(v, "value", 2, "(..., S, Ev)")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"query has {q.shape[-1]} features but key has {k.shape[-1]}: "
            f"the last axes must match")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"key has {k.shape[-2]} positions but value has {v.shape[-2]}: "
            f"every key needs one value (axis -2 must match)")
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
                f"scores' shape (..., L, S) = {scores_shape}")
        if mask.dtype.kind != "b":
            if np.isnan(mask).any() or np.isposinf(mask).any():
                raise ValueError("attn_mask contains NaN or +inf; use -inf or False to mask")
    if is_causal:
        causal = causal_mask(L, S)
        if mask is None:
            mask = causal
        elif mask.dtype.kind == "b":
            mask = mask & causal
        else:
            mask = np.where(causal, mask, -np.inf)

    if scale is None:
        scale = 1.0 / np.sqrt(q.shape[-1]) if q.shape[-1] else 1.0
    else:
        scale = as_scale(scale, "scale")
    if abs(scale) > float(np.finfo(dtype).max):
        raise ValueError(
            f"scale = {scale:.3g} overflows {dtype} (largest "
            f"{np.finfo(dtype).max:.3g}), so neither it nor the scores query @ "
            f"key.T * scale can be represented: " + _advice(dtype, "pass a smaller scale"))
    # Each output is a weighted sum of up to S values with weights <= 1 (the
    # normalisation may come last), so |value| * S must fit in the dtype.
    biggest = float(np.finfo(dtype).max)
    if overflow_bound(max_abs(v), max(S, 1)) > biggest / 2:
        raise ValueError(
            f"value holds magnitudes up to {max_abs(v):.3g}: the weighted sum "
            f"over S = {S} keys could overflow {dtype} (largest {biggest:.3g}): "
            + _advice(dtype, "scale value down (and the output back up)"))
    if mask is not None and mask.dtype.kind != "b":
        scores_bound = overflow_bound(max_abs(q), abs(scale), max_abs(k), max(q.shape[-1], 1))
        mask = _float_mask(mask, dtype, scores_bound)
    return q, k, v, mask, dtype.type(scale)


def _float_mask(mask, dtype, scores_bound, name="attn_mask"):
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
    row_best[np.isneginf(row_best)] = 0.0          # rows with nothing finite
    shifted = wide - row_best                      # <= 0 where finite
    lost = finite & (shifted < -biggest)
    if lost.any() and not float(-shifted[lost].max()) > 2 * scores_bound:
        raise ValueError(
            f"{name} holds finite biases up to {max_abs(mask[finite]):.3g} that differ "
            f"within a row by more than {dtype} can hold (largest {biggest:.3g}) while "
            f"the scores are large enough to matter: use -inf (or a boolean mask) to "
            f"mask, and finite biases well inside {biggest:.3g}, or float64 inputs")
    with np.errstate(over="ignore"):
        return shifted.astype(dtype)


def _overflow_risk(q, k, scale, mask):
    """Whether ``q @ k.T * scale (+ mask)`` could overflow; two Python floats.

    Returns ``(scores_may, masked_may)``: a cheap bound from the largest
    magnitudes, ``|q| |scale| |k| E``, so the exact (one pass over the
    scores) check runs only for inputs near the dtype's limit.
    """
    half = float(np.finfo(q.dtype).max) / 2
    scaled_q = overflow_bound(max_abs(q), abs(scale))
    bound = overflow_bound(scaled_q, max_abs(k), max(q.shape[-1], 1))
    scores_may = scaled_q > half or bound > half
    masked_may = scores_may
    if mask is not None and mask.dtype.kind == "f":
        finite = mask[np.isfinite(mask)]
        masked_may = scores_may or bound + max_abs(finite) > half
    return scores_may, masked_may


def _check_scores(scores, dtype):
    """Raise ``ValueError`` if the raw scores of finite inputs overflowed."""
    if not np.isfinite(scores).all():
        raise ValueError(
            f"the scores query @ key.T * scale overflow {dtype} (largest "
            f"{np.finfo(dtype).max:.3g}) although the inputs are finite: "
            + _advice(dtype))


def _check_masked_scores(scores, mask, dtype):
    """Raise if adding a float mask pushed finite scores past the dtype's range."""
    if not np.isfinite(scores).all() and (
            ~np.isfinite(scores) & np.isfinite(mask)).any():
        raise ValueError(
            f"adding attn_mask to the scores overflows {dtype}: use -inf (or a "
            f"boolean mask) to mask, and finite biases well inside "
            f"{np.finfo(dtype).max:.3g}")


def scaled_dot_product_attention(query, key, value, attn_mask=None,
                                 is_causal=False, scale=None,
                                 return_weights=False):
    """Scaled dot-product attention, ``softmax(Q K^T * scale + M) V``.

    Parameters
    ----------
    query : array_like, shape (..., L, E)
        Queries ``Q``: ``L`` rows of ``E = d_k`` features.
    key : array_like, shape (..., S, E)
        Keys ``K``: ``S`` rows, same feature size as the queries.
    value : array_like, shape (..., S, Ev)
        Values ``V``: one row of ``Ev = d_v`` features per key.
    attn_mask : array_like, optional
        Broadcastable to ``(..., L, S)``. Boolean: ``True`` means the query
        *may attend* to that key, ``False`` gives it zero weight. Floating:
        added to the scores (``-inf`` masks; other values bias). Integer
        masks are refused (a 0/1 mask would be added as a bias): pass
        ``mask.astype(bool)``. A ``(B, S)`` key-padding mask needs a query
        axis, ``mask[:, None, :]``; see the Notes.
    is_causal : bool, optional
        Apply :func:`causal_mask`: query ``i`` sees keys ``j <= i`` only.
        Combined with ``attn_mask`` if both are given (PyTorch refuses both).
    scale : float, optional
        Multiplies ``Q K^T``; defaults to ``1 / sqrt(E)``. One real number.
    return_weights : bool, optional
        Also return the attention weights.

    Returns
    -------
    output : ndarray, shape (..., L, Ev)
        Each row is the weighted average of the value rows.
    weights : ndarray, shape (..., L, S)
        Only with ``return_weights=True``. Non-negative; rows sum to 1.

    Raises
    ------
    TypeError
        If an input is not real numbers, ``attn_mask`` is neither boolean nor
        floating, ``scale`` is not one real number, or ``is_causal`` or
        ``return_weights`` is not a bool.
    ValueError
        If feature sizes, key/value lengths, batch axes or the mask's shape do
        not fit together (the message names them), an input holds NaN, or
        finite inputs are so large that the scores ``Q K^T * scale`` (plus a
        float mask) or the weighted sum of the values would overflow the
        dtype (the message says which and what to do).

    Notes
    -----
    The softmax subtracts each row's maximum, so large scores cannot overflow
    in ``exp``: scores of ``1e6`` give the same weights as scores of ``1``
    shifted. Only scores beyond the dtype's range (about ``3.4e38`` in
    float32, ``1.8e308`` in float64) cannot be represented; finite inputs
    that produce them raise ``ValueError`` instead of returning NaN or inf.

    A ``(B, S)`` key-padding mask (:func:`padding_mask`) passed as
    ``attn_mask`` with ``(B, L, E)`` queries is aligned from the right, as
    NumPy broadcasting always is: its batch axis meets the *query* axis
    ``L``. When ``B != L`` that is a shape error, but when ``B == L`` it
    broadcasts silently, sequence ``b``'s padding is applied to query ``b``
    of every sequence, and padded keys get weight. No check can tell this
    apart from a deliberate ``(L, S)`` mask, so give the mask its query axis
    yourself: ``attn_mask=mask[:, None, :]``, shape ``(B, 1, S)``.

    A query row with *nothing* to attend to (every key masked) gets all-zero
    weights and a zero output: a padded query that attends to nothing should
    contribute nothing, and a NaN would spread through everything computed
    from it. The literal formula gives NaN there (``0 / 0``), as do
    ``torch.softmax`` and PyTorch's attention before its 2024 "safe softmax"
    change; recent PyTorch versions (2.13 checked) return zeros too.

    float32 inputs give float32 results, float64 gives float64, float16 is
    computed in float32, integers in float64.

    Without a mask and without ``return_weights`` the normalisation is applied
    to the ``(L, Ev)`` output instead of the ``(L, S)`` weights, which saves a
    pass over the score matrix.

    Examples
    --------
    The causal self-attention example of the masks tutorial (chapter 5):

    >>> import numpy as np
    >>> from attention_lib import scaled_dot_product_attention
    >>> q = np.array([[1, 0, 0], [0, 1, 0]])
    >>> k = np.array([[1, 2, 3], [4, 5, 6]])
    >>> v = np.array([[0, 1, 0], [1, 0, 1]])
    >>> print(scaled_dot_product_attention(q, k, v, is_causal=True).round(8))
    [[0.         1.         0.        ]
     [0.84967455 0.15032545 0.84967455]]

    Broadcasting over a batch of 2 sequences, with weights:

    >>> rng = np.random.default_rng(0)
    >>> out, w = scaled_dot_product_attention(
    ...     rng.normal(size=(2, 4, 8)), rng.normal(size=(2, 6, 8)),
    ...     rng.normal(size=(2, 6, 3)), return_weights=True)
    >>> out.shape, w.shape, bool(np.allclose(w.sum(axis=-1), 1))
    ((2, 4, 3), (2, 4, 6), True)
    """
    return_weights = as_bool(return_weights, "return_weights")
    q, k, v, mask, scale = _attention_inputs(query, key, value, attn_mask,
                                             is_causal, scale)
    scores_may, masked_may = _overflow_risk(q, k, scale, mask)
    # Scale the (L, E) queries rather than the (L, S) scores: fewer multiplies.
    with np.errstate(over="ignore", invalid="ignore"):   # checked just below
        scores = (q * scale) @ np.swapaxes(k, -1, -2)        # (..., L, S)
    if scores_may:
        _check_scores(scores, q.dtype)
    if mask is not None:   # in place: the mask was checked to broadcast to scores
        full = np.broadcast_shapes(scores.shape, mask.shape)
        if scores.shape != full:   # batch axes that only value or the mask has
            scores = np.broadcast_to(scores, full).copy()
        if mask.dtype.kind == "b":
            np.copyto(scores, -np.inf, where=~mask)
        else:
            with np.errstate(over="ignore"):
                scores += mask
            if masked_may:
                _check_masked_scores(scores, mask, q.dtype)
    if scores.shape[-1] == 0:   # no keys at all: nothing to attend to
        weights = scores
    else:
        row_max = scores.max(axis=-1, keepdims=True)
        if mask is not None:   # rows that are all -inf: shift by 0, not -inf
            row_max[np.isneginf(row_max)] = 0.0
        scores -= row_max                                      # in place: no
        weights = np.exp(scores, out=scores)                   # (L, S) copies
    total = weights.sum(axis=-1, keepdims=True)
    total[total == 0] = 1.0            # fully masked rows stay all-zero
    if return_weights:
        weights /= total
        return weights @ v, weights
    return (weights @ v) / total
