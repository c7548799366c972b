"""Passkey retrieval by SmolLM2-135M-Instruct at 4,096, 8,192 and 16,384 tokens, with RoPE scaling.

A passkey test (Mohtashami and Jaggi, 2023): a five-digit key hidden at some
depth in repeated filler sentences, and at the end the question "What is the
pass key? The pass key is"; the model reads the whole prompt in one prefill
(tiled attention, keys and values kept in a KV cache) and then writes six
tokens greedily. A trial is correct when the key's five digits are in them.

SmolLM2 was trained on 8,192 positions. To reach 16,384 its rotary angles are
scaled by the factor ``s = 2``, set once and used at every length (as a
model configured for 16,384 tokens would be), so that the cost of each
method inside the trained length is measured too:

- ``none``: no scaling;
- ``pi``: position interpolation (every position divided by ``s``);
- ``ntk``: NTK-aware scaling (the base raised to ``base * s^(d / (d - 2))``);
- ``yarn``: YaRN (:func:`attention_lib.positions.yarn_frequencies`).

A 16,384-token prefill of a 135M model in NumPy takes about eight minutes of
one core (four 4,096-token prefills' worth of products and sixteen of
attention), so the script runs few trials: by default the key at half depth
(``--depths 0.5``; 0.1 and 0.9 can be added). Results are written to
``data/checkpoints/smollm2_long/passkey.json`` after every trial (a partial
run is usable) with the command, the CPU, the wall time and the load average
of each trial.

Run: ``OPENBLAS_NUM_THREADS=1 python scripts/smollm2_passkey.py``
(``--lengths 16384 --methods yarn`` to run part of it; results are merged).
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from attention_lib.data.paths import sha256, write_atomic
from attention_lib.models.pretrained import load_pretrained
from attention_lib.models.smollm2 import GGUF_SHA256
from attention_lib.train.evaluate_long_context import cpu_name

OUT = Path(__file__).resolve().parent.parent / "data" / "checkpoints" / "smollm2_long"
TRAINED = 8192
INTRO = (
    "There is important information hidden inside a lot of irrelevant text. "
    "Find it and memorize it. I will quiz you about it.\n"
)
FILL = " The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
QUESTION = "\nWhat is the pass key? The pass key is"
KEYS = (71432, 20958, 38146)
LENGTHS = (4096, 8192, 16384)
FACTOR = 2.0
METHODS = ("none", "pi", "ntk", "yarn")


def passkey_prompt(tok, n_tokens, depth, key):
    """Token ids: the intro, filler with the key's sentence at ``depth``, the question."""
    intro, fill, question = tok.encode(INTRO), tok.encode(FILL), tok.encode(QUESTION)
    needle = tok.encode(f" The pass key is {key}. Remember it. {key} is the pass key.")
    n_fill = n_tokens - len(intro) - len(needle) - len(question)
    body = np.resize(fill, n_fill)
    cut = int(depth * n_fill)
    cut -= cut % len(fill)  # between two filler sentences
    return np.concatenate([intro, body[:cut], needle, body[cut:], question])


def set_scaling(model, method, factor):
    """Every layer's rope_scaling for ``method`` at ``factor`` (None at factor 1)."""
    scaling = None
    if method != "none" and factor > 1:
        kind = {"pi": "linear", "ntk": "ntk", "yarn": "yarn"}[method]
        scaling = {"type": kind, "factor": factor}
        if kind == "yarn":
            scaling["original_length"] = TRAINED
    for block in model.blocks:
        block.attn.rope_scaling = scaling


def forget(obj, seen=None):
    """Drop the large arrays a layer keeps for its backward pass (inference only).

    Each layer keeps its inputs and activations; at 16,384 positions a
    SwiGLU layer alone keeps 300 MB, so 30 blocks would need gigabytes.
    """
    seen = set() if seen is None else seen
    if id(obj) in seen or not hasattr(obj, "__dict__"):
        return
    seen.add(id(obj))
    for key, value in vars(obj).items():
        if isinstance(value, np.ndarray) and value.size > 100_000:
            setattr(obj, key, None)
        elif hasattr(value, "__dict__") and not isinstance(value, type):
            forget(value, seen)


