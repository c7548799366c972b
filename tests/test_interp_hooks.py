"""attention_lib.interp.Hooks on every kind of model the book has, checked by brute force.

Tiny models with random weights (TinyGPT, Llama with grouped-query heads,
MiniLM, the translation Transformer): each recorded activation is recomputed
from the layers' own weights, each replacement is compared with a model
whose weights were changed instead, the fast decoder steps aside during
generation, and bad input is refused in one line with nothing left installed.
"""

import numpy as np
import pytest

from attention_lib import TinyGPT
from attention_lib.data.paths import data_dir
from attention_lib.interp import (
    Hooks,
    activation_names,
    head_logit_attribution,
    layout,
    logit_diff,
    patch_heads,
    patch_residual,
    path_patch,
    record_all,
    run_with_hooks,
)
from attention_lib.models.kv_cache import decoder_for
from attention_lib.models.llama import Llama
from attention_lib.models.minilm import MiniLM
from attention_lib.models.transformer import Transformer
from attention_lib.softmax import softmax


def tiny_gpt(**kw):
    return TinyGPT(
        n_vocab=13, d_model=16, n_heads=4, n_layers=2, d_ff=32, max_len=24,
        rng=np.random.default_rng(0), **kw
    )  # fmt: skip


def tiny_llama(dtype=np.float64, seed=1):
    return Llama(
        n_vocab=17, d_model=24, n_layers=3, n_heads=6, n_kv_heads=2, d_ff=32, max_len=32,
        rng=np.random.default_rng(seed), dtype=dtype,
    )  # fmt: skip


def tiny_minilm():
    return MiniLM(
        n_vocab=20, d_model=12, n_layers=2, n_heads=3, d_ff=24, max_len=16,
        rng=np.random.default_rng(2),
    )  # fmt: skip


def tiny_transformer():
    return Transformer(
        n_vocab=15, d_model=16, n_heads=4, d_ff=32, n_layers=2, max_len=20, seed=3,
        dtype=np.float64,
    )  # fmt: skip


IDS = np.array([[1, 5, 7, 2, 9, 5, 7], [3, 4, 4, 8, 1, 2, 6]])


def installed(model):
    """Every layer of ``model`` that holds a ``forward`` or ``_project`` of its own."""
    lay = layout(model)
    layers = list(lay.blocks.values()) + list(lay.attns.values()) + list(lay.ffns.values())
    return [x for x in layers if {"forward", "_project"} & set(vars(x))]


# -- recording: each activation against the layers' own arithmetic ----------


def test_llama_records_match_the_attention_computed_by_hand():
    model = tiny_llama()
    att, H, G, d = model.blocks[1].attn, 6, 3, 4
    names = [f"blocks.1.{n}" for n in ("resid_pre", "attn.q", "attn.k", "attn.v")]
    names += [
        "blocks.1.attn.pattern",
        "blocks.1.attn.z",
        "blocks.1.attn.out",
        "blocks.1.resid_post",
    ]
    logits, acts = run_with_hooks(model, IDS, record=names)
    x = model.blocks[1].attn_norm.forward(acts["blocks.1.resid_pre"])
    split = lambda y, h: y.reshape(2, 7, h, d).transpose(0, 2, 1, 3)  # noqa: E731
    q, k, v = (
        split(x @ att.params["W_Q"], H),
        split(x @ att.params["W_K"], 2),
        split(x @ att.params["W_V"], 2),
    )
    np.testing.assert_allclose(acts["blocks.1.attn.q"], q, atol=1e-12)
    np.testing.assert_allclose(acts["blocks.1.attn.k"], k, atol=1e-12)
    np.testing.assert_allclose(acts["blocks.1.attn.v"], v, atol=1e-12)
    # the pattern is the rotated scores' softmax; z is P V with each query head's group
    qr, kr = att._rotate(q, 0), att._rotate(k, 0)
    kr_full, v_full = np.repeat(kr, G, axis=1), np.repeat(v, G, axis=1)
    scores = qr @ kr_full.transpose(0, 1, 3, 2) / np.sqrt(d)
    scores = np.where(np.tril(np.ones((7, 7), bool)), scores, -np.inf)
    P = softmax(scores, axis=-1)
    np.testing.assert_allclose(acts["blocks.1.attn.pattern"], P, atol=1e-12)
    np.testing.assert_allclose(acts["blocks.1.attn.z"], P @ v_full, atol=1e-12)
    z = acts["blocks.1.attn.z"].transpose(0, 2, 1, 3).reshape(2, 7, H * d)
    np.testing.assert_allclose(acts["blocks.1.attn.out"], z @ att.params["W_O"], atol=1e-12)
    # the next block's input is this block's output; the logits are unchanged by recording
    _, nxt = run_with_hooks(model, IDS, record=["blocks.2.resid_pre"])
    np.testing.assert_array_equal(nxt["blocks.2.resid_pre"], acts["blocks.1.resid_post"])
    np.testing.assert_array_equal(logits, model.forward(IDS))
    assert not installed(model)


