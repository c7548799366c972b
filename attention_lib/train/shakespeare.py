"""Train the character-level Shakespeare model and write its checkpoint.

Run as ``python -m attention_lib.train.shakespeare [--out DIR]``. It
trains :class:`~attention_lib.models.TinyGPT` (full pre-LN blocks: attention
and feed-forward, dropout, learned positions) on the first 90% of Tiny
Shakespeare, one character a token, and writes into ``DIR`` (default
``data/checkpoints/shakespeare``):

- ``shakespeare.npz``: every parameter, stored in float16 (the model trains
  and runs in float32; the manifest's validation loss is measured on the
  float16 weights, so what is committed is what is evaluated), and the
  configuration as JSON, no pickles;
- ``manifest.json``: the configuration, seed, steps, wall time, sha256 of the
  checkpoint and of the text, the loss curve (train and validation, as data)
  and the final validation loss on the last 10% of the text, in consecutive
  windows of the context length (how nanoGPT's split is usually scored).

The checkpoint is evaluated from a staged file, then it and its manifest
replace the old pair in one step (an interrupt leaves the old pair, loadable).

Training is seeded and deterministic on one machine; across CPUs the BLAS
kernels round differently, so a retrained model matches the committed one in
its validation loss (within ``scripts/check-retrain.sh``'s tolerance), not in
its bits.
"""

import argparse
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from .._cli import int_at_least
from ..data.paths import data_dir, sha256, write_atomic_group
from ..nn import Adam, clip_grad_norm, softmax_cross_entropy
from ..models.gpt import TinyGPT, checkpoint_arrays, named_params
from ..models.pretrained import shakespeare_dir

#: The model and its training. Sizes as nanoGPT's small CPU models; the step
#: count is what fits the 45-minute budget on the project's 2-core machine
#: (about 0.8 s a step on 2 threads, evaluations included: 3,000 steps took 2,395 s).
CONFIG = {
    "d_model": 192,
    "n_heads": 4,
    "n_layers": 4,
    "d_ff": 768,
    "max_len": 128,
    "dropout": 0.1,
    "positions": "learned",
    "batch": 32,
    "steps": 3000,
    "lr": 2e-3,
    "min_lr": 1e-4,
    "warmup": 100,
    "betas": [0.9, 0.99],
    "clip": 1.0,
    "seed": 1337,
    "eval_every": 100,
    "eval_batches": 8,
}


def text_path() -> Path:
    """``data/shakespeare/input.txt``: Tiny Shakespeare, as char-rnn ships it."""
    return data_dir() / "shakespeare" / "input.txt"


def load_text() -> tuple[list[str], np.ndarray, np.ndarray]:
    """The whole text, its sorted character vocabulary, and the train/validation split.

    Returns ``(chars, train_ids, val_ids)``: the first 90% of the characters
    train and the last 10% validate, as in nanoGPT.
    """
    text = text_path().read_text(encoding="utf8")
    chars = sorted(set(text))
    lookup = {c: i for i, c in enumerate(chars)}
    ids = np.fromiter((lookup[c] for c in text), dtype=np.int64, count=len(text))
    n_train = int(0.9 * len(ids))
    return chars, ids[:n_train], ids[n_train:]


