"""The EM word aligner: IBM Model 1 (:mod:`.em`) trained on raw text in both directions.

:class:`EMAligner` numbers a corpus's words and trains it; :func:`tune_em`
chooses its settings on hand-aligned pairs.
"""

import itertools
from typing import NamedTuple

import numpy as np

from .._checks import as_int, as_real
from ..data.embeddings import load_embeddings, load_vocab, tokenize
from .attention import combine_directions
from .em import Model1
from .em_storage import Similarity
from .scoring import leave_one_out

# Chosen on the 37 development pairs by tune_em() (leave-one-out AER of the
# intersection over EM_GRID and 0 ... EM_MAX_ITERATIONS iterations): the
# setting with the lowest AER on all 37 pairs. The chapter and
# benchmarks/bench_align.py print the grid's leave-one-out estimate.
DEFAULT_ITERATIONS = 6
DEFAULT_TENSION = 2.0
DEFAULT_TEMPERATURE = 0.05
DEFAULT_PSEUDO_COUNT = 1.0
DEFAULT_NULL_PROB = 0.05
EM_GRID = {
    "tension": (1.0, 2.0, 4.0),
    "temperature": (0.05, 0.1, 0.2),
    "pseudo_count": (1.0, 5.0, 20.0),
    "null_prob": (0.0, 0.05, 0.2),
}
EM_MAX_ITERATIONS = 10
SYMMETRISATIONS = ("intersect", "grow-diag")


class Corpus(NamedTuple):
    """A tokenised corpus, as :meth:`EMAligner.prepare` numbers it."""

    en: list  # one array of word ids per sentence
    fr: list
    words_en: list  # id -> lower-cased word
    words_fr: list
    similarity: object
    models: dict  # (direction) -> Model1 holding the shared indexing


