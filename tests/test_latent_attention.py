"""Multi-head latent attention (DeepSeek-V2) and the KV-cache variants of the serving chapter."""

import numpy as np
import pytest

from attention_lib.gradcheck import numerical_gradient
from attention_lib.models.kv_variants import build_variant, load_variant, mean_pool_kv, save_variant
from attention_lib.nn.latent_attention import (
    GroupedSelfAttention,
    LatentCache,
    MultiHeadLatentAttention,
)


def _mla(seed=0, **kw):
    args = dict(d_model=12, n_heads=3, d_latent=6, d_rope=4)
    args.update(kw)
    return MultiHeadLatentAttention(rng=np.random.default_rng(seed), **args)


def test_mla_gradients_match_central_differences_in_float64():
    mla = _mla()
    rng = np.random.default_rng(1)
    x, g = rng.normal(size=(2, 5, 12)), rng.normal(size=(2, 5, 12))

    def loss():
        return float((mla.forward(x) * g).sum())

    mla.forward(x)
    dx = mla.backward(g)
    grads = dict(mla.grads)
    assert np.abs(numerical_gradient(loss, x) - dx).max() < 1e-7
    for k, p in mla.params.items():
        num = numerical_gradient(loss, p)
        assert np.abs(num - grads[k]).max() < 1e-7, k
        assert np.abs(grads[k]).max() > 1e-3, k  # every weight matters


def _torch_mla(torch, mla, p, x):
    """DeepSeek-V2's equations in PyTorch (queries not compressed), weights ``p``."""
    from tests.torch_reference import rotary

    H, dh, dr = mla.n_heads, mla.d_head, mla.d_rope
    B, T, _ = x.shape
    c = x @ p["W_DKV"]
    k = (c @ p["W_UK"]).view(B, T, H, dh).transpose(1, 2)
    v = (c @ p["W_UV"]).view(B, T, H, dh).transpose(1, 2)
    kr = rotary(x @ p["W_KR"])[:, None].expand(B, H, T, dr)
    q = (x @ p["W_Q"]).view(B, T, H, dh).transpose(1, 2)
    qr = rotary((x @ p["W_QR"]).view(B, T, H, dr).transpose(1, 2))
    o = torch.nn.functional.scaled_dot_product_attention(
        torch.cat([q, qr], -1), torch.cat([k, kr], -1), v, is_causal=True
    )
    return o.transpose(1, 2).reshape(B, T, H * dh) @ p["W_O"]


def test_mla_matches_pytorch_autograd():
    torch = pytest.importorskip("torch")
    from tests.torch_reference import tensors

    mla = _mla(d_model=16, n_heads=2, d_latent=8, d_rope=6)
    rng = np.random.default_rng(2)
    x, g = rng.normal(size=(3, 7, 16)), rng.normal(size=(3, 7, 16))
    y = mla.forward(x)
    dx = mla.backward(g)
    p = tensors(mla)
    xt = torch.tensor(x, requires_grad=True)
    yt = _torch_mla(torch, mla, p, xt)
    (yt * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(y, yt.detach().numpy(), atol=1e-12)
    np.testing.assert_allclose(dx, xt.grad.numpy(), atol=1e-11)
    for k in mla.params:
        np.testing.assert_allclose(mla.grads[k], p[k].grad.numpy(), atol=1e-11, err_msg=k)


def test_mla_cache_absorbed_form_equals_the_full_pass():
    mla = _mla()
    x = np.random.default_rng(3).normal(size=(2, 7, 12))
    cache = LatentCache()
    parts = [mla.forward(x[:, a:b], cache) for a, b in ((0, 3), (3, 4), (4, 7))]
    np.testing.assert_allclose(np.concatenate(parts, axis=1), mla.forward(x), atol=1e-12)
    assert len(cache) == 7 and cache.position == 7
    assert cache.nbytes == 2 * 7 * (6 + 4) * 8  # (d_latent + d_rope) float64 per token


def test_mla_rotary_part_makes_scores_depend_on_relative_position_only():
    # Same tokens at positions shifted by a cache: the rotary part turns by
    # the same angle for queries and keys, so the outputs do not change.
    mla = _mla()
    mla.params["W_DKV"][:] = 0  # only the rotary part scores
    x = np.random.default_rng(4).normal(size=(1, 4, 12))
    cache = LatentCache()
    cache.append(np.zeros((1, 0, 6)), np.zeros((1, 0, 4)))
    cache.position = 5  # as if five positions came first (none attended: empty rows)
    shifted = mla.forward(x, cache)
    np.testing.assert_allclose(shifted, mla.forward(x), atol=1e-12)


def test_latent_cache_truncate_rewinds():
    mla, cache = _mla(), LatentCache()
    x = np.random.default_rng(5).normal(size=(1, 6, 12))
    mla.forward(x, cache)
    cache.truncate(4)
    out = mla.forward(x[:, 4:], cache)
    np.testing.assert_allclose(out, mla.forward(x)[:, 4:], atol=1e-12)
    with pytest.raises(ValueError, match="cannot truncate"):
        cache.truncate(99)


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(d_rope=3), "d_rope must be even"),
        (dict(n_heads=5), "n_heads = 5 does not divide d_model = 12"),
        (dict(d_latent=0), "d_latent must be"),
    ],
)
def test_mla_bad_arguments(kw, match):
    with pytest.raises(ValueError, match=match):
        _mla(**kw)


