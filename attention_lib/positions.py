"""Word order: telling attention where each position is.

Attention compares every query with every key and never looks at where they
sit, so on its own it cannot tell "dog bites man" from "man bites dog". Three
ways of giving it positions:

- :func:`sinusoidal_positions`: a fixed vector per position, added to the
  word vectors (Vaswani et al., 2017, section 3.5);
- :func:`rotary`: rotate queries and keys by an angle proportional to their
  position, so their dot product depends on the *distance* between them
  (Su et al., 2021, RoFormer);
- :func:`alibi_bias`: no vectors at all, a float mask that lowers each score
  in proportion to the distance (Press et al., 2022, ALiBi).
"""

import numbers

import numpy as np

from ._checks import as_int, as_numeric


def _even(d, name):
    d = as_int(d, name, minimum=1)
    if d % 2:
        raise ValueError(f"{name} must be even (features come in sin/cos pairs), got {d}")
    return d


def _base(base):
    if isinstance(base, (bool, np.bool_)) or not isinstance(base, numbers.Real):
        raise TypeError(f"base must be a real number, got {base!r}")
    if not (np.isfinite(base) and base > 0):
        raise ValueError(f"base must be positive and finite, got {base!r}")
    return float(base)


def _frequencies(d, base):
    """``base^(-2i/d)`` for ``i = 0 .. d/2 - 1``: one angular speed per pair."""
    return base ** (-np.arange(0, d, 2) / d)


def sinusoidal_positions(L, d, base=10000.0):
    """Sinusoidal position encodings, one row per position.

    ``PE[p, 2i] = sin(p / base^(2i/d))`` and
    ``PE[p, 2i+1] = cos(p / base^(2i/d))``.

    Parameters
    ----------
    L : int
        Number of positions ``p = 0 .. L-1``.
    d : int
        Feature size; must be even (each frequency gives a sin and a cos).
    base : float, optional
        Sets the slowest frequency: the pair ``i`` has wavelength
        ``2 pi base^(2i/d)``, from ``2 pi`` up to almost ``2 pi base``.

    Returns
    -------
    ndarray of float64, shape (L, d)

    Raises
    ------
    TypeError
        If ``L`` or ``d`` is not an integer, or ``base`` not a real number.
    ValueError
        If ``d`` is odd or not positive, ``L`` negative, ``base`` not
        positive.

    Notes
    -----
    Vaswani et al. (2017), section 3.5. Every row has norm ``sqrt(d / 2)``
    (each pair is a point on the unit circle), and the dot product of two
    rows, ``sum_i cos((p - q) / base^(2i/d))``, depends only on ``p - q``.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib import sinusoidal_positions
    >>> pe = sinusoidal_positions(3, 4)
    >>> print(np.round(pe, 4))
    [[ 0.      1.      0.      1.    ]
     [ 0.8415  0.5403  0.01    1.    ]
     [ 0.9093 -0.4161  0.02    0.9998]]
    """
    L = as_int(L, "L")
    d = _even(d, "d")
    angles = np.arange(L)[:, None] * _frequencies(d, _base(base))  # (L, d/2)
    pe = np.empty((L, d))
    pe[:, 0::2] = np.sin(angles)
    pe[:, 1::2] = np.cos(angles)
    return pe


