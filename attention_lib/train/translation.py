"""Train the translation models on Tatoeba English-French and write their checkpoints.

Run as ``python -m attention_lib.train.translation --model transformer|rnnsearch
[--steps N] [--threads N] [--out DIR]``. It trains one model on
``data/tatoeba/train.tsv`` (subwords from ``data/tatoeba/bpe.json``), then
evaluates it on ``test.tsv`` and writes into ``DIR`` (default
``data/checkpoints/translation``):

- ``<model>.npz``: every parameter in float16 and the configuration as JSON (no
  pickles); the evaluation is measured on these float16 weights, so what is
  committed is what is evaluated (the float32 weights' greedy BLEU is recorded
  beside it);
- ``<model>_log.json``: the training curve (loss, tokens, wall time every ``log_every`` steps);
- ``<model>_test_greedy.txt`` and ``<model>_test_beam.txt``: the test
  translations, one per English test sentence;
- ``manifest.json``: for each model the configuration, seeds, steps, measured
  wall time, tokens per second, sha256 of the checkpoint and of the tokenizer,
  and the evaluation table. Each run updates its own entry only, and the file
  is replaced atomically, so the two models can train side by side;
- ``<model>_float32.npz``: the float32 weights (not committed), whose
  validation loss is recorded beside the float16 checkpoint's.

Every file of a run stays in ``DIR``. A checkpoint, its float32 copy, its log
and its manifest entry are replaced together, in one step, so an interrupted
run leaves the previous set. ``--evaluate-only`` needs only what is committed:
without a float32 copy it keeps the float32 loss its run recorded.

Training is seeded and deterministic on one machine with a fixed number of
BLAS threads; across CPUs the kernels round differently, so a retrained model
matches the committed one in its evaluation (within the tolerance stated in
the manifest), not in its bits.
"""

import argparse
import collections
import hashlib
import io
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
from numpy.typing import DTypeLike
from threadpoolctl import threadpool_limits

from ..data.tatoeba import (
    PAD,
    Tokenizer,
    pad_batch,
    load_pairs,
    load_references,
    tatoeba_dir,
)
from .._cli import int_at_least
from ..data.paths import sha256, write_atomic, write_atomic_group
from ..nn import Adam, clip_grad_norm
from ..translate import checkpoint_dir, load_checkpoint

#: Settings of each model. ``steps`` is a full run: about 40 minutes of one core
#: each, so the two models train side by side on the project's 2-core machine
#: (the manifest records the measured wall time).
CONFIGS = {
    "transformer": {
        "d_model": 128,
        "n_heads": 4,
        "d_ff": 512,
        "n_layers": 3,
        "max_len": 64,
        "batch": 96,
        "steps": 6400,
        "lr": 2e-3,
        "warmup": 400,
        "betas": [0.9, 0.98],
        "smoothing": 0.1,
        "clip": 1.0,
        "average": 5,
        "average_every": 400,
        "seed": 1,
        "data_seed": 101,
        "threads": 1,
    },
    "rnnsearch": {
        "emb": 128,
        "hidden": 192,
        "attn": 128,
        "batch": 64,
        "steps": 4400,
        "lr": 2e-3,
        "clip": 1.0,
        "average": 5,
        "average_every": 400,
        "seed": 2,
        "data_seed": 102,
        "threads": 1,
    },
}
#: Longest source and target, in subword tokens (longer training pairs are dropped;
#: English sentences of up to 15 words stay well below).
MAX_SRC, MAX_TGT = 48, 60
#: Beam size and length penalty of the committed evaluation.
BEAM, LENGTH_PENALTY = 4, 0.6
#: Length buckets of the evaluation, in English words.
BUCKETS = ((1, 5), (6, 10), (11, 15))
#: How far a retrained model's greedy BLEU may move from the committed one.
RETRAIN_TOLERANCE_BLEU = 2.0


