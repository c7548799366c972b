"""IBM Model 1 by EM (attention_lib.align.em) and the command line's em method."""

import io
import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_lib.align import (
    DEFAULT_ITERATIONS,
    DEFAULT_NULL_PROB,
    DEFAULT_PSEUDO_COUNT,
    DEFAULT_TEMPERATURE,
    DEFAULT_TENSION,
    EMAligner,
    Model1,
    alignment_scores,
    load_alignment_dev,
    main,
    read_pharaoh,
    split_lines,
    tune_em,
)


@pytest.fixture(scope="module")
def dev():
    return load_alignment_dev()


# ------------------------------------------------------- by hand
# Corpus: English "the house" / French "la maison", and "the" / "la".
# Ids: the = 0, house = 1; la = 0, maison = 1. No NULL (p0 = 0), no prior.
# p(i | j) = 1/m, so p(f | e) = prod_j (1/m) sum_i t(f_j | e_i).
#
# Start: t uniform over the French words each English word meets:
#   t(la|the) = t(maison|the) = t(la|house) = t(maison|house) = 1/2.
# Likelihood: pair 1: la (1/2)(1/2 + 1/2) = 1/2, maison the same; pair 2:
#   la 1 * 1/2. Product 1/8.
# E-step: pair 1: la attends 1/2, 1/2 to the, house; maison 1/2, 1/2.
#   Pair 2: la attends 1 to the.
# Counts: c(the, la) = 1/2 + 1 = 3/2, c(the, maison) = 1/2,
#   c(house, la) = 1/2, c(house, maison) = 1/2.
# M-step: t(la|the) = (3/2) / 2 = 3/4, t(maison|the) = 1/4,
#   t(la|house) = t(maison|house) = 1/2.
# Likelihood: pair 1: la (1/2)(3/4 + 1/2) = 5/8, maison (1/2)(1/4 + 1/2) = 3/8;
#   pair 2: la 3/4. Product 45/256.
# E-step 2: la attends (3/4)/(5/4) = 3/5 to the, 2/5 to house; maison
#   (1/4)/(3/4) = 1/3 to the, 2/3 to house; pair 2: 1.
# Counts: c(the, la) = 8/5, c(the, maison) = 1/3, c(house, la) = 2/5,
#   c(house, maison) = 2/3.
# M-step: t(la|the) = (8/5)/(29/15) = 24/29, t(maison|the) = 5/29,
#   t(la|house) = (2/5)/(16/15) = 3/8, t(maison|house) = 5/8.
def hand_model(**kwargs):
    return Model1([[0, 1], [0]], [[0, 1], [0]], **kwargs)


def test_em_on_two_sentences_matches_the_hand_computation():
    model = hand_model()
    np.testing.assert_allclose(model.table()[:2], [[1 / 2, 1 / 2], [1 / 2, 1 / 2]])
    assert model.log_likelihood() == pytest.approx(math.log(1 / 8))
    np.testing.assert_allclose(model.posteriors(0)[:, 1:], [[1 / 2, 1 / 2], [1 / 2, 1 / 2]])
    np.testing.assert_allclose(model.posteriors(1)[:, 1:], [[1.0]])

    model.step()
    np.testing.assert_allclose(model.table()[:2], [[3 / 4, 1 / 4], [1 / 2, 1 / 2]])
    assert model.log_likelihood() == pytest.approx(math.log(45 / 256))
    np.testing.assert_allclose(model.posteriors(0)[:, 1:], [[3 / 5, 2 / 5], [1 / 3, 2 / 3]])

    model.step()
    np.testing.assert_allclose(model.table()[:2], [[24 / 29, 5 / 29], [3 / 8, 5 / 8]])
    assert model.iterations == 2


def test_e_step_counts_match_the_hand_computation():
    np.testing.assert_allclose(
        sorted(hand_model().e_step()[:4]), sorted([3 / 2, 1 / 2, 1 / 2, 1 / 2])
    )


def test_pseudo_counts_pull_the_table_back_to_the_start():
    # alpha = 2, t0 uniform: t(la|the) = (3/2 + 2 * 1/2) / (2 + 2) = 5/8
    model = hand_model(pseudo_count=2.0)
    model.step()
    np.testing.assert_allclose(model.table()[0], [5 / 8, 3 / 8])


