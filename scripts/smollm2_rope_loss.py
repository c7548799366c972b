"""SmolLM2-135M-Instruct's loss by position over 16,384 tokens, twice its training length, with RoPE scaling.

SmolLM2 was trained on 8,192 positions. This script reads the first 16,385
tokens of Tiny Shakespeare's held-out 10% (raw text, no special token first)
in one prefill per method and scores every token,
``-log p(token t + 1 | tokens 0 .. t)`` in nats, with the model's rotary
angles scaled as in ``scripts/smollm2_passkey.py`` (factor 2, set once for
every length):

- ``none``: no scaling;
- ``pi``: position interpolation;
- ``ntk``: NTK-aware scaling;
- ``yarn``: YaRN (:func:`attention_lib.positions.yarn_frequencies`).

Positions 0 .. 8,191 show what each method costs inside the trained length,
positions 8,192 .. 16,383 whether it reaches past it. The losses, per
512-token bin and averaged over each half, go to
``data/checkpoints/smollm2_long/rope_loss.json`` after every method (a
partial run is usable; methods already there are kept) with the command, the
CPU, the wall time and the load average. A 16,384-token prefill of a 135M
model in NumPy takes about eight minutes of one core.

Run: ``OPENBLAS_NUM_THREADS=1 python scripts/smollm2_rope_loss.py``
(``--methods yarn`` to run part of it).
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from smollm2_passkey import FACTOR, METHODS, TRAINED, set_scaling  # noqa: E402
from smollm2_stream import held_out_tokens, token_losses  # noqa: E402

from attention_lib.data.paths import sha256, write_json  # noqa: E402
from attention_lib.models.pretrained import load_pretrained  # noqa: E402
from attention_lib.models.smollm2 import GGUF_SHA256  # noqa: E402
from attention_lib.train.evaluate_long_context import cpu_name  # noqa: E402
from attention_lib.train.shakespeare import text_path  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "data" / "checkpoints" / "smollm2_long"
N_TOKENS, BIN = 2 * TRAINED, 512


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument("--block-size", type=int, default=1024, help="attention tile (default 1024)")
    ap.add_argument("--out", type=Path, default=OUT / "rope_loss.json", help="where to write")
    args = ap.parse_args(argv)
    model, tok = load_pretrained("smollm2")
    for block in model.blocks:
        block.attn.block_size = args.block_size
    ids = held_out_tokens(tok, N_TOKENS)
    results = json.loads(args.out.read_text()) if args.out.exists() else {"results": {}}
    results.update(
        description=(
            "SmolLM2-135M-Instruct, loss (nats/token) of tokens 1..16384 of Tiny "
            "Shakespeare's held-out 10%, one prefill per RoPE scaling method"
        ),
        command="OPENBLAS_NUM_THREADS=1 python scripts/smollm2_rope_loss.py",
        weights_sha256=GGUF_SHA256,
        text_sha256=sha256(text_path()),
        script_sha256=sha256(Path(__file__)),
        cpu=cpu_name(),
        threads=os.environ.get("OPENBLAS_NUM_THREADS", "unset"),
        tokens=N_TOKENS,
        trained_length=TRAINED,
        factor=FACTOR,
        bin=BIN,
    )
    for method in args.methods:
        set_scaling(model, method, FACTOR)
        load0, t0, c0 = os.getloadavg()[0], time.perf_counter(), time.process_time()
        loss = token_losses(model, ids)
        results["results"][method] = {
            "by_bin": [round(float(v), 4) for v in loss.reshape(-1, BIN).mean(axis=1)],
            "mean_inside": round(float(loss[:TRAINED].mean()), 4),
            "mean_past": round(float(loss[TRAINED:].mean()), 4),
            "wall_seconds": round(time.perf_counter() - t0, 1),
            "cpu_seconds": round(time.process_time() - c0, 1),
            "load_average_1min": [round(load0, 2), round(os.getloadavg()[0], 2)],
        }
        r = results["results"][method]
        print(method, r["mean_inside"], r["mean_past"], f"{r['wall_seconds']:.0f} s", flush=True)
        write_json(args.out, results)
    return results


if __name__ == "__main__":
    main()