def build_model(name: str, n_vocab: int, config: dict, dtype: DTypeLike = np.float32):
    if name == "transformer":
        from ..models.transformer import Transformer

        sizes = {k: config[k] for k in ("d_model", "n_heads", "d_ff", "n_layers", "max_len")}
        return Transformer(n_vocab, **sizes, seed=config["seed"], dtype=dtype)
    from ..models.seq2seq import RNNsearch

    sizes = {k: config[k] for k in ("emb", "hidden", "attn")}
    return RNNsearch(n_vocab, n_vocab, **sizes, seed=config["seed"], dtype=dtype)


def encode_pairs(
    tok: Tokenizer, pairs: list[tuple[str, str]]
) -> tuple[list[list[int]], list[list[int]]]:
    """Source and target id lists of the pairs that fit ``MAX_SRC`` and ``MAX_TGT``."""
    src = tok.encode_batch([en for en, _ in pairs])
    tgt = tok.encode_batch([fr for _, fr in pairs])
    keep = [i for i in range(len(pairs)) if len(src[i]) <= MAX_SRC and len(tgt[i]) < MAX_TGT]
    return [src[i] for i in keep], [tgt[i] for i in keep]


def batches(rng, src, tgt, batch):
    """An endless stream of batches of similar source length (little padding), shuffled.

    Each epoch: shuffle, cut into pools of 50 batches, sort each pool by length,
    cut into batches, shuffle the batches.
    """
    n = len(src)
    while True:
        order = rng.permutation(n)
        out = []
        pool = 50 * batch
        for start in range(0, n, pool):
            chunk = order[start : start + pool]
            chunk = chunk[
                np.argsort([len(src[i]) + len(tgt[i]) / 100 for i in chunk], kind="stable")
            ]
            out += [chunk[i : i + batch] for i in range(0, len(chunk), batch)]
        for k in rng.permutation(len(out)):
            idx = out[k]
            yield pad_batch([src[i] for i in idx], [tgt[i] for i in idx])


def learning_rate(step: int, config: dict) -> float:
    """Linear warm-up to ``lr``, then decay as ``1 / sqrt(step)`` (the paper's schedule, rescaled)."""
    if "warmup" not in config:
        return config["lr"]
    w = config["warmup"]
    return config["lr"] * min(step / w, (w / step) ** 0.5)


def train(
    model,
    name,
    config,
    steps,
    src,
    tgt,
    log_every=25,
    log="stdout",
    callback=None,
    history=None,
    log_at=None,
):
    """Train with Adam; returns the log (a list of dicts, one per ``log_every`` steps).

    ``callback(step, loss)`` runs after each step; ``history``, if given, is the
    list the log rows are appended to as they come (the callback can read it).
    ``log_at(step)``, if given, adds a row at the steps it is true for (the
    checkpoints' steps), so a checkpoint's record is of its own step.
    """
    log = sys.stdout if log == "stdout" else log  # the stream of the call, not of the import
    rng = np.random.default_rng(config["data_seed"])
    opt = Adam(model.layers(), lr=config["lr"], betas=tuple(config.get("betas", (0.9, 0.999))))
    stream = batches(rng, src, tgt, config["batch"])
    rows = [] if history is None else history
    losses, tokens, t0 = [], 0, time.perf_counter()
    for step in range(1, steps + 1):
        S, lengths, tin, tout = next(stream)
        if name == "transformer":
            loss = model.loss(S, lengths, tin, tout, smoothing=config["smoothing"])
        else:
            loss = model.loss(S, lengths, tin, tout)
        model.backward()
        clip_grad_norm(model.layers(), config["clip"])
        opt.lr = learning_rate(step, config)
        opt.step()
        losses.append(loss)
        tokens += int(lengths.sum() + (tout != PAD).sum())
        if step % log_every == 0 or step == steps or (log_at is not None and log_at(step)):
            wall = time.perf_counter() - t0
            mean = round(float(np.mean(losses[-log_every:])), 4)
            rows.append({"step": step, "loss": mean, "tokens": tokens, "wall_s": round(wall, 1)})
            if log is not None:
                print(
                    f"step {step:5d}  loss {mean:.4f}  {tokens / wall:7.0f} tokens/s  {wall:7.1f}s",
                    file=log,
                    flush=True,
                )
        if callback is not None:
            callback(step, loss)
    return rows


