"""The table draft distilled from the target (attention_lib.models.ngram_draft)."""

import json
from collections import Counter

import numpy as np
import pytest

from attention_lib import TinyGPT
from attention_lib.models.ngram_draft import NgramDraft, build_tables, distill_labels
from attention_lib.models.speculative import speculative_generate


def _brute_next(ids, labels, order, ctx):
    """The most frequent label after the longest context of ``ctx`` seen in ``ids``."""
    for n in range(min(order, len(ctx)), 0, -1):
        tail = tuple(ctx[-n:])
        seen = Counter(
            int(labels[t])
            for t in range(n - 1, len(ids))
            if tuple(ids[t - n + 1 : t + 1]) == tail and labels[t] >= 0
        )
        if seen:
            top = max(seen.values())
            return min(tok for tok, c in seen.items() if c == top)
    return None


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pruned_tables_predict_what_counting_predicts(seed):
    rng = np.random.default_rng(seed)
    V, order = 4, 3
    ids = rng.integers(0, V, 400)
    labels = np.where(rng.random(400) < 0.1, -1, rng.integers(0, V, 400))
    draft = NgramDraft(build_tables(ids, labels, order, V), V)
    for _ in range(300):
        ctx = [int(t) for t in rng.integers(0, V, rng.integers(1, 6))]
        want = _brute_next(ids, labels, order, ctx)
        assert draft._next(ctx) == (draft.fallback if want is None else want), ctx


def test_propose_continues_from_its_own_proposals_and_round_trips(tmp_path):
    ids = np.array([0, 1, 2, 3] * 5)
    draft = NgramDraft(build_tables(ids[:-1], ids[1:], 2, 4), 4)
    np.testing.assert_array_equal(
        draft.propose(np.array([[3, 0], [1, 2]]), 5), [[1, 2, 3, 0, 1], [3, 0, 1, 2, 3]]
    )
    draft.save(tmp_path / "d.npz", {"order": 2})
    again = NgramDraft.load(tmp_path / "d.npz")
    np.testing.assert_array_equal(
        again.propose(np.array([[2]]), 6), draft.propose(np.array([[2]]), 6)
    )
    with np.load(tmp_path / "d.npz", allow_pickle=False) as f:
        assert json.loads(str(f["config"])) == {"order": 2, "n_vocab": 4}


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="overflows a 64-bit context key"):
        build_tables(np.zeros(10, int), np.zeros(10, int), 12, 65)
    with pytest.raises(ValueError, match="1-D of one length"):
        build_tables(np.zeros(10, int), np.zeros(9, int), 2, 4)
    with pytest.raises(ValueError, match="order"):
        build_tables(np.zeros(10, int), np.zeros(10, int), 0, 4)
    with pytest.raises(ValueError, match="at least the order-1 table"):
        NgramDraft([], 4)


def test_distilled_labels_are_the_targets_argmax():
    model = TinyGPT(5, 16, 2, 1, 32, 16, np.random.default_rng(0))
    ids = np.random.default_rng(1).integers(0, 5, 50)
    labels = distill_labels(model, ids, window=16, keep=8, batch=2)
    assert (labels[:15] >= 0).all() and labels[-1] == -1
    for t in (3, 15, 20, 30, 47):  # each from its window's last 8, the first window whole
        start = 0 if t < 16 else (t - 8) // 8 * 8
        want = model.forward(ids[None, start : start + 16])[0, t - start].argmax()
        assert labels[t] == want, t


@pytest.mark.parametrize("k", [1, 3, 7])
def test_as_a_draft_greedy_output_is_the_targets_own(k):
    target = TinyGPT(6, 16, 2, 2, 32, 60, np.random.default_rng(0))
    target.head.params["W"] *= 3
    ids = target.generate(np.array([1, 2]), 40, temperature=0)
    draft = NgramDraft(build_tables(ids[:-1], ids[1:], 3, 6), 6)
    want = target.generate(np.array([2, 5, 1]), 50, temperature=0)
    got, st = speculative_generate(target, draft, [2, 5, 1], 50, k=k)
    np.testing.assert_array_equal(got, want)
    assert st["accepted"] <= st["drafted"]
    a, _ = speculative_generate(
        target, draft, [2], 30, k=k, temperature=0.9, rng=np.random.default_rng(3)
    )
    b, _ = speculative_generate(
        target, draft, [2], 30, k=k, temperature=0.9, rng=np.random.default_rng(3)
    )
    np.testing.assert_array_equal(a, b)


