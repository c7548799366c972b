"""The library's speculative decoding on the served Shakespeare model, for the runtime's.

The library's Shakespeare model is quantized in the scheme the site serves
(``book/_static/models/quantized/shakespeare.json``, the runtime's weights bit
for bit) and, for a few prompts of ``scripts/make_parity_fixture.py``,
continued greedily by :func:`attention_lib.models.speculative.speculative_generate`
with the prompt-lookup draft and the n-gram table
(``data/checkpoints/serving/ngram_draft.npz``) for k = 1 to 8. The new ids,
the counts of each run (target passes, drafted, accepted) and plain greedy
decoding's new ids go to ``tests/js/fixtures/speculative.json``, which
``tests/js/speculative.test.mjs`` compares with the runtime's
``speculative.mjs`` id for id and count for count.

    python scripts/make_speculative_fixture.py
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "js" / "fixtures" / "speculative.json"
SERVED = ROOT / "book" / "_static" / "models" / "quantized" / "shakespeare.json"
N_NEW = 64
PROMPTS = ["ROMEO:", "First Citizen:\nBefore we proceed", "To be, or not to be"]
KS = range(1, 9)


def build(prompts=PROMPTS, ks=KS):
    """The fixture as a dict (``prompts`` and ``ks``: a part of it, for the tests)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from export_models import source_paths
    from make_parity_fixture import LOADERS

    from attention_lib.models.speculative import load_draft, speculative_generate
    from attention_lib.quantize import quantize_model

    manifest = json.loads(SERVED.read_text(encoding="utf8"))
    scheme = manifest["quantization"]["scheme"]
    model, encode = LOADERS["shakespeare"](source_paths()["shakespeare"])
    quantize_model(model, scheme)
    n_vocab = model.tok.params["E"].shape[0]
    drafts = {"lookup": load_draft("lookup", n_vocab), "ngram": load_draft("ngram")}
    out = {
        "n_new": N_NEW,
        "scheme": scheme,
        "weights_sha256": manifest["sha256"],
        "ngram_draft_sha256": json.loads(
            (ROOT / "data" / "checkpoints" / "serving" / "ngram_draft.json").read_text()
        )["sha256"],
        "cases": [],
    }
    for prompt in prompts:
        ids = np.array(encode(prompt))
        plain = model.generate(ids, N_NEW, temperature=0)[len(ids) :]
        runs = []
        for name, draft in drafts.items():
            for k in ks:
                seq, stats = speculative_generate(model, draft, ids, N_NEW, k=k)
                new = seq[len(ids) :]
                if not np.array_equal(new, plain):  # the library's own promise
                    raise AssertionError(f"{name}, k = {k}: not greedy decoding's output")
                runs.append(
                    {
                        "draft": name,
                        "k": k,
                        "new_ids": [int(i) for i in new],
                        "target_passes": stats["target_passes"],
                        "drafted": stats["drafted"],
                        "accepted": stats["accepted"],
                    }
                )
        out["cases"].append(
            {
                "prompt": prompt,
                "ids": [int(i) for i in ids],
                "greedy_ids": [int(i) for i in plain],
                "runs": runs,
            }
        )
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(FIXTURE))
    args = parser.parse_args(argv)
    Path(args.out).write_text(json.dumps(build(), separators=(",", ":")) + "\n", encoding="utf8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
