"""Positions: sinusoidal encodings, rotary embeddings and ALiBi, against the
papers' formulas written out here, with their defining properties."""

import math

import numpy as np
import pytest
from hypothesis import given, strategies as st
from numpy.testing import assert_allclose, assert_array_equal

from attention_lib import (
    MultiHeadAttention,
    alibi_bias,
    alibi_slopes,
    causal_mask,
    rotary,
    scaled_dot_product_attention,
    sinusoidal_positions,
)

even_d = st.integers(1, 16).map(lambda n: 2 * n)


# -- sinusoidal -------------------------------------------------------------


def reference_sinusoidal(L, d, base=10000.0):
    """Vaswani et al. (2017), section 3.5, one entry at a time."""
    pe = np.zeros((L, d))
    for pos in range(L):
        for i in range(d // 2):
            pe[pos, 2 * i] = math.sin(pos / base ** (2 * i / d))
            pe[pos, 2 * i + 1] = math.cos(pos / base ** (2 * i / d))
    return pe


@given(st.integers(0, 40), even_d, st.sampled_from([10000.0, 100.0, 2.5]))
def test_sinusoidal_matches_the_papers_formula(L, d, base):
    assert_allclose(
        sinusoidal_positions(L, d, base), reference_sinusoidal(L, d, base), rtol=0, atol=1e-12
    )


@given(st.integers(1, 60), even_d)
def test_sinusoidal_rows_have_norm_sqrt_half_d(L, d):
    pe = sinusoidal_positions(L, d)
    assert_allclose(np.linalg.norm(pe, axis=1), np.sqrt(d / 2), rtol=1e-12)


@given(even_d, st.integers(0, 50), st.integers(0, 50), st.integers(0, 50))
def test_sinusoidal_dot_product_depends_only_on_the_offset(d, p, q, shift):
    pe = sinusoidal_positions(max(p, q) + shift + 1, d)
    assert_allclose(pe[p] @ pe[q], pe[p + shift] @ pe[q + shift], atol=1e-9)


def test_sinusoidal_dot_products_fall_off_with_distance_at_first():
    pe = sinusoidal_positions(64, 64)
    sims = pe @ pe[0]
    assert sims[0] == pytest.approx(32)
    assert (np.diff(sims[:6]) < 0).all()  # nearest are most similar
    assert (sims[1:] < sims[0] - 1).all()  # and nothing is as similar


@pytest.mark.parametrize(
    "args, error, message",
    [
        ((5, 3), ValueError, "d must be even"),
        ((5, 0), ValueError, "d must be a positive integer"),
        ((5.0, 4), TypeError, "L must be an integer"),
        ((-1, 4), ValueError, "L must be non-negative"),
        ((5, 4, 0.0), ValueError, "base must be positive"),
        ((5, 4, "10"), TypeError, "base must be a real number"),
    ],
)
def test_sinusoidal_bad_arguments(args, error, message):
    with pytest.raises(error, match=message):
        sinusoidal_positions(*args)


# -- rotary -----------------------------------------------------------------


def reference_rotary(x, positions, base=10000.0):
    """Rotate each pair (2i, 2i+1) of each row by positions[p] * base^(-2i/d)."""
    L, d = x.shape
    out = np.zeros_like(x, dtype=float)
    for p in range(L):
        for i in range(d // 2):
            a = positions[p] * base ** (-2 * i / d)
            rot = np.array([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])
            out[p, 2 * i : 2 * i + 2] = rot @ x[p, 2 * i : 2 * i + 2]
    return out


def rotary_half(x, positions, base=10000.0):
    """The other pairing some libraries use: feature i with feature i + d/2."""
    d = x.shape[-1]
    a = np.asarray(positions, float)[:, None] * base ** (-np.arange(0, d, 2) / d)
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return np.concatenate(
        [x1 * np.cos(a) - x2 * np.sin(a), x1 * np.sin(a) + x2 * np.cos(a)], axis=-1
    )


@given(st.integers(1, 8), even_d, st.integers(0, 2**32 - 1))
def test_rotary_matches_plain_rotations(L, d, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(L, d))
    pos = rng.uniform(-50, 50, size=L)
    assert_allclose(rotary(x, pos), reference_rotary(x, pos), rtol=0, atol=1e-12)
    assert_allclose(rotary(x), reference_rotary(x, np.arange(L)), atol=1e-12)


@given(
    even_d,
    st.integers(0, 200),
    st.integers(0, 200),
    st.integers(-100, 100),
    st.integers(0, 2**32 - 1),
)
def test_rotary_score_depends_only_on_relative_position(d, m, n, shift, seed):
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=(2, 1, d))
    score = (rotary(q, [m]) @ rotary(k, [n]).T).item()
    shifted = (rotary(q, [m + shift]) @ rotary(k, [n + shift]).T).item()
    assert shifted == pytest.approx(score, abs=1e-9 * (1 + abs(m) + abs(n) + abs(shift)))


@given(even_d, st.integers(0, 2**32 - 1))
def test_rotary_keeps_lengths_and_position_zero_is_the_identity(d, seed):
    x = np.random.default_rng(seed).normal(size=(3, 5, d))
    assert_allclose(np.linalg.norm(rotary(x), axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-12)
    assert_array_equal(rotary(x, np.zeros(5)), x)


@given(even_d, st.integers(0, 2**32 - 1))
def test_both_pairings_differ_by_a_permutation_and_give_the_same_scores(d, seed):
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=(2, 6, d))
    pos = np.arange(6)
    # Interleaved features (0, 1, 2, 3, ...) -> halves (0, 2, ..., 1, 3, ...).
    perm = np.concatenate([np.arange(0, d, 2), np.arange(1, d, 2)])
    assert_allclose(rotary_half(q[:, perm], pos), rotary(q, pos)[:, perm], atol=1e-12)
    scores = rotary(q, pos) @ rotary(k, pos).T
    scores_half = rotary_half(q[:, perm], pos) @ rotary_half(k[:, perm], pos).T
    assert_allclose(scores_half, scores, atol=1e-12)


def test_rotary_dtypes_batch_axes_and_positions_per_sequence():
    x = np.random.default_rng(0).normal(size=(2, 3, 4))
    assert rotary(x.astype(np.float32)).dtype == np.float32
    assert rotary(np.ones((3, 4), dtype=int)).dtype == np.float64
    pos = np.array([[0, 1, 2], [5, 6, 7]])  # (N, L)
    out = rotary(x, pos)
    assert_allclose(out[1], rotary(x[1], [5, 6, 7]), atol=1e-15)


@pytest.mark.parametrize(
    "args, error, message",
    [
        (
            (np.zeros((3, 5)),),
            ValueError,
            r"x.shape\[-1\] \(the feature size d\) "
            "must be even",
        ),
        ((np.zeros(4),), ValueError, r"x must have at least 2 axes"),
        (
            (np.zeros((3, 4)), np.arange(4)),
            ValueError,
            r"positions of shape \(4,\) must broadcast to x.shape\[:-1\] = \(3,\)",
        ),
        ((np.zeros((3, 4)), np.zeros((2, 3))), ValueError, "must broadcast"),
        ((np.zeros((3, 4)), [0, np.nan, 1]), ValueError, "positions contains NaN"),
        ((np.full((3, 4), np.inf),), ValueError, "x contains NaN"),
        ((np.zeros((3, 4), complex),), TypeError, "x must be an array of real"),
        ((np.zeros((3, 4)), None, -1.0), ValueError, "base must be positive"),
    ],
)
def test_rotary_bad_arguments(args, error, message):
    with pytest.raises(error, match=message):
        rotary(*args)


# -- ALiBi ------------------------------------------------------------------


def reference_slopes(n):
    """The ALiBi paper's slope rule, written recursively as in its code."""

    def power_of_2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + reference_slopes(2 * closest)[0::2][: n - closest]


@pytest.mark.parametrize("H", [1, 2, 4, 8, 16, 32])
def test_alibi_slopes_for_a_power_of_two(H):
    assert_allclose(alibi_slopes(H), [2 ** (-8 * (h + 1) / H) for h in range(H)], rtol=1e-15)


@given(st.integers(1, 100))
def test_alibi_slopes_follow_the_papers_rule(H):
    slopes = alibi_slopes(H)
    assert_allclose(slopes, reference_slopes(H), rtol=1e-14)
    assert len(set(slopes.tolist())) == H  # every head differs
    assert ((0 < slopes) & (slopes < 1)).all()


def test_alibi_slopes_for_twelve_heads_by_hand():
    eight = [2 ** (-(h + 1)) for h in range(8)]  # 2^(-8 (h+1) / 8)
    odd_sixteenths = [2 ** (-(2 * j + 1) / 2) for j in range(4)]
    assert_allclose(alibi_slopes(12), eight + odd_sixteenths, rtol=1e-15)


@given(st.integers(1, 12), st.integers(0, 9), st.integers(0, 9))
def test_alibi_bias_is_minus_slope_times_distance_and_causal(H, L, S):
    bias = alibi_bias(H, L, S)
    assert bias.shape == (H, L, S)
    slopes = alibi_slopes(H)
    allowed = causal_mask(L, S)
    assert_array_equal(np.isfinite(bias), np.broadcast_to(allowed, bias.shape))
    for h in range(H):
        for i in range(L):
            for j in range(S):
                expected = -slopes[h] * (i - j) if j <= i else -np.inf
                assert bias[h, i, j] == expected


def test_alibi_as_a_float_mask_gives_nearby_keys_more_weight():
    H, L, d = 4, 6, 8
    q = np.zeros((H, L, d))  # equal raw scores
    _, w = scaled_dot_product_attention(
        q, q, np.ones((H, L, d)), attn_mask=alibi_bias(H, L), return_weights=True
    )
    last = w[:, -1]  # the last query
    assert (np.diff(last, axis=-1) > 0).all()  # nearer = heavier
    assert (last[0, -1] > last[1:, -1]).all()  # steepest slope: head 0
    assert_allclose(w.sum(axis=-1), 1.0)


def test_alibi_passes_to_multi_head_attention_as_a_per_head_float_mask():
    N, H, L, E = 2, 4, 5, 8
    layer = MultiHeadAttention(E, H, rng=0)
    x = np.random.default_rng(1).normal(size=(N, L, E))
    bias = np.tile(alibi_bias(H, L), (N, 1, 1))  # (N * H, L, S)
    _, w = layer(x, x, x, attn_mask=bias, average_attn_weights=False)
    assert (w[:, :, ~causal_mask(L)] == 0).all()
    assert_allclose(w.sum(axis=-1), 1.0)


@pytest.mark.parametrize(
    "args, error, message",
    [
        ((0, 4), ValueError, "num_heads must be a positive integer"),
        ((2.0, 4), TypeError, "num_heads must be a positive integer"),
        ((2, -1), ValueError, "L must be non-negative"),
        ((2, 3, 1.5), TypeError, "S must be an integer"),
    ],
)
def test_alibi_bad_arguments(args, error, message):
    with pytest.raises(error, match=message):
        alibi_bias(*args)


# -- word order, with and without positions ----------------------------------


@given(st.integers(2, 7), st.integers(0, 2**32 - 1))
def test_attention_without_positions_cannot_see_order_but_with_them_can(L, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(L, 8))
    perm = np.roll(np.arange(L), 1)  # a shuffle that moves every row
    plain = scaled_dot_product_attention(x, x, x)
    assert_allclose(
        scaled_dot_product_attention(x[perm], x[perm], x[perm]), plain[perm], rtol=1e-12, atol=1e-13
    )
    xp = x + sinusoidal_positions(L, 8)
    yp = x[perm] + sinusoidal_positions(L, 8)
    assert not np.allclose(
        scaled_dot_product_attention(yp, yp, yp), scaled_dot_product_attention(xp, xp, xp)[perm]
    )
