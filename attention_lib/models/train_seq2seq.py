"""Train chapter 3's four encoder-decoders and write their checkpoints.

Run as ``python -m attention_lib.models.train_seq2seq [--out DIR]``. It trains
RNNsearch and RNNencdec, each on sentences of 5-50 words and of 5-20 words,
evaluates them on the length-bucketed test sets, and writes into ``DIR``
(default ``data/checkpoints/seq2seq``):

- ``<name>.npz``: the parameters and config of each model (no pickles);
- ``manifest.json``: the configuration, steps, seeds, the sha256 of each
  ``.npz``, the evaluation table, and the command that made them.

Training is seeded and runs in float32 on one thread (``OPENBLAS_NUM_THREADS=1``
is set before NumPy loads: the matrices are small, and threads only add
overhead and contention). It is deterministic on one machine; across CPUs
the BLAS kernels round differently, so a retrained model matches the
committed one in its evaluation (within ``scripts/check-retrain.sh``'s
tolerance), not in its bits.
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse      # noqa: E402
import hashlib       # noqa: E402
import json          # noqa: E402
import sys           # noqa: E402
import time          # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np   # noqa: E402

from ..nn import Adam, clip_grad_norm   # noqa: E402
from ..toy_translation import encode_batch, make_pair, source_vocab, target_vocab  # noqa: E402
from .evaluation import evaluate, make_test_sets   # noqa: E402
from .seq2seq import MODELS, load, save   # noqa: E402
from ..embeddings import data_dir   # noqa: E402

#: Sizes and optimiser settings shared by the four models.
CONFIG = {"emb": 16, "hidden": 48, "attn": 32, "batch": 32, "lr": 0.003, "clip": 1.0,
          "length_spread": 2}

#: The four runs: name -> (model, shortest and longest training sentence, Adam steps, seed).
RUNS = {
    "rnnsearch_50": ("RNNsearch", 5, 50, 1500, 1),
    "rnnencdec_50": ("RNNencdec", 5, 50, 4000, 2),
    "rnnsearch_20": ("RNNsearch", 5, 20, 1500, 3),
    "rnnencdec_20": ("RNNencdec", 5, 20, 4000, 4),
}


def training_batch(rng, batch, min_words, max_words, spread, src_vocab, tgt_vocab):
    """A batch of sentences of similar length (within ``spread`` words of a random centre).

    Similar lengths waste little on padding; they still differ, so the masks are exercised.
    """
    centre = int(rng.integers(min_words, max_words + 1))
    lo, hi = max(min_words, centre - spread), min(max_words, centre + spread)
    pairs = [make_pair(rng, int(rng.integers(lo, hi + 1))) for _ in range(batch)]
    return encode_batch(pairs, src_vocab, tgt_vocab)


def train(model, steps, min_words, max_words, seed, batch=32, lr=0.003, clip=1.0,
          length_spread=2, log=None, log_every=100, callback=None):
    """Train ``model`` with Adam and gradient clipping; returns the loss of every step.

    ``callback(step, model)``, if given, runs after each step (the chapter
    uses it to record the attention as it sharpens).
    """
    rng = np.random.default_rng(seed)
    src_vocab, tgt_vocab = source_vocab(), target_vocab()
    layers = model.layers()
    opt = Adam(layers, lr=lr)
    losses = []
    t0 = time.process_time()
    for step in range(1, steps + 1):
        src, lengths, tgt_in, tgt_out = training_batch(
            rng, batch, min_words, max_words, length_spread, src_vocab, tgt_vocab)
        losses.append(model.loss(src, lengths, tgt_in, tgt_out))
        model.backward()
        clip_grad_norm(layers, clip)
        opt.step()
        if callback is not None:
            callback(step, model)
        if log is not None and (step % log_every == 0 or step == steps):
            print(f"step {step:5d}  loss {np.mean(losses[-log_every:]):.4f}  "
                  f"cpu {time.process_time() - t0:.1f}s", file=log, flush=True)
    return losses


def checkpoint_dir():
    """Where the committed checkpoints live: ``data/checkpoints/seq2seq``."""
    return data_dir() / "checkpoints" / "seq2seq"


def load_checkpoints(directory=None, dtype=np.float64):
    """The manifest and the models it lists, ``(manifest, {name: model})``.

    Each file's sha256 is checked against the manifest first. The models are
    loaded in float64 by default: the evaluation reads argmaxes, and float64
    keeps near-ties from flipping between CPUs whose BLAS rounds differently.
    """
    directory = Path(directory) if directory is not None else checkpoint_dir()
    manifest = json.loads((directory / "manifest.json").read_text(encoding="utf8"))
    models = {}
    for name, entry in manifest["models"].items():
        path = directory / entry["file"]
        if sha256(path) != entry["sha256"]:
            raise ValueError(f"{path} does not match the sha256 in its manifest: "
                             f"retrain with python -m attention_lib.models.train_seq2seq")
        models[name] = load(path, dtype=dtype)
    return manifest, models


def sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="data/checkpoints/seq2seq", help="output directory")
    parser.add_argument("--runs", nargs="*", default=list(RUNS), choices=list(RUNS),
                        help="which models to train (default: all four)")
    parser.add_argument("--test-per-bucket", type=int, default=100,
                        help="test sentences per length bucket")
    parser.add_argument("--evaluate-only", action="store_true",
                        help="re-evaluate the checkpoints in --out and print the table")
    args = parser.parse_args(argv)
    out = Path(args.out)
    if args.evaluate_only:
        manifest, models = load_checkpoints(out)
        tests = make_test_sets(manifest["test_per_bucket"], manifest["test_seed"])
        table = {name: evaluate(m, tests, source_vocab(), target_vocab())
                 for name, m in models.items()}
        print(json.dumps(table, indent=1))
        return table
    out.mkdir(parents=True, exist_ok=True)
    src_vocab, tgt_vocab = source_vocab(), target_vocab()
    tests = make_test_sets(args.test_per_bucket)
    command = "python -m attention_lib.models.train_seq2seq"
    if args.runs != list(RUNS):
        command += " --runs " + " ".join(args.runs)
    if args.test_per_bucket != 100:
        command += f" --test-per-bucket {args.test_per_bucket}"
    manifest = {"command": command, "evaluation_dtype": "float64",
                "config": CONFIG, "test_per_bucket": args.test_per_bucket,
                "test_seed": 2015, "numpy": np.__version__, "models": {}}
    for name in args.runs:
        model_name, lo, hi, steps, seed = RUNS[name]
        model = MODELS[model_name](len(src_vocab), len(tgt_vocab), CONFIG["emb"],
                                   CONFIG["hidden"], CONFIG["attn"], seed=seed)
        print(f"== {name}: {model_name}, {model.n_params()} parameters, "
              f"sentences of {lo}-{hi} words, {steps} steps", flush=True)
        t0 = time.process_time()
        losses = train(model, steps, lo, hi, seed=seed + 100, batch=CONFIG["batch"],
                       lr=CONFIG["lr"], clip=CONFIG["clip"],
                       length_spread=CONFIG["length_spread"], log=sys.stdout)
        cpu = time.process_time() - t0
        path = out / f"{name}.npz"
        save(model, path, train_words=[lo, hi], steps=steps)
        result = evaluate(load(path, dtype=np.float64), tests, src_vocab, tgt_vocab)
        print(json.dumps(result), flush=True)
        manifest["models"][name] = {
            "file": path.name, "sha256": sha256(path), "model": model_name,
            "parameters": int(model.n_params()), "train_words": [lo, hi], "steps": steps,
            "seed": seed, "data_seed": seed + 100, "cpu_seconds": round(cpu, 1),
            "final_loss": round(float(np.mean(losses[-100:])), 4), "evaluation": result}
        (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


if __name__ == "__main__":
    main()
