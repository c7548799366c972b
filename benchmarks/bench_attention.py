"""Time attention implementations side by side, in one process, on the same inputs.

    python benchmarks/bench_attention.py              # the full table (under a minute)
    python benchmarks/bench_attention.py --quick      # L = S in {128, 512}: a smoke test

For L = S in {128, 512, 2048, 4096}, d = 64, float32 and float64, it times

- ``library``: ``attention_lib.scaled_dot_product_attention``;
- ``blockwise``: ``attention_lib.blockwise_attention`` (online softmax, 512 x 512 blocks);
- ``bare``: the bare NumPy kernel: matmul, max-subtracted exp, normalise, matmul,
  with no checks at all. Every ratio is relative to it;
- ``seeds``: the source articles' naive formulation (no max subtraction, ``exp``
  evaluated twice, every step out of place);
- ``torch``: ``torch.nn.functional.scaled_dot_product_attention`` on the CPU, if torch
  is installed (it is never a requirement; without it the column is skipped).

and prints the median time, the ratio to the bare kernel, the peak extra memory
(tracemalloc: it sees NumPy's arrays but not torch's, so torch shows "n/a"), and
the largest difference from the bare kernel's output. It ends by checking the
target: the library within 1.15x of the bare kernel at L = 2048, float32.
"""

import argparse
import sys

import numpy as np

from _common import MiB, describe_machine, median_times, peak_extra_memory
from attention_lib import blockwise_attention, scaled_dot_product_attention

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    torch = None

D = 64
TARGET_L, TARGET_DTYPE, TARGET_RATIO = 2048, np.float32, 1.15


def bare_kernel(q, k, v):
    """Attention with nothing but the arithmetic: no checks, no masks."""
    scores = (q * (1.0 / np.sqrt(q.shape[-1])).astype(q.dtype)) @ k.T  # matmul
    scores -= scores.max(axis=-1, keepdims=True)  # shift
    np.exp(scores, out=scores)  # exp
    scores /= scores.sum(axis=-1, keepdims=True)  # normalise
    return scores @ v  # matmul


def seeds_naive(q, k, v):
    """The source articles' formulation, kept as they wrote it (naive version).

    No max subtraction (it overflows for scores above ~88 in float32), the
    exponentials computed twice (once for the numerator, once for the
    denominator), and every step allocating a new (L, S) array.
    """
    scores = np.matmul(q, k.T) / np.sqrt(q.shape[-1])
    numerator = np.exp(scores)
    denominator = np.exp(scores).sum(axis=-1)
    weights = (numerator.T / denominator).T
    return np.matmul(weights, v)


def implementations(q, k, v):
    fns = {
        "bare": lambda: bare_kernel(q, k, v),
        "library": lambda: scaled_dot_product_attention(q, k, v),
        "blockwise": lambda: blockwise_attention(q, k, v, block_size=512),
        "seeds": lambda: seeds_naive(q, k, v),
    }
    if torch is not None:
        tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))  # no copies

        def torch_sdpa():
            with torch.inference_mode():
                return F.scaled_dot_product_attention(tq, tk, tv).numpy()

        fns["torch"] = torch_sdpa
    return fns


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        type=int,
        nargs="+",
        default=[128, 512, 2048, 4096],
        help="sequence lengths L = S (default: %(default)s)",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=11,
        help="minimum timed rounds per size (default: %(default)s)",
    )
    parser.add_argument("--quick", action="store_true", help="sizes 128 and 512 only, 3 rounds")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.repeats = [128, 512], 3

    print(describe_machine(torch))
    if torch is None:
        print("torch is not installed: the torch column is skipped")
    print(
        f"d = {D}; times are medians over >= {args.repeats} rounds, NumPy ones run in turns; "
        f"'x bare' = median / median of the bare kernel;"
    )
    print(
        "'peak MiB' = peak extra memory during one call (tracemalloc); "
        "'max |diff|' = largest difference from the bare kernel's output\n"
    )

    header = (
        f"{'dtype':<8} {'L=S':>5}  {'implementation':<10} {'median ms':>10} "
        f"{'x bare':>7} {'peak MiB':>9} {'max |diff|':>11}"
    )
    print(header)
    print("-" * len(header))
    ratios = {}
    for dtype in (np.float32, np.float64):
        for L in args.sizes:
            rng = np.random.default_rng(L)
            q, k, v = (rng.standard_normal((L, D)).astype(dtype) for _ in range(3))
            fns = implementations(q, k, v)
            reference = bare_kernel(q, k, v)
            outputs, peaks = {}, {}
            for name, fn in fns.items():  # one untimed call each: warm-up
                outputs[name], peaks[name] = peak_extra_memory(fn)
            # torch's threads and OpenBLAS's get in each other's way when
            # calls alternate, so torch is timed on its own, after the others.
            torch_fn = fns.pop("torch", None)
            medians, _ = median_times(fns, args.repeats, min_seconds=1.0)
            if torch_fn is not None:
                medians.update(median_times({"torch": torch_fn}, args.repeats, min_seconds=0.5)[0])
                fns["torch"] = torch_fn
            for name in fns:
                ratio = medians[name] / medians["bare"]
                ratios[(dtype, L, name)] = ratio
                peak = "n/a" if name == "torch" else f"{peaks[name] / MiB:.1f}"
                diff = np.max(np.abs(outputs[name] - reference))
                first = name == "bare"
                print(
                    f"{np.dtype(dtype).name if first else '':<8} "
                    f"{L if first else '':>5}  {name:<10} {medians[name] * 1e3:>10.2f} "
                    f"{ratio:>7.2f} {peak:>9} {diff:>11.1e}"
                )
            sys.stdout.flush()
        print()

    key = (TARGET_DTYPE, TARGET_L, "library")
    if key in ratios:
        ok = ratios[key] <= TARGET_RATIO
        print(
            f"target: library / bare at L = {TARGET_L}, float32 = {ratios[key]:.2f} "
            f"(<= {TARGET_RATIO}): {'met' if ok else 'NOT met'}"
        )


if __name__ == "__main__":
    main()
