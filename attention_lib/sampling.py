"""The distribution a language model samples its next token from: temperature, top-k, top-p.

A model gives one score (logit) per token of its vocabulary; ``generate`` turns
them into probabilities and draws the next token. Three knobs reshape those
probabilities first, in this order (as PyTorch's and Hugging Face's samplers do):

- **temperature** :math:`\\tau`: ``softmax(z / tau)``; below 1 sharper, above 1
  flatter, and 0 means "always the most likely token" (greedy);
- **top-k**: keep the ``k`` most likely tokens;
- **top-p** (nucleus sampling): keep the smallest set of most likely tokens
  whose probabilities add up to at least ``p`` (always at least one).

The kept tokens' probabilities are renormalised to sum to 1.
:func:`sampling_probabilities` gives the distribution ``TinyGPT.generate`` draws
from (it uses :func:`filter_logits`, below), for any
batch shape, with its arguments checked.
"""

import numpy as np

from ._checks import as_float, as_int
from .softmax import softmax


def sampling_probabilities(logits, temperature=1.0, top_k=None, top_p=None):
    """The probabilities of the next token after temperature, top-k and top-p.

    Parameters
    ----------
    logits : array_like, shape (..., V)
        One score per token of a vocabulary of V tokens (last axis).
    temperature : float, optional
        ``tau >= 0``: the logits are divided by it (default 1); 0 puts all the
        probability on the largest logit (the first, in a tie). A logit of
        ``-inf`` is a masked token (probability 0), as in PyTorch's and Hugging
        Face's samplers; NaN, ``+inf`` or a row without a finite logit is a
        ``ValueError`` (:func:`check_logits`). A temperature
        so small that ``logits / temperature`` is not finite (``1e-320``) is
        refused with a ``ValueError`` naming it, before any softmax.
    top_k : int, optional
        Keep only the ``top_k >= 1`` most likely tokens (ties at the k-th
        value are all kept, as in PyTorch).
    top_p : float, optional
        Keep only the smallest set of most likely tokens whose probability
        (after temperature and top-k) reaches ``top_p``, in (0, 1].

    Returns
    -------
    ndarray, shape (..., V)
        Probabilities summing to 1 along the last axis; 0 for dropped tokens.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.sampling import sampling_probabilities
    >>> z = np.log([0.5, 0.3, 0.15, 0.05])
    >>> sampling_probabilities(z).round(3)
    array([0.5 , 0.3 , 0.15, 0.05])
    >>> sampling_probabilities(z, top_k=2).round(3)
    array([0.625, 0.375, 0.   , 0.   ])
    >>> sampling_probabilities(z, top_p=0.9).round(3)      # 0.5 + 0.3 < 0.9: three kept
    array([0.526, 0.316, 0.158, 0.   ])
    >>> sampling_probabilities(z, temperature=0)
    array([1., 0., 0., 0.])
    """
    z = as_float(logits, "logits")
    if z.ndim < 1 or z.shape[-1] < 1:
        raise ValueError(
            f"logits must have at least one token on the last axis, got shape {z.shape}"
        )
    temperature = float(temperature)
    if not np.isfinite(temperature) or temperature < 0:
        raise ValueError(f"temperature must be a finite number >= 0, got {temperature}")
    if top_k is not None:
        top_k = as_int(top_k, "top_k", 1)
    if top_p is not None:
        top_p = float(top_p)
        if not 0 < top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    check_logits(z)
    if temperature == 0:
        return np.eye(z.shape[-1], dtype=z.dtype)[z.argmax(axis=-1)]
    flat = scaled_logits(z.reshape(-1, z.shape[-1]), temperature)  # a weak scalar: z.dtype
    # The same filter TinyGPT.generate samples through.
    p = softmax(filter_logits(flat, top_k, top_p), axis=-1)
    return p.reshape(z.shape)


def entropy(p, axis=-1):
    """Entropy in nats, ``-sum p log p`` over ``axis`` (0 log 0 counts as 0).

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.sampling import entropy
    >>> float(entropy(np.full(4, 0.25))) == float(np.log(4))
    True
    """
    p = as_float(p, "p")
    logp = np.log(np.where(p > 0, p, 1))
    return -(p * logp).sum(axis=axis)


