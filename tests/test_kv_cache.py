"""The decoding fast path (models/kv_cache.py) against the plain forward pass, and cropping."""

import numpy as np
import pytest

from attention_lib import TinyGPT
from attention_lib.models import kv_cache
from attention_lib.models.kv_cache import StaticKVCache, decoder_for
from attention_lib.models.llama import Llama


def gpt(positions, dtype=np.float64, max_len=16, attention_only=False):
    model = TinyGPT(
        n_vocab=11, d_model=16, n_heads=4, n_layers=2, d_ff=24, max_len=max_len,
        rng=np.random.default_rng(1), positions=positions, attention_only=attention_only,
    )  # fmt: skip
    for layer in model.layers():
        for k, a in layer.params.items():
            layer.params[k] = a.astype(dtype)
    if positions == "sinusoidal":
        model.pe = model.pe.astype(dtype)
    return model


def llama(dtype=np.float64, max_len=16, tied=True):
    return Llama(
        n_vocab=13, d_model=16, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=24,
        max_len=max_len, rng=np.random.default_rng(2), tied=tied, dtype=dtype,
    )  # fmt: skip


MODELS = [
    ("learned", lambda dt: gpt("learned", dt)),
    ("sinusoidal", lambda dt: gpt("sinusoidal", dt)),
    ("rotary", lambda dt: gpt("rotary", dt)),
    ("none", lambda dt: gpt(None, dt)),
    ("attention-only", lambda dt: gpt("learned", dt, attention_only=True)),
    ("llama", lambda dt: llama(dt)),
    ("llama-untied", lambda dt: llama(dt, tied=False)),
]


def fast_logits(model, tokens, prompt):
    """The fast decoder's logits after each position from ``prompt`` on: (B, T - prompt + 1, V)."""
    dec = decoder_for(model, tokens.shape[0])
    out = [dec.prefill(tokens[:, :prompt])]
    out += [dec.step(tokens[:, t]) for t in range(prompt, tokens.shape[1])]
    return np.stack(out, axis=1)


@pytest.mark.parametrize("B", [3, 1], ids=["3 rows", "one row"])  # one row: _row's path
@pytest.mark.parametrize("dtype, atol", [(np.float64, 1e-12), (np.float32, 2e-5)])
@pytest.mark.parametrize("name, make", MODELS, ids=[m[0] for m in MODELS])
def test_fast_logits_equal_the_full_forward_at_every_step(name, make, dtype, atol, B):
    model = make(dtype)
    n_vocab = model.tok.params["E"].shape[0]
    tokens = np.random.default_rng(3).integers(0, n_vocab, (B, model.max_len))
    want = model.forward(tokens)[:, 4:]  # after 5 tokens, 6, ..., max_len (a full cache)
    got = fast_logits(model, tokens, 5)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=atol * np.abs(want).max())


@pytest.mark.parametrize("name, make", MODELS, ids=[m[0] for m in MODELS])
def test_fast_generation_gives_the_tokens_of_the_plain_paths(name, make):
    model = make(np.float64)
    prompt = np.array([[1, 2, 3], [4, 5, 6]])
    for temperature, top_k in [(0, None), (0.8, 4)]:
        runs = []
        for use_cache, fast in [(True, True), (True, False), (False, False)]:
            run = model.generate
            if not fast:  # the library's plain cache: no fast decoder
                saved = kv_cache.decoder_for
                kv_cache.decoder_for = lambda *a, **k: None
            try:
                runs.append(
                    run(prompt, 10, temperature=temperature, top_k=top_k,
                        rng=np.random.default_rng(7), use_cache=use_cache)
                )  # fmt: skip
            finally:
                if not fast:
                    kv_cache.decoder_for = saved
        assert runs[0].shape == (2, 13)
        np.testing.assert_array_equal(runs[0], runs[1])
        np.testing.assert_array_equal(runs[0], runs[2])


