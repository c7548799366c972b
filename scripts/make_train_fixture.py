"""The library's gradients and training losses, as the fixture the node training tests read.

``tests/js/train.test.mjs`` checks the browser runtime's training code
(``book/_static/runtime/train.mjs``) against this file:

- ``gradients``: for two small TinyGPTs (learned positions; rotary positions, as
  chapter 9's induction model), their float32 weights, a batch, the mean
  cross-entropy over the scored positions (a target of -1 is not scored, as in
  chapter 9's copy task) and every parameter's gradient from the library's
  ``backward``;
- ``training``: a 50-step run of the library's ``train_step`` (forward,
  cross-entropy, backward, clipping, Adam at the warm-up + cosine learning rate)
  on the first characters of Tiny Shakespeare: the configuration, the initial
  weights, every batch in order and the 50 losses.

    python scripts/make_train_fixture.py   # rewrites tests/js/fixtures/train.json

Deterministic (fixed seeds); the numbers are float32, written with 9
significant digits so that each reads back as the same float32.
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attention_lib.train.shakespeare import (  # noqa: E402
    build_model,
    random_windows,
    train_step,
)
from attention_lib.nn import Adam, softmax_cross_entropy  # noqa: E402

FIXTURE = ROOT / "tests" / "js" / "fixtures" / "train.json"
N_CHARS = 3000  # of Tiny Shakespeare, for the training run


def floats(a):
    return [float(f"{v:.9g}") for v in np.asarray(a, dtype=np.float32).reshape(-1)]


def params_of(model):
    """{name: flat float32 list} in the names train.mjs uses (the library's layers)."""
    out = {"tok.E": model.tok.params["E"]}
    if hasattr(model, "pos"):
        out["pos.E"] = model.pos.params["E"]
    for i, b in enumerate(model.blocks):
        p = f"blocks.{i}"
        out |= {f"{p}.ln1.{k}": v for k, v in b.ln1.params.items()}
        out |= {f"{p}.attn.{k}": v for k, v in b.attn.params.items()}
        out |= {f"{p}.ln2.{k}": v for k, v in b.ln2.params.items()}
        out |= {f"{p}.ffn.fc1.{k}": v for k, v in b.ffn.fc1.params.items()}
        out |= {f"{p}.ffn.fc2.{k}": v for k, v in b.ffn.fc2.params.items()}
    out |= {f"ln_f.{k}": v for k, v in model.ln_f.params.items()}
    out |= {f"head.{k}": v for k, v in model.head.params.items()}
    return out


def grads_of(model):
    names = params_of(model)
    layers = {"tok": model.tok, "pos": getattr(model, "pos", None), "ln_f": model.ln_f}
    layers["head"] = model.head
    out = {}
    for name in names:
        parts = name.split(".")
        if parts[0] == "blocks":
            block = model.blocks[int(parts[1])]
            layer = (
                block.ffn.fc1
                if parts[2:4] == ["ffn", "fc1"]
                else (block.ffn.fc2 if parts[2:4] == ["ffn", "fc2"] else getattr(block, parts[2]))
            )
        else:
            layer = layers[parts[0]]
        out[name] = layer.grads[parts[-1]]
    return out


def gradient_case(positions, seed):
    cfg = {
        "d_model": 8,
        "n_heads": 2,
        "n_layers": 2,
        "d_ff": 16,
        "max_len": 6,
        "positions": positions,
        "dropout": 0.0,
        "seed": seed,
    }
    V, B, T = 7, 3, 6
    model = build_model(cfg, V, np.random.default_rng(seed))
    rng = np.random.default_rng(seed + 1)
    x = rng.integers(0, V, size=(B, T))
    y = rng.integers(0, V, size=(B, T))
    y[rng.random((B, T)) < 0.3] = -1  # not scored
    y[0, 0] = 3
    logits = model.forward(x)
    scored = y >= 0
    loss, d = softmax_cross_entropy(logits[scored], y[scored])
    d_logits = np.zeros(logits.shape, dtype=np.float32)
    d_logits[scored] = d
    model.backward(d_logits)
    return {
        "config": {
            **{
                k: cfg[k]
                for k in ("d_model", "n_heads", "n_layers", "d_ff", "max_len", "positions")
            },
            "n_vocab": V,
        },
        "B": B,
        "T": T,
        "tokens": x.reshape(-1).tolist(),
        "targets": y.reshape(-1).tolist(),
        "loss": loss,
        "params": {k: floats(v) for k, v in params_of(model).items()},
        "grads": {k: floats(v) for k, v in grads_of(model).items()},
    }


def training_case():
    text = (ROOT / "data" / "shakespeare" / "input.txt").read_text(encoding="utf8")[:N_CHARS]
    chars = sorted(set(text))
    lookup = {c: i for i, c in enumerate(chars)}
    ids = np.array([lookup[c] for c in text], dtype=np.int64)
    cfg = {
        "d_model": 16,
        "n_heads": 2,
        "n_layers": 2,
        "d_ff": 32,
        "max_len": 16,
        "positions": "learned",
        "dropout": 0.0,
        "batch": 4,
        "steps": 50,
        "lr": 1e-2,
        "min_lr": 1e-3,
        "warmup": 5,
        "betas": [0.9, 0.99],
        "clip": 1.0,
        "seed": 3,
    }
    model = build_model(cfg, len(chars))
    initial = {k: floats(v) for k, v in params_of(model).items()}
    layers = model.layers()
    opt = Adam(layers, lr=cfg["lr"], betas=tuple(cfg["betas"]))
    rng = np.random.default_rng(cfg["seed"] + 1)
    batches, losses = [], []
    for step in range(1, cfg["steps"] + 1):
        x, y = random_windows(rng, ids, cfg["batch"], cfg["max_len"])
        batches.append([x.reshape(-1).tolist(), y.reshape(-1).tolist()])
        losses.append(train_step(model, layers, opt, x, y, step, cfg))
    return {
        "config": {**cfg, "n_vocab": len(chars)},
        "params": initial,
        "batches": batches,
        "losses": losses,
    }


def build():
    """The whole fixture, as a dict (tests/test_train_fixture.py compares it with the file)."""
    return {
        "made_by": "python scripts/make_train_fixture.py",
        "gradients": {"learned": gradient_case("learned", 0), "rotary": gradient_case("rotary", 1)},
        "training": training_case(),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.parse_args(argv)
    fixture = build()
    FIXTURE.write_text(json.dumps(fixture, separators=(",", ":")) + "\n")
    print(f"wrote {FIXTURE.relative_to(ROOT)} ({FIXTURE.stat().st_size // 1024} KiB)")


if __name__ == "__main__":
    main()
