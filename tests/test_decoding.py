"""Decoding: temperature and sampling edge cases, per-sentence limits, tables' percentages."""

import numpy as np
import pytest

from attention_lib import TinyGPT
from attention_lib.models.decoding import rnnsearch_beam_search
from attention_lib.models.gpt import pick_next_token
from attention_lib.models.seq2seq import RNNsearch
from attention_lib.models.transformer import Transformer
from attention_lib.presentation.tables import format_table
from attention_lib.sampling import inverse_cdf, sampling_probabilities


class Draw:
    """A stand-in for a Generator whose ``random`` always returns ``u``."""

    def __init__(self, u):
        self.u = u

    def random(self, shape):
        return np.full(shape, self.u)


def small_gpt(dtype_seed=0):
    return TinyGPT(
        n_vocab=50, d_model=16, n_heads=2, n_layers=1, d_ff=32, max_len=12,
        rng=np.random.default_rng(dtype_seed),
    )  # fmt: skip


@pytest.mark.parametrize("temperature", [1e-320, 5e-324, 1e-310])
def test_a_subnormal_temperature_is_refused_naming_temperature(temperature):
    model = small_gpt()
    with pytest.raises(ValueError, match="temperature = .* is too small"):
        model.generate(np.array([1, 2]), 3, temperature=temperature, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="temperature"):
        sampling_probabilities(np.array([1.0, 2.0, 3.0]), temperature)


def test_a_small_but_safe_temperature_is_greedy_in_effect():
    model = small_gpt()
    greedy = model.generate(np.array([1, 2]), 5, temperature=0)
    cold = model.generate(np.array([1, 2]), 5, temperature=1e-6, rng=np.random.default_rng(0))
    np.testing.assert_array_equal(cold, greedy)


@pytest.mark.parametrize("u", [0.0, 1e-300, 0.5, 0.9999999, 0.9999999999999999])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_top_k_sampling_never_returns_a_masked_token_whatever_the_draw(u, dtype):
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(4, 50)).astype(dtype)
    top5 = np.argsort(-logits, axis=-1)[:, :5]
    got = pick_next_token(logits, 1.0, 5, None, Draw(u))
    for row, tok in zip(top5, got):
        assert tok in row
    p = sampling_probabilities(logits, 1.0, top_k=5)
    assert (p[np.arange(4), got] > 0).all()


@pytest.mark.parametrize("u", [0.0, 0.9999999999999999])
def test_top_p_sampling_never_returns_a_masked_token_at_the_boundary_draws(u):
    logits = np.log(np.array([[0.05, 0.5, 0.3, 0.15]]))
    got = pick_next_token(logits, 1.0, None, 0.7, Draw(u))  # keeps 0.5 and 0.3
    assert int(got[0]) in (1, 2)


def test_inverse_cdf_when_rounding_leaves_the_total_below_the_draw():
    # The cumulative sum reaches 1 - 2e-16 < u: the last token of positive probability.
    p = np.array([[0.0, 0.3, 0.7 - 2e-16, 0.0, 0.0]])
    assert int(inverse_cdf(p, np.array([[0.9999999999999999]]))[0]) == 2
    assert int(inverse_cdf(p, np.array([[0.0]]))[0]) == 1


def test_format_table_prints_a_whole_number_under_a_percentage_format_as_a_percentage():
    out = format_table([(1, 0.5, 3)], ["a", "b", "n"], [".1%", ".1%", ".2f"])
    assert out.splitlines()[2].split() == ["100.0%", "50.0%", "3"]


# -- a sentence's translation does not depend on its batch --------------------


def _batch(rows):
    S = max(len(r) for r in rows)
    src = np.zeros((len(rows), S), dtype=np.int64)
    for i, r in enumerate(rows):
        src[i, : len(r)] = r
    return src, np.array([len(r) for r in rows])


SHORT, LONG = [5, 6, 7], [3, 4, 5, 6, 7, 8, 9, 10, 11, 12]


def _never_ends(model_kind):
    """A random model (it rarely says <eos>, so it runs to its length limit)."""
    if model_kind == "transformer":
        return Transformer(n_vocab=17, d_model=16, n_heads=2, d_ff=24, n_layers=1,
                           max_len=64, seed=4, dtype=np.float64)  # fmt: skip
    return RNNsearch(n_src=17, n_tgt=17, emb=8, hidden=12, attn=8, seed=4, dtype=np.float64)


@pytest.mark.parametrize("beam", [None, 1, 3])
@pytest.mark.parametrize("kind", ["transformer", "rnnsearch"])
def test_a_sentence_translates_the_same_alone_and_beside_a_longer_one(kind, beam):
    model = _never_ends(kind)

    def run(rows):
        src, lengths = _batch(rows)
        if beam is None:
            return (
                model.greedy(src, lengths)
                if kind == "transformer"
                else model.translate(src, lengths)[0]
            )
        if kind == "transformer":
            return model.beam_search(src, lengths, beam=beam)
        return rnnsearch_beam_search(model, src, lengths, beam=beam)

    alone = run([SHORT])[0]
    beside = run([SHORT, LONG])
    assert beside[0] == alone
    assert len(alone) <= 2 * len(SHORT) + 10
    assert run([LONG])[0] == beside[1]