@pytest.mark.parametrize("make", [lambda: gpt("learned"), llama], ids=["gpt", "llama"])
@pytest.mark.parametrize("B", [2, 1], ids=["2 rows", "one row"])
def test_a_wrong_cache_is_caught(monkeypatch, make, B):
    """The comparison can fail: a cache that counts a prompt as one position gives other logits."""
    model = make()
    tokens = np.random.default_rng(3).integers(0, 11, (B, 12))
    full = model.forward(tokens)[:, 4:]

    def one_at_a_time(self, T):  # the bug: the next token overwrites the prompt's keys
        self.length += 1

    monkeypatch.setattr(StaticKVCache, "advance", one_at_a_time)
    got = fast_logits(model, tokens, 5)
    assert not np.allclose(got[:, 1:], full[:, 1:], rtol=0, atol=1e-3)


def test_the_cache_is_written_in_place_and_reordered():
    cache = StaticKVCache(1, 3, 1, 4, 2, np.float64)
    before = cache.k
    for t in range(3):
        k = np.full((3, 1, 1, 2), t, float) + np.arange(3)[:, None, None, None] * 10
        cache.write(0, k, k)
        cache.advance(1)
    assert cache.k is before and len(cache) == 3
    cache.reorder(np.array([2, 2, 0]))
    np.testing.assert_array_equal(cache.k[0, :, 0, :3, 0], [[20, 21, 22], [20, 21, 22], [0, 1, 2]])


def test_models_without_a_fast_path_get_none():
    class Other(TinyGPT):
        def forward(self, tokens, cache=None):
            return super().forward(tokens, cache)

    model = Other(n_vocab=5, d_model=8, n_heads=2, n_layers=1, d_ff=8, max_len=6,
                  rng=np.random.default_rng(0))  # fmt: skip
    assert decoder_for(model, 1) is None
    out = model.generate(np.array([1, 2]), 3, temperature=0)  # the plain path
    assert out.shape == (5,)


# -- cropped generation ---------------------------------------------------------


def crop_reference(model, prompt, n):
    """The cropping rule written out with model.forward on whole windows (greedy)."""
    W, H = model.max_len, model.max_len // 2
    text = list(prompt)
    window = text[-W:]
    new = []
    for i in range(n):
        logits = model.forward(np.array([window]))[0, -1]
        t = int(logits.argmax())
        new.append(t)
        text.append(t)
        window = window + [t] if len(window) < W else text[-H:]
    return new


@pytest.mark.parametrize("make", [lambda: gpt("learned"), lambda: gpt("rotary"), lambda: llama()])
@pytest.mark.parametrize("prompt_len", [3, 16, 20])
def test_cropped_generation_past_the_context_follows_the_rule(make, prompt_len):
    model = make()  # max_len 16
    prompt = np.random.default_rng(5).integers(0, 11, prompt_len)
    want = crop_reference(model, prompt.tolist(), 40)
    for use_cache in (True, False):
        out = model.generate(prompt, 40, temperature=0, use_cache=use_cache)
        assert out.shape == (prompt_len + 40,)
        np.testing.assert_array_equal(out[:prompt_len], prompt)
        assert out[prompt_len:].tolist() == want


def test_crop_false_keeps_the_old_error():
    model = gpt("learned")
    with pytest.raises(ValueError, match="exceeds max_len = 16"):
        model.generate(np.array([1, 2, 3]), 14, temperature=0, crop=False)
    with pytest.raises(ValueError, match="exceeds max_len = 16"):
        llama().generate(np.array([1, 2, 3]), 14, temperature=0, crop=False)
    assert model.generate(np.array([1, 2, 3]), 13, temperature=0, crop=False).shape == (16,)


def test_within_the_context_cropping_changes_nothing():
    model = gpt("learned")
    a = model.generate(np.array([1, 2, 3]), 13, temperature=0.9, rng=np.random.default_rng(0))
    b = model.generate(
        np.array([1, 2, 3]), 13, temperature=0.9, rng=np.random.default_rng(0), crop=False
    )
    np.testing.assert_array_equal(a, b)


