"""Tests for attention_lib.nn.Dropout."""

import numpy as np
import pytest

from attention_lib.nn import Dropout


def test_dropout_keeps_the_expected_value_and_drops_about_p():
    drop = Dropout(0.25, np.random.default_rng(0))
    y = drop.forward(np.ones(40_000))
    assert set(np.unique(y)) == {0.0, 1 / 0.75}
    assert abs((y == 0).mean() - 0.25) < 0.01
    assert abs(y.mean() - 1.0) < 0.02


def test_dropout_backward_uses_the_forward_mask():
    drop = Dropout(0.5, np.random.default_rng(1))
    x = np.arange(1.0, 11.0)
    y = drop.forward(x)
    g = drop.backward(np.ones(10))
    assert np.array_equal(g == 0, y == 0)
    assert np.allclose(g[y != 0], 2.0)


def test_dropout_is_the_identity_when_not_training_or_p_is_zero():
    x = np.random.default_rng(2).normal(size=(3, 4))
    drop = Dropout(0.5, np.random.default_rng(3))
    drop.training = False
    assert drop.forward(x) is x and drop.backward(x) is x
    assert Dropout(0.0).forward(x) is x


def test_dropout_keeps_float32():
    drop = Dropout(0.1, np.random.default_rng(4))
    assert drop.forward(np.ones(5, dtype=np.float32)).dtype == np.float32


@pytest.mark.parametrize("p", [-0.1, 1.0, 1.5, "0.5", True])
def test_dropout_refuses_p_outside_zero_to_one(p):
    with pytest.raises(ValueError, match=r"p must be a probability in \[0, 1\)"):
        Dropout(p, np.random.default_rng(0))


def test_dropout_with_p_above_zero_needs_an_rng():
    with pytest.raises(ValueError, match="needs rng"):
        Dropout(0.5)
