"""SmolLM2-135M-Instruct's loss at every position of 8,192-token windows of held-out text.

Run as ``python scripts/smollm2_loss_by_position.py [--windows N] [--out FILE]``
(default 2 windows, ``data/checkpoints/longctx/eval_smollm2_loss_by_position.json``).

The text is the last 10% of Tiny Shakespeare (the split of chapter 11 and
chapter 18: none of the book's character models trained on it; the text is
in the public domain, ``data/README.md``), cut into consecutive windows of
8,192 tokens, SmolLM2's context, each scored from its first token with no
earlier context. SmolLM2's pretraining corpora may hold Shakespeare's plays:
the text is held out from the book's models, not necessarily from SmolLM2.

Each window runs through the library's model in chunks of 512 tokens with a
KV cache, every attention layer tiled (``block_size`` 512), so no layer ever
holds an 8,192 x 8,192 matrix: the peak memory stays under 2 GB. The loss at
position ``t`` is ``-log p(token t + 1 | tokens 0 .. t)`` in nats per token,
computed in float64 from the float32 logits.

One window's loss by position mixes the position with what the text says
there. ``--sweep`` separates them: it scores the same tokens (the first
window's last 512) with only 0, 64, 256, 1,024 or 4,096 tokens of context
before them, and adds the result to the file (``context_sweep``; the full
7,680 tokens are the first run's).

The JSON holds the mean loss over the windows at every position (4 decimals),
each window's mean, the mean number of characters per token, and the
manifest: the command, SHA-256 of the text and of the GGUF file, the wall and
CPU seconds, the peak resident memory, the CPU and the load average.
"""

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attention_lib.data.paths import sha256, write_atomic  # noqa: E402
from attention_lib.models.pretrained import load_pretrained  # noqa: E402
from attention_lib.models.smollm2 import gguf_path  # noqa: E402
from attention_lib.train.evaluate_long_context import cpu_name  # noqa: E402
from attention_lib.train.long_context import checkpoint_dir  # noqa: E402
from attention_lib.train.shakespeare import text_path  # noqa: E402

CONFIG = {"length": 8192, "chunk": 512, "block_size": 512}
#: ``--sweep``: the last ``targets`` tokens of the first window, scored with only
#: ``contexts`` tokens before them (the full window's ``length - targets`` is in the file).
SWEEP = {"targets": 512, "contexts": [0, 64, 256, 1024, 4096]}


def held_out_text() -> str:
    """The last 10% of Tiny Shakespeare, split as ``train.shakespeare.load_text`` splits it."""
    text = text_path().read_text(encoding="utf8")
    return text[int(0.9 * len(text)) :]


def window_losses(model, ids: np.ndarray, chunk: int) -> np.ndarray:
    """Loss (nats) at each of ``len(ids) - 1`` positions, fed ``chunk`` tokens at a time."""
    cache = model.new_cache()
    out = []
    for a in range(0, len(ids) - 1, chunk):
        b = min(a + chunk, len(ids) - 1)
        logits = model.forward(ids[None, a:b], cache)[0].astype(np.float64)
        logits -= logits.max(axis=-1, keepdims=True)
        logp = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
        out.append(-logp[np.arange(b - a), ids[a + 1 : b + 1]])
    return np.concatenate(out)


