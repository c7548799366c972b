"""Train chapter 9's induction model with two heads per layer, and commit it.

The task is chapter 9's: sequences of ``L = 24`` random tokens out of 32 in
which a segment of 4 to 12 tokens is immediately repeated; the model is
trained on the repeat's predictable positions only. The recipe is chapter
9's too (a two-layer TinyGPT, ``d_model = 32``, rotary positions, Adam at
``3e-3``, 450 steps of 32 sequences, the same seeds), with one change: two
heads per layer instead of one, so that the heads doing the work have to be
found among others, and an ablation of a head that does not do it is
possible (the random-head control of the chapter "What heads do").

``python -m attention_lib.train.induction`` writes
``data/checkpoints/induction/induction.npz`` (float16, :meth:`TinyGPT.save`'s
format) and ``manifest.json`` (the configuration, seeds, wall time, sha256,
and the copy accuracy on 1000 held-out sequences). It takes about 10 s on
one core.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from .evaluate_long_context import cpu_name
from .._checks import as_int
from ..data.paths import data_dir, sha256, write_atomic_group
from ..models.gpt import TinyGPT, checkpoint_arrays, named_params
from ..nn import Adam, softmax_cross_entropy

__all__ = ["CONFIG", "CHARS", "accuracy", "checkpoint_dir", "make_batch", "train"]

CONFIG = {
    "n_vocab": 32,
    "length": 24,
    "d_model": 32,
    "n_heads": 2,
    "n_layers": 2,
    "d_ff": 128,
    "max_len": 24,
    "positions": "rotary",
    "dropout": 0.0,
    "batch": 32,
    "steps": 450,
    "lr": 3e-3,
    "init_seed": 6,
    "data_seed": 7,
    "held_out_seed": 5,
    "held_out": 1000,
}

#: One character per token (the checkpoint format stores a vocabulary): base-32 digits.
CHARS = list("0123456789abcdefghijklmnopqrstuv")


def checkpoint_dir() -> Path:
    """``data/checkpoints/induction``."""
    return data_dir() / "checkpoints" / "induction"


def make_batch(n: int, rng: np.random.Generator, n_vocab: int = 32, length: int = 24):
    """Chapter 9's repeated-segment task: ``n`` sequences and where they are predictable.

    Parameters
    ----------
    n : int
        The number of sequences.
    rng : numpy.random.Generator
    n_vocab : int, optional
        The vocabulary size; at least ``length`` (outside the repeat, the
        tokens of a sequence all differ).
    length : int, optional
        Tokens per sequence, at least 8 (a segment has 4 to ``length // 2`` tokens).

    Returns
    -------
    tokens : ndarray of int64, shape (n, length)
    where : ndarray of bool, shape (n, length - 1)
        ``where[k, i]``: position ``i``'s next token is predictable (inside
        the repeat, after its first token).
    segments : list of (int, int)
        ``(a, m)``: a segment of ``m`` tokens starting at ``a``, repeated at ``a + m``.

    Examples
    --------
    >>> import numpy as np
    >>> tokens, where, segments = make_batch(2, np.random.default_rng(0))
    >>> tokens.shape, where.shape, len(segments)
    ((2, 24), (2, 23), 2)
    >>> a, m = segments[0]
    >>> bool((tokens[0, a : a + m] == tokens[0, a + m : a + 2 * m]).all())
    True
    """
    n = as_int(n, "n", 1)
    length = as_int(length, "length", 8)
    n_vocab = as_int(n_vocab, "n_vocab", length)
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    L = length
    tokens = np.empty((n, L), dtype=np.int64)
    where, segments = np.zeros((n, L - 1), dtype=bool), []
    for k in range(n):
        m = rng.integers(4, L // 2 + 1)  # segment length
        a = rng.integers(0, L - 2 * m + 1)  # segment start
        fresh = rng.choice(n_vocab, size=L - m, replace=False)
        tokens[k] = np.concatenate([fresh[: a + m], fresh[a : a + m], fresh[a + m :]])
        where[k, a + m : a + 2 * m - 1] = True
        segments.append((int(a), int(m)))
    return tokens, where, segments


def accuracy(logits: np.ndarray, tokens: np.ndarray, where: np.ndarray) -> float:
    """The share of predictable positions whose likeliest next token is right.

    Parameters
    ----------
    logits : ndarray, shape (B, T, n_vocab)
    tokens : ndarray of int, shape (B, T)
    where : ndarray of bool, shape (B, T - 1)
        As :func:`make_batch` returns it.

    Returns
    -------
    float
    """
    logits, tokens, where = np.asarray(logits), np.asarray(tokens), np.asarray(where)
    B, T = tokens.shape if tokens.ndim == 2 else (None, None)
    if logits.shape[:2] != (B, T) or where.shape != (B, (T or 1) - 1):
        raise ValueError(
            f"logits {logits.shape}, tokens {tokens.shape} and where {where.shape} do not fit: "
            f"expected (B, T, n_vocab), (B, T) and (B, T - 1)"
        )
    return float((logits[:, :-1].argmax(axis=-1) == tokens[:, 1:])[where].mean())


def train(cfg: dict = CONFIG) -> tuple[TinyGPT, list[float]]:
    """Train the model ``cfg`` describes (:data:`CONFIG`), deterministically.

    Returns
    -------
    (TinyGPT, list of float)
        The float32 model (dropout off) and its training loss at each step.
    """
    keys = ("d_model", "n_heads", "n_layers", "d_ff", "max_len", "positions", "dropout")
    model = TinyGPT(
        cfg["n_vocab"], rng=np.random.default_rng(cfg["init_seed"]), **{k: cfg[k] for k in keys}
    )
    opt, rng, losses = (
        Adam(model.layers(), lr=cfg["lr"]),
        np.random.default_rng(cfg["data_seed"]),
        [],
    )
    V = cfg["n_vocab"]
    for _ in range(cfg["steps"]):
        tokens, where, _ = make_batch(cfg["batch"], rng, V, cfg["length"])
        logits = model.forward(tokens)
        loss, d = softmax_cross_entropy(logits[:, :-1][where], tokens[:, 1:][where])
        d_logits = np.zeros_like(logits)
        d_logits[:, :-1][where] = d
        model.backward(d_logits)
        opt.step()
        losses.append(float(loss))
    return model.train(False), losses


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        prog="python -m attention_lib.train.induction", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--out", default=str(checkpoint_dir()), help="output directory")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = CONFIG
    with threadpool_limits(limits=1, user_api="blas"):
        started, cpu = time.perf_counter(), time.process_time()
        model, losses = train(cfg)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        buffer = io.BytesIO()  # the bytes evaluated are the bytes committed
        np.savez(buffer, **checkpoint_arrays(model, cfg, CHARS))
        fd, staged = tempfile.mkstemp(dir=out, prefix=".induction.", suffix=".npz")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(buffer.getvalue())
            loaded, _ = TinyGPT.load(staged)
            digest = sha256(staged)
        finally:
            os.unlink(staged)
        held = make_batch(cfg["held_out"], np.random.default_rng(cfg["held_out_seed"]))
        acc = accuracy(loaded.forward(held[0]), held[0], held[1])
    manifest = {
        "command": "python -m attention_lib.train.induction",
        "model": "TinyGPT",
        "config": cfg,
        "parameters": int(sum(a.size for a in named_params(model).values())),
        "file": "induction.npz",
        "sha256": digest,
        "weights_dtype": "float16",
        "data": "generated by make_batch (chapter 9's task) from data_seed; no file",
        "threads": 1,
        "wall_seconds": round(wall, 1),
        "cpu_seconds": round(cpu, 1),
        "cpu": cpu_name(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "numpy": np.__version__,
        "final_training_loss": round(float(np.mean(losses[-20:])), 4),
        "evaluation": {
            "copy_accuracy": round(acc, 4),
            "measured_on": f"{cfg['held_out']} held-out sequences (seed {cfg['held_out_seed']}), "
            "predictable positions, float16 weights read back",
        },
    }
    write_atomic_group(
        [
            (out / "induction.npz", lambda f: f.write(buffer.getvalue()), "wb"),
            (out / "manifest.json", lambda f: f.write(json.dumps(manifest, indent=1) + "\n"), "w"),
        ]
    )
    print(json.dumps(manifest["evaluation"]), flush=True)
    return manifest


if __name__ == "__main__":
    main()
