"""Tests for attention_lib.nn: every layer's backward, Adam, and a short training run."""

import numpy as np
import pytest

from attention_lib.gradcheck import TOLERANCE as FD_TOLERANCE
from attention_lib.gradcheck import check_gradients, numerical_gradient, relative_error
from attention_lib.nn import Adam, Attention, Embedding, Linear, softmax_cross_entropy


def test_linear_backward_matches_finite_differences():
    rng = np.random.default_rng(0)
    layer = Linear(4, 3, rng)
    layer.params["b"] = rng.normal(size=3)
    x, g = rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 3))

    def loss():
        return np.sum(g * layer.forward(x))

    layer.forward(x)
    dx = layer.backward(g)
    assert relative_error(dx, numerical_gradient(loss, x)) < FD_TOLERANCE
    check_gradients([layer], loss, lambda: (layer.forward(x), layer.backward(g)))


def test_linear_without_bias_has_only_a_weight():
    layer = Linear(2, 2, np.random.default_rng(0), bias=False)
    layer.forward(np.ones((1, 2)))
    layer.backward(np.ones((1, 2)))
    assert sorted(layer.params) == sorted(layer.grads) == ["W"]


def test_embedding_backward_adds_rows_of_repeated_tokens():
    rng = np.random.default_rng(1)
    emb = Embedding(6, 3, rng)
    tokens = np.array([[0, 2, 2], [5, 2, 0]])
    g = rng.normal(size=(2, 3, 3))

    def loss():
        return np.sum(g * emb.forward(tokens))

    check_gradients([emb], loss, lambda: (emb.forward(tokens), emb.backward(g)))
    np.testing.assert_allclose(emb.grads["E"][2], g[0, 1] + g[0, 2] + g[1, 1])
    np.testing.assert_array_equal(emb.grads["E"][[1, 3, 4]], 0.0)


def test_embedding_refuses_tokens_outside_the_table():
    emb = Embedding(4, 2, np.random.default_rng(0))
    for bad in ([0, 4], [-1], [0.5]):
        with pytest.raises(ValueError, match=r"tokens must be integers in \[0, 4\)"):
            emb.forward(np.array(bad))


def test_softmax_cross_entropy_gradient_matches_finite_differences():
    rng = np.random.default_rng(2)
    logits, targets = rng.normal(size=(3, 4, 5)), rng.integers(0, 5, size=(3, 4))
    loss, grad = softmax_cross_entropy(logits, targets)
    numeric = numerical_gradient(lambda: softmax_cross_entropy(logits, targets)[0], logits)
    assert relative_error(grad, numeric) < FD_TOLERANCE
    # The definition, written out: mean of -log p[target].
    p = np.exp(logits) / np.exp(logits).sum(axis=-1, keepdims=True)
    expected = -np.mean(np.log(np.take_along_axis(p, targets[..., None], -1)))
    assert loss == pytest.approx(expected, rel=1e-13)


def test_softmax_cross_entropy_does_not_overflow_and_checks_targets():
    loss, grad = softmax_cross_entropy(np.array([[1000.0, 0.0]]), np.array([1]))
    assert loss == pytest.approx(1000.0) and np.isfinite(grad).all()
    with pytest.raises(ValueError, match="targets must be integers of shape"):
        softmax_cross_entropy(np.zeros((2, 3)), np.array([0, 1, 2]))
    with pytest.raises(ValueError, match=r"targets must lie in \[0, 3\)"):
        softmax_cross_entropy(np.zeros((2, 3)), np.array([0, 3]))


@pytest.mark.parametrize("masked", [False, True])
def test_attention_layer_backward_matches_finite_differences(masked):
    rng = np.random.default_rng(3)
    att = Attention(4, 3, 2, rng)
    x_q, x_kv = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 5, 4))
    mask = np.array([True, True, False, True, False]) if masked else None
    g = rng.normal(size=(2, 3, 4))

    def loss():
        return np.sum(g * att.forward(x_q, x_kv, attn_mask=mask))

    def run_backward():
        att.forward(x_q, x_kv, attn_mask=mask)
        return att.backward(g)

    dx_q, dx_kv = run_backward()
    assert relative_error(dx_q, numerical_gradient(loss, x_q)) < FD_TOLERANCE
    assert relative_error(dx_kv, numerical_gradient(loss, x_kv)) < FD_TOLERANCE
    check_gradients([att], loss, run_backward)
    if masked:  # padding keys contribute nothing, so get no gradient
        np.testing.assert_array_equal(dx_kv[:, [2, 4]], 0.0)


def test_self_attention_input_gradient_adds_both_paths():
    rng = np.random.default_rng(4)
    att = Attention(3, 2, 2, rng)
    x, g = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))

    def loss():
        return np.sum(g * att.forward(x, x, is_causal=True))

    att.forward(x, x, is_causal=True)
    dx_q, dx_kv = att.backward(g)
    assert relative_error(dx_q + dx_kv, numerical_gradient(loss, x)) < FD_TOLERANCE


def test_adam_first_steps_follow_the_papers_update_rule():
    # Kingma and Ba (2015), Algorithm 1, written out for three steps.
    rng = np.random.default_rng(5)
    layer = Linear(3, 2, rng)
    lr, b1, b2, eps = 0.01, 0.9, 0.999, 1e-8
    opt = Adam([layer], lr=lr, betas=(b1, b2), eps=eps)
    theta = layer.params["W"].copy()
    m, v = np.zeros_like(theta), np.zeros_like(theta)
    for t in (1, 2, 3):
        g = rng.normal(size=theta.shape)
        layer.grads = {"W": g, "b": np.zeros(2)}
        opt.step()
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        m_hat, v_hat = m / (1 - b1**t), v / (1 - b2**t)
        theta = theta - lr * m_hat / (np.sqrt(v_hat) + eps)
        np.testing.assert_allclose(layer.params["W"], theta, rtol=1e-14)
    np.testing.assert_array_equal(layer.params["b"], 0.0)  # zero gradient: no move


