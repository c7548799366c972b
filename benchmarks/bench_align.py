"""Speed and memory of the EM aligner: ``python -m attention_lib.align --method em``.

    python benchmarks/bench_align.py            # speed on 10,000 pairs, about 30 s
    python benchmarks/bench_align.py --pairs 2000
    python benchmarks/bench_align.py --memory   # peak memory at 10,000 and 100,000 pairs

The goal (issue 13): 10,000 sentence pairs aligned, EM iterations included, in
under 30 s on 2 cores. The only parallel text here is the 37 development
pairs, so the corpora are made from them, two ways:

* ``resampled``: 10,000 pairs drawn with replacement from the 37 (seed 0):
  real sentence lengths, but a small vocabulary, hence a small table;
* ``noised``: the same, with each token replaced, with probability 0.3, by a
  word drawn uniformly from the 15,000 most frequent of its language's
  vocabulary (seed 1), so that the translation table grows to millions of
  word pairs, as with a real corpus of that size.

**Memory** (``--memory``, issue 20): the command line runs on both corpora at
10,000 and at 100,000 pairs, each in a fresh process, and the peak resident
set size (VmHWM) is reported above that process's size once the
library and the embeddings are loaded, per sentence pair too; plus the
resampled 10,000 pairs with one 50,000-character token added, which must cost
no more than without it (memory must not grow with the longest token). One EM
iteration: the iterations reuse the same arrays, so more do not add memory.
The resampled corpus measures what every pair costs; the noised one adds a
translation table of millions of cells (about 300 per pair), which a real
corpus, whose vocabulary grows more slowly, would not.

For each: the number of tokens and table cells, the time of the whole command
line run in this process (reading the files, tokenising, building the
table, the EM iterations, decoding and writing every line), pairs per second,
and the time of one EM iteration (both directions). Timings are single runs
on a shared machine: noisy, and the first lines say what the machine was
doing.
"""

import argparse
import io
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import describe_machine  # noqa: E402

from attention_lib import load_vocab  # noqa: E402
from attention_lib.align import DEFAULT_ITERATIONS, EMAligner, load_alignment_dev, main  # noqa: E402


def make_corpus(n_pairs, noise):
    pairs = load_alignment_dev()
    picks = np.random.default_rng(0).integers(len(pairs), size=n_pairs)
    english = [list(pairs[k].english) for k in picks]
    french = [list(pairs[k].french) for k in picks]
    if noise:
        rng = np.random.default_rng(1)
        for lang, side in (("en", english), ("fr", french)):
            words = sorted(load_vocab(lang), key=load_vocab(lang).get)[:15000]
            for sentence in side:
                for t in np.flatnonzero(rng.random(len(sentence)) < noise):
                    sentence[t] = words[rng.integers(len(words))]
    return [" ".join(s) for s in english], [" ".join(s) for s in french]


def run(name, english, french):
    with tempfile.TemporaryDirectory() as tmp:
        src, tgt = Path(tmp, "c.en"), Path(tmp, "c.fr")
        src.write_text("\n".join(english) + "\n", encoding="utf8")
        tgt.write_text("\n".join(french) + "\n", encoding="utf8")
        out = io.StringIO()
        start, cpu = time.perf_counter(), time.process_time()
        main(["--src", str(src), "--tgt", str(tgt), "--method", "em"], stdout=out)
        total, cpu = time.perf_counter() - start, time.process_time() - cpu
    assert out.getvalue().count("\n") == len(english)
    aligner = EMAligner(iterations=0).fit(english, french)
    fr2en, en2fr = aligner.models
    start = time.perf_counter()
    for _ in range(3):
        fr2en.step()
        en2fr.step()
    per_iteration = (time.perf_counter() - start) / 3
    tokens = sum(len(s.split()) for s in english) + sum(len(s.split()) for s in french)
    cells = fr2en.n_cells + en2fr.n_cells
    print(
        f"{name:<10} {len(english):>7,} {tokens:>9,} {cells:>11,} {total:>8.1f} "
        f"{cpu:>6.1f} {len(english) / total:>8.0f} {per_iteration:>11.2f}"
    )
    return total, cpu


