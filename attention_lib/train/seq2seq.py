"""Train chapter 3's four encoder-decoders and write their checkpoints.

Run as ``python -m attention_lib.train.seq2seq [--out DIR]``. It trains
RNNsearch and RNNencdec, each on sentences of 5-50 words and of 5-20 words,
evaluates them on the length-bucketed test sets, and writes into ``DIR``
(default ``data/checkpoints/seq2seq``):

- ``<name>.npz``: the parameters and config of each model (no pickles);
- ``manifest.json``: the configuration, steps, seeds, the sha256 of each
  ``.npz``, the evaluation table, and the command that made them.

The manifest is merged, never dropped: ``--runs X`` replaces run X's entry
and keeps the others', and it is rewritten atomically (a temporary file, then
a rename) after each model, so an interrupted run loses at most the model in
progress. Every argument is checked before any work starts; a bad one exits
with status 2 and a one-line message.

Training is seeded and runs in float32 on one BLAS thread (set with
threadpoolctl, which works after NumPy is loaded: the matrices are small,
and threads only add overhead and contention). It is deterministic on one
machine; across CPUs the BLAS kernels round differently, so a retrained model
matches the committed one in its evaluation (within
``scripts/check-retrain.sh``'s tolerance), not in its bits.
"""

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from numpy.random import Generator
from numpy.typing import DTypeLike

from .._cli import EXIT_BROKEN_PIPE, closed_pipe, int_at_least  # noqa: F401 (main returns it)
from ..data.paths import data_dir, sha256, write_atomic
from ..nn import Adam, clip_grad_norm
from ..data.toy_translation import encode_batch, make_pair, source_vocab, target_vocab
from .evaluation import evaluate, make_test_sets
from ..models.seq2seq import MODELS, load, save

#: Sizes and optimiser settings shared by the four models.
CONFIG = {
    "emb": 16,
    "hidden": 48,
    "attn": 32,
    "batch": 32,
    "lr": 0.003,
    "clip": 1.0,
    "length_spread": 2,
}

#: The four runs: name -> (model, shortest and longest training sentence, Adam steps, seed).
RUNS = {
    "rnnsearch_50": ("RNNsearch", 5, 50, 1500, 1),
    "rnnencdec_50": ("RNNencdec", 5, 50, 4000, 2),
    "rnnsearch_20": ("RNNsearch", 5, 20, 1500, 3),
    "rnnencdec_20": ("RNNencdec", 5, 20, 4000, 4),
}


def training_batch(
    rng: Generator,
    batch: int,
    min_words: int,
    max_words: int,
    spread: int,
    src_vocab: dict,
    tgt_vocab: dict,
) -> tuple:
    """A batch of sentences of similar length (within ``spread`` words of a random centre).

    Similar lengths waste little on padding; they still differ, so the masks are exercised.
    """
    centre = int(rng.integers(min_words, max_words + 1))
    lo, hi = max(min_words, centre - spread), min(max_words, centre + spread)
    pairs = [make_pair(rng, int(rng.integers(lo, hi + 1))) for _ in range(batch)]
    return encode_batch(pairs, src_vocab, tgt_vocab)


def train(
    model,
    steps,
    min_words,
    max_words,
    seed,
    batch=32,
    lr=0.003,
    clip=1.0,
    length_spread=2,
    log=None,
    log_every=100,
    callback=None,
):
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
            rng, batch, min_words, max_words, length_spread, src_vocab, tgt_vocab
        )
        losses.append(model.loss(src, lengths, tgt_in, tgt_out))
        model.backward()
        clip_grad_norm(layers, clip, error_if_nonfinite=True)  # a NaN stops training
        opt.step()
        if callback is not None:
            callback(step, model)
        if log is not None and (step % log_every == 0 or step == steps):
            print(
                f"step {step:5d}  loss {np.mean(losses[-log_every:]):.4f}  "
                f"cpu {time.process_time() - t0:.1f}s",
                file=log,
                flush=True,
            )
    return losses


def checkpoint_dir() -> Path:
    """Where the committed checkpoints live: ``data/checkpoints/seq2seq``."""
    return data_dir() / "checkpoints" / "seq2seq"


