"""softmax: stable, agrees with scipy, zeros (not NaN) for fully masked rows."""

import numpy as np
import pytest
import scipy.special
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from numpy.testing import assert_allclose

from attention_lib import softmax
from attention_lib.gradcheck import numerical_gradient

finite = st.floats(-50, 50, allow_nan=False, allow_infinity=False)


@given(
    hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=3, max_side=6), elements=finite),
    st.integers(-1, 0),
)
def test_agrees_with_scipy(x, axis):
    assert_allclose(
        softmax(x, axis=axis), scipy.special.softmax(x, axis=axis), rtol=1e-12, atol=1e-15
    )


@given(
    hnp.arrays(np.float64, hnp.array_shapes(min_dims=2, max_dims=2, max_side=6), elements=finite)
)
def test_weights_are_a_distribution_along_the_axis(x):
    w = softmax(x, axis=-1)
    assert np.all(w >= 0)
    assert_allclose(w.sum(axis=-1), 1.0, rtol=1e-12)


@given(hnp.arrays(np.float64, st.integers(1, 8), elements=finite), st.floats(-1e4, 1e4))
def test_shift_invariance(x, c):
    assert_allclose(softmax(x + c), softmax(x), atol=1e-9)


def test_huge_logits_do_not_overflow():
    w = softmax(np.array([1e5, 1e5 - 1.0, -1e5]))
    assert np.all(np.isfinite(w))
    e = np.exp(-1.0)
    assert_allclose(w, [1 / (1 + e), e / (1 + e), 0.0], rtol=1e-12)


def test_huge_logits_float32_stay_float32():
    w = softmax(np.array([[1e5, -1e5], [3.0, 3.0]], dtype=np.float32))
    assert w.dtype == np.float32
    assert_allclose(w, [[1.0, 0.0], [0.5, 0.5]])


def test_fully_masked_row_gives_zeros_not_nan():
    x = np.array([[0.0, -np.inf, 1.0], [-np.inf, -np.inf, -np.inf]])
    w = softmax(x)
    assert not np.isnan(w).any()
    assert_allclose(w[1], 0.0)
    assert_allclose(w[0], scipy.special.softmax([0.0, -np.inf, 1.0]))


def test_keeps_shape_and_axis():
    x = np.arange(24.0).reshape(2, 3, 4)
    assert_allclose(softmax(x, axis=1).sum(axis=1), 1.0)
    assert softmax(x, axis=1).shape == x.shape


def test_integer_input_is_computed_in_float64():
    assert softmax([1, 2, 3]).dtype == np.float64


@pytest.mark.parametrize(
    "bad, message",
    [
        (np.array([1.0, np.nan]), "NaN or \\+inf"),
        (np.array([1.0, np.inf]), "NaN or \\+inf"),
    ],
)
def test_rejects_nan_and_plus_inf(bad, message):
    with pytest.raises(ValueError, match=message):
        softmax(bad)


def test_rejects_non_numeric_input():
    with pytest.raises(TypeError, match="x must be an array of real numbers"):
        softmax(["a", "b"])


def test_rejects_axis_out_of_range():
    with pytest.raises(ValueError, match="axis 2 is out of range for x of shape \\(3,\\)"):
        softmax(np.zeros(3), axis=2)


# --- faults an adversarial pass found -------------------------------------------


@pytest.mark.parametrize("axis", [1.5, "0", True, None, np.array([0])])
def test_axis_must_be_an_integer(axis):
    """``axis=1.5`` used to fail inside NumPy, ``axis=True`` to mean axis 1."""
    with pytest.raises(TypeError, match="axis must be an integer, got"):
        softmax(np.ones((2, 2)), axis=axis)


def test_axis_accepts_numpy_integers():
    x = np.arange(6.0).reshape(2, 3)
    assert_allclose(softmax(x, axis=np.int64(0)), softmax(x, axis=0))


@given(
    hnp.arrays(
        np.float32,
        st.integers(1, 6),
        elements=st.floats(width=32, allow_nan=False, allow_infinity=False),
    )
)
def test_finite_float32_inputs_over_the_whole_range_give_a_distribution(x):
    """No finite input, however close to the float32 limit, gives NaN or inf."""
    w = softmax(x)
    assert w.dtype == np.float32 and np.all(np.isfinite(w))
    assert_allclose(w.sum(), 1.0, rtol=1e-5)


