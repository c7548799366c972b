"""Every head of SmolLM2-135M, tested causally: the sweeps of the chapter "What heads do".

Three sweeps, each over all 30 x 9 = 270 query heads, on one core:

1. Induction: on repeated random tokens (``B`` sequences of ``n`` token ids
   drawn from 1000..9999, each followed by itself), each head's induction
   score (its mean attention weight, in the second copy, on the token after
   the earlier occurrence of the current one) and the mean loss on the second
   copy with that head's output zeroed. Then the top heads by score, zeroed
   and mean-ablated together, against random heads drawn several times.
2. Names (indirect object): for prompts "When A and B went to the store, B
   gave a drink to" (answer A) and their corruption (the second B made an
   A, answer B), the logit difference ``logit(A) - logit(B)`` clean,
   corrupted, and with each head's output patched from the clean run into
   the corrupted one.
3. The logit lens on "The capital of France is": the rank of " Paris" after
   each block.

``python scripts/interp_smollm2_sweep.py`` (or ``--part repeat`` and ``--part ioi``
in two processes, which share the work and merge their results) writes
``data/interp/smollm2_sweep.json`` and ``data/interp/smollm2_sweep.manifest.json``
(configuration, command, sha256 of the output, wall and CPU time, CPU and
load average). Deterministic: the seeds are in ``CONFIG``.
"""

from __future__ import annotations

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
from attention_lib.interp import (  # noqa: E402
    ablate_heads,
    logit_diff,
    logit_lens,
    patch_heads,
    record_all,
)
from attention_lib.train.evaluate_long_context import cpu_name  # noqa: E402

OUT = ROOT / "data" / "interp"

CONFIG = {
    "model": "SmolLM2-135M-Instruct (attention_lib.models.pretrained, GGUF float32)",
    "repeat": {"batch": 2, "n": 25, "low": 1000, "high": 10000, "seed": 0},
    "top": 3,
    "random_draws": 6,
    "random_seed": 1,
    "ioi": {
        "template": "When{A} and{B} went to the store,{S} gave a drink to",
        "names": [" Mary", " John", " Tom", " Anna", " James", " Sarah", " David", " Emma"],
        "pairs": 8,
        "seed": 2,
    },
    "lens_prompt": "The capital of France is",
    "lens_answer": " Paris",
}


def repeated_tokens(cfg: dict) -> np.ndarray:
    """``(B, 2n)`` token ids: ``n`` random ids, then the same ``n`` again."""
    r = cfg["repeat"]
    seq = np.random.default_rng(r["seed"]).integers(r["low"], r["high"], size=(r["batch"], r["n"]))
    return np.concatenate([seq, seq], axis=1)


def repeat_loss(logits: np.ndarray, ids: np.ndarray, n: int) -> float:
    """Mean next-token loss (nats) over the second copy's predictions."""
    logp = logits - np.logaddexp.reduce(logits, axis=-1, keepdims=True)
    nll = -np.take_along_axis(logp[:, :-1], ids[:, 1:, None], -1)[..., 0]
    return float(nll[:, n:].mean())


def induction_scores(model, ids: np.ndarray, n: int) -> np.ndarray:
    """(layers, heads): the mean weight, in the second copy, on the key ``n - 1`` back."""
    names = [f"blocks.{i}.attn.pattern" for i in range(len(model.blocks))]
    _, acts = record_all(model, ids, names)
    q = np.arange(n, 2 * n)
    return np.stack([acts[p][:, :, q, q - n + 1].mean(axis=(0, 2)) for p in names])


def ioi_prompts(tok, cfg: dict):
    """``(clean, corrupted, A ids, B ids)``: one template, name pairs drawn without repeats."""
    c = cfg["ioi"]
    rng = np.random.default_rng(c["seed"])
    clean, corrupted, good, bad = [], [], [], []
    seen = set()
    while len(clean) < c["pairs"]:
        A, B = (str(x) for x in rng.choice(c["names"], 2, replace=False))
        if (A, B) in seen:
            continue
        seen.add((A, B))
        clean.append(tok.encode(c["template"].format(A=A, B=B, S=B)))
        corrupted.append(tok.encode(c["template"].format(A=A, B=B, S=A)))
        good.append(int(tok.encode(A)[0]))
        bad.append(int(tok.encode(B)[0]))
    return np.stack(clean), np.stack(corrupted), np.array(good), np.array(bad)


def repeat_part(model) -> dict:
    """Sweep 1: induction scores, each head zeroed, the top heads against random ones."""
    n_layers, n_heads = len(model.blocks), model.blocks[0].attn.n_heads
    heads = [(i, h) for i in range(n_layers) for h in range(n_heads)]
    n = CONFIG["repeat"]["n"]
    ids = repeated_tokens(CONFIG)
    base = repeat_loss(model.forward(ids), ids, n)
    scores = induction_scores(model, ids, n)
    ablated = np.empty((n_layers, n_heads))
    for i, h in heads:
        with ablate_heads(model, [(i, h)]):
            ablated[i, h] = repeat_loss(model.forward(ids), ids, n)
        print(f"repeat: head {i}.{h} zeroed: {ablated[i, h]:.3f} nats", flush=True)
    order = np.argsort(scores, axis=None)[::-1]
    top = [tuple(int(x) for x in np.unravel_index(k, scores.shape)) for k in order[: CONFIG["top"]]]
    others = [hd for hd in heads if hd not in top]
    rng = np.random.default_rng(CONFIG["random_seed"])
    reference = np.random.default_rng(CONFIG["repeat"]["seed"] + 100).integers(
        CONFIG["repeat"]["low"], CONFIG["repeat"]["high"], size=ids.shape
    )  # random tokens, no repeat: the mean ablation's reference set

    def together(chosen, how):
        with ablate_heads(model, chosen, how=how, reference=reference):
            return round(repeat_loss(model.forward(ids), ids, n), 4)

    draws = [
        [others[k] for k in rng.choice(len(others), CONFIG["top"], replace=False)]
        for _ in range(CONFIG["random_draws"])
    ]
    return {
        "base_loss": round(base, 4),
        "induction_score": np.round(scores, 4).tolist(),
        "zeroed_loss": np.round(ablated, 4).tolist(),
        "top_heads": top,
        "groups": {
            "top_zero": together(top, "zero"),
            "top_mean": together(top, "mean"),
            "random": [
                {"heads": d, "zero": together(d, "zero"), "mean": together(d, "mean")}
                for d in draws
            ],
        },
    }


