"""additive_scores / additive_attention: shapes, many decoder steps, errors."""

import numpy as np
import pytest
from hypothesis import given, strategies as st
from numpy.testing import assert_allclose

from attention_lib import additive_attention, additive_scores, softmax


def random_problem(K=5, n=4, m=3, T=None, seed=0):
    rng = np.random.default_rng(seed)
    s = rng.normal(size=(n,) if T is None else (T, n))
    return rng.normal(size=(K, n)), s, rng.normal(size=(2 * n, m)), rng.normal(size=(m, 1))


def plain_scores(H, s, W, v):
    """e_j = v^T tanh(W_a s + U_a h_j), with the two halves of W written out."""
    n = H.shape[1]
    U_a, W_a = W[:n], W[n:]
    return np.array([v[:, 0] @ np.tanh(s @ W_a + h @ U_a) for h in H])


@given(
    st.integers(1, 6), st.integers(1, 5), st.integers(1, 4), st.integers(1, 4), st.integers(0, 1000)
)
def test_many_decoder_states_at_once_equal_one_at_a_time(K, n, m, T, seed):
    H, S, W, v = random_problem(K, n, m, T, seed)
    context, weights = additive_attention(H, S, W, v)
    assert context.shape == (T, n) and weights.shape == (T, K)
    for t in range(T):
        assert_allclose(
            additive_scores(H, S[t], W, v), plain_scores(H, S[t], W, v), rtol=1e-12, atol=1e-12
        )
        c_t, w_t = additive_attention(H, S[t], W, v)
        assert_allclose(weights[t], w_t, rtol=1e-12)
        assert_allclose(context[t], c_t, rtol=1e-12, atol=1e-12)


def test_context_is_the_weighted_average_of_encoder_states():
    H, s, W, v = random_problem(T=3)
    context, weights = additive_attention(H, s, W, v)
    assert_allclose(weights, softmax(additive_scores(H, s, W, v)))
    assert_allclose(weights.sum(axis=1), 1.0)
    assert_allclose(context, np.einsum("tk,kn->tn", weights, H))


def test_one_dimensional_decoder_state_and_flat_v():
    H, s, W, v = random_problem()
    context, weights = additive_attention(H, s, W, v.ravel())
    assert context.shape == (4,) and weights.shape == (5,)


def test_float32_stays_float32():
    H, s, W, v = (a.astype(np.float32) for a in random_problem())
    context, weights = additive_attention(H, s, W, v)
    assert context.dtype == np.float32 and weights.dtype == np.float32


@pytest.mark.parametrize(
    "change, message",
    [
        (
            lambda H, s, W, v: (H[0], s, W, v),
            "encoder_states must be 2-D \\(K, n\\), got shape \\(4,\\)",
        ),
        (
            lambda H, s, W, v: (H, s[:3], W, v),
            "decoder_state has 3 features but encoder_states has 4: the last axes must match",
        ),
        (
            lambda H, s, W, v: (H, s, W[:7], v),
            "W must be \\(2n, d_a\\) = \\(8, d_a\\) to act on \\[h_j ; s\\], got shape \\(7, 3\\)",
        ),
        (
            lambda H, s, W, v: (H, s, W, v[:2]),
            "v must be \\(d_a,\\) or \\(d_a, 1\\) with d_a = 3, got shape \\(2, 1\\)",
        ),
        (lambda H, s, W, v: (H[:0], s, W, v), "encoder_states is empty"),
        (
            lambda H, s, W, v: (H, s[None, None], W, v),
            "decoder_state must be \\(n,\\) or \\(T, n\\)",
        ),
        (lambda H, s, W, v: (H * np.nan, s, W, v), "encoder_states contains NaN"),
    ],
)
def test_bad_shapes_raise_value_errors_that_name_them(change, message):
    with pytest.raises(ValueError, match=message):
        additive_attention(*change(*random_problem()))


def test_non_numeric_input_raises_type_error():
    H, s, W, v = random_problem()
    with pytest.raises(TypeError, match="decoder_state must be an array of real numbers"):
        additive_scores(H, ["a"] * 4, W, v)


# --- faults an adversarial pass found -------------------------------------------


@pytest.mark.parametrize(
    "change, message",
    [
        # U_a h_j and W_a s are each finite-input products that overflow float32
        ({"H": np.float32(1e30), "W": np.float32(1e30)}, "encoder_states @ W.* overflow"),
        ({"s": np.float32(1e30), "W": np.float32(1e30)}, "decoder_state @ W.* overflow"),
        ({"v": np.float32(3e38)}, "v.* overflow"),
    ],
)
def test_overflow_raises_instead_of_nan(change, message):
    H, s, W, v = (a.astype(np.float32) for a in random_problem(K=3, n=2, m=4))
    H = H * change.get("H", 1)
    s = s * change.get("s", 1)
    W = W * change.get("W", 1)
    v = np.abs(v) * change.get("v", 1)
    for function in (additive_scores, additive_attention):
        with pytest.raises(ValueError, match=message):
            function(H, s, W, v)
