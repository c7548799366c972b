"""Reliability of the layers in attention_lib.nn under bad input and misuse (issue 26).

Each test pins one fault found on an earlier main: a wrong result computed
in silence, state left wrong, or an error from deep inside NumPy instead of
one that names the argument. The numbers in the test names are the issue's.
"""

import numpy as np
import pytest

from attention_lib.nn import (
    GRU,
    Adam,
    AdditiveAttention,
    Dropout,
    Embedding,
    GRUCell,
    LayerNorm,
    Linear,
    TransformerBlock,
    clip_grad_norm,
    softmax_cross_entropy,
)


def rng(seed=0):
    return np.random.default_rng(seed)


# -- 1. integer inputs and dtypes are refused, not computed in integers ----------


def test_1_gru_refuses_an_integer_input_instead_of_returning_zero_states():
    gru = GRU(3, 4, rng())
    with pytest.raises(TypeError, match="x must be a floating array"):
        gru.forward(np.ones((2, 5, 3), dtype=np.int64))
    with pytest.raises(TypeError, match="x must be a floating array"):
        gru.step(np.ones((2, 3), dtype=np.int64), np.zeros((2, 4)))


def test_1_dropout_refuses_an_integer_input_instead_of_not_rescaling():
    drop = Dropout(0.5, rng())
    with pytest.raises(TypeError, match="x must be a floating array"):
        drop.forward(np.ones(8, dtype=np.int64))
    y = drop.forward(np.ones(1000))  # floats: kept values are scaled by 2
    assert set(np.unique(y).tolist()) == {0.0, 2.0}


@pytest.mark.parametrize("dtype", [np.int64, np.int32, bool, "U3"])
def test_1_layers_refuse_a_non_floating_dtype(dtype):
    for build in (
        lambda: GRU(3, 4, rng(), dtype=dtype),
        lambda: GRUCell(3, 4, rng(), dtype),
        lambda: AdditiveAttention(4, 3, 5, rng(), dtype),
    ):
        with pytest.raises(TypeError, match="dtype must be a floating dtype"):
            build()


def test_1_the_other_layers_refuse_integer_inputs_too():
    x = np.ones((2, 3), dtype=np.int64)
    for layer in (Linear(3, 2, rng()), LayerNorm(3)):
        with pytest.raises(TypeError, match="x must be a floating array"):
            layer.forward(x)


def test_1_float32_inputs_still_give_float32_states():
    gru = GRU(3, 4, rng())
    assert gru.forward(np.ones((2, 5, 3), np.float32)).dtype == np.float32


# -- 2. LayerNorm where the squares overflow --------------------------------------


@pytest.mark.parametrize(
    "dtype, scale",
    [(np.float32, 2e19), (np.float32, 1e38), (np.float64, 1e154), (np.float64, 1e307)],
)
def test_2_layer_norm_of_a_row_whose_squares_overflow_is_the_normalised_row(dtype, scale):
    base = rng(1).normal(size=(3, 6))
    ln = LayerNorm(6)
    ln.params["gamma"] = rng(2).normal(size=6)
    ln.params["beta"] = rng(3).normal(size=6)
    with np.errstate(over="raise", invalid="raise", divide="raise"):  # no warning escapes
        y = ln.forward((base * scale).astype(dtype))
    centred = base - base.mean(axis=-1, keepdims=True)
    x_hat = centred / np.sqrt((centred**2).mean(axis=-1, keepdims=True))  # eps negligible
    expected = x_hat * ln.params["gamma"] + ln.params["beta"]
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)
    # the gradient is that of the unscaled row, divided by the scale, not zero
    g = rng(4).normal(size=(3, 6))
    dx = ln.backward(g.astype(dtype))
    ref = LayerNorm(6, eps=1e-300)
    ref.params = {k: v.copy() for k, v in ln.params.items()}
    ref.forward(base)
    np.testing.assert_allclose(dx * scale, ref.backward(g), rtol=1e-4, atol=1e-4)
    assert np.allclose(ln.grads["gamma"], (g * x_hat).sum(axis=0), rtol=1e-4, atol=1e-4)


def test_2_layer_norm_of_ordinary_rows_is_bit_for_bit_the_textbook_formula():
    x = rng(5).normal(size=(4, 7, 8)).astype(np.float32)
    ln = LayerNorm(8)
    centred = x - x.mean(axis=-1, keepdims=True)
    inv_sigma = 1.0 / np.sqrt((centred**2).mean(axis=-1, keepdims=True) + 1e-5)
    assert np.array_equal(
        ln.forward(x), centred * inv_sigma * ln.params["gamma"] + ln.params["beta"]
    )


