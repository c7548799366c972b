"""Word alignment from attention weights, and how to score it.

A word alignment says which English word each French word translates: a set
of links ``(i, j)``, English position ``i``, French position ``j`` (0-based).
Chapter 3 reads links straight off cross-attention: the French words are the
queries, the English words the keys and values, and each French word looks
hardest at the English word whose vector is most like its own. The vectors
come from ``data/`` (aligned English/French embeddings, see
:mod:`attention_lib.embeddings`); unknown words are masked out, so they get
no weight and no link.

Aligners (``method`` names, also for the command line):

``fr2en``
    each French word links to the English word it attends to most (the
    row argmax of the chapter's attention matrix);
``en2fr``
    each English word links to the French word it attends to most (the same
    attention with queries and keys swapped);
``intersect``
    the links both directions agree on: fewer, more precise;
``grow-diag``
    the intersection, grown with neighbouring links from the union of both
    directions (Koehn et al. 2003), recovering recall;
``diagonal``
    the baseline that ignores the words: English word ``i`` links to French
    word ``round(i n / m)``.

The attention methods take a ``prior`` ``lambda >= 0``: the score of English
word ``i`` and French word ``j`` loses ``lambda |i/m - j/n|`` (in units of
cosine similarity), which favours links near the diagonal, since English and
French word order are similar. It is passed to the attention as a float mask.

Scores follow Och & Ney (2003), pooled over the corpus, with ``S`` the Sure
gold links, ``P`` the Possible ones (``S`` within ``P``), ``A`` the predicted::

    precision = |A & P| / |A|     recall = |A & S| / |S|
    AER = 1 - (|A & S| + |A & P|) / (|A| + |S|)

Command line (Pharaoh format, one line of ``i-j`` links per sentence pair,
like fast_align)::

    python -m attention_lib.align --src corpus.en --tgt corpus.fr [--method intersect] [--prior 0.4]
"""

import argparse
import sys
from typing import NamedTuple

import numpy as np

from .dot_product import scaled_dot_product_attention
from .embeddings import DataFileError, embed, load_embeddings, load_vocab, tokenize, verified_path

ATTENTION_METHODS = ("fr2en", "en2fr", "intersect", "grow-diag")
METHODS = ATTENTION_METHODS + ("diagonal",)
DEFAULT_METHOD = "intersect"
# Chosen by tune_prior() on the 37 development pairs (the only aligned data we
# have): the lowest AER of `intersect` over lambda = 0, 0.1, ..., 2.
# benchmarks/embedding_quality.py prints the grid and a leave-one-out estimate
# in which no pair helps choose the lambda it is scored with.
DEFAULT_PRIOR = 0.4
PRIOR_GRID = tuple(round(0.1 * k, 1) for k in range(21))


# ------------------------------------------------------------------- reading
def read_pharaoh(line):
    """Parse one line of gold links: ``i-j`` is Sure, ``i?j`` is Possible.

    Parameters
    ----------
    line : str
        Space-separated links, English index first, 0-based.

    Returns
    -------
    sure, possible : frozenset of (int, int)
        ``possible`` includes every Sure link (``S`` is a subset of ``P``).

    Raises
    ------
    ValueError
        If a link is not ``<int>-<int>`` or ``<int>?<int>``.

    Examples
    --------
    >>> sure, possible = read_pharaoh("0-0 1?2 2-1")
    >>> sorted(sure)
    [(0, 0), (2, 1)]
    >>> sorted(possible)
    [(0, 0), (1, 2), (2, 1)]
    """
    sure, possible = set(), set()
    for link in line.split():
        sep = "-" if "-" in link else "?"
        left, _, right = link.partition(sep)
        if not (left.isdigit() and right.isdigit()):
            raise ValueError(f"{link!r} is not a link: expected i-j (Sure) or "
                             "i?j (Possible) with 0-based integer positions")
        pair = (int(left), int(right))
        possible.add(pair)
        if sep == "-":
            sure.add(pair)
    return frozenset(sure), frozenset(possible)


def format_pharaoh(links):
    """Links as one Pharaoh line, ``i-j`` sorted by English then French index.

    Examples
    --------
    >>> format_pharaoh({(2, 1), (0, 0)})
    '0-0 2-1'
    """
    return " ".join(f"{i}-{j}" for i, j in sorted(links))


class AlignmentPair(NamedTuple):
    """One human-aligned sentence pair: tokens and gold links."""

    english: list
    french: list
    sure: frozenset
    possible: frozenset