def load_checkpoints(
    directory: str | os.PathLike | None = None, dtype: DTypeLike = np.float64
) -> tuple[dict, dict]:
    """The manifest and the models it lists, ``(manifest, {name: model})``.

    Each file's sha256 is checked against the manifest first, and the model
    class the file's config names against the manifest's. The models are
    loaded in float64 by default: the evaluation reads argmaxes, and float64
    keeps near-ties from flipping between CPUs whose BLAS rounds differently.
    """
    directory = Path(directory) if directory is not None else checkpoint_dir()
    manifest = read_manifest(directory / "manifest.json")
    models = {}
    for name, entry in manifest["models"].items():
        path = directory / entry["file"]
        if sha256(path) != entry["sha256"]:
            raise ValueError(
                f"{path} does not match the sha256 in its manifest: "
                f"retrain with python -m attention_lib.train.seq2seq"
            )
        models[name] = load(path, dtype=dtype, model=entry["model"])
    return manifest, models


def read_manifest(path: str | os.PathLike) -> dict:
    """The manifest at ``path``, checked: ``ValueError`` naming the file if it is damaged."""
    path = Path(path)
    text = path.read_text(encoding="utf8")
    try:
        manifest = json.loads(text)
        if not isinstance(manifest, dict) or not isinstance(manifest.get("models"), dict):
            raise ValueError("it has no 'models' table")  # noqa: TRY004 (reported as ValueError)
        for name, entry in manifest["models"].items():
            if not isinstance(entry, dict) or not all(
                isinstance(entry.get(k), str) for k in ("file", "sha256", "model")
            ):
                raise ValueError(f"the entry of {name!r} lacks its file, sha256 or model")
            if Path(entry["file"]).name != entry["file"]:
                raise ValueError(f"the entry of {name!r} names a file outside the folder")
    except ValueError as err:  # json.JSONDecodeError is a ValueError
        raise ValueError(f"{path} is not a checkpoint manifest: {err}") from None
    return manifest


_PROG = "python -m attention_lib.train.seq2seq"
_TEST_SEED = 2015


def _command(runs, test_per_bucket):
    """The command line that makes the runs ``runs`` (in :data:`RUNS` order)."""
    command = _PROG
    if set(runs) != set(RUNS):
        command += " --runs " + " ".join(r for r in RUNS if r in runs)
    if test_per_bucket != 100:
        command += f" --test-per-bucket {test_per_bucket}"
    return command


def _parse(parser, argv):
    """Parsed and checked arguments, and the manifest to merge into (or None).

    Everything that can be checked before training is checked here, so a
    mistake costs nothing: it exits with status 2 and a one-line message.
    """
    args = parser.parse_args(argv)
    if args.out is None:  # the library's data folder, wherever the command runs
        args.out = str(checkpoint_dir())
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        parser.error(f"--out {out} is a file: pass a directory")
    manifest_path = out / "manifest.json"
    if args.evaluate_only:
        if args.runs is not None or args.test_per_bucket is not None:
            parser.error(
                "--evaluate-only re-evaluates what --out holds: --runs and "
                "--test-per-bucket do not apply to it"
            )
        if not manifest_path.is_file():
            parser.error(f"--out {out} has no manifest.json to evaluate: train first")
        return args, None
    args.runs = list(RUNS) if args.runs is None else list(dict.fromkeys(args.runs))
    args.test_per_bucket = 100 if args.test_per_bucket is None else args.test_per_bucket
    old = None
    if manifest_path.exists():
        try:
            old = read_manifest(manifest_path)
        except (OSError, ValueError) as err:
            parser.error(f"cannot merge into --out {out}: {err}; move it away first")
        now = {"config": CONFIG, "test_per_bucket": args.test_per_bucket, "test_seed": _TEST_SEED}
        made_with = {k: old.get(k) for k in now}
        if made_with != now:
            parser.error(
                f"--out {out} holds checkpoints made with other settings "
                f"(--test-per-bucket {made_with['test_per_bucket']}, config "
                f"{made_with['config']}): their rows would not compare with the "
                f"new ones; use the same settings or another --out"
            )
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        parser.error(f"--out {out}: cannot create it ({err.strerror})")
    if not os.access(out, os.W_OK):
        parser.error(f"--out {out} is not writable")
    return args, old


