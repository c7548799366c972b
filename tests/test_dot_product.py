"""scaled_dot_product_attention: properties, dtypes, masks, and error messages."""

import numpy as np
import pytest
from hypothesis import given, strategies as st
from numpy.testing import assert_allclose, assert_array_equal

from attention_lib import (
    blockwise_attention,
    causal_mask,
    padding_mask,
    scaled_dot_product_attention,
)


def reference_attention(q, k, v, mask=None, scale=None):
    """Attention written out plainly, one query and one key at a time.

    ``mask`` is boolean (True = may attend). A query with nothing to attend to
    gets zero weights, as the library documents.
    """
    L, E = q.shape
    S = k.shape[0]
    scale = 1.0 / np.sqrt(E) if scale is None else scale
    out = np.zeros((L, v.shape[1]))
    weights = np.zeros((L, S))
    for i in range(L):
        allowed = [j for j in range(S) if mask is None or mask[i, j]]
        if not allowed:
            continue
        scores = {j: scale * sum(q[i, e] * k[j, e] for e in range(E)) for j in allowed}
        top = max(scores.values())
        exps = {j: np.exp(s - top) for j, s in scores.items()}
        total = sum(exps.values())
        for j in allowed:
            weights[i, j] = exps[j] / total
            out[i] += weights[i, j] * v[j]
    return out, weights


@st.composite
def attention_problem(draw, batch_dims=False, masked=True):
    """Random q, k, v (optionally with batch axes), a boolean mask and a scale."""
    L, S = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    E, Ev = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    batch = tuple(draw(st.lists(st.integers(1, 3), max_size=2))) if batch_dims else ()
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    spread = draw(st.sampled_from([0.1, 1.0, 10.0]))
    q = spread * rng.normal(size=batch + (L, E))
    k = spread * rng.normal(size=batch + (S, E))
    v = rng.normal(size=batch + (S, Ev))
    mask = rng.random(batch + (L, S)) < draw(st.floats(0, 1)) if masked else None
    scale = draw(st.one_of(st.none(), st.floats(0.01, 3.0)))
    return q, k, v, mask, scale


@given(attention_problem())
def test_agrees_with_plain_reference(problem):
    q, k, v, mask, scale = problem
    out, w = scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, return_weights=True)
    ref_out, ref_w = reference_attention(q, k, v, mask, scale)
    assert_allclose(w, ref_w, rtol=1e-10, atol=1e-12)
    assert_allclose(out, ref_out, rtol=1e-10, atol=1e-12)


@given(attention_problem(batch_dims=True))
def test_weights_are_non_negative_and_rows_sum_to_one_or_zero(problem):
    q, k, v, mask, scale = problem
    _, w = scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, return_weights=True)
    assert np.all(w >= 0)
    row_sums = w.sum(axis=-1)
    fully_masked = ~mask.any(axis=-1)
    assert_allclose(row_sums[~fully_masked], 1.0, rtol=1e-12)
    assert np.all(row_sums[fully_masked] == 0.0)
    assert np.all(w[~mask] == 0.0)


@given(attention_problem(batch_dims=True, masked=False))
def test_batch_axes_are_independent_problems(problem):
    q, k, v, _, scale = problem
    out = scaled_dot_product_attention(q, k, v, scale=scale)
    for index in np.ndindex(q.shape[:-2]):
        assert_allclose(
            out[index],
            scaled_dot_product_attention(q[index], k[index], v[index], scale=scale),
            rtol=1e-12,
            atol=1e-14,
        )


@given(st.integers(2, 8), st.integers(1, 5), st.data())
def test_causal_outputs_ignore_the_future(n, E, data):
    """Changing keys and values after position t leaves outputs up to t bit-identical."""
    t = data.draw(st.integers(0, n - 2), label="t")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    q, k, v = (rng.normal(size=(n, E)) for _ in range(3))
    before = scaled_dot_product_attention(q, k, v, is_causal=True)
    k2, v2 = k.copy(), v.copy()
    k2[t + 1 :] = rng.normal(size=k2[t + 1 :].shape) * 100
    v2[t + 1 :] = rng.normal(size=v2[t + 1 :].shape) * 100
    after = scaled_dot_product_attention(q, k2, v2, is_causal=True)
    assert_array_equal(after[: t + 1], before[: t + 1])
    assert not np.array_equal(after[t + 1 :], before[t + 1 :])  # the future did change


