"""How good are the aligned word vectors in data/? Two measures, printed.

    python benchmarks/embedding_quality.py            # about 10 s
    python benchmarks/embedding_quality.py --no-cli   # skip the command-line timing

1. The seeds' sentence pair (chapter 4): for each French word, the English
   word of the sentence whose vector is most similar (cosine). The reference
   prototype gets 13 of 14.
2. Word alignment on the 37 human-aligned Hansards pairs in
   data/hansards_trial/: precision, recall and AER (Och & Ney 2003) of each
   aligner in attention_lib.align, beside the published figures quoted in the
   dev set's README, then the grid search that chose the diagonal prior and
   its leave-one-out estimate.
3. The command line's speed on the dev set repeated 100 times (3,700 pairs).

data/README.md quotes this script's output.
"""

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from attention_lib import embed, load_embeddings, load_vocab, tokenize
from attention_lib.align import (
    ATTENTION_METHODS,
    DEFAULT_METHOD,
    DEFAULT_PRIOR,
    PRIOR_GRID,
    Aligner,
    alignment_scores,
    load_alignment_dev,
    tune_prior,
)

ENGLISH = "The agreement on the European Economic Area was signed in August 1992 ."
FRENCH = "L accord sur la zone économique européenne a été signé en août 1992 ."
# the English word each French word translates ("a été" is "was")
RIGHT = [
    "the",
    "agreement",
    "on",
    "the",
    "area",
    "economic",
    "european",
    "was",
    "was",
    "signed",
    "in",
    "august",
    "1992",
    ".",
]

# AER on the shared task's test set (447 pairs), quoted in data/hansards_trial's
# source README; the statistical aligners were trained on ~1.1 M Hansards pairs.
PUBLISHED = [
    ("fast_align en->fr", 16.4),
    ("fast_align grow-diag", 10.5),
    ("GIZA++/Mgiza symmetrised", 5.9),
    ("awesome-align (fine-tuned mBERT)", 4.1),
]


def seed_pair_table():
    en, fr = tokenize(ENGLISH, load_vocab("en")), tokenize(FRENCH, load_vocab("fr"))
    cos = embed(fr, load_embeddings("fr")) @ embed(en, load_embeddings("en")).T
    print("1. The seeds' sentence pair: most similar English word for each French word")
    print(f"   {'French':<12} {'most similar':<14} {'cosine':>6}  {'second':<14} right?")
    hits = 0
    for j, word in enumerate(fr.words):
        first, second = np.argsort(-cos[j], kind="stable")[:2]
        ok = en.words[first].lower() == RIGHT[j]
        hits += ok
        note = "" if fr.known[j] else "  (not in the vocabulary)"
        print(
            f"   {word:<12} {en.words[first]:<14} {cos[j, first]:6.3f}  "
            f"{en.words[second]:<14} {'yes' if ok else 'NO'}{note}"
        )
    print(
        f"   {hits} of {len(fr.words)} French words have the right English word "
        "as their most similar\n"
    )
    return hits


def dev_set_table(pairs):
    sure, possible = [p.sure for p in pairs], [p.possible for p in pairs]
    vocab = {lang: load_vocab(lang) for lang in ("en", "fr")}
    n_en = sum(len(p.english) for p in pairs)
    n_fr = sum(len(p.french) for p in pairs)
    unk_en = sum(w.lower() not in vocab["en"] for p in pairs for w in p.english)
    unk_fr = sum(w.lower() not in vocab["fr"] for p in pairs for w in p.french)
    print(
        f"2. Word alignment, {len(pairs)} Hansards trial pairs ({n_en} English, "
        f"{n_fr} French tokens; not in the vocabulary: {unk_en} English, {unk_fr} French)"
    )
    print(f"   {'aligner':<34} {'lambda':>6} {'precision':>9} {'recall':>7} {'AER':>6}")
    rows = (
        [("diagonal", 0.0)]
        + [(m, 0.0) for m in ATTENTION_METHODS]
        + [(m, DEFAULT_PRIOR) for m in ATTENTION_METHODS]
    )
    for method, prior in rows:
        aligner = Aligner(method, prior)
        s = alignment_scores([aligner.align(p.english, p.french) for p in pairs], sure, possible)
        label = method + (
            "  (default)" if (method, prior) == (DEFAULT_METHOD, DEFAULT_PRIOR) else ""
        )
        lam = "-" if method == "diagonal" else f"{prior:.1f}"
        print(
            f"   {label:<34} {lam:>6} {100 * s.precision:8.1f}% {100 * s.recall:6.1f}% "
            f"{100 * s.aer:5.1f}%"
        )
    print("   published, for scale (task test set, trained on ~1.1 M sentence pairs):")
    for name, aer in PUBLISHED:
        print(f"   {name:<34} {'':>6} {'':>9} {'':>7} {aer:5.1f}%")
    print("   diagonal baseline on these 37 pairs, as published: 60.2%\n")

    best, scores, loo = tune_prior(pairs, DEFAULT_METHOD, PRIOR_GRID)
    print(f"   Choosing lambda for '{DEFAULT_METHOD}': AER (%) on all 37 pairs for each lambda")
    cells = [f"{lam:.1f}:{100 * s.aer:.1f}" for lam, s in scores.items()]
    for k in range(0, len(cells), 7):
        print("     " + "  ".join(cells[k : k + 7]))
    print(
        f"   lowest AER at lambda = {best} ({100 * scores[best].aer:.1f}%, chosen on the "
        f"data it is scored on); leave-one-out (lambda chosen on the other 36 pairs): "
        f"precision {100 * loo.precision:.1f}%, recall {100 * loo.recall:.1f}%, "
        f"AER {100 * loo.aer:.1f}%\n"
    )


def cli_speed(pairs, repeat=100):
    with tempfile.TemporaryDirectory() as tmp:
        en, fr = Path(tmp, "big.en"), Path(tmp, "big.fr")
        en.write_text("".join(" ".join(p.english) + "\n" for p in pairs) * repeat, encoding="utf8")
        fr.write_text("".join(" ".join(p.french) + "\n" for p in pairs) * repeat, encoding="utf8")
        start = time.perf_counter()
        result = subprocess.run(
            [sys.executable, "-m", "attention_lib.align", "--src", str(en), "--tgt", str(fr)],
            capture_output=True,
            text=True,
            check=True,
        )
        seconds = time.perf_counter() - start
    n = len(result.stdout.splitlines())
    print(
        f"3. Command line: python -m attention_lib.align on {n} sentence pairs "
        f"(the dev set x {repeat}): {seconds:.1f} s wall, start-up and data loading "
        f"included ({n / seconds:,.0f} pairs/s)"
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-cli", action="store_true", help="skip the CLI timing")
    args = parser.parse_args(argv)
    seed_pair_table()
    pairs = load_alignment_dev()
    dev_set_table(pairs)
    if not args.no_cli:
        cli_speed(pairs)


if __name__ == "__main__":
    main()
