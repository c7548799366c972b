"""Measure the serving levers on SmolLM2-135M-Instruct for chapters 20 and 21: quantization, batching, drafts.

    OPENBLAS_NUM_THREADS=1 python scripts/measure_smollm2_serving.py [--part quant batch spec]

Writes ``data/smollm2/serving.json`` (each part its own key, the others kept),
with a manifest per part: the command, the wall and CPU time, the CPU, the
load average before and after, and the SHA-256 of the GGUF file and of the
held-out text. One BLAS thread throughout; seeded where anything is drawn.

- ``quant``: the model as shipped (Q4_1 matrices, a Q8_0 token embedding,
  dequantized to float32: the reference), and the same weights re-quantized by
  the library (:func:`attention_lib.quantize.quantize_model`) to Q8_0 and Q4_0
  (and Q4_0 with the token embedding at Q8_0, as the shipped file keeps it):
  held-out loss (nats per token) on ``data/smollm2/heldout.txt`` (a passage
  written for this book, so in no training set), KL divergence from the
  reference, top-1 agreement with it, and the bytes of the weights.
- ``batch``: greedy decoding of 1 to 16 sequences at once on the library's
  fast decoder (one shared cache, one matrix product per weight and step for
  every row): tokens per CPU-second and per wall-clock second; and a prompt's
  prefill, per token.
- ``spec``: greedy speculative decoding with prompt lookup and with a
  self-draft (the model's own first blocks, final norm and tied head), on
  chat prompts, each checked to give plain greedy decoding's tokens; CPU and
  wall-clock time of both, alternated; and the top-1 agreement with the whole
  model of every early exit (blocks 1 to 29) on the held-out text.
"""

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attention_lib.data.gguf import read_gguf  # noqa: E402
from attention_lib.data.gguf_quant import block_bytes  # noqa: E402
from attention_lib.models import smollm2  # noqa: E402
from attention_lib.train.evaluate_long_context import cpu_name  # noqa: E402
from attention_lib.models.kv_cache import decoder_for  # noqa: E402
from attention_lib.models.speculative import (  # noqa: E402
    PromptLookup,
    SelfDraft,
    speculative_generate,
)
from attention_lib.quantize import dequantize, quantize, quantize_model  # noqa: E402
from attention_lib.softmax import log_softmax  # noqa: E402

OUT = ROOT / "data" / "smollm2" / "serving.json"
HELDOUT = ROOT / "data" / "smollm2" / "heldout.txt"
BATCHES = (1, 2, 4, 8, 16)
PROMPT_LEN, DECODE_STEPS, PREFILL_LEN = 32, 16, 256
SPEC_PROMPTS = [
    "Correct the spelling in this paragraph and write it out again: The ferry to the "
    "iland leaves twise a day, at seven in the morning and at four in the afternon. "
    "In winter the afternoon boat is ofen cancelled, because the wind from the north "
    "makes the harbour too rouhg for the small ship to dock.",
    "Explain in a few sentences why the sky is blue.",
    "Write a Python function that returns the largest of three numbers.",
]
SPEC_NEW = 64
LOOKUP_KS = (2, 4, 8)
SELF_LAYERS, SELF_KS = (16, 24), (2, 4)


