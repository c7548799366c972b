"""A LoRA training step against a full finetuning step on chapter 11's Shakespeare model.

    PYTHONPATH=. python benchmarks/bench_finetune.py               # 1 thread, 7 rounds
    PYTHONPATH=. python benchmarks/bench_finetune.py --threads 2 --rounds 11

Both steps start from the committed model (:func:`attention_lib.models.pretrained.load_shakespeare`)
on the same batch of 32 windows of 128 characters (chapter 11's training
batch), dropout off: forward, cross-entropy, backward, gradient clipping to
norm 1, Adam. ``full`` trains all 1.83 million parameters; ``lora`` trains
rank-8 adapters on the query and value projections
(:func:`attention_lib.nn.lora.apply`) with the model frozen
(:func:`attention_lib.nn.lora.freeze`: the plain linear layers and the
embeddings compute no weight gradient). The two steps take turns, in a
shuffled order, after one untimed step each; the median of each phase is
printed, with the ratio LoRA / full (the goal of issue 54: at most 0.6).
"""

import argparse

from _threads import threads_from_argv

THREADS = threads_from_argv(1)  # before NumPy is imported: OpenBLAS reads it once

import random
import statistics
import time

import numpy as np
from _common import describe_machine

from attention_lib.models.pretrained import load_shakespeare
from attention_lib.nn import Adam, clip_grad_norm, lora, softmax_cross_entropy
from attention_lib.train.shakespeare import load_text, random_windows

PHASES = ("forward", "loss", "backward", "clip + Adam")


class Step:
    """One training step of the committed model, all of it or LoRA's adapters."""

    def __init__(self, kind):
        self.model, _ = load_shakespeare()
        self.model.train(False)
        if kind == "full":
            self.layers = self.model.layers()
        else:
            self.layers = lora.apply(self.model, ("q", "v"), rank=8, alpha=16)
            lora.freeze(self.model)
        self.opt = Adam(self.layers, lr=1e-4)
        self.trainable = sum(a.size for layer in self.layers for a in layer.params.values())
        self.times = []

    def __call__(self, x, y):
        t = [time.perf_counter()]
        logits = self.model.forward(x)
        t.append(time.perf_counter())
        _, d = softmax_cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        t.append(time.perf_counter())
        self.model.backward(d.reshape(logits.shape).astype(np.float32))
        t.append(time.perf_counter())
        clip_grad_norm(self.layers, 1.0)
        self.opt.step()
        t.append(time.perf_counter())
        self.times.append(np.diff(t))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", default="1", help="BLAS threads (default 1)")
    parser.add_argument("--rounds", type=int, default=7, help="timed steps of each (default 7)")
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args()
    print(describe_machine())
    _, train_ids, _ = load_text()
    x, y = random_windows(np.random.default_rng(0), train_ids, args.batch, 128)
    steps = {"full": Step("full"), "lora": Step("lora")}
    for s in steps.values():  # one untimed step each: first-call costs
        s(x, y)
        s.times.clear()
    rng, names = random.Random(0), list(steps)
    for _ in range(args.rounds):
        rng.shuffle(names)
        for name in names:
            steps[name](x, y)
    med = {
        name: [statistics.median(t[i] for t in s.times) for i in range(len(PHASES))]
        for name, s in steps.items()
    }
    print(f"\nbatch {args.batch} x 128 characters, median of {args.rounds} steps, seconds:")
    print(f"{'phase':>12} {'full':>9} {'lora r8':>9} {'ratio':>7}")
    for i, phase in enumerate(PHASES):
        f, lo = med["full"][i], med["lora"][i]
        print(f"{phase:>12} {f:9.4f} {lo:9.4f} {lo / f:7.2f}")
    total = {name: sum(v) for name, v in med.items()}
    ratio = total["lora"] / total["full"]
    print(f"{'step':>12} {total['full']:9.4f} {total['lora']:9.4f} {ratio:7.2f}")
    print(
        f"trainable parameters: full {steps['full'].trainable:,}, lora {steps['lora'].trainable:,}"
    )
    verdict = "met" if ratio <= 0.6 else f"not met: {ratio:.2f} is {ratio / 0.6:.2f}x the goal"
    print(f"goal (LoRA step <= 0.6 x the full step): {verdict}")


if __name__ == "__main__":
    main()