def sweep(out: Path) -> dict:
    """Score the first window's last ``SWEEP["targets"]`` tokens with shorter contexts."""
    result = json.loads(out.read_text(encoding="utf8"))
    t0, c0, load0 = time.perf_counter(), time.process_time(), os.getloadavg()[0]
    model, tok = load_pretrained("smollm2")
    for block in model.blocks:
        block.attn.block_size = CONFIG["block_size"]
    ids = tok.encode(held_out_text())
    n, first = SWEEP["targets"], CONFIG["length"] - SWEEP["targets"]
    losses = {}
    with threadpool_limits(limits=1, user_api="blas"):
        for c in SWEEP["contexts"]:
            part = ids[first - c : CONFIG["length"] + 1]
            losses[str(c)] = round(
                float(window_losses(model, part, CONFIG["chunk"])[-n:].mean()), 4
            )
            print(f"context {c}: {losses[str(c)]:.4f} nats/token", flush=True)
    full = np.array(result["loss_by_position"][first:])
    losses[str(first)] = round(float(full.mean()), 4)
    result["context_sweep"] = {
        "targets": f"tokens {first + 1} to {CONFIG['length']} of the first window",
        "loss_by_context": losses,
        "command": "python scripts/smollm2_loss_by_position.py --sweep",
        "wall_seconds": round(time.perf_counter() - t0, 1),
        "cpu_seconds": round(time.process_time() - c0, 1),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "load_average_1min": {"start": load0, "end": os.getloadavg()[0]},
    }
    write_atomic(out, lambda f: f.write(json.dumps(result, indent=1) + "\n"))
    print(f"wrote {out}", flush=True)
    return result


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=2, help="8,192-token windows (default 2)")
    parser.add_argument("--out", default=None, help="output JSON file")
    parser.add_argument(
        "--sweep",
        action="store_true",
        help="add the context sweep (SWEEP) to an existing file: the same target tokens "
        "scored with shorter contexts",
    )
    args = parser.parse_args(argv)
    if args.windows < 1:
        parser.error(f"--windows must be at least 1, got {args.windows}")
    out = Path(args.out) if args.out else checkpoint_dir() / "eval_smollm2_loss_by_position.json"
    if args.sweep:
        return sweep(out)
    t0, c0, loads = time.perf_counter(), time.process_time(), [os.getloadavg()[0]]
    model, tok = load_pretrained("smollm2")
    text = held_out_text()
    ids = tok.encode(text)
    L = CONFIG["length"]
    if len(ids) < args.windows * L + 1:
        parser.error(f"the held-out text has {len(ids)} tokens: fewer than {args.windows} windows")
    for block in model.blocks:
        block.attn.block_size = CONFIG["block_size"]
    losses = []
    with threadpool_limits(limits=1, user_api="blas"):
        for w in range(args.windows):
            part = ids[w * L : (w + 1) * L + 1]
            losses.append(window_losses(model, part, CONFIG["chunk"]))
            loads.append(os.getloadavg()[0])
            print(f"window {w}: mean {losses[-1].mean():.4f} nats/token", flush=True)
    losses = np.array(losses)
    used_chars = len(tok.decode(ids[: args.windows * L]))
    result = {
        "command": "python scripts/smollm2_loss_by_position.py"
        + (f" --windows {args.windows}" if args.windows != 2 else ""),
        "script": "scripts/smollm2_loss_by_position.py",
        "model": "SmolLM2-135M-Instruct (attention_lib.models.smollm2, float32 from Q4_1/Q8_0)",
        "gguf_sha256": sha256(gguf_path()),
        "text": "data/shakespeare/input.txt, last 10% of the characters (public domain)",
        "text_sha256": sha256(text_path()),
        "held_out_tokens": int(len(ids)),
        "config": {**CONFIG, "windows": args.windows},
        "chars_per_token": round(used_chars / (args.windows * L), 4),
        "window_means": [round(float(v), 4) for v in losses.mean(axis=1)],
        "loss_by_position": [round(float(v), 4) for v in losses.mean(axis=0)],
        "wall_seconds": round(time.perf_counter() - t0, 1),
        "cpu_seconds": round(time.process_time() - c0, 1),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "cpu": cpu_name(),
        "threads": 1,
        "load_average_1min": {
            "start": loads[0],
            "max": max(loads),
            "end": loads[-1],
            "cores": os.cpu_count(),
        },
        "numpy": np.__version__,
    }
    write_atomic(out, lambda f: f.write(json.dumps(result, indent=1) + "\n"))
    print(f"wrote {out}", flush=True)
    return result


if __name__ == "__main__":
    main()
