"""Tests for SelfAttention, FeedForward and TransformerBlock in attention_lib.nn."""

import numpy as np
import pytest

from attention_lib import scaled_dot_product_attention
from attention_lib.gradcheck import check_gradients
from attention_lib.nn import Adam, FeedForward, KVCache, SelfAttention, TransformerBlock


def _randomise(layers, rng):
    """Non-zero biases and non-trivial LayerNorm weights, so every path is checked."""
    for layer in layers:
        for a in layer.params.values():
            if a.ndim == 1:
                a[...] = rng.normal(size=a.shape)


def _check(layer, layers, x, g, reseed=None):
    def forward():
        if reseed is not None:  # the same dropout mask at every call
            reseed()
        return layer.forward(x)

    check_gradients(
        layers,
        lambda: np.sum(g * forward()),
        lambda: (forward(), layer.backward(g))[1:],
        inputs=[x],
    )


@pytest.mark.parametrize("causal, rotary", [(True, False), (False, False), (True, True)])
def test_self_attention_gradients_match_finite_differences(causal, rotary):
    rng = np.random.default_rng(0)
    att = SelfAttention(8, 2, rng, causal=causal, rotary=rotary)
    _randomise([att], rng)
    x, g = rng.normal(size=(2, 5, 8)), rng.normal(size=(2, 5, 8))
    _check(att, [att], x, g)


def test_self_attention_with_dropout_on_the_weights_matches_finite_differences():
    rng = np.random.default_rng(1)
    att = SelfAttention(8, 2, rng, dropout=0.3)
    _randomise([att], rng)
    x, g = rng.normal(size=(2, 5, 8)), rng.normal(size=(2, 5, 8))

    def reseed():
        att.dropout.rng = np.random.default_rng(7)

    _check(att, [att], x, g, reseed)
    assert (att.dropout.mask == 0).any()  # some weights were dropped


def test_self_attention_is_every_head_of_chapter_7_at_once():
    rng = np.random.default_rng(2)
    att = SelfAttention(12, 3, rng)
    x = rng.normal(size=(2, 4, 12))
    out = att.forward(x)
    p = att.params
    q, k, v = (x @ p["W_" + n] + p["b_" + n] for n in "QKV")
    heads = [
        scaled_dot_product_attention(
            q[..., h * 4 : (h + 1) * 4],
            k[..., h * 4 : (h + 1) * 4],
            v[..., h * 4 : (h + 1) * 4],
            is_causal=True,
        )
        for h in range(3)
    ]
    assert np.allclose(
        out, np.concatenate(heads, axis=-1) @ p["W_O"] + p["b_O"], rtol=0, atol=1e-12
    )


def test_self_attention_with_a_cache_continues_the_sequence():
    rng = np.random.default_rng(3)
    att = SelfAttention(8, 2, rng, rotary=True)
    x = rng.normal(size=(2, 6, 8))
    full = att.forward(x)
    cache = KVCache()
    parts = [att.forward(x[:, :3], cache)] + [
        att.forward(x[:, t : t + 1], cache) for t in range(3, 6)
    ]
    assert np.allclose(np.concatenate(parts, axis=1), full, rtol=0, atol=1e-10)
    assert len(cache) == 6 and cache.nbytes == 2 * x.nbytes


def test_self_attention_refuses_heads_that_do_not_divide_the_width():
    with pytest.raises(ValueError, match="n_heads = 3 does not divide d_model = 8"):
        SelfAttention(8, 3, np.random.default_rng(0))
    with pytest.raises(ValueError, match="rotary needs an even head size"):
        SelfAttention(6, 2, np.random.default_rng(0), rotary=True)


def test_feed_forward_gradients_match_finite_differences():
    rng = np.random.default_rng(4)
    ffn = FeedForward(6, 10, rng)
    _randomise(ffn.layers(), rng)
    x, g = rng.normal(size=(2, 3, 6)), rng.normal(size=(2, 3, 6))
    _check(ffn, ffn.layers(), x, g)


@pytest.mark.parametrize("attention_only", [False, True])
def test_transformer_block_gradients_match_finite_differences(attention_only):
    rng = np.random.default_rng(5)
    block = TransformerBlock(8, 2, 12, rng, attention_only=attention_only)
    _randomise(block.layers(), rng)
    x, g = rng.normal(size=(2, 4, 8)), rng.normal(size=(2, 4, 8))
    _check(block, block.layers(), x, g)


def test_transformer_block_with_dropout_matches_finite_differences():
    rng = np.random.default_rng(6)
    block = TransformerBlock(8, 2, 12, rng, dropout=0.2)
    x, g = rng.normal(size=(2, 4, 8)), rng.normal(size=(2, 4, 8))

    def reseed():
        for i, drop in enumerate(block.dropouts()):
            drop.rng = np.random.default_rng(i)

    _check(block, block.layers(), x, g, reseed)


def test_a_composite_layer_hands_its_parameters_to_adam():
    rng = np.random.default_rng(7)
    block = TransformerBlock(8, 2, 12, rng)
    x = rng.normal(size=(2, 4, 8))
    before = block.ln1.params["gamma"].copy()
    block.forward(x)
    block.backward(np.ones_like(x))
    assert block.grads.keys() == block.params.keys()
    Adam([block], lr=0.1).step()
    assert not np.allclose(block.ln1.params["gamma"], before)


def test_transformer_block_matches_torch_autograd():
    torch = pytest.importorskip("torch")
    import torch_reference as ref

    rng = np.random.default_rng(8)
    block = TransformerBlock(8, 2, 12, rng, rotary=True)
    _randomise(block.layers(), rng)
    x, g = rng.normal(size=(2, 5, 8)), rng.normal(size=(2, 5, 8))
    y = block.forward(x)
    dx = block.backward(g)
    ps = [ref.tensors(layer) for layer in block.layers()]
    xt = torch.tensor(x, requires_grad=True)
    yt = ref.block(block, ps, xt)
    (yt * torch.tensor(g)).sum().backward()
    assert np.allclose(y, yt.detach().numpy(), rtol=0, atol=1e-10)
    assert np.allclose(dx, xt.grad.numpy(), rtol=0, atol=1e-10)
    for layer, p in zip(block.layers(), ps):
        for name, t in p.items():
            assert np.allclose(layer.grads[name], t.grad.numpy(), rtol=0, atol=1e-10), name


def test_a_composite_without_its_layers_says_so():
    from attention_lib.nn.block import Composite

    class Empty(Composite):
        pass

    for get in (lambda c: c.params, lambda c: c.layers(), lambda c: c.n_params()):
        with pytest.raises(NotImplementedError, match="Empty must define layers"):
            get(Empty())
