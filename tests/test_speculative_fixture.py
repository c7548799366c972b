"""The runtime's speculative-decoding fixture (tests/js/fixtures/speculative.json) is current.

``scripts/make_speculative_fixture.py`` writes the library's speculative output
on the served (quantized) Shakespeare model; ``tests/js/speculative.test.mjs``
compares the runtime's with it. Here: the fixture names the committed weights
and draft, and a part of it made again (one prompt, k = 3, both drafts) is what
is committed.
"""

import json
from pathlib import Path

from _fixtures import load_script

ROOT = Path(__file__).resolve().parents[1]


def test_speculative_fixture_is_current():
    maker = load_script("make_speculative_fixture")
    committed = json.loads(maker.FIXTURE.read_text(encoding="utf8"))
    served = json.loads(maker.SERVED.read_text(encoding="utf8"))
    assert committed["weights_sha256"] == served["sha256"], "run make_speculative_fixture.py"
    assert [c["prompt"] for c in committed["cases"]] == maker.PROMPTS
    part = maker.build(prompts=maker.PROMPTS[:1], ks=(3,))
    assert part["ngram_draft_sha256"] == committed["ngram_draft_sha256"]
    case = committed["cases"][0]
    assert part["cases"][0]["greedy_ids"] == case["greedy_ids"]
    for run in part["cases"][0]["runs"]:
        same = [r for r in case["runs"] if (r["draft"], r["k"]) == (run["draft"], run["k"])]
        assert same == [run], f"{run['draft']}, k = {run['k']}: run make_speculative_fixture.py"
    # every committed run is greedy decoding's output (the library's promise, kept by build())
    assert all(r["new_ids"] == c["greedy_ids"] for c in committed["cases"] for r in c["runs"])