# -- the translation Transformer's decoder ----------------------------------------


def translator(dtype):
    from attention_lib.models.transformer import Transformer

    return Transformer(n_vocab=19, d_model=16, n_heads=2, d_ff=24, n_layers=2, max_len=40,
                       seed=5, dtype=dtype)  # fmt: skip


SRC = np.array([[5, 6, 7, 8, 9, 10], [11, 12, 13, 0, 0, 0], [4, 0, 0, 0, 0, 0]])
LENGTHS = np.array([6, 3, 1])


@pytest.mark.parametrize("dtype, atol", [(np.float64, 1e-12), (np.float32, 2e-5)])
def test_the_translator_fast_step_gives_the_plain_steps_logits(dtype, atol):
    from attention_lib.models.kv_cache import TransformerDecoder

    model = translator(dtype)
    memory, mask = model.encode(SRC, LENGTHS)
    caches = model._caches()
    fast = TransformerDecoder(model, memory, mask, 1, 12)
    y = np.full(3, 1)
    for t in range(12):
        plain = model._step(y, t, memory, mask, caches)  # log-probabilities
        got = fast.logits(y, t)
        got = got - got.max(axis=-1, keepdims=True)
        want = plain - plain.max(axis=-1, keepdims=True)
        np.testing.assert_allclose(got, want, rtol=0, atol=atol * 10)
        y = plain.argmax(axis=-1)


def test_the_translator_greedy_fast_path_equals_recomputing():
    model = translator(np.float64)
    assert model.greedy(SRC, LENGTHS) == model.greedy(SRC, LENGTHS, cache=False)


@pytest.mark.parametrize("K", [1, 2, 4])
def test_the_translator_beam_search_equals_the_plain_steps_and_full_sort(K, monkeypatch):
    from attention_lib.models import decoding
    from attention_lib.models.transformer import beam_search
    from attention_lib.softmax import log_softmax

    model = translator(np.float64)
    got = model.beam_search(SRC, LENGTHS, beam=K)
    # The plain path: nn.KVCache steps and a full stable sort of every candidate.
    memory, mask = model.encode(SRC, LENGTHS)
    rows = np.repeat(np.arange(3), K)
    memory, mask, caches = memory[rows], mask[rows], model._caches()

    def step(y, t):
        return log_softmax(model._step(y, t, memory, mask, caches))

    def reorder(idx):
        for c, _ in caches:
            c.k, c.v = c.k[idx], c.v[idx]

    monkeypatch.setattr(
        decoding, "best_candidates", lambda c, n: np.argsort(-c, axis=1, kind="stable")[:, :n]
    )
    want = beam_search(step, reorder, 3, K, model._max_out(LENGTHS, None), 0.6)
    assert got == want


def test_best_candidates_is_the_stable_sort_even_with_ties():
    from attention_lib.models.decoding import best_candidates

    rng = np.random.default_rng(0)
    for _ in range(200):
        c = rng.integers(-4, 4, (3, 30)).astype(float)  # many ties
        n = int(rng.integers(1, 12))
        np.testing.assert_array_equal(
            best_candidates(c, n), np.argsort(-c, axis=1, kind="stable")[:, :n]
        )


# -- the book's trained models ----------------------------------------------------


@pytest.fixture(scope="module", params=["shakespeare", "stories260k"])
def pretrained(request):
    from attention_lib.models import load_pretrained

    return load_pretrained(request.param)


def test_the_trained_models_fast_logits_equal_their_forward(pretrained):
    model, tok = pretrained
    prompt = np.asarray(tok.encode("Once upon a time"))[None]
    ids = model.generate(prompt, 30, temperature=0)
    want = model.forward(ids)[:, prompt.shape[1] - 1 :]
    got = fast_logits(model, ids, prompt.shape[1])
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-5 * np.abs(want).max())


