"""Masks: which keys each query may attend to.

A mask here is boolean and means what PyTorch's
``scaled_dot_product_attention`` means by it: ``True`` = *may attend*.
Masked scores are set to ``-inf`` before the softmax, so they get exactly
zero weight.
"""

import numpy as np

from ._checks import as_int


def causal_mask(L, S=None):
    """Boolean ``(L, S)`` mask letting query ``i`` attend to keys ``j <= i``.

    Used for causal (masked) self-attention, where position ``i`` must not
    see the future positions ``i + 1, i + 2, ...``. The diagonal is aligned
    at the top left, as in PyTorch's ``is_causal=True``.

    Parameters
    ----------
    L : int
        Number of queries (rows).
    S : int, optional
        Number of keys (columns); defaults to ``L``.

    Returns
    -------
    ndarray of bool, shape (L, S)
        ``True`` where query ``i`` may attend to key ``j``, that is ``j <= i``.

    Examples
    --------
    >>> from attention_lib import causal_mask
    >>> causal_mask(3).astype(int)
    array([[1, 0, 0],
           [1, 1, 0],
           [1, 1, 1]])
    >>> causal_mask(2, 4).astype(int)
    array([[1, 0, 0, 0],
           [1, 1, 0, 0]])
    """
    L = as_int(L, "L")
    S = L if S is None else as_int(S, "S")
    return np.tril(np.ones((L, S), dtype=bool))


def padding_mask(lengths, S=None):
    """Boolean key-padding masks for a batch of sequences of different lengths.

    Sequences in a batch are padded to a common length ``S``; the padding
    positions must receive no attention.

    Parameters
    ----------
    lengths : sequence of int, shape (B,)
        The true length of each sequence.
    S : int, optional
        The padded length; defaults to ``max(lengths)``.

    Returns
    -------
    ndarray of bool, shape (B, S)
        ``True`` at real positions ``j < lengths[b]``, ``False`` at padding.
        To use it as ``attn_mask`` for queries of shape ``(B, L, E)``, give it
        a query axis: ``padding_mask(lengths)[:, None, :]``. Passed without
        one it broadcasts silently when ``B == L``, masking the wrong keys
        (see :func:`scaled_dot_product_attention`). An empty batch
        (``lengths=[]``) gives a ``(0, S)`` mask.

    Raises
    ------
    TypeError
        If ``lengths`` is not a 1-D sequence of integers.
    ValueError
        If a length is negative, exceeds ``S``, or is too large to index.

    Examples
    --------
    >>> from attention_lib import padding_mask
    >>> padding_mask([3, 1, 2]).astype(int)
    array([[1, 1, 1],
           [1, 0, 0],
           [1, 1, 0]])
    """
    lengths = np.asarray(lengths)
    if lengths.ndim == 1 and lengths.size == 0:  # an empty batch: [] is float64
        lengths = lengths.astype(np.int64)
    if lengths.ndim != 1 or lengths.dtype.kind not in "iu":
        raise TypeError(
            f"lengths must be a 1-D sequence of integers, got {lengths.dtype} "
            f"array of shape {lengths.shape}"
        )
    if (lengths < 0).any():
        raise ValueError(f"lengths must be non-negative, got {lengths.tolist()}")
    # uint64 lengths beyond int64 would wrap round in the comparison below.
    if lengths.size and int(lengths.max()) > np.iinfo(np.intp).max:
        raise ValueError(
            f"lengths are too large to index an array: the "
            f"largest is {int(lengths.max())}, above "
            f"{np.iinfo(np.intp).max}"
        )
    lengths = lengths.astype(np.intp)
    S = int(lengths.max(initial=0)) if S is None else as_int(S, "S")
    if (lengths > S).any():
        raise ValueError(f"lengths {lengths.tolist()} exceed the padded length S={S}")
    return np.arange(S) < lengths[:, None]
