"""The book's own trained models, tested causally: the sweeps of the chapter "What heads do".

Chapter 11's Shakespeare model (4 layers x 4 heads):

1. each head zeroed, and mean-ablated, against the held-out loss (32
   windows of 128 characters of the validation text);
2. copying from context: the loss on the second copy of 16 repeated
   64-character passages, against the first;
3. one behaviour, spelling: "... Thou art my lor" -> "d" against
   "... Thou art my hor" -> "s", each head's output patched from the first
   into the second, scored by ``logit(d) - logit(s)``.

Chapter 10's translator (a 3-layer encoder-decoder Transformer):

4. each decoder head (self- and cross-attention) zeroed, and each layer's
   four cross-attention heads together, against BLEU with greedy decoding on
   every 5th sentence of the test set (290 sentences);
5. a source word through one head: "I saw a cat." and "I saw a dog." (and two
   more pairs), each decoder head's output patched from the first into the
   second, scored by ``logit(chat) - logit(chien)`` at the word's place.

``python scripts/interp_small_models.py`` writes ``data/interp/small_models.json``
and ``data/interp/small_models.manifest.json``. Deterministic (seeds in ``CONFIG``).
"""

from __future__ import annotations

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
from attention_lib.interp import ablate_heads, layout, logit_diff, patch_heads  # noqa: E402
from attention_lib.train.evaluate_long_context import cpu_name  # noqa: E402

OUT = ROOT / "data" / "interp"

CONFIG = {
    "shakespeare": {
        "windows": 32,
        "window": 128,
        "repeats": 16,
        "repeat_len": 64,
        "seed": 0,
        "spelling": {
            "prompt": "KING RICHARD III:\nCome hither, Catesby. Thou art my ",
            "clean": "lor",
            "corrupted": "hor",
            "answers": ["d", "s"],
        },
    },
    "translation": {
        "every": 5,
        "word_pairs": [
            ["I saw a cat.", "I saw a dog.", "J'ai vu un", "chat", "chien"],
            ["The cat is black.", "The dog is black.", "Le", "chat", "chien"],
            ["I like the red car.", "I like the red house.", "J'aime la", "voiture", "maison"],
        ],
    },
}