def test_mla_bad_input_and_backward_without_forward():
    mla = _mla()
    with pytest.raises(ValueError, match=r"x must have shape \(B, T, 12\)"):
        mla.forward(np.zeros((2, 3, 5)))
    with pytest.raises(TypeError, match="floating-point"):
        mla.forward(np.zeros((1, 2, 12), dtype=int))
    with pytest.raises(RuntimeError, match="backward needs a forward"):
        mla.backward(np.zeros((1, 2, 12)))


def test_grouped_self_attention_cache_sizes():
    rng = np.random.default_rng(0)
    for kv, floats in ((4, 16), (2, 8), (1, 4)):
        att = GroupedSelfAttention(8, 4, kv, rng)
        assert att.cache_floats_per_token() == floats
        assert att.params["W_K"].shape == (8, 2 * kv)


CFG = dict(d_model=16, n_heads=4, n_layers=2, d_ff=32, max_len=12, seed=0)


@pytest.mark.parametrize("variant, nbytes", [("mha", 256), ("gqa", 128), ("mqa", 64), ("mla", 144)])
def test_variant_cache_bytes_and_cached_generation(variant, nbytes):
    model = build_variant({**CFG, "variant": variant}, n_vocab=7)
    assert model.cache_bytes_per_token() == nbytes
    prompt = np.array([1, 2, 3])
    a = model.generate(prompt, 6, temperature=0)
    b = model.generate(prompt, 6, temperature=0, use_cache=False)
    np.testing.assert_array_equal(a, b)
    cache = model.new_cache()
    model.forward(prompt[None], cache)
    assert sum(c.nbytes for c in cache) == 3 * nbytes


def test_variant_save_load_round_trip(tmp_path):
    model = build_variant({**CFG, "variant": "mla"}, n_vocab=7)
    save_variant(model, {**CFG, "variant": "mla"}, list("abcdefg"), tmp_path / "m.npz")
    loaded, chars = load_variant(tmp_path / "m.npz")
    x = np.array([[1, 2, 3, 4]])
    np.testing.assert_array_equal(loaded.forward(x), model.forward(x))
    assert "".join(chars) == "abcdefg"


def test_mean_pool_kv_averages_pairs_of_heads():
    mha = build_variant({**CFG, "variant": "mha"}, n_vocab=7)
    gqa = mean_pool_kv(mha, {**CFG, "variant": "gqa", "n_kv_heads": 2})
    W = mha.blocks[0].attn.params["W_K"]  # (16, 4 heads x 4)
    want = (W[:, 0:4] + W[:, 4:8]) / 2
    np.testing.assert_allclose(gqa.blocks[0].attn.params["W_K"][:, :4], want, rtol=1e-6)
    np.testing.assert_array_equal(
        gqa.blocks[1].attn.params["W_Q"], mha.blocks[1].attn.params["W_Q"]
    )
    np.testing.assert_array_equal(gqa.tok.params["E"], mha.tok.params["E"])
    # Where each pair of heads already shares keys and values, nothing changes.
    for blk in mha.blocks:
        for k in ("W_K", "W_V", "b_K", "b_V"):
            a = blk.attn.params[k]
            a[..., 4:8], a[..., 12:16] = a[..., 0:4], a[..., 8:12]
    gqa = mean_pool_kv(mha, {**CFG, "variant": "gqa", "n_kv_heads": 2})
    x = np.array([[1, 2, 3, 4, 5]])
    np.testing.assert_allclose(gqa.forward(x), mha.forward(x), atol=1e-5)
    with pytest.raises(ValueError, match="variant must be one of"):
        build_variant({**CFG, "variant": "sparse"}, 7)
