"""How much of their context the book's Shakespeare models use: loss by position and a shuffle control.

Run as ``python scripts/shakespeare_context_use.py [--out FILE]`` (default
``data/checkpoints/longctx/eval_context_use.json``). For chapter 18.

The held-out text is the last 10% of Tiny Shakespeare (chapter 11's split).
For chapter 11's model (``load_pretrained("shakespeare")``, context 128) it
measures the loss at each position of consecutive 128-character windows of
the whole held-out text (the long-context models' manifests hold theirs).

The control: in windows of a model's context ``C`` (the first ``WINDOWS``
1,024-character windows of the held-out text, cut into ``1024 / C`` windows
each), it scores the last 64 positions, first with the window intact, then
with the characters before those 64 shuffled (a seeded permutation within
each window), and, for ``C = 1024``, with only the characters more than 192
positions before the window's end shuffled (every scored position then still
has at least 128 intact characters behind it). A model that uses its earlier
context must score worse once it is shuffled; a model that reads only the
last few characters scores the same.
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
from attention_lib.models.pretrained import load_pretrained, shakespeare_dir  # noqa: E402
from attention_lib.train.evaluate_long_context import cpu_name  # noqa: E402
from attention_lib.train.long_context import (  # noqa: E402
    checkpoint_dir,
    load_checkpoint,
    load_text,
    loss_by_position,
)

WINDOWS = 24  # 1,024-character windows of held-out text for the control
SCORED = 64  # the last positions of each window, scored
SEED = 2026


def losses(model, x, y, batch=8):
    """Loss (nats) at every position of the windows ``x`` (n, C) with targets ``y``."""
    out = []
    for i in range(0, len(x), batch):
        logits = model.forward(x[i : i + batch]).astype(np.float64)
        logits -= logits.max(axis=-1, keepdims=True)
        logp = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
        out.append(-np.take_along_axis(logp, y[i : i + batch, :, None], -1)[..., 0])
    return np.concatenate(out)


def shuffled(x, stop, rng):
    """``x`` (n, C) with each row's first ``stop`` entries permuted."""
    x = x.copy()
    for row in x:
        row[:stop] = row[:stop][rng.permutation(stop)]
    return x


def control(model, val_ids, context):
    """Mean loss on each window's last ``SCORED`` positions: intact and shuffled."""
    n = WINDOWS * 1024 // context
    x = val_ids[: n * context].reshape(n, context)
    y = val_ids[1 : n * context + 1].reshape(n, context)
    rng = np.random.default_rng(SEED)
    out = {"intact": losses(model, x, y)[:, -SCORED:].mean()}
    out["earlier_shuffled"] = losses(model, shuffled(x, context - SCORED, rng), y)[
        :, -SCORED:
    ].mean()
    if context - SCORED - 128 > 0:
        stop = context - SCORED - 128
        out["beyond_128_shuffled"] = losses(model, shuffled(x, stop, rng), y)[:, -SCORED:].mean()
    return {k: round(float(v), 4) for k, v in out.items()}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="output JSON file")
    args = parser.parse_args(argv)
    out = Path(args.out) if args.out else checkpoint_dir() / "eval_context_use.json"
    t0, c0, loads = time.perf_counter(), time.process_time(), [os.getloadavg()[0]]
    _, _, val_ids = load_text()
    result = {"models": {}}
    with threadpool_limits(limits=1, user_api="blas"):
        model, _ = load_pretrained("shakespeare")
        by_pos = loss_by_position(model.train(False), val_ids, 128)
        result["chapter11_loss_by_position"] = [round(float(v), 4) for v in by_pos]
        result["chapter11_val_loss"] = round(float(by_pos.mean()), 4)
        result["models"]["chapter11"] = {
            "checkpoint": "data/checkpoints/shakespeare/shakespeare.npz",
            "sha256": sha256(shakespeare_dir() / "shakespeare.npz"),
            "context": 128,
            **control(model, val_ids, 128),
        }
        loads.append(os.getloadavg()[0])
        for name in ("learned_128_chapter12", "learned_1024_chapter12"):
            path = checkpoint_dir() / f"{name}.npz"
            model, cfg = load_checkpoint(path, block_size=128 if cfg_context(path) > 128 else None)
            result["models"][name] = {
                "checkpoint": f"data/checkpoints/longctx/{path.name}",
                "sha256": sha256(path),
                "context": cfg["context"],
                **control(model, val_ids, cfg["context"]),
            }
            loads.append(os.getloadavg()[0])
            print(name, result["models"][name], flush=True)
    result.update(
        {
            "command": "python scripts/shakespeare_context_use.py",
            "script": "scripts/shakespeare_context_use.py",
            "control": {"windows_of_1024": WINDOWS, "scored_last": SCORED, "seed": SEED},
            "text": "data/shakespeare/input.txt, last 10% of the characters",
            "wall_seconds": round(time.perf_counter() - t0, 1),
            "cpu_seconds": round(time.process_time() - c0, 1),
            "cpu": cpu_name(),
            "threads": 1,
            "load_average_1min": {"start": loads[0], "max": max(loads), "cores": os.cpu_count()},
            "numpy": np.__version__,
        }
    )
    write_atomic(out, lambda f: f.write(json.dumps(result, indent=1) + "\n"))
    print(f"wrote {out}", flush=True)
    return result


def cfg_context(path) -> int:
    """The context a long-context checkpoint was trained with (from its configuration)."""
    with np.load(path, allow_pickle=False) as f:
        return int(json.loads(str(f["config"]))["context"])


if __name__ == "__main__":
    main()