def test_adam_first_step_moves_each_parameter_by_the_learning_rate():
    layer = Linear(2, 2, np.random.default_rng(6), bias=False)
    before = layer.params["W"].copy()
    layer.grads = {"W": np.array([[1e-4, -3.0], [250.0, -1e-2]])}
    Adam([layer], lr=0.5).step()
    np.testing.assert_allclose(layer.params["W"] - before, [[-0.5, 0.5], [-0.5, 0.5]], rtol=1e-3)


def test_a_short_training_run_learns_to_pick_the_matching_key():
    """Attention over (key, value) pairs learns to return the value of a key.

    Loss starts at log(8) = 2.08 (8 values, nothing learned) and must fall
    below 0.05 in 300 steps of Adam (about 0.3 s).
    """
    n_keys, n_values, n_pairs, d = 8, 8, 4, 16
    rng = np.random.default_rng(7)
    emb, att = Embedding(n_keys + n_values, d, rng), Attention(d, d, d, rng)
    out = Linear(d, n_values, rng)
    opt = Adam([emb, att, out], lr=3e-3)
    losses = []
    for _ in range(300):
        keys = np.argsort(rng.random((32, n_keys)), axis=1)[:, :n_pairs]
        values = rng.integers(0, n_values, size=(32, n_pairs))
        x = emb.forward(np.concatenate([keys, values + n_keys], axis=1))
        asked = x[:, :n_pairs]  # query i: the key of pair i
        pairs = x[:, :n_pairs] + x[:, n_pairs:]  # one vector per (key, value)
        logits = out.forward(att.forward(asked, pairs))
        loss, grad = softmax_cross_entropy(logits, values)
        d_asked, d_pairs = att.backward(out.backward(grad))
        emb.backward(np.concatenate([d_asked + d_pairs, d_pairs], axis=1))
        opt.step()
        losses.append(loss)
    assert losses[0] > 1.5
    assert np.mean(losses[-10:]) < 0.05


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(lr=-1e-3), r"lr must satisfy lr >= 0 and finite, got -0.001"),
        (dict(lr=float("nan")), r"lr must satisfy"),
        (dict(lr=float("inf")), r"lr must satisfy"),
        (dict(eps=-1.0), r"eps must satisfy eps >= 0"),
        (dict(betas=(1.0, 0.999)), r"betas\[0\] must satisfy 0 <= betas\[0\] < 1, got 1.0"),
        (dict(betas=(0.9, -0.1)), r"betas\[1\] must satisfy 0 <= betas\[1\] < 1"),
        (dict(betas=(0.9, float("nan"))), r"betas\[1\]"),
    ],
)
def test_adam_refuses_hyper_parameters_that_destroy_the_model(kwargs, message):
    # Each of these used to turn every parameter into NaN or -inf at the first step.
    with pytest.raises(ValueError, match=message):
        Adam([Linear(2, 1, np.random.default_rng(0))], **kwargs)


@pytest.mark.parametrize("kwargs", [dict(lr="0.1"), dict(betas=0.9), dict(eps=True)])
def test_adam_hyper_parameters_must_be_numbers(kwargs):
    with pytest.raises(TypeError, match="lr|betas|eps"):
        Adam([Linear(2, 1, np.random.default_rng(0))], **kwargs)


def test_adam_step_before_backward_names_the_missing_gradient():
    layer = Linear(2, 1, np.random.default_rng(0))
    before = layer.params["W"].copy()
    opt = Adam([layer])
    with pytest.raises(ValueError, match=r"no gradient for parameter 'W'.*backward\(\)"):
        opt.step()
    layer.grads = {"W": np.ones((2, 1))}  # b still missing: nothing may move
    with pytest.raises(ValueError, match=r"'b'"):
        opt.step()
    np.testing.assert_array_equal(layer.params["W"], before)
    assert opt.t == 0
    layer.grads = {"W": np.ones((1, 2)), "b": np.ones(1)}
    with pytest.raises(ValueError, match=r"gradient of 'W' has shape \(1, 2\)"):
        opt.step()


@pytest.mark.parametrize(
    "lr, betas, eps",
    [
        (0.0, (0.0, 0.0), 0.0),
        (1e-3, (0.9, 0.999), 1e-8),
        (-1e-3, (0.9, 0.999), 1e-8),
        (1e-3, (1.0, 0.999), 1e-8),
        (1e-3, (0.9, 1.0), 1e-8),
        (1e-3, (-0.1, 0.999), 1e-8),
        (1e-3, (0.9, 0.999), -1.0),
        (float("nan"), (0.9, 0.999), 1e-8),
    ],
)
def test_adam_accepts_exactly_what_torch_adam_accepts(lr, betas, eps):
    torch = pytest.importorskip("torch")
    try:
        torch.optim.Adam([torch.zeros(1, requires_grad=True)], lr=lr, betas=betas, eps=eps)
        torch_accepts = True
    except ValueError:
        torch_accepts = False
    try:
        Adam([Linear(2, 1, np.random.default_rng(0))], lr=lr, betas=betas, eps=eps)
        we_accept = True
    except ValueError:
        we_accept = False
    assert we_accept == torch_accepts