def test_a_single_score_gets_all_the_weight():
    """A 0-d input failed inside NumPy ("does not support item assignment")."""
    assert softmax(3.0) == 1.0 and softmax(np.float32(-2.0)).dtype == np.float32
    assert softmax(np.array(3.0), axis=0).shape == ()
    assert softmax(-np.inf) == 0.0


def test_property_tests_have_no_deadline_that_load_could_miss():
    """Under load an example took 266 ms and Hypothesis failed
    test_batch_axes_are_independent_problems as Flaky (deadline 200 ms)."""
    from hypothesis import settings

    assert settings().deadline is None


def test_softmax_backward_matches_central_differences():
    from attention_lib import softmax_backward

    rng = np.random.default_rng(0)
    scores, g = rng.normal(size=(3, 5)), rng.normal(size=(3, 5))
    numeric = numerical_gradient(lambda: np.sum(g * softmax(scores)), scores)
    np.testing.assert_allclose(softmax_backward(g, softmax(scores)), numeric, atol=1e-9)


def test_softmax_backward_along_another_axis():
    from attention_lib import softmax_backward

    rng = np.random.default_rng(1)
    scores, g = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    by_columns = softmax_backward(g, softmax(scores, axis=0), axis=0)
    np.testing.assert_array_equal(by_columns, softmax_backward(g.T, softmax(scores.T)).T)


@given(
    hnp.arrays(
        np.float64,
        hnp.array_shapes(min_dims=1, max_dims=3, min_side=1),
        elements=st.floats(-1e300, 1e300),
    ),
    st.integers(-1, 0),
    st.booleans(),
)
def test_logsumexp_and_log_softmax_agree_with_scipy(x, axis, keepdims):
    from attention_lib import log_softmax, logsumexp

    assert_allclose(
        logsumexp(x, axis, keepdims),
        scipy.special.logsumexp(x, axis, keepdims=keepdims),
        rtol=1e-12,
        atol=0,
    )
    assert_allclose(
        log_softmax(x, axis), scipy.special.log_softmax(x, axis), rtol=1e-12, atol=1e-300
    )


def test_log_softmax_and_logsumexp_follow_softmax_on_fully_masked_rows():
    from attention_lib import log_softmax, logsumexp

    x = np.array([[0.0, -np.inf, 1.0], [-np.inf, -np.inf, -np.inf]])
    assert_allclose(np.exp(log_softmax(x)), softmax(x), rtol=1e-15)
    assert np.isneginf(log_softmax(x)[1]).all() and not np.isnan(log_softmax(x)).any()
    assert logsumexp(x)[1] == -np.inf == scipy.special.logsumexp(x, axis=-1)[1]
    assert_allclose(logsumexp(x, axis=0), scipy.special.logsumexp(x, axis=0))


def test_log_softmax_is_exact_where_softmax_underflows():
    from attention_lib import log_softmax

    assert log_softmax(np.array([0.0, -2000.0]))[1] == -2000.0
    assert log_softmax(np.array([0.0, -2000.0], dtype=np.float32)).dtype == np.float32


@pytest.mark.parametrize(
    "bad, message",
    [(np.array([np.nan, 0.0]), "NaN or \\+inf"), (np.array([np.inf, 0.0]), "NaN or \\+inf")],
)
def test_logsumexp_and_log_softmax_refuse_nan_and_plus_inf(bad, message):
    from attention_lib import log_softmax, logsumexp

    for f in (logsumexp, log_softmax):
        with pytest.raises(ValueError, match=message):
            f(bad)
    with pytest.raises(ValueError, match="axis 2 is out of range"):
        logsumexp(np.zeros((2, 2)), axis=2)


def test_softmax_backward_in_place_equals_the_copying_form():
    from attention_lib import softmax_backward

    rng = np.random.default_rng(2)
    P, g = softmax(rng.normal(size=(3, 4, 5))), rng.normal(size=(3, 4, 5))
    expected = softmax_backward(g, P)
    out = softmax_backward(g, P, overwrite=True)
    assert out is g
    assert_allclose(out, expected, rtol=1e-13, atol=1e-15)