@given(attention_problem(), st.randoms(use_true_random=False))
def test_permuting_keys_and_values_together_changes_nothing(problem, random):
    q, k, v, mask, scale = problem
    perm = np.array(random.sample(range(k.shape[0]), k.shape[0]))
    out = scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    out_perm = scaled_dot_product_attention(
        q, k[perm], v[perm], attn_mask=mask[:, perm], scale=scale
    )
    assert_allclose(out_perm, out, rtol=1e-10, atol=1e-12)


@given(attention_problem(), st.randoms(use_true_random=False))
def test_permuting_queries_permutes_outputs(problem, random):
    q, k, v, mask, scale = problem
    perm = np.array(random.sample(range(q.shape[0]), q.shape[0]))
    out = scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    out_perm = scaled_dot_product_attention(q[perm], k, v, attn_mask=mask[perm], scale=scale)
    assert_allclose(out_perm, out[perm], rtol=1e-10, atol=1e-12)


@given(attention_problem())
def test_boolean_and_additive_masks_agree(problem):
    q, k, v, mask, scale = problem
    additive = np.where(mask, 0.0, -np.inf)
    assert_allclose(
        scaled_dot_product_attention(q, k, v, attn_mask=additive, scale=scale),
        scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale),
        rtol=1e-12,
        atol=1e-14,
    )


@given(attention_problem(masked=False), st.floats(0.05, 5.0))
def test_scale_is_the_same_as_scaling_the_queries(problem, c):
    q, k, v, _, _ = problem
    assert_allclose(
        scaled_dot_product_attention(q, k, v, scale=c),
        scaled_dot_product_attention(c * q, k, v, scale=1.0),
        rtol=1e-10,
        atol=1e-12,
    )


def test_default_scale_is_one_over_sqrt_of_features():
    rng = np.random.default_rng(1)
    q, k, v = rng.normal(size=(3, 16)), rng.normal(size=(5, 16)), rng.normal(size=(5, 2))
    assert_allclose(
        scaled_dot_product_attention(q, k, v), scaled_dot_product_attention(q, k, v, scale=0.25)
    )


def test_float_mask_is_added_to_the_scores():
    q = np.array([[1.0, 0.0]])
    k = np.array([[1.0, 0.0], [0.0, 1.0]])
    v = np.eye(2)
    bias = np.array([[0.0, np.log(3.0)]])
    _, w = scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=0.0, return_weights=True)
    assert_allclose(w, [[0.25, 0.75]])


def test_fully_masked_row_gives_zero_output_not_nan():
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(3, 4)), rng.normal(size=(3, 2))
    mask = np.array([[True, True, False], [False, False, False], [True, False, False]])
    out, w = scaled_dot_product_attention(q, k, v, attn_mask=mask, return_weights=True)
    assert not np.isnan(out).any()
    assert np.all(out[1] == 0) and np.all(w[1] == 0)
    out_inf = scaled_dot_product_attention(q, k, v, attn_mask=np.where(mask, 0, -np.inf))
    assert np.all(out_inf[1] == 0)


def test_padding_mask_for_a_batch():
    rng = np.random.default_rng(2)
    lengths = [4, 2, 3]
    q, k, v = (rng.normal(size=(3, 4, 5)) for _ in range(3))
    out = scaled_dot_product_attention(q, k, v, attn_mask=padding_mask(lengths)[:, None, :])
    for b, n in enumerate(lengths):  # same as attending to the unpadded keys only
        assert_allclose(out[b], scaled_dot_product_attention(q[b], k[b, :n], v[b, :n]))


