"""Train the small character models of the long-context chapters and write their checkpoints.

Run as ``python -m attention_lib.train.long_context --positions P
--context N [--block-size B] [--out DIR]``. It trains a small
:class:`~attention_lib.models.TinyGPT` on the first 90% of Tiny Shakespeare,
one character a token, and writes into ``DIR`` (default
``data/checkpoints/longctx``):

- ``<name>.npz``: every parameter in float32 (the model's ``state_dict``)
  and the configuration as JSON, no pickles;
- ``<name>.json``: its manifest: configuration, command, sha256 of the
  checkpoint and of the text, measured wall time, the machine's load while
  it ran, the loss curve and the validation loss.

``<name>`` is ``<positions>_<context>`` (``_chapter12`` appended for ``--size
chapter12``: chapter 11's model size, for the long-context comparison). Every
run of one size has the same model size and
the same budget: ``steps`` steps of ``chars_per_step`` training characters
(``chars_per_step / context`` windows a step), so a 1,024-character run sees
exactly as many training characters as a 128-character one. The runs differ
only in their positions (and, for the long run, in its context and its
tiled attention, ``block_size``). Seeded and deterministic on one machine.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from .._cli import int_at_least, int_in, out_dir
from ..data.paths import data_dir, sha256, write_atomic, write_json
from ..nn import Adam
from ..models.gpt import TinyGPT
from .shakespeare import load_text, random_windows, text_path, train_step

#: One size for every run: smaller than chapter 11's model (d_model 192, 4
#: layers), so that six runs fit the 2-core machine shared with other work.
CONFIG = {
    "d_model": 64,
    "n_heads": 4,
    "n_layers": 2,
    "d_ff": 256,
    "dropout": 0.0,
    "chars_per_step": 1024,
    "steps": 400,
    "lr": 3e-3,
    "min_lr": 1e-4,
    "warmup": 50,
    "betas": [0.9, 0.99],
    "clip": 1.0,
    "seed": 1337,
    "eval_every": 100,
    "eval_chars": 16384,
}

#: ``--size chapter12``: chapter 11's model (d_model 192, 4 heads, 4 layers, d_ff 768),
#: same budget otherwise, for the long-context run the issue asks at that size.
SIZES = {
    "small": {},
    "chapter12": {"d_model": 192, "n_heads": 4, "n_layers": 4, "d_ff": 768},
}

_POSITIONS = ("sinusoidal", "learned", "rotary", "alibi", "none")


def checkpoint_dir() -> Path:
    """``data/checkpoints/longctx``."""
    return data_dir() / "checkpoints" / "longctx"


def build_model(cfg: dict, n_vocab: int, max_len: int | None = None, **attention) -> TinyGPT:
    """The float32 TinyGPT of ``cfg`` (``max_len`` defaults to its context)."""
    positions = None if cfg["positions"] == "none" else cfg["positions"]
    model = TinyGPT(
        n_vocab,
        cfg["d_model"],
        cfg["n_heads"],
        cfg["n_layers"],
        cfg["d_ff"],
        cfg["context"] if max_len is None else max_len,
        np.random.default_rng(cfg["seed"]),
        positions=positions,
        dropout=cfg["dropout"],
        **attention,
    )
    for layer in model.layers():
        for k in layer.params:
            layer.params[k] = layer.params[k].astype(np.float32)
    return model


def save_checkpoint(model: TinyGPT, cfg: dict, chars: list[str], path: Path) -> None:
    arrays = {k: np.asarray(a, np.float32) for k, a in model.state_dict().items()}
    arrays["config"] = np.array(json.dumps({**cfg, "n_vocab": len(chars), "chars": "".join(chars)}))
    write_atomic(path, lambda f: np.savez(f, **arrays), mode="wb")


def load_checkpoint(path, max_len=None, **attention) -> tuple[TinyGPT, dict]:
    """A float32 TinyGPT from :func:`save_checkpoint`'s file, and its configuration.

    ``max_len`` lets a model with relative (or no) positions run past the
    context it was trained on; ``attention`` (``block_size``, ``window``,
    ``sinks``) goes to every attention layer.
    """
    with np.load(path, allow_pickle=False) as f:
        cfg = json.loads(str(f["config"]))
        state = {k: f[k] for k in f.files if k != "config"}
    model = build_model(cfg, cfg["n_vocab"], max_len, **attention)
    model.load_state_dict(state)
    set_rope_scaling(model, cfg.get("rope_scaling"))
    return model.train(False), cfg


def set_rope_scaling(model: TinyGPT, scaling: dict | None) -> None:
    """Give every attention layer of a rotary ``model`` the RoPE ``scaling`` (or none)."""
    for block in model.blocks:
        block.attn.rope_scaling = None if scaling is None else dict(scaling)


def loss_by_position(model, ids, length, batch=8):
    """Mean loss (nats per character) at each position ``0 .. length-1`` of consecutive windows."""
    n = (len(ids) - 1) // length
    x = ids[: n * length].reshape(n, length)
    y = ids[1 : n * length + 1].reshape(n, length)
    total = np.zeros(length)
    for i in range(0, n, batch):
        logits = model.forward(x[i : i + batch]).astype(np.float64)
        logits -= logits.max(axis=-1, keepdims=True)
        logp = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
        total += -np.take_along_axis(logp, y[i : i + batch, :, None], -1)[..., 0].sum(axis=0)
    return total / n


def shared_load_average(loads) -> dict:
    """A training run's manifest entry for the 1-minute load averages sampled while it ran."""
    return {
        "mean": round(float(np.mean(loads)), 2),
        "max": round(float(np.max(loads)), 2),
        "cores": os.cpu_count(),
        "note": "the 2-core machine was shared with other jobs while this ran",
    }


