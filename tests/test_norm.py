"""Tests for attention_lib.nn.LayerNorm: forward, backward, torch agreement."""

import numpy as np
import pytest

from attention_lib.gradcheck import check_gradients
from attention_lib.nn import LayerNorm


def _layer(rng, d=6):
    ln = LayerNorm(d)
    ln.params["gamma"] = rng.normal(size=d)
    ln.params["beta"] = rng.normal(size=d)
    return ln


def test_layer_norm_rows_have_mean_zero_and_variance_one_before_the_affine_part():
    rng = np.random.default_rng(0)
    x = rng.normal(3.0, 5.0, size=(4, 7, 10))
    y = LayerNorm(10).forward(x)
    assert np.allclose(y.mean(axis=-1), 0, atol=1e-12)
    assert np.allclose(y.var(axis=-1), 1, atol=1e-4)     # eps shrinks it a little


def test_layer_norm_ignores_a_shift_and_a_scale_of_each_row():
    rng = np.random.default_rng(1)
    ln, x = _layer(rng), rng.normal(size=(3, 6))
    assert np.allclose(ln.forward(5 * x + 2), ln.forward(x), atol=1e-4)


def test_layer_norm_gradients_match_finite_differences():
    rng = np.random.default_rng(2)
    ln, x, g = _layer(rng), rng.normal(size=(2, 3, 6)), rng.normal(size=(2, 3, 6))
    check_gradients([ln], lambda: np.sum(g * ln.forward(x)),
                    lambda: (ln.forward(x), ln.backward(g))[1:], inputs=[x])


def test_layer_norm_refuses_rows_of_the_wrong_size_and_a_bad_eps():
    with pytest.raises(ValueError, match="x has 5 features but LayerNorm was built for d = 4"):
        LayerNorm(4).forward(np.ones((2, 5)))
    with pytest.raises(ValueError, match="eps must be positive"):
        LayerNorm(4, eps=0)


def test_layer_norm_matches_torch_forward_and_backward():
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F
    rng = np.random.default_rng(3)
    ln, x, g = _layer(rng), rng.normal(size=(2, 4, 6)), rng.normal(size=(2, 4, 6))
    y = ln.forward(x)
    dx = ln.backward(g)
    xt = torch.tensor(x, requires_grad=True)
    gamma = torch.tensor(ln.params["gamma"], requires_grad=True)
    beta = torch.tensor(ln.params["beta"], requires_grad=True)
    yt = F.layer_norm(xt, (6,), weight=gamma, bias=beta, eps=1e-5)
    (yt * torch.tensor(g)).sum().backward()
    assert np.allclose(y, yt.detach().numpy(), rtol=0, atol=1e-10)
    for ours, theirs in ((dx, xt), (ln.grads["gamma"], gamma), (ln.grads["beta"], beta)):
        assert np.allclose(ours, theirs.grad.numpy(), rtol=0, atol=1e-10)