def next_token_loss(logits: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """(B, T - 1): the loss of each next token."""
    logp = logits - np.logaddexp.reduce(logits, axis=-1, keepdims=True)
    return -np.take_along_axis(logp[:, :-1], ids[:, 1:, None], -1)[..., 0]


def shakespeare() -> dict:
    from attention_lib.models.pretrained import load_pretrained
    from attention_lib.train.shakespeare import load_text

    cfg = CONFIG["shakespeare"]
    model, tok = load_pretrained("shakespeare")
    _, _, val = load_text()
    rng = np.random.default_rng(cfg["seed"])
    starts = rng.integers(0, len(val) - cfg["window"], size=cfg["windows"])
    windows = np.stack([val[s : s + cfg["window"]] for s in starts])
    n = cfg["repeat_len"]
    passages = np.stack([val[s : s + n] for s in rng.integers(0, len(val) - n, cfg["repeats"])])
    repeated = np.concatenate([passages, passages], axis=1)

    def held_out():
        return float(next_token_loss(model.forward(windows), windows).mean())

    base = held_out()
    n_layers, n_heads = len(model.blocks), model.blocks[0].attn.n_heads
    zero, mean = np.empty((n_layers, n_heads)), np.empty((n_layers, n_heads))
    for i in range(n_layers):
        for h in range(n_heads):
            with ablate_heads(model, [(i, h)]):
                zero[i, h] = held_out()
            with ablate_heads(model, [(i, h)], how="mean", reference=windows):
                mean[i, h] = held_out()
    rep = next_token_loss(model.forward(repeated), repeated)
    sp = cfg["spelling"]
    clean = tok.encode(sp["prompt"] + sp["clean"])[None]
    corrupted = tok.encode(sp["prompt"] + sp["corrupted"])[None]
    good, bad = (int(tok.encode(c)[0]) for c in sp["answers"])
    metric = logit_diff(good, bad)
    return {
        "held_out_loss": round(base, 4),
        "zeroed_loss": np.round(zero, 4).tolist(),
        "mean_ablated_loss": np.round(mean, 4).tolist(),
        "repeat_loss_first": round(float(rep[:, : n - 1].mean()), 4),
        "repeat_loss_second": round(float(rep[:, n:].mean()), 4),
        "spelling": {
            "logit_diff_clean": round(metric(model.forward(clean)), 4),
            "logit_diff_corrupt": round(metric(model.forward(corrupted)), 4),
            "patched_logit_diff": np.round(
                patch_heads(model, clean, corrupted, metric), 4
            ).tolist(),
        },
    }


def translation() -> dict:
    import sacrebleu

    from attention_lib.train.translation import load_references
    from attention_lib.translate import load_model, translate_sentences

    cfg = CONFIG["translation"]
    model, tok = load_model("transformer")
    lay = layout(model)
    sources, refs = load_references("test")
    idx = list(range(0, len(sources), cfg["every"]))
    S, R = [sources[i] for i in idx], [refs[i] for i in idx]
    width = max(len(r) for r in R)
    streams = [[r[k] if k < len(r) else None for r in R] for k in range(width)]

    def bleu():
        return round(sacrebleu.corpus_bleu(translate_sentences(model, tok, S), streams).score, 2)

    base = bleu()
    heads = {}
    for a in lay.heads:
        for h in range(lay.attns[a].n_heads):
            with ablate_heads(model, [(a, h)]):
                heads[f"{a}.{h}"] = bleu()
            print(f"translation: {a} head {h} zeroed: BLEU {heads[f'{a}.{h}']}", flush=True)
    layers = {}
    for a in lay.heads:
        if a.endswith("cross_attn"):
            with ablate_heads(model, [(a, h) for h in range(lay.attns[a].n_heads)]):
                layers[a] = bleu()
    words = []
    for en_clean, en_corrupt, prefix, fr_clean, fr_corrupt in cfg["word_pairs"]:
        src_c, src_k = tok.encode(en_clean), tok.encode(en_corrupt)
        if len(src_c) != len(src_k):
            raise ValueError(f"{en_clean!r} and {en_corrupt!r} have different token counts")
        tgt = np.array([[1] + list(tok.encode(prefix))])  # <bos> and the French so far
        good, bad = (int(tok.encode(" " + w)[0]) for w in (fr_clean, fr_corrupt))
        length = np.array([len(src_c)])
        clean = (np.array([src_c]), length, tgt)
        corrupted = (np.array([src_k]), length, tgt)
        metric = logit_diff(good, bad)
        words.append(
            {
                "pair": [en_clean, en_corrupt, prefix, fr_clean, fr_corrupt],
                "logit_diff_clean": round(metric(model.forward(*clean)), 4),
                "logit_diff_corrupt": round(metric(model.forward(*corrupted)), 4),
                "heads": lay.heads,
                "patched_logit_diff": np.round(
                    patch_heads(model, clean, corrupted, metric), 4
                ).tolist(),
            }
        )
    return {
        "sentences": len(S),
        "every": cfg["every"],
        "bleu": base,
        "bleu_head_zeroed": heads,
        "bleu_cross_layer_zeroed": layers,
        "words": words,
    }


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.parse_args(argv)
    started, cpu0 = time.perf_counter(), time.process_time()
    result = {"shakespeare": shakespeare(), "translation": translation()}
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu0
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / "small_models.json"
    write_atomic(path, lambda f: f.write(json.dumps(result, indent=1) + "\n"))
    manifest = {
        "command": "OPENBLAS_NUM_THREADS=1 python scripts/interp_small_models.py",
        "config": CONFIG,
        "inputs_sha256": {
            p: sha256(ROOT / p)
            for p in (
                "data/checkpoints/shakespeare/shakespeare.npz",
                "data/checkpoints/translation/transformer.npz",
            )
        },
        "output": path.name,
        "output_sha256": sha256(path),
        "wall_seconds": round(wall, 1),
        "cpu_seconds": round(cpu, 1),
        "cpu": cpu_name(),
        "threads": 1,
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "numpy": np.__version__,
    }
    write_atomic(
        OUT / "small_models.manifest.json",
        lambda f: f.write(json.dumps(manifest, indent=1) + "\n"),
    )
    print(json.dumps({k: manifest[k] for k in ("wall_seconds", "cpu_seconds", "load_average")}))
    return result


if __name__ == "__main__":
    with threadpool_limits(limits=1, user_api="blas"):
        main()