def test_every_name_of_every_model_can_be_recorded_and_changes_nothing():
    tgt = np.array([[1, 4, 5, 6], [1, 7, 8, 2]])
    cases = [
        (tiny_gpt(), (IDS,)),
        (tiny_llama(), (IDS,)),
        (tiny_minilm(), (IDS,)),
        (tiny_transformer(), (IDS, [7, 5], tgt)),
    ]
    for model, args in cases:
        names = activation_names(model)
        plain = model.forward(*args)
        with Hooks(model, record=names) as h:
            hooked = model.forward(*args)
        # (MiniLM's layers, asked for no weights, divide at the end instead: rounding differs)
        np.testing.assert_allclose(hooked, plain, rtol=1e-5, atol=1e-6)
        for n in names:
            assert np.isfinite(h[n]).all(), n
        assert not installed(model)
    assert "decoder.1.cross_attn.pattern" in names and "encoder.0.self_attn.z" in names
    # cross-attention: queries from the decoder (4 positions), keys from the source (7)
    assert h["decoder.1.cross_attn.pattern"].shape == (2, 4, 4, 7)
    assert h["decoder.1.cross_attn.k"].shape == (2, 4, 7, 4)
    assert h["decoder.1.cross_attn.pattern"][1, :, :, 5:].max() == 0  # padding


def test_minilm_pattern_is_recorded_although_its_forward_asks_for_no_weights():
    model = tiny_minilm()
    model.forward(IDS, need_weights=True)
    expected = [b.attn.weights.copy() for b in model.blocks]
    model.forward(IDS)  # need_weights=False: the layers keep no weights
    assert model.blocks[0].attn.weights is None
    _, acts = run_with_hooks(model, IDS, record=["blocks.0.attn.pattern", "blocks.1.attn.pattern"])
    np.testing.assert_allclose(acts["blocks.0.attn.pattern"], expected[0], atol=1e-6)
    np.testing.assert_allclose(acts["blocks.1.attn.pattern"], expected[1], atol=1e-6)


def test_minilm_feed_forward_output_is_seen_per_sequence_and_replaced_as_its_weights():
    model = tiny_minilm()  # its blocks run the feed-forward layer on (B T, d) rows
    with Hooks(
        model, record=["blocks.1.mlp_out"], replace={"blocks.0.mlp_out": np.zeros((2, 7, 12))}
    ) as h:
        hooked = model.forward(IDS)
    assert h["blocks.1.mlp_out"].shape == (2, 7, 12)
    fc2 = model.blocks[0].ffn.fc2.params
    fc2["W"][:], fc2["b"][:] = 0, 0
    np.testing.assert_allclose(hooked, model.forward(IDS), atol=1e-6)


# -- replacing and adding: against models whose weights were changed -----------


@pytest.mark.parametrize("make", [tiny_gpt, tiny_llama, tiny_minilm])
def test_zeroing_a_heads_output_equals_zeroing_its_rows_of_W_O(make):
    model = make()
    d = model.blocks[1].attn.d_head

    def zero_head_2(z):
        z = z.copy()
        z[:, 2] = 0
        return z

    with Hooks(model, replace={"blocks.1.attn.z": zero_head_2}):
        hooked = model.forward(IDS)
    model.blocks[1].attn.params["W_O"][2 * d : 3 * d] = 0
    np.testing.assert_allclose(hooked, model.forward(IDS), rtol=1e-5, atol=1e-6)


