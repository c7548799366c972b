"""Train the character-level Shakespeare model and write its checkpoint.

Run as ``python -m attention_lib.models.train_shakespeare [--out DIR]``. It
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
import zipfile
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from .._cli import int_at_least
from ..data.paths import data_dir, sha256, write_atomic, write_atomic_group
from ..nn import Adam, clip_grad_norm, softmax_cross_entropy
from .gpt import TinyGPT
from .pretrained import shakespeare_dir

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


#: The checkpoint stores each attention layer's query, key and value
#: projections side by side, as the first checkpoints did: W_QKV = [W_Q W_K W_V].
_FUSED = {"W_QKV": ("W_Q", "W_K", "W_V"), "b_QKV": ("b_Q", "b_K", "b_V")}


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


def _slots(model):
    """``{name in the file: [arrays of the model it holds, side by side]}``."""
    layers = [("tok", model.tok)] + ([("pos", model.pos)] if hasattr(model, "pos") else [])
    for i, block in enumerate(model.blocks):
        parts = [("ln1", block.ln1), ("attn", block.attn)]
        if not block.attention_only:
            parts += [("ln2", block.ln2), ("ffn.fc1", block.ffn.fc1), ("ffn.fc2", block.ffn.fc2)]
        layers += [(f"blocks.{i}.{name}", layer) for name, layer in parts]
    slots = {}
    for name, layer in layers + [("ln_f", model.ln_f), ("head", model.head)]:
        params = {k: [a] for k, a in layer.params.items()}
        if name.endswith(".attn"):
            for k, names in _FUSED.items():
                if names[0] in params:
                    params[k] = [params.pop(n)[0] for n in names]
        for k, arrays in params.items():
            slots[f"{name}.{k}"] = arrays
    return slots


def named_params(model: TinyGPT) -> dict[str, np.ndarray]:
    """``{name: array}`` for every parameter of a TinyGPT, named by where it sits.

    The names are the checkpoint's: each attention layer's ``W_Q, W_K, W_V``
    appear as one ``W_QKV`` (and the biases as ``b_QKV``), a copy of the
    three side by side.
    """
    return {
        k: a[0] if len(a) == 1 else np.concatenate(a, axis=-1) for k, a in _slots(model).items()
    }


def build_model(cfg: dict, n_vocab: int, rng: np.random.Generator | None = None) -> TinyGPT:
    rng = np.random.default_rng(cfg["seed"]) if rng is None else rng
    keys = ("d_model", "n_heads", "n_layers", "d_ff", "max_len", "positions", "dropout")
    model = TinyGPT(n_vocab, rng=rng, **{k: cfg[k] for k in keys})
    for layer in model.layers():
        for k in layer.params:
            layer.params[k] = layer.params[k].astype(np.float32)
    return model


def checkpoint_arrays(model: TinyGPT, cfg: dict, chars: list[str]) -> dict:
    """What :func:`save_checkpoint` writes: float16 parameters and the config as JSON."""
    arrays = {k: a.astype(np.float16) for k, a in named_params(model).items()}
    arrays["config"] = np.array(json.dumps({**cfg, "n_vocab": len(chars), "chars": "".join(chars)}))
    return arrays


def save_checkpoint(model: TinyGPT, cfg: dict, chars: list[str], path: Path) -> None:
    arrays = checkpoint_arrays(model, cfg, chars)
    write_atomic(path, lambda f: np.savez(f, **arrays), mode="wb")


#: The longest ``max_len`` a checkpoint without learned positions may claim
#: (their table is computed, not read from the file, so the file cannot bound it).
MAX_LEN_LIMIT = 2**16


def checkpoint_shapes(cfg: dict) -> dict:
    """``{name: shape}`` of every array :func:`save_checkpoint` writes for ``cfg`` (no arrays)."""
    V, d, d_ff = cfg["n_vocab"], cfg["d_model"], cfg["d_ff"]
    shapes = {"tok.E": (V, d)}
    if cfg["positions"] == "learned":
        shapes["pos.E"] = (cfg["max_len"], d)
    ln = {"gamma": (d,), "beta": (d,)}
    for i in range(cfg["n_layers"]):
        block = {f"ln1.{k}": v for k, v in ln.items()} | {f"ln2.{k}": v for k, v in ln.items()}
        block |= {"attn.W_QKV": (d, 3 * d), "attn.b_QKV": (3 * d,)}
        block |= {"attn.W_O": (d, d), "attn.b_O": (d,)}
        block |= {"ffn.fc1.W": (d, d_ff), "ffn.fc1.b": (d_ff,)}
        block |= {"ffn.fc2.W": (d_ff, d), "ffn.fc2.b": (d,)}
        shapes |= {f"blocks.{i}.{k}": v for k, v in block.items()}
    shapes |= {f"ln_f.{k}": v for k, v in ln.items()}
    return shapes | {"head.W": (d, V), "head.b": (V,)}


def checked_config(path: Path) -> dict:
    """The config of a checkpoint, checked against its arrays' headers (no array is read).

    Raises :class:`~attention_lib.models.seq2seq.CheckpointError` (a ``ValueError``)
    naming the file for a damaged file, a config that is not a TinyGPT's, or
    arrays of other shapes than the config claims: nothing is allocated for a
    model the file does not hold.
    """
    from .seq2seq import CheckpointError, _array_headers

    try:
        headers = _array_headers(path)
        shape, kind = headers.get("config", ((None,), None))
        if shape != () or kind is None or kind.kind != "U" or kind.itemsize > 4 * 65536:
            raise CheckpointError(f"{path}: has no config (a JSON text array named 'config')")
        with np.load(path, allow_pickle=False) as f:
            cfg = json.loads(str(f["config"]))
    except CheckpointError:
        raise
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as err:
        raise CheckpointError(
            f"{path}: not a checkpoint written by save_checkpoint(): {err}"
        ) from None
    if not isinstance(cfg, dict):
        raise CheckpointError(f"{path}: its config is a JSON {type(cfg).__name__}, not an object")
    for k in ("n_vocab", "d_model", "n_heads", "n_layers", "d_ff", "max_len"):
        if type(cfg.get(k)) is not int or cfg[k] < 1:
            raise CheckpointError(
                f"{path}: the config's {k} must be a positive integer, got {cfg.get(k)!r}"
            )
    chars = cfg.get("chars")
    if not isinstance(chars, str) or len(chars) != cfg["n_vocab"] or len(set(chars)) != len(chars):
        raise CheckpointError(
            f"{path}: the config's chars must be {cfg['n_vocab']} distinct characters "
            f"(one per token), got {str(chars)[:40]!r}"
        )
    if cfg.get("positions") not in ("learned", "sinusoidal", "rotary", None):
        raise CheckpointError(f"{path}: the config's positions {cfg.get('positions')!r} is unknown")
    if cfg["positions"] != "learned" and cfg["max_len"] > MAX_LEN_LIMIT:
        raise CheckpointError(f"{path}: the config's max_len must be at most {MAX_LEN_LIMIT}")
    dropout = cfg.get("dropout", 0.0)
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:
        raise CheckpointError(f"{path}: the config's dropout must be in [0, 1), got {dropout!r}")
    shapes = checkpoint_shapes(cfg)
    arrays = {k: v for k, v in headers.items() if k != "config"}
    missing, unexpected = sorted(set(shapes) - set(arrays)), sorted(set(arrays) - set(shapes))
    if missing or unexpected:
        raise CheckpointError(
            f"{path}: its arrays do not fit its config: missing {missing[:5] or 'none'}"
            f"{' ...' if len(missing) > 5 else ''}, unexpected {unexpected[:5] or 'none'}"
        )
    for k, want in shapes.items():
        got, kind = arrays[k]
        if tuple(got) != want or kind.kind != "f":
            raise CheckpointError(
                f"{path}: {k} is {kind} {tuple(got)} but its config needs a float array "
                f"of shape {want}"
            )
    return cfg


def load_checkpoint(path: str | Path) -> tuple[TinyGPT, list[str]]:
    """A float32 TinyGPT from a checkpoint written by :func:`save_checkpoint`, and its characters.

    The config is checked against the file's arrays before the model is built
    (:func:`checked_config`); a non-finite weight is refused, naming the file.
    """
    from .seq2seq import CheckpointError

    path = Path(path)
    cfg = checked_config(path)
    with np.load(path, allow_pickle=False) as f:
        model = build_model(cfg, cfg["n_vocab"], np.random.default_rng(0))
        for k, arrays in _slots(model).items():
            widths = np.cumsum([a.shape[-1] for a in arrays])[:-1]
            value = f[k]
            if not np.isfinite(value).all():
                raise CheckpointError(f"{path}: {k} holds NaN or infinity")
            for a, part in zip(arrays, np.split(value, widths, axis=-1)):
                a[...] = part.astype(np.float32)
    return model.train(False), list(cfg["chars"])


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
        prog="python -m attention_lib.models.train_shakespeare", description=__doc__.splitlines()[0]
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
            loaded, _ = load_checkpoint(staged)
            val = validation_loss(loaded, val_ids, CONFIG["max_len"])
            digest = sha256(staged)
        finally:
            os.unlink(staged)
    n_params = int(sum(a.size for a in named_params(model).values()))
    manifest = {
        "command": "python -m attention_lib.models.train_shakespeare",
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