def rotary(x, positions=None, base=10000.0, layout="interleaved"):
    """Rotary position embedding (RoPE) of queries or keys.

    The feature pair ``(x[..., p, 2i], x[..., p, 2i+1])`` of the vector at
    position ``p`` is rotated by the angle ``p * base^(-2i/d)``.

    Parameters
    ----------
    x : array_like, shape (..., L, d)
        Queries or keys, one vector per row; ``d`` must be even.
    positions : array_like, optional
        The position of each row, broadcastable to ``x.shape[:-1]`` (e.g.
        shape ``(L,)``); real numbers. Defaults to ``0, 1, ..., L-1``.
    base : float, optional
        Sets the frequencies, as in :func:`sinusoidal_positions`.
    layout : {"interleaved", "half"}, optional
        Which features make a pair: neighbours ``(2i, 2i+1)`` (default, as
        RoFormer, Meta's Llama and llama2.c), or ``(i, i + d/2)`` (GPT-NeoX,
        Hugging Face's Llama: "rotate half"). See the Notes.

    Returns
    -------
    ndarray, shape (..., L, d)
        Floating inputs keep their dtype; integers give float64.

    Raises
    ------
    TypeError
        If ``x`` or ``positions`` is not real numbers, or ``base`` is not a
        real number.
    ValueError
        If ``x`` has fewer than two axes or an odd last axis, ``positions``
        does not broadcast to ``x.shape[:-1]``, or an input is not finite.

    Notes
    -----
    Su et al. (2021). A rotation by ``a`` followed by the transpose of a
    rotation by ``b`` is a rotation by ``a - b``, so for a query at position
    ``m`` and a key at position ``n``::

        rotary(q, [m]) . rotary(k, [n]) = q . R((n - m) theta) k

    depends on ``m - n`` only, not on ``m`` and ``n`` themselves. Rotations
    keep lengths: ``|rotary(x)| = |x|``.

    **Two pairings.** By default this function pairs neighbouring features
    ``(2i, 2i+1)``, as the RoFormer paper and Meta's Llama code do. Some
    libraries (GPT-NeoX, Hugging Face's LLaMA, the "rotate half" form) pair
    feature ``i`` with ``i + d/2`` instead (``layout="half"``), with the same
    angle ``p * base^(-2i/d)``. The two
    differ only by a fixed permutation of the features, applied to queries
    and keys alike, so dot products and the relative-position property are
    the same; but weights trained with one pairing must be permuted before
    they work with the other.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib import rotary
    >>> print(rotary(np.array([[1.0, 0.0], [1.0, 0.0]])).round(4))
    [[1.     0.    ]
     [0.5403 0.8415]]

    The score of a query at 7 and a key at 3 equals that of 5 and 1:

    >>> rng = np.random.default_rng(0)
    >>> q, k = rng.normal(size=(2, 1, 8))
    >>> s73 = rotary(q, [7]) @ rotary(k, [3]).T
    >>> s51 = rotary(q, [5]) @ rotary(k, [1]).T
    >>> bool(np.allclose(s73, s51))
    True
    """
    if layout not in ("interleaved", "half"):
        raise ValueError(f'layout must be "interleaved" or "half", got {layout!r}')
    x = as_numeric(x, "x")
    if x.dtype.kind != "f":
        x = x.astype(np.float64)
    elif x.dtype == np.float16:
        x = x.astype(np.float32)
    if x.ndim < 2:
        raise ValueError(f"x must have at least 2 axes (..., L, d), got shape {x.shape}")
    d = _even(x.shape[-1], "x.shape[-1] (the feature size d)")
    if not np.isfinite(x).all():
        raise ValueError("x contains NaN or infinity")
    L = x.shape[-2]
    if positions is None:
        pos = np.arange(L, dtype=np.float64)
    else:
        pos = as_numeric(positions, "positions").astype(np.float64)
        try:
            np.broadcast_shapes(pos.shape, x.shape[:-1])
            fits = len(pos.shape) <= len(x.shape[:-1])
        except ValueError:
            fits = False
        if not fits or np.broadcast_shapes(pos.shape, x.shape[:-1]) != x.shape[:-1]:
            raise ValueError(
                f"positions of shape {pos.shape} must broadcast to "
                f"x.shape[:-1] = {x.shape[:-1]} (one position per row)"
            )
        if not np.isfinite(pos).all():
            raise ValueError("positions contains NaN or infinity")
    return rotate_pairs(x, *rotary_tables(pos, d, base, x.dtype), layout)


def rotary_tables(positions, d, base=10000.0, dtype=np.float64):
    """``cos`` and ``sin`` of rotary's angles ``p * base^(-2i/d)``: shape (..., L, d/2) each.

    Computed in float64 and then cast to ``dtype``, so that a layer can
    compute them once and rotate with :func:`rotate_pairs` at every call.
    """
    angles = np.asarray(positions, dtype=np.float64)[..., None] * _frequencies(d, _base(base))
    return np.cos(angles).astype(dtype), np.sin(angles).astype(dtype)


