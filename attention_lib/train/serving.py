"""Train the models of the serving chapter: four KV-cache variants, GQA uptraining, a draft.

Run as ``python -m attention_lib.train.serving [--out DIR] [--only NAME ...]``
(default ``data/checkpoints/serving``). Every run is seeded and uses
``--threads`` BLAS threads (default 2). The runs:

- ``mha``, ``gqa`` (2 key/value groups), ``mqa``, ``mla``: chapter 11's model
  (pre-LN blocks, learned positions, 4 layers of width 192 with 4 heads, a
  context of 128 characters), without dropout and for 600 steps of 32 windows
  instead of 3,000 (about 10 minutes each on 2 cores), trained on the same
  characters in the same order;
- ``gqa_uptrained``: the trained ``mha`` model with each pair of key/value
  heads mean-pooled into one group (Ainslie et al., 2023), fine-tuned for
  60 steps (a tenth of the budget of training from scratch);
- ``draft``: a one-layer model of width 64 with chapter 11's context of 128,
  the draft of speculative decoding for chapter 11's model.

Each run writes ``<name>.npz`` (float32 weights and configuration as JSON) and
an entry of ``manifest.json``: configuration, sha256, measured wall time and
machine load, the loss curve and the validation loss on the last 10% of Tiny
Shakespeare in consecutive windows of the context (as chapter 11).
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from .._cli import int_at_least, out_dir
from ..data.paths import sha256, write_atomic
from ..nn import Adam, softmax_cross_entropy
from ..models.kv_variants import (
    build_variant,
    load_variant,
    mean_pool_kv,
    save_variant,
    serving_dir,
)
from .evaluate_long_context import cpu_name
from .shakespeare import load_text, random_windows, text_path, train_step, validation_loss

BASE = {
    "d_model": 192,
    "n_heads": 4,
    "n_layers": 4,
    "d_ff": 768,
    "max_len": 128,
    "dropout": 0.0,
    "positions": "learned",
    "batch": 32,
    "steps": 600,
    "lr": 2e-3,
    "min_lr": 1e-4,
    "warmup": 50,
    "betas": [0.9, 0.99],
    "clip": 1.0,
    "seed": 1337,
    "eval_every": 100,
}

# The draft of speculative decoding: one layer of width 64 with chapter 11's
# context, trained on its own (its configuration is not the variants').
DRAFT = {
    "d_model": 64,
    "n_heads": 4,
    "n_layers": 1,
    "d_ff": 256,
    "max_len": 128,
    "dropout": 0.0,
    "positions": "learned",
    "batch": 8,
    "steps": 400,
    "lr": 3e-3,
    "min_lr": 3e-4,
    "warmup": 50,
    "betas": [0.9, 0.99],
    "clip": 1.0,
    "seed": 1337,
    "eval_every": 100,
    "variant": "mha",
}

RUNS = {
    "mha": {**BASE, "variant": "mha"},
    "gqa": {**BASE, "variant": "gqa", "n_kv_heads": 2},
    "mqa": {**BASE, "variant": "mqa"},
    # DeepSeek-V2's proportions: a latent of 4 head widths, a rotary part of half a head.
    "mla": {**BASE, "variant": "mla", "d_latent": 192, "d_rope": 24},
    "draft": DRAFT,
    "gqa_uptrained": {
        **BASE,
        "variant": "gqa",
        "n_kv_heads": 2,
        "steps": 60,
        "warmup": 5,
        "lr": 1e-3,
        "eval_every": 20,
        "from": "mha",
    },
}


def train_run(cfg, chars, train_ids, val_ids, model, log=sys.stdout):
    """Adam on random windows (seeded by ``cfg['seed']``); returns the curve and wall time."""
    layers = model.layers()
    opt = Adam(layers, lr=cfg["lr"], betas=tuple(cfg["betas"]))
    data_rng = np.random.default_rng(cfg["seed"] + 1)
    eval_rng = np.random.default_rng(cfg["seed"] + 2)
    curve = {"step": [], "train": [], "val": []}
    recent, t0 = [], time.perf_counter()
    for step in range(1, cfg["steps"] + 1):
        x, y = random_windows(data_rng, train_ids, cfg["batch"], cfg["max_len"])
        recent.append(train_step(model, layers, opt, x, y, step, cfg))
        if step % cfg["eval_every"] == 0 or step == cfg["steps"]:
            model.train(False)
            x, y = random_windows(eval_rng, val_ids, 64, cfg["max_len"])
            logits = model.forward(x)
            val, _ = softmax_cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
            curve["step"].append(step)
            curve["train"].append(round(float(np.mean(recent)), 4))
            curve["val"].append(round(float(val), 4))
            recent = []
            print(
                f"step {step:4d} train {curve['train'][-1]:.4f} val {curve['val'][-1]:.4f} "
                f"wall {time.perf_counter() - t0:.0f}s",
                file=log,
                flush=True,
            )
    return curve, time.perf_counter() - t0


def run(name: str, out: Path, threads: int) -> dict:
    cfg = RUNS[name]
    chars, train_ids, val_ids = load_text()
    if "from" in cfg:
        parent, _ = load_variant(out / f"{cfg['from']}.npz")
        model = mean_pool_kv(parent, cfg)
        start_val = validation_loss(model, val_ids, cfg["max_len"])
    else:
        model, start_val = build_variant(cfg, len(chars)), None
    load0 = os.getloadavg()[0]
    curve, wall = train_run(cfg, chars, train_ids, val_ids, model)
    load1 = os.getloadavg()[0]
    path = out / f"{name}.npz"
    save_variant(model, cfg, chars, path)
    loaded, _ = load_variant(path)
    val = validation_loss(loaded, val_ids, cfg["max_len"])
    entry = {
        "file": path.name,
        "sha256": sha256(path),
        "config": cfg,
        "parameters": int(loaded.n_params()),
        "cache_bytes_per_token_float32": loaded.cache_bytes_per_token(),
        "wall_seconds": round(wall, 1),
        "load_average_1min": [round(load0, 2), round(load1, 2)],
        "threads": threads,
        "curve": curve,
        "evaluation": {
            "val_loss": round(float(val), 4),
            "measured_on": "last 10% of Tiny Shakespeare, consecutive windows of max_len",
        },
    }
    if start_val is not None:
        entry["evaluation"]["val_loss_before_fine_tune"] = round(float(start_val), 4)
    print(name, json.dumps(entry["evaluation"]), flush=True)
    return entry


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(serving_dir()), help="output directory")
    parser.add_argument("--only", nargs="*", choices=list(RUNS), help="runs to (re)make")
    parser.add_argument(
        "--threads", type=int_at_least(1), default=2, help="BLAS threads (default 2)"
    )
    args = parser.parse_args(argv)
    out = out_dir(parser, args.out)
    mpath = out / "manifest.json"
    manifest = _read_manifest(parser, mpath)
    manifest.update(
        {
            "command": "python -m attention_lib.train.serving",
            "text": "data/shakespeare/input.txt",
            "text_sha256": sha256(text_path()),
            "split": "first 90% train, last 10% validation (nanoGPT's)",
            "cpu": cpu_name(),
            "numpy": np.__version__,
        }
    )
    for name in args.only or list(RUNS):
        with threadpool_limits(limits=args.threads, user_api="blas"):
            entry = run(name, out, args.threads)
        # One file per run, gathered into manifest.json: runs may go in parallel.
        write_atomic(out / f"{name}.json", lambda f: f.write(json.dumps(entry, indent=1) + "\n"))
        manifest["runs"] = {
            n: json.loads((out / f"{n}.json").read_text())
            for n in RUNS
            if (out / f"{n}.json").exists()
        }
        write_atomic(mpath, lambda f: f.write(json.dumps(manifest, indent=1) + "\n"))
    return manifest


def _read_manifest(parser, mpath: Path) -> dict:
    """The manifest already in ``--out`` (or {}); a damaged one is refused by name before any run."""
    if not mpath.exists():
        return {}
    try:
        manifest = json.loads(mpath.read_text(encoding="utf8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        parser.error(f"--out: {mpath} is not a readable JSON manifest ({err}); move it away")
    if not isinstance(manifest, dict):
        parser.error(
            f"--out: {mpath} holds a {type(manifest).__name__}, not a manifest (an object)"
        )
    return manifest


if __name__ == "__main__":
    main()
