"""Write data/smollm2/parity.json: the library's SmolLM2 logits against transformers'.

    python scripts/make_smollm2_parity.py

Loads SmolLM2-135M-Instruct twice from the pinned wheel's GGUF file, with
attention_lib (attention_lib.models.smollm2) and with transformers'
AutoModelForCausalLM (float32), runs the five prompts of tests/test_smollm2.py
and records the largest absolute difference of their logits. The SmolLM2 chapter
quotes it; tests/test_smollm2.py measures it again and checks the record.
"""

import argparse
import json
import platform
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.parse_args(argv)
    import torch
    import transformers

    from attention_lib.models import smollm2
    from test_smollm2 import PROMPTS, logits_of_both

    transformers.logging.set_verbosity_error()
    path = smollm2.gguf_path()
    ref = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=torch.float32
    ).eval()
    model, tok = smollm2.load_smollm2()
    worst, scale = 0.0, 0.0
    for prompt in PROMPTS:
        _, got, want = logits_of_both(model, tok, ref, prompt)
        worst = max(worst, float(np.abs(got - want).max()))
        scale = max(scale, float(np.abs(want).max()))
    record = {
        "what": "largest |logit difference| between attention_lib's SmolLM2 and transformers' "
        "AutoModelForCausalLM loaded from the same GGUF in float32",
        "max_logit_diff": float(f"{worst:.2g}"),
        "max_abs_logit": round(scale, 1),
        "prompts": len(PROMPTS),
        "gguf_sha256": smollm2.GGUF_SHA256,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "machine": platform.machine(),
        "script": "scripts/make_smollm2_parity.py",
    }
    out = ROOT / "data" / "smollm2" / "parity.json"
    out.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