def test_transformer_cross_attention_head_zeroed_by_hook_and_by_weights():
    model, tgt = tiny_transformer(), np.array([[1, 4, 5, 6], [1, 7, 8, 2]])
    with Hooks(
        model,
        replace={"decoder.0.cross_attn.z": lambda z: z * np.array([1, 0, 1, 1])[:, None, None]},
    ):
        hooked = model.forward(IDS, [7, 5], tgt)
    plain = model.forward(IDS, [7, 5], tgt)
    model.decoder[0].cross_attn.params["W_O"][4:8] = 0
    np.testing.assert_allclose(hooked, model.forward(IDS, [7, 5], tgt), atol=1e-12)
    assert np.abs(hooked - plain).max() > 1e-3


@pytest.mark.parametrize("kind, weight", [("q", "W_Q"), ("k", "W_K"), ("v", "W_V")])
def test_scaling_one_query_head_or_one_key_value_group_equals_scaling_its_weights(kind, weight):
    model = tiny_llama()
    d, idx = 4, 1  # query head 1, or key/value group 1 (query heads 3, 4, 5)

    def scale(a):
        a = a.copy()
        a[:, idx] *= 1.7
        return a

    with Hooks(model, record=["blocks.2.attn.z"], replace={f"blocks.2.attn.{kind}": scale}) as h:
        hooked = model.forward(IDS)
    _, before = run_with_hooks(model, IDS, record=["blocks.2.attn.z"])
    model.blocks[2].attn.params[weight][:, idx * d : (idx + 1) * d] *= 1.7
    np.testing.assert_allclose(hooked, model.forward(IDS), atol=1e-12)
    # exactly the heads that read it changed
    changed = np.abs(h["blocks.2.attn.z"] - before["blocks.2.attn.z"]).max(axis=(0, 2, 3)) > 1e-9
    expect = [h == idx for h in range(6)] if kind == "q" else [h // 3 == idx for h in range(6)]
    assert changed.tolist() == expect


def test_adding_to_the_residual_stream_equals_shifting_the_embeddings():
    model = tiny_gpt()
    delta = np.random.default_rng(5).normal(size=16)
    with Hooks(model, add={"blocks.0.resid_pre": delta}):
        hooked = model.forward(IDS)
    model.tok.params["E"] = model.tok.params["E"] + delta
    np.testing.assert_allclose(hooked, model.forward(IDS), atol=1e-12)


def test_a_replaced_pattern_is_used_uniform_weights_average_the_values():
    model = tiny_gpt()
    T = IDS.shape[1]
    uniform = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]
    with Hooks(
        model,
        record=["blocks.1.attn.z", "blocks.1.attn.v", "blocks.1.attn.pattern"],
        replace={"blocks.1.attn.pattern": lambda P: np.broadcast_to(uniform, P.shape)},
    ) as h:
        model.forward(IDS)
    running_mean = np.cumsum(h["blocks.1.attn.v"], axis=2) / np.arange(1, T + 1)[:, None]
    np.testing.assert_allclose(h["blocks.1.attn.z"], running_mean, atol=1e-12)
    np.testing.assert_allclose(h["blocks.1.attn.pattern"][0, 0], uniform)


# -- generation: the fast decoder steps aside ----------------------------------


def test_generate_runs_the_hooks_at_every_step_and_the_fast_decoder_steps_aside():
    model = tiny_llama(np.float32, seed=3)
    for block in model.blocks:  # louder heads: removing one changes what is written
        block.attn.params["W_O"] *= 4
    prompt = np.array([1, 5, 7])
    assert decoder_for(model, 1, 32) is not None
    zero = {
        "blocks.1.attn.z": lambda z: z * np.array([1, 1, 0, 1, 1, 1], np.float32)[:, None, None]
    }
    with Hooks(model, record=["blocks.1.attn.pattern"], replace=zero) as h:
        assert decoder_for(model, 1, 32) is None
        hooked = model.generate(prompt, 12, temperature=1, rng=np.random.default_rng(0))
    assert len(h.calls["blocks.1.attn.pattern"]) == 12  # the prompt, then 11 one-token steps
    assert h.calls["blocks.1.attn.pattern"][-1].shape == (1, 6, 1, 14)
    with model.ablate([(1, 2)]):  # the weights edited: the fast decoder runs, same tokens
        assert decoder_for(model, 1, 32) is not None
        ablated = model.generate(prompt, 12, temperature=1, rng=np.random.default_rng(0))
    np.testing.assert_array_equal(hooked, ablated)
    plain = model.generate(prompt, 12, temperature=1, rng=np.random.default_rng(0))
    assert not np.array_equal(hooked, plain)
    assert decoder_for(model, 1, 32) is not None and not installed(model)