def test_init_scores_give_a_softmax_starting_table():
    # scores the-la 1, the-maison 0, house-* 0: t0(la|the) = e / (e + 1)
    model = hand_model(init_scores=lambda e, f: ((e == 0) & (f == 0)).astype(float))
    np.testing.assert_allclose(model.table()[0], [math.e / (math.e + 1), 1 / (math.e + 1)])
    np.testing.assert_allclose(model.table()[1], [1 / 2, 1 / 2])


def test_null_and_the_diagonal_prior_by_hand():
    # One pair, 2 English and 1 French word, t uniform (1/1 for the only
    # French word). p0 = 0.2, kappa = ln 3: French j = 0 is at distance 0
    # from i = 0 and 1/2 from i = 1, prior weights 1 and 3^(-1/2).
    model = Model1([[0, 1]], [[0]], tension=math.log(3), null_prob=0.2)
    w = model.posteriors(0)[0]
    near, far = 1.0, 3**-0.5
    expected = [0.2, 0.8 * near / (near + far), 0.8 * far / (near + far)]
    np.testing.assert_allclose(w, expected)
    assert model.decode(0) == {(0, 0)}


# --------------------------------------------------- properties
sentences = st.lists(st.integers(0, 4), min_size=1, max_size=5)
corpora = st.integers(1, 5).flatmap(
    lambda n: st.tuples(
        st.lists(sentences, min_size=n, max_size=n), st.lists(sentences, min_size=n, max_size=n)
    )
)


@settings(max_examples=60, deadline=None)
@given(corpora, st.sampled_from([0.0, 1.0, 3.0]), st.sampled_from([0.0, 0.1, 0.5]))
def test_posterior_rows_sum_to_one(corpus, tension, null_prob):
    model = Model1(
        *corpus, tension=tension, null_prob=null_prob, init_scores=lambda e, f: np.cos(e + 2.0 * f)
    )
    model.step()
    for k in range(len(corpus[0])):
        w = model.posteriors(k)
        assert w.shape == (len(corpus[1][k]), len(corpus[0][k]) + 1)
        assert (w >= 0).all()
        np.testing.assert_allclose(w.sum(axis=1), 1.0)


@settings(max_examples=60, deadline=None)
@given(corpora, st.sampled_from([0.0, 2.0]), st.sampled_from([0.0, 0.2]), st.integers(0, 1000))
def test_no_em_iteration_lowers_the_likelihood(corpus, tension, null_prob, seed):
    scores = np.random.default_rng(seed).normal(size=(5, 5)) * 3
    model = Model1(
        *corpus, tension=tension, null_prob=null_prob, init_scores=lambda e, f: scores[e, f]
    )
    before = model.log_likelihood()
    for _ in range(4):
        model.step()
        after = model.log_likelihood()
        assert after >= before - 1e-9 * abs(before)
        before = after


@settings(max_examples=40, deadline=None)
@given(corpora, st.sampled_from([0.5, 5.0]), st.integers(0, 1000))
def test_with_pseudo_counts_em_never_lowers_likelihood_plus_prior(corpus, alpha, seed):
    scores = np.random.default_rng(seed).normal(size=(5, 5)) * 3
    model = Model1(*corpus, tension=1.0, pseudo_count=alpha, init_scores=lambda e, f: scores[e, f])
    before = model.log_likelihood() + model.log_prior_of_table()
    for _ in range(4):
        model.step()
        after = model.log_likelihood() + model.log_prior_of_table()
        assert after >= before - 1e-9 * abs(before)
        before = after


def test_batched_e_step_equals_one_pair_at_a_time():
    rng = np.random.default_rng(3)
    source = [rng.integers(0, 30, size=rng.integers(1, 12)) for _ in range(40)]
    target = [rng.integers(0, 30, size=rng.integers(1, 12)) for _ in range(40)]
    kwargs = dict(tension=2.0, null_prob=0.1, init_scores=lambda e, f: np.sin(e * f))
    big, small = (
        Model1(source, target, **kwargs),
        Model1(source, target, max_batch_cells=1, **kwargs),
    )
    assert len(small.cells.batches) == 40 and len(big.cells.batches) < 40
    np.testing.assert_allclose(big.e_step(), small.e_step())
    big.step()
    small.step()
    assert big.links() == small.links() == [big.decode(k) for k in range(40)]


