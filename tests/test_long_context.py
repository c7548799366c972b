"""The layer's tiled path, ALiBi, sliding windows with sinks, and RoPE scaling."""

import tracemalloc

import numpy as np
import pytest

from attention_lib import TinyGPT, alibi_bias, rotary, scaled_dot_product_attention
from attention_lib.blockwise import tile_keep
from attention_lib.gradcheck import check_gradients
from attention_lib.nn import MultiHeadAttention, RollingKVCache
from attention_lib.positions import rope_scaling


def _layer(seed=0, d_model=8, n_heads=4, **kwargs):
    rng = np.random.default_rng(seed)
    att = MultiHeadAttention(d_model, n_heads, rng, **kwargs)
    for a in att.params.values():  # biases away from zero: every path checked
        if a.ndim == 1:
            a[...] = rng.normal(size=a.shape)
    return att


CASES = {
    "causal": {},
    "grouped-query": {"n_kv_heads": 2},
    "multi-query rotary": {"n_kv_heads": 1, "rotary": "interleaved"},
    "rotary half": {"rotary": "half"},
    "alibi": {"alibi": True, "n_kv_heads": 2},
    "window": {"window": 4},
    "window and sinks": {"window": 3, "sinks": 2, "rotary": "half"},
    "everything": {"window": 4, "sinks": 1, "alibi": True, "n_kv_heads": 2, "rotary": "half"},
}


def _data(T=11, seed=1):
    rng = np.random.default_rng(seed)
    x, g = rng.normal(size=(2, T, 8)), rng.normal(size=(2, T, 8))
    pad = np.ones((2, 1, 1, T), bool)
    pad[1, ..., -3:] = False  # the second sequence has 3 padding positions
    return x, g, pad


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("block", [1, 3, 4, 16])
def test_tiled_path_equals_the_untiled_one(case, block):
    x, g, pad = _data()
    plain, tiled = _layer(**CASES[case]), _layer(**CASES[case], block_size=block)
    out = plain.forward(x, attn_mask=pad, is_causal=True)
    dx = plain.backward(g)
    out_t = tiled.forward(x, attn_mask=pad, is_causal=True)
    dx_t = tiled.backward(g)
    assert tiled.weights is None
    assert np.allclose(out_t, out, rtol=0, atol=1e-13)
    assert np.allclose(dx_t, dx, rtol=0, atol=1e-13)
    for k in plain.grads:
        assert np.allclose(tiled.grads[k], plain.grads[k], rtol=0, atol=1e-13), k


@pytest.mark.parametrize("case", ["grouped-query", "alibi", "window and sinks", "everything"])
def test_tiled_gradients_match_central_differences(case):
    x, g, pad = _data(T=7)
    att = _layer(**CASES[case], block_size=3)
    check_gradients(
        [att],
        lambda: np.sum(g * att.forward(x, attn_mask=pad, is_causal=True)),
        lambda: [(att.forward(x, attn_mask=pad, is_causal=True), att.backward(g))[1]],
        inputs=[x],
    )


def test_tiled_float_mask_not_causal_gradients():
    rng = np.random.default_rng(4)
    x, g = rng.normal(size=(2, 6, 8)), rng.normal(size=(2, 6, 8))
    bias = rng.normal(size=(4, 6, 6))
    plain, tiled = _layer(n_kv_heads=2), _layer(n_kv_heads=2, block_size=4)
    out = plain.forward(x, attn_mask=bias)
    assert np.allclose(tiled.forward(x, attn_mask=bias), out, rtol=0, atol=1e-13)
    check_gradients(
        [tiled],
        lambda: np.sum(g * tiled.forward(x, attn_mask=bias)),
        lambda: [(tiled.forward(x, attn_mask=bias), tiled.backward(g))[1]],
        inputs=[x],
    )