def test_tinygpt_generate_runs_the_hooks_and_a_replaced_pattern_reads_the_cached_values():
    model = tiny_gpt()
    for block in model.blocks:
        block.attn.params["W_O"] *= 4
    prompt, rng = np.array([1, 5, 7]), np.random.default_rng

    def uniform(P):  # every visible key the same weight: causal, whatever the cache holds
        B, H, T, S = P.shape
        allowed = np.arange(S) <= np.arange(S - T, S)[:, None]
        return np.broadcast_to(allowed / allowed.sum(-1, keepdims=True), P.shape)

    with Hooks(model, replace={"blocks.1.attn.pattern": uniform}):
        cached = model.generate(prompt, 10, temperature=1, rng=rng(1))
        uncached = model.generate(prompt, 10, temperature=1, rng=rng(1), use_cache=False)
    np.testing.assert_array_equal(cached, uncached)
    assert not np.array_equal(cached, model.generate(prompt, 10, temperature=1, rng=rng(1)))
    assert not installed(model) and decoder_for(model, 1, 24) is not None


def test_transformer_greedy_runs_the_hooks_and_beam_search_refuses_them():
    # chapter 10's trained translator: removing a cross-attention head changes its output
    model = Transformer.load(data_dir() / "checkpoints" / "translation" / "transformer.npz")
    src = np.random.default_rng(0).integers(3, 4000, size=(3, 6))
    lengths = [6, 6, 4]
    plain = model.greedy(src, lengths, max_len=8)
    zero = {"decoder.1.cross_attn.z": lambda z: z * np.array([1, 0, 1, 1])[:, None, None]}
    with Hooks(model, replace=zero):
        hooked = model.greedy(src, lengths, max_len=8)
        uncached = model.greedy(src, lengths, max_len=8, cache=False)
        assert hooked == uncached and hooked != plain
        with pytest.raises(ValueError, match="beam_search runs the fast decoder"):
            model.beam_search(src, lengths, beam=2, max_len=8)
    d = model.decoder[1].cross_attn.d_head
    model.decoder[1].cross_attn.params["W_O"][d : 2 * d] = 0  # the same head, by its weights
    assert model.greedy(src, lengths, max_len=8) == hooked


# -- the translator: its source side patched, paths through the memory ----------


def test_transformer_source_side_patching_and_paths_through_the_memory():
    model = tiny_transformer()
    tgt = np.array([[1, 4, 5, 6], [1, 7, 8, 2]])
    clean = (IDS, np.array([7, 7]), tgt)
    corrupted = (np.where(IDS == 5, 9, IDS), np.array([7, 7]), tgt)
    metric = logit_diff([4, 7], [5, 8])
    # the source stream entering encoder block 1, at the changed position 1, from the clean run
    scores = patch_residual(model, clean, corrupted, metric, blocks=["encoder.0", "encoder.1"])
    _, acts = record_all(model, clean, ["encoder.1.resid_pre"])

    def put(x):
        x = x.copy()
        x[:, 1] = acts["encoder.1.resid_pre"][:, 1]
        return x

    with Hooks(model, replace={"encoder.1.resid_pre": put}):
        assert scores[1, 1] == pytest.approx(metric(model.forward(*corrupted)), abs=1e-9)
    # every part of the source side as senders: the memory is the clean one, so a path into
    # a cross-attention group's keys is activation patching of those keys
    senders = ["encoder.0.resid_pre", "encoder.0.mlp_out", "encoder.1.mlp_out"]
    senders += [(f"encoder.{i}.self_attn", h) for i in range(2) for h in range(4)]
    path = path_patch(model, clean, corrupted, metric, senders, [("decoder.1.cross_attn", 2, "k")])
    keys = patch_heads(model, clean, corrupted, metric, what="k", layers=["decoder.1.cross_attn"])
    assert path == pytest.approx(keys[0, 2], abs=1e-9)
    assert keys[0, 2] != pytest.approx(metric(model.forward(*corrupted)), abs=1e-6)
    with pytest.raises(ValueError, match="decoder.1.cross_attn has 4 key/value heads"):
        path_patch(model, clean, corrupted, metric, senders, [("decoder.1.cross_attn", 4, "v")])
    with pytest.raises(KeyError, match="'encoder.2.resid_pre' is not an activation of Transformer"):
        patch_residual(model, clean, corrupted, metric, blocks=["encoder.2"])
    assert not installed(model)


