"""Tests for attention_lib.nn.MultiHeadAttention, the one attention layer, and its KVCache."""

import numpy as np
import pytest

from attention_lib import rotary, scaled_dot_product_attention
from attention_lib.gradcheck import check_gradients
from attention_lib.nn import Attention, KVCache, MultiHeadAttention, SelfAttention


def _layer(seed=0, d_model=8, n_heads=4, **kwargs):
    rng = np.random.default_rng(seed)
    att = MultiHeadAttention(d_model, n_heads, rng, **kwargs)
    for a in att.params.values():  # biases away from zero: every path checked
        if a.ndim == 1:
            a[...] = rng.normal(size=a.shape)
    return att


CASES = {
    "self, causal": ({}, {"is_causal": True}),
    "grouped-query": ({"n_kv_heads": 2}, {"is_causal": True}),
    "multi-query, no bias": ({"n_kv_heads": 1, "bias": False}, {}),
    "rotary interleaved": (
        {"rotary": "interleaved", "n_kv_heads": 2},
        {"is_causal": True},
    ),
    "rotary half": ({"rotary": "half", "rotary_base": 500.0}, {"is_causal": True}),
    "head size not d_model / n_heads": ({"d_head": 3, "n_kv_heads": 2}, {}),
}


@pytest.mark.parametrize("case", CASES)
def test_self_attention_gradients_match_central_differences(case):
    kwargs, call = CASES[case]
    att = _layer(**kwargs)
    rng = np.random.default_rng(1)
    x, g = rng.normal(size=(2, 5, 8)), rng.normal(size=(2, 5, 8))
    mask = rng.random((2, 1, 5, 5)) < 0.8  # boolean, True = may attend
    check_gradients(
        [att],
        lambda: np.sum(g * att.forward(x, attn_mask=mask, **call)),
        lambda: [(att.forward(x, attn_mask=mask, **call), att.backward(g))[1]],
        inputs=[x],
    )


@pytest.mark.parametrize("separate_values", [False, True])
def test_cross_attention_gradients_match_central_differences(separate_values):
    att = _layer(n_kv_heads=2, d_kv=6, rotary="half")
    rng = np.random.default_rng(2)
    x_q, x_kv, x_v = rng.normal(size=(2, 3, 8)), rng.normal(size=(2, 7, 6)), None
    inputs = [x_q, x_kv]
    if separate_values:
        x_v = rng.normal(size=(2, 7, 6))
        inputs.append(x_v)
    bias = rng.normal(size=(4, 3, 7))  # a float mask, per head
    g = rng.normal(size=(2, 3, 8))

    def forward():
        return att.forward(x_q, x_kv, attn_mask=bias, x_v=x_v)

    check_gradients(
        [att],
        lambda: np.sum(g * forward()),
        lambda: (forward(), att.backward(g))[1],
        inputs=inputs,
    )


def test_dropout_on_the_weights_gradients_match_central_differences():
    att = _layer(dropout=0.3, n_kv_heads=2)
    rng = np.random.default_rng(3)
    x, g = rng.normal(size=(2, 5, 8)), rng.normal(size=(2, 5, 8))

    def forward():
        att.dropout.rng = np.random.default_rng(7)  # the same mask at every call
        return att.forward(x, is_causal=True)

    check_gradients(
        [att],
        lambda: np.sum(g * forward()),
        lambda: [(forward(), att.backward(g))[1]],
        inputs=[x],
    )
    assert (att.dropout.mask == 0).any()


def test_unbatched_input_gives_unbatched_output_and_gradient():
    att = _layer()
    x = np.random.default_rng(4).normal(size=(5, 8))
    out = att.forward(x, is_causal=True)
    assert np.allclose(out, att.forward(x[None], is_causal=True)[0], rtol=0, atol=1e-12)
    assert att.backward(np.ones((1, 5, 8))).shape == (1, 5, 8)
    att.forward(x, is_causal=True)
    assert att.backward(np.ones((5, 8))).shape == (5, 8) and att.weights.shape == (
        4,
        5,
        5,
    )