def ioi_part(model, tok) -> dict:
    """Sweep 2 (names: each head patched clean -> corrupted) and 3 (the logit lens)."""
    clean, corrupted, good, bad = ioi_prompts(tok, CONFIG)
    metric = logit_diff(good, bad)
    ld_clean, ld_corrupt = metric(model.forward(clean)), metric(model.forward(corrupted))
    print(f"names: clean {ld_clean:.3f}, corrupted {ld_corrupt:.3f}", flush=True)
    patched = patch_heads(model, clean, corrupted, metric, what="z")
    prompt = tok.encode(CONFIG["lens_prompt"])[None]
    answer = int(tok.encode(CONFIG["lens_answer"])[0])
    lens = logit_lens(model, prompt)[:, 0]  # (31, V)
    return {
        "ioi": {
            "prompts": [tok.decode(c.tolist()) for c in clean],
            "corrupted": [tok.decode(c.tolist()) for c in corrupted],
            "logit_diff_clean": round(ld_clean, 4),
            "logit_diff_corrupt": round(ld_corrupt, 4),
            "patched_logit_diff": np.round(patched, 4).tolist(),
        },
        "lens": {
            "prompt": CONFIG["lens_prompt"],
            "answer": CONFIG["lens_answer"],
            "rank": [int((row > row[answer]).sum()) for row in lens],
        },
    }


def main(part: str) -> dict:
    """Run one part (``repeat`` or ``ioi``: two processes may share the work), or ``all``;
    then merge whatever parts exist into the committed JSON and manifest."""
    from attention_lib.models.pretrained import load_pretrained

    started, cpu0 = time.perf_counter(), time.process_time()
    model, tok = load_pretrained("smollm2")
    result = repeat_part(model) if part == "repeat" else {}
    result = {"repeat": result} if result else {}
    if part in ("ioi", "all"):
        result.update(ioi_part(model, tok))
    if part == "all":
        result["repeat"] = repeat_part(model)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu0
    OUT.mkdir(parents=True, exist_ok=True)
    timing = {
        "wall_seconds": round(wall, 1),
        "cpu_seconds": round(cpu, 1),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        # repeat: 2 + 270 + the top group (zero; mean and its reference) + each draw's 3;
        # ioi: clean, corrupted, the recorded clean run, 270 patches, the lens
        "forward_passes": (275 + 3 * CONFIG["random_draws"] if part != "ioi" else 0)
        + (274 if part != "repeat" else 0),
    }
    staged = OUT / f".smollm2_sweep.{part}.json"
    write_atomic(staged, lambda f: f.write(json.dumps({"result": result, "timing": timing})))
    parts = {}
    for name in ("repeat", "ioi", "all"):
        p = OUT / f".smollm2_sweep.{name}.json"
        if p.exists():
            parts[name] = json.loads(p.read_text())
    merged = {}
    for name in ("repeat", "ioi", "all"):
        merged.update(parts.get(name, {}).get("result", {}))
    if not {"repeat", "ioi", "lens"} <= set(merged):
        print(f"part {part} done; waiting for the other part", flush=True)
        return merged
    path = OUT / "smollm2_sweep.json"
    merged = {k: merged[k] for k in ("repeat", "ioi", "lens")}
    write_atomic(path, lambda f: f.write(json.dumps(merged, indent=1) + "\n"))
    manifest = {
        "command": "OPENBLAS_NUM_THREADS=1 python scripts/interp_smollm2_sweep.py --part all "
        "(or --part repeat and --part ioi as two processes, as here)",
        "config": CONFIG,
        "output": path.name,
        "output_sha256": sha256(path),
        "parts": {name: p["timing"] for name, p in parts.items()},
        "forward_passes": sum(p["timing"]["forward_passes"] for p in parts.values()),
        "wall_seconds": max(p["timing"]["wall_seconds"] for p in parts.values()),
        "cpu_seconds": round(sum(p["timing"]["cpu_seconds"] for p in parts.values()), 1),
        "cpu": cpu_name(),
        "threads": 1,
        "load_average": timing["load_average"],
        "numpy": np.__version__,
    }
    write_atomic(
        OUT / "smollm2_sweep.manifest.json",
        lambda f: f.write(json.dumps(manifest, indent=1) + "\n"),
    )
    for p in OUT.glob(".smollm2_sweep.*.json"):
        p.unlink()
    print(json.dumps({k: manifest[k] for k in ("wall_seconds", "cpu_seconds", "load_average")}))
    return merged


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("all", "repeat", "ioi"), default="all")
    with threadpool_limits(limits=1, user_api="blas"):
        main(parser.parse_args().part)