class EMAligner:
    """Word-align a corpus with IBM Model 1 trained on it by EM, in both directions.

    The French-to-English model (French words attend over English ones) and
    the English-to-French model are trained separately, each read off by its
    argmax, and the two link sets are symmetrised like the attention
    aligners' (``intersect`` by default).

    Parameters
    ----------
    iterations : int
        EM iterations (0: the starting table, i.e. embedding attention).
    prior : float
        Diagonal tension ``kappa >= 0``, in log-probability per unit of
        ``|i/m - j/n|`` (fast_align's "diagonal tension"; not the cosine
        units of the attention aligners' ``prior``).
    temperature : float
        ``tau > 0`` of the starting table's softmax of cosine similarities.
    pseudo_count : float
        ``alpha >= 0``: weight of the starting table in every M-step.
    null_prob : float
        ``p0`` in ``[0, 1)``: prior probability of aligning to ``NULL``.
    symmetrise : {"intersect", "grow-diag"}

    Examples
    --------
    >>> from attention_lib.align import format_pharaoh
    >>> aligner = EMAligner().fit(["the agreement was signed", "august 1992"],
    ...                           ["le accord a été signé", "août 1992"])
    >>> [format_pharaoh(aligner.align(k)) for k in range(2)]
    ['0-0 1-1 2-3 3-4', '0-0 1-1']
    """

    def __init__(
        self,
        iterations=DEFAULT_ITERATIONS,
        prior=DEFAULT_TENSION,
        temperature=DEFAULT_TEMPERATURE,
        pseudo_count=DEFAULT_PSEUDO_COUNT,
        null_prob=DEFAULT_NULL_PROB,
        symmetrise="intersect",
    ):
        self.iterations = as_int(iterations, "iterations")
        self.settings = {
            "tension": as_real(prior, "prior"),
            "null_prob": as_real(null_prob, "null_prob", 0.0, 1.0, True),
            "pseudo_count": as_real(pseudo_count, "pseudo_count"),
        }
        self.temperature = as_real(temperature, "temperature")
        if self.temperature == 0:
            raise ValueError("temperature must be > 0, got 0")
        if symmetrise not in SYMMETRISATIONS:
            raise ValueError(
                f"symmetrise must be one of {', '.join(SYMMETRISATIONS)}, got {symmetrise!r}"
            )
        self.symmetrise = symmetrise
        self.vocab = {lang: load_vocab(lang) for lang in ("en", "fr")}
        self.vectors = {lang: load_embeddings(lang) for lang in ("en", "fr")}
        self.models = None

    def prepare(self, english, french):
        """Tokenise a corpus (via :func:`attention_lib.tokenize`) and number its words."""
        if len(english) != len(french):
            raise ValueError(
                f"english has {len(english)} sentences but french has "
                f"{len(french)}: they must be sentence pairs"
            )
        ids, words = {}, {}
        for lang, side in (("en", english), ("fr", french)):
            # Intern each word: a dict of the distinct words and an integer array
            # per sentence, so memory follows the vocabulary, never the longest
            # token (a fixed-width string array of all tokens would).
            first_seen, sentences = {}, []
            for sentence in side:
                tokens = [w.lower() for w in tokenize(sentence, self.vocab[lang]).words]
                interned = [first_seen.setdefault(w, len(first_seen)) for w in tokens]
                sentences.append(np.array(interned, dtype=np.int64))
            types = sorted(first_seen)  # ids in code-point order
            rank = np.empty(len(types), dtype=np.int64)
            rank[[first_seen[w] for w in types]] = np.arange(len(types))
            ids[lang] = [rank[s] for s in sentences]
            words[lang] = types or [""]
        similarity = Similarity(words["en"], words["fr"], self.vocab, self.vectors)
        return Corpus(ids["en"], ids["fr"], words["en"], words["fr"], similarity, {})

    def _models(self, corpus):
        sim, tau = corpus.similarity, self.temperature
        scores = {"fr2en": lambda e, f: sim(e, f) / tau, "en2fr": lambda f, e: sim(e, f) / tau}
        if not corpus.models:  # number the word pairs once per corpus
            corpus.models["fr2en"] = Model1(corpus.en, corpus.fr, scores["fr2en"], **self.settings)
            corpus.models["en2fr"] = Model1(corpus.fr, corpus.en, scores["en2fr"], **self.settings)
            return corpus.models["fr2en"], corpus.models["en2fr"]
        return tuple(corpus.models[d].with_settings(scores[d], **self.settings) for d in scores)

    def iterate(self, english, french, corpus=None):
        """Train step by step, yielding every pair's links after 0, 1, ... iterations.

        Yields
        ------
        list of set of (int, int)
            After ``k = 0, 1, ..., iterations`` EM iterations, the symmetrised
            links of every pair (English index first).
        """
        corpus = corpus or self.prepare(english, french)
        fr2en, en2fr = self.models = self._models(corpus)
        for k in range(self.iterations + 1):
            if k:
                fr2en.step()
                en2fr.step()
            both = zip(fr2en.links(), en2fr.links(swap=True))
            yield [combine_directions(a, b, self.symmetrise) for a, b in both]

    def fit(self, english, french):
        """Train both directions on the corpus for ``iterations`` EM iterations.

        Parameters
        ----------
        english, french : sequence of str or of list of str
            The sentence pairs (line ``k`` of one translates line ``k`` of
            the other), tokenised by whitespace.

        Returns
        -------
        EMAligner
            ``self``, ready for :meth:`align`.
        """
        fr2en, en2fr = self.models = self._models(self.prepare(english, french))
        for _ in range(self.iterations):
            fr2en.step()
            en2fr.step()
        return self

    def align(self, k):
        """Links ``{(i, j)}`` of the fitted corpus's pair ``k``.

        Raises
        ------
        TypeError
            If ``k`` is not a whole number (``1.7`` is not pair 1).
        IndexError
            If ``k`` is not in ``[0, number of pairs)``.
        """
        if self.models is None:
            raise RuntimeError("call fit(english, french) before align(k)")
        fr2en, en2fr = self.models  # fr2en checks k
        en2fr_links = {(i, j) for j, i in en2fr.decode(k)}
        return combine_directions(fr2en.decode(k), en2fr_links, self.symmetrise)


def tune_em(pairs, grid=None, max_iterations=EM_MAX_ITERATIONS, symmetrise="intersect"):
    """Choose the EM aligner's settings on aligned pairs, with a leave-one-out estimate.

    EM learns from the sentences alone (never from the gold links), so it is
    trained once per setting on all the pairs; the gold links only choose
    the setting, by :func:`attention_lib.align.leave_one_out`.

    Parameters
    ----------
    pairs : list of AlignmentPair
        E.g. :func:`attention_lib.align.load_alignment_dev`.
    grid : dict of str to sequence, optional
        Values of ``tension``, ``temperature``, ``pseudo_count`` and
        ``null_prob`` (default :data:`EM_GRID`); every combination is tried,
        with 0 to ``max_iterations`` iterations.

    Returns
    -------
    Tuning
        Settings are tuples ``(iterations, tension, temperature,
        pseudo_count, null_prob)``.
    """
    grid = dict(EM_GRID if grid is None else grid)
    english = [p.english for p in pairs]
    french = [p.french for p in pairs]
    candidates = {}
    corpus = None
    names = ("tension", "temperature", "pseudo_count", "null_prob")  # EMAligner's order
    for setting in itertools.product(*(grid[name] for name in names)):
        aligner = EMAligner(max_iterations, *setting, symmetrise)
        corpus = corpus or aligner.prepare(english, french)
        for k, links in enumerate(aligner.iterate(english, french, corpus)):
            candidates[(k, *setting)] = links
    # ties go to fewer iterations, then to the smaller values
    candidates = {key: candidates[key] for key in sorted(candidates)}
    return leave_one_out(candidates, [p.sure for p in pairs], [p.possible for p in pairs])