def test_tiled_dropout_regenerates_each_tiles_mask():
    """Forward and backward draw the same tile masks; the result is the naive
    attention with the whole mask assembled from the tiles."""
    x, g, _ = _data(T=9)
    att = _layer(dropout=0.3, block_size=4, n_kv_heads=2)

    def forward():
        att.dropout.rng = np.random.default_rng(7)  # the same seed at every call
        return att.forward(x, is_causal=True)

    check_gradients(
        [att],
        lambda: np.sum(g * forward()),
        lambda: [(forward(), att.backward(g))[1]],
        inputs=[x],
    )
    seed = int(np.random.default_rng(7).integers(2**62))
    keep = np.zeros((2, 2, 2, 9, 9))
    for r in range(0, 9, 4):
        for c in range(0, 9, 4):
            rows, cols = slice(r, min(r + 4, 9)), slice(c, min(c + 4, 9))
            shape = (2, 2, 2, rows.stop - r, cols.stop - c)
            keep[..., rows, cols] = tile_keep(seed, rows, cols, shape, 0.3, np.dtype(float))
    assert (keep == 0).any() and (keep > 1).any()
    p = att.params
    q, k, v = (x @ p["W_" + n] + p["b_" + n] for n in "QKV")
    q = q.reshape(2, 9, 2, 2, 2).transpose(0, 2, 3, 1, 4)  # (B, H_kv, G, T, d)
    k, v = (a.reshape(2, 9, 2, 1, 2).transpose(0, 2, 3, 1, 4) for a in (k, v))
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(2) + np.where(np.tri(9, dtype=bool), 0, -np.inf)
    P = np.exp(s - s.max(-1, keepdims=True))
    P /= P.sum(-1, keepdims=True)
    ctx = ((P * keep) @ v).transpose(0, 3, 1, 2, 4).reshape(2, 9, 8)
    assert np.allclose(forward(), ctx @ p["W_O"] + p["b_O"], rtol=0, atol=1e-12)


@pytest.mark.parametrize("case", ["causal", "grouped-query", "multi-query rotary", "rotary half"])
def test_tiled_path_matches_pytorch_autograd(case):
    torch = pytest.importorskip("torch")
    import torch_reference as ref

    att = _layer(**CASES[case], block_size=4)
    att.causal = True
    x, g, _ = _data()
    out = att.forward(x, is_causal=True)
    dx = att.backward(g)
    ps, tx = ref.tensors(att), torch.tensor(x, requires_grad=True)
    t_out = ref.self_attention(att, ps, tx)
    (t_out * torch.tensor(g)).sum().backward()
    assert np.allclose(out, t_out.detach().numpy(), rtol=0, atol=1e-12)
    assert np.allclose(dx, tx.grad.numpy(), rtol=0, atol=1e-12)
    for name, t in ps.items():
        assert np.allclose(att.grads[name], t.grad.numpy(), rtol=0, atol=1e-12), name


@pytest.mark.parametrize("block", [None, 4])
def test_alibi_and_window_match_pytorch_with_the_mask_written_out(block):
    """ALiBi through alibi_bias, the window and sinks as a boolean mask, in torch's SDPA."""
    torch = pytest.importorskip("torch")
    import torch_reference as ref

    att = _layer(alibi=True, window=4, sinks=2, block_size=block)
    x, g, _ = _data()
    out = att.forward(x, is_causal=True)
    dx = att.backward(g)
    i, j = np.arange(11)[:, None], np.arange(11)
    seen = (j <= i) & ((i - j < 4) | (j < 2))
    mask = np.where(seen, alibi_bias(4, 11), -np.inf)  # (H, T, S)
    ps, tx = ref.tensors(att), torch.tensor(x, requires_grad=True)
    t_out = ref.attention(att, ps, tx, attn_mask=torch.tensor(mask))
    (t_out * torch.tensor(g)).sum().backward()
    assert np.allclose(out, t_out.detach().numpy(), rtol=0, atol=1e-12)
    assert np.allclose(dx, tx.grad.numpy(), rtol=0, atol=1e-12)
    for name, t in ps.items():
        assert np.allclose(att.grads[name], t.grad.numpy(), rtol=0, atol=1e-12), name


