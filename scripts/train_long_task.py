"""Train a small Transformer on a recall task whose answers lie up to 1,000 positions back.

Run as ``python scripts/train_long_task.py --context C`` with C = 128 or 1024
(chapter 18 reads both). It writes into ``data/checkpoints/longctx/``:

- ``long_task_<C>.npz``: the weights in float32 and the configuration as
  JSON (no pickles);
- ``long_task_<C>.json``: the manifest: configuration, command, sha256 of
  the weights, wall and CPU seconds, CPU, load average, the training curve,
  and the evaluation on held-out sequences.

The task (associative recall, as in the induction task of chapter 9, at a
distance). A sequence holds 1,024 positions of one filler token and
``pairs`` key-value pairs: a key token (64 kinds, each at most once a
sequence) followed by a value token (64 kinds). Each pair comes back later,
the same key followed by the same value, ``D`` positions after its first
appearance, with ``D`` drawn log-uniformly from 8 to 1,000. The value of the
second appearance is predictable, and only from the first: the model must
find the earlier occurrence of the key and copy the token after it. Only
those positions are scored (as in chapter 9), by cross-entropy.

The two runs have the same model (2 blocks of width 64, 2 heads, rotary
positions, tiled attention) and the same budget: the same sequences, 4 a
step, for the same number of steps. The 1,024-context model reads each
sequence whole; the 128-context model reads it as 8 windows of 128 and is
scored at the positions whose answer lies in the same window. Evaluated on
the same held-out sequences, the 128-context model runs with a sliding
window of 128 positions (it sees what it was trained to see). Accuracy is
reported by distance; the control shuffles the first 640 positions of each
held-out sequence and scores the answers that were there.

Seeded and deterministic on one machine.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attention_lib.data.paths import sha256, write_atomic  # noqa: E402
from attention_lib.models.gpt import TinyGPT  # noqa: E402
from attention_lib.nn import Adam, clip_grad_norm, softmax_cross_entropy  # noqa: E402
from attention_lib.train.evaluate_long_context import cpu_name  # noqa: E402
from attention_lib.train.long_context import checkpoint_dir  # noqa: E402
from attention_lib.train.shakespeare import learning_rate  # noqa: E402

CONFIG = {
    "length": 1024,
    "n_keys": 64,
    "n_values": 64,
    "pairs": 48,
    "min_distance": 8,
    "max_distance": 1000,
    "d_model": 64,
    "n_heads": 2,
    "n_layers": 2,
    "d_ff": 256,
    "positions": "rotary",
    "block_size": 128,
    "sequences_per_step": 4,
    "steps": 400,
    "lr": 3e-3,
    "min_lr": 1e-3,
    "warmup": 30,
    "betas": [0.9, 0.99],
    "clip": 1.0,
    "seed": 2026,
    "eval_sequences": 64,
    "eval_every": 100,
    "control_shuffled": 640,
}
FILLER = 0
BINS = [8, 16, 32, 64, 128, 256, 512, 1024]  # distance bins [a, b) of the evaluation


def n_vocab(cfg: dict) -> int:
    """The filler, the keys, the values."""
    return 1 + cfg["n_keys"] + cfg["n_values"]


def make_sequence(rng: np.random.Generator, cfg: dict) -> tuple[np.ndarray, np.ndarray]:
    """One sequence of ``length + 1`` tokens and, at each position ``q`` whose next
    token is a predictable value, the distance ``D`` back to that value's first
    appearance (0 elsewhere)."""
    L = cfg["length"]
    seq = np.full(L + 1, FILLER)
    dist = np.zeros(L + 1, dtype=np.int64)
    taken = np.zeros(L + 1, dtype=bool)
    keys = 1 + rng.choice(cfg["n_keys"], size=cfg["pairs"], replace=False)
    values = 1 + cfg["n_keys"] + rng.integers(0, cfg["n_values"], size=cfg["pairs"])
    low, high = np.log(cfg["min_distance"]), np.log(cfg["max_distance"])
    for k, v in zip(keys, values):
        while True:
            D = int(np.exp(rng.uniform(low, high)))
            q = int(rng.integers(D, L))  # the key again at q, its value at q + 1 <= L
            p = q - D
            if not (taken[p : p + 2].any() or taken[q : q + 2].any()):
                break
        taken[p : p + 2] = taken[q : q + 2] = True
        seq[[p, p + 1, q, q + 1]] = k, v, k, v
        dist[q] = D
    return seq, dist


def make_batch(rng, n, cfg):
    seqs, dists = zip(*(make_sequence(rng, cfg) for _ in range(n)))
    return np.stack(seqs), np.stack(dists)


def windows(seqs, dists, context):
    """Inputs, targets, the scored positions and their distances, in windows of ``context``.

    A position is scored if its answer's first appearance lies in its window.
    """
    L = seqs.shape[1] - 1
    x = seqs[:, :L].reshape(-1, context)
    y = seqs[:, 1:].reshape(-1, context)
    d = dists[:, :L].reshape(-1, context)
    scored = (d > 0) & (np.arange(context) - d >= 0)
    return x, y, scored, d


def build(cfg: dict, context: int, max_len: int | None = None, window=None) -> TinyGPT:
    model = TinyGPT(
        n_vocab(cfg),
        cfg["d_model"],
        cfg["n_heads"],
        cfg["n_layers"],
        cfg["d_ff"],
        context if max_len is None else max_len,
        np.random.default_rng(cfg["seed"]),
        positions=cfg["positions"],
        block_size=cfg["block_size"],
        window=window,
    )
    for layer in model.layers():
        for k in layer.params:
            layer.params[k] = layer.params[k].astype(np.float32)
    return model


def train_step(model, layers, opt, x, y, scored, step, cfg) -> float:
    model.train(True)
    logits = model.forward(x)
    loss, grad = softmax_cross_entropy(logits[scored], y[scored])
    dlogits = np.zeros_like(logits)
    dlogits[scored] = grad
    model.backward(dlogits)
    clip_grad_norm(layers, cfg["clip"])
    opt.lr = learning_rate(step, cfg)
    opt.step()
    return loss


def evaluation_set(cfg):
    """The held-out sequences (their own seed) and the shuffled control."""
    seqs, dists = make_batch(np.random.default_rng(cfg["seed"] + 100), cfg["eval_sequences"], cfg)
    rng = np.random.default_rng(cfg["seed"] + 200)
    cut = cfg["control_shuffled"]
    shuffled = seqs.copy()
    for row in shuffled:
        row[:cut] = row[:cut][rng.permutation(cut)]
    return seqs, dists, shuffled


def evaluate(model, cfg, data) -> dict:
    """Accuracy on the held-out sequences: by distance, near (<= 128), far (> 128), control."""
    seqs, dists, shuffled = data
    model.train(False)
    L = cfg["length"]
    right = model.forward(seqs[:, :L]).argmax(-1) == seqs[:, 1:]
    d = dists[:, :L]
    by_bin = []
    for a, b in zip(BINS[:-1], BINS[1:]):
        sel = (d >= a) & (d < b)
        by_bin.append(
            {"from": a, "to": b, "n": int(sel.sum()), "accuracy": float(right[sel].mean())}
        )
    near, far = (d > 0) & (d <= 128), d > 128
    # the control: answers at or after the cut whose first appearance was before it
    q = np.arange(L)
    moved = far & (q >= cfg["control_shuffled"]) & (q - d < cfg["control_shuffled"])
    right_shuffled = model.forward(shuffled[:, :L]).argmax(-1) == shuffled[:, 1:]
    return {
        "accuracy_near": round(float(right[near].mean()), 4),
        "accuracy_far": round(float(right[far].mean()), 4),
        "n_near": int(near.sum()),
        "n_far": int(far.sum()),
        "by_distance": [{**b, "accuracy": round(b["accuracy"], 4)} for b in by_bin],
        "control": {
            "n": int(moved.sum()),
            "accuracy_intact": round(float(right[moved].mean()), 4),
            "accuracy_shuffled": round(float(right_shuffled[moved].mean()), 4),
        },
        "chance": round(1 / cfg["n_values"], 4),
    }


def eval_model(model, cfg, context):
    """The trained weights in a model that reads 1,024 positions: a window of ``context``."""
    long = build(cfg, context, cfg["length"], None if context >= cfg["length"] else context)
    long.load_state_dict(model.state_dict())
    return long


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--context", type=int, choices=(128, 1024), required=True)
    parser.add_argument("--steps", type=int, default=None, help="steps (default CONFIG's)")
    parser.add_argument("--out", default=None, help="output directory")
    args = parser.parse_args(argv)
    cfg = {**CONFIG, "context": args.context}
    if args.steps is not None:
        if args.steps < 1:
            parser.error(f"--steps must be at least 1, got {args.steps}")
        cfg["steps"] = args.steps
    out = Path(args.out) if args.out else checkpoint_dir()
    out.mkdir(parents=True, exist_ok=True)
    name = f"long_task_{args.context}"
    t0, c0, loads = time.perf_counter(), time.process_time(), [os.getloadavg()[0]]
    with threadpool_limits(limits=1, user_api="blas"):
        model = build(cfg, args.context)
        layers = model.layers()
        opt = Adam(layers, lr=cfg["lr"], betas=tuple(cfg["betas"]))
        rng = np.random.default_rng(cfg["seed"] + 1)
        data = evaluation_set(cfg)
        curve, recent = {"step": [], "train": [], "accuracy_far": [], "accuracy_near": []}, []
        for step in range(1, cfg["steps"] + 1):
            x, y, scored, _ = windows(
                *make_batch(rng, cfg["sequences_per_step"], cfg), args.context
            )
            recent.append(train_step(model, layers, opt, x, y, scored, step, cfg))
            if step % cfg["eval_every"] == 0 or step == cfg["steps"]:
                ev = evaluate(eval_model(model, cfg, args.context), cfg, data)
                curve["step"].append(step)
                curve["train"].append(round(float(np.mean(recent)), 4))
                curve["accuracy_far"].append(ev["accuracy_far"])
                curve["accuracy_near"].append(ev["accuracy_near"])
                loads.append(os.getloadavg()[0])
                recent = []
                print(
                    f"step {step}  train {curve['train'][-1]:.3f}  near {ev['accuracy_near']:.3f}"
                    f"  far {ev['accuracy_far']:.3f}  wall {time.perf_counter() - t0:.0f}s"
                    f"  load {loads[-1]:.1f}",
                    flush=True,
                )
        path = out / f"{name}.npz"
        arrays = {k: np.asarray(a, np.float32) for k, a in model.state_dict().items()}
        arrays["config"] = np.array(json.dumps(cfg))
        write_atomic(path, lambda f: np.savez(f, **arrays), mode="wb")
        final = evaluate(eval_model(load(path), cfg, args.context), cfg, data)
    manifest = {
        "command": f"python scripts/train_long_task.py --context {args.context}"
        + (f" --steps {cfg['steps']}" if args.steps is not None else ""),
        "script": "scripts/train_long_task.py",
        "model": "TinyGPT",
        "config": cfg,
        "parameters": int(model.n_params()),
        "file": path.name,
        "sha256": sha256(path),
        "weights_dtype": "float32",
        "wall_seconds": round(time.perf_counter() - t0, 1),
        "cpu_seconds": round(time.process_time() - c0, 1),
        "cpu": cpu_name(),
        "threads": 1,
        "load_average_1min": {
            "mean": round(float(np.mean(loads)), 2),
            "max": round(float(np.max(loads)), 2),
            "cores": os.cpu_count(),
            "note": "the 2-core machine was shared with other jobs while this ran",
        },
        "numpy": np.__version__,
        "curve": curve,
        "evaluation": final,
    }
    write_atomic(out / f"{name}.json", lambda f: f.write(json.dumps(manifest, indent=1) + "\n"))
    print(json.dumps({k: final[k] for k in ("accuracy_near", "accuracy_far")}), flush=True)
    return manifest


def load(path) -> TinyGPT:
    """The trained model of a ``long_task_<C>.npz`` (context C, no window)."""
    with np.load(path, allow_pickle=False) as f:
        cfg = json.loads(str(f["config"]))
        state = {k: f[k] for k in f.files if k != "config"}
    model = build(cfg, cfg["context"])
    model.load_state_dict(state)
    return model.train(False)


if __name__ == "__main__":
    main()