def count_baselines(train_ids: np.ndarray, val_ids: np.ndarray, n_vocab: int) -> dict[str, float]:
    """Held-out loss (nats per character) of two models that barely read their context.

    ``"unigram"`` knows only how often each character occurs in ``train_ids``;
    ``"bigram"`` also knows the previous character (a table of counts of each
    pair). Both add one to every count, so no character has probability zero.
    A model that reads its context must beat the bigram to show it uses more
    than one character of it.
    """
    train_ids, val_ids = np.asarray(train_ids), np.asarray(val_ids)
    for name, ids in (("train_ids", train_ids), ("val_ids", val_ids)):
        if ids.ndim != 1 or len(ids) < 2 or not np.issubdtype(ids.dtype, np.integer):
            raise ValueError(
                f"{name} must be a 1-D array of at least 2 integer ids, "
                f"got shape {ids.shape} and dtype {ids.dtype}"
            )
        if ids.min() < 0 or ids.max() >= n_vocab:
            raise ValueError(f"{name} holds ids outside [0, n_vocab = {n_vocab})")
    unigram = np.bincount(train_ids, minlength=n_vocab) + 1.0
    unigram /= unigram.sum()
    bigram = np.ones((n_vocab, n_vocab))
    np.add.at(bigram, (train_ids[:-1], train_ids[1:]), 1)  # (previous, next)
    bigram /= bigram.sum(axis=1, keepdims=True)
    return {
        "unigram": float(-np.log(unigram[val_ids]).mean()),
        "bigram": float(-np.log(bigram[val_ids[:-1], val_ids[1:]]).mean()),
    }


def random_windows(
    rng: np.random.Generator, ids: np.ndarray, batch: int, length: int
) -> tuple[np.ndarray, np.ndarray]:
    """``batch`` windows of ``length + 1`` characters at random offsets: inputs and targets."""
    starts = rng.integers(0, len(ids) - length - 1, size=batch)
    windows = ids[starts[:, None] + np.arange(length + 1)]
    return windows[:, :-1], windows[:, 1:]


def mean_loss(model: TinyGPT, x: np.ndarray, y: np.ndarray) -> float:
    logits = model.forward(x)
    loss, _ = softmax_cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    return loss


def validation_loss(model: TinyGPT, val_ids: np.ndarray, length: int, batch: int = 32) -> float:
    """Mean loss (nats per character) over the validation text in consecutive windows.

    The text is cut into ``len // length`` windows of ``length`` characters
    (each predicting the character after each of its positions); the few
    characters left over at the end are not scored.
    """
    n = (len(val_ids) - 1) // length
    x = val_ids[: n * length].reshape(n, length)
    y = val_ids[1 : n * length + 1].reshape(n, length)
    model.train(False)
    total = 0.0
    for i in range(0, n, batch):
        total += mean_loss(model, x[i : i + batch], y[i : i + batch]) * len(x[i : i + batch])
    return total / n


def learning_rate(step: int, cfg: dict) -> float:
    """Linear warm-up to ``lr``, then a cosine decay to ``min_lr`` at the last step."""
    if step <= cfg["warmup"]:
        return cfg["lr"] * step / cfg["warmup"]
    frac = (step - cfg["warmup"]) / max(1, cfg["steps"] - cfg["warmup"])
    return cfg["min_lr"] + 0.5 * (cfg["lr"] - cfg["min_lr"]) * (1 + np.cos(np.pi * frac))


def train_step(model, layers, opt, x, y, step: int, cfg: dict) -> float:
    """One step on the batch ``(x, y)``: forward, cross-entropy, backward, clip, Adam.

    The learning rate is :func:`learning_rate` at ``step``; returns the loss.
    The Shakespeare, long-context and serving trainers share it.
    """
    model.train(True)
    logits = model.forward(x)
    loss, dlogits = softmax_cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    model.backward(dlogits.reshape(logits.shape).astype(np.float32))
    clip_grad_norm(layers, cfg["clip"])
    opt.lr = learning_rate(step, cfg)
    opt.step()
    return loss


def build_model(cfg: dict, n_vocab: int, rng: np.random.Generator | None = None) -> TinyGPT:
    rng = np.random.default_rng(cfg["seed"]) if rng is None else rng
    keys = ("d_model", "n_heads", "n_layers", "d_ff", "max_len", "positions", "dropout")
    model = TinyGPT(n_vocab, rng=rng, **{k: cfg[k] for k in keys})
    for layer in model.layers():
        for k in layer.params:
            layer.params[k] = layer.params[k].astype(np.float32)
    return model


