"""Additive (Bahdanau) attention.

Bahdanau, Cho & Bengio (2015) score how well the decoder state ``s_{i-1}``
matches each encoder state ``h_j`` with a one-hidden-layer network:

    e_ij = v_a^T tanh(W_a s_{i-1} + U_a h_j)

then turn scores into weights ``alpha_ij = softmax_j(e_ij)`` and weights into
a context vector ``c_i = sum_j alpha_ij h_j``.

Layout (as in the book and the Bahdanau tutorial it reproduces): row vectors, so states are rows and the
weights multiply from the right. One matrix ``W`` of shape ``(2n, d_a)`` acts on
the concatenation ``[h_j ; s]``; its top half is ``U_a`` transposed (applied
to ``h_j``) and its bottom half is ``W_a`` transposed (applied to ``s``), because
``[h ; s] @ W = h @ W[:n] + s @ W[n:]``. Computing the two halves separately
means the encoder half is computed once, not once per decoder step.
"""

import numpy as np

from ._checks import as_float, float_dtype, as_numeric, require_finite
from .softmax import softmax


def _check_additive(encoder_states, decoder_state, W, v):
    arrays = [
        as_numeric(a, name)
        for a, name in (
            (encoder_states, "encoder_states"),
            (decoder_state, "decoder_state"),
            (W, "W"),
            (v, "v"),
        )
    ]
    dtype = float_dtype(*arrays)
    H, s, W, v = (a.astype(dtype, copy=False) for a in arrays)
    if H.ndim != 2:
        raise ValueError(f"encoder_states must be 2-D (K, n), got shape {H.shape}")
    if s.ndim not in (1, 2):
        raise ValueError(f"decoder_state must be (n,) or (T, n), got shape {s.shape}")
    n = H.shape[1]
    if s.shape[-1] != n:
        raise ValueError(
            f"decoder_state has {s.shape[-1]} features but encoder_states has "
            f"{n}: the last axes must match"
        )
    if W.ndim != 2 or W.shape[0] != 2 * n:
        raise ValueError(
            f"W must be (2n, d_a) = ({2 * n}, d_a) to act on [h_j ; s], got shape {W.shape}"
        )
    d_a = W.shape[1]
    if v.shape not in ((d_a,), (d_a, 1)):
        raise ValueError(f"v must be (d_a,) or (d_a, 1) with d_a = {d_a}, got shape {v.shape}")
    if H.shape[0] == 0:
        raise ValueError("encoder_states is empty: there is nothing to attend to")
    for a, name in ((H, "encoder_states"), (s, "decoder_state"), (W, "W"), (v, "v")):
        require_finite(a, name)
    return H, s, W, v.reshape(d_a)


def additive_scores(encoder_states, decoder_state, W, v):
    """Alignment scores ``e_ij = v^T tanh([h_j ; s_i] W)``.

    Parameters
    ----------
    encoder_states : array_like, shape (K, n)
        The encoder states ``h_1 .. h_K``, one per row.
    decoder_state : array_like, shape (n,) or (T, n)
        One decoder state ``s_{i-1}``, or ``T`` of them (one per row) to
        score every decoder step at once.
    W : array_like, shape (2n, d_a)
        First-layer weights acting on the concatenation ``[h_j ; s]``:
        rows ``:n`` are ``U_a``, rows ``n:`` are ``W_a``.
    v : array_like, shape (d_a,) or (d_a, 1)
        Second-layer weights ``v_a``.

    Returns
    -------
    ndarray, shape (K,) or (T, K)
        ``e[i, j]``: how well decoder state ``i`` matches encoder state ``j``.

    Raises
    ------
    TypeError
        If an input is not real numbers.
    ValueError
        If the shapes do not fit together (the message names them), an input
        holds NaN or infinity, or finite inputs are so large that a product
        overflows the dtype (the message says which).

    Examples
    --------
    The Bahdanau tutorial's example: ``np.random.seed(42)`` and its draw order.

    >>> import numpy as np
    >>> from attention_lib import additive_scores
    >>> np.random.seed(42)
    >>> H = np.random.randn(5, 16)      # K = 5 encoder states, n = 16
    >>> s = np.random.randn(1, 16)      # one decoder state
    >>> W = np.random.randn(32, 10)     # (2n, d_a), d_a = 10
    >>> v = np.random.randn(10, 1)
    >>> print(additive_scores(H, s, W, v).round(8))
    [[4.35790943 5.92373433 4.18673175 2.11437202 0.95767155]]
    """
    H, s, W, v = _check_additive(encoder_states, decoder_state, W, v)
    n = H.shape[1]
    with np.errstate(over="ignore", invalid="ignore"):  # checked below
        enc = H @ W[:n]  # (K, d_a): U_a h_j, once per encoder state
        dec = s @ W[n:]  # (d_a,) or (T, d_a): W_a s_{i-1}
    _require_no_overflow(enc, "encoder_states @ W[:n]")
    _require_no_overflow(dec, "decoder_state @ W[n:]")
    with np.errstate(over="ignore", invalid="ignore"):
        hidden, scores = projected_scores(enc, dec, v)  # (T, K, d_a), (T, K)
    _require_no_overflow(hidden, "decoder_state @ W[n:] + encoder_states @ W[:n]")
    _require_no_overflow(scores, "the scores tanh(...) @ v (v is too large)")
    return scores