def test_causal_and_padding_masks_combine():
    rng = np.random.default_rng(3)
    q, k, v = (rng.normal(size=(2, 4, 3)) for _ in range(3))
    pad = padding_mask([4, 2])[:, None, :]
    combined = scaled_dot_product_attention(q, k, v, attn_mask=pad, is_causal=True)
    explicit = scaled_dot_product_attention(q, k, v, attn_mask=pad & causal_mask(4))
    assert_allclose(combined, explicit)


def test_huge_scores_stay_finite():
    q = np.array([[1e3, 0.0]])
    k = np.array([[1e3, 0.0], [-1e3, 0.0], [0.0, 1e3]])
    v = np.array([[1.0], [2.0], [3.0]])
    out = scaled_dot_product_attention(q, k, v, scale=1.0)  # scores of 1e6
    assert_allclose(out, [[1.0]])


@pytest.mark.parametrize(
    "dtype, expected",
    [
        (np.float32, np.float32),
        (np.float64, np.float64),
        (np.float16, np.float32),
        (np.int64, np.float64),
        (np.int32, np.float64),
    ],
)
def test_result_dtype(dtype, expected):
    x = np.ones((2, 3), dtype=dtype)
    out, w = scaled_dot_product_attention(x, x, x, return_weights=True)
    assert out.dtype == expected and w.dtype == expected


def test_float32_agrees_with_float64():
    rng = np.random.default_rng(4)
    q, k, v = (rng.normal(size=(6, 8)) for _ in range(3))
    out32 = scaled_dot_product_attention(*(a.astype(np.float32) for a in (q, k, v)))
    assert_allclose(out32, scaled_dot_product_attention(q, k, v), rtol=1e-5, atol=1e-6)


def test_no_keys_means_zero_output():
    out = scaled_dot_product_attention(np.ones((2, 3)), np.ones((0, 3)), np.ones((0, 4)))
    assert out.shape == (2, 4) and np.all(out == 0)


# --- bad input: each error names what was wrong ---------------------------------

Q, K, V = np.zeros((4, 8)), np.zeros((6, 8)), np.zeros((6, 5))


@pytest.mark.parametrize(
    "args, kwargs, message",
    [
        (
            (np.zeros((4, 300)), np.zeros((6, 64)), V),
            {},
            "query has 300 features but key has 64: the last axes must match",
        ),
        (
            (Q, K, np.zeros((7, 5))),
            {},
            "key has 6 positions but value has 7: every key needs one value",
        ),
        (
            (np.zeros(8), K, V),
            {},
            "query must have at least 2 axes \\(..., L, E\\), got shape \\(8,\\)",
        ),
        ((Q, np.zeros(8), V), {}, "key must have at least 2 axes"),
        ((Q, K, np.zeros(6)), {}, "value must have at least 2 axes"),
        (
            (np.zeros((2, 4, 8)), np.zeros((3, 6, 8)), np.zeros((3, 6, 5))),
            {},
            "the batch axes of query \\(2, 4, 8\\), key \\(3, 6, 8\\) and value \\(3, 6, 5\\) do not broadcast",
        ),
        (
            (Q, K, V),
            {"attn_mask": np.ones((4, 5), dtype=bool)},
            "attn_mask of shape \\(4, 5\\) cannot broadcast to the scores' shape \\(..., L, S\\) = \\(4, 6\\)",
        ),
        (
            (Q, K, V),
            {"attn_mask": np.ones((2, 4, 6), dtype=bool)},
            "attn_mask of shape \\(2, 4, 6\\) cannot broadcast",
        ),
        ((np.full((4, 8), np.nan), K, V), {}, "query contains NaN or infinity"),
        ((Q, K, V), {"attn_mask": np.full((4, 6), np.nan)}, "attn_mask contains NaN"),
        ((Q, K, V), {"scale": np.inf}, "scale must be a finite number"),
    ],
)
def test_value_errors_name_the_arguments_and_shapes(args, kwargs, message):
    with pytest.raises(ValueError, match=message):
        scaled_dot_product_attention(*args, **kwargs)


