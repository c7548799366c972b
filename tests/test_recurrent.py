"""Tests for attention_lib.nn.recurrent (the GRU) and attention_lib.nn.utils (clip_grad_norm)."""

import numpy as np
import pytest

from attention_lib.gradcheck import TOLERANCE as FD_TOLERANCE
from attention_lib.gradcheck import numerical_gradient, relative_error
from attention_lib.nn import GRU, GRUCell, Linear, clip_grad_norm

TORCH_TOLERANCE = 1e-10

MASK = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]], bool)


def make_gru(reverse=False, d_in=3, H=4, seed=0):
    return GRU(d_in, H, np.random.default_rng(seed), np.float64, reverse=reverse)


@pytest.mark.parametrize("reverse", [False, True])
def test_gru_backward_through_time_matches_finite_differences_on_a_padded_batch(reverse):
    rng = np.random.default_rng(1)
    gru = make_gru(reverse)
    x, g = rng.normal(size=(3, 5, 3)), rng.normal(size=(3, 5, 4))

    def loss():
        return np.sum(g * gru.forward(x, MASK))

    loss()
    dx = gru.backward(g)
    grads = {k: v.copy() for k, v in gru.grads.items()}
    assert relative_error(dx, numerical_gradient(loss, x)) < FD_TOLERANCE
    for name, param in gru.params.items():
        assert relative_error(grads[name], numerical_gradient(loss, param)) < FD_TOLERANCE, name


@pytest.mark.parametrize("reverse", [False, True])
def test_a_padded_sentence_ends_in_the_same_states_as_the_unpadded_one(reverse):
    rng = np.random.default_rng(2)
    gru = make_gru(reverse)
    x = rng.normal(size=(3, 5, 3))
    padded = gru.forward(x, MASK)
    for b, n in enumerate(MASK.sum(axis=1)):
        alone = gru.forward(x[b : b + 1, :n])
        np.testing.assert_allclose(padded[b, :n], alone[0], rtol=1e-12, atol=1e-14)


def test_cell_step_backward_matches_finite_differences():
    rng = np.random.default_rng(3)
    cell = GRUCell(3, 4, rng, np.float64)
    x, h, g = rng.normal(size=(2, 3)), rng.normal(size=(2, 4)), rng.normal(size=(2, 4))

    def loss():
        return np.sum(g * cell.step(x, h)[0])

    cell.zero_grad()
    dx, dh = cell.step_backward(g, cell.step(x, h)[1])
    assert relative_error(dx, numerical_gradient(loss, x)) < FD_TOLERANCE
    assert relative_error(dh, numerical_gradient(loss, h)) < FD_TOLERANCE
    grads = {k: v.copy() for k, v in cell.grads.items()}
    for name, param in cell.params.items():
        assert relative_error(grads[name], numerical_gradient(loss, param)) < FD_TOLERANCE, name


@pytest.mark.parametrize("reverse", [False, True])
def test_gru_matches_pytorch_nn_gru_forward_and_backward(reverse):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    gru = make_gru(reverse, d_in=5, H=6)
    x, g = rng.normal(size=(2, 7, 5)), rng.normal(size=(2, 7, 6))
    ref = torch.nn.GRU(5, 6, batch_first=True).double()
    p = gru.params
    with torch.no_grad():
        ref.weight_ih_l0.copy_(torch.tensor(p["W_ih"].T))
        ref.weight_hh_l0.copy_(torch.tensor(p["W_hh"].T))
        ref.bias_ih_l0.copy_(torch.tensor(p["b_ih"]))
        ref.bias_hh_l0.copy_(torch.tensor(p["b_hh"]))
    xt = torch.tensor(x[:, ::-1].copy() if reverse else x, requires_grad=True)
    out, _ = ref(xt)
    out = out.flip(1) if reverse else out  # back to the original word order
    (out * torch.tensor(g)).sum().backward()
    ours = gru.forward(x)
    dx = gru.backward(g)
    assert np.abs(ours - out.detach().numpy()).max() < TORCH_TOLERANCE
    dx_ref = xt.grad.numpy()[:, ::-1] if reverse else xt.grad.numpy()
    assert np.abs(dx - dx_ref).max() < TORCH_TOLERANCE
    for name, theirs in (
        ("W_ih", ref.weight_ih_l0.grad.T),
        ("W_hh", ref.weight_hh_l0.grad.T),
        ("b_ih", ref.bias_ih_l0.grad),
        ("b_hh", ref.bias_hh_l0.grad),
    ):
        assert np.abs(gru.grads[name] - theirs.numpy()).max() < TORCH_TOLERANCE, name


def test_gru_stays_float32():
    gru = GRU(3, 4, np.random.default_rng(0))
    hs = gru.forward(np.ones((2, 3, 3), np.float32))
    assert hs.dtype == np.float32
    assert gru.backward(np.ones_like(hs)).dtype == np.float32


def test_clip_grad_norm_matches_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    layers = [Linear(3, 2, rng), Linear(2, 4, rng)]
    for layer in layers:
        layer.grads = {k: 10 * rng.normal(size=v.shape) for k, v in layer.params.items()}
    tensors = [
        torch.zeros(g.shape, dtype=torch.float64, requires_grad=True)
        for layer in layers
        for g in layer.grads.values()
    ]
    for t, g in zip(tensors, [g for layer in layers for g in layer.grads.values()]):
        t.grad = torch.tensor(g)
    norm_ref = float(torch.nn.utils.clip_grad_norm_(tensors, 2.0))
    norm = clip_grad_norm(layers, 2.0)
    assert abs(norm - norm_ref) < 1e-10
    ours = [g for layer in layers for g in layer.grads.values()]
    for g, t in zip(ours, tensors):
        np.testing.assert_allclose(g, t.grad.numpy(), rtol=1e-12)


def test_clip_grad_norm_leaves_small_gradients_alone_and_rejects_bad_norms():
    layer = Linear(2, 2, np.random.default_rng(0))
    layer.grads = {"W": np.full((2, 2), 0.1), "b": np.zeros(2)}
    assert clip_grad_norm([layer], 1.0) == pytest.approx(0.2)
    assert (layer.grads["W"] == 0.1).all()
    with pytest.raises(ValueError, match="max_norm"):
        clip_grad_norm([layer], 0.0)