def _sha(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _compare(ref, logits, targets):
    """Loss (nats/token) of ``logits``, KL(reference || them) and top-1 agreement."""
    lp_ref = log_softmax(ref.astype(np.float64), axis=-1)
    lp = log_softmax(logits.astype(np.float64), axis=-1)
    loss = -np.take_along_axis(lp, targets[:, None], axis=-1)[:, 0]
    gain = loss + np.take_along_axis(lp_ref, targets[:, None], axis=-1)[:, 0]
    kl = (np.exp(lp_ref) * (lp_ref - lp)).sum(axis=-1)
    return {
        "loss": round(float(loss.mean()), 4),
        # the loss it adds to the reference's, and that difference's standard error
        "loss_added": round(float(gain.mean()), 4),
        "loss_added_se": round(float(gain.std(ddof=1) / np.sqrt(len(gain))), 4),
        "kl": round(float(kl.mean()), 5),
        "kl_per_position_sd": round(float(kl.std()), 5),
        "top1": round(float((ref.argmax(-1) == logits.argmax(-1)).mean()), 4),
    }


def measure_quant(model, tok):
    ids = tok.encode(HELDOUT.read_text())
    x, targets = ids[None, :-1], ids[1:]
    ref = model.forward(x)[0]
    f = read_gguf(smollm2.gguf_path())
    shipped_bytes = sum(
        info.nbytes if info.nbytes is not None else block_bytes(info.ggml_type, info.shape)
        for info in f.tensor_infos.values()
    )
    kinds = sorted({info.type_name for info in f.tensor_infos.values()})
    del f
    rows = {"q4_1_shipped": {**_compare(ref, ref, targets), "bytes": int(shipped_bytes)}}
    rows["q4_1_shipped"]["types"] = kinds
    saved = [(layer, k, a) for layer in model.layers() for k, a in layer.params.items()]
    E = model.tok.params["E"]
    for scheme in ("q8_0", "q4_0", "q4_0_embedding_q8_0"):
        report = quantize_model(model, scheme[:4])
        if scheme == "q4_0_embedding_q8_0":  # as the shipped file: the embedding (and
            # the tied output layer) at 8 bits, every other matrix at 4
            qt4, qt8 = quantize(E, 4, 32), quantize(E, 8, 32)
            model.tok.params["E"] = dequantize(qt8)
            report["bytes"] += qt8.nbytes - qt4.nbytes
        rows[scheme] = {**_compare(ref, model.forward(x)[0], targets), "bytes": report["bytes"]}
        rows[scheme]["fallback"] = report["fallback"]
        for layer, k, a in saved:  # back to the shipped weights
            layer.params[k] = a
    rows["float32"] = {"bytes": 4 * sum(a.size for _, _, a in saved)}
    return {"tokens_scored": int(len(targets)), "rows": rows}


def measure_batch(model, repeats=3):
    rng = np.random.default_rng(0)
    V = model.config["n_vocab"]
    rows = {}
    for B in BATCHES:
        prompts = rng.integers(1000, V, size=(B, PROMPT_LEN))
        dec = decoder_for(model, B, capacity=PROMPT_LEN + DECODE_STEPS + 1)
        best_cpu, best_wall = np.inf, np.inf
        for _ in range(repeats):
            dec.reset()
            nxt = dec.prefill(prompts).argmax(-1)
            c0, w0 = time.process_time(), time.perf_counter()
            out = [nxt]
            for _ in range(DECODE_STEPS):
                nxt = dec.step(nxt).argmax(-1)
                out.append(nxt)
            best_cpu = min(best_cpu, time.process_time() - c0)
            best_wall = min(best_wall, time.perf_counter() - w0)
        tokens = np.stack(out, 1)
        # row 0 alone, to check that batching changes no token
        one = decoder_for(model, 1, capacity=PROMPT_LEN + DECODE_STEPS + 1)
        alone = [one.prefill(prompts[:1]).argmax(-1)]
        for _ in range(DECODE_STEPS):
            alone.append(one.step(alone[-1]).argmax(-1))
        rows[str(B)] = {
            "cpu_seconds": round(best_cpu, 3),
            "wall_seconds": round(best_wall, 3),
            "tokens_per_cpu_second": round(B * DECODE_STEPS / best_cpu, 2),
            "tokens_per_wall_second": round(B * DECODE_STEPS / best_wall, 2),
            "row0_same_tokens_as_alone": bool(np.array_equal(tokens[0], np.stack(alone, 1)[0])),
        }
        del dec, one
    dec = decoder_for(model, 1, capacity=PREFILL_LEN + 1)
    prompt = rng.integers(1000, V, size=(1, PREFILL_LEN))
    best_cpu, best_wall = np.inf, np.inf
    for _ in range(repeats):
        dec.reset()
        c0, w0 = time.process_time(), time.perf_counter()
        dec.prefill(prompt)
        best_cpu = min(best_cpu, time.process_time() - c0)
        best_wall = min(best_wall, time.perf_counter() - w0)
    prefill = {
        "tokens": PREFILL_LEN,
        "cpu_seconds": round(best_cpu, 3),
        "wall_seconds": round(best_wall, 3),
        "tokens_per_cpu_second": round(PREFILL_LEN / best_cpu, 1),
    }
    return {
        "prompt_tokens": PROMPT_LEN,
        "decode_steps": DECODE_STEPS,
        "repeats_fastest_kept": repeats,
        "rows": rows,
        "prefill": prefill,
    }


def _early_exit_agreement(model, tok):
    """Top-1 agreement with the whole model of blocks 1 .. n-1, the final norm and the head."""
    ids = tok.encode(HELDOUT.read_text())[None, :-1]
    E = model.tok.params["E"]
    x = model.tok.forward(ids)
    exits = []
    for block in model.blocks:
        x = block.forward(x)
        exits.append((model.norm.forward(x)[0] @ E.T).argmax(-1))
    full = exits[-1]
    return [round(float((e == full).mean()), 4) for e in exits[:-1]]


def _timed(fn):
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.process_time() - c0, time.perf_counter() - w0


def measure_spec(model, tok):
    V = model.config["n_vocab"]
    drafts = {f"lookup k={k}": (PromptLookup(V), k) for k in LOOKUP_KS}
    for n in SELF_LAYERS:
        for k in SELF_KS:
            drafts[f"self {n} blocks k={k}"] = (SelfDraft(model, n), k)
    results = {name: {"prompts": []} for name in drafts}
    plain_runs = []
    for prompt in SPEC_PROMPTS:
        ids = smollm2.chat_prompt(tok, prompt)
        for name, (draft, k) in drafts.items():
            # plain and speculative alternate, so that the load they meet is alike
            plain, pc, pw = _timed(lambda: model.generate(ids, SPEC_NEW, temperature=0))
            (fast, stats), sc, sw = _timed(
                lambda: speculative_generate(model, draft, ids, SPEC_NEW, k=k)
            )
            plain_runs.append(pc)
            results[name]["prompts"].append(
                {
                    "same_as_plain": bool(np.array_equal(plain, fast)),
                    "acceptance": round(stats["acceptance"], 4),
                    "tokens_per_pass": round(stats["tokens_per_pass"], 3),
                    "cpu_seconds": round(sc, 3),
                    "plain_cpu_seconds": round(pc, 3),
                    "wall_seconds": round(sw, 3),
                    "plain_wall_seconds": round(pw, 3),
                }
            )
        print("spec: prompt done", flush=True)
    for r in results.values():
        p = r["prompts"]
        r["same_as_plain"] = all(x["same_as_plain"] for x in p)
        r["acceptance"] = round(float(np.mean([x["acceptance"] for x in p])), 4)
        r["tokens_per_pass"] = round(float(np.mean([x["tokens_per_pass"] for x in p])), 3)
        r["cpu_speedup"] = round(
            sum(x["plain_cpu_seconds"] for x in p) / sum(x["cpu_seconds"] for x in p), 3
        )
        r["wall_speedup"] = round(
            sum(x["plain_wall_seconds"] for x in p) / sum(x["wall_seconds"] for x in p), 3
        )
    first = smollm2.chat_prompt(tok, SPEC_PROMPTS[0])
    sample = model.generate(first, SPEC_NEW, temperature=0)[len(first) :]
    return {
        "prompts": SPEC_PROMPTS,
        "new_tokens": SPEC_NEW,
        "drafts": results,
        "plain_cpu_seconds_range": [round(min(plain_runs), 3), round(max(plain_runs), 3)],
        "first_answer": tok.decode(sample),
        "early_exit_top1": _early_exit_agreement(model, tok),
    }


PARTS = {"quant": measure_quant, "batch": measure_batch, "spec": measure_spec}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--part", nargs="+", choices=list(PARTS), default=list(PARTS))
    args = parser.parse_args(argv)
    data = json.loads(OUT.read_text()) if OUT.exists() else {}
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    with threadpool_limits(1):
        model, tok = smollm2.load_smollm2()
        for part in args.part:
            load0 = os.getloadavg()
            c0, w0 = time.process_time(), time.perf_counter()
            if part == "batch":
                result = measure_batch(model)
            else:
                result = PARTS[part](model, tok)
            result["manifest"] = {
                "command": f"OPENBLAS_NUM_THREADS=1 python scripts/measure_smollm2_serving.py "
                f"--part {part}",
                "wall_seconds": round(time.perf_counter() - w0, 1),
                "cpu_seconds": round(time.process_time() - c0, 1),
                "load_average_1min": [round(load0[0], 2), round(os.getloadavg()[0], 2)],
                "cpu": cpu_name(),
                "blas_threads": 1,
                "gguf_sha256": smollm2.GGUF_SHA256,
                "heldout_sha256": _sha(HELDOUT),
                "git_commit": commit,
                "numpy": np.__version__,
            }
            data[part] = result
            OUT.write_text(json.dumps(data, indent=1) + "\n")
            print(part, json.dumps(result["manifest"]), flush=True)


if __name__ == "__main__":
    main()
