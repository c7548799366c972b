"""Tests for attention_lib.blockwise: the online softmax gives exact attention."""

import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import logsumexp

from attention_lib import (
    blockwise_attention,
    online_softmax_step,
    scaled_dot_product_attention,
    softmax,
)

TOLERANCE = 1e-12  # float64: blockwise and full attention agree to rounding


def random_qkv(rng, batch, L, S, E, Ev, dtype=np.float64):
    q = rng.normal(size=batch + (L, E)).astype(dtype)
    k = rng.normal(size=batch + (S, E)).astype(dtype)
    v = rng.normal(size=batch + (S, Ev)).astype(dtype)
    return q, k, v


def assert_same_attention(q, k, v, **kwargs):
    block_kwargs = {
        name: kwargs.pop(name) for name in ("block_size", "query_block_size") if name in kwargs
    }
    expected = scaled_dot_product_attention(q, k, v, **kwargs)
    got = blockwise_attention(q, k, v, **kwargs, **block_kwargs)
    assert got.shape == expected.shape
    assert got.dtype == expected.dtype
    assert np.all(np.isfinite(got))
    if got.size:
        assert np.max(np.abs(got - expected)) <= TOLERANCE


@st.composite
def attention_problems(draw):
    """Random shapes, masks (bool, float with -inf, broadcast) and block sizes."""
    batch = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    L, S = draw(st.integers(0, 12)), draw(st.integers(0, 12))
    E, Ev = draw(st.integers(1, 6)), draw(st.integers(1, 4))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    q, k, v = random_qkv(rng, batch, L, S, E, Ev)
    kwargs = {
        "is_causal": draw(st.booleans()),
        "block_size": draw(st.integers(1, 8)),
        "query_block_size": draw(st.none() | st.integers(1, 8)),
    }
    mask_kind = draw(st.sampled_from(["none", "bool", "float"]))
    if mask_kind != "none":
        full = batch + (L, S)
        # Each axis either full-size or 1 (broadcast); leading axes may be dropped.
        shape = tuple(n if draw(st.booleans()) else 1 for n in full)
        shape = shape[draw(st.integers(0, len(batch))) :]
        # Often mask everything in a row, to reach fully masked rows and blocks.
        p_keep = draw(st.sampled_from([0.0, 0.2, 0.7, 1.0]))
        keep = rng.random(shape) < p_keep
        if mask_kind == "bool":
            kwargs["attn_mask"] = keep
        else:
            kwargs["attn_mask"] = np.where(keep, rng.normal(scale=3, size=shape), -np.inf)
    return q, k, v, kwargs


@settings(max_examples=300, deadline=None)
@given(attention_problems())
def test_blockwise_equals_full_attention_in_float64(problem):
    q, k, v, kwargs = problem
    assert_same_attention(q, k, v, **kwargs)


@pytest.mark.parametrize("block_size", [1, 3, 4, 5, 16])
def test_fully_masked_rows_give_zero_output(block_size):
    rng = np.random.default_rng(1)
    q, k, v = random_qkv(rng, (), 6, 9, 4, 3)
    mask = rng.random((6, 9)) < 0.5
    mask[[0, 4]] = False  # rows 0 and 4 see nothing
    out = blockwise_attention(q, k, v, attn_mask=mask, block_size=block_size)
    np.testing.assert_array_equal(out[[0, 4]], 0.0)
    assert_same_attention(q, k, v, attn_mask=mask, block_size=block_size)


def test_entirely_masked_first_block_then_visible_keys():
    # The running max stays -inf through block 0, then becomes finite.
    rng = np.random.default_rng(2)
    q, k, v = random_qkv(rng, (), 5, 12, 4, 2)
    mask = np.ones((5, 12), dtype=bool)
    mask[:, :4] = False
    assert_same_attention(q, k, v, attn_mask=mask, block_size=4)


def test_entirely_masked_last_blocks_change_nothing():
    # A block of -inf scores after finite ones must not disturb the sums.
    rng = np.random.default_rng(3)
    q, k, v = random_qkv(rng, (), 5, 12, 4, 2)
    mask = np.zeros(12)
    mask[4:] = -np.inf
    out = blockwise_attention(q, k, v, attn_mask=mask, block_size=4)
    expected = scaled_dot_product_attention(q, k[:4], v[:4])
    assert np.max(np.abs(out - expected)) <= TOLERANCE


