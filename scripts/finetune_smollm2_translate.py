"""Teach SmolLM2-135M-Instruct to translate English into French with LoRA (chapter 16).

LoRA adapters (Hu et al., 2021) on the query and value projections of all 30
blocks (rank 8, alpha 16: 460,800 trainable numbers beside 135 million frozen
ones), trained on English-French pairs from chapter 10's Tatoeba training
split (``data/tatoeba/train.tsv``; its test split is held out), each written
in the model's chat template::

    <|im_start|>system
    Translate the user's English sentence into French.<|im_end|>
    <|im_start|>user
    I am cold.<|im_end|>
    <|im_start|>assistant
    J'ai froid.<|im_end|>

with the loss on the answer's tokens only (the French and ``<|im_end|>``).
Every forward and backward pass is the library's NumPy code; the output
layer (the tied embedding) is applied only at the answer's positions and its
weight gradient never formed (it is frozen).

Then both models, before (zero-shot, the same prompt) and after, translate a
seeded sample of chapter 10's test sentences greedily (stopping at the end of
the turn or at a newline), scored with sacreBLEU (BLEU and chrF, every
reference of a sentence), beside chapter 10's Transformer's committed greedy
translations of the same sentences.

Writes to ``data/checkpoints/finetune/``: ``smollm2_translate_lora.npz`` (the
adapters, :func:`attention_lib.nn.lora.save`; saved every ``--save-every``
minutes too, so a cut run leaves a usable adapter), ``smollm2_translate.json``
(the manifest: configuration, command, sha256 of inputs and outputs, losses,
wall and CPU time, CPU, load average, scores, examples) and
``smollm2_translate_test.tsv`` (source, before, after, Transformer).

Run::

    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 \\
        python scripts/finetune_smollm2_translate.py --eval-sentences 50 --max-train-minutes 20

The committed run (that command) took 36 minutes of wall time at load 15-24 on the
shared 2-core machine, 5.4 minutes of CPU; its time budget stopped the training after
44 of the 150 steps (the manifest's ``status``). Without the budget the run is
deterministic; with it, how many steps fit depends on the machine.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attention_lib.data.tatoeba import load_pairs, load_references, tatoeba_dir  # noqa: E402
from attention_lib.models.smollm2 import chat_prompt, gguf_path, load_smollm2  # noqa: E402
from attention_lib.nn import Adam, lora  # noqa: E402
from attention_lib.train.evaluate_long_context import cpu_name  # noqa: E402
from attention_lib.nn.utils import clip_grad_norm  # noqa: E402
from attention_lib.translate import SMOLLM2_SYSTEM as SYSTEM  # noqa: E402
from attention_lib.translate import smollm2_translate  # noqa: E402

OUT = ROOT / "data" / "checkpoints" / "finetune"
ADAPTER = "smollm2_translate_lora.npz"
MANIFEST = "smollm2_translate.json"
TABLE = "smollm2_translate_test.tsv"


def sha256(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def encode_example(tok, en: str, fr: str) -> tuple[list[int], int]:
    """The ids of prompt + answer, and where the answer starts."""
    prompt = chat_prompt(tok, en, system=SYSTEM).tolist()
    answer = tok.encode(fr).tolist() + [tok.eos_id]
    return prompt + answer, len(prompt)


def make_batch(examples, pad_id):
    """Right-padded tokens (B, T), and the (row, position, target) of every answer token."""
    T = max(len(ids) for ids, _ in examples)
    tokens = np.full((len(examples), T), pad_id, dtype=np.int64)
    rows, cols, targets = [], [], []
    for b, (ids, start) in enumerate(examples):
        tokens[b, : len(ids)] = ids
        for t in range(start - 1, len(ids) - 1):  # the logits at t score the token at t + 1
            rows.append(b)
            cols.append(t)
            targets.append(ids[t + 1])
    return tokens, np.array(rows), np.array(cols), np.array(targets)


def loss_and_backward(model, tokens, rows, cols, targets) -> float:
    """Mean cross-entropy of the answer tokens; fills the adapters' gradients.

    Causal attention and right padding: a pad token after an example changes
    nothing before it. The output layer is ``E^T`` (tied), applied to the
    answer positions only; the embedding table is frozen, so its gradient
    (a 49,152 x 576 matrix) is never formed.
    """
    x = model.tok.forward(tokens)
    for block in model.blocks:
        x = block.forward(x)
    xf = model.norm.forward(x)
    E = model.tok.params["E"]
    h = xf[rows, cols]  # (N, E)
    logits = (h @ E.T).astype(np.float64)
    logits -= logits.max(axis=1, keepdims=True)
    logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    n = len(targets)
    loss = float(-logp[np.arange(n), targets].mean())
    dlogits = np.exp(logp)
    dlogits[np.arange(n), targets] -= 1.0
    dlogits = (dlogits / n).astype(np.float32)
    dxf = np.zeros_like(xf)
    dxf[rows, cols] = dlogits @ E
    grad = model.norm.backward(dxf)
    for block in reversed(model.blocks):
        grad = block.backward(grad)
    return loss


def translate_all(model, tok, sentences, max_new, log, label):
    out, t0 = [], time.perf_counter()
    for k, s in enumerate(sentences):
        out += smollm2_translate(model, tok, [s], max_new)
        if (k + 1) % 25 == 0:
            print(f"{label}: {k + 1}/{len(sentences)}  {time.perf_counter() - t0:.0f}s", file=log)
            log.flush()
    return out, time.perf_counter() - t0


def scores(hyps, refs):
    import sacrebleu

    n = max(len(r) for r in refs)
    streams = [[r[k] if k < len(r) else None for r in refs] for k in range(n)]
    return {
        "bleu": round(sacrebleu.corpus_bleu(hyps, streams).score, 2),
        "chrf": round(sacrebleu.corpus_chrf(hyps, streams).score, 2),
        "sentences": len(hyps),
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--rank", type=int, default=8)
    p.add_argument("--alpha", type=float, default=16.0)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-train-minutes", type=float, default=25.0)
    p.add_argument("--save-every", type=float, default=4.0, help="minutes between adapter saves")
    p.add_argument("--eval-sentences", type=int, default=100)
    p.add_argument("--max-new", type=int, default=40)
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    log = sys.stdout
    wall0, cpu0, load0 = time.perf_counter(), time.process_time(), os.getloadavg()

    model, tok = load_smollm2()
    rng = np.random.default_rng(args.seed)
    pairs = load_pairs("train")
    order = rng.permutation(len(pairs))[: args.steps * args.batch]
    adapters = lora.apply(
        model, ("q", "v"), rank=args.rank, alpha=args.alpha, rng=np.random.default_rng(args.seed)
    )
    n_train = sum(a.params["lora_A"].size + a.params["lora_B"].size for a in adapters)
    n_total = sum(v.size for layer in model.layers() for v in layer.params.values())
    opt = Adam(adapters, lr=args.lr)

    def write_manifest(extra):
        manifest = {
            "what": "SmolLM2-135M-Instruct finetuned with LoRA to translate English into French",
            "command": "OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 python "
            "scripts/finetune_smollm2_translate.py " + " ".join(argv or sys.argv[1:]),
            "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
            | {"targets": ["q", "v"], "system": SYSTEM, "optimizer": "Adam (0.9, 0.999)"},
            "trainable_parameters": int(n_train),
            "base_parameters": int(n_total),
            "inputs": {
                "model_gguf_sha256": sha256(gguf_path()),
                "train_tsv_sha256": sha256(tatoeba_dir() / "train.tsv"),
                "test_tsv_sha256": sha256(tatoeba_dir() / "test.tsv"),
            },
            "machine": {
                "cpu": cpu_name(),
                "threads": os.environ.get("OPENBLAS_NUM_THREADS", "BLAS default"),
                "numpy": np.__version__,
                "load_average_start": [round(x, 2) for x in load0],
                "load_average_now": [round(x, 2) for x in os.getloadavg()],
            },
        } | extra
        path = args.out / MANIFEST
        path.write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n", "utf8")

    # -- zero-shot first (the base model), on the same sample as after ---------
    sources, refs = load_references("test")
    pick = np.sort(
        np.random.default_rng(1000 + args.seed).choice(
            len(sources), args.eval_sentences, replace=False
        )
    )
    src = [sources[i] for i in pick]
    ref = [refs[i] for i in pick]
    before, before_s = translate_all(model, tok, src, args.max_new, log, "before")
    print(f"before: {scores(before, ref)}  {before_s:.0f}s", file=log, flush=True)

    # -- training ----------------------------------------------------------------
    rows_log, losses, t0, last_save = [], [], time.perf_counter(), time.perf_counter()
    train_cpu0 = time.process_time()
    steps_done, stopped = 0, None
    for step in range(1, args.steps + 1):
        idx = order[(step - 1) * args.batch : step * args.batch]
        batch = make_batch([encode_example(tok, *pairs[i]) for i in idx], tok.eos_id)
        loss = loss_and_backward(model, *batch)
        if not np.isfinite(loss):
            raise SystemExit(f"step {step}: the loss is {loss}: stopping")
        clip_grad_norm(adapters, args.clip)
        opt.step()
        losses.append(loss)
        steps_done = step
        wall = time.perf_counter() - t0
        if step % 10 == 0 or step == args.steps:
            mean = round(float(np.mean(losses[-10:])), 4)
            rows_log.append({"step": step, "loss": mean, "wall_s": round(wall, 1)})
            print(f"step {step:4d}  loss {mean:.4f}  {wall:6.0f}s", file=log, flush=True)
        if time.perf_counter() - last_save > 60 * args.save_every:
            lora.save(model, args.out / ADAPTER)
            write_manifest({"status": f"training: step {step} of {args.steps}", "log": rows_log})
            last_save = time.perf_counter()
        if wall > 60 * args.max_train_minutes:
            stopped = f"stopped by the time budget after step {step} of {args.steps}"
            break
    train_wall, train_cpu = time.perf_counter() - t0, time.process_time() - train_cpu0
    lora.save(model, args.out / ADAPTER)

    # -- after: the adapters merged in (one weight per projection, the fast decoder) --
    lora.merge_and_unload(model)
    after, after_s = translate_all(model, tok, src, args.max_new, log, "after")

    # chapter 10's Transformer: its committed greedy translations of the whole test set
    ch10 = (ROOT / "data/checkpoints/translation/transformer_test_greedy.txt").read_text("utf8")
    ch10 = ch10.split("\n")[: len(sources)]
    transformer = [ch10[i] for i in pick]
    table = {
        "before": scores(before, ref),
        "after": scores(after, ref),
        "transformer_chapter10": scores(transformer, ref),
    }
    print(table, file=log, flush=True)
    rows = ["source\tbefore\tafter\ttransformer"]
    rows += [f"{s}\t{b}\t{a}\t{t}" for s, b, a, t in zip(src, before, after, transformer)]
    (args.out / TABLE).write_text("\n".join(rows) + "\n", "utf8")
    write_manifest(
        {
            "status": stopped or f"complete: {steps_done} steps",
            "steps_done": steps_done,
            "examples_seen": steps_done * args.batch,
            "log": rows_log,
            "final_loss": rows_log[-1]["loss"] if rows_log else None,
            "train_wall_seconds": round(train_wall, 1),
            "train_cpu_seconds": round(train_cpu, 1),
            "translate_seconds": {"before": round(before_s, 1), "after": round(after_s, 1)},
            "total_wall_seconds": round(time.perf_counter() - wall0, 1),
            "total_cpu_seconds": round(time.process_time() - cpu0, 1),
            "evaluation": {
                "split": "chapter 10's test split (data/tatoeba/test.tsv)",
                "sample": f"{args.eval_sentences} of its {len(sources)} English sentences, "
                f"drawn with numpy default_rng({1000 + args.seed}), every reference kept",
                "decoding": "greedy; stop at <|im_end|> or a newline; the first line kept",
                "scores": table,
                "transformer_all_greedy": json.loads(
                    (ROOT / "data/checkpoints/translation/manifest.json").read_text("utf8")
                )["models"]["transformer"]["evaluation"]["greedy"]["all"],
            },
            "outputs": {
                ADAPTER: sha256(args.out / ADAPTER),
                TABLE: sha256(args.out / TABLE),
            },
        }
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
