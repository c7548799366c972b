"""StreamingLLM on SmolLM2-135M-Instruct: a 4,096-token stream read with a sliding window, with sinks, in full.

Xiao et al. (2023) found that a language model reading a long stream with a
sliding window of keys collapses once the stream's first tokens leave the
window, and that keeping the first four tokens in view (attention sinks) as
well as the window prevents it. This script measures it on SmolLM2: the first
4,097 tokens of Tiny Shakespeare's held-out 10% (raw text, no special token
first), and the loss of predicting each of tokens 1 .. 4,096 with

- ``full``: causal attention over the whole stream (within SmolLM2's 8,192);
- ``window``: each query sees its last ``window`` keys (1,024) only;
- ``sinks``: the window and the stream's first 4 tokens.

Each is one prefill with a banded causal mask (the layers' ``window`` and
``sinks``, tiled), not token-by-token decoding with a rolling cache: for a
causal model the two compute the same keys and values, except that a rolling
cache counts rotary positions inside the cache (a sink then sits at most
``window + 3`` positions back), while the prefill keeps stream positions
(a sink up to 4,095 back); both distances are within SmolLM2's training
length. The losses (nats per token), per 128-token bin and averaged over
tokens 1,024 .. 4,095 (where the three differ), go to
``data/checkpoints/smollm2_long/stream.json`` with the command, the CPU, the
wall time and the load average.

Run: ``OPENBLAS_NUM_THREADS=1 python scripts/smollm2_stream.py``
"""

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

from attention_lib.data.paths import sha256, write_json
from attention_lib.models.pretrained import load_pretrained
from attention_lib.models.smollm2 import GGUF_SHA256
from attention_lib.train.shakespeare import text_path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from smollm2_loss_by_position import held_out_text  # noqa: E402
from smollm2_passkey import cpu_name, run_blocks  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "data" / "checkpoints" / "smollm2_long"
N_TOKENS, WINDOW, SINKS, BIN = 4096, 1024, 4, 128


def held_out_tokens(tok, n):
    """The first ``n + 1`` tokens of Tiny Shakespeare's last 10% (its held-out part)."""
    ids = tok.encode(held_out_text())
    if len(ids) < n + 1:
        raise ValueError(f"the held-out text gave {len(ids)} tokens, fewer than {n + 1}")
    return ids[: n + 1]


def token_losses(model, ids, chunk=256):
    """``-log p(ids[t + 1] | ids[..t])`` for every t, the logits made ``chunk`` rows at a time."""
    x = run_blocks(model, ids[None, :-1], model.new_cache())[0]
    E = model.tok.params["E"]
    out = []
    for start in range(0, len(x), chunk):
        logits = (model.norm.forward(x[None, start : start + chunk]) @ E.T)[0].astype(np.float64)
        top = logits.max(axis=-1)
        lse = top + np.log(np.exp(logits - top[:, None]).sum(axis=-1))
        target = ids[start + 1 : start + 1 + len(logits)]
        out.append(lse - logits[np.arange(len(logits)), target])
    return np.concatenate(out)


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Runs three 4,096-token prefills (minutes of one core each).",
    )
    ap.add_argument("--out", type=Path, default=OUT / "stream.json", help="where to write")
    args = ap.parse_args(argv)
    model, tok = load_pretrained("smollm2")
    for block in model.blocks:
        block.attn.block_size = 512
    ids = held_out_tokens(tok, N_TOKENS)
    results = {
        "description": (
            "SmolLM2-135M-Instruct, loss (nats/token) of tokens 1..4096 of Tiny "
            "Shakespeare's held-out 10%, one banded prefill per setting"
        ),
        "command": "OPENBLAS_NUM_THREADS=1 python scripts/smollm2_stream.py",
        "weights_sha256": GGUF_SHA256,
        "text_sha256": sha256(text_path()),
        "script_sha256": sha256(Path(__file__)),
        "cpu": cpu_name(),
        "tokens": N_TOKENS,
        "window": WINDOW,
        "sinks": SINKS,
        "bin": BIN,
        "results": {},
    }
    for name, window, sinks in (("window", WINDOW, 0), ("sinks", WINDOW, SINKS), ("full", None, 0)):
        for block in model.blocks:
            block.attn.window, block.attn.sinks = window, sinks
        load0, t0 = os.getloadavg()[0], time.perf_counter()
        loss = token_losses(model, ids)
        wall = time.perf_counter() - t0
        results["results"][name] = {
            "by_bin": [round(float(v), 4) for v in loss.reshape(-1, BIN).mean(axis=1)],
            "mean_past_window": round(float(loss[WINDOW:].mean()), 4),
            "mean": round(float(loss.mean()), 4),
            "wall_seconds": round(wall, 1),
            "load_average_1min": [round(load0, 2), round(os.getloadavg()[0], 2)],
        }
        print(name, results["results"][name]["mean_past_window"], f"{wall:.0f} s", flush=True)
        write_json(args.out, results)
    return results


if __name__ == "__main__":
    main()
