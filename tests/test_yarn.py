"""YaRN's rotary scaling: the speeds against transformers', and the layer that uses them."""

import numpy as np
import pytest

from attention_lib import scaled_dot_product_attention
from attention_lib.nn import MultiHeadAttention
from attention_lib.positions import rotate_pairs, yarn_frequencies

CASES = [  # head size, base, factor, trained length
    (64, 100000.0, 2.0, 8192),  # SmolLM2 at 16,384
    (16, 10000.0, 8.0, 128),
    (128, 500000.0, 4.0, 4096),
    (32, 10000.0, 1.5, 2048),
]


@pytest.mark.parametrize("d, base, factor, length", CASES)
def test_yarn_frequencies_are_transformers_yarn(d, base, factor, length):
    pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    config = transformers.LlamaConfig(
        hidden_size=4 * d,
        num_attention_heads=4,
        max_position_embeddings=int(factor * length),
        rope_parameters={
            "rope_type": "yarn",
            "rope_theta": base,
            "factor": factor,
            "original_max_position_embeddings": length,
        },
    )
    inv_freq, attention_factor = ROPE_INIT_FUNCTIONS["yarn"](config, "cpu")
    theta, factor_ours = yarn_frequencies(d, factor, length, base)
    # transformers computes in float32
    assert np.allclose(theta, inv_freq.numpy(), rtol=1e-6, atol=0)
    assert factor_ours == pytest.approx(attention_factor, rel=1e-12)


def test_yarn_keeps_fast_pairs_and_interpolates_slow_ones():
    d, base, factor, length = 64, 100000.0, 2.0, 8192
    theta, attention_factor = yarn_frequencies(d, factor, length, base)
    plain = base ** (-np.arange(0, d, 2) / d)
    turns = length * plain / (2 * np.pi)  # how often each pair turns in training
    assert np.array_equal(theta[turns > 32 * 1.5], plain[turns > 32 * 1.5])
    assert np.allclose(theta[turns < 1 / 1.5], plain[turns < 1 / 1.5] / factor, rtol=1e-12)
    assert np.all(np.diff(theta / plain) <= 0)  # the ramp only scales more for slower pairs
    assert attention_factor == pytest.approx(0.1 * np.log(2) + 1)
    same, one = yarn_frequencies(d, 1.0, length, base)
    assert np.array_equal(same, plain) and one == 1.0


def test_a_yarn_layer_rotates_by_yarn_angles_and_sharpens_scores():
    rng = np.random.default_rng(0)
    scaling = {"type": "yarn", "factor": 4.0, "original_length": 16}
    att = MultiHeadAttention(
        8, 2, rng, bias=False, rotary="interleaved", rotary_base=100.0, rope_scaling=scaling
    )
    x = rng.normal(size=(1, 11, 8))
    theta, factor = yarn_frequencies(4, 4.0, 16, 100.0)
    angles = np.arange(11)[:, None] * theta
    cos, sin = factor * np.cos(angles), factor * np.sin(angles)
    p, heads = att.params, []
    for r in range(2):
        cols = slice(4 * r, 4 * r + 4)
        q, k = (rotate_pairs(x[0] @ p[n][:, cols], cos, sin) for n in ("W_Q", "W_K"))
        heads.append(scaled_dot_product_attention(q, k, x[0] @ p["W_V"][:, cols], is_causal=True))
    expected = np.concatenate(heads, -1) @ p["W_O"]
    assert np.allclose(att.forward(x, is_causal=True)[0], expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    "scaling, match",
    [
        ({"type": "yarn", "factor": 2.0}, "original_length"),
        ({"type": "yarn", "factor": 0.0, "original_length": 16}, "factor must be positive"),
        ({"type": "yarn", "factor": 2.0, "original_length": 0}, "original_length"),
    ],
)
def test_a_bad_yarn_scaling_is_refused_by_the_layer(scaling, match):
    with pytest.raises(ValueError, match=match):
        MultiHeadAttention(
            8, 2, np.random.default_rng(0), rotary="interleaved", rope_scaling=scaling
        )


def test_yarn_refuses_a_ramp_that_is_upside_down():
    with pytest.raises(ValueError, match="beta_slow .* must be below beta_fast"):
        yarn_frequencies(16, 2.0, 128, beta_fast=1.0, beta_slow=32.0)