def test_every_head_is_the_functional_attention_on_its_slice():
    """The layer, the functional attention and grouped heads give the same numbers."""
    att = _layer(n_kv_heads=2, rotary="interleaved")
    rng = np.random.default_rng(5)
    x = rng.normal(size=(2, 6, 8))
    out = att.forward(x, is_causal=True)
    p = att.params
    q, k, v = (x @ p["W_" + n] + p["b_" + n] for n in "QKV")
    heads = []
    for h in range(4):
        j = h // 2  # the key/value head of query head h
        qh = rotary(q[..., 2 * h : 2 * h + 2])
        kh = rotary(k[..., 2 * j : 2 * j + 2])
        heads.append(
            scaled_dot_product_attention(qh, kh, v[..., 2 * j : 2 * j + 2], is_causal=True)
        )
    expected = np.concatenate(heads, axis=-1) @ p["W_O"] + p["b_O"]
    assert np.allclose(out, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("case", CASES)
def test_matches_pytorch_sdpa_and_autograd(case):
    torch = pytest.importorskip("torch")
    import torch_reference as ref

    kwargs, call = CASES[case]
    att = _layer(**kwargs)
    att.causal = call.get("is_causal", False)
    rng = np.random.default_rng(6)
    x, g = rng.normal(size=(2, 5, 8)), rng.normal(size=(2, 5, 8))
    out = att.forward(x, **call)
    dx = att.backward(g)
    ps, tx = ref.tensors(att), torch.tensor(x, requires_grad=True)
    t_out = ref.self_attention(att, ps, tx)
    (t_out * torch.tensor(g)).sum().backward()
    assert np.allclose(out, t_out.detach().numpy(), rtol=0, atol=1e-12)
    assert np.allclose(dx, tx.grad.numpy(), rtol=0, atol=1e-12)
    for name, t in ps.items():
        assert np.allclose(att.grads[name], t.grad.numpy(), rtol=0, atol=1e-12), name


def test_cross_attention_matches_pytorch_with_a_mask_and_grouped_heads():
    torch = pytest.importorskip("torch")
    import torch_reference as ref

    att = _layer(n_kv_heads=1, d_kv=6)
    rng = np.random.default_rng(7)
    x_q, x_kv, g = (
        rng.normal(size=(3, 4, 8)),
        rng.normal(size=(3, 6, 6)),
        rng.normal(size=(3, 4, 8)),
    )
    mask = rng.random((3, 4, 4, 6)) < 0.7
    out = att.forward(x_q, x_kv, attn_mask=mask)
    dx_q, dx_kv = att.backward(g)
    ps = ref.tensors(att)
    tq, tkv = (
        torch.tensor(x_q, requires_grad=True),
        torch.tensor(x_kv, requires_grad=True),
    )
    t_out = ref.attention(att, ps, tq, tkv, attn_mask=torch.tensor(mask))
    (t_out * torch.tensor(g)).sum().backward()
    # torch gives NaN to fully masked queries; the book gives them zero weight
    ok = mask.any(axis=-1).all(axis=1)[..., None]  # (3, 4, 1)
    assert np.allclose(np.where(ok, out, 0), np.where(ok, t_out.detach().numpy(), 0), atol=1e-12)
    if ok.all():
        assert np.allclose(dx_q, tq.grad.numpy(), atol=1e-12)
        assert np.allclose(dx_kv, tkv.grad.numpy(), atol=1e-12)


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"rotary": "half", "n_kv_heads": 2},
        {"rotary": "interleaved", "n_kv_heads": 1},
    ],
)
def test_generation_with_a_cache_equals_the_whole_sequence(kwargs):
    att = _layer(**kwargs)
    x = np.random.default_rng(8).normal(size=(2, 7, 8))
    full = att.forward(x, is_causal=True)
    cache = KVCache()
    parts = [att.forward(x[:, :3], is_causal=True, cache=cache)]
    parts += [att.forward(x[:, t : t + 1], is_causal=True, cache=cache) for t in range(3, 7)]
    assert np.allclose(np.concatenate(parts, axis=1), full, rtol=0, atol=1e-12)
    assert len(cache) == 7 == cache.position
    assert cache.nbytes == 2 * 2 * att.n_kv_heads * 7 * 2 * 8  # keys and values, float64