@pytest.mark.parametrize("L, S", [(7, 7), (4, 11), (11, 4), (1, 9)])
@pytest.mark.parametrize("block_size, query_block_size", [(1, 1), (3, 2), (4, None), (64, 64)])
def test_causal_matches_for_square_and_rectangular_scores(L, S, block_size, query_block_size):
    rng = np.random.default_rng(4)
    q, k, v = random_qkv(rng, (2,), L, S, 5, 3)
    assert_same_attention(
        q, k, v, is_causal=True, block_size=block_size, query_block_size=query_block_size
    )
    padding = np.arange(S) < S - 1  # causal combined with a bool mask
    assert_same_attention(q, k, v, attn_mask=padding, is_causal=True, block_size=block_size)


def test_large_scores_do_not_overflow():
    rng = np.random.default_rng(5)
    q, k, v = random_qkv(rng, (), 8, 10, 4, 3)
    for dtype in (np.float32, np.float64):
        out = blockwise_attention(
            (1e4 * q).astype(dtype), k.astype(dtype), v.astype(dtype), block_size=3
        )
        assert np.all(np.isfinite(out))
    assert_same_attention(1e4 * q, k, v, block_size=3)


def test_float32_stays_float32_and_matches_float64():
    rng = np.random.default_rng(6)
    q, k, v = random_qkv(rng, (2,), 33, 70, 16, 8)
    out32 = blockwise_attention(
        q.astype(np.float32), k.astype(np.float32), v.astype(np.float32), block_size=16
    )
    assert out32.dtype == np.float32
    np.testing.assert_allclose(out32, scaled_dot_product_attention(q, k, v), atol=1e-5)


def test_logsumexp_recovers_the_attention_weights():
    rng = np.random.default_rng(7)
    q, k, v = random_qkv(rng, (), 6, 10, 4, 3)
    mask = rng.random((6, 10)) < 0.6
    mask[2] = False
    out, lse = blockwise_attention(q, k, v, attn_mask=mask, block_size=3, return_logsumexp=True)
    scores = np.where(mask, q @ k.T / 2.0, -np.inf)  # sqrt(E) = 2
    np.testing.assert_allclose(lse, logsumexp(scores, axis=-1), rtol=1e-12)
    assert lse[2] == -np.inf
    _, weights = scaled_dot_product_attention(q, k, v, attn_mask=mask, return_weights=True)
    with np.errstate(invalid="ignore"):
        recovered = np.nan_to_num(np.exp(scores - lse[:, None]))
    np.testing.assert_allclose(recovered, weights, atol=1e-12)


def test_online_softmax_step_over_any_split_equals_softmax():
    rng = np.random.default_rng(8)
    scores = rng.normal(scale=5, size=(3, 10))
    value = np.eye(10)  # output row = the weights themselves
    for cuts in ([5], [1, 2, 9], [0, 10], list(range(1, 10))):
        m, ell, acc = np.full(3, -np.inf), np.zeros(3), np.zeros((3, 10))
        for lo, hi in zip([0] + cuts, cuts + [10]):
            m, ell, acc = online_softmax_step(m, ell, acc, scores[:, lo:hi], value[lo:hi])
        np.testing.assert_allclose(m, scores.max(axis=-1))
        np.testing.assert_allclose(acc / ell[:, None], softmax(scores), rtol=1e-13)


def test_online_softmax_step_does_not_modify_its_inputs():
    m, ell, acc = np.array([1.0]), np.array([2.0]), np.array([[3.0]])
    scores, value = np.array([[5.0, -np.inf]]), np.array([[1.0], [2.0]])
    online_softmax_step(m, ell, acc, scores, value)
    assert (m[0], ell[0], acc[0, 0]) == (1.0, 2.0, 3.0)
    np.testing.assert_array_equal(scores, [[5.0, -np.inf]])


def test_never_holds_the_full_score_matrix():
    L = S = 1024
    rng = np.random.default_rng(9)
    q, k, v = random_qkv(rng, (), L, S, 16, 16)
    full_scores = L * S * q.itemsize  # 8 MiB
    tracemalloc.start()
    try:
        blockwise_attention(q, k, v, is_causal=True, block_size=64)
        _, peak_blockwise = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        base, _ = tracemalloc.get_traced_memory()
        scaled_dot_product_attention(q, k, v, is_causal=True)
        _, peak_full = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak_full - base >= full_scores  # the plain version does
    assert peak_blockwise < full_scores / 8  # the blockwise one does not


