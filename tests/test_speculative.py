"""Speculative decoding: greedy output unchanged, sampled output distributed as the target's."""

import numpy as np
import pytest
from scipy import stats

from attention_lib import TinyGPT
from attention_lib.models.kv_variants import build_variant
from attention_lib.models.speculative import (
    accept_drafts,
    speculative_generate,
    speculative_round,
)
from attention_lib.softmax import softmax

V = 6


def _pair(seed=0, n_vocab=V, max_len=40):
    target = TinyGPT(n_vocab, 16, 2, 2, 32, max_len, np.random.default_rng(seed))
    draft = TinyGPT(n_vocab, 8, 2, 1, 16, max_len, np.random.default_rng(seed + 100))
    # Sharper targets make the greedy test meaningful (clear argmaxes).
    target.head.params["W"] *= 3
    return target, draft


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8])
def test_greedy_output_is_the_targets_own(k):
    target, draft = _pair()
    prompt = np.array([1, 4, 2])
    want = target.generate(prompt, 30, temperature=0)
    got, st = speculative_generate(target, draft, prompt, 30, k=k)
    np.testing.assert_array_equal(got, want)
    assert st["target_passes"] <= 30 and st["drafted"] >= st["accepted"]
    assert st["tokens_per_pass"] == pytest.approx(30 / st["target_passes"])


def test_the_target_itself_as_draft_is_always_accepted():
    target, _ = _pair()
    got, st = speculative_generate(target, target, [1, 2], 24, k=4)
    np.testing.assert_array_equal(got, target.generate(np.array([1, 2]), 24, temperature=0))
    assert st["acceptance"] == 1.0
    assert st["target_passes"] == 5  # 4 rounds of 5 tokens, then 4 left: one more round


def test_greedy_with_mla_and_gqa_targets_rewinds_their_caches():
    cfg = dict(d_model=16, n_heads=4, n_layers=2, d_ff=32, max_len=40, seed=3)
    _, draft = _pair()
    for variant in ("mla", "gqa"):
        target = build_variant({**cfg, "variant": variant}, V)
        target.head.params["W"] *= 3
        want = target.generate(np.array([0, 5]), 25, temperature=0)
        got, _ = speculative_generate(target, draft, [0, 5], 25, k=3)
        np.testing.assert_array_equal(got, want)


def _chi_square(counts, probs):
    keep = probs * counts.sum() >= 5  # pool rare cells, as the test needs
    obs = np.append(counts[keep], counts[~keep].sum())
    exp = np.append(probs[keep], probs[~keep].sum()) * counts.sum()
    obs, exp = obs[exp > 0], exp[exp > 0]
    return stats.chisquare(obs, exp).pvalue


@pytest.mark.parametrize("k", [1, 3])
def test_sampled_tokens_follow_the_targets_distribution(k):
    """12,000 rounds from one prefix: the first two tokens written, against the target's p."""
    target, draft = _pair(seed=1)
    target.head.params["W"] /= 3  # a broad target, so every cell is visited
    rng = np.random.default_rng(7)
    n, T = 12_000, 1.0
    prefix = np.tile([2, 3, 1], (n, 1))
    drafted, acc, nxt = speculative_round(target, draft, prefix, k, T, rng)
    first = np.where(acc >= 1, drafted[:, 0], nxt)
    second = np.where(acc >= 2, drafted[:, min(1, k - 1)], nxt)
    p1 = softmax(target.forward(prefix[:1])[0, -1].astype(np.float64) / T)
    assert _chi_square(np.bincount(first, minlength=V), p1) > 1e-3
    # Where the first token was a kept draft, the round wrote a second token,
    # which must follow the target's p(. | a) whatever happened next.
    two = acc >= 1
    ctx = np.column_stack([prefix[:V], np.arange(V)])
    cond = softmax(target.forward(ctx)[:, -1].astype(np.float64) / T, axis=-1)
    checked = 0
    for a in range(V):
        rows = first[two] == a
        if rows.sum() > 200:
            counts = np.bincount(second[two][rows], minlength=V)
            assert _chi_square(counts, cond[a]) > 1e-4, a
            checked += 1
    assert checked >= 3


