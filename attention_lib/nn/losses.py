"""The losses the book trains on, each with its gradient: a language model's
cross-entropy and an encoder's contrastive loss."""

import numpy as np
from numpy.typing import ArrayLike

from .._checks import as_numeric, float_dtype
from ..softmax import log_softmax


def softmax_cross_entropy(logits: ArrayLike, targets: ArrayLike) -> tuple[float, np.ndarray]:
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
    if z.ndim == 0 or z.shape[-1] == 0:
        raise ValueError(f"logits must have shape (..., C) with C >= 1 classes, got {z.shape}")
    t = as_numeric(targets, "targets")
    if t.dtype.kind not in "iu" or t.shape != z.shape[:-1]:
        raise ValueError(
            f"targets must be integers of shape {z.shape[:-1]} "
            f"(one class per row of logits), got {t.dtype} {t.shape}"
        )
    if t.size == 0:
        raise ValueError(
            "there are no targets: the mean loss of zero rows is undefined "
            "(NaN); pass at least one row"
        )
    if t.min() < 0 or t.max() >= z.shape[-1]:
        raise ValueError(f"targets must lie in [0, {z.shape[-1]})")
    if np.isnan(z).any() or np.isposinf(z).any():
        raise ValueError("logits contain NaN or +inf: the loss would be NaN")
    log_p = log_softmax(z, axis=-1)
    picked = np.take_along_axis(log_p, t[..., None], axis=-1)
    n = t.size
    grad = np.exp(log_p)
    np.put_along_axis(
        grad, t[..., None], np.take_along_axis(grad, t[..., None], axis=-1) - 1, axis=-1
    )
    return float(-picked.sum() / n), grad / n


def _unit_rows(x):
    """``x / max(|x|, 1e-12)`` row by row, as ``torch.nn.functional.normalize``, and the norms."""
    norm = np.sqrt((x * x).sum(axis=1, keepdims=True))
    return x / np.maximum(norm, 1e-12), norm


def _unit_rows_backward(du, u, norm):
    """The gradient of :func:`_unit_rows`: ``(du - u (u . du)) / |x|`` (``du / 1e-12`` below it)."""
    big = norm >= 1e-12
    along = (u * du).sum(axis=1, keepdims=True)
    return np.where(big, (du - u * along) / np.where(big, norm, 1.0), du / 1e-12)


def multiple_negatives_ranking_loss(
    anchors: ArrayLike, positives: ArrayLike, scale: float = 20.0
) -> tuple[float, np.ndarray, np.ndarray]:
    """The contrastive loss with in-batch negatives, and its gradients.

    sentence-transformers' ``MultipleNegativesRankingLoss`` (InfoNCE): anchor
    ``i``'s own positive must score higher than the other ``N - 1`` positives
    of the batch, which serve as its negatives. With ``u_i`` and ``v_j`` the
    L2-normalised rows, the scores are ``S_ij = scale cos(a_i, p_j) = scale
    u_i . v_j`` and the loss is the cross-entropy of each row of ``S``
    against its diagonal entry, averaged over the anchors.

    Parameters
    ----------
    anchors, positives : array_like, shape (N, d)
        Row ``i`` of each is a pair (two sentences that mean the same);
        embeddings as a model gives them, normalised or not.
    scale : float, optional
        The inverse temperature (default 20, sentence-transformers').

    Returns
    -------
    loss : float
    d_anchors, d_positives : ndarray, shape (N, d)
        ``d loss / d anchors`` and ``d loss / d positives``, in the inputs'
        floating dtype (computed in float64).

    Raises
    ------
    ValueError
        Shapes that differ or are not (N, d) with N >= 1, NaN or infinity in
        either (the step should be refused), a scale that is not positive
        and finite.

    Notes
    -----
    With ``P = softmax(S)`` row by row, ``dS = (P - I) / N``; then
    ``du = scale dS v`` and ``dv = scale dS^T u``, and each goes back through
    its normalisation: ``dx = (du - u (u . du)) / |x|`` (the component along
    ``u`` is lost, since scaling a row does not change its direction).

    To train an encoder on it, embed anchors and positives in one batch
    (``np.concatenate`` of the two, padded to one length) so that one
    forward pass holds what the backward needs, and pass
    ``np.concatenate([d_anchors, d_positives])`` to the encoder's backward.

    Examples
    --------
    Two pairs whose anchors point at their own positives, and one whose
    anchors are swapped:

    >>> import numpy as np
    >>> from attention_lib.nn import multiple_negatives_ranking_loss
    >>> a = np.array([[1.0, 0.0], [0.0, 2.0]])
    >>> print(f"{multiple_negatives_ranking_loss(a, a)[0]:.1e}")  # e^-20: nothing to learn
    2.1e-09
    >>> loss, da, dp = multiple_negatives_ranking_loss(a, a[::-1])
    >>> round(loss, 4), da.shape
    (20.0, (2, 2))
    """
    a, p = as_numeric(anchors, "anchors"), as_numeric(positives, "positives")
    dtype = float_dtype(a, p)  # float32 embeddings get float32 gradients
    a, p = a.astype(np.float64, copy=False), p.astype(np.float64, copy=False)
    if a.ndim != 2 or a.shape[0] == 0 or a.shape[1] == 0:
        raise ValueError(f"anchors must have shape (N, d) with N, d >= 1, got {a.shape}")
    if p.shape != a.shape:
        raise ValueError(
            f"positives has shape {p.shape} but anchors {a.shape}: one positive per anchor"
        )
    for name, x in (("anchors", a), ("positives", p)):
        if not np.isfinite(x).all():
            raise ValueError(f"{name} contain NaN or infinity: the loss would be NaN")
    if isinstance(scale, (bool, np.bool_)) or not isinstance(scale, (int, float, np.number)):
        raise TypeError(f"scale must be a number, got {scale!r}")
    if not (np.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be a positive finite number, got {scale!r}")
    u, nu = _unit_rows(a)
    v, nv = _unit_rows(p)
    S = scale * (u @ v.T)  # (N, N)
    loss, dS = softmax_cross_entropy(S, np.arange(len(S)))
    du, dv = scale * (dS @ v), scale * (dS.T @ u)
    d_a, d_p = _unit_rows_backward(du, u, nu), _unit_rows_backward(dv, v, nv)
    return loss, d_a.astype(dtype, copy=False), d_p.astype(dtype, copy=False)