def _peak_kib():
    """Peak resident set size of this process, in KiB.

    Linux's VmHWM belongs to the address space, which starts afresh at exec;
    ``ru_maxrss`` would also count the parent's pages at the fork.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux


def child_memory(src, tgt):
    """In a fresh process: peak RSS of the command line above the loaded library."""
    from attention_lib import load_embeddings

    for lang in ("en", "fr"):
        load_vocab(lang), load_embeddings(lang)  # the data every run loads
    before = _peak_kib()
    with open(os.devnull, "w") as sink:
        main(["--src", src, "--tgt", tgt, "--method", "em", "--iterations", "1"], stdout=sink)
    print(before, _peak_kib())


def measure_memory(sizes=(10_000, 100_000)):
    print(
        "peak resident memory of `python -m attention_lib.align --method em "
        "--iterations 1`, each in a fresh process, above the process with the library "
        "and embeddings loaded\n"
    )
    print(
        f"{'corpus':<34} {'pairs':>8} {'baseline MiB':>13} {'peak MiB':>9} "
        f"{'above MiB':>10} {'KiB/pair':>9}"
    )
    print("-" * 88)
    rows = {}
    cases = (
        [("resampled", n, 0.0, None) for n in sizes]
        + [("noised", n, 0.3, None) for n in sizes]
        + [("resampled + a 50,000-char token", sizes[0], 0.0, 50_000)]
    )
    for name, n, noise, long_token in cases:
        english, french = make_corpus(n, noise)
        if long_token:
            english[0] += " " + "x" * long_token
        with tempfile.TemporaryDirectory() as tmp:
            src, tgt = Path(tmp, "c.en"), Path(tmp, "c.fr")
            src.write_text("\n".join(english) + "\n", encoding="utf8")
            tgt.write_text("\n".join(french) + "\n", encoding="utf8")
            del english, french
            out = subprocess.run(
                [sys.executable, __file__, "--child-memory", str(src), str(tgt)],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        before, peak = (int(x) for x in out.split()[-2:])
        above = (peak - before) / 1024
        rows[name, n] = above
        print(
            f"{name:<34} {n:>8,} {before / 1024:>13.0f} {peak / 1024:>9.0f} {above:>10.0f} "
            f"{(peak - before) / n:>9.1f}",
            flush=True,
        )
    n1, n2 = sizes
    print()
    for name in ("resampled", "noised"):
        print(
            f"{name}: growth per pair between {n1:,} and {n2:,} pairs: "
            f"{(rows[name, n2] - rows[name, n1]) * 1024 / (n2 - n1):.1f} KiB"
        )
    print(
        f"a 50,000-character token adds "
        f"{rows['resampled + a 50,000-char token', n1] - rows['resampled', n1]:+.0f} MiB "
        f"to {n1:,} resampled pairs"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=10000)
    parser.add_argument("--memory", action="store_true", help="peak memory instead of speed")
    parser.add_argument("--child-memory", nargs=2, metavar=("SRC", "TGT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_memory:
        child_memory(*args.child_memory)
        sys.exit()
    if args.memory:
        print(describe_machine())
        measure_memory()
        sys.exit()
    print(describe_machine())
    print(
        f"--method em, {DEFAULT_ITERATIONS} EM iterations (the default); 'total s' is "
        "the wall time of the whole command line in this process, 'cpu s' its CPU "
        "time (all threads; on a busy machine wall time exceeds it by the time spent "
        "waiting for a core); 'pairs/s' = pairs / total s; 'iteration s' one EM "
        "iteration, both directions (wall, mean of 3)\n"
    )
    print(
        f"{'corpus':<10} {'pairs':>7} {'tokens':>9} {'table cells':>11} {'total s':>8} "
        f"{'cpu s':>6} {'pairs/s':>8} {'iteration s':>11}"
    )
    print("-" * 77)
    totals = [
        run(name, *make_corpus(args.pairs, noise))
        for name, noise in (("resampled", 0.0), ("noised", 0.3))
    ]
    verdict = "met" if max(t for t, _ in totals) < 30 else "NOT met"
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"\ntarget: {args.pairs:,} pairs in under 30 s (wall): slowest "
        f"{max(t for t, _ in totals):.1f} s wall, {max(c for _, c in totals):.1f} s CPU: "
        f"{verdict}\nload average after the run: {load} (1, 5, 15 min; 2 cores)"
    )
