"""Time attention's forward plus backward pass: the library by hand against PyTorch autograd.

    python benchmarks/bench_backward.py                 # L = S = 1024, d = 64, float32
    python benchmarks/bench_backward.py --threads 1     # both on one thread

One training step of an attention layer needs the output and then the three
gradients dQ, dK, dV from dO. This script times that pair of calls, on the
same float32 inputs, for

- ``library``: ``scaled_dot_product_attention`` then
  ``scaled_dot_product_attention_backward`` (which recomputes the weights);
- ``blockwise``: ``blockwise_attention(..., return_logsumexp=True)`` then
  ``blockwise_attention_backward`` (512 x 512 blocks; no (L, S) array);
- ``torch``: ``torch.nn.functional.scaled_dot_product_attention`` on the CPU
  followed by ``.backward(dO)`` (autograd), if torch is installed.

NumPy's BLAS and torch get the same number of threads (``--threads``, default:
the number of logical CPUs), set before either library starts. It prints the
medians, the ratio of each to torch's median (measured in the same run), the
largest difference of the gradients from torch's, and whether the goal (the
library no slower than torch, ratio <= 1) is met, without a mask and causal.
"""

import argparse
import os
import sys

from _threads import threads_from_argv  # noqa: E402  (before NumPy: BLAS reads it once)

THREADS = threads_from_argv(os.cpu_count() or 1)

import numpy as np  # noqa: E402  (after the thread settings)

from _common import describe_machine, median_times  # noqa: E402
from attention_lib import (
    blockwise_attention,
    blockwise_attention_backward,  # noqa: E402
    scaled_dot_product_attention,
    scaled_dot_product_attention_backward,
)

try:
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(int(THREADS))
except ImportError:
    torch = None

GOAL = 1.0  # library time / torch time


def implementations(q, k, v, d_out, is_causal):
    def library():
        out = scaled_dot_product_attention(q, k, v, is_causal=is_causal)
        grads = scaled_dot_product_attention_backward(d_out, q, k, v, is_causal=is_causal)
        return out, grads

    def blockwise():
        out, lse = blockwise_attention(
            q, k, v, is_causal=is_causal, block_size=512, return_logsumexp=True
        )
        grads = blockwise_attention_backward(
            d_out, q, k, v, out, lse, is_causal=is_causal, block_size=512
        )
        return out, grads

    fns = {"library": library, "blockwise": blockwise}
    if torch is not None:
        tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
        t_out = torch.from_numpy(d_out)

        def torch_autograd():
            for t in (tq, tk, tv):
                t.grad = None
            out = F.scaled_dot_product_attention(tq, tk, tv, is_causal=is_causal)
            out.backward(t_out)
            return out, tuple(t.grad.numpy() for t in (tq, tk, tv))

        fns["torch"] = torch_autograd
    return fns


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=1024, help="L = S (default: %(default)s)")
    parser.add_argument("--dim", type=int, default=64, help="d (default: %(default)s)")
    parser.add_argument(
        "--repeats", type=int, default=15, help="minimum timed rounds (default: %(default)s)"
    )
    parser.add_argument(
        "--threads", default=THREADS, help="threads for BLAS and torch (default: logical CPUs)"
    )
    args = parser.parse_args(argv)

    print(describe_machine(torch))
    if torch is None:
        print("torch is not installed: nothing to compare with, ratios skipped")
    L, d = args.length, args.dim
    print(
        f"L = S = {L}, d = {d}, float32; forward + backward (dQ, dK, dV); "
        f"{THREADS} thread(s) for NumPy's BLAS and for torch"
    )
    print(
        f"medians over >= {args.repeats} rounds (NumPy ones in turns, torch "
        f"on its own after them); 'x torch' = median / torch's median;"
    )
    print("'max |grad diff|' = largest difference of dQ, dK, dV from torch's\n")
    header = (
        f"{'mask':<7} {'implementation':<10} {'median ms':>10} "
        f"{'x torch':>8} {'max |grad diff|':>16}"
    )
    print(header)
    print("-" * len(header))
    verdicts = []
    for is_causal in (False, True):
        rng = np.random.default_rng(0)
        q, k, v, d_out = (rng.standard_normal((L, d)).astype(np.float32) for _ in range(4))
        fns = implementations(q, k, v, d_out, is_causal)
        results = {name: fn() for name, fn in fns.items()}  # warm-up, and checks
        torch_fn = fns.pop("torch", None)
        medians, _ = median_times(fns, args.repeats, min_seconds=2.0)
        if torch_fn is not None:
            medians.update(median_times({"torch": torch_fn}, args.repeats, min_seconds=1.0)[0])
            fns["torch"] = torch_fn
        for name in fns:
            if torch_fn is not None:
                ratio = f"{medians[name] / medians['torch']:.2f}"
                diff = max(
                    float(np.max(np.abs(a - b)))
                    for a, b in zip(results[name][1], results["torch"][1])
                )
                diff = f"{diff:.1e}"
            else:
                ratio = diff = "n/a"
            mask = "causal" if is_causal else "none"
            print(
                f"{mask if name == 'library' else '':<7} {name:<10} "
                f"{medians[name] * 1e3:>10.2f} {ratio:>8} {diff:>16}"
            )
        if torch_fn is not None:
            verdicts.append((mask, medians["library"] / medians["torch"]))
        sys.stdout.flush()
    print()
    for mask, ratio in verdicts:
        print(
            f"goal: library / torch (mask: {mask}) = {ratio:.2f} (<= {GOAL}): "
            f"{'met' if ratio <= GOAL else 'NOT met'}"
        )


if __name__ == "__main__":
    main()
