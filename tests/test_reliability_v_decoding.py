"""Issue 49 (Reliability V), the decoding faults: rotary tables, the fast decoders' guards,
speculative decoding with Llama and weightless drafts, sampling with masked logits, and the
translator's edge cases."""

import io
import tracemalloc

import numpy as np
import pytest

from attention_lib import TinyGPT
from attention_lib.models.kv_cache import decoder_for
from attention_lib.models.llama import Llama
from attention_lib.models.speculative import PromptLookup, speculative_generate
from attention_lib.nn import MultiHeadAttention
from attention_lib.nn.block import TransformerBlock
from attention_lib.sampling import sampling_probabilities
from attention_lib.softmax import softmax


def gpt(positions="rotary", dtype=np.float64, max_len=24, seed=1):
    model = TinyGPT(
        n_vocab=11, d_model=16, n_heads=4, n_layers=2, d_ff=24, max_len=max_len,
        rng=np.random.default_rng(seed), positions=positions,
    )  # fmt: skip
    for layer in model.layers():
        for k, a in layer.params.items():
            layer.params[k] = a.astype(dtype)
    model.head.params["W"] *= 4  # clear argmaxes: greedy text that depends on the weights
    return model


def llama(max_len=24, n_vocab=13):
    model = Llama(
        n_vocab=n_vocab, d_model=16, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=24,
        max_len=max_len, rng=np.random.default_rng(2), dtype=np.float64, tied=False,
    )  # fmt: skip
    return model


def fast_logits(model, tokens, prompt):
    """The fast decoder's logits after each position from ``prompt`` on."""
    dec = decoder_for(model, tokens.shape[0])
    assert dec is not None
    out = [dec.prefill(tokens[:, :prompt])]
    out += [dec.step(tokens[:, t]) for t in range(prompt, tokens.shape[1])]
    return np.stack(out, axis=1)


def plain_logits(model, tokens, prompt):
    return model.forward(tokens)[:, prompt - 1 :]


# -- 1. the rotary tables are keyed on rotary_base --------------------------------------------


def test_changing_rotary_base_after_a_forward_rotates_with_the_new_base():
    x = np.random.default_rng(0).normal(size=(1, 6, 16))
    att = MultiHeadAttention(16, 2, np.random.default_rng(1), rotary="interleaved")
    att.forward(x, is_causal=True)  # tables for base 10000 kept
    att.rotary_base = 500.0
    fresh = MultiHeadAttention(
        16, 2, np.random.default_rng(1), rotary="interleaved", rotary_base=500.0
    )
    np.testing.assert_allclose(
        att.forward(x, is_causal=True), fresh.forward(x, is_causal=True), atol=1e-12
    )


@pytest.mark.parametrize("make", [gpt, llama], ids=["tinygpt", "llama"])
def test_forward_and_the_fast_decoder_agree_after_rotary_base_changes(make):
    model = make()
    V = model.tok.params["E"].shape[0]
    tokens = np.random.default_rng(3).integers(0, V, (1, 12))
    model.forward(tokens)  # the first base's tables are kept
    for b in model.blocks:
        b.attn.rotary_base = 100.0
    np.testing.assert_allclose(
        fast_logits(model, tokens, 4), plain_logits(model, tokens, 4), atol=1e-10
    )


# -- 2. a forward replaced below the model turns the fast decoder off --------------------------


def ablate_heads(att, heads):
    """A forward that zeroes the output columns of query heads ``heads`` (a head ablation)."""
    original = att.forward
    cols = np.concatenate([np.arange(h * att.d_head, (h + 1) * att.d_head) for h in heads])

    def forward(*args, **kwargs):
        W_O = att.params["W_O"]
        saved = W_O[cols].copy()
        W_O[cols] = 0
        try:
            return original(*args, **kwargs)
        finally:
            W_O[cols] = saved

    return forward


def by_hand(model, prompt, n):
    """Greedy text through ``model.forward`` on the whole sequence, no cache."""
    seq = np.array(prompt)[None]
    for _ in range(n):
        nxt = model.forward(seq)[:, -1].argmax(-1)
        seq = np.concatenate([seq, nxt[:, None]], axis=1)
    return seq[0]


def final_norm(model):
    return model.ln_f if hasattr(model, "ln_f") else model.norm


class LoudBlock(TransformerBlock):
    """A notebook's subclass: the block's output features in reverse order."""

    def forward(self, x, cache=None):
        out = super().forward(x, cache)
        return out[..., ::-1]


