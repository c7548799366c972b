"""Time per generated token with and without the KV cache, for the book's trained models.

    PYTHONPATH=. python benchmarks/bench_generation.py             # one BLAS thread
    PYTHONPATH=. python benchmarks/bench_generation.py --threads 2 --tokens 200

For each model that ``attention_lib.models.load_pretrained`` can load (chapter 12's
Shakespeare model; chapter 13's stories260K once the library has it, skipped
otherwise), greedy decoding from a short prompt, ``--tokens`` new tokens (default:
fill the context, at most 500):

- **with the cache**: ``model.generate(prompt, n, temperature=0)``, one forward pass
  of the prompt, then one token per step against the cached keys and values;
- **without**: every step runs the whole sequence so far through ``model.forward``
  and takes the last position's argmax (what generation costs with no cache).

It prints the median of ``--repeat`` runs of each, in milliseconds per token, their
ratio, the memory the cache holds at the end, and checks that the two give the same
tokens.
"""

import argparse

from _threads import threads_from_argv  # noqa: E402  (before NumPy: BLAS reads it once)

THREADS = threads_from_argv(1)

import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from _common import describe_machine  # noqa: E402
from attention_lib import DataFileError  # noqa: E402
from attention_lib.models import load_pretrained  # noqa: E402

PROMPTS = {"shakespeare": "ROMEO:\n", "stories260k": "Once upon a time"}


def without_cache(model, prompt, n):
    seq = np.asarray(prompt)[None]
    for _ in range(n):
        nxt = model.forward(seq)[:, -1].argmax(axis=-1)
        seq = np.concatenate([seq, nxt[:, None]], axis=1)
    return seq[0]


def cache_bytes(model, tokens):
    """Bytes the KV cache holds after ``tokens``, if the model exposes ``new_cache``."""
    if not hasattr(model, "new_cache"):
        return None
    cache = model.new_cache()
    model.forward(np.asarray(tokens)[None], cache)
    return sum(c.nbytes for c in cache)


def bench(name, tokens, repeat):
    try:
        model, tokenizer = load_pretrained(name)
    except DataFileError as err:
        print(f"{name}: skipped ({err})")
        return
    prompt = np.asarray(tokenizer.encode(PROMPTS[name]))
    n = min(tokens or 500, model.max_len - len(prompt))
    times = {"with cache": [], "without cache": []}
    outputs = {}
    for _ in range(repeat):
        for label, run in (
            ("with cache", lambda: model.generate(prompt, n, temperature=0)),
            ("without cache", lambda: without_cache(model, prompt, n)),
        ):
            t0 = time.perf_counter()
            outputs[label] = np.asarray(run())
            times[label].append(1e3 * (time.perf_counter() - t0) / n)
    same = np.array_equal(outputs["with cache"], outputs["without cache"])
    ms = {label: statistics.median(t) for label, t in times.items()}
    memory = cache_bytes(model, outputs["with cache"][:-1])
    print(f"\n{name}: {len(prompt)} prompt tokens + {n} new, greedy, median of {repeat} runs")
    for label, value in ms.items():
        print(f"   {label:<14} {value:8.2f} ms per token")
    print(f"   without / with: {ms['without cache'] / ms['with cache']:.1f}x; same tokens: {same}")
    if memory is not None:
        print(f"   cache after {len(outputs['with cache']) - 1} tokens: {memory / 1024:.0f} KiB")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", default="1", help="BLAS threads (default 1)")
    parser.add_argument(
        "--tokens",
        type=int,
        default=None,
        help="new tokens per run (default: fill the context, at most 500)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs of each (default 3)")
    parser.add_argument(
        "--model",
        choices=sorted(PROMPTS),
        action="append",
        help="only this model (repeatable; default both)",
    )
    args = parser.parse_args(argv)
    print(describe_machine(None))
    print(f"{THREADS} BLAS thread(s)")
    for name in args.model or sorted(PROMPTS):
        bench(name, args.tokens, args.repeat)


if __name__ == "__main__":
    main()
