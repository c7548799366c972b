"""The library's generation through a rolling KV cache, as the fixture ``tests/js/window.test.mjs`` reads.

The model is chapter 19's rotary character model (``data/checkpoints/longctx/
rotary_128.npz``, trained on 128-character windows), exported for the browser
as ``book/_static/models/shakespeare_window`` (``scripts/export_models.py``).
For each case below the library's own :class:`~attention_lib.TinyGPT` feeds
the prompt ``window`` tokens at a time (all at once without a window) into
``model.rolling_cache(window, sinks)`` (a plain cache for full attention),
then continues greedily one token a step, far past the window and the
training context. The fixture holds every greedy id, the cache's rows at the
end, and the logits at every ``EVERY``-th step and around the places where
the cache first fills and where the training context ends; the node test
checks the runtime's ``window.mjs`` against them within 1e-4.

    python scripts/make_window_fixture.py      # writes tests/js/fixtures/window.json
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attention_lib.train.long_context import load_checkpoint  # noqa: E402

FIXTURE = ROOT / "tests" / "js" / "fixtures" / "window.json"
CHECKPOINT = ROOT / "data" / "checkpoints" / "longctx" / "rotary_128.npz"
EXPORTED = ROOT / "book" / "_static" / "models" / "shakespeare_window.json"
EVERY = 25
#: (prompt, window (None: full attention), sinks, new tokens)
CASES = [
    ("ROMEO:\n", 64, 4, 1000),
    ("First Citizen:\nBefore we proceed any further, hear me speak.\n" * 3, 64, 0, 600),
    ("JULIET:\n", 16, 2, 400),
    ("KING RICHARD III:\nNow is the winter of our discontent\n", 32, 1, 400),
    ("ROMEO:\n", None, 0, 300),
]


def generate(model, ids, window, sinks, n_new):
    """Greedy ids, logits at every step (float64) and the cache's rows at the end."""
    cache = model.new_cache() if window is None else model.rolling_cache(window, sinks)
    chunk = len(ids) if window is None else window
    for i in range(0, len(ids), chunk):
        logits = model.forward(np.asarray(ids[i : i + chunk])[None], cache)[0, -1]
    new, steps = [], []
    for n in range(n_new):
        steps.append(logits.astype(np.float64))
        new.append(int(np.argmax(logits)))
        if n + 1 < n_new:
            logits = model.forward(np.array([[new[-1]]]), cache)[0, -1]
    return new, steps, len(cache[0])


def recorded(n_prompt, window, sinks, n_new):
    """The steps whose logits go into the fixture."""
    marks = {0, n_new - 1} | set(range(0, n_new, EVERY))
    for edge in (128 - n_prompt, (window or 0) + sinks - n_prompt):
        marks |= {edge - 1, edge, edge + 1}
    return sorted(m for m in marks if 0 <= m < n_new)


def build():
    manifest = json.loads(EXPORTED.read_text(encoding="utf8"))
    with np.load(CHECKPOINT, allow_pickle=False) as f:
        chars = json.loads(str(f["config"]))["chars"]
    stoi = {c: i for i, c in enumerate(chars)}
    cases = []
    for prompt, window, sinks, n_new in CASES:
        ids = [stoi[c] for c in prompt]
        longest = len(ids) + n_new if window is None else sinks + 2 * window
        model, _ = load_checkpoint(CHECKPOINT, max_len=max(longest, 128))
        new, steps, rows = generate(model, ids, window, sinks, n_new)
        keep = recorded(len(ids), window, sinks, n_new)
        cases.append(
            {
                "prompt": prompt,
                "ids": ids,
                "window": window,
                "sinks": sinks,
                "new_ids": new,
                "rows": rows,
                "logits": {str(s): [round(float(v), 6) for v in steps[s]] for s in keep},
            }
        )
    return {
        "model": "shakespeare_window",
        "checkpoint": CHECKPOINT.relative_to(ROOT).as_posix(),
        "weights_sha256": manifest["sha256"],
        "cases": cases,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.parse_args(argv)
    fixture = build()
    FIXTURE.write_text(json.dumps(fixture, separators=(",", ":")) + "\n", encoding="utf8")
    n = sum(len(c["new_ids"]) for c in fixture["cases"])
    print(f"{FIXTURE.relative_to(ROOT)}: {len(fixture['cases'])} cases, {n} greedy tokens")


if __name__ == "__main__":
    main()
