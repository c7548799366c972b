"""Word alignment from attention: Pharaoh I/O, Och & Ney scores, aligners, CLI."""

import math
import re
import subprocess
import sys

import numpy as np
import pytest

from attention_lib.align import (
    ATTENTION_METHODS,
    DEFAULT_METHOD,
    DEFAULT_PRIOR,
    METHODS,
    Aligner,
    alignment_scores,
    cross_attention,
    diagonal_links,
    format_pharaoh,
    grow_diag,
    load_alignment_dev,
    main,
    read_pharaoh,
    tune_prior,
)
from attention_lib import load_vocab


@pytest.fixture(scope="module")
def dev():
    return load_alignment_dev()


@pytest.fixture(scope="module")
def aligners():
    return {method: Aligner(method, DEFAULT_PRIOR) for method in METHODS}


# ------------------------------------------------------------------ Pharaoh
def test_read_pharaoh_splits_sure_and_possible_links():
    sure, possible = read_pharaoh("0-0 1?1 2-3 10?12\n")
    assert sure == {(0, 0), (2, 3)}
    assert possible == {(0, 0), (1, 1), (2, 3), (10, 12)}


def test_read_pharaoh_of_an_empty_line_is_empty():
    assert read_pharaoh("") == (frozenset(), frozenset())


@pytest.mark.parametrize("bad", ["0-", "a-1", "1:2", "1-2-3", "-1-2", "3"])
def test_read_pharaoh_names_a_malformed_link(bad):
    with pytest.raises(ValueError, match=re.escape(repr(bad))):
        read_pharaoh(f"0-0 {bad}")


def test_format_pharaoh_round_trips_sorted():
    links = {(3, 1), (0, 2), (0, 0)}
    line = format_pharaoh(links)
    assert line == "0-0 0-2 3-1"
    assert read_pharaoh(line)[0] == links


# ----------------------------------------------------------------- scoring
def test_scores_of_one_sentence_computed_by_hand():
    # A = {00, 11, 20}; S = {00, 22}; P = S + {11}
    # |A&S| = 1, |A&P| = 2, |A| = 3, |S| = 2
    s = alignment_scores([{(0, 0), (1, 1), (2, 0)}], [{(0, 0), (2, 2)}], [{(0, 0), (2, 2), (1, 1)}])
    assert s.precision == pytest.approx(2 / 3)
    assert s.recall == pytest.approx(1 / 2)
    assert s.aer == pytest.approx(1 - 3 / 5)


def test_scores_are_pooled_over_sentences_not_averaged():
    # sentence 1 as above; sentence 2: A = {00}, S = P = {01}
    # totals |A| = 4, |S| = 3, |A&S| = 1, |A&P| = 2
    s = alignment_scores(
        [{(0, 0), (1, 1), (2, 0)}, {(0, 0)}],
        [{(0, 0), (2, 2)}, {(0, 1)}],
        [{(0, 0), (2, 2), (1, 1)}, {(0, 1)}],
    )
    assert s.precision == pytest.approx(2 / 4)
    assert s.recall == pytest.approx(1 / 3)
    assert s.aer == pytest.approx(1 - 3 / 7)


def test_sure_links_count_as_possible_even_if_left_out_of_p():
    s = alignment_scores([{(0, 0)}], [{(0, 0)}], [set()])
    assert (s.precision, s.recall, s.aer) == (1.0, 1.0, 0.0)


def test_gold_alignment_scores_zero_error_and_nothing_scores_nan_precision():
    sure, possible = [{(0, 0)}, {(1, 1)}], [{(0, 0), (0, 1)}, {(1, 1)}]
    assert alignment_scores(sure, sure, possible).aer == 0.0
    empty = alignment_scores([set(), set()], sure, possible)
    assert math.isnan(empty.precision) and empty.recall == 0.0 and empty.aer == 1.0


def test_scores_need_one_link_set_per_sentence():
    with pytest.raises(ValueError, match="predicted has 2 sentence pairs, sure 1"):
        alignment_scores([set(), set()], [set()], [set()])


# ---------------------------------------------------------------- dev set
def test_dev_set_has_37_pairs_with_links_inside_the_sentences(dev):
    assert len(dev) == 37
    for pair in dev:
        assert pair.sure <= pair.possible
        for i, j in pair.possible:
            assert 0 <= i < len(pair.english) and 0 <= j < len(pair.french)


