"""Tests for attention_lib.nn.LayerNorm and RMSNorm: forward, backward, torch agreement."""

import numpy as np
import pytest

from attention_lib.gradcheck import check_gradients
from attention_lib.nn import LayerNorm, RMSNorm


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
    assert np.allclose(y.var(axis=-1), 1, atol=1e-4)  # eps shrinks it a little


def test_layer_norm_ignores_a_shift_and_a_scale_of_each_row():
    rng = np.random.default_rng(1)
    ln, x = _layer(rng), rng.normal(size=(3, 6))
    assert np.allclose(ln.forward(5 * x + 2), ln.forward(x), atol=1e-4)


def test_layer_norm_gradients_match_finite_differences():
    rng = np.random.default_rng(2)
    ln, x, g = _layer(rng), rng.normal(size=(2, 3, 6)), rng.normal(size=(2, 3, 6))
    check_gradients(
        [ln],
        lambda: np.sum(g * ln.forward(x)),
        lambda: (ln.forward(x), ln.backward(g))[1:],
        inputs=[x],
    )


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


# RMSNorm (Llama's normalisation)


def _rms_layer(rng, d=6):
    norm = RMSNorm(d)
    norm.params["gamma"] = rng.normal(size=d)
    return norm


def test_rms_norm_rows_have_root_mean_square_one_before_the_scale():
    rng = np.random.default_rng(10)
    x = rng.normal(3.0, 5.0, size=(4, 7, 10))
    y = RMSNorm(10).forward(x)
    assert np.allclose(np.sqrt((y**2).mean(axis=-1)), 1, atol=1e-5)
    # it does not centre the row: a shifted row is not normalised to the same thing
    assert not np.allclose(RMSNorm(10).forward(x + 1), y, atol=1e-3)


def test_rms_norm_ignores_a_positive_scale_of_each_row_and_keeps_float32():
    rng = np.random.default_rng(11)
    norm, x = _rms_layer(rng), rng.normal(size=(3, 6))
    assert np.allclose(norm.forward(7 * x), norm.forward(x), atol=1e-4)
    norm.params["gamma"] = norm.params["gamma"].astype(np.float32)
    assert norm.forward(x.astype(np.float32)).dtype == np.float32


def test_rms_norm_gradients_match_finite_differences():
    rng = np.random.default_rng(12)
    norm, x, g = _rms_layer(rng), rng.normal(size=(2, 3, 6)), rng.normal(size=(2, 3, 6))
    check_gradients(
        [norm],
        lambda: np.sum(g * norm.forward(x)),
        lambda: (norm.forward(x), norm.backward(g))[1:],
        inputs=[x],
    )


def test_rms_norm_refuses_rows_of_the_wrong_size_and_a_bad_eps():
    with pytest.raises(ValueError, match="x has 5 features but RMSNorm was built for d = 4"):
        RMSNorm(4).forward(np.ones((2, 5)))
    with pytest.raises(ValueError, match="eps must be positive"):
        RMSNorm(4, eps=-1.0)


def test_rms_norm_matches_torch_forward_and_backward():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(13)
    norm, x, g = _rms_layer(rng), rng.normal(size=(2, 4, 6)), rng.normal(size=(2, 4, 6))
    y = norm.forward(x)
    dx = norm.backward(g)
    ref = torch.nn.RMSNorm(6, eps=1e-5, dtype=torch.float64)
    with torch.no_grad():
        ref.weight.copy_(torch.tensor(norm.params["gamma"]))
    xt = torch.tensor(x, requires_grad=True)
    yt = ref(xt)
    (yt * torch.tensor(g)).sum().backward()
    assert np.allclose(y, yt.detach().numpy(), rtol=0, atol=1e-10)
    assert np.allclose(dx, xt.grad.numpy(), rtol=0, atol=1e-10)
    assert np.allclose(norm.grads["gamma"], ref.weight.grad.numpy(), rtol=0, atol=1e-10)


def test_rms_norm_survives_squares_that_overflow_float32():
    x = np.array([[3e19, -1e19, 2e19, 0.0]], dtype=np.float32)
    norm = RMSNorm(4)
    norm.params["gamma"] = norm.params["gamma"].astype(np.float32)
    y = norm.forward(x)
    expected = RMSNorm(4).forward(x.astype(np.float64))
    assert np.isfinite(y).all() and np.allclose(y, expected, rtol=1e-5)
    assert np.isnan(norm.forward(np.array([[np.inf, 1, 2, 3]], np.float32))).all()


def test_rms_norm_refuses_integers_backward_first_and_a_wrong_grad():
    with pytest.raises(TypeError, match="x must be a floating array"):
        RMSNorm(3).forward(np.ones((2, 3), dtype=int))
    with pytest.raises(RuntimeError, match=r"RMSNorm.backward\(\) was called before forward"):
        RMSNorm(3).backward(np.ones((2, 3)))
    norm = RMSNorm(3)
    norm.forward(np.ones((2, 3)))
    with pytest.raises(ValueError, match="grad must have the shape of forward's output"):
        norm.backward(np.ones((3, 3)))
