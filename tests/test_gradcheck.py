"""Tests for attention_lib.gradcheck: the finite-difference check every layer is tested with."""

import numpy as np
import pytest

from attention_lib.gradcheck import check_gradients, numerical_gradient, relative_error
from attention_lib.nn import Linear


def test_numerical_gradient_restores_the_array_it_perturbs():
    x = np.array([[1.0, -2.0], [0.5, 3.0]])
    before = x.copy()
    grad = numerical_gradient(lambda: float(np.sum(np.sin(x))), x)
    assert np.array_equal(x, before)
    assert relative_error(grad, np.cos(x)) < 1e-9


def test_a_correct_backward_passes_and_the_largest_error_is_returned():
    rng = np.random.default_rng(0)
    layer, x = Linear(3, 2, rng), rng.normal(size=(4, 3))
    err = check_gradients(
        [layer],
        lambda: np.sum(layer.forward(x) ** 2),
        lambda: [layer.backward(2 * layer.forward(x))],
        [x],
    )
    assert 0 < err < 1e-6


@pytest.mark.parametrize(
    "wrong, message",
    [
        ("W", r"layer 0 \(Linear\), parameter W: relative error"),
        ("b", r"layer 0 \(Linear\), parameter b: relative error"),
        ("x", r"input 0: relative error"),
    ],
)
def test_a_wrong_gradient_fails_naming_the_layer_and_parameter(wrong, message):
    rng = np.random.default_rng(1)
    layer, x = Linear(3, 2, rng), rng.normal(size=(4, 3))

    def run_backward():
        dx = layer.backward(2 * layer.forward(x))
        if wrong == "x":
            return [dx * 1.001]
        layer.grads[wrong] = layer.grads[wrong] * 1.001
        return [dx]

    with pytest.raises(AssertionError, match=message):
        check_gradients([layer], lambda: np.sum(layer.forward(x) ** 2), run_backward, [x])


def test_missing_gradients_are_reported():
    rng = np.random.default_rng(2)
    layer, x = Linear(3, 2, rng), rng.normal(size=(4, 3))

    def run_backward():
        layer.backward(layer.forward(x))
        del layer.grads["b"]
        return []

    with pytest.raises(AssertionError, match="grads has"):
        check_gradients([layer], lambda: np.sum(layer.forward(x)), run_backward)
