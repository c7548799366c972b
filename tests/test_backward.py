"""Tests for attention_lib.backward: the gradients of attention, by hand."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_lib import (
    blockwise_attention,
    blockwise_attention_backward,
    scaled_dot_product_attention,
    scaled_dot_product_attention_backward,
)
from attention_lib.gradcheck import TOLERANCE, numerical_gradient, relative_error

FD_TOLERANCE = TOLERANCE  # relative error allowed against central differences (float64)
TORCH_TOLERANCE = 1e-10
BLOCKWISE_TOLERANCE = 1e-12


@st.composite
def problems(draw):
    """Random shapes (with broadcast batch axes), masks and scales."""
    batch = tuple(draw(st.lists(st.integers(1, 2), max_size=2)))
    L, S = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    E, Ev = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))

    def batch_of(shape):  # each input may drop or shrink batch axes
        b = tuple(n if draw(st.booleans()) else 1 for n in batch)
        return b[draw(st.integers(0, len(b))) :] + shape

    q = rng.normal(size=batch_of((L, E)))
    k = rng.normal(size=batch_of((S, E)))
    v = rng.normal(size=batch_of((S, Ev)))
    kwargs = {"is_causal": draw(st.booleans()), "scale": draw(st.none() | st.floats(0.1, 2.0))}
    mask_kind = draw(st.sampled_from(["none", "bool", "float"]))
    if mask_kind != "none":
        # Batch axes of the scores' size only: scaled_dot_product_attention
        # (as of this writing) cannot add a mask whose batch axes come from
        # the values alone.
        full = np.broadcast_shapes(q.shape[:-2], k.shape[:-2]) + (L, S)
        shape = tuple(n if draw(st.booleans()) else 1 for n in full)
        keep = rng.random(shape) < draw(st.sampled_from([0.0, 0.5, 0.8, 1.0]))
        kwargs["attn_mask"] = (
            keep if mask_kind == "bool" else np.where(keep, rng.normal(size=shape), -np.inf)
        )
    return q, k, v, kwargs


@settings(max_examples=60, deadline=None)
@given(problems())
def test_backward_matches_central_finite_differences(problem):
    q, k, v, kwargs = problem
    out = scaled_dot_product_attention(q, k, v, **kwargs)
    g = np.random.default_rng(0).normal(size=out.shape)  # loss = sum(g * O)

    def loss():
        return np.sum(g * scaled_dot_product_attention(q, k, v, **kwargs))

    grads = scaled_dot_product_attention_backward(g, q, k, v, **kwargs)
    for x, grad in zip((q, k, v), grads):
        assert grad.shape == x.shape
        assert relative_error(grad, numerical_gradient(loss, x)) < FD_TOLERANCE


def test_fully_masked_rows_give_zero_gradients_not_nan():
    rng = np.random.default_rng(1)
    q, k, v = rng.normal(size=(4, 3)), rng.normal(size=(6, 3)), rng.normal(size=(6, 2))
    mask = rng.random((4, 6)) < 0.5
    mask[[0, 2]] = False  # queries 0 and 2 see nothing
    g = rng.normal(size=(4, 2))
    dq, dk, dv = scaled_dot_product_attention_backward(g, q, k, v, attn_mask=mask)
    assert all(np.isfinite(a).all() for a in (dq, dk, dv))
    np.testing.assert_array_equal(dq[[0, 2]], 0.0)
    float_mask = np.where(mask, 0.0, -np.inf)  # the same as a float mask
    for a, b in zip(
        (dq, dk, dv), scaled_dot_product_attention_backward(g, q, k, v, attn_mask=float_mask)
    ):
        np.testing.assert_allclose(a, b, rtol=1e-14, atol=0)
    everything_masked = np.zeros((4, 6), dtype=bool)
    for grad in scaled_dot_product_attention_backward(
        np.ones((4, 2)), q, k, v, attn_mask=everything_masked
    ):
        np.testing.assert_array_equal(grad, 0.0)


def test_masked_keys_get_zero_gradient():
    rng = np.random.default_rng(2)
    q, k, v = rng.normal(size=(5, 4)), rng.normal(size=(7, 4)), rng.normal(size=(7, 3))
    padding = np.array([True] * 4 + [False] * 3)  # keys 4, 5, 6 are padding
    dq, dk, dv = scaled_dot_product_attention_backward(
        rng.normal(size=(5, 3)), q, k, v, attn_mask=padding
    )
    np.testing.assert_array_equal(dk[4:], 0.0)
    np.testing.assert_array_equal(dv[4:], 0.0)
    assert np.abs(dk[:4]).min() > 0 and np.abs(dv[:4]).min() > 0
    # Under a causal mask the last key is seen by the last query only.
    g = np.zeros((7, 3))
    g[:6] = rng.normal(size=(6, 3))  # the last query's output unused
    _, dk, dv = scaled_dot_product_attention_backward(
        g, rng.normal(size=(7, 4)), k, v, is_causal=True
    )
    np.testing.assert_array_equal(dk[6], 0.0)
    np.testing.assert_array_equal(dv[6], 0.0)


def test_value_gradient_is_weights_transposed_times_grad_output():
    rng = np.random.default_rng(3)
    q, k, v = rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 6, 4)), rng.normal(size=(2, 6, 3))
    g = rng.normal(size=(2, 5, 3))
    _, w = scaled_dot_product_attention(q, k, v, return_weights=True)
    _, _, dv = scaled_dot_product_attention_backward(g, q, k, v)
    np.testing.assert_allclose(dv, np.swapaxes(w, -1, -2) @ g, rtol=1e-13)


def test_broadcast_inputs_get_gradients_summed_over_the_batch():
    rng = np.random.default_rng(4)
    q = rng.normal(size=(3, 4, 2))
    k, v = rng.normal(size=(5, 2)), rng.normal(size=(1, 5, 3))  # shared by the batch
    g = rng.normal(size=(3, 4, 3))
    dq, dk, dv = scaled_dot_product_attention_backward(g, q, k, v)
    assert dk.shape == (5, 2) and dv.shape == (1, 5, 3)
    per_item = [scaled_dot_product_attention_backward(g[b], q[b], k, v[0]) for b in range(3)]
    np.testing.assert_allclose(dk, sum(p[1] for p in per_item), rtol=1e-12)
    np.testing.assert_allclose(dv[0], sum(p[2] for p in per_item), rtol=1e-12)


def test_float32_stays_float32_and_integers_give_float64():
    rng = np.random.default_rng(5)
    q, k, v = (rng.normal(size=(6, 4)) for _ in range(3))
    g = rng.normal(size=(6, 4))
    grads32 = scaled_dot_product_attention_backward(
        g.astype(np.float32), q.astype(np.float32), k.astype(np.float32), v.astype(np.float32)
    )
    grads64 = scaled_dot_product_attention_backward(g, q, k, v)
    for a, b in zip(grads32, grads64):
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, b, atol=1e-5)
    ints = scaled_dot_product_attention_backward(
        np.ones((2, 2), dtype=int), [[1, 0], [0, 1]], [[1, 2], [3, 4]], [[0, 1], [1, 0]]
    )
    assert all(a.dtype == np.float64 for a in ints)


def test_large_scores_give_finite_gradients():
    rng = np.random.default_rng(6)
    q, k, v = 1e3 * rng.normal(size=(4, 3)), rng.normal(size=(5, 3)), rng.normal(size=(5, 2))
    for grad in scaled_dot_product_attention_backward(np.ones((4, 2)), q, k, v):
        assert np.isfinite(grad).all()


def test_bad_grad_output_is_refused_with_a_clear_message():
    q, k, v = np.ones((3, 2)), np.ones((4, 2)), np.ones((4, 5))
    with pytest.raises(ValueError, match=r"grad_output has shape \(3, 2\).*\(3, 5\)"):
        scaled_dot_product_attention_backward(np.ones((3, 2)), q, k, v)
    with pytest.raises(ValueError, match="grad_output contains NaN"):
        scaled_dot_product_attention_backward(np.full((3, 5), np.nan), q, k, v)
    with pytest.raises(TypeError, match="grad_output must be an array of real numbers"):
        scaled_dot_product_attention_backward("dO", q, k, v)
    with pytest.raises(ValueError, match="the last axes must match"):
        scaled_dot_product_attention_backward(np.ones((3, 5)), q, np.ones((4, 3)), v)


@settings(max_examples=60, deadline=None)
@given(problems(), st.integers(1, 4), st.none() | st.integers(1, 4))
def test_blockwise_backward_equals_plain_backward_in_float64(problem, block_size, query_block_size):
    q, k, v, kwargs = problem
    out, lse = blockwise_attention(
        q,
        k,
        v,
        **kwargs,
        block_size=block_size,
        query_block_size=query_block_size,
        return_logsumexp=True,
    )
    g = np.random.default_rng(7).normal(size=out.shape)
    expected = scaled_dot_product_attention_backward(g, q, k, v, **kwargs)
    got = blockwise_attention_backward(
        g, q, k, v, out, lse, **kwargs, block_size=block_size, query_block_size=query_block_size
    )
    for a, b in zip(got, expected):
        assert a.shape == b.shape and np.isfinite(a).all()
        assert np.max(np.abs(a - b), initial=0) <= BLOCKWISE_TOLERANCE


def test_blockwise_backward_refuses_a_logsumexp_of_the_wrong_shape():
    q, k, v = np.ones((3, 2)), np.ones((4, 2)), np.ones((4, 5))
    out, lse = blockwise_attention(q, k, v, return_logsumexp=True)
    with pytest.raises(ValueError, match="logsumexp has shape"):
        blockwise_attention_backward(np.ones((3, 5)), q, k, v, out, lse[:2])
    with pytest.raises(ValueError, match="block_size must be a positive integer"):
        blockwise_attention_backward(np.ones((3, 5)), q, k, v, out, lse, block_size=0)


@pytest.mark.parametrize("mask_kind", ["none", "bool", "float", "causal"])
def test_backward_matches_pytorch_autograd_in_float64(mask_kind):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(8)
    q, k, v = rng.normal(size=(2, 6, 4)), rng.normal(size=(2, 9, 4)), rng.normal(size=(2, 9, 3))
    g = rng.normal(size=(2, 6, 3))
    kwargs, torch_kwargs = {"scale": 0.7}, {"scale": 0.7}
    if mask_kind == "bool":
        mask = rng.random((6, 9)) < 0.6
        mask[:, 0] = True  # older PyTorch gives NaN for fully masked rows
        kwargs["attn_mask"] = mask
        torch_kwargs["attn_mask"] = torch.from_numpy(mask)
    elif mask_kind == "float":
        mask = rng.normal(size=(6, 9))
        kwargs["attn_mask"] = mask
        torch_kwargs["attn_mask"] = torch.from_numpy(mask)
    elif mask_kind == "causal":
        kwargs["is_causal"] = torch_kwargs["is_causal"] = True
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    F.scaled_dot_product_attention(tq, tk, tv, **torch_kwargs).backward(torch.from_numpy(g))
    ours = scaled_dot_product_attention_backward(g, q, k, v, **kwargs)
    for a, t in zip(ours, (tq, tk, tv)):
        np.testing.assert_allclose(a, t.grad.numpy(), rtol=0, atol=TORCH_TOLERANCE)


@pytest.mark.parametrize("flag", ["no", 1, np.array([True, False]), None])
def test_blockwise_backward_is_causal_must_be_a_bool_as_in_the_forward_pass(flag):
    # "no" is truthy: it used to give causal gradients for a non-causal forward.
    q, k, v = np.ones((3, 2)), np.ones((4, 2)), np.ones((4, 5))
    out, lse = blockwise_attention(q, k, v, return_logsumexp=True)
    with pytest.raises(TypeError, match="is_causal must be True or False"):
        blockwise_attention_backward(np.ones((3, 5)), q, k, v, out, lse, is_causal=flag)
    with pytest.raises(TypeError, match="is_causal must be True or False"):
        blockwise_attention(q, k, v, is_causal=flag)
