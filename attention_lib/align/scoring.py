"""Gold alignments and how to score against them (Och & Ney 2003).

Pharaoh files (one line of ``i-j`` links per sentence pair), the 37
human-aligned development pairs in ``data/hansards_trial/``, pooled
precision, recall and alignment error rate, and the leave-one-out procedure
that chooses an aligner's settings on those same pairs without letting a pair
help choose the setting it is scored with.
"""

from typing import NamedTuple

import numpy as np

from ..data.paths import verified_path


def split_lines(text):
    """Split text into lines at ``\\n`` only, as ``wc -l`` does.

    ``str.splitlines`` also breaks at ``\\v``, ``\\f``, ``\\x1c``-``\\x1e``,
    ``\\x85``, U+2028 and U+2029, which can occur *inside* a sentence; a
    parallel corpus is matched line by line, so one such character would shift
    every later pair. A ``\\r`` before the ``\\n`` (Windows line ends) is
    dropped. A last line without ``\\n`` still counts; a final ``\\n`` does not
    start an extra empty line.

    Examples
    --------
    >>> split_lines("a b\\r\\nc\\u2028d\\n")
    ['a b', 'c\\u2028d']
    >>> split_lines("one"), split_lines(""), split_lines("\\n")
    (['one'], [], [''])
    """
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


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
            raise ValueError(
                f"{link!r} is not a link: expected i-j (Sure) or "
                "i?j (Possible) with 0-based integer positions"
            )
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
    texts = {
        ext: verified_path(f"hansards_trial/trial.{ext}").read_text(encoding="utf-8-sig")
        for ext in ("en", "fr", "gold")
    }
    lines = {ext: split_lines(text) for ext, text in texts.items()}
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


def aer_from_counts(n_a, n_s, a_and_s, a_and_p):
    """The alignment error rate from link counts: ``1 - (|A&S| + |A&P|) / (|A| + |S|)``.

    Och & Ney (2003). ``A`` are the predicted links, ``S`` the Sure and ``P``
    the Possible gold links (``S`` inside ``P``). NaN when ``A`` and ``S`` are
    both empty. Numbers give a float; arrays (one count per setting, say)
    give an array.

    Examples
    --------
    >>> from attention_lib.align import aer_from_counts
    >>> aer_from_counts(2, 1, 1, 1)      # |A| = 2, |S| = 1, one link in both
    0.33333333333333337
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        aer = 1 - np.add(a_and_s, a_and_p) / np.add(n_a, n_s)
    return float(aer) if np.ndim(aer) == 0 else aer


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
        From the counts summed over all pairs (the formulas of :mod:`attention_lib.align`).
        Precision is NaN if nothing was predicted, recall NaN if there are no Sure links.

    Examples
    --------
    Two predicted links, one Sure and one wrong, against one Sure and one
    Possible gold link:

    >>> s = alignment_scores([{(0, 0), (1, 0)}], [{(0, 0)}], [{(0, 0), (1, 1)}])
    >>> s.precision, s.recall, round(s.aer, 4)
    (0.5, 1.0, 0.3333)
    """
    if not len(predicted) == len(sure) == len(possible):
        raise ValueError(
            f"predicted has {len(predicted)} sentence pairs, sure "
            f"{len(sure)} and possible {len(possible)}: they must match"
        )
    return _scores_from_counts(_counts(predicted, sure, possible).sum(axis=0))


class Tuning(NamedTuple):
    """What :func:`leave_one_out` returns."""

    best: object
    scores: dict
    loo: AlignmentScores
    chosen: list


def _counts(links, sure, possible):
    """Per pair ``(|A|, |S|, |A & S|, |A & P|)``, shape (n_pairs, 4)."""
    rows = []
    for a, s, p in zip(links, sure, possible):
        a, s = set(a), set(s)
        rows.append((len(a), len(s), len(a & s), len(a & (set(p) | s))))
    return np.array(rows, dtype=np.int64).reshape(-1, 4)


def _scores_from_counts(c):
    """:class:`AlignmentScores` from pooled ``(|A|, |S|, |A & S|, |A & P|)``."""
    n_a, n_s, a_and_s, a_and_p = (int(x) for x in c)
    precision = a_and_p / n_a if n_a else float("nan")
    recall = a_and_s / n_s if n_s else float("nan")
    return AlignmentScores(precision, recall, aer_from_counts(n_a, n_s, a_and_s, a_and_p))


def leave_one_out(candidates, sure, possible):
    """Choose a setting by AER, and estimate honestly how well the choice does.

    Parameters
    ----------
    candidates : dict
        Setting (any hashable, e.g. a tuple of parameter values) -> list of
        predicted link sets, one per sentence pair. Ties go to the setting
        that comes first, so list simpler settings first.
    sure, possible : sequence of sets of (int, int)
        The gold links, one set per pair.

    Returns
    -------
    Tuning
        ``best``: the setting with the lowest pooled AER on all pairs;
        ``scores``: setting -> :class:`AlignmentScores` on all pairs (the
        score of ``best`` is optimistic: it was chosen on the pairs it is
        scored on); ``loo``: the leave-one-out estimate, in which pair ``k``
        is aligned with the setting that is best on the *other* pairs, and
        the links are pooled; ``chosen``: that setting for each pair.

    Examples
    --------
    Setting ``"b"`` is better on both pairs, so it is chosen every time:

    >>> sure = [{(0, 0)}, {(1, 1)}]
    >>> out = leave_one_out({"a": [set(), set()], "b": [{(0, 0)}, {(1, 1)}]},
    ...                     sure, sure)
    >>> out.best, out.chosen, out.loo.aer
    ('b', ['b', 'b'], 0.0)
    """
    settings = list(candidates)
    if not settings:
        raise ValueError("candidates is empty: pass at least one setting")
    counts = np.stack([_counts(candidates[s], sure, possible) for s in settings])
    if counts.shape[1] != len(sure):
        raise ValueError(f"each candidate needs {len(sure)} link sets, one per pair")
    total = counts.sum(axis=1)  # (settings, 4)
    best = settings[int(np.nanargmin(aer_from_counts(*total.T)))]
    chosen = [
        settings[int(np.nanargmin(aer_from_counts(*(total - counts[:, k]).T)))]
        for k in range(len(sure))
    ]
    scores = {s: _scores_from_counts(c) for s, c in zip(settings, total)}
    held_out = [candidates[c][k] for k, c in enumerate(chosen)]
    return Tuning(best, scores, alignment_scores(held_out, sure, possible), chosen)
