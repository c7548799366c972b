"""Time one training step of chapter 9's model: the library by hand against PyTorch eager.

    PYTHONPATH=. python benchmarks/bench_training.py              # one thread each
    PYTHONPATH=. python benchmarks/bench_training.py --threads 2
    PYTHONPATH=. python benchmarks/bench_training.py --full       # with feed-forward halves
    PYTHONPATH=. python benchmarks/bench_training.py --shakespeare --threads 2   # chapter 11's

A step is what chapter 9's training loop does once: a forward pass of a
batch of 32 sequences of 24 tokens through ``TinyGPT`` (V = 32, d_model = 32,
one head, two layers, rotary positions, attention-only blocks as in the
chapter; ``--full`` adds the feed-forward halves with d_ff = 128), the
cross-entropy on the predictable positions, the backward pass and one Adam
update. The same model is written with PyTorch's modules and functions (the
same weights, float64 like the chapter, autograd, ``torch.optim.Adam``) and
timed in the same run with the same number of threads.

It prints the median time of a step for each, their ratio, the largest
difference between the two models' losses after the timed steps (they train
in lockstep from the same weights on the same batches), and where the time
goes: the median of each phase (forward, loss, backward, Adam) for both.
Goal: the NumPy step no slower than PyTorch's (ratio <= 1).
"""

import argparse

from _threads import threads_from_argv  # noqa: E402  (before NumPy: BLAS reads it once)

THREADS = threads_from_argv(1)

import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from _common import describe_machine  # noqa: E402
from attention_lib import TinyGPT  # noqa: E402
from attention_lib.nn import Adam, softmax_cross_entropy  # noqa: E402

#: The clock every time is read from (``--cpu-time``: the process's CPU time).
now = time.perf_counter

try:
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(int(THREADS))
except ImportError:
    torch = None

V, T, BATCH, D, LR = 32, 24, 32, 32, 3e-3
GOAL = 1.0


