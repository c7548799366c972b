"""The softmax: turning scores into weights that are positive and sum to 1.

``softmax(x)_j = exp(x_j) / sum_k exp(x_k)``. Computed literally, ``exp``
overflows for scores above about 709 (float64) or 88 (float32) and the result
is ``inf / inf = nan``. Subtracting the row maximum first changes nothing
mathematically (the factor ``exp(-max)`` cancels) and makes the largest
exponent exactly ``exp(0) = 1``, so nothing can overflow.

A row whose scores are all ``-inf`` (every position masked) has no
well-defined softmax; the naive formula gives ``0 / 0 = nan``. Here such a
row gets all-zero weights, so that masked-out queries contribute nothing.
"""

import numpy as np

from ._checks import as_axis, as_float


def softmax(x, axis=-1):
    """Numerically stable softmax along one axis.

    Parameters
    ----------
    x : array_like
        Scores (logits). Any shape; integers are computed in float64,
        float32 stays float32. ``-inf`` marks a position that gets no weight.
    axis : int, optional
        The axis along which the weights sum to 1 (default: the last).

    Returns
    -------
    ndarray
        Same shape as ``x``. Non-negative; each slice along ``axis`` sums to 1,
        except slices that are entirely ``-inf``, which are all zeros.

    Raises
    ------
    TypeError
        If ``x`` is not real numbers, or ``axis`` is not an integer.
    ValueError
        If ``x`` contains NaN or ``+inf``, or ``axis`` is out of range.

    Notes
    -----
    The row maximum is subtracted before exponentiating, which leaves the
    result unchanged and prevents overflow: ``softmax([1e5, 0])`` is
    ``[1, 0]``, not ``[nan, 0]``. This holds for every finite input, up to
    the dtype's limit: ``x - max`` is at most 0, so ``exp`` never exceeds 1,
    and a difference too negative to represent becomes ``-inf``, whose
    weight (0) is what it would have rounded to anyway. Agrees with :func:`scipy.special.softmax`
    wherever that is defined; unlike it, fully ``-inf`` rows give zeros.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib import softmax
    >>> softmax(np.array([1.0, 2.0, 3.0]))
    array([0.09003057, 0.24472847, 0.66524096])
    >>> softmax(np.array([1e5, 0.0, -1e5]))
    array([1., 0., 0.])
    >>> softmax(np.array([[0.0, -np.inf], [-np.inf, -np.inf]]))
    array([[1., 0.],
           [0., 0.]])
    """
    x, axis = _scores(x, axis)
    if x.size == 0:
        return x.copy()
    if x.ndim == 0:  # one score: weight 1 (0 if it is masked with -inf)
        return softmax(x.reshape(1)).reshape(())
    return softmax_inplace(x.copy(), axis)[0]


def _scores(x, axis):
    """``x`` as floats without NaN or ``+inf``, and ``axis`` checked against it."""
    x = as_float(x, "x")
    if not (x < np.inf).all():  # one pass: NaN and +inf are not below inf
        raise ValueError("x contains NaN or +inf: softmax needs finite scores or -inf")
    try:
        axis = as_axis(axis, x.ndim)
    except ValueError:
        raise ValueError(f"axis {axis} is out of range for x of shape {x.shape}") from None
    return x, axis


def softmax_inplace(scores, axis=-1, normalise=True):
    """The softmax of ``scores`` written over it: no checks, no copies.

    For the attention kernel, whose (L, S) scores are large and already
    checked (floats, no NaN or ``+inf``). Returns ``(weights, total)``, the
    row sums kept; with ``normalise=False`` the rows are left unnormalised
    (``exp(s - max)``) and the caller divides something smaller by ``total``.
    Rows that are all ``-inf`` give zeros and a total of 1.
    """
    row_max = np.max(scores, axis=axis, keepdims=True)
    row_max[np.isneginf(row_max)] = 0  # all -inf: shift by 0, not by -inf (nan)
    scores -= row_max
    weights = np.exp(scores, out=scores)
    total = np.sum(weights, axis=axis, keepdims=True)
    total[total == 0] = 1  # all-masked rows: 0 / 1 = 0, not 0 / 0
    if normalise:
        weights /= total
    return weights, total