def load_alignment_dev():
    """The 37 human-aligned Hansards sentence pairs in ``data/hansards_trial/``.

    The trial set of the HLT-NAACL 2003 word-alignment shared task
    (Mihalcea & Pedersen 2003; gold links by Och & Ney), checked against
    ``data/MANIFEST.json`` before use. See ``data/README.md``.

    Returns
    -------
    list of AlignmentPair
        ``english`` and ``french`` token lists (as in the files, not
        lower-cased), ``sure`` and ``possible`` link sets.

    Raises
    ------
    DataFileError
        If a file is missing or fails its checksum.

    Examples
    --------
    >>> pairs = load_alignment_dev()
    >>> len(pairs), pairs[1].english
    (37, ['the', 'commissionners', 'went', 'on', ':'])
    """
    texts = {ext: verified_path(f"hansards_trial/trial.{ext}").read_text(encoding="utf8")
             for ext in ("en", "fr", "gold")}
    lines = {ext: text.splitlines() for ext, text in texts.items()}
    pairs = []
    for en, fr, gold in zip(lines["en"], lines["fr"], lines["gold"]):
        sure, possible = read_pharaoh(gold)
        pairs.append(AlignmentPair(en.split(), fr.split(), sure, possible))
    return pairs


# ------------------------------------------------------------------- scoring
class AlignmentScores(NamedTuple):
    """Pooled precision, recall and alignment error rate (all in [0, 1])."""

    precision: float
    recall: float
    aer: float


def alignment_scores(predicted, sure, possible):
    """Precision, recall and AER of predicted links, pooled over a corpus.

    Parameters
    ----------
    predicted, sure, possible : sequence of sets of (int, int)
        One set per sentence pair. ``possible[k]`` should include
        ``sure[k]``; Sure links are counted as Possible in any case.

    Returns
    -------
    AlignmentScores
        ``precision = |A&P|/|A|``, ``recall = |A&S|/|S|``,
        ``aer = 1 - (|A&S| + |A&P|)/(|A| + |S|)``, counts summed over all
        pairs (Och & Ney 2003). Precision is NaN if nothing was predicted,
        recall NaN if there are no Sure links.

    Examples
    --------
    Two predicted links, one Sure and one wrong, against one Sure and one
    Possible gold link:

    >>> s = alignment_scores([{(0, 0), (1, 0)}], [{(0, 0)}], [{(0, 0), (1, 1)}])
    >>> s.precision, s.recall, round(s.aer, 4)
    (0.5, 1.0, 0.3333)
    """
    if not len(predicted) == len(sure) == len(possible):
        raise ValueError(f"predicted has {len(predicted)} sentence pairs, sure "
                         f"{len(sure)} and possible {len(possible)}: they must match")
    n_a = n_s = a_and_s = a_and_p = 0
    for a, s, p in zip(predicted, sure, possible):
        a, s = set(a), set(s)
        p = set(p) | s
        n_a += len(a)
        n_s += len(s)
        a_and_s += len(a & s)
        a_and_p += len(a & p)
    precision = a_and_p / n_a if n_a else float("nan")
    recall = a_and_s / n_s if n_s else float("nan")
    aer = 1 - (a_and_s + a_and_p) / (n_a + n_s) if n_a + n_s else float("nan")
    return AlignmentScores(precision, recall, aer)


# ---------------------------------------------------------------- aligning
def cross_attention(queries, keys, query_known, key_known, prior=0.0):
    """Attention weights of every query word over the key words.

    Parameters
    ----------
    queries : ndarray, shape (L, d)
        Word vectors of the sentence that asks (e.g. French).
    keys : ndarray, shape (S, d)
        Word vectors of the sentence attended to (e.g. English).
    query_known, key_known : ndarray of bool, shapes (L,) and (S,)
        Which words are in the vocabulary. Unknown keys get zero weight;
        unknown queries get a row of zeros (they attend to nothing).
    prior : float, optional
        ``lambda >= 0``: subtract ``lambda |i/S - j/L|`` (cosine units) from
        the score of query ``j`` and key ``i``.

    Returns
    -------
    ndarray, shape (L, S)
        Rows sum to 1, or are all zero.
    """
    L, S = len(queries), len(keys)
    allowed = query_known[:, None] & key_known[None, :]
    scale = 1.0 / np.sqrt(queries.shape[1])
    if prior:
        offset = np.abs(np.arange(L)[:, None] / max(L, 1) - np.arange(S)[None, :] / max(S, 1))
        # the mask is added to the *scaled* scores, so scale the prior too
        mask = np.where(allowed, -prior * scale * offset, -np.inf)
    else:
        mask = allowed
    _, weights = scaled_dot_product_attention(queries, keys, keys, attn_mask=mask,
                                              scale=scale, return_weights=True)
    return weights