def batches(n, seed=0):
    """n batches of the chapter's task: tokens (B, T) and the predictable positions."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        tokens = np.empty((BATCH, T), dtype=np.int64)
        where = np.zeros((BATCH, T - 1), dtype=bool)
        for i in range(BATCH):
            m = rng.integers(4, T // 2 + 1)
            a = rng.integers(0, T - 2 * m + 1)
            fresh = rng.choice(V, size=T - m, replace=False)
            tokens[i] = np.concatenate([fresh[: a + m], fresh[a : a + m], fresh[a + m :]])
            where[i, a + m : a + 2 * m - 1] = True
        out.append((tokens, where))
    return out


class NumpyStep:
    def __init__(self, full):
        self.model = TinyGPT(
            n_vocab=V,
            d_model=D,
            n_heads=1,
            n_layers=2,
            d_ff=4 * D,
            max_len=T,
            rng=np.random.default_rng(6),
            positions="rotary",
            attention_only=not full,
        )
        self.opt = Adam(self.model.layers(), lr=LR)

    def __call__(self, tokens, where, clock):
        t0 = now()
        logits = self.model.forward(tokens)
        t1 = now()
        loss, d = softmax_cross_entropy(logits[:, :-1][where], tokens[:, 1:][where])
        d_logits = np.zeros_like(logits)
        d_logits[:, :-1][where] = d
        t2 = now()
        self.model.backward(d_logits)
        t3 = now()
        self.opt.step()
        t4 = now()
        clock.append((t1 - t0, t2 - t1, t3 - t2, t4 - t3))
        return loss


def _rotary(x):
    d = x.shape[-1]
    angles = torch.tensor(np.arange(T)[:, None] * 10000.0 ** (-np.arange(0, d, 2) / d))
    cos, sin = torch.cos(angles), torch.sin(angles)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], -1).flatten(-2)


if torch is not None:

    class TorchGPT(torch.nn.Module):
        """The same model in PyTorch modules, initialised from the NumPy model's weights."""

        def __init__(self, model):
            super().__init__()
            self.full = not model.blocks[0].attention_only
            P = torch.nn.Parameter
            self.layers = torch.nn.ModuleList()
            self.params = torch.nn.ParameterList(
                [
                    P(torch.tensor(a.copy()))
                    for layer in model.layers()
                    for a in layer.params.values()
                ]
            )

        def forward(self, tokens):
            p = iter(self.params)
            x = next(p)[tokens]  # token embedding
            for _ in range(2):
                gamma, beta = next(p), next(p)
                h = F.layer_norm(x, (D,), gamma, beta, 1e-5)
                W_q, b_q, W_k, b_k, W_v, b_v, W_o, b_o = (next(p) for _ in range(8))
                q, k, v = (
                    (h @ W + b).reshape(BATCH, T, 1, D).transpose(1, 2)
                    for W, b in ((W_q, b_q), (W_k, b_k), (W_v, b_v))
                )
                ctx = F.scaled_dot_product_attention(_rotary(q), _rotary(k), v, is_causal=True)
                x = x + ctx.transpose(1, 2).reshape(BATCH, T, D) @ W_o + b_o
                if self.full:
                    g2, b2, W1, b1, W2, bb2 = (next(p) for _ in range(6))
                    h = F.gelu(F.layer_norm(x, (D,), g2, b2, 1e-5) @ W1 + b1)
                    x = x + h @ W2 + bb2
            gamma, beta, W, b = next(p), next(p), next(p), next(p)
            return F.layer_norm(x, (D,), gamma, beta, 1e-5) @ W + b

    class TorchStep:
        def __init__(self, model):
            self.model = TorchGPT(model)
            self.opt = torch.optim.Adam(self.model.parameters(), lr=LR, eps=1e-8)

        def __call__(self, tokens, where, clock):
            tokens, where = torch.from_numpy(tokens), torch.from_numpy(where)
            t0 = now()
            logits = self.model(tokens)
            t1 = now()
            loss = F.cross_entropy(logits[:, :-1][where], tokens[:, 1:][where])
            t2 = now()
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            t3 = now()
            self.opt.step()
            t4 = now()
            clock.append((t1 - t0, t2 - t1, t3 - t2, t4 - t3))
            return loss.item()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--threads", default="1", help="threads for NumPy's BLAS and for torch (default 1)"
    )
    parser.add_argument(
        "--steps", type=int, default=None, help="timed steps (default 300; 10 with --shakespeare)"
    )
    parser.add_argument(
        "--cpu-time",
        action="store_true",
        help="time the process's CPU time instead of the wall clock: on a "
        "machine loaded by other work, with one thread",
    )
    parser.add_argument(
        "--full", action="store_true", help="blocks with their feed-forward halves (d_ff = 128)"
    )
    parser.add_argument(
        "--shakespeare",
        action="store_true",
        help="chapter 11's model instead (benchmarks/_shakespeare_step.py)",
    )
    args = parser.parse_args(argv)
    global now
    if args.cpu_time:
        now = time.process_time
    print(describe_machine(torch))
    if args.shakespeare:
        import _shakespeare_step

        return _shakespeare_step.run(torch, args.steps or 10, THREADS, GOAL)
    args.steps = args.steps or 300
    kind = "full blocks (d_ff = 128)" if args.full else "attention-only blocks"
    print(
        f"TinyGPT: V = {V}, T = {T}, batch {BATCH}, d_model = {D}, 1 head, 2 layers, "
        f"rotary, {kind}, float64; one step = forward, loss, backward, Adam"
    )
    ours = NumpyStep(args.full)
    steps = {"numpy (attention_lib)": ours}
    if torch is None:
        print("torch is not installed: timing the library alone, ratio skipped")
    else:
        steps["torch eager"] = TorchStep(ours.model)
    data = batches(args.steps + 20)
    clocks = {name: [] for name in steps}
    losses = {name: [] for name in steps}
    for i, (tokens, where) in enumerate(data):  # in turns, step by step
        for name, step in steps.items():
            clock = clocks[name] if i >= 20 else []  # 20 warm-up steps
            losses[name].append(step(tokens, where, clock))
    print(f"medians over {args.steps} steps after 20 warm-up steps, the two in turns\n")
    header = f"{'':<22} {'step ms':>8} {'forward':>8} {'loss':>8} {'backward':>9} {'Adam':>8}"
    print(header)
    print("-" * len(header))
    medians = {}
    for name, clock in clocks.items():
        phases = [1e3 * statistics.median(c[j] for c in clock) for j in range(4)]
        medians[name] = 1e3 * statistics.median(sum(c) for c in clock)
        print(
            f"{name:<22} {medians[name]:8.2f} {phases[0]:8.2f} {phases[1]:8.2f} "
            f"{phases[2]:9.2f} {phases[3]:8.2f}"
        )
    if torch is not None:
        gap = max(abs(a - b) for a, b in zip(*losses.values()))
        ratio = medians["numpy (attention_lib)"] / medians["torch eager"]
        print(f"\nlargest loss difference over the {len(data)} steps: {gap:.1e}")
        print(
            f"goal: numpy / torch = {ratio:.2f} (<= {GOAL}): "
            f"{'met' if ratio <= GOAL else 'NOT met'}"
        )


if __name__ == "__main__":
    main()