def test_cross_attention_cache_computes_keys_and_values_once():
    att = _layer(d_kv=6, n_kv_heads=2)
    rng = np.random.default_rng(9)
    x_q, memory = rng.normal(size=(2, 4, 8)), rng.normal(size=(2, 5, 6))
    full = att.forward(x_q, memory)
    cache = KVCache()
    first = att.forward(x_q[:, :1], memory, cache=cache)
    keys = cache.k
    rest = [att.forward(x_q[:, t : t + 1], None, cache=cache) for t in range(1, 4)]
    assert cache.k is keys and len(cache) == 5 and cache.position == 4
    assert np.allclose(np.concatenate([first] + rest, axis=1), full, rtol=0, atol=1e-12)


def test_a_cache_refuses_another_batch_size_or_another_layer():
    att = _layer()
    cache = KVCache()
    att.forward(np.zeros((2, 3, 8)), is_causal=True, cache=cache)
    with pytest.raises(ValueError, match="the KV cache holds 2 sequences but this call has 3"):
        att.forward(np.zeros((3, 1, 8)), is_causal=True, cache=cache)
    with pytest.raises(ValueError, match="was the cache made for another layer"):
        _layer(n_kv_heads=2).forward(np.zeros((2, 1, 8)), cache=cache)
    with pytest.raises(ValueError, match="cross-attention .* needs a cache of its own"):
        att.forward(np.zeros((2, 1, 8)), np.zeros((2, 4, 8)), cache=cache)
    with pytest.raises(TypeError, match="cache must be a KVCache"):
        att.forward(np.zeros((2, 1, 8)), cache=[])


def test_backward_needs_a_forward_without_a_cache_and_a_gradient_of_the_output_shape():
    att = _layer()
    with pytest.raises(RuntimeError, match="backward\\(\\) needs a forward\\(\\) first"):
        att.backward(np.ones((2, 3, 8)))
    att.forward(np.zeros((2, 3, 8)))
    with pytest.raises(
        ValueError,
        match=r"grad has shape \(2, 3, 7\) but the output .* "
        r"\(2, 3, 8\)",
    ):
        att.backward(np.ones((2, 3, 7)))
    att.forward(np.zeros((2, 3, 8)), cache=KVCache())
    with pytest.raises(RuntimeError, match="KV cache"):
        att.backward(np.ones((2, 3, 8)))


