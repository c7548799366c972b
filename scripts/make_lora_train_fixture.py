"""The library's LoRA training steps, as the fixture the node LoRA tests read.

``tests/js/train-lora.test.mjs`` checks the browser runtime's LoRA
(``book/_static/runtime/train-lora.mjs``, driven by ``train.mjs``'s
``trainStep``) against this file. Each case is a small TinyGPT adapted by
``attention_lib.nn.lora.apply`` and trained 3 steps by the library's
``train_step`` with ``Adam`` on the adapters alone (forward, cross-entropy,
backward, ``dA = scaling dW B^T`` and ``dB = scaling A^T dW``, clipping, Adam):

- ``qv``: learned positions, the query and value projections, rank 4, alpha 8;
- ``all``: rotary positions, every projection (q, k, v, o, fc1, fc2), rank 2, alpha 4.

For each: the configuration, the base weights, every adapter's initial ``A``
(``B`` starts at zero), the 3 batches and learning rates, the 3 losses, and
every ``A`` and ``B`` after the last step.

    python scripts/make_lora_train_fixture.py   # rewrites tests/js/fixtures/lora-train.json

Deterministic (fixed seeds); float32 numbers written with 9 significant digits.
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from make_train_fixture import floats, params_of  # noqa: E402

from attention_lib.nn import Adam, lora  # noqa: E402
from attention_lib.train.shakespeare import (  # noqa: E402
    build_model,
    learning_rate,
    random_windows,
    train_step,
)

FIXTURE = ROOT / "tests" / "js" / "fixtures" / "lora-train.json"
N_CHARS = 3000  # of Tiny Shakespeare
STEPS = 3


def case(positions, targets, rank, alpha, seed):
    """One adapted model trained STEPS steps by the library: the fixture's entry."""
    text = (ROOT / "data" / "shakespeare" / "input.txt").read_text(encoding="utf8")[:N_CHARS]
    chars = sorted(set(text))
    ids = np.array([chars.index(c) for c in text], dtype=np.int64)
    cfg = {
        "d_model": 16,
        "n_heads": 2,
        "n_layers": 2,
        "d_ff": 32,
        "max_len": 12,
        "positions": positions,
        "dropout": 0.0,
        "batch": 4,
        "steps": STEPS,
        "lr": 2e-2,
        "min_lr": 5e-3,
        "warmup": 0,
        "betas": [0.9, 0.99],
        "clip": 1.0,
        "seed": seed,
    }
    model = build_model(cfg, len(chars))
    base = {k: floats(v) for k, v in params_of(model).items()}
    adapters = lora.apply(model, targets, rank=rank, alpha=alpha, rng=np.random.default_rng(seed))
    initial_A = {f"{a.name}.lora_A": floats(a.params["lora_A"]) for a in adapters}
    opt = Adam(adapters, lr=cfg["lr"], betas=tuple(cfg["betas"]))
    rng = np.random.default_rng(seed + 1)
    batches, lrs, losses = [], [], []
    for step in range(1, STEPS + 1):
        x, y = random_windows(rng, ids, cfg["batch"], cfg["max_len"])
        batches.append([x.reshape(-1).tolist(), y.reshape(-1).tolist()])
        lrs.append(float(learning_rate(step, cfg)))
        losses.append(float(train_step(model, adapters, opt, x, y, step, cfg)))
    final = {f"{a.name}.{k}": floats(v) for a in adapters for k, v in a.params.items()}
    return {
        "config": {
            **{k: cfg[k] for k in ("d_model", "n_heads", "n_layers", "d_ff", "max_len")},
            "positions": positions,
            "n_vocab": len(chars),
        },
        "lora": {"targets": list(targets), "rank": rank, "alpha": alpha},
        "train": {k: cfg[k] for k in ("batch", "betas", "clip")},
        "params": base,
        "initial_A": initial_A,
        "batches": batches,
        "lrs": lrs,
        "losses": losses,
        "final": final,
    }


def build():
    """The whole fixture, as a dict (tests/test_lora_train_fixture.py compares it with the file)."""
    return {
        "made_by": "python scripts/make_lora_train_fixture.py",
        "cases": {
            "qv": case("learned", ("q", "v"), 4, 8.0, 11),
            "all": case("rotary", ("q", "k", "v", "o", "fc1", "fc2"), 2, 4.0, 12),
        },
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.parse_args(argv)
    fixture = build()
    FIXTURE.write_text(json.dumps(fixture, separators=(",", ":")) + "\n")
    print(f"wrote {FIXTURE.relative_to(ROOT)} ({FIXTURE.stat().st_size // 1024} KiB)")


if __name__ == "__main__":
    main()