def crop_windows(W, H):
    """``(t, start)``: token ``t`` is predicted from ``ids[start:t]`` (the cropping rule)."""
    return [
        (W, 0),  # the context full for the first time
        (W + 1, W + 1 - H),  # the last H tokens read again
        (W + H, W + 1 - H),
        (2 * W - H + 1, W + 1 - H),  # full again ...
        (2 * W - H + 2, 2 * W + 2 - 2 * H),  # ... and the last H read again
    ]


def test_the_trained_models_write_past_their_context_by_the_rule(pretrained):
    model, tok = pretrained
    W, H = model.max_len, model.max_len // 2
    prompt = np.asarray(tok.encode("Once upon a time"))
    ids = model.generate(prompt, 2 * W - H + 3 - len(prompt), temperature=0)
    assert len(ids) == 2 * W - H + 3
    for t, start in crop_windows(W, H):
        window = ids[start:t]
        assert ids[t] == model.forward(window[None])[0, -1].argmax(), t


@pytest.mark.parametrize("name, make", MODELS[:1] + MODELS[-2:-1], ids=["gpt", "llama"])
def test_a_second_decoder_reuses_the_joined_weights_with_a_cache_of_its_own(name, make):
    model = make(np.float64)
    tokens = np.random.default_rng(4).integers(0, 11, (1, model.max_len))
    first, second = decoder_for(model, 1), decoder_for(model, 1)
    assert second.layers[0][1].W is first.layers[0][1].W  # not joined again
    assert second.cache is not first.cache
    assert second.layers[0][1].qkv_row is not first.layers[0][1].qkv_row
    # interleaved, each gives the logits it gives alone
    alone = fast_logits(model, tokens, 5)
    a, b = [first.prefill(tokens[:, :5])], [second.prefill(tokens[:, :3])]
    for t in range(5, tokens.shape[1]):
        a.append(first.step(tokens[:, t]))
        b.append(second.step(tokens[:, t - 2]))
    np.testing.assert_array_equal(np.stack(a, axis=1), alone)
    np.testing.assert_array_equal(np.stack(b, axis=1), fast_logits(model, tokens[:, :-2], 3))


@pytest.mark.parametrize("change", ["in place", "replaced", "dtype"])
def test_a_changed_weight_builds_the_decoder_again(change):
    model = gpt("learned")
    tokens = np.random.default_rng(5).integers(0, 11, (1, model.max_len))
    before = fast_logits(model, tokens, 5)
    fc1 = model.blocks[1].ffn.fc1
    if change == "in place":
        fc1.params["W"][3, 4] += 0.5
    elif change == "replaced":
        fc1.params["W"] = fc1.params["W"] * 1.5
    else:  # equal values, another dtype: the decoder's arithmetic follows the weights
        for layer in model.layers():
            for k, a in layer.params.items():
                layer.params[k] = a.astype(np.float32)
    after = fast_logits(model, tokens, 5)
    want = model.forward(tokens)[:, 4:]
    assert after.dtype == want.dtype
    np.testing.assert_allclose(after, want, atol=2e-5 if change == "dtype" else 1e-12)
    if change != "dtype":
        assert not np.allclose(after, before)


def test_a_changed_setting_is_not_served_the_old_build():
    # chapter 12's exercise: the rotary layout changed on the blocks, the weights not
    model = llama()
    assert decoder_for(model, 1) is not None  # a build is kept
    for block in model.blocks:
        block.attn.rotary = "half"
    assert decoder_for(model, 1) is None  # no fast path for that layout: the plain one
    for block in model.blocks:
        block.attn.rotary = "interleaved"
    assert decoder_for(model, 1) is not None
    # a norm's eps: built again, and the fast logits follow forward's
    gpt_model = gpt("learned")
    tokens = np.random.default_rng(6).integers(0, 11, (1, gpt_model.max_len))
    fast_logits(gpt_model, tokens, 5)
    gpt_model.blocks[0].ln1.eps = 0.5
    np.testing.assert_allclose(
        fast_logits(gpt_model, tokens, 5), gpt_model.forward(tokens)[:, 4:], atol=1e-12
    )
