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
