"""Tests for attention_lib.nn.GELU (exact and tanh) and SiLU."""

import numpy as np
import pytest

from attention_lib.gradcheck import TOLERANCE as FD_TOLERANCE
from attention_lib.gradcheck import numerical_gradient, relative_error
from attention_lib.nn import GELU, SiLU


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_backward_matches_finite_differences(approximate):
    rng = np.random.default_rng(0)
    act, x, g = GELU(approximate), rng.normal(scale=2, size=(3, 8)), rng.normal(size=(3, 8))
    act.forward(x)
    dx = act.backward(g)
    numeric = numerical_gradient(lambda: np.sum(g * act.forward(x)), x)
    assert relative_error(dx, numeric) < FD_TOLERANCE


def test_gelu_passes_large_inputs_and_silences_large_negative_ones():
    y = GELU().forward(np.array([-10.0, 0.0, 10.0]))
    assert np.allclose(y, [0.0, 0.0, 10.0], atol=1e-12)


def test_the_tanh_form_stays_close_to_the_exact_gelu():
    x = np.linspace(-5, 5, 101)
    assert np.max(np.abs(GELU("tanh").forward(x) - GELU().forward(x))) < 1e-3


def test_float32_gelu_keeps_float32_accuracy_in_both_tails_and_across_chunks():
    from scipy.special import ndtr

    # 40,001 values: more than two of the float32 path's cache-sized chunks.
    x32 = np.linspace(-12, 12, 40_001, dtype=np.float32)
    x = x32.astype(np.float64)
    act = GELU()
    y = act.forward(x32)
    assert y.dtype == np.float32
    cdf = act.cdf.astype(np.float64)
    # Phi itself, relative: 1e-6 where float32 can hold it (a 1 + erf form loses the lower tail).
    rel = np.abs(cdf - ndtr(x)) / ndtr(x)
    assert rel[np.abs(x) < 4].max() < 1e-6 and rel[ndtr(x) > 1e-30].max() < 2e-5
    assert np.allclose(y, x * ndtr(x), rtol=1.2e-6, atol=1e-12)
    g = np.linspace(-1, 1, x.size)
    exact = g * (ndtr(x) + x * np.exp(-x * x / 2) / np.sqrt(2 * np.pi))
    assert np.allclose(act.backward(g.astype(np.float32)), exact, rtol=5e-6, atol=1e-7)
    # A transposed (non-contiguous) input gives the same values as its contiguous copy.
    grid = x32[:40_000].reshape(200, 200)
    assert np.array_equal(GELU().forward(grid.T), GELU().forward(grid.T.copy()))
    # -inf * Phi(-inf) = -inf * 0 is NaN, and NumPy says so: the warning is expected
    # (the test command's -W error would otherwise fail here)
    with pytest.warns(RuntimeWarning, match="invalid value encountered in multiply"):
        at_the_ends = GELU().forward(np.array([np.inf, -np.inf, 0, np.nan], np.float32))
    assert np.array_equal(
        at_the_ends, np.array([np.inf, np.nan, 0, np.nan], np.float32), equal_nan=True
    )


def test_gelu_refuses_an_unknown_approximation():
    with pytest.raises(ValueError, match='approximate must be "none" or "tanh"'):
        GELU("sigmoid")


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_matches_torch_forward_and_backward(approximate):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    x, g = rng.normal(scale=3, size=(4, 5)), rng.normal(size=(4, 5))
    act = GELU(approximate)
    y = act.forward(x)
    dx = act.backward(g)
    xt = torch.tensor(x, requires_grad=True)
    yt = torch.nn.GELU(approximate=approximate)(xt)
    (yt * torch.tensor(g)).sum().backward()
    assert np.allclose(y, yt.detach().numpy(), rtol=0, atol=1e-10)
    assert np.allclose(dx, xt.grad.numpy(), rtol=0, atol=1e-10)


# SiLU (Llama's gate)


def test_silu_backward_matches_finite_differences():
    rng = np.random.default_rng(20)
    act, x, g = SiLU(), rng.normal(scale=3, size=(3, 8)), rng.normal(size=(3, 8))
    act.forward(x)
    dx = act.backward(g)
    numeric = numerical_gradient(lambda: np.sum(g * act.forward(x)), x)
    assert relative_error(dx, numeric) < FD_TOLERANCE


def test_silu_is_x_times_sigmoid_without_overflow_and_keeps_float32():
    x = np.array([-1000.0, -1.0, 0.0, 2.0, 1000.0])
    with np.errstate(all="raise"):
        y = SiLU().forward(x)
    assert np.allclose(y, [0.0, -1 / (1 + np.e), 0.0, 2 / (1 + np.exp(-2)), 1000.0])
    assert SiLU().forward(x.astype(np.float32)).dtype == np.float32


def test_silu_matches_torch_forward_and_backward():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(21)
    x, g = rng.normal(scale=3, size=(4, 5)), rng.normal(size=(4, 5))
    act = SiLU()
    y = act.forward(x)
    dx = act.backward(g)
    xt = torch.tensor(x, requires_grad=True)
    yt = torch.nn.functional.silu(xt)
    (yt * torch.tensor(g)).sum().backward()
    assert np.allclose(y, yt.detach().numpy(), rtol=0, atol=1e-12)
    assert np.allclose(dx, xt.grad.numpy(), rtol=0, atol=1e-12)


def test_gelu_backward_before_forward_is_refused():
    with pytest.raises(RuntimeError, match=r"GELU.backward\(\) was called before forward"):
        GELU().backward(np.ones(3))


def test_gelu_refuses_integer_input_and_a_gradient_of_another_shape():
    with pytest.raises((TypeError, ValueError), match="x"):
        GELU().forward(np.arange(3))
    gelu = GELU()
    gelu.forward(np.ones((2, 3)))
    with pytest.raises(ValueError, match="grad must have the shape"):
        gelu.backward(np.ones((3, 2)))