@pytest.mark.parametrize(
    "bad, name",
    [
        (np.array([["a", "b"], ["c", "d"]]), "query"),
        (np.zeros((2, 2), dtype=complex), "query"),
        ([[1.0, 2.0], [3.0]], "query"),
    ],
)
def test_type_errors_for_non_numeric_input(bad, name):
    with pytest.raises(TypeError, match=f"{name} must be an array of real numbers"):
        scaled_dot_product_attention(bad, np.zeros((2, 2)), np.zeros((2, 2)))


def test_type_error_for_non_numeric_mask():
    with pytest.raises(TypeError, match="attn_mask must be an array of real numbers"):
        scaled_dot_product_attention(Q, K, V, attn_mask=np.full((4, 6), "x"))


# --- faults an adversarial pass found (each test failed before its fix) --------

ATTENTION_FUNCTIONS = [scaled_dot_product_attention, blockwise_attention]
FUNCTION_IDS = ["scaled_dot_product_attention", "blockwise_attention"]


@pytest.mark.parametrize("attend", ATTENTION_FUNCTIONS, ids=FUNCTION_IDS)
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8, np.int8])
def test_integer_masks_are_refused_not_added_to_the_scores(attend, dtype):
    """A 0/1 integer mask would be added to the scores as a bias (row 0 of a
    causal mask got weights 0.54 0.31 0.05 0.10 instead of 1 0 0 0)."""
    q = k = v = np.random.default_rng(0).normal(size=(4, 3))
    mask = causal_mask(4).astype(dtype)
    with pytest.raises(
        TypeError,
        match="attn_mask must be boolean .*True = may "
        "attend.* or floating .*added.*astype\\(bool\\)",
    ):
        attend(q, k, v, attn_mask=mask)


@pytest.mark.parametrize("attend", ATTENTION_FUNCTIONS, ids=FUNCTION_IDS)
def test_boolean_and_float_masks_are_still_accepted(attend):
    q = k = v = np.random.default_rng(0).normal(size=(4, 3))
    mask = causal_mask(4)
    float_mask = np.where(mask, 0.0, -np.inf)
    assert_allclose(attend(q, k, v, attn_mask=mask), attend(q, k, v, is_causal=True))
    assert_allclose(attend(q, k, v, attn_mask=float_mask), attend(q, k, v, is_causal=True))


def _f32(value, shape=(2, 3)):
    return np.full(shape, value, dtype=np.float32)


@pytest.mark.parametrize("attend", ATTENTION_FUNCTIONS, ids=FUNCTION_IDS)
@pytest.mark.parametrize(
    "q, k, v, scale",
    [
        (_f32(1e20), _f32(1e20), _f32(1.0), None),  # scores 1e40 > float32 max
        (_f32(3e38), _f32(3e38), _f32(1.0), None),
        (_f32(-3e38), _f32(3e38), _f32(1.0), None),  # scores -inf everywhere
        (np.full((2, 3), 2.0), np.full((2, 3), 2.0), np.ones((2, 3)), 1e308),
        (_f32(1.0), _f32(0.0), _f32(1.0), 1e300),  # q * scale overflows
    ],
    ids=["f32-1e20", "f32-3e38", "f32-minus-3e38", "scale-1e308", "q-times-scale"],
)
def test_overflowing_scores_raise_instead_of_nan(attend, q, k, v, scale):
    """Finite inputs must never give NaN or inf silently."""
    with pytest.raises(ValueError, match="overflow.*query.*key.*scale.*float64"):
        attend(q, k, v, scale=scale)


@pytest.mark.parametrize("attend", ATTENTION_FUNCTIONS, ids=FUNCTION_IDS)
@pytest.mark.parametrize("kwargs", [{}, {"attn_mask": np.ones((2, 2), bool)}])
def test_values_near_the_float32_limit_raise_on_every_path(attend, kwargs):
    """float32 values near 3e38 gave inf on one path and finite on another."""
    q = k = _f32(1.0, (2, 3))
    with pytest.raises(ValueError, match="value .*overflow.*float64"):
        attend(q, k, _f32(3e38, (2, 3)), **kwargs)
    if attend is scaled_dot_product_attention:
        with pytest.raises(ValueError, match="value .*overflow"):
            attend(q, k, _f32(3e38, (2, 3)), return_weights=True, **kwargs)