def logsumexp(x, axis=-1, keepdims=False):
    """``log(sum(exp(x)))`` along one axis, without overflow.

    Parameters
    ----------
    x : array_like
        Scores; ``-inf`` marks a masked position, as in :func:`softmax`.
    axis : int, optional
        The axis summed over (default: the last).
    keepdims : bool, optional
        Keep ``axis`` with length 1.

    Returns
    -------
    ndarray
        ``max + log(sum(exp(x - max)))``; ``-inf`` for a slice that is all
        ``-inf`` (the log of an empty sum), as :func:`scipy.special.logsumexp`.

    Raises
    ------
    TypeError, ValueError
        As :func:`softmax`.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib import logsumexp
    >>> float(logsumexp(np.array([1000.0, 1000.0])))       # 1000 + log 2
    1000.6931471805599
    >>> logsumexp(np.array([[0.0, -np.inf], [-np.inf, -np.inf]]))
    array([  0., -inf])
    """
    x, axis = _scores(x, axis)
    if x.ndim == 0:  # one score: its own log-sum-exp
        return x.copy()
    row_max = np.max(x, axis=axis, keepdims=True, initial=-np.inf)
    row_max[np.isneginf(row_max)] = 0
    with np.errstate(divide="ignore"):  # log(0) = -inf for all-masked slices
        out = row_max + np.log(np.sum(np.exp(x - row_max), axis=axis, keepdims=True))
    return out if keepdims else np.squeeze(out, axis=axis)


def log_softmax(x, axis=-1):
    """``log(softmax(x))``, computed as ``x - max - log(sum(exp(x - max)))``.

    Exact where :func:`softmax` underflows to 0 (``log_softmax([0, -1000])``
    is ``[0, -1000]``). A slice that is all ``-inf`` gives ``-inf`` everywhere,
    the log of :func:`softmax`'s zeros (:func:`scipy.special.log_softmax`
    gives NaN there).

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib import log_softmax
    >>> log_softmax(np.array([0.0, -1000.0]))
    array([    0., -1000.])
    >>> log_softmax(np.array([-np.inf, -np.inf]))
    array([-inf, -inf])
    """
    x, axis = _scores(x, axis)
    if x.ndim == 0:  # one score: log 1 = 0, or -inf if it is masked
        return log_softmax(x.reshape(1)).reshape(())
    row_max = np.max(x, axis=axis, keepdims=True, initial=-np.inf)
    row_max[np.isneginf(row_max)] = 0
    shifted = x - row_max
    with np.errstate(divide="ignore"):
        log_total = np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))
    log_total[np.isneginf(log_total)] = 0  # all -inf: stay -inf, not nan
    return shifted - log_total


def softmax_backward(grad_weights, weights, axis=-1, overwrite=False):
    """The gradient through a softmax, from its output and the output's gradient.

    With ``P = softmax(S)`` and ``dP = d loss / d P``, the softmax's Jacobian
    applied row by row gives ``dS = P * (dP - sum(dP * P))``, the sum along
    ``axis``: each score's gradient is its weight times how much its own
    ``dP`` exceeds the weighted average of the row's.

    Parameters
    ----------
    grad_weights : ndarray
        ``d loss / d P``, the same shape as ``weights``.
    weights : ndarray
        The softmax's output ``P``.
    axis : int, optional
        The axis the softmax normalised (default -1).
    overwrite : bool, optional
        Write the result over ``grad_weights`` (a float array, ``axis=-1``):
        no second array the size of the weights, for attention's long rows.

    Returns
    -------
    ndarray
        ``d loss / d S``, the gradient with respect to the scores.

    Examples
    --------
    A gradient that is the same for every weight of a row moves no score,
    since the weights always sum to 1:

    >>> import numpy as np
    >>> P = softmax(np.array([1.0, 2.0, 3.0]))
    >>> softmax_backward(np.full(3, 5.0), P).round(12)
    array([0., 0., 0.])
    """
    if not overwrite:
        return weights * (grad_weights - (grad_weights * weights).sum(axis=axis, keepdims=True))
    grad_weights -= np.einsum("...ij,...ij->...i", grad_weights, weights)[..., None]
    grad_weights *= weights
    return grad_weights