def evaluate(
    model, tok: Tokenizer, beam: int | None = None, split: str = "test"
) -> tuple[dict, list[str]]:
    """Scores on a split: BLEU and chrF (sacreBLEU, multi-reference), overall and by length."""
    import sacrebleu

    from ..translate import translate_sentences

    sources, refs = load_references(split)
    hyps = translate_sentences(model, tok, sources, beam=beam)

    def score(idx):
        h = [hyps[i] for i in idx]
        n = max(len(refs[i]) for i in idx)
        streams = [[refs[i][k] if k < len(refs[i]) else None for i in idx] for k in range(n)]
        return {
            "bleu": round(sacrebleu.corpus_bleu(h, streams).score, 2),
            "chrf": round(sacrebleu.corpus_chrf(h, streams).score, 2),
            "sentences": len(idx),
        }

    words = [len(s.split()) for s in sources]
    table = {
        "all": score(range(len(sources))),
        "1-10": score([i for i, w in enumerate(words) if w <= 10]),
    }
    for lo, hi in BUCKETS:
        table[f"{lo}-{hi}"] = score([i for i, w in enumerate(words) if lo <= w <= hi])
    return table, hyps


def read_manifest(out) -> dict:
    """``out/manifest.json`` (``{}`` if there is none); a damaged one is a one-line error."""
    from ..data.paths import DataFileError

    path = Path(out) / "manifest.json"
    if not path.exists():
        return {}
    try:
        manifest = json.loads(path.read_text(encoding="utf8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise DataFileError(f"{path} is not valid JSON ({err}); restore it with git") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("models", {}), dict):
        raise DataFileError(f'{path} must be a JSON object whose "models" is an object')
    return manifest


def write_manifest(out, name, entry, together=()):
    """Update this model's entry of ``manifest.json``, atomically (the other model's is kept).

    ``together``: more ``(path, write, mode)`` files replaced in the same step.
    """
    path = out / "manifest.json"
    manifest = read_manifest(out)
    manifest.setdefault(
        "data",
        {
            "train": "data/tatoeba/train.tsv",
            "test": "data/tatoeba/test.tsv",
            "licence": "CC BY 2.0 FR: www.manythings.org/anki and tatoeba.org",
        },
    )
    manifest.setdefault("models", {})[name] = entry
    manifest["retrain_tolerance_bleu"] = RETRAIN_TOLERANCE_BLEU
    text = json.dumps(manifest, indent=1, sort_keys=True) + "\n"
    write_atomic_group([*together, (path, lambda f: f.write(text), "w")])


def save_checkpoint(model, name, path, steps):
    """float16 parameters and the config (JSON), written atomically."""
    arrays = {k: a.astype(np.float16) for k, a in model.state_dict().items()}
    arrays["config"] = np.array(json.dumps({**model.config, "train_steps": steps}, sort_keys=True))
    write_atomic(path, lambda f: np.savez(f, **arrays), mode="wb")


def validation_loss(model, name: str, tok: Tokenizer, n: int = 512) -> float:
    """Mean cross-entropy (no smoothing) on the first ``n`` validation pairs."""
    src, tgt = encode_pairs(tok, load_pairs("valid")[:n])
    losses = []
    for i in range(0, len(src), 64):
        batch = pad_batch(src[i : i + 64], tgt[i : i + 64])
        losses.append(
            model.loss(*batch) if name != "transformer" else model.loss(*batch, smoothing=0.0)
        )
    return round(float(np.mean(losses)), 4)


def evaluate_checkpoint(name, out, tok, entry):
    """Greedy and beam scores of the saved checkpoint, into ``entry``."""
    model = load_checkpoint(name, out / f"{name}.npz")
    t1 = time.perf_counter()
    table, hyps = evaluate(model, tok)
    greedy_s = time.perf_counter() - t1
    write_atomic(out / f"{name}_test_greedy.txt", lambda f: f.write("\n".join(hyps) + "\n"))
    entry["evaluation"] = {"greedy": table, "greedy_test_seconds": round(greedy_s, 1)}
    beam_table, beam_hyps = evaluate(model, tok, beam=BEAM)
    write_atomic(out / f"{name}_test_beam.txt", lambda f: f.write("\n".join(beam_hyps) + "\n"))
    entry["evaluation"]["beam"] = {"beam": BEAM, "length_penalty": LENGTH_PENALTY, **beam_table}
    write_manifest(out, name, entry)
    print(json.dumps(entry["evaluation"], indent=1), flush=True)
    return entry


def float32_copy(out: Path, name: str) -> Path:
    """Where a run keeps its float32 weights (not committed), inside its ``--out``.

    The float16 checkpoint's validation loss is compared with theirs.
    """
    return Path(out) / f"{name}_float32.npz"


def checkpoint_bytes(model, steps) -> bytes:
    """The ``.npz`` :func:`save_checkpoint` writes, as bytes (hashed before it is written)."""
    buffer = io.BytesIO()
    arrays = {k: a.astype(np.float16) for k, a in model.state_dict().items()}
    arrays["config"] = np.array(json.dumps({**model.config, "train_steps": steps}, sort_keys=True))
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def record(model, name, config, out, history, wall, cpu, n_pairs, tok):
    """Write the checkpoint, the log and the training half of the manifest entry.

    The learning rate depends on the step only (not on the total), so the
    checkpoint written after ``k`` steps is exactly what ``--steps k`` trains.
    ``history[-1]`` must be the row of this step. The checkpoint, its float32
    copy, the log and the manifest are replaced in one step
    (:func:`~attention_lib.data.paths.write_atomic_group`): an interrupt leaves
    the previous set, never a checkpoint without its manifest entry.
    """
    steps = history[-1]["step"]
    path = out / f"{name}.npz"
    data = checkpoint_bytes(model, steps)
    float32 = io.BytesIO()
    np.savez(float32, **model.state_dict())
    entry = {
        "file": path.name,
        "sha256": hashlib.sha256(data).hexdigest(),
        "tokenizer_sha256": sha256(tatoeba_dir() / "bpe.json"),
        "parameters": int(model.n_params()),
        "config": {**config, "steps": steps},
        "steps": steps,
        "wall_seconds": round(wall, 1),
        "cpu_seconds": round(cpu, 1),
        "tokens_seen": history[-1]["tokens"],
        "tokens_per_s": round(history[-1]["tokens"] / wall, 1),
        "tokens_per_cpu_s": round(history[-1]["tokens"] / cpu, 1),
        "epochs": round(steps * config["batch"] / n_pairs, 3),
        "final_loss": history[-1]["loss"],
        "numpy": np.__version__,
        "command": f"python -m attention_lib.train.translation --model {name}"
        f" --steps {steps} --threads {config['threads']}",
    }
    write_manifest(
        out,
        name,
        entry,
        together=[
            (path, lambda f: f.write(data), "wb"),
            (float32_copy(out, name), lambda f: f.write(float32.getvalue()), "wb"),
            (out / f"{name}_log.json", lambda f: f.write(json.dumps(history) + "\n"), "w"),
        ],
    )
    return entry


def argv_has(argv, flag):
    """Whether ``flag`` was given on the command line (``flag N`` or ``flag=N``)."""
    argv = sys.argv[1:] if argv is None else argv
    return any(a == flag or a.startswith(flag + "=") for a in argv)


def _evaluation_inputs(out: Path, name: str, tok: Tokenizer):
    """``(entry, float32 model or None)`` for ``--evaluate-only``, from ``out`` alone.

    The float32 copy is a run's own file under ``--out``; a fresh clone has the
    committed float16 checkpoint only, and then the float32 validation loss
    recorded by the run that trained it is kept (``None`` is returned).
    """
    from ..translate import manifest_entry

    entry = manifest_entry(out, name)
    load_checkpoint(name, out / entry["file"])  # checked: one error naming the file
    copy = float32_copy(out, name)
    if not copy.is_file():
        return entry, None
    model = build_model(name, len(tok), CONFIGS[name])
    try:
        with np.load(copy, allow_pickle=False) as f:
            model.load_state_dict({k: f[k] for k in f.files})
    except (OSError, ValueError, KeyError, EOFError) as err:
        raise ValueError(f"{copy}: not the float32 weights of this model ({err})") from None
    return entry, model


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        prog="python -m attention_lib.train.translation", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--model", required=True, choices=sorted(CONFIGS))
    parser.add_argument("--steps", type=int_at_least(1), help="override the configured step count")
    parser.add_argument(
        "--threads", type=int_at_least(1), help="BLAS threads (default: the config's)"
    )
    parser.add_argument("--out", default=str(checkpoint_dir()), help="output directory")
    parser.add_argument(
        "--save-every",
        type=int_at_least(1),
        default=50,
        help="write the checkpoint and manifest entry every N steps",
    )
    parser.add_argument(
        "--evaluate-only",
        action="store_true",
        help="evaluate the checkpoint in --out and update the manifest",
    )
    args = parser.parse_args(argv)
    given = [
        f
        for f, v in (("--steps", args.steps), ("--save-every", argv_has(argv, "--save-every")))
        if v
    ]
    if args.evaluate_only and given:
        parser.error(
            f"--evaluate-only evaluates what --out holds: {' and '.join(given)} do not apply"
        )
    name, config = args.model, dict(CONFIGS[args.model])
    if args.steps is not None:
        config["steps"] = args.steps
    if args.threads is not None:
        config["threads"] = args.threads
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        parser.error(f"--out {out}: cannot make the folder ({err.strerror})")
    if not os.access(out, os.W_OK):
        parser.error(f"--out {out} is not writable")
    if not args.evaluate_only:
        try:  # a damaged manifest is found now, not at the first save after minutes of training
            read_manifest(out)
        except OSError as err:
            parser.error(f"cannot update --out {out}: {err}")
    tok = Tokenizer.load()
    with threadpool_limits(config["threads"]):
        if args.evaluate_only:
            try:
                entry, model = _evaluation_inputs(out, name, tok)
            except (OSError, ValueError) as err:
                parser.exit(1, f"{parser.prog}: error: {err}\n")
        else:
            src, tgt = encode_pairs(tok, load_pairs("train"))
            model = build_model(name, len(tok), config)
            print(
                f"== {name}: {model.n_params()} parameters, {len(src)} training pairs, "
                f"{config['steps']} steps",
                flush=True,
            )
            t0, c0 = time.perf_counter(), time.process_time()
            history = []
            # The checkpoint is the mean of the weights at the last ``average`` multiples of
            # ``average_every`` steps, as the paper averages its last five checkpoints; the
            # training itself goes on from the raw weights.
            kept = collections.deque(maxlen=config.get("average", 1))
            every = config.get("average_every", 1)
            averaged = build_model(name, len(tok), config)

            def save():
                wall, cpu = time.perf_counter() - t0, time.process_time() - c0
                states = list(kept) or [model.state_dict()]
                averaged.load_state_dict(
                    {k: np.mean([s[k] for s in states], axis=0) for k in states[0]}
                )
                return record(averaged, name, config, out, history, wall, cpu, len(src), tok)

            def snapshot(step, loss):
                if step % every == 0:
                    kept.append({k: a.copy() for k, a in model.state_dict().items()})
                if step % args.save_every == 0 and step < config["steps"]:
                    save()

            def checkpoint_step(step):
                return step % args.save_every == 0

            train(
                model,
                name,
                config,
                config["steps"],
                src,
                tgt,
                callback=snapshot,
                history=history,
                log_at=checkpoint_step,
            )
            entry, model = save(), averaged
        if model is not None:  # the float32 weights of this run (or of its copy under --out)
            entry["validation_loss_float32"] = validation_loss(model, name, tok)
        entry["validation_loss_float16"] = validation_loss(
            load_checkpoint(name, out / f"{name}.npz"), name, tok
        )
        return evaluate_checkpoint(name, out, tok, entry)


if __name__ == "__main__":
    main()