def filter_logits(z, top_k=None, top_p=None):
    """Set to ``-inf`` the logits outside the top ``k`` and outside the nucleus ``top_p``.

    Parameters
    ----------
    z : ndarray, shape (B, V)
        Logits, already divided by the temperature.
    top_k : int, optional
        Keep the ``top_k`` largest logits of each row (ties with the k-th kept too).
    top_p : float in [0, 1], optional
        Then keep the smallest set of most likely tokens whose probabilities
        (of the softmax of what ``top_k`` kept) reach ``top_p``: a token is
        kept when the tokens more likely than it add up to less than
        ``top_p``, so the most likely one always stays.

    Examples
    --------
    >>> import numpy as np
    >>> z = np.log(np.array([[0.5, 0.3, 0.15, 0.05]]))
    >>> np.isfinite(filter_logits(z, top_p=0.7)).tolist()     # 0.5 + 0.3 reaches 0.7
    [[True, True, False, False]]
    """
    if top_k is not None:
        kth = np.sort(z, axis=-1)[:, -min(top_k, z.shape[-1])][:, None]
        z = np.where(z < kth, -np.inf, z)
    if top_p is not None and top_p < 1:
        order = np.argsort(-z, axis=-1, kind="stable")  # most likely first
        p_sorted = np.take_along_axis(softmax(z, axis=-1), order, axis=-1)
        before = np.cumsum(p_sorted, axis=-1) - p_sorted  # mass of the likelier ones
        drop_sorted = before >= top_p
        drop_sorted[:, 0] = False  # always keep one
        drop = np.empty_like(drop_sorted)
        np.put_along_axis(drop, order, drop_sorted, axis=-1)
        z = np.where(drop, -np.inf, z)
    return z


def check_logits(logits):
    """Refuse logits a sampler cannot draw from; ``-inf`` (a masked token) is accepted.

    NaN, ``+inf``, and a row whose every logit is ``-inf`` (nothing left to
    draw) are each a ``ValueError`` saying which.

    Examples
    --------
    >>> import numpy as np
    >>> check_logits(np.array([[0.5, -np.inf, 1.0]]))   # a masked token: fine
    >>> check_logits(np.array([[-np.inf, -np.inf]]))
    Traceback (most recent call last):
    ...
    ValueError: row 0 of the model's logits has no finite logit: every token is masked (-inf), so there is nothing to sample
    """
    if np.isfinite(logits).all():
        return
    if np.isnan(logits).any():
        raise ValueError("the model's logits contain NaN")
    if np.isposinf(logits).any():
        raise ValueError("the model's logits contain +inf (a masked token is -inf)")
    rows = np.isfinite(logits).any(axis=-1).reshape(-1)
    if not rows.all():
        raise ValueError(
            f"row {int(np.argmin(rows))} of the model's logits has no finite logit: every "
            f"token is masked (-inf), so there is nothing to sample"
        )


def scaled_logits(logits, temperature):
    """``logits / temperature``, refused when it overflows (the rule the JS runtime follows).

    A ``-inf`` logit (a masked token) stays ``-inf``; NaN, ``+inf`` or a row
    without a finite logit is refused by :func:`check_logits`. A temperature
    so small that the division of a finite logit overflows (``1e-320``, a
    subnormal, overflows every logit above about 1e-12) is a ``ValueError``
    naming ``temperature``, not a NaN inside the softmax.
    """
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        z = logits / temperature
    if not np.isfinite(z).all():
        check_logits(logits)
        if (np.isfinite(logits) & ~np.isfinite(z)).any():
            raise ValueError(
                f"temperature = {temperature!r} is too small: logits / temperature "
                f"overflows {z.dtype}; use temperature=0 for greedy decoding"
            )
    return z


def inverse_cdf(p, u):
    """For each row of ``p`` (B, V) and draw ``u`` (B, 1) in [0, 1): the first token whose
    cumulative probability exceeds ``u``; never a token of probability 0.

    Examples
    --------
    >>> import numpy as np
    >>> p = np.array([[0.0, 0.5, 0.0, 0.5, 0.0]])
    >>> [int(inverse_cdf(p, np.array([[u]]))[0]) for u in (0.0, 0.49, 0.5, 0.9999999999999999)]
    [1, 1, 3, 3]
    """
    c = p.cumsum(axis=-1)
    idx = (c <= u).sum(axis=-1)
    V = p.shape[-1]
    over = idx >= V  # rounding left the total below u: the last token that can be drawn
    if over.any():
        last = V - 1 - np.argmax(p[:, ::-1] > 0, axis=-1)
        idx = np.where(over, last, idx)
    return idx
