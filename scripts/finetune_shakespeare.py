"""Finetune chapter 11's Shakespeare model on plain modern English, five ways (chapter 16).

The new text is the English side of Tatoeba's pairs (CC BY 2.0 FR,
tatoeba.org via manythings.org/anki), one sentence a line: chapter 10's
training split trains (``data/tatoeba/train.tsv``), its validation split
measures (``valid.tsv``); only sentences written entirely in the model's 65
Shakespeare characters are kept (99% of them). The old text is chapter 11's
held-out Shakespeare (the last 10% of ``input.txt``).

The same number of steps, batch and windows for every method:

- ``full``: every parameter (1.83 million) trains;
- ``last``: only the last block's (the others are frozen: the optimiser is
  not given them);
- ``lora_r4``, ``lora_r8``: LoRA adapters on the query and value
  projections of every block (:func:`attention_lib.nn.lora.apply`), the
  model frozen;
- ``qlora_r8``: the same rank-8 adapters on a base whose weight matrices
  were quantized to Q4_0 (4-bit blocks of 32, :func:`attention_lib.quantize.quantize_model`)
  and read back: the QLoRA idea (Dettmers et al., 2023).

Every ``--eval-every`` steps, the mean loss (nats per character) on fixed
windows of the new text's held-out sentences and of held-out Shakespeare.
Then the rank-8 adapters are merged into the weights and the outputs
compared with the unmerged model's.

Writes ``data/checkpoints/finetune/shakespeare_finetune.json`` (curves,
final losses, trainable parameters, time per step, the merge check, and the
manifest: command, configuration, sha256 of inputs and outputs, wall and CPU
time, CPU, load average) and ``shakespeare_lora_r8.npz`` (the rank-8
adapters, :func:`attention_lib.nn.lora.save`).

Run (about 2 minutes of CPU on one thread; it took 26 minutes of wall time at load 20)::

    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 python scripts/finetune_shakespeare.py
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attention_lib.data.paths import sha256  # noqa: E402
from attention_lib.data.tatoeba import load_pairs, tatoeba_dir  # noqa: E402
from attention_lib.models.pretrained import load_shakespeare, shakespeare_dir  # noqa: E402
from attention_lib.train.evaluate_long_context import cpu_name  # noqa: E402
from attention_lib.nn import Adam, clip_grad_norm, lora, softmax_cross_entropy  # noqa: E402
from attention_lib.quantize import quantize_model  # noqa: E402
from attention_lib.train.shakespeare import load_text, text_path  # noqa: E402

OUT = ROOT / "data" / "checkpoints" / "finetune"
RESULTS = "shakespeare_finetune.json"
ADAPTER = "shakespeare_lora_r8.npz"
METHODS = ("full", "last", "lora_r4", "lora_r8", "qlora_r8")
#: Learning rates: the usual practice (LoRA's adapters take a larger one).
LR = {"full": 3e-4, "last": 1e-3, "lora_r4": 2e-3, "lora_r8": 2e-3, "qlora_r8": 2e-3}


def new_text(tok, split: str) -> np.ndarray:
    """Tatoeba's English sentences of ``split`` in Shakespeare's characters, one a line, as ids."""
    allowed = set(tok.chars)
    seen = dict.fromkeys(en for en, _ in load_pairs(split))
    lines = [s for s in seen if set(s) <= allowed]
    return tok.encode("\n".join(lines) + "\n"), len(lines), len(seen)


def windows(ids: np.ndarray, n: int, length: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` windows of ``length`` characters spread evenly over ``ids``: inputs and targets."""
    starts = np.linspace(0, len(ids) - length - 2, n).astype(np.int64)
    w = ids[starts[:, None] + np.arange(length + 1)]
    return w[:, :-1], w[:, 1:]


def mean_loss(model, x, y, batch: int = 16) -> float:
    total = 0.0
    for i in range(0, len(x), batch):
        logits = model.forward(x[i : i + batch])
        loss, _ = softmax_cross_entropy(
            logits.reshape(-1, logits.shape[-1]), y[i : i + batch].ravel()
        )
        total += loss * len(x[i : i + batch])
    return total / len(x)


def prepare(method: str, rank_seed: int = 0):
    """The base model set up for ``method``: ``(model, trainable layers, trainable count, extra)``."""
    model, _ = load_shakespeare()
    model.train(False)  # no dropout: the methods differ only in what trains
    extra = {}
    if method == "full":
        layers = model.layers()
    elif method == "last":
        layers = model.blocks[-1].layers()
    else:
        if method.startswith("qlora"):
            report = quantize_model(model, "q4_0")
            extra["base_bytes_q4_0"] = int(report["bytes"])
            extra["base_bytes_float32"] = int(report["float32_bytes"])
        rank = int(method.rsplit("_r", 1)[1])
        layers = lora.apply(
            model, ("q", "v"), rank=rank, alpha=2 * rank, rng=np.random.default_rng(rank_seed)
        )
        lora.freeze(model)
    count = sum(a.size for layer in layers for a in layer.params.values())
    return model, layers, int(count), extra