def test_2_a_non_finite_row_gives_nan_not_beta():
    ln = LayerNorm(3)
    ln.params["beta"] = np.array([1.0, 2.0, 3.0])
    y = ln.forward(np.array([[1.0, np.inf, 2.0], [1.0, 2.0, 4.0]]))
    assert np.isnan(y[0]).all() and np.isfinite(y[1]).all()


# -- 3. clip_grad_norm with a NaN gradient ---------------------------------------


def _two_layers_with_a_nan():
    a, b = Linear(2, 2, rng()), Linear(2, 1, rng())
    a.grads = {"W": np.full((2, 2), 3.0), "b": np.array([np.nan, 4.0])}
    b.grads = {"W": np.full((2, 1), 100.0), "b": np.array([5.0])}
    return [a, b]


def test_3_clip_grad_norm_with_a_nan_does_what_torch_does():
    layers = _two_layers_with_a_nan()
    total = clip_grad_norm(layers, 1.0)
    assert np.isnan(total)
    # torch multiplies every gradient by max_norm / (nan + 1e-6) = nan: nothing
    # finite reaches the optimiser unclipped
    for layer in layers:
        for g in layer.grads.values():
            assert np.isnan(g).all()


def test_3_clip_grad_norm_matches_torch_on_a_nan():
    torch = pytest.importorskip("torch")
    layers = _two_layers_with_a_nan()
    ts = [
        torch.nn.Parameter(torch.zeros(g.shape, dtype=torch.float64))
        for layer in layers
        for g in layer.grads.values()
    ]
    for t, g in zip(ts, [g for layer in layers for g in layer.grads.values()]):
        t.grad = torch.tensor(g)
    t_total = torch.nn.utils.clip_grad_norm_(ts, 1.0)
    total = clip_grad_norm(layers, 1.0)
    assert np.isnan(total) and torch.isnan(t_total)
    for t, g in zip(ts, [g for layer in layers for g in layer.grads.values()]):
        np.testing.assert_array_equal(g, t.grad.numpy())


def test_3_clip_grad_norm_can_raise_on_a_nan_before_changing_anything():
    layers = _two_layers_with_a_nan()
    before = [g.copy() for layer in layers for g in layer.grads.values()]
    with pytest.raises(FloatingPointError, match="NaN or infinity"):
        clip_grad_norm(layers, 1.0, error_if_nonfinite=True)
    after = [g for layer in layers for g in layer.grads.values()]
    for x, y in zip(before, after):
        np.testing.assert_array_equal(x, y)


def test_3_clip_grad_norm_refuses_a_layer_listed_twice():
    layer = Linear(2, 2, rng())
    layer.grads = {"W": np.ones((2, 2)), "b": np.ones(2)}
    with pytest.raises(ValueError, match="list each layer once"):
        clip_grad_norm([layer, layer], 1.0)


# -- 8. Adam refuses the same parameter twice -------------------------------------


def test_8_adam_refuses_a_layer_listed_twice():
    layer = Linear(2, 2, rng())
    with pytest.raises(ValueError, match="each step would move it twice"):
        Adam([layer, layer])


def test_8_adam_refuses_a_composite_together_with_its_own_layers():
    block = TransformerBlock(8, 2, 16, rng())
    with pytest.raises(ValueError, match="already holds its sub-layers"):
        Adam([block] + block.layers())
    Adam(block.layers())  # each once: fine
    Adam([block])


# -- 10. GRU masks and states are checked -----------------------------------------


@pytest.mark.parametrize(
    "mask, match",
    [
        (np.ones((2, 6), bool), r"mask must have shape \(B, T\) = \(2, 5\)"),  # one step too long
        (np.ones((2, 4), bool), r"mask must have shape \(B, T\) = \(2, 5\)"),  # one step too short
        (np.full((2, 5), 0.5), "only True/False"),  # would blend states
        (np.ones(5, bool), r"mask must have shape"),
    ],
)
def test_10_gru_checks_its_mask(mask, match):
    gru = GRU(3, 4, rng())
    with pytest.raises(ValueError, match=match):
        gru.forward(np.ones((2, 5, 3)), mask)


def test_10_a_zero_one_integer_mask_is_the_boolean_mask():
    gru = GRU(3, 4, rng())
    x = rng(1).normal(size=(2, 5, 3))
    m = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    np.testing.assert_array_equal(gru.forward(x, m), gru.forward(x, m.astype(bool)))


# -- 12. errors that name the argument, not NumPy internals ----------------------