def projected_scores(enc, dec, v):
    """The score's second layer, from the projected states: ``tanh(W_a s + U_a h_j) @ v``.

    :func:`additive_scores` and the learned layer
    :class:`attention_lib.nn.AdditiveAttention` both compute the score here,
    from projections they made themselves (the layer projects the encoder
    states once per sentence, not once per decoder step).

    Parameters
    ----------
    enc : ndarray, shape (..., K, d_a)
        The projected encoder states ``U_a h_j``.
    dec : ndarray, shape (..., d_a)
        The projected decoder state(s) ``W_a s_{i-1}``; leading axes
        broadcast against ``enc``'s.
    v : ndarray, shape (d_a,)

    Returns
    -------
    hidden : ndarray, shape (..., K, d_a)
        ``tanh(W_a s_{i-1} + U_a h_j)`` (a backward pass needs it).
    scores : ndarray, shape (..., K)
        ``e_ij``.
    """
    hidden = np.tanh(dec[..., None, :] + enc)
    return hidden, hidden @ v


def _require_no_overflow(arr, what):
    """Finite inputs gave a non-finite intermediate: say which, and what to do."""
    if not np.isfinite(arr).all():
        raise ValueError(
            f"{what} overflows {arr.dtype} (largest {np.finfo(arr.dtype).max:.3g}) "
            f"although the inputs are finite: scale the inputs down, or "
            f"convert them to float64"
        )


def additive_attention(encoder_states, decoder_state, W, v):
    """Bahdanau attention: context vectors and the weights that made them.

    ``alpha_ij = softmax_j(e_ij)`` and ``c_i = sum_j alpha_ij h_j``, with
    ``e_ij`` from :func:`additive_scores`.

    Parameters
    ----------
    encoder_states, decoder_state, W, v
        As for :func:`additive_scores`.

    Returns
    -------
    context : ndarray, shape (n,) or (T, n)
        The weighted average of the encoder states for each decoder state.
    weights : ndarray, shape (K,) or (T, K)
        The attention weights; each row is non-negative and sums to 1.

    Raises
    ------
    TypeError, ValueError
        As for :func:`additive_scores`.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib import additive_attention
    >>> np.random.seed(42)
    >>> H, s = np.random.randn(5, 16), np.random.randn(1, 16)
    >>> W, v = np.random.randn(32, 10), np.random.randn(10, 1)
    >>> context, weights = additive_attention(H, s, W, v)
    >>> context.shape, weights.shape
    ((1, 16), (1, 5))
    >>> print(context[0, :3].round(8))
    [-0.63514569  0.04917298 -0.43930867]
    """
    H = as_float(encoder_states, "encoder_states")
    weights = softmax(additive_scores(H, decoder_state, W, v), axis=-1)
    with np.errstate(over="ignore", invalid="ignore"):
        context = weights @ H.astype(weights.dtype, copy=False)
    _require_no_overflow(context, "the context weights @ encoder_states")
    return context, weights
