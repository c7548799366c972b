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
window of 128 positions (it sees what it was trained to see), and once more
over all 1,024 positions (``unwindowed``: whether what it learned carries past
its training length). Accuracy is reported by distance; the control
shuffles the first 640 positions of each held-out sequence and scores the
answers that were there.

``--evaluate-only`` evaluates a saved checkpoint again and rewrites its manifest's
evaluation. Seeded and deterministic on one machine.
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

from attention_lib.data.paths import sha256, write_atomic, write_json  # noqa: E402
from attention_lib.models.gpt import TinyGPT  # noqa: E402
from attention_lib.nn import Adam, clip_grad_norm, softmax_cross_entropy  # noqa: E402
from attention_lib.train.evaluate_long_context import cpu_name  # noqa: E402
from attention_lib.train.long_context import checkpoint_dir, shared_load_average  # noqa: E402
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
#: The second stage (``--start 128``): both contexts continue from the 128-context
#: model, on new sequences (the same for both), for the same number of steps.
STAGE2 = {"steps": 200, "warmup": 10, "data_seed_offset": 3}
FILLER = 0
QUERY = 1  # the passkey task's query token (its values follow it)
#: The passkey task (``--task passkey``): one value to find, many queries for it.
PASSKEY = {"task": "passkey", "queries": 32, "steps": 300}
BINS = [8, 16, 32, 64, 128, 256, 512, 1024]  # distance bins [a, b) of the evaluation


def n_vocab(cfg: dict) -> int:
    """Recall: the filler, the keys, the values; passkey: the filler, the query, the values."""
    if cfg.get("task", "recall") == "passkey":
        return 2 + cfg["n_values"]
    return 1 + cfg["n_keys"] + cfg["n_values"]


def make_sequence(rng: np.random.Generator, cfg: dict) -> tuple[np.ndarray, ...]:
    """One sequence: inputs (``length``), targets (``length``) and, at each scored
    position ``q``, the distance ``D`` back to where its answer was given (0 elsewhere)."""
    if cfg.get("task", "recall") == "passkey":
        return passkey_sequence(rng, cfg)
    seq, dist = recall_sequence(rng, cfg)
    return seq[:-1], seq[1:], dist[:-1]