@pytest.mark.parametrize("attend", ATTENTION_FUNCTIONS, ids=FUNCTION_IDS)
def test_float_mask_that_overflows_the_scores_raises(attend):
    q = k = _f32(1e19, (2, 2))  # scores 1e38: finite
    mask = _f32(3e38, (2, 2))  # + 3e38: inf
    with pytest.raises(ValueError, match="attn_mask.*overflow"):
        attend(q, k, _f32(1.0, (2, 2)), attn_mask=mask, scale=1.0)


@pytest.mark.parametrize("attend", ATTENTION_FUNCTIONS, ids=FUNCTION_IDS)
def test_large_but_representable_float32_inputs_still_work(attend):
    """The overflow checks must not refuse what can be computed."""
    q = np.array([[1e18, 0.0], [0.0, 1e18]], dtype=np.float32)
    k = np.array([[1e18, 0.0], [0.0, -1e18]], dtype=np.float32)  # scores 1e36
    v = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)
    out = attend(q, k, v, scale=1.0)
    assert out.dtype == np.float32
    assert_allclose(out, [[1.0, 2.0], [1.0, 2.0]])


@pytest.mark.parametrize("attend", ATTENTION_FUNCTIONS, ids=FUNCTION_IDS)
@pytest.mark.parametrize(
    "scale, error, message",
    [
        ("0.5", TypeError, "scale must be a real number, got '0.5'"),
        (np.ones(2), TypeError, "scale must be a real number, got array of shape \\(2,\\)"),
        (True, TypeError, "scale must be a real number, got True"),
        (1 + 2j, TypeError, "scale must be a real number"),
        (np.nan, ValueError, "scale must be a finite number"),
    ],
)
def test_scale_must_be_one_real_number(attend, scale, error, message):
    q = np.ones((2, 3))
    with pytest.raises(error, match=message):
        attend(q, q, q, scale=scale)


@pytest.mark.parametrize("attend", ATTENTION_FUNCTIONS, ids=FUNCTION_IDS)
def test_scale_accepts_numpy_scalars_and_zero_d_arrays(attend):
    q = np.random.default_rng(1).normal(size=(3, 4))
    expected = attend(q, q, q, scale=0.5)
    for scale in (np.float32(0.5), np.float64(0.5), np.array(0.5), 0.5):
        assert_allclose(attend(q, q, q, scale=scale), expected, rtol=1e-6)


@pytest.mark.parametrize("attend", ATTENTION_FUNCTIONS, ids=FUNCTION_IDS)
@pytest.mark.parametrize("flag", ["no", 1, 0, None, np.array([True])])
def test_is_causal_must_be_a_bool(attend, flag):
    """``is_causal="no"`` is truthy: it used to apply the causal mask."""
    q = np.ones((2, 3))
    with pytest.raises(TypeError, match="is_causal must be True or False, got"):
        attend(q, q, q, is_causal=flag)


def test_is_causal_accepts_numpy_bools():
    q = np.random.default_rng(2).normal(size=(3, 2))
    assert_allclose(
        scaled_dot_product_attention(q, q, q, is_causal=np.bool_(True)),
        scaled_dot_product_attention(q, q, q, is_causal=True),
    )


@pytest.mark.parametrize("flag", ["no", 1])
def test_return_weights_must_be_a_bool(flag):
    q = np.ones((2, 3))
    with pytest.raises(TypeError, match="return_weights must be True or False"):
        scaled_dot_product_attention(q, q, q, return_weights=flag)


