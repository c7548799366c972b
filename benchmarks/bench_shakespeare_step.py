"""Time one training step of the Shakespeare model, phase by phase, and profile it.

    PYTHONPATH=. python benchmarks/bench_shakespeare_step.py            # 2 threads, 5 steps
    PYTHONPATH=. python benchmarks/bench_shakespeare_step.py --profile  # and cProfile's top 25

The step of ``python -m attention_lib.train.shakespeare``: TinyGPT
with d_model 192, 4 layers, 4 heads, d_ff 768, context 128, batch 32,
float32, dropout 0.1, learned positions; forward, cross-entropy, backward,
gradient clipping and Adam. Prints the median time of each phase over the
steps after one untimed step, and the dtype every parameter gradient came
out in (a float64 gradient means something promoted float32 to float64).
"""

import argparse

from _threads import threads_from_argv

THREADS = threads_from_argv(2)  # before NumPy is imported: OpenBLAS reads it once

import cProfile
import pstats
import statistics
import time

import numpy as np
from _common import describe_machine

from attention_lib.train.shakespeare import CONFIG, build_model
from attention_lib.nn import Adam, clip_grad_norm, softmax_cross_entropy

N_VOCAB = 65
now = time.perf_counter  # --cpu-time: time.process_time


def step(model, opt, layers, x, y, times):
    t = [now()]
    logits = model.forward(x)
    t.append(now())
    _, d = softmax_cross_entropy(logits.reshape(-1, N_VOCAB), y.reshape(-1))
    d = d.reshape(logits.shape).astype(np.float32, copy=False)
    t.append(now())
    model.backward(d)
    t.append(now())
    clip_grad_norm(layers, CONFIG["clip"])
    opt.step()
    t.append(now())
    for name, a, b in zip(("forward", "loss", "backward", "clip + Adam"), t, t[1:]):
        times.setdefault(name, []).append(b - a)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default=THREADS)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument(
        "--cpu-time",
        action="store_true",
        help="the process's CPU time instead of the wall clock (one thread)",
    )
    args = parser.parse_args()
    global now
    if args.cpu_time:
        now = time.process_time
    print(describe_machine())
    model = build_model(CONFIG, N_VOCAB).train(True)
    layers = model.layers()
    opt = Adam(layers, lr=1e-3)
    rng = np.random.default_rng(0)
    B, T = CONFIG["batch"], CONFIG["max_len"]
    x, y = rng.integers(0, N_VOCAB, (B, T)), rng.integers(0, N_VOCAB, (B, T))
    step(model, opt, layers, x, y, {})  # untimed: first-call costs
    times = {}
    profiler = cProfile.Profile(now) if args.profile else None
    for _ in range(args.steps):
        if profiler:
            profiler.enable()
        step(model, opt, layers, x, y, times)
        if profiler:
            profiler.disable()
    total = sum(statistics.median(v) for v in times.values())
    for name, v in times.items():
        print(f"{name:12s} {1e3 * statistics.median(v):8.1f} ms")
    print(f"{'step':12s} {1e3 * total:8.1f} ms (sum of the medians)")
    dtypes = sorted({str(g.dtype) for layer in layers for g in layer.grads.values()})
    print("gradient dtypes:", ", ".join(dtypes))
    if profiler:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