@pytest.mark.parametrize(
    "call, error, message",
    [
        (
            lambda a: a.forward(np.zeros((2, 3, 7))),
            ValueError,
            r"x_q must have shape \(B, T, 8\)",
        ),
        (
            lambda a: a.forward(np.zeros((2, 1, 3, 8))),
            ValueError,
            r"x_q must have shape",
        ),
        (
            lambda a: a.forward(np.zeros((2, 3, 8), dtype=int)),
            TypeError,
            "x_q must be a floating",
        ),
        (
            lambda a: a.forward(np.zeros((2, 3, 8)), np.zeros((2, 4, 5))),
            ValueError,
            r"x_kv must have shape \(B, T, 8\)",
        ),
        (
            lambda a: a.forward(np.zeros((2, 3, 8)), np.zeros((3, 4, 8))),
            ValueError,
            "x_kv holds 3 sequences but x_q holds 2",
        ),
        (
            lambda a: a.forward(np.zeros((2, 3, 8)), np.zeros((2, 4, 8)), x_v=np.zeros((2, 5, 8))),
            ValueError,
            "every key needs one value",
        ),
        (
            lambda a: a.forward(np.zeros((2, 3, 8)), x_v=np.zeros((2, 3, 8))),
            ValueError,
            "x_v .* needs x_kv",
        ),
        (
            lambda a: a.forward(np.zeros((2, 3, 8)), attn_mask=np.ones((3, 4), bool)),
            ValueError,
            r"attn_mask of shape \(3, 4\) does not broadcast to \(B, n_heads, L, S\)",
        ),
        (
            lambda a: a.forward(np.zeros((2, 3, 8)), attn_mask=np.ones((3, 3), int)),
            TypeError,
            "attn_mask must be boolean",
        ),
        (
            lambda a: a.forward(np.zeros((2, 3, 8)), is_causal="yes"),
            TypeError,
            "is_causal must be True or False",
        ),
    ],
)
def test_bad_input_gets_a_message_naming_the_argument(call, error, message):
    with pytest.raises(error, match=message):
        call(_layer())


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"n_heads": 3}, "n_heads = 3 does not divide d_model = 8"),
        ({"n_kv_heads": 3}, "n_kv_heads = 3 does not divide n_heads = 4"),
        (
            {"n_heads": 8, "rotary": "half"},
            "rotary needs an even head size, got d_head = 1",
        ),
        ({"rotary": "yes"}, "rotary must be one of"),
        ({"rotary_base": -1.0}, "rotary_base must be a positive number"),
        ({"dropout": 1.0}, r"p must be a probability in \[0, 1\)"),
    ],
)
def test_bad_settings_are_refused_when_the_layer_is_built(kwargs, message):
    with pytest.raises(ValueError, match=message):
        _layer(**kwargs)
    with pytest.raises(TypeError, match="rng must be a numpy.random.Generator"):
        MultiHeadAttention(8, 2, rng=0)


def test_float32_stays_float32():
    att = _layer(dtype=np.float32, n_kv_heads=2, rotary="half")
    x = np.random.default_rng(10).normal(size=(2, 5, 8)).astype(np.float32)
    out = att.forward(x, is_causal=True)
    dx = att.backward(np.ones_like(out))
    assert out.dtype == dx.dtype == att.weights.dtype == np.float32
    assert all(g.dtype == np.float32 for g in att.grads.values())


def test_the_chapter_names_are_the_same_layer():
    """SelfAttention draws the weights of the former fused W_QKV; Attention is one head."""
    rng = np.random.default_rng(11)
    fused = np.random.default_rng(12).normal(scale=1 / np.sqrt(8), size=(8, 24))
    att = SelfAttention(8, 2, np.random.default_rng(12))
    assert np.array_equal(np.concatenate([att.params[n] for n in ("W_Q", "W_K", "W_V")], 1), fused)
    x = rng.normal(size=(2, 4, 8))
    same = MultiHeadAttention(8, 2, np.random.default_rng(12))
    assert np.array_equal(att.forward(x), same.forward(x, is_causal=True))
    one = Attention(8, 3, 5, rng)
    assert [a.shape for a in one.params.values()] == [(8, 3), (8, 3), (8, 5), (5, 8)]
    x_kv = rng.normal(size=(2, 6, 8))
    assert one.forward(x, x_kv).shape == (2, 4, 8) and one.weights.shape == (2, 4, 6)
    assert [d.shape for d in one.backward(np.ones((2, 4, 8)))] == [(2, 4, 8), (2, 6, 8)]