def rotate_pairs(x, cos, sin, layout="interleaved"):
    """Rotate the feature pairs of ``x`` (..., L, d) by the angles of :func:`rotary_tables`.

    No checks (:func:`rotary` makes them). Passing ``-sin`` rotates back: the
    gradient of a rotation is the rotation by the opposite angle.
    """
    d = x.shape[-1]
    first, second = (
        (slice(0, None, 2), slice(1, None, 2))
        if layout == "interleaved"
        else (slice(0, d // 2), slice(d // 2, None))
    )
    a, b = x[..., first], x[..., second]
    out = np.empty(np.broadcast_shapes(x.shape, cos.shape[:-1] + (d,)), dtype=x.dtype)
    out[..., first] = a * cos - b * sin
    out[..., second] = a * sin + b * cos
    return out


def alibi_slopes(num_heads):
    """ALiBi's per-head slopes ``m_h``, a geometric sequence.

    For ``H`` a power of two, ``m_h = 2^(-8 (h+1) / H)``, ``h = 0 .. H-1``.
    Otherwise the paper's rule: the slopes for the largest power of two
    ``n < H``, followed by every other slope of the ``2n``-head sequence
    (its odd-numbered ones, ``2^(-4 (2j+1) / n)``) until there are ``H``.

    Parameters
    ----------
    num_heads : int
        ``H``, at least 1.

    Returns
    -------
    ndarray of float64, shape (H,)

    Examples
    --------
    >>> from attention_lib import alibi_slopes
    >>> alibi_slopes(8).tolist()
    [0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625]
    >>> alibi_slopes(6).round(4).tolist()
    [0.25, 0.0625, 0.0156, 0.0039, 0.5, 0.125]
    """
    H = as_int(num_heads, "num_heads", minimum=1)
    n = 1 << (H.bit_length() - 1)  # largest power of 2 <= H
    slopes = 2.0 ** (-8.0 * np.arange(1, n + 1) / n)
    if n == H:
        return slopes
    extra = 2.0 ** (-8.0 * np.arange(1, 2 * n + 1) / (2 * n))[0::2]
    return np.concatenate([slopes, extra[: H - n]])


def alibi_bias(num_heads, L, S=None):
    """ALiBi's linear distance penalty, as a float attention mask.

    ``bias[h, i, j] = -m_h * (i - j)`` where key ``j`` is at or before query
    ``i``, and ``-inf`` after it (ALiBi is causal).

    Parameters
    ----------
    num_heads : int
        ``H``; head ``h`` gets the slope ``m_h`` of :func:`alibi_slopes`.
    L : int
        Number of queries.
    S : int, optional
        Number of keys; defaults to ``L``. As in
        :func:`~attention_lib.causal_mask`, query ``i`` sees keys ``j <= i``
        (the diagonal starts at the top left).

    Returns
    -------
    ndarray of float64, shape (H, L, S)
        Add it to the scores: pass it as ``attn_mask`` to
        :func:`~attention_lib.scaled_dot_product_attention` with ``(..., H,
        L, d)`` queries, or reshaped to ``(N * H, L, S)`` (by ``np.tile``) to
        :class:`~attention_lib.MultiHeadAttention`.

    Raises
    ------
    TypeError
        If a size is not an integer.
    ValueError
        If ``num_heads`` is not positive or ``L``, ``S`` are negative.

    Notes
    -----
    Press et al. (2022). No position vectors are added anywhere: each head
    prefers nearby keys, with its own slope, so some heads look far and
    some look close.

    Examples
    --------
    >>> from attention_lib import alibi_bias
    >>> print(alibi_bias(2, 3))
    [[[ 0.                -inf        -inf]
      [-0.0625      0.                -inf]
      [-0.125      -0.0625      0.        ]]
    <BLANKLINE>
     [[ 0.                -inf        -inf]
      [-0.00390625  0.                -inf]
      [-0.0078125  -0.00390625  0.        ]]]
    """
    H = as_int(num_heads, "num_heads", minimum=1)
    L = as_int(L, "L")
    S = L if S is None else as_int(S, "S")
    offset = np.arange(S)[None, :] - np.arange(L)[:, None]  # j - i
    bias = alibi_slopes(H)[:, None, None] * offset  # -m (i - j)
    bias[:, offset > 0] = -np.inf
    return bias


_ROPE_SCALINGS = ("linear", "ntk")


def rope_scaling(kind, factor, d, base=10000.0):
    """Stretch rotary positions to ``factor`` times the trained length: ``(divisor, base)``.

    Rotary's angles are ``(p / divisor) * base'^(-2i/d)``; the two ways of
    reaching positions the model never saw change one or the other:

    - ``"linear"``, position interpolation (Chen et al., 2023): every
      position is divided by ``factor``, so ``factor`` times the trained
      length is squeezed into the angles the model was trained on (and
      neighbours come ``factor`` times closer);
    - ``"ntk"``, NTK-aware scaling (bloc97, 2023): the positions are kept and
      the base grows to ``base * factor^(d / (d - 2))``, which leaves the
      fastest pair (the local detail) almost unchanged and slows the slowest
      one by ``factor``, so it too stays inside the angles it was trained on.

    Parameters
    ----------
    kind : {"linear", "ntk"}
    factor : float
        How many times the trained length to reach; positive and finite.
    d : int
        The head size (even).
    base : float, optional
        The trained rotary base.

    Returns
    -------
    divisor, base : float
        Rotate position ``p`` by ``(p / divisor) * base^(-2i/d)``.

    Raises
    ------
    ValueError
        If ``kind`` is unknown, ``factor`` is not a positive finite number
        (NaN included) or ``d`` is not even and at least 4 (NTK's exponent
        ``d / (d - 2)`` needs two pairs).

    Examples
    --------
    >>> from attention_lib.positions import rope_scaling
    >>> rope_scaling("linear", 8, 16)
    (8.0, 10000.0)
    >>> divisor, base = rope_scaling("ntk", 8, 16)
    >>> divisor, round(base)
    (1.0, 107672)
    """
    if kind not in _ROPE_SCALINGS:
        raise ValueError(f"rope_scaling's type must be one of {_ROPE_SCALINGS}, got {kind!r}")
    if isinstance(factor, (bool, np.bool_)) or not isinstance(factor, numbers.Real):
        raise TypeError(f"rope_scaling's factor must be a real number, got {factor!r}")
    if not (np.isfinite(factor) and factor > 0):
        raise ValueError(f"rope_scaling's factor must be positive and finite, got {factor!r}")
    d = _even(d, "d")
    base = _base(base)
    if kind == "linear":
        return float(factor), base
    if d < 4:
        raise ValueError(f"NTK-aware scaling needs a head size of at least 4, got d = {d}")
    return 1.0, base * float(factor) ** (d / (d - 2))


def yarn_frequencies(d, factor, original_length, base=10000.0, beta_fast=32.0, beta_slow=1.0):
    """YaRN's rotary speeds and attention factor for ``factor`` times the trained length.

    YaRN (Peng et al., 2023) treats the pairs by how often they turn within
    the ``original_length`` positions the model was trained on. A pair ``u``
    turns ``original_length * theta_u / (2 pi)`` times, with ``theta_u =
    base^(-2u/d)``:

    - fast pairs, turning more than ``beta_fast`` times, are left as they are
      (their angles at new distances are angles seen many times in training);
    - slow pairs, turning less than ``beta_slow`` times, are interpolated, their
      speed divided by ``factor`` as in position interpolation;
    - in between, a linear ramp in the pair index ``u`` blends the two.

    The attention factor ``0.1 ln(factor) + 1`` multiplies the rotated
    queries and keys, so every score is multiplied by its square: it
    sharpens attention, which spreads over more keys at longer lengths.

    Parameters
    ----------
    d : int
        The head size (even).
    factor : float
        How many times the trained length to reach; positive and finite (at
        most 1: nothing changes).
    original_length : int
        The length the model was trained on (``original_max_position_embeddings``).
    base : float, optional
        The trained rotary base.
    beta_fast, beta_slow : float, optional
        The turn counts bounding the ramp (32 and 1, the paper's values).

    Returns
    -------
    theta : ndarray of float64, shape (d/2,)
        The speed of each pair: rotate position ``p`` by ``p * theta[u]``.
    attention_factor : float

    Raises
    ------
    TypeError, ValueError
        If an argument is not a number of the right kind, or ``beta_slow >=
        beta_fast``.

    Notes
    -----
    The ramp is the authors' code's (and transformers' ``"yarn"``): linear in
    ``u`` between the pair indices where a pair turns ``beta_fast`` and
    ``beta_slow`` times, rounded outwards, rather than linear in the turn
    count, as the paper's text writes it.

    Examples
    --------
    >>> from attention_lib.positions import yarn_frequencies
    >>> theta, a = yarn_frequencies(64, 2.0, 8192, base=100000.0)
    >>> round(a, 4), float(theta[0]), round(float(theta[-1] / 100000.0 ** (-62 / 64)), 3)
    (1.0693, 1.0, 0.5)
    """
    d = _even(d, "d")
    base = _base(base)
    length = as_int(original_length, "original_length", 1)
    values = {"factor": factor, "beta_fast": beta_fast, "beta_slow": beta_slow}
    for name, value in values.items():
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
            raise TypeError(f"yarn's {name} must be a real number, got {value!r}")
        if not (np.isfinite(value) and value > 0):
            raise ValueError(f"yarn's {name} must be positive and finite, got {value!r}")
    if beta_slow >= beta_fast:
        raise ValueError(
            f"yarn's beta_slow ({beta_slow}) must be below beta_fast ({beta_fast}): "
            "pairs turning more than beta_fast times are kept, fewer than beta_slow scaled"
        )
    theta = _frequencies(d, base)
    factor = float(factor)
    if factor <= 1:
        return theta, 1.0

    def pair(turns):  # the (fractional) pair index u that turns `turns` times
        return d * np.log(length / (turns * 2 * np.pi)) / (2 * np.log(base))

    low = max(np.floor(pair(beta_fast)), 0)
    high = min(np.ceil(pair(beta_slow)), d - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(d // 2) - low) / (high - low), 0, 1)  # 0: kept, 1: scaled
    theta = theta * (1 - ramp) + theta / factor * ramp
    return theta, float(0.1 * np.log(factor) + 1.0)
