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

from ._checks import as_bool
from ._kernel import attention_inputs, attention_weights


def scaled_dot_product_attention(
    query, key, value, attn_mask=None, is_causal=False, scale=None, return_weights=False
):
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
    q, k, v, mask, scale = attention_inputs(query, key, value, attn_mask, is_causal, scale)
    weights, total = attention_weights(q, k, scale, mask, normalise=return_weights)
    if return_weights:
        return weights @ v, weights
    return (weights @ v) / total