def passkey_sequence(rng: np.random.Generator, cfg: dict) -> tuple[np.ndarray, ...]:
    """Filler, one passkey (a value token) in the first half, and ``queries`` query
    tokens after it, each ``D`` positions after the passkey (log-uniform), whose
    target is the passkey. The answer is not fed back: only the passkey holds it."""
    L = cfg["length"]
    x = np.full(L, FILLER)
    target = np.full(L, FILLER)
    dist = np.zeros(L, dtype=np.int64)
    p = int(rng.integers(0, L // 2))
    v = QUERY + 1 + int(rng.integers(cfg["n_values"]))
    x[p] = v
    low, high = np.log(cfg["min_distance"]), np.log(min(cfg["max_distance"], L - p))
    for _ in range(cfg["queries"]):
        q = p + int(np.exp(rng.uniform(low, high)))
        if q < L and dist[q] == 0:
            x[q], target[q], dist[q] = QUERY, v, q - p
    return x, target, dist


def recall_sequence(rng: np.random.Generator, cfg: dict) -> tuple[np.ndarray, np.ndarray]:
    """One recall sequence of ``length + 1`` tokens and, at each position ``q`` whose
    next token is a predictable value, the distance ``D`` back to that value's first
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
    """``n`` sequences: inputs, targets, distances, each (n, length)."""
    return tuple(np.stack(a) for a in zip(*(make_sequence(rng, cfg) for _ in range(n))))


def windows(seqs, targets, dists, context):
    """Inputs, targets, the scored positions and their distances, in windows of ``context``.

    A position is scored if its answer's first appearance lies in its window.
    """
    x = seqs.reshape(-1, context)
    y = targets.reshape(-1, context)
    d = dists.reshape(-1, context)
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
    """The held-out sequences (their own seed) and the control's inputs.

    Recall: the first ``control_shuffled`` positions shuffled; passkey: the
    passkey swapped for another value.
    """
    seqs, targets, dists = make_batch(
        np.random.default_rng(cfg["seed"] + 100), cfg["eval_sequences"], cfg
    )
    rng = np.random.default_rng(cfg["seed"] + 200)
    control = seqs.copy()
    if cfg.get("task", "recall") == "passkey":
        keys = control > QUERY
        shift = 1 + rng.integers(0, cfg["n_values"] - 1, size=len(control))
        old = control[keys] - QUERY - 1
        control[keys] = QUERY + 1 + (old + shift) % cfg["n_values"]
    else:
        cut = cfg["control_shuffled"]
        for row in control:
            row[:cut] = row[:cut][rng.permutation(cut)]
    return seqs, targets, dists, control


def evaluate(model, cfg, data) -> dict:
    """Accuracy on the held-out sequences: by distance, near (<= 128), far (> 128), control."""
    seqs, targets, d, control = data
    model.train(False)
    L = cfg["length"]
    right = model.forward(seqs).argmax(-1) == targets
    by_bin = []
    for a, b in zip(BINS[:-1], BINS[1:]):
        sel = (d >= a) & (d < b)
        by_bin.append(
            {"from": a, "to": b, "n": int(sel.sum()), "accuracy": float(right[sel].mean())}
        )
    near, far = (d > 0) & (d <= 128), d > 128
    # the control: recall, answers at or after the cut whose first appearance was
    # before it; passkey, every answer more than 128 back
    q = np.arange(L)
    moved = far & (q >= cfg["control_shuffled"]) & (q - d < cfg["control_shuffled"])
    if cfg.get("task", "recall") == "passkey":
        moved = far
    right_shuffled = model.forward(control).argmax(-1) == targets
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


def eval_model(model, cfg, context, window=True):
    """The trained weights in a model that reads 1,024 positions: through a sliding
    window of ``context`` (or all of them, ``window=False``)."""
    window = context if window and context < cfg["length"] else None
    long = build(cfg, context, cfg["length"], window)
    long.load_state_dict(model.state_dict())
    return long


def final_evaluation(path, cfg, context, data) -> dict:
    """:func:`evaluate` of the saved model; a 128-context model also without its window."""
    model = load(path)
    result = evaluate(eval_model(model, cfg, context), cfg, data)
    if context < cfg["length"]:
        whole = evaluate(eval_model(model, cfg, context, window=False), cfg, data)
        result["unwindowed"] = {k: whole[k] for k in ("accuracy_near", "accuracy_far")}
    return result


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--context", type=int, choices=(128, 1024), required=True)
    parser.add_argument("--steps", type=int, default=None, help="steps (default CONFIG's)")
    parser.add_argument("--out", default=None, help="output directory")
    parser.add_argument(
        "--task",
        choices=("recall", "passkey"),
        default="recall",
        help="associative recall (the default) or passkey retrieval (runs named "
        "long_task_passkey_<C>)",
    )
    parser.add_argument(
        "--start",
        type=int,
        choices=(128,),
        default=None,
        help="continue from long_task_<START>.npz (the second stage: STAGE2 overrides the "
        "configuration; the run is named long_task_<START>_then_<C>)",
    )
    parser.add_argument(
        "--evaluate-only",
        action="store_true",
        help="evaluate the saved checkpoint again and update its manifest's evaluation",
    )
    args = parser.parse_args(argv)
    cfg = {**CONFIG, "context": args.context}
    if args.task == "passkey":
        cfg.update(PASSKEY)
    if args.start is not None:
        cfg.update(STAGE2, finetuned_from=f"long_task_{args.start}.npz")
    if args.steps is not None:
        if args.steps < 1:
            parser.error(f"--steps must be at least 1, got {args.steps}")
        cfg["steps"] = args.steps
    out = Path(args.out) if args.out else checkpoint_dir()
    out.mkdir(parents=True, exist_ok=True)
    name = f"long_task_{args.context}"
    if args.task == "passkey":
        name = f"long_task_passkey_{args.context}"
    if args.start is not None:
        name = f"long_task_{args.start}_then_{args.context}"
    if args.evaluate_only:
        start = f" --start {args.start}" if args.start is not None else ""
        start += " --task passkey" if args.task == "passkey" else ""
        command = f"python scripts/train_long_task.py --context {args.context}{start}"
        return reevaluate(out, name, args.context, command + " --evaluate-only")
    t0, c0, loads = time.perf_counter(), time.process_time(), [os.getloadavg()[0]]
    with threadpool_limits(limits=1, user_api="blas"):
        model = build(cfg, args.context)
        if args.start is not None:
            model.load_state_dict(load(out / f"long_task_{args.start}.npz").state_dict())
        layers = model.layers()
        opt = Adam(layers, lr=cfg["lr"], betas=tuple(cfg["betas"]))
        rng = np.random.default_rng(cfg["seed"] + cfg.get("data_seed_offset", 1))
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
        final = final_evaluation(path, cfg, args.context, data)
    manifest = {
        "command": f"python scripts/train_long_task.py --context {args.context}"
        + (f" --start {args.start}" if args.start is not None else "")
        + (" --task passkey" if args.task == "passkey" else "")
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
        "load_average_1min": shared_load_average(loads),
        "numpy": np.__version__,
        "curve": curve,
        "evaluation": final,
    }
    write_json(out / f"{name}.json", manifest)
    print(json.dumps({k: final[k] for k in ("accuracy_near", "accuracy_far")}), flush=True)
    return manifest


def reevaluate(out: Path, name: str, context: int, command: str) -> dict:
    """The evaluation of ``<name>.npz`` made again, written into its manifest."""
    manifest = json.loads((out / f"{name}.json").read_text(encoding="utf8"))
    path = out / manifest["file"]
    if sha256(path) != manifest["sha256"]:
        raise SystemExit(f"{path} does not match the sha256 in {name}.json: retrain it")
    t0, c0 = time.perf_counter(), time.process_time()
    cfg = manifest["config"]
    with threadpool_limits(limits=1, user_api="blas"):
        manifest["evaluation"] = final_evaluation(path, cfg, context, evaluation_set(cfg))
    manifest["evaluation_command"] = {
        "command": command,
        "wall_seconds": round(time.perf_counter() - t0, 1),
        "cpu_seconds": round(time.process_time() - c0, 1),
        "load_average_1min": os.getloadavg()[0],
    }
    write_json(out / f"{name}.json", manifest)
    print(json.dumps(manifest["evaluation"].get("unwindowed", {})), flush=True)
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