def test_sampled_distribution_of_a_wrong_rule_is_caught():
    """The same test fails when the residual is replaced by the target's p (a common slip)."""
    target, draft = _pair(seed=1)
    target.head.params["W"] /= 3
    rng = np.random.default_rng(8)
    n = 20_000
    prefix = np.tile([2, 3, 1], (n, 1))
    logits_t = target.forward(prefix[:1])[0, -1].astype(np.float64)
    logits_d = draft.forward(prefix[:1])[0, -1].astype(np.float64)
    p, q = softmax(logits_t), softmax(logits_d)
    x = rng.choice(V, size=n, p=q)
    keep = rng.random(n) * q[x] < p[x]
    wrong = np.where(keep, x, rng.choice(V, size=n, p=p))  # resampling from p, not p - q
    assert _chi_square(np.bincount(wrong, minlength=V), p) < 1e-6
    acc, nxt = accept_drafts(
        np.tile(p, (n, 2, 1)), np.tile(q, (n, 1, 1)), x[:, None], np.random.default_rng(9)
    )
    right = np.where(acc >= 1, x, nxt)
    assert _chi_square(np.bincount(right, minlength=V), p) > 1e-3


def test_sampled_generation_is_seeded_and_in_range():
    target, draft = _pair()
    a, st = speculative_generate(
        target, draft, [1], 20, k=3, temperature=0.8, rng=np.random.default_rng(0)
    )
    b, _ = speculative_generate(
        target, draft, [1], 20, k=3, temperature=0.8, rng=np.random.default_rng(0)
    )
    np.testing.assert_array_equal(a, b)
    assert len(a) == 21 and a.min() >= 0 and a.max() < V
    assert 0 <= st["acceptance"] <= 1


def test_bad_input_is_named_before_any_work():
    target, draft = _pair()
    other = TinyGPT(V + 1, 8, 2, 1, 16, 40, np.random.default_rng(0))
    with pytest.raises(
        ValueError, match="draft model has a vocabulary of 7 tokens but the target has 6"
    ):
        speculative_generate(target, other, [1], 5)
    for k in (0, -2):
        with pytest.raises(
            ValueError, match=r"k \(tokens the draft proposes per round\) must be a positive"
        ):
            speculative_generate(target, draft, [1], 5, k=k)
    with pytest.raises(TypeError, match="k"):
        speculative_generate(target, draft, [1], 5, k=2.0)
    with pytest.raises(ValueError, match="needs rng"):
        speculative_generate(target, draft, [1], 5, temperature=1.0)
    with pytest.raises(ValueError, match="exceeds max_len = 40"):
        speculative_generate(target, draft, [1] * 30, 20)
    with pytest.raises(ValueError, match=r"integers in \[0, 6\)"):
        speculative_generate(target, draft, [9], 5)
    with pytest.raises(ValueError, match="non-empty 1-D prompt"):
        speculative_generate(target, draft, np.array([], dtype=int), 5)


def test_command_line_draft_gives_the_same_greedy_text():
    import io

    from attention_lib.generate import main

    args = ["--model", "shakespeare", "--prompt", "ROMEO:", "--max-new-tokens", "150"]
    outs = []
    for extra in ([], ["--draft", "one-layer"]):
        out = io.StringIO()
        assert main(args + ["--temperature", "0"] + extra, stdout=out) == 0
        outs.append(out.getvalue())
    assert outs[0] == outs[1] and len(outs[0]) > 150  # past max_len: the window slides


def test_command_line_draft_errors(capsys):
    import io

    from attention_lib.generate import main

    base = ["--prompt", "Once", "--max-new-tokens", "5"]
    for argv, match in (
        (
            ["--model", "stories260k", "--draft", "one-layer"],
            "vocabulary of 65 tokens but the target has 512",
        ),
        (["--model", "shakespeare", "--draft", "huge"], "draft must be one of one-layer"),
        (["--model", "shakespeare", "--draft", "one-layer", "--top-k", "3"], "drop --top-k"),
    ):
        with pytest.raises(SystemExit) as info:
            main(argv + base, stdout=io.StringIO())
        assert info.value.code == 2
        assert match in capsys.readouterr().err