def test_padding_mask_needs_a_query_axis_documented():
    """A (B, S) padding mask broadcasts silently against (B, L, E) queries when
    B == L: it cannot be caught, so the docstrings must say so and show
    ``mask[:, None, :]``."""
    for attend in ATTENTION_FUNCTIONS:
        doc = " ".join(attend.__doc__.split())
        assert "B == L" in doc and "mask[:, None, :]" in doc, attend.__name__
    # What the docstring warns about, shown: B = L = 2.
    rng = np.random.default_rng(3)
    q, k, v = rng.normal(size=(2, 2, 3)), rng.normal(size=(2, 4, 3)), rng.normal(size=(2, 4, 1))
    mask = padding_mask([4, 1])
    _, wrong = scaled_dot_product_attention(q, k, v, attn_mask=mask, return_weights=True)
    _, right = scaled_dot_product_attention(
        q, k, v, attn_mask=mask[:, None, :], return_weights=True
    )
    assert np.all(right[1, :, 1:] == 0)  # sequence 1 has one real key
    assert np.any(wrong[1, :, 1:] > 0)  # the silent broadcast misses it


@pytest.mark.parametrize(
    "function", [scaled_dot_product_attention, blockwise_attention], ids=["plain", "blockwise"]
)
@pytest.mark.parametrize("kind", ["bool", "float"])
def test_mask_with_batch_axes_only_value_has_broadcasts_like_the_value(function, kind):
    """Batch axes that only ``value`` (and the mask) have: one problem per batch entry.

    The scores ``q k^T`` have no batch axis here, so masking them in place used to
    fail inside NumPy ("non-broadcastable output operand").
    """
    rng = np.random.default_rng(3)
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(2, 5, 3))
    allowed = rng.random((2, 3, 5)) > 0.3
    allowed[..., 0] = True
    mask = allowed if kind == "bool" else np.where(allowed, 0.0, -np.inf)
    out = function(q, k, v, attn_mask=mask)
    one_by_one = np.stack(
        [scaled_dot_product_attention(q, k, v[b], attn_mask=mask[b]) for b in range(2)]
    )
    assert out.shape == (2, 3, 3)
    np.testing.assert_allclose(out, one_by_one, rtol=1e-12, atol=1e-12)


FLOAT32_UNREPRESENTABLE = np.array([[-1e39, -2e39]])  # finite in float64 only


@pytest.mark.parametrize("function", [scaled_dot_product_attention, blockwise_attention])
def test_finite_float64_biases_on_float32_inputs_stay_biases_not_masks(function):
    # Cast to float32 the biases become -inf: hard masking, weights [0, 0].
    # The softmax of the biases -1e39, -2e39 (the scores are equal) is [1, 0].
    q = np.ones((1, 4), np.float32)
    k = np.ones((2, 4), np.float32)
    v = np.array([[1.0], [2.0]], np.float32)
    with np.errstate(all="raise"):
        out = function(q, k, v, attn_mask=FLOAT32_UNREPRESENTABLE)
    assert out.dtype == np.float32
    assert_array_equal(out, [[1.0]])
    _, w = scaled_dot_product_attention(
        q, k, v, attn_mask=FLOAT32_UNREPRESENTABLE, return_weights=True
    )
    assert_array_equal(w, [[1.0, 0.0]])


def test_huge_finite_biases_give_the_float64_answer_when_rows_shift_into_range():
    rng = np.random.default_rng(3)
    q, k, v = (rng.normal(size=s) for s in ((3, 4), (5, 4), (5, 2)))
    bias = rng.normal(size=(3, 5)) - 1e39  # every row: -1e39 + small
    expected = scaled_dot_product_attention(q, k, v, attn_mask=bias + 1e39)
    got = scaled_dot_product_attention(*(a.astype(np.float32) for a in (q, k, v)), attn_mask=bias)
    assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_biases_too_far_apart_for_float32_while_scores_matter_are_refused():
    # Scores 1.8e38 and -1.8e38 plus biases -3.5e38 and 0: key 0 wins
    # (-1.7e38 > -1.8e38), but float32 cannot hold the bias -3.5e38, and as
    # -inf it would hand all the weight to key 1. Refuse, naming attn_mask.
    q = np.full((1, 1), 1e19, np.float32)
    k = np.array([[1.8e19], [-1.8e19]], np.float32)
    with pytest.raises(ValueError, match="attn_mask holds finite biases"):
        scaled_dot_product_attention(
            q, k, np.ones((2, 1), np.float32), attn_mask=np.array([[-3.5e38, 0.0]]), scale=1.0
        )
