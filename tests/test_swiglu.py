"""Tests for attention_lib.nn.SwiGLU, Llama's gated feed-forward layer."""

import numpy as np
import pytest

from attention_lib.gradcheck import check_gradients
from attention_lib.nn import SwiGLU


def test_swiglu_is_the_gate_times_the_linear_unit_projected_down():
    rng = np.random.default_rng(0)
    ffn, x = SwiGLU(4, 10, rng), rng.normal(size=(3, 4))
    p = ffn.params
    a, u = x @ p["W1"], x @ p["W3"]
    expected = (a / (1 + np.exp(-a)) * u) @ p["W2"]  # naive, written out
    assert np.allclose(ffn.forward(x), expected, rtol=0, atol=1e-12)
    assert {k: v.shape for k, v in p.items()} == {"W1": (4, 10), "W3": (4, 10), "W2": (10, 4)}


def test_swiglu_gradients_match_finite_differences():
    rng = np.random.default_rng(1)
    ffn = SwiGLU(5, 7, rng)
    x, g = rng.normal(size=(2, 3, 5)), rng.normal(size=(2, 3, 5))
    check_gradients(
        [ffn],
        lambda: np.sum(g * ffn.forward(x)),
        lambda: (ffn.forward(x), ffn.backward(g))[1:],
        inputs=[x],
    )


def test_swiglu_refuses_rows_of_the_wrong_size():
    with pytest.raises(ValueError, match="x has 3 features but SwiGLU was built for d_model = 4"):
        SwiGLU(4, 8, np.random.default_rng(0)).forward(np.ones((2, 3)))
    with pytest.raises(ValueError, match="d_ff"):
        SwiGLU(4, 0, np.random.default_rng(0))


def test_swiglu_matches_torch_forward_and_backward():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(2)
    ffn = SwiGLU(6, 16, rng)
    x, g = rng.normal(size=(2, 4, 6)), rng.normal(size=(2, 4, 6))
    y = ffn.forward(x)
    dx = ffn.backward(g)
    # as llama2.c's model.py writes it: w2(silu(w1(x)) * w3(x)), weights (out, in)
    w = {k: torch.tensor(v.T.copy(), requires_grad=True) for k, v in ffn.params.items()}
    xt = torch.tensor(x, requires_grad=True)
    yt = F.linear(F.silu(F.linear(xt, w["W1"])) * F.linear(xt, w["W3"]), w["W2"])
    (yt * torch.tensor(g)).sum().backward()
    assert np.allclose(y, yt.detach().numpy(), rtol=0, atol=1e-10)
    assert np.allclose(dx, xt.grad.numpy(), rtol=0, atol=1e-10)
    for k in ("W1", "W2", "W3"):
        assert np.allclose(ffn.grads[k], w[k].grad.numpy().T, rtol=0, atol=1e-10)


def test_swiglu_and_silu_refuse_integers_backward_first_and_a_wrong_grad():
    from attention_lib.nn import SiLU

    for layer, x in (
        (SwiGLU(3, 5, np.random.default_rng(0)), np.ones((2, 3))),
        (SiLU(), np.ones((2, 3))),
    ):
        name = type(layer).__name__
        with pytest.raises(RuntimeError, match=rf"{name}.backward\(\) was called before"):
            layer.backward(np.ones((2, 3)))
        with pytest.raises(TypeError, match="x must be a floating array"):
            layer.forward(x.astype(int))
        layer.forward(x)
        with pytest.raises(ValueError, match="grad must have the shape"):
            layer.backward(np.ones((4, 3)))