def run_blocks(model, tokens, cache):
    """The blocks' output (1, T, E) for ``tokens`` continuing ``cache``; no logits."""
    x = model.tok.forward(tokens)
    for block, layer_cache in zip(model.blocks, cache):
        x = block.forward(x, layer_cache)
        for layer in block.layers():
            forget(layer)
    return x


def answer(model, tok, ids, n_new=6):
    """Prefill ``ids``, then ``n_new`` greedy tokens: only the last position's logits."""
    E = model.tok.params["E"]
    cache = model.new_cache()
    x = run_blocks(model, ids[None], cache)
    out = []
    for _ in range(n_new):
        logits = model.norm.forward(x[:, -1:]) @ E.T
        out.append(int(np.argmax(logits[0, -1])))
        x = run_blocks(model, np.array([[out[-1]]]), cache)
    return tok.decode(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=list(LENGTHS))
    ap.add_argument("--depths", type=float, nargs="+", default=[0.5])
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument("--block-size", type=int, default=1024)
    ap.add_argument("--out", type=Path, default=OUT / "passkey.json")
    args = ap.parse_args(argv)
    model, tok = load_pretrained("smollm2")
    model.max_len = max(args.lengths) + 16  # rotary has no table: the check is Llama's own
    for block in model.blocks:
        block.attn.block_size = args.block_size  # tiled: no L x L matrix
    args.out.parent.mkdir(parents=True, exist_ok=True)
    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    results.setdefault("trials", {})
    results.update(
        description=(
            "SmolLM2-135M-Instruct passkey retrieval, greedy; pi, ntk and yarn with "
            "factor 2 at every length, none unscaled"
        ),
        weights_sha256=GGUF_SHA256,
        script_sha256=sha256(Path(__file__)),
        cpu=cpu_name(),
        threads=os.environ.get("OPENBLAS_NUM_THREADS"),
        block_size=args.block_size,
        trained_length=TRAINED,
        filler=FILL,
        question=QUESTION,
    )
    results.setdefault("commands", [])
    command = "OPENBLAS_NUM_THREADS=1 python scripts/smollm2_passkey.py " + " ".join(
        argv if argv is not None else sys.argv[1:]
    )
    if command not in results["commands"]:
        results["commands"].append(command)
    for L in args.lengths:
        for method in args.methods:
            set_scaling(model, method, FACTOR)
            for depth in args.depths:
                key = KEYS[int(depth * 10) % len(KEYS)]
                name = f"{method}_{L}_{depth}"
                if name in results["trials"]:
                    continue
                ids = passkey_prompt(tok, L, depth, key)
                load0, t0 = os.getloadavg()[0], time.perf_counter()
                text = answer(model, tok, ids)
                wall = time.perf_counter() - t0
                results["trials"][name] = {
                    "method": method,
                    "length": int(len(ids)),
                    "factor": 1.0 if method == "none" else FACTOR,
                    "depth": depth,
                    "key": key,
                    "answer": text,
                    "correct": str(key) in text,
                    "wall_seconds": round(wall, 1),
                    "load_average_1min": [round(load0, 2), round(os.getloadavg()[0], 2)],
                }
                print(name, repr(text), f"{wall:.0f} s", flush=True)
                if args.out.exists():  # another run may have added trials meanwhile
                    results["trials"] = {
                        **json.loads(args.out.read_text())["trials"],
                        **results["trials"],
                    }
                text = json.dumps(results, indent=1) + "\n"
                write_atomic(args.out, lambda f, text=text: f.write(text))
    return results


if __name__ == "__main__":
    main()
