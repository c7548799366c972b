"""RNNsearch's one-step decoder (models/rnn_decoder.py) against the layers' own steps."""

import numpy as np
import pytest

from attention_lib.models import RNNencdec, RNNsearch
from attention_lib.models.decoding import beam_search, rnnsearch_beam_search
from attention_lib.models.rnn_decoder import RNNsearchDecoder
from attention_lib.softmax import log_softmax

SRC = np.array([[3, 4, 5, 6, 7], [6, 3, 0, 0, 0], [5, 5, 4, 8, 0]])
LENGTHS = np.array([5, 2, 4])


def model_of(cls, dtype=np.float64):
    return cls(n_src=11, n_tgt=13, emb=6, hidden=8, attn=7, seed=3, dtype=dtype)


class PlainSteps:
    """The decoder as it was before the fast path: the layers' ``step`` methods."""

    def __init__(self, model, H, mask, s):
        model._start_context(H, mask)
        self.model, self.s = model, s

    def logits(self, y):
        m = self.model
        c, self.alpha, _ = m._context(self.s)
        ey = m.tgt_emb.params["E"][y]
        self.s, _ = m.dec.step(np.concatenate([ey, c], axis=-1), self.s)
        return np.concatenate([self.s, c, ey], axis=-1) @ m.out.params["W"] + m.out.params["b"]

    def reorder(self, idx):
        self.s = self.s[idx]


def plain_beam_search(model, src, lengths, K):
    """Beam search over :class:`PlainSteps` (the library's before the fast decoder)."""
    B = len(src)
    H, mask, s = model.encode(src, lengths)
    rows = np.repeat(np.arange(B), K)
    if not model.attention:
        model._summary = model._enc[1][rows]
        steps = PlainSteps.__new__(PlainSteps)
        steps.model, steps.s = model, s[rows]
    else:
        steps = PlainSteps(model, H[rows], mask[rows], s[rows])
    return beam_search(
        lambda y, t: log_softmax(steps.logits(y)), steps.reorder, B, K, 2 * lengths + 10
    )


@pytest.mark.parametrize("dtype, atol", [(np.float64, 1e-12), (np.float32, 2e-5)])
@pytest.mark.parametrize("cls", [RNNsearch, RNNencdec])
def test_fast_logits_and_weights_equal_the_plain_steps_at_every_step(cls, dtype, atol):
    model = model_of(cls, dtype)
    H, mask, s = model.encode(SRC, LENGTHS)
    fast = RNNsearchDecoder(model, H, mask, s, summary=model._enc[1])
    plain = PlainSteps(model, H, mask, s)
    for y in np.random.default_rng(0).integers(1, 13, (8, 3)):  # teacher-forced words
        want, got = plain.logits(y), fast.logits(y)
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=0, atol=atol * np.abs(want).max())
        np.testing.assert_allclose(fast.s, plain.s, rtol=0, atol=atol)
        if cls is RNNsearch:
            np.testing.assert_allclose(fast.alpha, plain.alpha, rtol=0, atol=atol)
            assert (fast.alpha[~mask] == 0).all()  # padding gets no weight


@pytest.mark.parametrize("cls", [RNNsearch, RNNencdec])
def test_greedy_and_beam_search_give_the_plain_steps_outputs(cls):
    model = model_of(cls)
    H, mask, s = model.encode(SRC, LENGTHS)
    plain = PlainSteps(model, H, mask, s)
    y, want = np.full(3, 1), []
    for _ in range(12):
        y = plain.logits(y).argmax(-1)
        want.append(y)
    ids, weights = model.translate(SRC, LENGTHS, max_len=12)
    assert weights.shape[0] == 3 and weights.shape[2] == SRC.shape[1]
    for b, row in enumerate(np.stack(want, 1).tolist()):  # translate's rule: up to <eos>
        assert ids[b] == (row[: row.index(2)] if 2 in row else [t for t in row if t != 0])
    for K in (1, 3):
        fast = rnnsearch_beam_search(model, SRC, LENGTHS, beam=K)
        assert fast == plain_beam_search(model, SRC, LENGTHS, K)


def test_a_wrong_state_is_caught(monkeypatch):
    """The comparison can fail: a decoder that keeps the state of the wrong hypotheses."""
    model = model_of(RNNsearch)
    want = plain_beam_search(model, SRC, LENGTHS, 3)
    monkeypatch.setattr(RNNsearchDecoder, "reorder", lambda self, idx: None)
    assert rnnsearch_beam_search(model, SRC, LENGTHS, beam=3) != want


@pytest.mark.parametrize("mode, beam", [("greedy", None), ("beam", 4)])
def test_the_trained_translator_writes_its_committed_test_translations(mode, beam):
    from attention_lib.train.translation import checkpoint_dir, load_references
    from attention_lib.translate import load_model, translate_sentences

    model, tok = load_model("rnnsearch")
    sources = load_references("test")[0][:64]
    lines = (checkpoint_dir() / f"rnnsearch_test_{mode}.txt").read_text(encoding="utf8")
    assert translate_sentences(model, tok, sources, beam=beam) == lines.split("\n")[:64]
