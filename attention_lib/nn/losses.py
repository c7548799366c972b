"""The loss a language model is trained on, with its gradient."""

import numpy as np
from numpy.typing import ArrayLike

from .._checks import as_numeric
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
