"""Key-value recall past the training length: small models trained at 128 positions, tested to 1,024.

The task needs context. A sequence of ``L`` tokens holds noise (32 symbols)
and, at random places, four *facts*: tokens that each say "key ``a`` has value
``d``" (four keys, ten values, one fact per key). The last token asks for one
key; the answer, one of ten value tokens, is the value of that key's fact,
which lies anywhere in the sequence: at ``L = 1,024`` almost always more than
128 positions back. Chance is 1 in 10. Only the answer is scored.

Two experiments, every model a :class:`~attention_lib.TinyGPT` of width 32
with 2 heads, trained at ``L = 128`` for the same number of steps, the same
seed and the same batches (the loss is the answer's cross-entropy):

- ``positions``: 2 blocks, one model for each position scheme (learned,
  sinusoidal, rotary, alibi, none), evaluated at 128, 256, 512 and 1,024
  (learned only at 128: its table has 128 rows);
- ``layers``: 6 blocks, rotary, with global attention in every block
  (``global``), a sliding window of 32 in every block (``local``), or Gemma
  3's pattern, five windowed blocks then one global (``interleaved``); the
  evaluation also records the KV cache each needs at the end of the sequence
  (a windowed block keeps ``window`` positions, a global one all ``L``).

Writes ``data/checkpoints/extrapolation/<name>.npz`` (float32 weights and the
configuration as JSON; no pickles) and ``results.json`` (accuracy by length,
the training loss curve, sha256 of every checkpoint, the command, the CPU,
wall times and load averages). Seeded: the same run gives the same numbers
on one machine.

Run: ``OPENBLAS_NUM_THREADS=1 python scripts/train_extrapolation_task.py``
(``--only rotary alibi`` to run some models; results are merged).
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from attention_lib.data.paths import sha256, write_atomic
from attention_lib.models.gpt import TinyGPT
from attention_lib.nn import Adam
from attention_lib.nn.losses import softmax_cross_entropy
from attention_lib.nn.utils import clip_grad_norm

sys.path.insert(0, str(Path(__file__).resolve().parent))
from smollm2_passkey import cpu_name  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "data" / "checkpoints" / "extrapolation"
N_VALUES, N_KEYS, N_NOISE = 10, 4, 32
FACT0 = N_VALUES  # fact token of key a, value d: FACT0 + a * N_VALUES + d
QUERY0 = FACT0 + N_KEYS * N_VALUES  # query token of key a: QUERY0 + a
NOISE0 = QUERY0 + N_KEYS
N_VOCAB = NOISE0 + N_NOISE
TRAIN_LEN, LENGTHS, WINDOW = 128, (128, 256, 512, 1024), 32
CONFIG = {
    "d_model": 32,
    "n_heads": 2,
    "d_ff": 64,
    "batch": 32,
    "steps": 400,
    "lr": 1e-2,
    "warmup": 30,
    "clip": 1.0,
    "seed": 7,
    "eval_sequences": 256,
}
SCHEMES = ("learned", "sinusoidal", "rotary", "alibi", "none")
LAYERS = {"global": [None] * 6, "local": [WINDOW] * 6, "interleaved": [WINDOW] * 5 + [None]}


def make_batch(rng, n, L):
    """``n`` sequences of length ``L`` (the last token the query) and their answers."""
    x = NOISE0 + rng.integers(0, N_NOISE, size=(n, L))
    values = rng.integers(0, N_VALUES, size=(n, N_KEYS))
    asked = rng.integers(0, N_KEYS, size=n)
    for i in range(n):
        places = rng.choice(L - 1, size=N_KEYS, replace=False)
        x[i, places] = FACT0 + np.arange(N_KEYS) * N_VALUES + values[i]
    x[:, -1] = QUERY0 + asked
    return x, values[np.arange(n), asked]


def build(name):
    """The model called ``name`` (a scheme, or a layer pattern) and its configuration."""
    c = CONFIG
    if name in SCHEMES:
        windows, positions = [None, None], None if name == "none" else name
    else:
        windows, positions = LAYERS[name], "rotary"
    max_len = TRAIN_LEN if positions == "learned" else max(LENGTHS)
    rng = np.random.default_rng(c["seed"])
    model = TinyGPT(
        N_VOCAB, c["d_model"], c["n_heads"], len(windows), c["d_ff"], max_len, rng, positions
    )
    for block, window in zip(model.blocks, windows):
        block.attn.window = window
    for layer in model.layers():
        for k in layer.params:
            layer.params[k] = layer.params[k].astype(np.float32)
    cfg = {**c, "name": name, "positions": positions or "none", "windows": windows}
    return model, cfg | {"max_len": max_len, "n_layers": len(windows), "n_vocab": N_VOCAB}


def answer_logits(model, x, batch=16):
    """The logits at the last position (the answer), ``batch`` sequences at a time."""
    model.train(False)
    return np.concatenate([model.forward(x[i : i + batch])[:, -1] for i in range(0, len(x), batch)])


def train(model, cfg, log):
    layers = model.layers()
    opt = Adam(layers, lr=cfg["lr"])
    rng = np.random.default_rng(cfg["seed"] + 1)  # the same batches for every model
    curve = []
    for step in range(1, cfg["steps"] + 1):
        x, y = make_batch(rng, cfg["batch"], TRAIN_LEN)
        model.train(True)
        logits = model.forward(x)
        loss, d_last = softmax_cross_entropy(logits[:, -1], y)
        dlogits = np.zeros_like(logits)
        dlogits[:, -1] = d_last
        model.backward(dlogits)
        clip_grad_norm(layers, cfg["clip"])
        warm = min(1.0, step / cfg["warmup"])
        opt.lr = cfg["lr"] * warm * 0.5 * (1 + np.cos(np.pi * step / cfg["steps"]))
        opt.step()
        curve.append(float(loss))
        if step % 50 == 0:
            print(
                f"{cfg['name']} step {step} loss {np.mean(curve[-50:]):.3f}", file=log, flush=True
            )
    return [round(float(np.mean(curve[i : i + 50])), 4) for i in range(0, len(curve), 50)]


def evaluate(model, cfg):
    """Accuracy at every length the model can run, and the KV cache bytes there."""
    out = {}
    for L in LENGTHS:
        if L > model.max_len:
            continue
        x, y = make_batch(np.random.default_rng(1000 + L), cfg["eval_sequences"], L)
        acc = float(np.mean(answer_logits(model, x).argmax(axis=-1) == y))
        rows = sum(L if w is None else min(w, L) for w in cfg["windows"])
        out[str(L)] = {"accuracy": acc, "cache_bytes": rows * 2 * cfg["d_model"] * 4}
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", nargs="+", default=[*SCHEMES, *LAYERS])
    ap.add_argument("--steps", type=int, default=CONFIG["steps"])
    ap.add_argument("--lr", type=float, default=CONFIG["lr"])
    ap.add_argument("--tag", default="", help="appended to the names of the results")
    args = ap.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / "results.json"
    for name in args.only:
        model, cfg = build(name)
        cfg.update(steps=args.steps, lr=args.lr)
        key = name + args.tag
        load0, t0 = os.getloadavg()[0], time.perf_counter()
        curve = train(model, cfg, sys.stdout)
        wall = time.perf_counter() - t0
        arrays = {k: np.asarray(a, np.float32) for k, a in model.state_dict().items()}
        arrays["config"] = np.array(json.dumps(cfg))
        ckpt = OUT / f"{key}.npz"
        write_atomic(ckpt, lambda f, a=arrays: np.savez(f, **a), mode="wb")
        entry = {
            "command": "OPENBLAS_NUM_THREADS=1 python scripts/train_extrapolation_task.py "
            + " ".join(sys.argv[1:] if argv is None else argv),
            "config": cfg,
            "parameters": int(sum(a.size for a in model.state_dict().values())),
            "train_loss_every_50": curve,
            "train_wall_seconds": round(wall, 1),
            "load_average_1min": [round(load0, 2), round(os.getloadavg()[0], 2)],
            "checkpoint_sha256": sha256(ckpt),
            "evaluation": evaluate(model, cfg),
        }
        results = json.loads(path.read_text()) if path.exists() else {"models": {}}
        results["models"][key] = entry
        results.update(
            command="OPENBLAS_NUM_THREADS=1 python scripts/train_extrapolation_task.py",
            script_sha256=sha256(Path(__file__)),
            cpu=cpu_name(),
            task={"train_length": TRAIN_LEN, "keys": N_KEYS, "values": N_VALUES, "noise": N_NOISE},
        )
        text = json.dumps(results, indent=1) + "\n"
        write_atomic(path, lambda f, t=text: f.write(t))
        print(key, {L: e["accuracy"] for L, e in entry["evaluation"].items()}, f"{wall:.0f} s")


if __name__ == "__main__":
    main()