def run(method, cfg, data, log):
    model, layers, count, extra = prepare(method)
    opt = Adam(layers, lr=LR[method])
    rng = np.random.default_rng(cfg["seed"])  # the same batches for every method
    train_ids, (xn, yn), (xo, yo) = data
    curve = {"step": [0], "new": [mean_loss(model, xn, yn)], "old": [mean_loss(model, xo, yo)]}
    step_seconds = []
    for step in range(1, cfg["steps"] + 1):
        starts = rng.integers(0, len(train_ids) - cfg["length"] - 1, size=cfg["batch"])
        w = train_ids[starts[:, None] + np.arange(cfg["length"] + 1)]
        t0 = time.perf_counter()
        logits = model.forward(w[:, :-1])
        loss, dlogits = softmax_cross_entropy(
            logits.reshape(-1, logits.shape[-1]), w[:, 1:].ravel()
        )
        model.backward(dlogits.reshape(logits.shape).astype(np.float32))
        clip_grad_norm(layers, cfg["clip"])
        opt.step()
        step_seconds.append(time.perf_counter() - t0)
        if step % cfg["eval_every"] == 0:
            curve["step"].append(step)
            curve["new"].append(mean_loss(model, xn, yn))
            curve["old"].append(mean_loss(model, xo, yo))
            print(
                f"{method:9s} step {step:4d}  train {loss:.3f}  new {curve['new'][-1]:.3f}  "
                f"old {curve['old'][-1]:.3f}",
                file=log,
                flush=True,
            )
    out = {
        "trainable_parameters": count,
        "lr": LR[method],
        "curve": {
            k: [round(v, 4) if isinstance(v, float) else v for v in vs] for k, vs in curve.items()
        },
        "new_loss": round(curve["new"][-1], 4),
        "old_loss": round(curve["old"][-1], 4),
        "median_step_seconds": round(float(np.median(step_seconds)), 4),
    } | extra
    return model, out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--length", type=int, default=128)
    p.add_argument("--eval-every", type=int, default=20)
    p.add_argument("--eval-windows", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args(argv)
    cfg = {
        k: getattr(args, k)
        for k in ("steps", "batch", "length", "eval_every", "eval_windows", "seed")
    }
    cfg["clip"] = 1.0
    args.out.mkdir(parents=True, exist_ok=True)
    wall0, cpu0, load0 = time.perf_counter(), time.process_time(), os.getloadavg()
    _, tok = load_shakespeare()
    train_ids, n_train, n_train_all = new_text(tok, "train")
    valid_ids, n_valid, n_valid_all = new_text(tok, "valid")
    _, _, old_ids = load_text()
    data = (
        train_ids,
        windows(valid_ids, args.eval_windows, args.length),
        windows(old_ids, args.eval_windows, args.length),
    )
    results, log = {}, sys.stdout
    for method in METHODS:
        model, results[method] = run(method, cfg, data, log)
        if method == "lora_r8":
            lora.save(model, args.out / ADAPTER)
            x = data[1][0][:8]
            before = model.forward(x)
            lora.merge(model)
            after = model.forward(x)
            results["merge"] = {
                "max_abs_logit_difference": float(np.abs(after - before).max()),
                "max_abs_logit": float(np.abs(before).max()),
                "windows": 8,
            }
    manifest = {
        "what": "chapter 11's Shakespeare model finetuned on Tatoeba's English sentences: "
        "full, last block, LoRA r4/r8 on q and v, LoRA r8 on a Q4_0 base",
        "command": "OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 python scripts/finetune_shakespeare.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "config": cfg
        | {
            "lr": LR,
            "alpha": "2 x rank",
            "targets": ["q", "v"],
            "dropout": 0.0,
            "optimizer": "Adam (0.9, 0.999), constant lr, clip 1.0",
        },
        "new_text": {
            "source": "Tatoeba English sentences (CC BY 2.0 FR, tatoeba.org via manythings.org/anki)",
            "train": f"data/tatoeba/train.tsv: {n_train} of its {n_train_all} distinct English sentences "
            f"({len(train_ids)} characters)",
            "held_out": f"data/tatoeba/valid.tsv: {n_valid} of {n_valid_all} ({len(valid_ids)} characters)",
            "kept": "sentences written only in the model's 65 characters",
        },
        "old_text": "the last 10% of data/shakespeare/input.txt (chapter 11's validation split)",
        "evaluation": f"mean loss in nats per character over {args.eval_windows} windows of {args.length} "
        "characters spread evenly over each held-out text",
        "inputs": {
            "shakespeare.npz": sha256(shakespeare_dir() / "shakespeare.npz"),
            "input.txt": sha256(text_path()),
            "train.tsv": sha256(tatoeba_dir() / "train.tsv"),
            "valid.tsv": sha256(tatoeba_dir() / "valid.tsv"),
        },
        "outputs": {ADAPTER: sha256(args.out / ADAPTER)},
        "wall_seconds": round(time.perf_counter() - wall0, 1),
        "cpu_seconds": round(time.process_time() - cpu0, 1),
        "machine": {
            "cpu": cpu_name(),
            "threads": os.environ.get("OPENBLAS_NUM_THREADS", "BLAS default"),
            "numpy": np.__version__,
            "load_average_start": [round(x, 2) for x in load0],
            "load_average_end": [round(x, 2) for x in os.getloadavg()],
        },
    }
    path = args.out / RESULTS
    path.write_text(json.dumps({"manifest": manifest, "results": results}, indent=1) + "\n", "utf8")
    print(f"wrote {path}", file=log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