def test_diagonal_baseline_scores_the_published_60_2_percent(dev):
    predicted = [diagonal_links(len(p.english), len(p.french)) for p in dev]
    aer = alignment_scores(predicted, [p.sure for p in dev], [p.possible for p in dev]).aer
    assert round(100 * aer, 1) == 60.2


def test_diagonal_links_every_english_word_once_within_bounds():
    for m, n in [(1, 1), (5, 3), (3, 5), (7, 7), (10, 1)]:
        links = diagonal_links(m, n)
        assert sorted(i for i, _ in links) == list(range(m))
        assert all(0 <= j < n for _, j in links)
    assert diagonal_links(0, 4) == set() == diagonal_links(4, 0)


# ------------------------------------------------------------- aligners
def test_each_aligner_links_real_words_only(dev, aligners):
    vocab = {lang: load_vocab(lang) for lang in ("en", "fr")}
    for method, aligner in aligners.items():
        for p in dev:
            for i, j in aligner.align(p.english, p.french):
                assert 0 <= i < len(p.english) and 0 <= j < len(p.french)
                if method != "diagonal":  # unknown words are masked out
                    assert p.english[i].lower() in vocab["en"]
                    assert p.french[j].lower() in vocab["fr"]


def test_one_directional_aligners_give_each_word_at_most_one_link(dev, aligners):
    for p in dev:
        fr2en = aligners["fr2en"].align(p.english, p.french)
        en2fr = aligners["en2fr"].align(p.english, p.french)
        french = [j for _, j in fr2en]
        english = [i for i, _ in en2fr]
        assert len(french) == len(set(french))
        assert len(english) == len(set(english))


def test_symmetrised_aligners_sit_between_intersection_and_union(dev, aligners):
    for p in dev:
        fr2en, en2fr = aligners["intersect"].directions(p.english, p.french)
        inter = aligners["intersect"].align(p.english, p.french)
        grown = aligners["grow-diag"].align(p.english, p.french)
        assert inter == fr2en & en2fr
        assert inter <= fr2en and inter <= en2fr
        assert inter <= grown <= fr2en | en2fr


def test_grow_diag_adds_only_neighbours_of_unaligned_words():
    fr2en = {(0, 0), (2, 2), (5, 5)}
    en2fr = {(0, 0), (1, 1), (2, 2), (4, 5)}
    # the intersection is {00, 22}; (1, 1) touches both and its words are
    # free, so it is added. (4, 5) and (5, 5) touch only each other: no
    # chosen link anchors them.
    assert grow_diag(fr2en, en2fr) == {(0, 0), (1, 1), (2, 2)}


def test_a_strong_prior_pulls_links_onto_the_diagonal(dev):
    strong = Aligner("fr2en", prior=1000.0)
    for p in dev[:5]:
        m, n = len(p.english), len(p.french)
        for i, j in strong.align(p.english, p.french):
            offsets = [
                abs(k / m - j / n) for k in range(m) if p.english[k].lower() in strong.vocab["en"]
            ]
            assert abs(i / m - j / n) == pytest.approx(min(offsets))


def test_cross_attention_masks_unknown_words():
    rng = np.random.default_rng(0)
    q, k = rng.normal(size=(3, 4)), rng.normal(size=(5, 4))
    q_known = np.array([True, False, True])
    k_known = np.array([True, True, False, True, True])
    for prior in (0.0, 0.5):
        w = cross_attention(q, k, q_known, k_known, prior)
        assert w.shape == (3, 5)
        np.testing.assert_array_equal(w[1], 0.0)
        np.testing.assert_array_equal(w[:, 2], 0.0)
        np.testing.assert_allclose(w[[0, 2]].sum(axis=1), 1.0)


def test_attention_aligners_beat_the_diagonal_and_the_prior_helps(dev):
    sure, possible = [p.sure for p in dev], [p.possible for p in dev]

    def aer(method, prior):
        aligner = Aligner(method, prior)
        return alignment_scores(
            [aligner.align(p.english, p.french) for p in dev], sure, possible
        ).aer

    diagonal = aer("diagonal", 0.0)
    for method in ATTENTION_METHODS:
        assert aer(method, 0.0) < diagonal
    assert aer(DEFAULT_METHOD, DEFAULT_PRIOR) < aer(DEFAULT_METHOD, 0.0)