@pytest.mark.parametrize(
    "bad, error, words",
    [
        (0, ValueError, "block_size must be a positive integer, got 0"),
        (-3, ValueError, "block_size must be a positive integer, got -3"),
        (2.5, TypeError, "block_size must be a positive integer, got 2.5"),
        (True, TypeError, "block_size must be a positive integer, got True"),
    ],
)
def test_bad_block_size_is_named(bad, error, words):
    q = np.zeros((2, 3))
    with pytest.raises(error, match=words):
        blockwise_attention(q, q, q, block_size=bad)
    with pytest.raises(error, match=words.replace("block_size", "query_block_size")):
        blockwise_attention(q, q, q, query_block_size=bad)


def test_bad_shapes_get_the_same_message_as_full_attention():
    q, k = np.zeros((4, 300)), np.zeros((5, 64))
    with pytest.raises(ValueError, match="query has 300 features but key has 64"):
        blockwise_attention(q, k, k)
    with pytest.raises(ValueError, match="attn_mask of shape"):
        blockwise_attention(k, k, k, attn_mask=np.ones((3, 5), dtype=bool))


# --- faults an adversarial pass found (each test failed before its fix) --------


def _state(L=1, Ev=2):
    return np.full(L, -np.inf), np.zeros(L), np.zeros((L, Ev))


def test_online_softmax_step_accepts_integer_scores():
    """Integer scores used to overflow inside NumPy (-inf as an integer)."""
    m, ell, acc = online_softmax_step(*_state(), np.array([[1, 2]]), np.eye(2))
    expected = online_softmax_step(*_state(), np.array([[1.0, 2.0]]), np.eye(2))
    for got, want in zip((m, ell, acc), expected):
        np.testing.assert_allclose(got, want)
        assert got.dtype == np.float64


@pytest.mark.parametrize(
    "scores, message",
    [
        (np.array([[np.nan, 2.0]]), "scores contains NaN or \\+inf"),
        (np.array([[np.inf, 2.0]]), "scores contains NaN or \\+inf"),
        (np.array([["a", "b"]]), "scores must be an array of real numbers"),
    ],
)
def test_online_softmax_step_rejects_bad_scores(scores, message):
    with pytest.raises((ValueError, TypeError), match=message):
        online_softmax_step(*_state(), scores, np.eye(2))


@pytest.mark.parametrize(
    "which, bad, message",
    [
        (0, np.array([np.nan]), "running_max contains NaN or \\+inf"),
        (1, np.array([-1.0]), "running_sum must be finite and non-negative"),
        (2, np.array([[np.nan, 0.0]]), "output contains NaN or infinity"),
        (4, np.array([[np.nan, 0.0], [0.0, 1.0]]), "value contains NaN or infinity"),
    ],
)
def test_online_softmax_step_rejects_nan_state(which, bad, message):
    args = list(_state()) + [np.array([[1.0, 2.0]]), np.eye(2)]
    args[which] = bad
    with pytest.raises(ValueError, match=message):
        online_softmax_step(*args)


@pytest.mark.parametrize(
    "which, bad, message",
    [
        (3, np.ones((1, 3)), "scores has 3 keys .* value has 2"),
        (3, np.ones((2, 2)), "scores has 2 queries .* running_max has 1"),
        (1, np.zeros(2), "running_sum must have the shape of running_max \\(1,\\)"),
        (2, np.zeros((1, 3)), "output must have shape \\(1, 2\\)"),
        (3, np.ones(2), "scores must have at least 2 axes"),
    ],
)
def test_online_softmax_step_names_shapes_that_do_not_fit(which, bad, message):
    args = list(_state()) + [np.array([[1.0, 2.0]]), np.eye(2)]
    args[which] = bad
    with pytest.raises(ValueError, match=message):
        online_softmax_step(*args)


def test_online_softmax_step_overflowing_output_raises():
    value = np.full((2, 1), 3e38, dtype=np.float32)
    state = (np.full(1, -np.inf, np.float32), np.zeros(1, np.float32), np.zeros((1, 1), np.float32))
    with pytest.raises(ValueError, match="overflow.*value.*float64"):
        online_softmax_step(*state, np.zeros((1, 2), np.float32), value)


@pytest.mark.parametrize("flag", ["yes", 1])
def test_return_logsumexp_must_be_a_bool(flag):
    q = np.ones((2, 3))
    with pytest.raises(TypeError, match="return_logsumexp must be True or False"):
        blockwise_attention(q, q, q, return_logsumexp=flag)
