"""Word alignment from attention weights, and how to score it.

A word alignment says which English word each French word translates: a set
of links ``(i, j)``, English position ``i``, French position ``j`` (0-based).
Chapter 4 reads links straight off cross-attention over aligned word vectors
(:mod:`attention_lib.align.attention`); the alignment appendix measures them against human
annotation (:mod:`attention_lib.align.scoring`) and learns the attention
scores from the corpus itself with IBM Model 1 and EM (the maths in
:mod:`attention_lib.align.em`, its storage in :mod:`~attention_lib.align.em_storage`,
the aligner in :mod:`~attention_lib.align.em_aligner`).

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
    word ``round(i n / m)``;
``em``
    IBM Model 1 (Brown et al. 1993) trained by EM on the corpus being
    aligned, started from the embedding similarities, in both directions,
    intersected (:class:`EMAligner`).

The attention methods take a ``prior`` ``lambda >= 0``: the score of English
word ``i`` and French word ``j`` loses ``lambda |i/m - j/n|`` (in units of
cosine similarity), which favours links near the diagonal, since English and
French word order are similar. It is passed to the attention as a float mask.
For ``em`` the prior is fast_align's diagonal tension ``kappa`` (Dyer et al.
2013): ``p(i | j)`` is proportional to ``exp(-kappa |i/m - j/n|)``.

Scores follow Och & Ney (2003), pooled over the corpus, with ``S`` the Sure
gold links, ``P`` the Possible ones (``S`` within ``P``), ``A`` the predicted::

    precision = |A & P| / |A|     recall = |A & S| / |S|
    AER = 1 - (|A & S| + |A & P|) / (|A| + |S|)

Command line (Pharaoh format, one line of ``i-j`` links per sentence pair,
like fast_align)::

    python -m attention_lib.align --src corpus.en --tgt corpus.fr \\
        [--method intersect] [--prior 0.4] [--iterations N]

``-`` as a file name reads standard input. Files are read as UTF-8 (a
byte-order mark is dropped) and split into lines at ``\\n`` only (``\\r\\n``
is accepted), so line ``k`` of the output always belongs to line ``k`` of the
input; words are normalised by :func:`attention_lib.tokenize`. When each line
is written: :mod:`attention_lib.align.cli`.
"""

from .attention import (
    ATTENTION_METHODS,
    DEFAULT_METHOD,
    DEFAULT_PRIOR,
    METHODS,
    PRIOR_GRID,
    Aligner,
    cross_attention,
    diagonal_links,
    grow_diag,
    tune_prior,
)
from .cli import CLI_METHODS, main
from .em import Model1
from .em_aligner import (
    DEFAULT_ITERATIONS,
    DEFAULT_NULL_PROB,
    DEFAULT_PSEUDO_COUNT,
    DEFAULT_TEMPERATURE,
    DEFAULT_TENSION,
    EM_GRID,
    EM_MAX_ITERATIONS,
    EMAligner,
    tune_em,
)
from .scoring import (
    AlignmentPair,
    AlignmentScores,
    Tuning,
    aer_from_counts,
    alignment_scores,
    format_pharaoh,
    leave_one_out,
    load_alignment_dev,
    read_pharaoh,
    split_lines,
)

__all__ = [
    "ATTENTION_METHODS",
    "DEFAULT_METHOD",
    "DEFAULT_PRIOR",
    "PRIOR_GRID",
    "METHODS",
    "CLI_METHODS",
    "DEFAULT_ITERATIONS",
    "DEFAULT_NULL_PROB",
    "DEFAULT_PSEUDO_COUNT",
    "DEFAULT_TEMPERATURE",
    "DEFAULT_TENSION",
    "EM_GRID",
    "EM_MAX_ITERATIONS",
    "Aligner",
    "AlignmentPair",
    "AlignmentScores",
    "EMAligner",
    "Model1",
    "Tuning",
    "aer_from_counts",
    "alignment_scores",
    "cross_attention",
    "diagonal_links",
    "format_pharaoh",
    "grow_diag",
    "leave_one_out",
    "load_alignment_dev",
    "main",
    "read_pharaoh",
    "split_lines",
    "tune_em",
    "tune_prior",
]
