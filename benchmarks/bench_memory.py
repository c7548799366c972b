"""Peak memory and time of plain and blockwise attention at a long sequence length.

    python benchmarks/bench_memory.py                  # L = S = 16384 (under a minute; 2.5 GiB)
    python benchmarks/bench_memory.py --length 4096    # a quick look

At L = S = 16384, d = 64, float32 the score matrix of
``scaled_dot_product_attention`` alone is 16384^2 x 4 bytes = 1 GiB.
``blockwise_attention`` visits the keys (and the queries) in blocks and holds
only a block x block piece of it. For both, without a mask and with
``is_causal=True``, this prints the peak extra memory of one call (tracemalloc:
every NumPy array allocated during the call, the inputs excluded), the median
time of the following calls, and the largest difference between the outputs.
"""

import argparse

import numpy as np

from _common import MiB, describe_machine, median_times, peak_extra_memory
from attention_lib import blockwise_attention, scaled_dot_product_attention


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=16384, help="L = S (default: %(default)s)")
    parser.add_argument("--dim", type=int, default=64, help="d (default: %(default)s)")
    parser.add_argument(
        "--block-size",
        type=int,
        default=512,
        help="block size for queries and keys (default: %(default)s)",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="timed calls after the measured one (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    L, d, block = args.length, args.dim, args.block_size

    print(describe_machine())
    scores_mib = L * L * np.dtype(np.float32).itemsize / MiB
    print(
        f"L = S = {L}, d = {d}, float32, blockwise block size {block} x {block}; "
        f"one (L, S) float32 score matrix = {scores_mib:.0f} MiB"
    )
    print(
        "'peak MiB': peak extra memory of one call (tracemalloc); "
        f"'median s': median of {args.repeats} further calls\n"
    )

    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((L, d)).astype(np.float32) for _ in range(3))
    header = (
        f"{'mask':<8} {'implementation':<10} {'peak MiB':>9} {'median s':>9} "
        f"{'memory x':>9} {'time x':>7} {'max |diff|':>11}"
    )
    print(header)
    print("-" * len(header))
    for is_causal in (False, True):
        fns = {
            "plain": lambda: scaled_dot_product_attention(q, k, v, is_causal=is_causal),
            "blockwise": lambda: blockwise_attention(
                q, k, v, is_causal=is_causal, block_size=block
            ),
        }
        outputs, peaks, medians = {}, {}, {}
        for name, fn in fns.items():
            outputs[name], peaks[name] = peak_extra_memory(fn)
        medians, _ = median_times(fns, args.repeats)
        diff = np.max(np.abs(outputs["plain"] - outputs["blockwise"]))
        for name in fns:
            print(
                f"{'causal' if is_causal else 'none':<8} {name:<10} "
                f"{peaks[name] / MiB:>9.1f} {medians[name]:>9.2f} "
                f"{peaks[name] / peaks['plain']:>9.4f} "
                f"{medians[name] / medians['plain']:>7.2f} "
                f"{diff if name == 'blockwise' else 0.0:>11.1e}"
            )
        del outputs
    print("\n'memory x' and 'time x': relative to the plain version with the same mask")


if __name__ == "__main__":
    main()
