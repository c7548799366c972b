"""IBM Model 1 by hand, from the formulas, against attention_lib.align.Model1.

The alignment appendix runs EM by hand on a toy corpus and compares it with the library.
Its first hand-written E-step read the table transposed (``t[f, e]`` for a
table indexed ``[e, f]``) and still agreed after one iteration, because the
starting table is uniform and the transpose of a uniform table is the same
table. These tests therefore run several iterations, on corpora whose two
vocabularies differ in size, against a reference written in exact fractions
with dictionaries keyed by (English word, French word): a reference that
cannot be transposed by a slip of indexing.
"""

from fractions import Fraction

import numpy as np
import pytest

from attention_lib import softmax
from attention_lib.align import Model1

THE_HOUSE = ([[0, 1], [0]], [[0, 1], [0]])  # the house / la maison, the / la
# three English and four French words, sentences of different lengths
UNEVEN = ([[0, 1], [0, 2], [1, 2, 0], [2]], [[0, 1, 3], [0, 2], [1, 2, 3, 0], [2, 3]])


def reference_em(english, french, iterations):
    """Model 1 without NULL or prior: t(f | e) after each iteration, exactly."""
    meets = {(e, f) for es, fs in zip(english, french) for e in es for f in fs}
    t = {}
    for e in {e for e, _ in meets}:
        partners = [f for e2, f in meets if e2 == e]
        t.update({(e, f): Fraction(1, len(partners)) for f in partners})
    tables = []
    for _ in range(iterations):
        counts = dict.fromkeys(t, Fraction(0))
        for es, fs in zip(english, french):
            for f in fs:  # E-step: p(e_i | f_j), Bayes' rule
                total = sum(t[e, f] for e in es)
                for e in es:
                    counts[e, f] += t[e, f] / total
        norm = {}
        for (e, _), c in counts.items():  # M-step: normalise per English word
            norm[e] = norm.get(e, 0) + c
        t = {(e, f): c / norm[e] for (e, f), c in counts.items()}
        tables.append(t)
    return tables


def chapter_em(english, french, iterations):
    """The chapter's hand-written EM: a table t[e, f], an E-step by softmax."""
    t = np.zeros((1 + max(map(max, english)), 1 + max(map(max, french))))
    for es, fs in zip(english, french):
        t[np.ix_(es, fs)] = 1.0
    t /= t.sum(axis=1, keepdims=True)
    tables = []
    for _ in range(iterations):
        counts = np.zeros_like(t)
        for x, y in zip(english, french):
            x, y = np.array(x), np.array(y)
            with np.errstate(divide="ignore"):
                scores = np.log(t[np.ix_(x, y)]).T  # (n French, m English)
            weights = softmax(scores, axis=-1)
            np.add.at(counts, (x[None, :], y[:, None]), weights)
        t = counts / counts.sum(axis=1, keepdims=True)
        tables.append(t)
    return tables


def library_tables(english, french, iterations):
    model = Model1(english, french)
    tables = []
    for _ in range(iterations):
        model.step()
        tables.append(model.table()[:-1])  # the last row is NULL
    return tables


@pytest.mark.parametrize("corpus", [THE_HOUSE, UNEVEN], ids=["the house", "uneven"])
def test_model1_matches_em_from_the_formulas_over_several_iterations(corpus):
    reference = reference_em(*corpus, iterations=4)
    for k, table in enumerate(library_tables(*corpus, iterations=4)):
        exact = np.zeros_like(table)
        for (e, f), p in reference[k].items():
            exact[e, f] = float(p)
        np.testing.assert_allclose(
            table, exact, rtol=1e-12, atol=1e-15, err_msg=f"after {k + 1} iterations"
        )


def test_second_iteration_on_the_house_gives_24_29():
    # the number a transposed E-step gets wrong (it gives 0.778)
    reference = reference_em(*THE_HOUSE, iterations=2)
    assert reference[1][0, 0] == Fraction(24, 29)
    assert library_tables(*THE_HOUSE, iterations=2)[1][0, 0] == pytest.approx(24 / 29, rel=1e-12)


@pytest.mark.parametrize("corpus", [THE_HOUSE, UNEVEN], ids=["the house", "uneven"])
def test_the_chapters_hand_em_matches_the_library(corpus):
    for k, (by_hand, lib) in enumerate(
        zip(chapter_em(*corpus, iterations=4), library_tables(*corpus, iterations=4))
    ):
        np.testing.assert_allclose(
            by_hand, lib, rtol=1e-12, atol=1e-15, err_msg=f"after {k + 1} iterations"
        )


def test_a_transposed_e_step_is_caught_after_the_second_iteration():
    # The slip the chapter once made, written out: the reference must tell it apart.
    english, french = THE_HOUSE
    t = np.full((2, 2), 0.5)
    for _ in range(2):
        counts = np.zeros_like(t)
        for x, y in zip(english, french):
            x, y = np.array(x), np.array(y)
            weights = softmax(np.log(t[np.ix_(y, x)]), axis=-1)  # t[f, e]: wrong
            np.add.at(counts, (x[None, :], y[:, None]), weights)
        t = counts / counts.sum(axis=1, keepdims=True)
    assert t[0, 0] == pytest.approx(7 / 9)  # 0.778, not 24/29 = 0.828
    assert abs(t[0, 0] - float(reference_em(english, french, 2)[1][0, 0])) > 0.04
