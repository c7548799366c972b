"""Build chapter 21's n-gram draft (:class:`~attention_lib.models.ngram_draft.NgramDraft`).

Run as ``python -m attention_lib.train.ngram_draft [--order 6]``: it labels
Tiny Shakespeare's training split with chapter 11's model, builds the table,
and writes ``ngram_draft.npz`` and its manifest ``ngram_draft.json`` (sha256,
configuration, wall time, machine load, and the draft's top-1 agreement with
the target on the validation split) into ``data/checkpoints/serving``.
"""

import argparse
import json
import os
import sys
import time

import numpy as np
from threadpoolctl import threadpool_limits

from .._cli import int_at_least, out_dir
from ..data.paths import sha256, write_atomic
from ..models.ngram_draft import NgramDraft, build_tables, distill_labels, max_order
from ..models.pretrained import load_pretrained
from ..models.kv_variants import serving_dir
from .evaluate_long_context import cpu_name
from .shakespeare import load_text


def agreement(draft: NgramDraft, target, ids, window=128, rows=32) -> float:
    """How often the draft's next token is the target's argmax, over validation windows."""
    x = ids[: window * rows].reshape(rows, window)
    am = target.forward(x).argmax(-1)
    hits = [
        draft._next([int(t) for t in x[b, : t + 1]]) == am[b, t]
        for b in range(rows)
        for t in range(window)
    ]
    return float(np.mean(hits))


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(serving_dir()), help="output directory")
    parser.add_argument(
        "--order",
        type=int_at_least(1),
        default=6,
        help="longest context, in characters (default 6; at most what 64-bit keys over "
        "the text's characters hold: max_order in attention_lib.models.ngram_draft)",
    )
    args = parser.parse_args(argv)
    chars, train_ids, val_ids = load_text()
    if args.order > max_order(len(chars)):  # before minutes of labelling
        parser.error(
            f"--order {args.order}: the longest context whose key fits 64 bits over "
            f"{len(chars)} characters is {max_order(len(chars))}"
        )
    out = out_dir(parser, args.out)
    target, _ = load_pretrained("shakespeare")
    target.train(False)
    load0, t0 = os.getloadavg()[0], time.perf_counter()
    c0 = time.process_time()
    with threadpool_limits(limits=1, user_api="blas"):
        labels = distill_labels(target, train_ids, log=sys.stdout)
        draft = NgramDraft(build_tables(train_ids, labels, args.order, len(chars)), len(chars))
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        load1 = os.getloadavg()[0]
        path = out / "ngram_draft.npz"
        cfg = {"order": args.order, "labels": "target argmax", "window": 128, "keep": 96}
        draft.save(path, cfg)
        loaded = NgramDraft.load(path)
        agree = agreement(loaded, target, val_ids)
    entry = {
        "file": path.name,
        "sha256": sha256(path),
        "command": "python -m attention_lib.train.ngram_draft",
        "config": cfg,
        "target": "shakespeare (data/checkpoints/shakespeare/shakespeare.npz)",
        "trained_on": "first 90% of Tiny Shakespeare (labels: the target's argmax)",
        "entries": int(sum(len(k) for k, _ in loaded.tables)),
        "wall_seconds": round(wall, 1),
        "cpu_seconds": round(cpu, 1),
        "load_average_1min": [round(load0, 2), round(load1, 2)],
        "threads": 1,
        "cpu": cpu_name(),
        "evaluation": {
            "top1_agreement_with_target": round(agree, 4),
            "measured_on": "last 10% of Tiny Shakespeare, 32 windows of 128, every position",
        },
    }
    write_atomic(out / "ngram_draft.json", lambda f: f.write(json.dumps(entry, indent=1) + "\n"))
    print(json.dumps(entry["evaluation"]), flush=True)
    return entry


if __name__ == "__main__":
    main()