def train(cfg, log=None):
    log = sys.stdout if log is None else log  # the stream of the call, not of the import
    chars, train_ids, val_ids = load_text()
    model = build_model(cfg, len(chars))
    layers = model.layers()
    opt = Adam(layers, lr=cfg["lr"], betas=tuple(cfg["betas"]))
    data_rng = np.random.default_rng(cfg["seed"] + 1)
    eval_rng = np.random.default_rng(cfg["seed"] + 2)
    curve = {"step": [], "train": [], "val": []}
    recent = []
    t0 = time.perf_counter()
    for step in range(1, cfg["steps"] + 1):
        x, y = random_windows(data_rng, train_ids, cfg["batch"], cfg["max_len"])
        recent.append(train_step(model, layers, opt, x, y, step, cfg))
        if step % cfg["eval_every"] == 0 or step == cfg["steps"]:
            model.train(False)
            windows = (
                random_windows(eval_rng, val_ids, cfg["batch"], cfg["max_len"])
                for _ in range(cfg["eval_batches"])
            )
            val = np.mean([mean_loss(model, x, y) for x, y in windows])
            curve["step"].append(step)
            curve["train"].append(round(float(np.mean(recent)), 4))
            curve["val"].append(round(float(val), 4))
            recent = []
            print(
                f"step {step:5d}  train {curve['train'][-1]:.4f}  val {curve['val'][-1]:.4f}  "
                f"lr {opt.lr:.2e}  wall {time.perf_counter() - t0:.0f}s",
                file=log,
                flush=True,
            )
    return model, chars, val_ids, curve, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        prog="python -m attention_lib.train.shakespeare", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--out", default=str(shakespeare_dir()), help="output directory")
    parser.add_argument(
        "--threads", type=int_at_least(1), default=2, help="BLAS threads (default 2)"
    )
    args = parser.parse_args(argv)
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        parser.error(f"--out {out}: cannot make the folder ({err.strerror})")
    path = out / "shakespeare.npz"
    with threadpool_limits(limits=args.threads, user_api="blas"):
        model, chars, val_ids, curve, wall = train(CONFIG)
        # The checkpoint is evaluated from a file beside it, then it and its manifest
        # replace the old pair in one step: an interrupt anywhere leaves the old pair.
        buffer = io.BytesIO()  # the bytes evaluated are the bytes committed
        np.savez(buffer, **checkpoint_arrays(model, CONFIG, chars))
        fd, staged = tempfile.mkstemp(dir=out, prefix=".shakespeare.", suffix=".npz")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(buffer.getvalue())
            loaded, _ = TinyGPT.load(staged)
            val = validation_loss(loaded, val_ids, CONFIG["max_len"])
            digest = sha256(staged)
        finally:
            os.unlink(staged)
    n_params = int(sum(a.size for a in named_params(model).values()))
    manifest = {
        "command": "python -m attention_lib.train.shakespeare",
        "model": "TinyGPT",
        "config": CONFIG,
        "n_vocab": len(chars),
        "parameters": n_params,
        "file": path.name,
        "sha256": digest,
        "weights_dtype": "float16",
        "text": "data/shakespeare/input.txt",
        "text_sha256": sha256(text_path()),
        "split": "first 90% train, last 10% validation (nanoGPT's)",
        "threads": args.threads,
        "wall_seconds": round(wall, 1),
        "numpy": np.__version__,
        "curve": curve,
        "evaluation": {
            "val_loss": round(float(val), 4),
            "measured_on": "last 10% of the text, consecutive windows of max_len",
        },
    }
    write_atomic_group(
        [
            (path, lambda f: f.write(buffer.getvalue()), "wb"),
            (out / "manifest.json", lambda f: f.write(json.dumps(manifest, indent=1) + "\n"), "w"),
        ]
    )
    print(json.dumps(manifest["evaluation"]), flush=True)
    return manifest


if __name__ == "__main__":
    main()