PATCHES = {
    "attention instance forward": lambda m: setattr(
        m.blocks[0].attn, "forward", ablate_heads(m.blocks[0].attn, [0, 1, 2])
    ),
    "block instance forward": lambda m: setattr(
        m.blocks[1], "forward", lambda x, cache=None, f=m.blocks[1].forward: f(x, cache)[..., ::-1]
    ),
    "final norm instance forward": lambda m: setattr(
        final_norm(m), "forward", lambda x, f=final_norm(m).forward: f(x)[..., ::-1]
    ),
}


@pytest.mark.parametrize("patch", list(PATCHES), ids=list(PATCHES))
@pytest.mark.parametrize("make", [gpt, llama], ids=["tinygpt", "llama"])
def test_generate_runs_a_forward_replaced_on_a_sublayer(make, patch):
    model = make()
    prompt = [1, 2, 3]
    plain = model.generate(np.array(prompt), 12, temperature=0)
    decoder_for(model, 1)  # a kept build from before the patch must not be reused
    PATCHES[patch](model)
    want = by_hand(model, prompt, 12)
    assert not np.array_equal(want, plain)  # the patch changes the text
    assert decoder_for(model, 1) is None
    np.testing.assert_array_equal(model.generate(np.array(prompt), 12, temperature=0), want)
    got, _ = speculative_generate(model, PromptLookup(model.tok.params["E"].shape[0]), prompt, 12)
    np.testing.assert_array_equal(got, want)


def test_a_block_subclass_that_overrides_forward_turns_the_fast_decoder_off():
    model = gpt()
    plain = model.generate(np.array([1, 2, 3]), 12, temperature=0)
    model.blocks[1].__class__ = LoudBlock
    want = by_hand(model, [1, 2, 3], 12)
    assert not np.array_equal(want, plain)
    assert decoder_for(model, 1) is None
    np.testing.assert_array_equal(model.generate(np.array([1, 2, 3]), 12, temperature=0), want)


def test_a_subclass_that_keeps_the_library_forward_keeps_the_fast_decoder():
    class Quiet(type(llama().blocks[0])):
        pass

    model = llama()
    model.blocks[0].__class__ = Quiet
    assert decoder_for(model, 1) is not None


# -- 3. one rotary table per block ------------------------------------------------------------


@pytest.mark.parametrize("make", [gpt, llama], ids=["tinygpt", "llama"])
def test_blocks_with_their_own_rotary_base_decode_as_forward(make):
    model = make()
    model.blocks[1].attn.rotary_base = 37.0
    V = model.tok.params["E"].shape[0]
    tokens = np.random.default_rng(4).integers(0, V, (1, 14))
    np.testing.assert_allclose(
        fast_logits(model, tokens, 3), plain_logits(model, tokens, 3), atol=1e-10
    )
    tokens3 = np.random.default_rng(5).integers(0, V, (3, 14))  # the batched path too
    np.testing.assert_allclose(
        fast_logits(model, tokens3, 3), plain_logits(model, tokens3, 3), atol=1e-10
    )


# -- 7. speculative decoding with a Llama target ----------------------------------------------


def test_speculative_decoding_with_a_llama_target_is_its_greedy_text():
    model = llama()
    prompt = np.array([1, 5, 2, 5])
    got, _ = speculative_generate(model, PromptLookup(13), prompt, 14, k=3)
    np.testing.assert_array_equal(got, model.generate(prompt, 14, temperature=0))
    sampled, _ = speculative_generate(
        model, PromptLookup(13), prompt, 8, k=3, temperature=0.7, rng=np.random.default_rng(0)
    )
    assert sampled.shape == (12,) and sampled.max() < 13


def test_the_command_line_drafts_for_stories260k_with_prompt_lookup():
    from attention_lib.generate import main
    from attention_lib.models import load_pretrained

    out, err = io.StringIO(), io.StringIO()
    argv = ["--model", "stories260k", "--prompt", "Once upon a time", "--max-new-tokens", "20"]
    status = main(argv + ["--temperature", "0", "--draft", "lookup"], stdout=out, stderr=err)
    assert status == 0, err.getvalue()
    model, tok = load_pretrained("stories260k")
    greedy = tok.decode(model.generate(tok.encode("Once upon a time"), 20, temperature=0))
    assert out.getvalue() == greedy + "\n"


# -- 8. a weightless draft's proposals are not a V x V identity --------------------------------


