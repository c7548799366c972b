"""Measure the long-context chapters' figures and write them as JSON beside the checkpoints.

Run as ``python -m attention_lib.train.evaluate_long_context PART [--scheme S]``
with PART one of:

- ``memory``: the peak memory (tracemalloc) and the time of one training
  step (forward and backward) of one attention layer, untiled against tiled,
  for T = 256 ... 4096: ``eval_memory.json``;
- ``extrapolation``: the held-out loss at each position of 1,024-character
  windows (8 times the training context) of the model with positions ``S``
  (for ``rotary`` also with linear and NTK-aware RoPE scaling, factor 8;
  ``learned`` has no vector past position 127 and is measured on 128-character
  windows of the same text): ``eval_extrapolation_<S>.json``;
- ``stream``: the loss over one 10,000-character stream of held-out text for
  the model ``S``: full attention (tiled), a sliding window alone, and the
  window with 1, 2 and 4 attention sinks through the rolling KV cache:
  ``eval_stream_<S>.json``.

Each file records the sha256 of the checkpoint it read, its wall time and the
machine's load. Everything is deterministic (no sampling).
"""

import argparse
import json
import os
import time
import tracemalloc

import numpy as np
from threadpoolctl import threadpool_limits

from ..data.paths import sha256, write_atomic
from ..nn import MultiHeadAttention
from .long_context import checkpoint_dir, load_checkpoint, load_text, loss_by_position

#: The stream: this many held-out characters, fed this many at a time.
STREAM = {"chars": 10_000, "chunk": 32, "window": 64, "sinks": [0, 1, 2, 4]}
LENGTHS = [256, 512, 1024, 2048, 4096]
EXTRAP = {"length": 1024, "windows": 32, "factor": 8}


def attention_step(T, block_size, d_model=64, n_heads=4, seed=0):
    """Peak bytes, wall and CPU seconds of one forward + backward of one layer at length T.

    The peak is traced (tracemalloc) on one step; the times are the best of
    three further steps, untraced (tracing slows every allocation down).
    """
    rng = np.random.default_rng(seed)
    att = MultiHeadAttention(d_model, n_heads, rng, dtype=np.float32, block_size=block_size)
    x = rng.normal(size=(1, T, d_model)).astype(np.float32)
    g = rng.normal(size=x.shape).astype(np.float32)
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    att.backward((att.forward(x, is_causal=True), g)[1])
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    wall, cpu = [], []
    for _ in range(3):
        t0, c0 = time.perf_counter(), time.process_time()
        att.backward((att.forward(x, is_causal=True), g)[1])
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return peak, min(wall), min(cpu)


def cpu_name() -> str:
    """The processor's model name, family and model (``/proc/cpuinfo``), or ``"unknown"``.

    A virtual machine may name only the maker and line ("AMD EPYC"); the family
    and model numbers still tell the generation (25 and 17: Zen 4).
    """
    fields = {}
    try:
        with open("/proc/cpuinfo", encoding="utf8") as f:
            for line in f:
                key, _, value = line.partition(":")
                if not key.strip():
                    break  # the first processor's block ends at a blank line
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    name = fields.get("model name")
    if name is None:
        return "unknown"
    if "cpu family" in fields and "model" in fields:
        name += f" (family {fields['cpu family']}, model {fields['model']})"
    return name


def memory():
    rows = []
    for T in LENGTHS:
        for name, block in (("naive", None), ("tiled", 128)):
            peak, seconds, cpu = attention_step(T, block)
            rows.append(
                {
                    "T": T,
                    "path": name,
                    "peak_mib": peak / 2**20,
                    "seconds": seconds,
                    "cpu_seconds": cpu,
                    "load_1min": os.getloadavg()[0],
                }
            )
            print(rows[-1], flush=True)
    return {
        "layer": "MultiHeadAttention(64, 4 heads), float32, batch 1, causal; tiled block 128",
        "measured": "tracemalloc peak during one forward + backward (the inputs excluded); "
        "wall and CPU seconds: the best of three untraced steps",
        "cpu": cpu_name(),
        "rows": rows,
    }


def schemes(part: str) -> list[str]:
    """The ``--scheme`` values ``part`` measures: the checkpoints :func:`checkpoint_dir` holds.

    ``stream`` reads ``<S>_128.npz``, a model trained on 128 characters;
    ``extrapolation`` those and the fine-tuned ``<S>.npz`` (names with
    ``finetuned``).
    """
    folder = checkpoint_dir()
    stems = sorted(p.stem for p in folder.glob("*.npz")) if folder.is_dir() else []
    at_128 = [s.removesuffix("_128") for s in stems if s.endswith("_128")]
    if part == "stream":
        return at_128
    return sorted(set(at_128) | {s for s in stems if "finetuned" in s})


def _checkpoint(scheme):
    """``<scheme>_128.npz``, or ``<scheme>.npz`` for a fine-tuned model."""
    path = checkpoint_dir() / f"{scheme}_128.npz"
    return path if path.exists() else checkpoint_dir() / f"{scheme}.npz"