def test_empty_sides_give_no_links_and_no_rows():
    model = Model1([[0, 1], [], [1]], [[0], [0, 1], []], null_prob=0.1)
    model.step()
    assert model.links()[1:] == [set(), set()]
    assert model.posteriors(1).shape[0] == 0


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(tension=-1.0), "tension"),
        (dict(null_prob=1.0), "null_prob"),
        (dict(pseudo_count=float("nan")), "pseudo_count"),
        (dict(init_scores=lambda e, f: np.full(len(e), np.inf)), "init_scores"),
    ],
)
def test_model1_rejects_bad_settings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Model1([[0, 1]], [[0]], **kwargs)


def test_model1_rejects_negative_ids_and_unpaired_corpora():
    with pytest.raises(ValueError, match="word ids >= 0"):
        Model1([[0, -1]], [[0]])
    with pytest.raises(ValueError, match="source has 2 sentences but target has 1"):
        Model1([[0], [1]], [[0]])


# ------------------------------------------------- on the dev set
def test_default_settings_are_the_ones_tuning_chooses_and_loo_meets_the_goal(dev):
    tuning = tune_em(dev)
    assert tuning.best == (
        DEFAULT_ITERATIONS,
        DEFAULT_TENSION,
        DEFAULT_TEMPERATURE,
        DEFAULT_PSEUDO_COUNT,
        DEFAULT_NULL_PROB,
    )
    assert tuning.loo.aer >= tuning.scores[tuning.best].aer
    assert tuning.loo.aer <= 0.15  # the goal


def test_em_beats_the_attention_intersection_and_iteration_zero(dev):
    english, french = [p.english for p in dev], [p.french for p in dev]
    sure, possible = [p.sure for p in dev], [p.possible for p in dev]
    history = list(EMAligner(iterations=DEFAULT_ITERATIONS).iterate(english, french))
    aer = [alignment_scores(links, sure, possible).aer for links in history]
    assert aer[-1] < aer[0] and aer[-1] < 0.188  # chapter 4's intersection: 18.8%
    fitted = EMAligner().fit(english, french)
    assert [fitted.align(k) for k in range(len(dev))] == history[-1]


def test_em_aligner_rejects_bad_settings():
    for kwargs in (
        dict(iterations=-1),
        dict(prior=-2.0),
        dict(temperature=0.0),
        dict(symmetrise="union"),
    ):
        with pytest.raises(ValueError):
            EMAligner(**kwargs)
    with pytest.raises(TypeError):
        EMAligner(iterations=2.5)
    with pytest.raises(RuntimeError, match="fit"):
        EMAligner().align(0)


# ------------------------------------------------------- command line
def _write(path, text, encoding="utf8"):
    path.write_bytes(text.encode(encoding))
    return str(path)


class Recorder(io.StringIO):
    """A stdout that records whether every line was flushed before the next."""

    def __init__(self):
        super().__init__()
        self.events = []

    def write(self, s):
        self.events.append("write")
        return super().write(s)

    def flush(self):
        self.events.append("flush")


@pytest.fixture
def corpus(tmp_path, dev):
    en = _write(tmp_path / "c.en", "".join(" ".join(p.english) + "\n" for p in dev[:8]))
    fr = _write(tmp_path / "c.fr", "".join(" ".join(p.french) + "\n" for p in dev[:8]))
    return en, fr


def test_cli_em_prints_what_the_em_aligner_finds_flushing_every_line(corpus, dev):
    out = Recorder()
    assert (
        main(
            [
                "--src",
                corpus[0],
                "--tgt",
                corpus[1],
                "--method",
                "em",
                "--iterations",
                "3",
                "--prior",
                "1.5",
            ],
            stdout=out,
        )
        == 0
    )
    lines = out.getvalue().splitlines()
    fitted = EMAligner(iterations=3, prior=1.5).fit(
        [p.english for p in dev[:8]], [p.french for p in dev[:8]]
    )
    assert [read_pharaoh(line)[0] for line in lines] == [fitted.align(k) for k in range(8)]
    assert out.events == ["write", "flush"] * 8