def test_sampling_with_prompt_lookup_over_a_big_vocabulary_stays_small():
    V = 12_000  # a V x V identity of float64 is 1.07 GiB
    target = TinyGPT(V, 8, 2, 1, 8, 32, np.random.default_rng(0))
    prompt = np.array([5, 6, 7, 5, 6])
    speculative_generate(target, PromptLookup(V), prompt, 2, k=4, temperature=1.0,
                         rng=np.random.default_rng(0))  # fmt: skip
    tracemalloc.start()
    try:
        out, stats = speculative_generate(
            target, PromptLookup(V), prompt, 12, k=4, temperature=1.0,
            rng=np.random.default_rng(1),
        )  # fmt: skip
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out.shape == (17,) and stats["drafted"] > 0
    assert peak < 32 * 2**20, f"peak {peak / 2**20:.0f} MiB"


def test_the_one_hot_proposal_keeps_the_targets_distribution():
    """The acceptance rule with a one-hot draft still samples the target's distribution."""
    V = 4
    target = TinyGPT(V, 8, 2, 1, 8, 8, np.random.default_rng(5))
    prompt = np.array([1, 2, 1])
    p = softmax(target.forward(prompt[None])[0, -1].astype(np.float64))
    rng = np.random.default_rng(2)
    firsts = [
        speculative_generate(target, PromptLookup(V), prompt, 2, k=1, temperature=1.0, rng=rng)[0][
            3
        ]
        for _ in range(3000)
    ]
    freq = np.bincount(firsts, minlength=V) / len(firsts)
    np.testing.assert_allclose(freq, p, atol=0.03)


# -- 15. a temperature too small to divide by --------------------------------------------------


@pytest.mark.parametrize("lookup", [False, True], ids=["model draft", "prompt lookup"])
def test_speculative_sampling_refuses_a_tiny_temperature_as_plain_sampling_does(lookup):
    target = gpt()
    draft = PromptLookup(11) if lookup else gpt(seed=7)
    with pytest.raises(ValueError, match="too small.*temperature=0"):
        target.generate(np.array([1, 2]), 4, temperature=1e-320, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="too small.*temperature=0"):
        speculative_generate(
            target, draft, [1, 2], 6, k=2, temperature=1e-320, rng=np.random.default_rng(0)
        )


# -- 21. masked (-inf) logits are sampled, NaN and +inf refused --------------------------------


def masked_logits(seed=0, V=12, rows=3):
    z = np.random.default_rng(seed).normal(size=(rows, V)) * 2
    z[:, ::3] = -np.inf  # a third of the vocabulary masked
    return z


def test_sampling_probabilities_of_masked_logits_are_the_unmasked_softmax():
    z = masked_logits()
    keep = np.isfinite(z)
    for kwargs in ({}, {"temperature": 0.5}, {"top_k": 3}, {"top_p": 0.8}):
        p = sampling_probabilities(z, **kwargs)
        assert np.isfinite(p).all() and (p[~keep] == 0).all()
        np.testing.assert_allclose(p.sum(-1), 1)
    by_hand = np.exp(z / 0.5 - (z / 0.5).max(-1, keepdims=True))
    np.testing.assert_allclose(
        sampling_probabilities(z, temperature=0.5), by_hand / by_hand.sum(-1, keepdims=True)
    )


def test_top_k_and_top_p_with_masked_logits_match_torch():
    torch = pytest.importorskip("torch")
    z = masked_logits(seed=1, V=20, rows=4)
    t = torch.tensor(z)
    for k in (1, 4, 13, 20):  # 13 and 20: more than the unmasked tokens
        kth = torch.topk(t, k, dim=-1).values[:, -1:]
        want = torch.softmax(t.masked_fill(t < kth, float("-inf")), -1).numpy()
        np.testing.assert_allclose(sampling_probabilities(z, top_k=k), want, atol=1e-12)
    for top_p in (0.3, 0.9):  # transformers' TopPLogitsWarper, "keep while mass before < p"
        probs = torch.softmax(t, -1)
        sorted_p, order = torch.sort(probs, descending=True, stable=True)
        before = sorted_p.cumsum(-1) - sorted_p
        drop = torch.zeros_like(t, dtype=torch.bool).scatter(1, order, before >= top_p)
        want = torch.softmax(t.masked_fill(drop, float("-inf")), -1).numpy()
        np.testing.assert_allclose(sampling_probabilities(z, top_p=top_p), want, atol=1e-12)


def test_generate_samples_around_masked_logits():
    from attention_lib.models.gpt import pick_next_token

    z = masked_logits(seed=2, V=9, rows=1)
    rng = np.random.default_rng(0)
    draws = [int(pick_next_token(z, 1.0, None, None, rng)[0]) for _ in range(4000)]
    freq = np.bincount(draws, minlength=9) / len(draws)
    np.testing.assert_allclose(freq, softmax(z[0]), atol=0.03)
    assert all(np.isfinite(z[0, d]) for d in set(draws))