def test_tiled_path_never_holds_the_score_matrix():
    """At T = 1024 one (T, T) float64 matrix is 8 MiB; the tiled step peaks far below."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1, 1024, 8))
    att = MultiHeadAttention(8, 1, rng, block_size=64)
    tracemalloc.start()
    att.forward(x, is_causal=True, need_weights=True)
    att.backward(np.ones_like(x))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 1024 * 1024 * 8 / 8, peak
    tracemalloc.start()
    plain = MultiHeadAttention(8, 1, np.random.default_rng(0))
    plain.forward(x, is_causal=True)
    plain.backward(np.ones_like(x))
    assert tracemalloc.get_traced_memory()[1] > 1024 * 1024 * 8
    tracemalloc.stop()


def test_tiled_backward_after_need_weights_false():
    x, g, _ = _data()
    plain, tiled = _layer(), _layer(block_size=4)
    plain.forward(x, is_causal=True)
    dx = plain.backward(g)
    tiled.forward(x, is_causal=True, need_weights=False)
    assert np.allclose(tiled.backward(g), dx, rtol=0, atol=1e-13)


def test_tiled_path_with_a_kv_cache_generates_what_the_whole_sequence_gives():
    x, _, _ = _data()
    att = _layer(block_size=2, rotary="half", alibi=True)
    whole = att.forward(x, is_causal=True)
    from attention_lib.nn import KVCache

    cache = KVCache()
    parts = [att.forward(x[:, :5], is_causal=True, cache=cache)]
    parts += [att.forward(x[:, t : t + 1], is_causal=True, cache=cache) for t in range(5, 11)]
    assert np.allclose(np.concatenate(parts, 1), whole, rtol=0, atol=1e-13)


def test_alibi_layer_is_sdpa_with_alibi_bias():
    att = _layer(alibi=True, n_kv_heads=2, bias=False)
    x, _, _ = _data()
    out = att.forward(x, is_causal=True)
    p = att.params
    q = (x @ p["W_Q"]).reshape(2, 11, 4, 2).transpose(0, 2, 1, 3)
    k, v = ((x @ p[n]).reshape(2, 11, 2, 2).transpose(0, 2, 1, 3) for n in ("W_K", "W_V"))
    k, v = np.repeat(k, 2, axis=1), np.repeat(v, 2, axis=1)
    ctx = scaled_dot_product_attention(q, k, v, attn_mask=alibi_bias(4, 11))
    assert np.allclose(out, ctx.transpose(0, 2, 1, 3).reshape(2, 11, 8) @ p["W_O"], atol=1e-12)


@pytest.mark.parametrize("positions", [None, "rotary", "alibi"])
def test_rolling_cache_is_streamingllm(positions):
    """Each step equals the layer run on the sinks and the window alone (positions in the cache)."""
    kw = {"rotary": "half"} if positions == "rotary" else {"alibi": positions == "alibi"}
    att = _layer(**kw)
    x, _, _ = _data(T=14)
    cache = RollingKVCache(window=4, sinks=2)
    for t in range(14):
        step = att.forward(x[:, t : t + 1], is_causal=True, cache=cache)
        seen = np.r_[0 : min(2, t + 1), max(2, t - 3) : t + 1]
        alone = att.forward(x[:, seen], is_causal=True)[:, -1:]
        assert np.allclose(step, alone, rtol=0, atol=1e-13), t
        assert len(cache) == min(len(seen), 5) and cache.position == t + 1
    assert cache.k.shape[-2] == 5  # 2 sinks and the 3 newest: the next query makes 4


def test_rolling_cache_of_a_model_without_positions_equals_the_window_mask():
    model = TinyGPT(7, 8, 2, 2, 16, 40, np.random.default_rng(0), positions=None)
    windowed = TinyGPT(
        7,
        8,
        2,
        2,
        16,
        40,
        np.random.default_rng(0),
        positions=None,
        window=5,
        sinks=1,
        block_size=8,
    )
    tokens = np.random.default_rng(1).integers(0, 7, size=(1, 40))
    cache = model.rolling_cache(5, sinks=1)
    steps = np.concatenate([model.forward(tokens[:, t : t + 1], cache) for t in range(40)], 1)
    assert np.allclose(steps, windowed.forward(tokens), rtol=0, atol=1e-12)
    assert len(cache[0]) == 5


@pytest.mark.parametrize("kind", ["linear", "ntk"])
def test_rope_scaling_rotates_by_the_scaled_angles(kind):
    att = _layer(
        n_heads=2, rotary="interleaved", bias=False, rope_scaling={"type": kind, "factor": 4.0}
    )
    x, _, _ = _data()
    out = att.forward(x, is_causal=True)
    divisor, base = rope_scaling(kind, 4.0, 4)  # d_head = 4: NTK's base grows by 4^(4/2)
    assert (divisor, base) == ((4.0, 1e4) if kind == "linear" else (1.0, 1e4 * 4.0**2))
    p = att.params
    pos = np.arange(11) / divisor
    heads = []
    for h in range(2):
        sl = slice(4 * h, 4 * h + 4)
        q, k = (rotary(x @ p[n][:, sl], pos, base) for n in ("W_Q", "W_K"))
        heads.append(scaled_dot_product_attention(q, k, x @ p["W_V"][:, sl], is_causal=True))
    assert np.allclose(out, np.concatenate(heads, -1) @ p["W_O"], rtol=0, atol=1e-12)
    g = np.random.default_rng(3).normal(size=out.shape)
    check_gradients(
        [att],
        lambda: np.sum(g * att.forward(x, is_causal=True)),
        lambda: [(att.forward(x, is_causal=True), att.backward(g))[1]],
        inputs=[x],
    )


def test_tinygpt_block_size_gives_the_same_logits_and_gradients():
    kw = dict(n_vocab=9, d_model=8, n_heads=2, n_layers=2, d_ff=16, max_len=20)
    tokens = np.random.default_rng(1).integers(0, 9, size=(2, 20))
    for positions in ("learned", "alibi", "rotary"):
        a = TinyGPT(**kw, rng=np.random.default_rng(0), positions=positions)
        b = TinyGPT(**kw, rng=np.random.default_rng(0), positions=positions, block_size=6)
        la, lb = a.forward(tokens), b.forward(tokens)
        assert np.allclose(la, lb, rtol=0, atol=1e-12)
        a.backward(np.ones_like(la))
        b.backward(np.ones_like(lb))
        for k, g in a.grads.items():
            assert np.allclose(b.grads[k], g, rtol=0, atol=1e-11), (positions, k)


def test_tinygpt_alibi_gradients_match_central_differences():
    model = TinyGPT(5, 8, 2, 1, 8, 6, np.random.default_rng(0), positions="alibi", block_size=4)
    tokens = np.array([[1, 2, 3, 4, 0, 1]])
    g = np.random.default_rng(2).normal(size=(1, 6, 5))
    check_gradients(
        model.layers(),
        lambda: np.sum(g * model.forward(tokens)),
        lambda: (model.forward(tokens), model.backward(g), [])[2],
    )


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"block_size": 0}, ValueError, "block_size"),
        ({"block_size": -3}, ValueError, "block_size"),
        ({"block_size": True}, TypeError, "block_size"),
        ({"window": 0}, ValueError, "window"),
        ({"window": -1}, ValueError, "window"),
        ({"window": 4, "sinks": -1}, ValueError, "sinks"),
        ({"sinks": 2}, ValueError, "sinks = 2 needs a window"),
        ({"alibi": [0.5, 0.25]}, ValueError, "alibi must be True or one positive slope"),
        ({"alibi": [0.5, 0.25, np.nan, 1.0]}, ValueError, "alibi"),
        ({"rope_scaling": {"type": "linear", "factor": 2.0}}, ValueError, "needs rotary"),
        (
            {"rotary": "half", "rope_scaling": {"type": "linear", "factor": 0.0}},
            ValueError,
            "factor must be positive",
        ),
        (
            {"rotary": "half", "rope_scaling": {"type": "ntk", "factor": float("nan")}},
            ValueError,
            "factor must be positive",
        ),
        (
            {"rotary": "half", "rope_scaling": {"type": "ntk", "factor": -2.0}},
            ValueError,
            "factor must be positive",
        ),
        ({"rotary": "half", "rope_scaling": {"type": "yarn", "factor": 2}}, ValueError, "type"),
    ],
)
def test_bad_long_sequence_arguments_are_refused_before_allocation(kwargs, error, message):
    with pytest.raises(error, match=message):
        MultiHeadAttention(8, 4, np.random.default_rng(0), **kwargs)
    if set(kwargs) <= {"block_size", "window", "sinks"}:
        with pytest.raises(error, match=message):  # a 10^12-number table is never drawn
            TinyGPT(10**9, 1000, 4, 1, 8, 8, np.random.default_rng(0), **kwargs)


def test_window_longer_than_the_sequence_and_window_without_causal_are_refused():
    att = _layer(window=20)
    x, _, _ = _data()
    with pytest.raises(ValueError, match="window = 20 is longer than the sequence"):
        att.forward(x, is_causal=True)
    with pytest.raises(ValueError, match="needs is_causal=True"):
        _layer(window=4).forward(x)
    with pytest.raises(ValueError, match="rolling KV|needs a window|window must"):
        RollingKVCache(0)


def test_checkpoint_round_trip_and_loss_by_position(tmp_path):
    from attention_lib.train.long_context import (
        CONFIG,
        build_model,
        load_checkpoint,
        loss_by_position,
        save_checkpoint,
    )
    from attention_lib.nn import softmax_cross_entropy

    cfg = {**CONFIG, "d_model": 8, "n_heads": 2, "n_layers": 1, "d_ff": 16}
    cfg.update(positions="alibi", context=16)
    model = build_model(cfg, 5)
    path = tmp_path / "m.npz"
    save_checkpoint(model, cfg, list("abcde"), path)
    loaded, back = load_checkpoint(path, max_len=64, block_size=8)
    assert back["positions"] == "alibi" and back["chars"] == "abcde"
    ids = np.random.default_rng(0).integers(0, 5, size=65)
    assert np.allclose(loaded.forward(ids[None, :16]), model.forward(ids[None, :16]), atol=1e-5)
    by_pos = loss_by_position(loaded, ids, 32)  # two windows of 32: past the training 16
    logits = loaded.forward(ids[:64].reshape(2, 32))
    loss, _ = softmax_cross_entropy(logits.reshape(-1, 5).astype(np.float64), ids[1:65])
    assert by_pos.shape == (32,) and np.isclose(by_pos.mean(), loss, rtol=1e-6)


def test_committed_long_context_checkpoints_match_their_manifests():
    import json

    from attention_lib.data.paths import sha256
    from attention_lib.train.long_context import checkpoint_dir, load_checkpoint

    manifests = sorted(checkpoint_dir().glob("*_*.json"))
    # eval_*: measurements, not checkpoints; long_task_*: chapter 18's retrieval
    # models, another kind of model, checked by tests/test_long_task.py.
    manifests = [m for m in manifests if not m.name.startswith(("eval_", "long_task_"))]
    if not manifests:
        pytest.skip("no long-context checkpoints committed")
    for path in manifests:
        m = json.loads(path.read_text())
        npz = checkpoint_dir() / m["file"]
        assert sha256(npz) == m["sha256"], npz.name
        model, cfg = load_checkpoint(npz, block_size=cfg_block(m))
        assert cfg["positions"] == m["config"]["positions"]
        assert m["training_characters"] == cfg["steps"] * cfg["chars_per_step"]
        assert m["wall_seconds"] > 0 and 0 < m["evaluation"]["val_loss"] < 3.0


def cfg_block(manifest):
    return manifest["config"].get("block_size")