def extrapolation(scheme):
    path = _checkpoint(scheme)
    _, _, val_ids = load_text()
    n = EXTRAP["length"] * EXTRAP["windows"] + 1
    variants = {"": None}
    if scheme == "rotary":
        for kind in ("linear", "ntk"):
            variants[kind] = {"type": kind, "factor": float(EXTRAP["factor"])}
    out = {}
    length = 128 if scheme == "learned" else EXTRAP["length"]  # its table stops at 128
    for name, scaling in variants.items():
        model, cfg = load_checkpoint(path, max_len=length, block_size=128)
        if scaling is not None:
            for block in model.blocks:
                block.attn.rope_scaling = scaling
        loss = loss_by_position(model, val_ids[:n], length)
        out[name or "plain"] = [round(float(v), 4) for v in loss]
    return {
        "scheme": scheme,
        "checkpoint": path.name,
        "sha256": sha256(path),
        **EXTRAP,
        "loss_by_position": out,
    }


def _stream_losses(model, ids, cache=None, chunk=32):
    """Per-character losses of ``ids`` fed ``chunk`` at a time (one forward if no cache)."""
    losses = []
    parts = (
        [(0, len(ids) - 1)]
        if cache is None
        else [(i, min(i + chunk, len(ids) - 1)) for i in range(0, len(ids) - 1, chunk)]
    )
    for a, b in parts:
        logits = model.forward(ids[None, a:b], cache)[0].astype(np.float64)
        logits -= logits.max(axis=-1, keepdims=True)
        logp = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
        losses.append(-logp[np.arange(b - a), ids[a + 1 : b + 1]])
    return np.concatenate(losses)


def stream(scheme):
    path = checkpoint_dir() / f"{scheme}_128.npz"
    _, _, val_ids = load_text()
    ids = val_ids[: STREAM["chars"] + 1]
    results = {}
    model, _ = load_checkpoint(path, max_len=len(ids), block_size=512)
    results["full"] = _stream_losses(model, ids)
    model, _ = load_checkpoint(path, max_len=STREAM["window"] + 4 + STREAM["chunk"])
    for s in STREAM["sinks"]:
        cache = model.rolling_cache(STREAM["window"], sinks=s)
        results[f"sinks_{s}"] = _stream_losses(model, ids, cache, STREAM["chunk"])
    summary = {}
    for name, loss in results.items():
        bins = loss[: len(loss) // 500 * 500].reshape(-1, 500).mean(axis=1)
        summary[name] = {
            "mean": round(float(loss.mean()), 4),
            "first_128": round(float(loss[:128].mean()), 4),
            "after_1000": round(float(loss[1000:].mean()), 4),
            "by_500": [round(float(v), 4) for v in bins],
        }
    return {
        "scheme": scheme,
        "checkpoint": path.name,
        "sha256": sha256(path),
        **STREAM,
        "results": summary,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=("memory", "extrapolation", "stream"))
    parser.add_argument(
        "--scheme",
        default=None,
        help="the model (positions) to measure, for extrapolation and stream: "
        "a checkpoint of checkpoint_dir()",
    )
    args = parser.parse_args(argv)
    if args.part == "memory" and args.scheme is not None:
        parser.error("--scheme is for extrapolation and stream: memory measures one layer")
    if args.part != "memory":
        known = schemes(args.part)
        if args.scheme not in known:
            got = "none" if args.scheme is None else repr(args.scheme)
            parser.error(
                f"{args.part} needs --scheme, one of {', '.join(known) or '(none)'} "
                f"(the checkpoints in {checkpoint_dir()}); got {got}"
            )
    t0, loads = time.perf_counter(), [os.getloadavg()[0]]
    with threadpool_limits(limits=1, user_api="blas"):
        if args.part == "memory":
            result, name = memory(), "eval_memory.json"
        elif args.part == "extrapolation":
            result, name = extrapolation(args.scheme), f"eval_extrapolation_{args.scheme}.json"
        else:
            result, name = stream(args.scheme), f"eval_stream_{args.scheme}.json"
    loads.append(os.getloadavg()[0])
    command = "python -m attention_lib.train.evaluate_long_context " + args.part
    command += f" --scheme {args.scheme}" if args.scheme else ""
    result = {
        "command": command,
        "script": "attention_lib/train/evaluate_long_context.py",
        **result,
        "threads": 1,
        "wall_seconds": round(time.perf_counter() - t0, 1),
        "load_average_1min": {"start": loads[0], "end": loads[1], "cores": os.cpu_count()},
        "numpy": np.__version__,
    }
    path = checkpoint_dir() / name
    write_atomic(path, lambda f: f.write(json.dumps(result, indent=1) + "\n"))
    print(f"wrote {path}", flush=True)


if __name__ == "__main__":
    main()