@pytest.mark.parametrize(
    "bad, message",
    [
        (np.nan, "NaN"),
        (np.inf, r"\+inf"),
        ("all", "no finite logit"),
    ],
    ids=["nan", "+inf", "every logit masked"],
)
def test_nan_plus_inf_and_rows_without_a_finite_logit_are_refused(bad, message):
    from attention_lib.models.gpt import pick_next_token

    z = masked_logits(seed=3, V=6, rows=2)
    if bad == "all":
        z[1] = -np.inf
    else:
        z[1, 1] = bad
    for temperature in (1.0, 0):
        with pytest.raises(ValueError, match=message):
            sampling_probabilities(z, temperature=temperature)
    with pytest.raises(ValueError, match=message):
        pick_next_token(z, 1.0, None, None, np.random.default_rng(0))


# -- 24. the translator's greedy on an empty batch ---------------------------------------------


@pytest.fixture(scope="module")
def translator():
    from attention_lib.translate import load_model

    return load_model("transformer")


def test_greedy_and_beam_search_of_an_empty_batch_give_no_sentences(translator):
    model, _ = translator
    for src in (np.zeros((0, 0), np.int64), np.zeros((0, 5), np.int64)):
        for lengths in ([], np.zeros(0, np.int64)):  # [] is float64 to NumPy
            assert model.greedy(src, lengths) == []
            assert model.greedy(src, lengths, cache=False) == []
            assert model.beam_search(src, lengths, beam=3) == []


# -- 26. a line that starts with a byte-order mark ---------------------------------------------


def test_a_leading_byte_order_mark_is_stripped_as_the_runtime_strips_it(translator):
    from attention_lib.translate import translate_sentences

    model, tok = translator
    assert tok.encode("\ufeffI am cold.") == tok.encode("I am cold.")
    assert tok.encode("\ufeff I am cold. \ufeff") == tok.encode("I am cold.")
    assert translate_sentences(model, tok, ["\ufeffI am cold.", "I am cold."]) == (
        translate_sentences(model, tok, ["I am cold."]) * 2
    )


# -- leftovers: a float32 TinyGPT with sinusoidal positions stays float32 ----------------------


def test_a_float32_sinusoidal_tinygpt_gives_float32_logits():
    model = gpt("sinusoidal", dtype=np.float32)  # the parameters cast, as TinyGPT.load does
    tokens = np.random.default_rng(6).integers(0, 11, (2, 10))
    logits = model.forward(tokens)
    assert logits.dtype == np.float32
    reference = gpt("sinusoidal", dtype=np.float64).forward(tokens)
    np.testing.assert_allclose(logits, reference, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(fast_logits(model, tokens, 4), logits[:, 3:], atol=2e-5)


# -- leftovers: Linear's (B, T, E) @ (E, F) is one 2-D product ---------------------------------


class RecordingMatrix(np.ndarray):
    """A weight that records the shapes of the matrix products it takes part in."""

    products: list = []

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if ufunc is np.matmul:
            RecordingMatrix.products.append([np.shape(a) for a in inputs])
        inputs = [a.view(np.ndarray) if isinstance(a, RecordingMatrix) else a for a in inputs]
        return getattr(ufunc, method)(*inputs, **kwargs)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_linear_on_a_batch_of_sequences_is_one_2d_product_with_the_same_values(dtype):
    from attention_lib.nn import Linear

    rng = np.random.default_rng(7)
    layer = Linear(24, 40, rng)
    layer.params = {k: a.astype(dtype) for k, a in layer.params.items()}
    x = rng.normal(size=(5, 9, 24)).astype(dtype)
    want = np.stack([x[b] @ layer.params["W"] + layer.params["b"] for b in range(5)])
    RecordingMatrix.products = []
    W = layer.params["W"]
    layer.params["W"] = W.view(RecordingMatrix)
    y = np.asarray(layer.forward(x))
    layer.params["W"] = W
    assert RecordingMatrix.products == [[(45, 24), (24, 40)]]
    assert y.shape == (5, 9, 40) and y.dtype == dtype
    np.testing.assert_allclose(y, want, rtol=1e-6 if dtype == np.float32 else 1e-13)
    np.testing.assert_array_equal(layer.forward(x.reshape(45, 24)).reshape(5, 9, 40), y)
    assert layer.forward(np.ones((0, 3, 24), dtype)).shape == (0, 3, 40)
