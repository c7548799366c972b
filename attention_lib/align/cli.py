"""The command line: ``python -m attention_lib.align`` (see :mod:`attention_lib.align`).

Input is read and checked in full first, so that a bad file gives an error
instead of half an output; then each pair's links are written, and flushed,
as soon as the pair is aligned. ``--method em`` must see the whole corpus
before it can align anything: it trains first, then decodes pair by pair,
writing each line as soon as it is decoded.
"""

import argparse
import sys

import numpy as np

from .._cli import int_in, read_text, write_flushed
from ..data.paths import DataFileError
from .attention import DEFAULT_METHOD, DEFAULT_PRIOR, METHODS, Aligner
from .em_aligner import DEFAULT_ITERATIONS, DEFAULT_TENSION, EMAligner
from .scoring import format_pharaoh, split_lines

CLI_METHODS = METHODS + ("em",)

#: Most word pairs (English words x French words) one line may hold. Every
#: method holds arrays of that many entries for the line (the attention
#: aligners an (L, S) score matrix, EM the line's table cells, several times
#: over); 4 million is about 2,000 words a side, far beyond any sentence, and
#: keeps one line to a few hundred MB. Longer lines are refused up front.
MAX_WORD_PAIRS = 4_000_000

#: Most EM iterations ``--iterations`` accepts. IBM Model 1's likelihood has
#: converged long before (the tuned default is a handful, and tune_em searches
#: 0 to EM_MAX_ITERATIONS); each iteration passes over the whole corpus, so a
#: larger number is a typo that would run for hours, refused up front.
MAX_ITERATIONS = 1000


def _read_lines(parser, path, flag, stdin):
    """The lines of a file (or of standard input for ``-``), as UTF-8 text."""
    name = "standard input" if path == "-" else path
    lines = split_lines(read_text(parser, path, stdin, flag))
    if not lines:
        parser.error(f"{flag} {name} is empty: expected one tokenised sentence per line")
    return lines


def main(argv=None, stdin=None, stdout=None):
    """Align a parallel corpus and print Pharaoh links (see :mod:`attention_lib.align`).

    Parameters
    ----------
    argv : list of str, optional
        The arguments (default: ``sys.argv[1:]``).
    stdin, stdout : file, optional
        Where ``-`` reads from and where the links go (default: the
        process's standard input and output).

    Returns
    -------
    int
        0 on success. Bad arguments or input (including a line of more than
        :data:`MAX_WORD_PAIRS` word pairs) exit with status 2 and a message,
        before anything is written; unreadable data files with status 1.
        :data:`EXIT_BROKEN_PIPE` (141), without a traceback, when standard
        output is closed early (``| head``).
    """
    stdin = sys.stdin if stdin is None else stdin
    stdout = sys.stdout if stdout is None else stdout
    parser = argparse.ArgumentParser(
        prog="python -m attention_lib.align",
        description="Word-align tokenised English/French sentence pairs with "
        "attention over aligned word embeddings, or with IBM Model 1 "
        "trained by EM on the given corpus (--method em). Prints one "
        "line of 0-based English-French links (i-j) per pair.",
    )
    parser.add_argument(
        "--src",
        required=True,
        metavar="EN_FILE",
        help="English side, one tokenised sentence per line (UTF-8; - reads standard input)",
    )
    parser.add_argument(
        "--tgt",
        required=True,
        metavar="FR_FILE",
        help="French side, same number of lines (- reads standard input)",
    )
    parser.add_argument(
        "--method",
        choices=CLI_METHODS,
        default=DEFAULT_METHOD,
        help=f"aligner (default {DEFAULT_METHOD})",
    )
    parser.add_argument(
        "--prior",
        type=float,
        default=None,
        help=f"diagonal prior >= 0: lambda in cosine units for the "
        f"attention methods (default {DEFAULT_PRIOR}), the "
        f"tension kappa for em (default {DEFAULT_TENSION})",
    )
    parser.add_argument(
        "--iterations",
        type=int_in(1, MAX_ITERATIONS),
        default=None,
        metavar="N",
        help=f"EM iterations, --method em only (default {DEFAULT_ITERATIONS}, "
        f"at most {MAX_ITERATIONS})",
    )
    args = parser.parse_args(argv)
    em = args.method == "em"
    prior = args.prior
    if prior is None:
        prior = DEFAULT_TENSION if em else DEFAULT_PRIOR
    if not np.isfinite(prior) or prior < 0:
        parser.error(f"--prior must be a finite number >= 0, got {args.prior}")
    if args.iterations is not None and not em:
        parser.error("--iterations applies to --method em only")
    if args.src == "-" and args.tgt == "-":
        parser.error("--src and --tgt cannot both read standard input: give one a file")
    english = _read_lines(parser, args.src, "--src", stdin)
    french = _read_lines(parser, args.tgt, "--tgt", stdin)
    if len(english) != len(french):
        parser.error(
            f"--src {args.src} has {len(english)} lines but --tgt "
            f"{args.tgt} has {len(french)}: line k of one must be "
            "the translation of line k of the other"
        )
    for k, (en, fr) in enumerate(zip(english, french)):
        pairs = len(en.split()) * len(fr.split())
        if pairs > MAX_WORD_PAIRS:
            parser.error(
                f"line {k + 1} has {len(en.split()):,} English and "
                f"{len(fr.split()):,} French words, {pairs:,} word pairs to score; "
                f"the limit is {MAX_WORD_PAIRS:,} per line (about 2,000 words a "
                f"side): split it into sentences. Nothing was aligned."
            )
    try:
        if em:
            iterations = DEFAULT_ITERATIONS if args.iterations is None else args.iterations
            aligner = EMAligner(iterations, prior).fit(english, french)
            aligned = (aligner.align(k) for k in range(len(english)))
        else:
            aligner = Aligner(args.method, prior)
            aligned = (aligner.align(en, fr) for en, fr in zip(english, french))
    except DataFileError as err:
        parser.exit(1, f"{parser.prog}: error: {err}\n")
    return write_flushed(stdout, (format_pharaoh(links) + "\n" for links in aligned), parser.prog)