def test_default_prior_is_the_one_tuning_chooses(dev):
    best, scores, loo = tune_prior(dev)
    assert best == DEFAULT_PRIOR
    assert min(s.aer for s in scores.values()) == scores[best].aer
    assert loo.aer >= scores[best].aer  # held-out choice cannot beat the oracle


@pytest.mark.parametrize(
    "method, prior", [("nope", 0.0), ("intersect", -1.0), ("intersect", float("nan"))]
)
def test_aligner_rejects_bad_settings(method, prior):
    with pytest.raises(ValueError, match="method must be one of|prior must be"):
        Aligner(method, prior)


def test_empty_sentences_give_no_links(aligners):
    for aligner in aligners.values():
        assert aligner.align([], ["le", "chat"]) == set()
        assert aligner.align(["the", "cat"], []) == set()


# ------------------------------------------------------------- command line
PHARAOH_LINE = re.compile(r"^(\d+-\d+( \d+-\d+)*)?$")


def _write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf8")
    return str(path)


def test_cli_prints_one_pharaoh_line_per_pair(dev, tmp_path, capsys):
    en = _write(tmp_path / "c.en", [" ".join(p.english) for p in dev[:6]])
    fr = _write(tmp_path / "c.fr", [" ".join(p.french) for p in dev[:6]])
    assert main(["--src", en, "--tgt", fr]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 6
    aligner = Aligner()
    for line, p in zip(lines, dev[:6]):
        assert PHARAOH_LINE.match(line)
        assert read_pharaoh(line)[0] == aligner.align(p.english, p.french)


def test_cli_method_and_prior_options(dev, tmp_path, capsys):
    en = _write(tmp_path / "c.en", [" ".join(dev[0].english)])
    fr = _write(tmp_path / "c.fr", [" ".join(dev[0].french)])
    main(["--src", en, "--tgt", fr, "--method", "diagonal"])
    expected = diagonal_links(len(dev[0].english), len(dev[0].french))
    assert read_pharaoh(capsys.readouterr().out)[0] == expected


def test_cli_rejects_mismatched_line_counts(tmp_path, capsys):
    en = _write(tmp_path / "a.en", ["the cat", "a dog", "it sat"])
    fr = _write(tmp_path / "a.fr", ["le chat", "un chien"])
    with pytest.raises(SystemExit) as exit_:
        main(["--src", en, "--tgt", fr])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"{en} has 3 lines" in err and f"{fr} has 2" in err


def test_cli_rejects_an_empty_file(tmp_path, capsys):
    en = _write(tmp_path / "a.en", ["the cat"])
    fr = tmp_path / "empty.fr"
    fr.write_bytes(b"")
    with pytest.raises(SystemExit) as exit_:
        main(["--src", en, "--tgt", str(fr)])
    assert exit_.value.code == 2
    assert f"{fr} is empty" in capsys.readouterr().err


def test_cli_rejects_a_missing_file_and_a_negative_prior(tmp_path, capsys):
    en = _write(tmp_path / "a.en", ["the cat"])
    for argv, message in [
        (["--src", en, "--tgt", str(tmp_path / "nope.fr")], "cannot read"),
        (["--src", en, "--tgt", en, "--prior", "-1"], "--prior must be"),
    ]:
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2
        assert message in capsys.readouterr().err


def test_cli_reports_broken_data_without_a_traceback(tmp_path, monkeypatch):
    en = _write(tmp_path / "a.en", ["the cat"])
    fr = _write(tmp_path / "a.fr", ["le chat"])
    monkeypatch.setenv("ATTENTION_DATA_DIR", str(tmp_path / "no-data-here"))
    result = subprocess.run(
        [sys.executable, "-m", "attention_lib.align", "--src", en, "--tgt", fr],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "python data/build_embeddings.py" in result.stderr


def test_cli_runs_as_a_module(tmp_path):
    en = _write(tmp_path / "a.en", ["the agreement was signed", "august 1992"])
    fr = _write(tmp_path / "a.fr", ["le accord a été signé", "août 1992"])
    result = subprocess.run(
        [sys.executable, "-m", "attention_lib.align", "--src", en, "--tgt", fr],
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.splitlines() == ["0-0 1-1 2-3 3-4", "0-0 1-1"]