def test_every_path_gives_the_same_numbers():
    """The PyTorch-style adapter, the nn layer, the functional attention and the
    blockwise (online-softmax) attention, forward and backward, on one problem."""
    import attention_lib as al

    E, H, d = 8, 2, 4
    rng = np.random.default_rng(13)
    mha = al.MultiHeadAttention(E, H, rng=rng)
    mha.in_proj_bias[:] = rng.normal(size=3 * E)
    mha.out_proj_bias[:] = rng.normal(size=E)
    x, g = rng.normal(size=(2, 5, E)), rng.normal(size=(2, 5, E))
    pad = np.array([[False] * 5, [False] * 3 + [True] * 2])  # PyTorch: True = padding
    out_adapter, w_adapter = mha(
        x, x, x, key_padding_mask=pad, is_causal=True, average_attn_weights=False
    )
    W = np.split(mha.in_proj_weight, 3)
    b = np.split(mha.in_proj_bias, 3)
    params = {
        "W_Q": W[0].T,
        "W_K": W[1].T,
        "W_V": W[2].T,
        "W_O": mha.out_proj_weight.T,
        "b_Q": b[0],
        "b_K": b[1],
        "b_V": b[2],
        "b_O": mha.out_proj_bias,
    }
    layer = MultiHeadAttention.from_params({k: a.copy() for k, a in params.items()}, H)
    allowed = ~pad[:, None, None, :]  # the book: True = attend
    out_layer = layer.forward(x, attn_mask=allowed, is_causal=True)
    dx_layer = layer.backward(g)

    def heads(y):  # (B, T, E) -> (B, H, T, d)
        return y.reshape(2, 5, H, d).transpose(0, 2, 1, 3)

    def merge(y):  # (B, H, T, d) -> (B, T, E)
        return y.transpose(0, 2, 1, 3).reshape(2, 5, E)

    q, k, v = (heads(x @ params["W_" + n] + params["b_" + n]) for n in "QKV")
    ctx, w = al.scaled_dot_product_attention(q, k, v, allowed, is_causal=True, return_weights=True)
    ctx_blocks, lse = al.blockwise_attention(
        q, k, v, allowed, is_causal=True, block_size=2, return_logsumexp=True
    )
    d_ctx = heads(g @ params["W_O"].T)
    grads = al.scaled_dot_product_attention_backward(d_ctx, q, k, v, allowed, is_causal=True)
    grads_blocks = al.blockwise_attention_backward(
        d_ctx, q, k, v, ctx_blocks, lse, allowed, is_causal=True, block_size=2
    )
    for c, (dq, dk, dv) in ((ctx, grads), (ctx_blocks, grads_blocks)):
        out = merge(c) @ params["W_O"] + params["b_O"]
        dx = sum(merge(dy) @ params["W_" + n].T for dy, n in zip((dq, dk, dv), "QKV"))
        assert np.allclose(out, out_layer, rtol=0, atol=1e-12)
        assert np.allclose(dx, dx_layer, rtol=0, atol=1e-12)
    assert np.allclose(out_adapter, out_layer, rtol=0, atol=1e-12)
    assert np.allclose(w_adapter, w, rtol=0, atol=1e-15)
    assert np.allclose(layer.weights, w, rtol=0, atol=1e-15)
    assert np.allclose(
        layer.grads["W_O"],
        merge(ctx).reshape(-1, E).T @ g.reshape(-1, E),
        rtol=0,
        atol=1e-12,
    )


def test_from_params_refuses_weights_that_do_not_fit():
    eye = np.eye(4)
    with pytest.raises(ValueError, match="params must hold W_Q, W_K, W_V, W_O"):
        MultiHeadAttention.from_params({"W_Q": eye, "W_K": eye, "W_V": eye}, 2)
    with pytest.raises(ValueError, match=r"params\['W_K'\] has shape \(4, 3\)"):
        MultiHeadAttention.from_params({"W_Q": eye, "W_K": eye[:, :3], "W_V": eye, "W_O": eye}, 2)
    with pytest.raises(ValueError, match=r"params\['W_O'\] must be a matrix"):
        MultiHeadAttention.from_params({"W_Q": eye, "W_K": eye, "W_V": eye, "W_O": np.ones(4)}, 2)


def test_need_weights_false_gives_the_same_output_and_keeps_nothing_for_backward():
    att = _layer(n_kv_heads=2)
    x = np.random.default_rng(14).normal(size=(2, 5, 8))
    mask = np.ones((5, 5), bool)
    mask[2] = False  # a query with nothing to attend to
    out = att.forward(x, attn_mask=mask, is_causal=True)
    fast = att.forward(x, attn_mask=mask, is_causal=True, need_weights=False)
    assert np.allclose(fast, out, rtol=0, atol=1e-12) and att.weights is None
    with pytest.raises(RuntimeError, match="need_weights=False"):
        att.backward(np.ones_like(out))