def test_transformer_head_attribution_and_the_rest_make_the_logits():
    model = tiny_transformer()  # LayerNorm at the end: each part centred, beta added once
    tgt = np.array([[1, 4, 5, 6], [1, 7, 8, 2]])
    args, tokens = (IDS, [7, 5], tgt), [3, 4, 9]
    dla = head_logit_attribution(model, args, tokens, position=2)
    assert dla.shape == (4, 4, 2, 3)  # decoder.0.self_attn, .cross_attn, decoder.1's two
    names = [f"{a}.z" for a in layout(model).heads]
    logits, acts = record_all(model, args, names + ["decoder.1.resid_post"])
    rest = acts["decoder.1.resid_post"][:, 2].copy()
    for a, n in zip(layout(model).heads, names):
        z = acts[n][:, :, 2]  # (B, H, d_head)
        rest -= z.reshape(2, -1) @ layout(model).attns[a].params["W_O"]
    ln, E = model.dec_ln, model.emb.params["E"]
    final = acts["decoder.1.resid_post"][:, 2]
    c = final - final.mean(-1, keepdims=True)
    inv = 1 / np.sqrt((c * c).mean(-1, keepdims=True) + ln.eps)
    U = E.T[:, tokens] * ln.params["gamma"][:, None]
    rest_part = ((rest - rest.mean(-1, keepdims=True)) * inv) @ U + ln.params["beta"] @ E.T[
        :, tokens
    ]
    np.testing.assert_allclose(dla.sum(axis=(0, 1)) + rest_part, logits[:, 2, tokens], atol=1e-9)


# -- bad input: one line, and nothing left installed ---------------------------


def test_a_name_the_model_does_not_have_lists_the_names_it_has():
    model = tiny_llama()
    with pytest.raises(KeyError) as err:
        Hooks(model, record=["blocks.0.resid_pre", "blocks.3.attn.z"])
    message = err.value.args[0]
    assert "'blocks.3.attn.z'" in message and "\n" not in message
    assert "blocks.{0..2}.attn.{q, k, v, pattern, z, out}" in message
    assert "blocks.{0..2}.{resid_pre, resid_post, mlp_out}" in message
    with pytest.raises(KeyError, match="blocks.0.attn.Q"):
        Hooks(model, replace={"blocks.0.attn.Q": np.zeros(3)})
    assert not installed(model)


def test_a_replacement_of_the_wrong_shape_is_refused_and_every_hook_is_removed():
    model = tiny_llama()
    clean = model.forward(IDS)
    with pytest.raises(ValueError, match=r"replace\['blocks.2.attn.z'\] has shape \(2, 6, 7, 3\)"):
        with Hooks(
            model,
            record=["blocks.0.attn.pattern"],
            replace={"blocks.2.attn.z": np.zeros((2, 6, 7, 3))},
        ):
            model.forward(IDS)
    assert not installed(model)
    np.testing.assert_array_equal(model.forward(IDS), clean)
    with pytest.raises(ValueError, match=r"add\['blocks.0.resid_pre'\] has shape \(5,\)"):
        with Hooks(model, add={"blocks.0.resid_pre": np.ones(5)}):
            model.forward(IDS)
    with pytest.raises(TypeError, match=r"replace\['blocks.0.attn.q'\] must be an array"):
        Hooks(model, replace={"blocks.0.attn.q": "zeros"})
    assert not installed(model)
    np.testing.assert_array_equal(model.forward(IDS), clean)


def test_a_tiled_layers_pattern_is_refused_before_anything_is_installed():
    model = tiny_gpt(block_size=4)
    with pytest.raises(ValueError, match="tiled"):
        Hooks(model, record=["blocks.0.attn.q", "blocks.1.attn.pattern"])
    assert not installed(model)


def test_hooks_nest_and_unwind_in_order():
    model = tiny_gpt()
    with Hooks(model, record=["blocks.0.attn.z"]) as outer:
        with Hooks(model, replace={"blocks.0.attn.z": lambda z: 0 * z}):
            model.forward(IDS)
        assert not outer["blocks.0.attn.z"].any()  # the inner replacement ran first
        model.forward(IDS)
        assert outer["blocks.0.attn.z"].any()
    assert not installed(model)
