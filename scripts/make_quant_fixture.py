"""The library's quantized models' greedy tokens and logits, for the runtime's quantized models.

For each language model the site serves quantized (``book/_static/models/quantized/``,
written by ``scripts/export_models.py``), the library's own model is quantized
in the served scheme by :func:`attention_lib.quantize.quantize_model` and, for
a few prompts of ``scripts/make_parity_fixture.py``, continued greedily for
``N_NEW`` tokens; its logits at the first and the last step are kept. The
result goes to ``tests/js/fixtures/quant.json``, which ``tests/js/quant.test.mjs``
compares with the runtime's (logits within 1e-4);
``tests/test_quant_export.py`` regenerates it and compares.

    python scripts/make_quant_fixture.py
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "js" / "fixtures" / "quant.json"
QUANTIZED = ROOT / "book" / "_static" / "models" / "quantized"
N_NEW = 16
N_PROMPTS = 3


def build():
    """The fixture as a dict."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from make_parity_fixture import LOADERS, PROMPTS, translator_cases

    from attention_lib.quantize import quantize_model
    from export_models import source_paths

    out = {"n_new": N_NEW, "models": {}}
    for name in ("shakespeare", "stories260k", "translator"):
        manifest = json.loads((QUANTIZED / f"{name}.json").read_text(encoding="utf8"))
        scheme = manifest["quantization"]["scheme"]
        if name == "translator":
            cases = translator_cases(
                source_paths()[name], PROMPTS[name][:N_PROMPTS], scheme, digits=8
            )
            out["models"][name] = {
                "scheme": scheme,
                "weights_sha256": manifest["sha256"],
                "cases": cases,
            }
            continue
        model, encode = LOADERS[name](source_paths()[name])
        quantize_model(model, scheme)
        cases = []
        for prompt in PROMPTS[name][:N_PROMPTS]:
            ids = encode(prompt)
            seq = [int(i) for i in model.generate(np.array(ids), N_NEW, temperature=0)]
            logits = np.asarray(model.forward(np.array([seq[:-1]]))[0], dtype=np.float32)
            cases.append(
                {
                    "prompt": prompt,
                    "ids": [int(i) for i in ids],
                    "new_ids": seq[len(ids) :],
                    "logits_first": [float(f"{v:.8g}") for v in logits[len(ids) - 1]],
                    "logits_last": [float(f"{v:.8g}") for v in logits[-1]],
                }
            )
        out["models"][name] = {
            "scheme": scheme,
            "weights_sha256": manifest["sha256"],
            "cases": cases,
        }
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(FIXTURE))
    args = parser.parse_args(argv)
    Path(args.out).write_text(json.dumps(build(), indent=1) + "\n", encoding="utf8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