def _row_argmax_links(weights):
    """``(row, argmax column)`` for every row that attends to something."""
    has_weight = weights.sum(axis=1) > 0
    best = weights.argmax(axis=1)
    return {(int(r), int(best[r])) for r in np.flatnonzero(has_weight)}


def grow_diag(fr2en, en2fr):
    """Koehn et al. (2003)'s grow-diag symmetrisation of two link sets.

    Start from the intersection; repeatedly add a link of the union that
    touches (including diagonally) a link already chosen, if its English or
    its French word is still unaligned; stop when nothing changes.

    Examples
    --------
    >>> sorted(grow_diag({(0, 0), (1, 1)}, {(0, 0), (1, 2)}))
    [(0, 0), (1, 1), (1, 2)]
    """
    union = set(fr2en) | set(en2fr)
    links = set(fr2en) & set(en2fr)
    neighbours = [(-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1)]
    grown = True
    while grown:
        grown = False
        for i, j in sorted(links):
            for di, dj in neighbours:
                cand = (i + di, j + dj)
                if cand in union and cand not in links:
                    en_free = all(c[0] != cand[0] for c in links)
                    fr_free = all(c[1] != cand[1] for c in links)
                    if en_free or fr_free:
                        links.add(cand)
                        grown = True
    return links


def diagonal_links(m, n):
    """The baseline: English word ``i`` to French word ``round(i n / m)``.

    ``round`` is Python's: halves go to the even neighbour (``round(2.5)``
    is 2). That is the convention that gives the 60.2% AER the dev set's
    README quotes; rounding halves up gives 59.8%.

    Examples
    --------
    >>> sorted(diagonal_links(4, 6))
    [(0, 0), (1, 2), (2, 3), (3, 4)]
    """
    if m == 0 or n == 0:
        return set()
    return {(i, min(round(i * n / m), n - 1)) for i in range(m)}


class Aligner:
    """Align tokenised English/French sentence pairs with attention.

    Loads the vocabularies and embeddings once (from ``data/``) and aligns
    any number of pairs with :meth:`align`.

    Parameters
    ----------
    method : str
        One of ``fr2en``, ``en2fr``, ``intersect``, ``grow-diag``, ``diagonal``.
    prior : float
        Diagonal prior ``lambda >= 0`` (ignored by ``diagonal``).

    Examples
    --------
    >>> aligner = Aligner("intersect", prior=0.0)
    >>> links = aligner.align("the agreement was signed".split(),
    ...                       "le accord a été signé".split())
    >>> format_pharaoh(links)   # the-le agreement-accord was-été signed-signé
    '0-0 1-1 2-3 3-4'
    """

    def __init__(self, method=DEFAULT_METHOD, prior=DEFAULT_PRIOR):
        if method not in METHODS:
            raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
        if not np.isfinite(prior) or prior < 0:
            raise ValueError(f"prior must be a finite number >= 0, got {prior!r}")
        self.method, self.prior = method, float(prior)
        if method != "diagonal":
            self.vocab = {lang: load_vocab(lang) for lang in ("en", "fr")}
            self.vectors = {lang: load_embeddings(lang) for lang in ("en", "fr")}

    def directions(self, english, french):
        """Both one-directional link sets ``(fr2en, en2fr)`` for one pair."""
        en = tokenize(english, self.vocab["en"])
        fr = tokenize(french, self.vocab["fr"])
        x_en, x_fr = embed(en, self.vectors["en"]), embed(fr, self.vectors["fr"])
        need_fr2en = self.method in ("fr2en", "intersect", "grow-diag")
        need_en2fr = self.method in ("en2fr", "intersect", "grow-diag")
        fr2en = en2fr = set()
        if need_fr2en and len(en.words) and len(fr.words):
            w = cross_attention(x_fr, x_en, fr.known, en.known, self.prior)   # (n, m)
            fr2en = {(i, j) for j, i in _row_argmax_links(w)}
        if need_en2fr and len(en.words) and len(fr.words):
            w = cross_attention(x_en, x_fr, en.known, fr.known, self.prior)   # (m, n)
            en2fr = _row_argmax_links(w)
        return fr2en, en2fr

    def align(self, english, french):
        """Links ``{(i, j)}`` between English tokens ``english`` and French ``french``.

        Both are token lists or whitespace-tokenised strings.
        """
        if self.method == "diagonal":
            m = len(english.split() if isinstance(english, str) else english)
            n = len(french.split() if isinstance(french, str) else french)
            return diagonal_links(m, n)
        fr2en, en2fr = self.directions(english, french)
        if self.method == "fr2en":
            return fr2en
        if self.method == "en2fr":
            return en2fr
        if self.method == "intersect":
            return fr2en & en2fr
        return grow_diag(fr2en, en2fr)


