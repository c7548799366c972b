"""Additive versus dot-product scoring: parameters, multiply-adds and time.

    python benchmarks/bench_scoring.py            # the full table (about 20 s)
    python benchmarks/bench_scoring.py --quick    # widths 16 and 64 only

The source tutorials say that dot-product attention is faster and smaller
than the additive attention of Bahdanau et al.; chapter 4 counts why, and
this script measures it. For L queries (decoder states) scored against
S keys (encoder states), all of width n, with an additive hidden layer of
d_a = n units, it compares

- ``additive``: ``attention_lib.additive_scores(H, s, W, v)``, which computes
  ``v_a^T tanh(W_a s_i + U_a h_j)`` for every pair (its ``W`` is 2n x d_a);
- ``dot``: the scores of scaled dot-product attention, ``s @ H.T / sqrt(n)``.

For each width it prints the parameters of the scoring function, the
multiply-adds, the tanh evaluations and the size of the largest intermediate
array (all counted from the shapes, so they are the same on every machine),
the median time of each (the two run in turns, in a shuffled order), and the
time ratio additive / dot measured in the same run.
"""

import argparse

import numpy as np

from _common import describe_machine, median_times
from attention_lib import additive_scores


def counts(L, S, n, d_a):
    """Parameters, multiply-adds and largest intermediate, from the shapes alone."""
    additive = {
        "params": 2 * n * d_a + d_a,  # W_a, U_a (d_a x n each), v_a (d_a)
        "madds": (S + L) * n * d_a + L * S * d_a,  # keys, queries, hidden @ v_a
        "tanh": L * S * d_a,  # one per entry of the hidden layer
        "largest": L * S * d_a,  # the (L, S, d_a) hidden layer
    }
    dot = {"params": 0, "madds": L * S * n, "tanh": 0, "largest": L * S}
    return additive, dot


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--widths",
        type=int,
        nargs="+",
        default=[16, 64, 256, 1024],
        help="widths n = d_a (default: %(default)s)",
    )
    parser.add_argument("--keys", type=int, default=50, help="S (default: %(default)s)")
    parser.add_argument("--queries", type=int, default=50, help="L (default: %(default)s)")
    parser.add_argument(
        "--repeats",
        type=int,
        default=21,
        help="minimum timed rounds per width (default: %(default)s)",
    )
    parser.add_argument("--quick", action="store_true", help="widths 16 and 64, 5 rounds")
    args = parser.parse_args(argv)
    if args.quick:
        args.widths, args.repeats = [16, 64], 5
    L, S = args.queries, args.keys

    print(describe_machine())
    print(
        f"L = {L} queries scored against S = {S} keys, float64, d_a = n; "
        f"times are medians over >= {args.repeats} rounds, run in turns"
    )
    print("'madds' = multiply-adds; 'largest' = entries of the largest intermediate array\n")
    header = (
        f"{'n':>5}  {'scoring':<9}{'params':>10}{'madds':>12}{'tanh':>11}"
        f"{'largest':>11}"
        f"{'median ms':>11}{'time x':>8}"
    )
    print(header)
    print("-" * len(header))
    for n in args.widths:
        d_a = n
        rng = np.random.default_rng(n)
        H = rng.standard_normal((S, n))  # (S, n) keys: encoder states
        s = rng.standard_normal((L, n))  # (L, n) queries: decoder states
        W = rng.standard_normal((2 * n, d_a)) / np.sqrt(n)  # (2n, d_a)
        v = rng.standard_normal(d_a)  # (d_a,)
        fns = {"additive": lambda: additive_scores(H, s, W, v), "dot": lambda: s @ H.T / np.sqrt(n)}
        # One untimed call each (a warm-up), which also checks that both
        # give one score per (query, key) pair.
        assert all(fn().shape == (L, S) for fn in fns.values())
        medians, _ = median_times(fns, args.repeats, min_seconds=1.0)
        additive, dot = counts(L, S, n, d_a)
        for name, c in (("additive", additive), ("dot", dot)):
            ratio = medians[name] / medians["dot"]
            print(
                f"{n if name == 'additive' else '':>5}  {name:<9}{c['params']:>10,}"
                f"{c['madds']:>12,}{c['tanh']:>11,}{c['largest']:>11,}"
                f"{medians[name] * 1e3:>11.3f}{ratio:>8.1f}"
            )
    print("\n'time x' = median / median of dot-product scoring at the same width, same run")


if __name__ == "__main__":
    main()
