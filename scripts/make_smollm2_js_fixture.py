"""The library's SmolLM2 on five prompts, as the browser runtime's node parity test reads it.

Writes ``tests/js/fixtures/smollm2.json`` for ``tests/js/smollm2.test.mjs``
(``book/_static/runtime/smollm2.mjs``): for each prompt of tests/test_smollm2.py, its ids
(:func:`attention_lib.models.smollm2.load_smollm2`'s tokenizer), the 64 ids the library's
greedy decoding writes after it (``generate(..., temperature=0)``), and three logit rows
(the logits that chose new tokens 0, 32 and 63, from ``model.forward`` on the prompt and the
tokens before): each row's largest logit and its id, the ten best ids, and the logits at
every 97th id and at those ten (so the fixture stays small: 90 kB). Also the GGUF's path in
the installed wheel and its SHA-256, which the test checks before reading it.

    python scripts/make_smollm2_js_fixture.py   # needs requirements.txt + requirements-model.txt
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from attention_lib.models import smollm2  # noqa: E402
from test_smollm2 import PROMPTS  # noqa: E402

OUT = ROOT / "tests" / "js" / "fixtures" / "smollm2.json"
NEW = 64  # greedy tokens per prompt
ROWS = (0, 32, 63)  # the new tokens whose logits are recorded
STRIDE = 97  # every 97th id's logit is recorded


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.parse_args(argv)
    model, tok = smollm2.load_smollm2()
    cases = []
    for prompt in PROMPTS:
        ids = tok.encode(prompt)
        out = model.generate(ids, NEW, temperature=0)
        new = out[len(ids) :].tolist()
        rows = []
        for k in ROWS:
            logits = model.forward(np.array(ids.tolist() + new[:k])[None])[0, -1]
            best = np.argsort(-logits, kind="stable")[:10].tolist()
            at = sorted(set(range(0, len(logits), STRIDE)) | set(best))
            rows.append(
                {
                    "new_token": k,
                    "argmax": int(np.argmax(logits)),
                    "max": float(logits.max()),
                    "best": best,
                    "ids": at,
                    "logits": [float(f"{v:.6g}") for v in logits[at]],
                }
            )
        cases.append({"prompt": prompt, "ids": ids.tolist(), "new": new, "rows": rows})
        print(f"{prompt[:40]!r}: {tok.decode(new)[:60]!r}")
    record = {
        "what": "the library's SmolLM2 (attention_lib.models.smollm2): greedy ids and logit rows "
        "for tests/js/smollm2.test.mjs",
        "script": "scripts/make_smollm2_js_fixture.py",
        "gguf": smollm2.GGUF_NAME,
        "gguf_sha256": smollm2.GGUF_SHA256,
        "gguf_path": str(smollm2.gguf_path()),
        "new_tokens": NEW,
        "cases": cases,
    }
    OUT.write_text(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n", "utf8")
    print(f"wrote {OUT.relative_to(ROOT)}: {OUT.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