def main(argv: Sequence[str] | None = None) -> int:
    """Train (or, with ``--evaluate-only``, re-evaluate) and return the exit status.

    0 on success; 2 with a one-line message for a bad argument, before any
    work; 1 if the checkpoints to evaluate are damaged;
    :data:`EXIT_BROKEN_PIPE` (141), without a traceback, when standard output
    is closed early (``| head``).
    """
    parser = argparse.ArgumentParser(prog=_PROG, description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out",
        default=None,
        help="output directory (its manifest.json is merged, not replaced; default "
        "the library's data/checkpoints/seq2seq, wherever the command runs)",
    )
    parser.add_argument(
        "--runs",
        nargs="+",
        default=None,
        choices=list(RUNS),
        help="which models to train (default: all four)",
    )
    parser.add_argument(
        "--test-per-bucket",
        type=int_at_least(1),
        default=None,
        metavar="N",
        help="test sentences per length bucket (default 100)",
    )
    parser.add_argument(
        "--evaluate-only",
        action="store_true",
        help="re-evaluate the checkpoints in --out and print the table",
    )
    args, old = _parse(parser, argv)
    try:
        if args.evaluate_only:
            try:
                manifest, models = load_checkpoints(args.out)
            except (OSError, ValueError) as err:
                parser.exit(1, f"{parser.prog}: error: {err}\n")
            tests = make_test_sets(manifest["test_per_bucket"], manifest["test_seed"])
            table = {
                name: evaluate(m, tests, source_vocab(), target_vocab())
                for name, m in models.items()
            }
            print(json.dumps(table, indent=1))
            return 0
        from threadpoolctl import threadpool_limits

        with threadpool_limits(1, "blas"):
            _train_runs(Path(args.out), args.runs, args.test_per_bucket, old)
    except BrokenPipeError:
        return closed_pipe(sys.stdout)
    return 0


def _train_runs(out, runs, test_per_bucket, old):
    """Train ``runs`` into ``out``, merging each into the manifest as soon as it is saved."""
    src_vocab, tgt_vocab = source_vocab(), target_vocab()
    tests = make_test_sets(test_per_bucket, _TEST_SEED)
    manifest = old
    if manifest is None:
        manifest = {
            "command": "",
            "evaluation_dtype": "float64",
            "config": CONFIG,
            "test_per_bucket": test_per_bucket,
            "test_seed": _TEST_SEED,
            "numpy": np.__version__,
            "models": {},
        }
    for name in runs:
        model_name, lo, hi, steps, seed = RUNS[name]
        sizes = {k: CONFIG[k] for k in ("emb", "hidden", "attn")}
        model = MODELS[model_name](len(src_vocab), len(tgt_vocab), **sizes, seed=seed)
        print(
            f"== {name}: {model_name}, {model.n_params()} parameters, "
            f"sentences of {lo}-{hi} words, {steps} steps",
            flush=True,
        )
        t0 = time.process_time()
        settings = {k: CONFIG[k] for k in ("batch", "lr", "clip", "length_spread")}
        losses = train(model, steps, lo, hi, seed=seed + 100, log=sys.stdout, **settings)
        cpu = time.process_time() - t0
        path = save(model, out / f"{name}.npz", train_words=[lo, hi], steps=steps)
        result = evaluate(load(path, dtype=np.float64), tests, src_vocab, tgt_vocab)
        print(json.dumps(result), flush=True)
        models = dict(manifest["models"])
        models[name] = {
            "file": path.name,
            "sha256": sha256(path),
            "model": model_name,
            "parameters": int(model.n_params()),
            "train_words": [lo, hi],
            "steps": steps,
            "seed": seed,
            "data_seed": seed + 100,
            "cpu_seconds": round(cpu, 1),
            "final_loss": round(float(np.mean(losses[-100:])), 4),
            "evaluation": result,
        }
        order = [r for r in RUNS if r in models] + [r for r in models if r not in RUNS]
        manifest = {**manifest, "numpy": np.__version__, "models": {r: models[r] for r in order}}
        manifest["command"] = _command(list(manifest["models"]), test_per_bucket)
        text = json.dumps(manifest, indent=1) + "\n"
        write_atomic(out / "manifest.json", lambda f: f.write(text))
    return manifest


if __name__ == "__main__":
    sys.exit(main())
