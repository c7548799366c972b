"""One training step at T = 1,024: the tiled NumPy path against PyTorch's SDPA.

    python benchmarks/bench_long_context.py            # 5 rounds (a few minutes)
    python benchmarks/bench_long_context.py --rounds 1 # a smoke test

Chapter 11's model size (d_model 192, 4 heads, 4 blocks, d_ff 768, 65
characters, float32), one sequence of T = 1,024 characters, one thread each
(NumPy's BLAS and ``torch.set_num_threads(1)``). Two steps are compared, each
a forward pass, a loss and a backward pass:

- ``attention``: one causal attention layer alone, ``MultiHeadAttention(192,
  4, block_size=128)`` against the same projections around
  ``torch.nn.functional.scaled_dot_product_attention(is_causal=True)`` with
  autograd (PyTorch picks its CPU kernel: the flash kernel for a causal call
  without a mask);
- ``model``: the whole ``TinyGPT(..., block_size=128)`` against the same model
  written with PyTorch (same weights, SDPA in every block).

Time: the median over rounds in which both sides take turns. Peak memory: each
side runs once in a fresh child process, and its peak resident memory
(``ru_maxrss``) above what the process held just before the step is reported,
so that both are measured the same way (tracemalloc does not see torch).
Goals (issue 41): time ratio NumPy / PyTorch at most 1.5, peak-memory ratio at
most 1.5.
"""

import argparse
import json
import os
import resource
import subprocess
import sys

import numpy as np
from threadpoolctl import threadpool_limits

from _common import describe_machine, median_times
from attention_lib import TinyGPT
from attention_lib.nn import MultiHeadAttention, softmax_cross_entropy

T, V, D, H, LAYERS, FF = 1024, 65, 192, 4, 4, 768
GOAL = 1.5


def numpy_step(kind):
    """A function running one training step of our ``kind`` side."""
    rng = np.random.default_rng(0)
    if kind == "attention":
        att = MultiHeadAttention(D, H, rng, dtype=np.float32, block_size=128)
        x = rng.normal(size=(1, T, D)).astype(np.float32)
        return lambda: att.backward(att.forward(x, is_causal=True)), att
    model = TinyGPT(V, D, H, LAYERS, FF, T, rng, block_size=128)
    for layer in model.layers():
        for k in layer.params:
            layer.params[k] = layer.params[k].astype(np.float32)
    tokens = rng.integers(0, V, size=(1, T + 1))

    def step():
        logits = model.forward(tokens[:, :-1])
        _, d = softmax_cross_entropy(logits.reshape(-1, V), tokens[0, 1:])
        model.backward(d.reshape(logits.shape).astype(np.float32))

    return step, model


def torch_step(kind, ours):
    """The same step in PyTorch, with our side's weights."""
    import torch
    import torch.nn.functional as F

    def t(a):
        return torch.tensor(np.asarray(a, np.float32), requires_grad=True)

    def attention(p, x):
        q, k, v = (
            (x @ p["W_" + n] + p["b_" + n]).view(1, T, H, D // H).transpose(1, 2) for n in "QKV"
        )
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return o.transpose(1, 2).reshape(1, T, D) @ p["W_O"] + p["b_O"]

    if kind == "attention":
        p = {k: t(a) for k, a in ours.params.items()}
        x = torch.randn(1, T, D)
        return lambda: attention(p, x).backward(torch.ones(1, T, D))
    ps = [{k: t(a) for k, a in layer.params.items()} for layer in ours.layers()]
    tokens = torch.randint(0, V, (1, T + 1), generator=torch.Generator().manual_seed(0))

    def ln(p, x):
        return F.layer_norm(x, (D,), p["gamma"], p["beta"], 1e-5)

    def step():
        x = ps[0]["E"][tokens[:, :-1]] + ps[1]["E"][:T]
        for i in range(LAYERS):
            b = ps[2 + 5 * i : 7 + 5 * i]
            x = x + attention(b[1], ln(b[0], x))
            x = x + F.gelu(ln(b[2], x) @ b[3]["W"] + b[3]["b"]) @ b[4]["W"] + b[4]["b"]
        logits = ln(ps[-2], x) @ ps[-1]["W"] + ps[-1]["b"]
        F.cross_entropy(logits.view(-1, V), tokens[0, 1:]).backward()

    return step


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def child(kind, side):
    """In a fresh process: the peak resident memory one step adds, in bytes."""
    import torch

    torch.set_num_threads(1)
    with threadpool_limits(limits=1, user_api="blas"):
        step, ours = numpy_step(kind)
        if side == "torch":
            step = torch_step(kind, ours)
        before = rss_bytes()
        step()
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"extra": peak - before, "peak_rss": peak}))


def measure_memory(kind, side):
    out = subprocess.run(
        [sys.executable, __file__, "--child", kind, side],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.splitlines()[-1])["extra"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(*args.child)
    import torch

    torch.set_num_threads(1)
    print(describe_machine(torch))
    print(
        f"T = {T}, chapter 11's size (d_model {D}, {H} heads, {LAYERS} blocks), float32, "
        f"batch 1, one thread each; tiles of 128\n"
    )
    print(
        f"{'step':10s} {'numpy s':>8s} {'torch s':>8s} {'time x':>7s} "
        f"{'numpy MiB':>9s} {'torch MiB':>9s} {'memory x':>8s}"
    )
    for kind in ("attention", "model"):
        with threadpool_limits(limits=1, user_api="blas"):
            ours, layer = numpy_step(kind)
            theirs = torch_step(kind, layer)
            times, _ = median_times({"numpy": ours, "torch": theirs}, args.rounds)
        mem = {side: measure_memory(kind, side) for side in ("numpy", "torch")}
        tx, mx = times["numpy"] / times["torch"], mem["numpy"] / mem["torch"]
        print(
            f"{kind:10s} {times['numpy']:8.3f} {times['torch']:8.3f} {tx:7.2f} "
            f"{mem['numpy'] / 2**20:9.1f} {mem['torch'] / 2**20:9.1f} {mx:8.2f}"
            f"   goal <= {GOAL}: time {'met' if tx <= GOAL else 'NOT met'}, "
            f"memory {'met' if mx <= GOAL else 'NOT met'}"
        )


if __name__ == "__main__":
    main()