def tune_prior(pairs, method=DEFAULT_METHOD, grid=PRIOR_GRID):
    """Choose the diagonal prior by AER on aligned pairs, and say how well it does.

    Parameters
    ----------
    pairs : list of AlignmentPair
        E.g. :func:`load_alignment_dev`.
    method : str
        An attention method (``fr2en``, ``en2fr``, ``intersect``, ``grow-diag``).
    grid : sequence of float
        Candidate values of ``lambda``; ties go to the smallest.

    Returns
    -------
    best : float
        The ``lambda`` with the lowest pooled AER on all ``pairs``.
    scores : dict of float to AlignmentScores
        Scores on all pairs for every ``lambda`` in ``grid``. The score of
        ``best`` is optimistic: it was chosen on the data it is scored on.
    loo : AlignmentScores
        Leave-one-out estimate: each pair is aligned with the ``lambda``
        chosen on the *other* pairs, and the results are pooled.
    """
    if method not in ATTENTION_METHODS:
        raise ValueError(f"method must be one of {', '.join(ATTENTION_METHODS)}, "
                         f"got {method!r}")
    sure = [p.sure for p in pairs]
    possible = [p.possible for p in pairs]
    links = {}
    for prior in grid:
        aligner = Aligner(method, prior)
        links[prior] = [aligner.align(p.english, p.french) for p in pairs]
    scores = {prior: alignment_scores(links[prior], sure, possible) for prior in grid}
    best = min(grid, key=lambda prior: (scores[prior].aer, prior))
    held_out = []
    for k in range(len(pairs)):
        rest = [t for t in range(len(pairs)) if t != k]

        def aer_without_k(prior):
            return alignment_scores([links[prior][t] for t in rest],
                                    [sure[t] for t in rest],
                                    [possible[t] for t in rest]).aer

        chosen = min(grid, key=lambda prior: (aer_without_k(prior), prior))
        held_out.append(links[chosen][k])
    return best, scores, alignment_scores(held_out, sure, possible)


# ------------------------------------------------------------ command line
def _read_lines(parser, path, flag):
    try:
        with open(path, encoding="utf8") as f:
            lines = f.read().splitlines()
    except OSError as err:
        parser.error(f"{flag} {path}: cannot read it ({err.strerror})")
    except UnicodeDecodeError as err:
        parser.error(f"{flag} {path}: not UTF-8 text ({err.reason} at byte {err.start})")
    if not lines:
        parser.error(f"{flag} {path} is empty: expected one tokenised sentence per line")
    return lines


def main(argv=None):
    """Align a parallel corpus and print Pharaoh links (see the module docstring)."""
    parser = argparse.ArgumentParser(
        prog="python -m attention_lib.align",
        description="Word-align tokenised English/French sentence pairs with "
                    "cross-attention over aligned word embeddings. Prints one "
                    "line of 0-based English-French links (i-j) per pair.")
    parser.add_argument("--src", required=True, metavar="EN_FILE",
                        help="English side, one tokenised sentence per line")
    parser.add_argument("--tgt", required=True, metavar="FR_FILE",
                        help="French side, same number of lines")
    parser.add_argument("--method", choices=METHODS, default=DEFAULT_METHOD,
                        help=f"aligner (default {DEFAULT_METHOD})")
    parser.add_argument("--prior", type=float, default=DEFAULT_PRIOR,
                        help=f"diagonal prior lambda >= 0 (default {DEFAULT_PRIOR})")
    args = parser.parse_args(argv)
    if not np.isfinite(args.prior) or args.prior < 0:
        parser.error(f"--prior must be a finite number >= 0, got {args.prior}")
    english = _read_lines(parser, args.src, "--src")
    french = _read_lines(parser, args.tgt, "--tgt")
    if len(english) != len(french):
        parser.error(f"--src {args.src} has {len(english)} lines but --tgt "
                     f"{args.tgt} has {len(french)}: line k of one must be "
                     "the translation of line k of the other")
    try:
        aligner = Aligner(args.method, args.prior)
    except DataFileError as err:
        parser.exit(1, f"{parser.prog}: error: {err}\n")
    out = [format_pharaoh(aligner.align(en, fr)) for en, fr in zip(english, french)]
    sys.stdout.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