@pytest.mark.parametrize(
    "make, call",
    [
        (lambda: Linear(3, 2, rng()), lambda layer: layer.backward(np.ones((1, 2)))),
        (lambda: Embedding(5, 2, rng()), lambda layer: layer.backward(np.ones((1, 2)))),
        (lambda: LayerNorm(3), lambda layer: layer.backward(np.ones((1, 3)))),
        (lambda: Dropout(0.5, rng()), lambda layer: layer.backward(np.ones(3))),
        (lambda: GRU(3, 4, rng()), lambda layer: layer.backward(np.ones((1, 2, 4)))),
        (lambda: AdditiveAttention(4, 3, 5, rng()), lambda layer: layer.step(np.ones((1, 3)))),
        (lambda: AdditiveAttention(4, 3, 5, rng()), lambda layer: layer.keys_backward()),
    ],
)
def test_12_backward_before_forward_says_so(make, call):
    with pytest.raises(RuntimeError, match=r"was called before (forward|set_keys)\(\)"):
        call(make())


def test_12_linear_checks_the_width_of_x_and_of_grad():
    layer = Linear(3, 2, rng())
    with pytest.raises(ValueError, match=r"x has 4 features but the layer expects 3"):
        layer.forward(np.ones((5, 4)))
    with pytest.raises(ValueError, match="x has no axes"):
        layer.forward(np.float64(1.0))
    layer.forward(np.ones((5, 3)))
    with pytest.raises(ValueError, match=r"grad must have the shape of forward's output \(5, 2\)"):
        layer.backward(np.ones((5, 3)))


def test_12_gru_checks_x_and_h0():
    gru = GRU(3, 4, rng())
    with pytest.raises(ValueError, match=r"x must have shape \(B, T, d_in\)"):
        gru.forward(np.ones((2, 5, 2)))
    with pytest.raises(ValueError, match=r"x must have shape \(B, T, d_in\)"):
        gru.forward(np.ones((5, 3)))
    with pytest.raises(ValueError, match=r"h0 must have shape \(B, hidden\) = \(2, 4\)"):
        gru.forward(np.ones((2, 5, 3)), h0=np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"h must have shape \(B, hidden\)"):
        gru.step(np.ones((2, 3)), np.zeros((3, 4)))
    gru.forward(np.ones((2, 5, 3)))
    with pytest.raises(ValueError, match=r"dhs must have shape \(B, T, hidden\)"):
        gru.backward(np.ones((2, 4, 4)))


def test_12_a_refused_gru_forward_leaves_the_last_one_intact():
    gru = GRU(3, 4, rng())
    gru.forward(rng(1).normal(size=(2, 5, 3)))
    dx = gru.backward(np.ones((2, 5, 4)))
    with pytest.raises(ValueError):
        gru.forward(np.ones((2, 5, 3)), np.ones((2, 6), bool))
    np.testing.assert_array_equal(gru.backward(np.ones((2, 5, 4))), dx)


def test_12_layer_norm_backward_checks_the_shape_of_grad():
    ln = LayerNorm(3)
    ln.forward(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"grad must have the shape of forward's output \(2, 3\)"):
        ln.backward(np.ones((2, 4)))


def test_12_embedding_and_dropout_check_the_shape_of_grad():
    emb = Embedding(5, 2, rng())
    emb.forward(np.array([[1, 2, 3]]))
    with pytest.raises(ValueError, match=r"grad must have the shape of forward's output"):
        emb.backward(np.ones((1, 2, 2)))
    drop = Dropout(0.5, rng())
    drop.forward(np.ones(4))
    with pytest.raises(ValueError, match=r"grad must have the shape of forward's output"):
        drop.backward(np.ones(5))


def test_12_additive_attention_checks_the_decoder_state_and_mask():
    att = AdditiveAttention(4, 3, 5, rng())
    with pytest.raises(ValueError, match=r"mask must have shape \(B, S\)"):
        att.set_keys(np.ones((2, 6, 4)), np.ones((2, 5), bool))
    att.set_keys(np.ones((2, 6, 4)))
    with pytest.raises(ValueError, match=r"s must have shape \(B, d_s\)"):
        att.step(np.ones((3, 3)))


def test_12_layers_need_a_generator_not_none():
    for build in (
        lambda: Linear(2, 2, None),
        lambda: Embedding(3, 2, None),
        lambda: GRU(2, 2, None),
        lambda: AdditiveAttention(2, 2, 2, None),
    ):
        with pytest.raises(TypeError, match="rng must be a numpy.random.Generator"):
            build()


def test_the_loss_of_no_rows_is_an_error_not_nan():
    with pytest.raises(ValueError, match="no targets"):
        softmax_cross_entropy(np.zeros((0, 4)), np.zeros(0, dtype=int))
    with pytest.raises(ValueError, match=r"logits must have shape \(\.\.\., C\)"):
        softmax_cross_entropy(np.float64(1.0), np.zeros((), dtype=int))