def test_committed_draft_agrees_with_the_shakespeare_model_and_keeps_its_text():
    from attention_lib.models.pretrained import load_pretrained
    from attention_lib.models.speculative import load_draft
    from attention_lib.models.kv_variants import serving_dir

    target, tok = load_pretrained("shakespeare")
    draft = load_draft("ngram", 65)
    entry = json.loads((serving_dir() / "ngram_draft.json").read_text())
    assert entry["evaluation"]["top1_agreement_with_target"] >= 0.7
    prompt = np.array(tok.encode("ROMEO:\nI will"))
    want = target.generate(prompt, 100, temperature=0)
    got, st = speculative_generate(target, draft, prompt, 100, k=4)
    np.testing.assert_array_equal(got, want)
    assert st["acceptance"] > 0.5 and st["tokens_per_pass"] > 2


def test_command_line_ngram_draft_gives_the_same_greedy_text():
    import io

    from attention_lib.generate import main

    args = ["--model", "shakespeare", "--prompt", "JULIET:", "--max-new-tokens", "150"]
    outs = []
    for extra in ([], ["--draft", "ngram"]):
        out = io.StringIO()
        assert main(args + ["--temperature", "0"] + extra, stdout=out) == 0
        outs.append(out.getvalue())
    assert outs[0] == outs[1] and len(outs[0]) > 150


def test_prefill_rows_gives_every_positions_logits_as_forward():
    from attention_lib.models.kv_cache import decoder_for

    model = TinyGPT(7, 16, 2, 2, 32, 30, np.random.default_rng(4)).train(False)
    ids = np.random.default_rng(5).integers(0, 7, (1, 12))
    want = model.forward(ids)
    dec = decoder_for(model, 1)
    first = dec.prefill(ids[:, :5])
    rows = dec.prefill_rows(ids[:, 5:])
    assert rows.shape == (1, 7, 7) and first.shape == (1, 7)
    np.testing.assert_allclose(rows[0], want[0, 5:], rtol=1e-4, atol=1e-5)
    dec.cache.length = 8  # rewound: the next rows continue from position 8
    np.testing.assert_allclose(dec.prefill_rows(ids[:, 8:])[0], want[0, 8:], rtol=1e-4, atol=1e-5)


def test_the_targets_check_runs_on_its_fast_decoder(monkeypatch):
    target = TinyGPT(6, 16, 2, 2, 32, 60, np.random.default_rng(0))
    target.head.params["W"] *= 3
    want = target.generate(np.array([3, 1]), 40, temperature=0)
    draft = NgramDraft(build_tables(want[:-1], want[1:], 2, 6), 6)

    def refuse(*args, **kwargs):
        raise AssertionError("speculative decoding ran TinyGPT.forward")

    monkeypatch.setattr(TinyGPT, "forward", refuse)
    got, st = speculative_generate(target, draft, [3, 1], 40, k=5)
    np.testing.assert_array_equal(got, want)
    assert st["tokens_per_pass"] > 3  # the draft copied the target's own text


def _tables_by_counting(ids, labels, order):
    """build_tables' full tables (before dropping), by counting with a dict."""
    from collections import Counter

    out = []
    for n in range(1, order + 1):
        counts = {}
        for t in range(n - 1, len(ids)):
            if labels[t] >= 0:
                counts.setdefault(tuple(ids[t - n + 1 : t + 1]), Counter())[labels[t]] += 1
        out.append({ctx: min(c, key=lambda k: (-c[k], k)) for ctx, c in counts.items()})
    return out


@pytest.mark.parametrize("n_vocab, order", [(1000, 6), (3, 38)])
def test_tables_at_the_longest_order_are_counted_right(n_vocab, order):
    """A context key times n_vocab overflowed 64 bits near the longest order: the counts
    were of wrong keys (an IndexError or silently wrong tables). Every kept entry's label
    is the most frequent one after its context, counted by hand."""
    from attention_lib.models.ngram_draft import build_tables, max_order

    assert order <= max_order(n_vocab)
    rng = np.random.default_rng(0)
    ids = rng.integers(0, n_vocab, 3000 if n_vocab > 3 else 20000)
    ids[1000:1400] = ids[:400]  # repeats, so long contexts recur
    labels = np.r_[ids[1:], -1]
    tables = build_tables(ids, labels, order, n_vocab)
    want = _tables_by_counting(ids.tolist(), labels.tolist(), order)
    for n, ((keys, best), full) in enumerate(zip(tables, want), start=1):
        digits = [(keys // n_vocab**j) % n_vocab for j in range(n - 1, -1, -1)]
        for ctx, label in zip(zip(*digits), best):
            assert full[tuple(int(x) for x in ctx)] == label


def test_an_order_longer_than_the_text_is_refused():
    from attention_lib.models.ngram_draft import build_tables

    ids = np.array([1, 2, 0])
    with pytest.raises(ValueError, match="order 5 needs at least 5 tokens, got 3"):
        build_tables(ids, np.r_[ids[1:], -1], 5, 3)