def test_prompt_lookup_copies_what_followed_the_latest_match():
    from attention_lib.models.speculative import PromptLookup

    look = PromptLookup(9, ngram=2)
    seq = np.array([[5, 6, 7, 1, 5, 6, 8, 2, 5, 6]])
    np.testing.assert_array_equal(look.propose(seq, 2), [[8, 2]])  # the later "5 6"
    np.testing.assert_array_equal(look.propose(seq, 5), [[8, 2, 5, 6, 6]])  # padded
    np.testing.assert_array_equal(look.propose(np.array([[1, 2, 3]]), 2), [[3, 3]])  # no match


def test_prompt_lookup_as_draft_keeps_greedy_and_sampled_outputs_exact():
    from attention_lib.models.speculative import PromptLookup

    target, _ = _pair()
    look = PromptLookup(V)
    want = target.generate(np.array([1, 4, 2]), 30, temperature=0)
    got, _ = speculative_generate(target, look, [1, 4, 2], 30, k=4)
    np.testing.assert_array_equal(got, want)
    target.head.params["W"] /= 3
    n = 12_000
    prefix = np.tile([2, 3, 2, 3, 1, 2], (n, 1))  # the lookup proposes "3 1 2"
    drafted, acc, nxt = speculative_round(target, look, prefix, 3, 1.0, np.random.default_rng(3))
    first = np.where(acc >= 1, drafted[:, 0], nxt)
    p1 = softmax(target.forward(prefix[:1])[0, -1].astype(np.float64))
    assert (drafted[:, 0] == 3).all()
    assert _chi_square(np.bincount(first, minlength=V), p1) > 1e-3
    with pytest.raises(ValueError, match="vocabulary of 7 tokens but the target has 6"):
        speculative_generate(target, PromptLookup(V + 1), [1], 5)


def _llama(n_layers=4):
    from attention_lib.models.llama import Llama

    return Llama(
        n_vocab=17, d_model=16, n_layers=n_layers, n_heads=4, n_kv_heads=2, d_ff=24,
        max_len=64, rng=np.random.default_rng(5),
    )  # fmt: skip


@pytest.mark.parametrize("n_layers, k", [(1, 1), (1, 4), (2, 3), (3, 6)])
def test_self_draft_keeps_the_targets_greedy_output(n_layers, k):
    from attention_lib.models.speculative import SelfDraft

    target = _llama()
    prompt = np.array([1, 5, 2, 9, 5, 2])
    out, stats = speculative_generate(target, SelfDraft(target, n_layers), prompt, 30, k=k)
    np.testing.assert_array_equal(out, target.generate(prompt, 30, temperature=0))
    assert stats["target_passes"] <= 30 and stats["drafted"] > 0


def test_self_draft_is_the_targets_first_blocks_norm_and_tied_head():
    from attention_lib.models.llama import Llama
    from attention_lib.models.speculative import SelfDraft

    target = _llama()
    draft = SelfDraft(target, 2)
    short = Llama(17, 16, 2, 4, 2, 24, 64, np.random.default_rng(9))  # other weights, then:
    short.tok, short.blocks, short.norm = target.tok, target.blocks[:2], target.norm
    tokens = np.array([[3, 1, 4, 1, 5, 9, 2]])
    cache = draft.new_cache()
    got = [draft.forward(tokens[:, :4], cache)[:, 0]]
    got += [draft.forward(tokens[:, t : t + 1], cache)[:, 0] for t in range(4, 7)]
    want = short.forward(tokens)[:, 3:]
    np.testing.assert_allclose(np.stack(got, 1), want, rtol=0, atol=2e-5 * np.abs(want).max())
    assert len(target.blocks) == 4  # the target is untouched


@pytest.mark.parametrize("n_layers", [0, 4, 2.5])
def test_self_draft_of_a_wrong_depth_is_refused(n_layers):
    from attention_lib.models.speculative import SelfDraft

    with pytest.raises((ValueError, TypeError), match="n_layers"):
        SelfDraft(_llama(), n_layers)