def train(cfg, log=sys.stdout, start=None):
    chars, train_ids, val_ids = load_text()
    if start is None:
        model = build_model(cfg, len(chars), block_size=cfg.get("block_size"))
    else:  # fine-tuning: the trained weights, a longer context, scaled RoPE
        model, _ = load_checkpoint(start, cfg["context"], block_size=cfg.get("block_size"))
        set_rope_scaling(model, cfg.get("rope_scaling"))
    layers = model.layers()
    opt = Adam(layers, lr=cfg["lr"], betas=tuple(cfg["betas"]))
    data_rng = np.random.default_rng(cfg["seed"] + 1)
    batch = cfg["chars_per_step"] // cfg["context"]
    eval_x = val_ids[: cfg["eval_chars"]]
    curve, recent, loads = {"step": [], "train": [], "val": []}, [], []
    t0 = time.perf_counter()
    for step in range(1, cfg["steps"] + 1):
        x, y = random_windows(data_rng, train_ids, batch, cfg["context"])
        recent.append(train_step(model, layers, opt, x, y, step, cfg))
        if step % cfg["eval_every"] == 0 or step == cfg["steps"]:
            model.train(False)
            val = loss_by_position(model, eval_x, cfg["context"]).mean()
            curve["step"].append(step)
            curve["train"].append(round(float(np.mean(recent)), 4))
            curve["val"].append(round(float(val), 4))
            loads.append(os.getloadavg()[0])
            recent = []
            print(
                f"step {step:5d}  train {curve['train'][-1]:.4f}  val {curve['val'][-1]:.4f}  "
                f"wall {time.perf_counter() - t0:.0f}s  load {loads[-1]:.1f}",
                file=log,
                flush=True,
            )
    return model, chars, val_ids, curve, time.perf_counter() - t0, loads


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--positions", choices=_POSITIONS, required=True)
    parser.add_argument(
        "--context",
        type=int_in(1, CONFIG["chars_per_step"]),
        default=128,
        help=f"characters a window (default 128; at most chars_per_step, "
        f"{CONFIG['chars_per_step']:,}: a step holds whole windows)",
    )
    parser.add_argument("--block-size", type=int_at_least(1), default=None, help="tiled attention")
    parser.add_argument("--out", default=None, help="output directory")
    parser.add_argument(
        "--threads", type=int_at_least(1), default=1, help="BLAS threads (default 1)"
    )
    parser.add_argument(
        "--finetune",
        choices=("linear", "ntk"),
        default=None,
        help="fine-tune the rotary 128-character model at --context with RoPE scaled by "
        "context / 128 this way, for --steps steps",
    )
    parser.add_argument(
        "--steps", type=int_at_least(1), default=None, help="steps (default: CONFIG's)"
    )
    parser.add_argument(
        "--size",
        choices=sorted(SIZES),
        default="small",
        help="model size: CONFIG's (small, the default) or chapter 11's (name ends _chapter12)",
    )
    args = parser.parse_args(argv)
    cfg = {**CONFIG, **SIZES[args.size], "positions": args.positions, "context": args.context}
    if args.block_size is not None:
        cfg["block_size"] = args.block_size
    if args.steps is not None:
        cfg["steps"] = args.steps
    if args.finetune and args.positions != "rotary":
        parser.error("--finetune needs --positions rotary")
    if args.finetune and args.size != "small":
        parser.error("--size is for runs from scratch, not --finetune")
    out = out_dir(parser, checkpoint_dir() if args.out is None else args.out)
    name = f"{args.positions}_{args.context}"
    start = None
    if args.finetune:
        start = out / "rotary_128.npz"
        if not start.is_file():
            parser.error(f"--finetune starts from {start}, which is missing: train it first")
        factor = args.context / 128
        cfg.update(rope_scaling={"type": args.finetune, "factor": factor}, warmup=10)
        cfg.update(lr=1e-3, finetuned_from="rotary_128.npz", eval_every=25)
        name = f"rotary_{args.finetune}_finetuned_{args.context}"
    if args.size != "small":
        name += f"_{args.size}"
    with threadpool_limits(limits=args.threads, user_api="blas"):
        model, chars, val_ids, curve, wall, loads = train(cfg, start=start)
        path = out / f"{name}.npz"
        save_checkpoint(model, cfg, chars, path)
        loaded, _ = load_checkpoint(path, block_size=cfg.get("block_size"))
        by_pos = loss_by_position(loaded, val_ids, cfg["context"])
    command = f"python -m attention_lib.train.long_context --positions {args.positions}"
    command += f" --context {args.context}"
    if args.block_size is not None:
        command += f" --block-size {args.block_size}"
    if args.finetune:
        command += f" --finetune {args.finetune} --steps {cfg['steps']}"
    if args.size != "small":
        command += f" --size {args.size}"
    manifest = {
        "command": command,
        "script": "attention_lib/train/long_context.py",
        "model": "TinyGPT",
        "config": cfg,
        "n_vocab": len(chars),
        "parameters": int(model.n_params()),
        "training_characters": cfg["steps"] * cfg["chars_per_step"],
        "file": path.name,
        "sha256": sha256(path),
        "weights_dtype": "float32",
        "text": "data/shakespeare/input.txt",
        "text_sha256": sha256(text_path()),
        "split": "first 90% train, last 10% validation (nanoGPT's)",
        "threads": args.threads,
        "wall_seconds": round(wall, 1),
        "load_average_1min": shared_load_average(loads),
        "numpy": np.__version__,
        "curve": curve,
        "evaluation": {
            "val_loss": round(float(by_pos.mean()), 4),
            "val_loss_by_position": [round(float(v), 4) for v in by_pos],
            "measured_on": "last 10% of the text, consecutive windows of the context",
        },
    }
    write_json(out / f"{name}.json", manifest)
    print(json.dumps({"val_loss": manifest["evaluation"]["val_loss"]}), flush=True)
    return manifest


if __name__ == "__main__":
    main()