def test_cli_reads_standard_input_for_a_dash(corpus):
    with open(corpus[0], encoding="utf8") as f:
        english = f.read()
    from_file = subprocess.run(
        [sys.executable, "-m", "attention_lib.align", "--src", corpus[0], "--tgt", corpus[1]],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    from_stdin = subprocess.run(
        [sys.executable, "-m", "attention_lib.align", "--src", "-", "--tgt", corpus[1]],
        input=english,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert from_stdin == from_file and from_file.count("\n") == 8


def test_cli_splits_lines_at_newline_only(tmp_path, capsys):
    # U+2028, \x0b, \x1c and \x85 inside a sentence must not start a new pair
    en = _write(tmp_path / "a.en", "the agreement\u2028was signed\r\naugust\x0b1992\x1c\x85\r\n")
    fr = _write(tmp_path / "a.fr", "le accord a été signé\naoût 1992\n")
    for method in ("intersect", "em"):
        assert main(["--src", en, "--tgt", fr, "--method", method]) == 0
        assert len(capsys.readouterr().out.split("\n")) == 3  # two lines and the end
    assert split_lines("a\u2028b\r\nc") == ["a\u2028b", "c"]


def test_cli_drops_a_byte_order_mark(tmp_path, capsys):
    plain = _write(tmp_path / "a.en", "the agreement was signed\n")
    bom = _write(tmp_path / "b.en", "\ufeffthe agreement was signed\n")
    fr = _write(tmp_path / "a.fr", "\ufeffle accord a été signé\n")
    main(["--src", plain, "--tgt", fr])
    expected = capsys.readouterr().out
    main(["--src", bom, "--tgt", fr])
    assert capsys.readouterr().out == expected
    assert expected.startswith("0-0 ")  # the first word is linked


@pytest.mark.parametrize("value", ["0", "-3", "two", "1.5", ""])
def test_cli_rejects_iterations_that_are_not_positive_integers(corpus, value, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--src", corpus[0], "--tgt", corpus[1], "--method", "em", "--iterations", value])
    assert exit_.value.code == 2
    assert "--iterations: must be a positive integer" in capsys.readouterr().err


def test_cli_rejects_iterations_without_em(corpus, capsys):
    with pytest.raises(SystemExit):
        main(["--src", corpus[0], "--tgt", corpus[1], "--iterations", "3"])
    assert "--iterations applies to --method em only" in capsys.readouterr().err


@pytest.mark.parametrize(
    "case", ["directory", "missing", "latin-1", "empty", "mismatch", "two-dashes", "negative-prior"]
)
def test_cli_em_errors_are_clear(case, tmp_path, corpus, capsys):
    en, fr = corpus
    extra = []
    if case == "directory":
        fr, message = str(tmp_path), "is a directory"
    elif case == "missing":
        fr, message = str(tmp_path / "nope.fr"), "cannot read it"
    elif case == "latin-1":
        fr, message = _write(tmp_path / "l.fr", "été\n", "latin-1"), "not UTF-8"
    elif case == "empty":
        fr, message = _write(tmp_path / "e.fr", ""), "is empty"
    elif case == "mismatch":
        fr, message = _write(tmp_path / "m.fr", "un\ndeux\n"), "has 8 lines but"
    elif case == "two-dashes":
        en, fr, message = "-", "-", "cannot both read standard input"
    else:
        extra, message = ["--prior", "-1"], "--prior must be"
    with pytest.raises(SystemExit) as exit_:
        main(["--src", en, "--tgt", fr, "--method", "em"] + extra, stdin=io.StringIO(""))
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_cli_piped_into_head_stops_quietly(tmp_path):
    # More output than a pipe holds, so the writer is still writing when the
    # reader goes away: it must stop without a BrokenPipeError traceback.
    en = _write(tmp_path / "d.en", "the agreement was signed\n" * 30000)
    fr = _write(tmp_path / "d.fr", "le accord a été signé\n" * 30000)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "attention_lib.align",
            "--src",
            en,
            "--tgt",
            fr,
            "--method",
            "diagonal",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    first = proc.stdout.readline()
    proc.stdout.close()  # what `head -1` does after one line
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=60) == 141  # 128 + SIGPIPE, as a shell reports
    assert first.startswith(b"0-0 1-1 ")
    assert err == ""


@pytest.mark.parametrize("method", ["intersect", "em"])
def test_cli_refuses_an_enormous_line_up_front_naming_it(tmp_path, capsys, method):
    # 2,001 x 2,001 words: over the limit of 4,000,000 word pairs per line.
    # It used to allocate an (L, S) matrix per line until NumPy gave up.
    huge = " ".join(["word"] * 2001)
    en = _write(tmp_path / "h.en", f"the agreement\n{huge}\n")
    fr = _write(tmp_path / "h.fr", f"le accord\n{huge}\n")
    with pytest.raises(SystemExit) as exit_:
        main(["--src", en, "--tgt", fr, "--method", method])
    assert exit_.value.code == 2
    out, err = capsys.readouterr()
    assert "line 2 has 2,001 English and 2,001 French words" in err
    assert "limit is 4,000,000" in err and "Traceback" not in err
    assert out == ""  # nothing written, not even line 1


@pytest.mark.parametrize(
    "k, error, message",
    [
        (-1, IndexError, "k = -1 is not a pair of this corpus: it has 2 pairs"),
        (2, IndexError, "k = 2 is not a pair"),
        (1.7, TypeError, "k must be a whole number"),
        (True, TypeError, "k must be a whole number"),
    ],
)
def test_em_align_names_a_bad_pair_index(k, error, message):
    aligner = EMAligner(iterations=1).fit(
        ["the agreement", "august 1992"], ["le accord", "août 1992"]
    )
    with pytest.raises(error, match=message):
        aligner.align(k)
    fr2en, _ = aligner.models
    with pytest.raises(error, match=message):
        fr2en.posteriors(k)
    assert aligner.align(np.int64(1)) == aligner.align(1)


def _traced_peak(function):
    """Peak bytes allocated (Python and NumPy) while ``function()`` runs."""
    import tracemalloc

    tracemalloc.start()
    try:
        function()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_em_memory_does_not_grow_with_the_longest_token(dev):
    # A fixed-width string array of all tokens cost 4 bytes x longest token x
    # tokens: here 20,000 characters x ~1,000 tokens = 80 MB for one token.
    english = [" ".join(p.english) for p in dev] * 3
    french = [" ".join(p.french) for p in dev] * 3
    aligner = EMAligner(iterations=1)
    plain = _traced_peak(lambda: aligner.prepare(english, french))
    english[0] += " " + "x" * 20_000
    long = _traced_peak(lambda: aligner.prepare(english, french))
    assert long - plain < 1 << 20  # the token itself is 20 kB


def test_em_memory_is_a_few_kilobytes_per_sentence_pair(dev):
    # 35 kB per pair before (padded int64 cells, a float64 log prior and the
    # per-sentence cell arrays, each n (m + 1) per direction): 100,000 pairs
    # took 3.6 GB. Growth between 2,000 and 4,000 pairs of real sentences
    # (beyond the constant cost of numbering the cells a million keys at a time):
    rng = np.random.default_rng(0)
    peaks = {}
    for n in (2000, 4000):
        picks = rng.integers(len(dev), size=n)
        english = [" ".join(dev[k].english) for k in picks]
        french = [" ".join(dev[k].french) for k in picks]
        peaks[n] = _traced_peak(lambda: EMAligner(iterations=1).fit(english, french))
    per_pair = (peaks[4000] - peaks[2000]) / 2000
    assert per_pair < 8 * 1024, f"{per_pair / 1024:.1f} KiB per sentence pair"


def test_model1_refuses_word_ids_too_large_to_number_their_pairs():
    # source id x target count overflowed int64 silently, merging unrelated cells
    with pytest.raises(ValueError, match="too large to number their pairs"):
        Model1([[2**40]], [[2**40]])


def test_cli_huge_prior_still_biases_and_does_not_mask(tmp_path, capsys):
    # --prior 1e42 makes float64 biases beyond float32's range; cast, they
    # became -inf and masked every word of rows 1 and 2 (only 0-0 was left).
    # Mathematically the prior decides: each French word takes the English
    # word nearest the diagonal, as with any large finite prior.
    en = _write(tmp_path / "p.en", "the agreement\n")
    fr = _write(tmp_path / "p.fr", "le accord signé\n")
    outputs = []
    for prior in ("1e30", "1e42"):
        assert main(["--src", en, "--tgt", fr, "--method", "fr2en", "--prior", prior]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs == ["0-0 1-1 1-2\n"] * 2
