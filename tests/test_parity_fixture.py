"""The node parity fixture (tests/js/fixtures/parity.json) is what the library computes now.

``tests/js/parity.test.mjs`` compares the browser runtime with this fixture;
here the fixture is made again from the library and the committed
checkpoints and compared with the committed one, so that a retrained
checkpoint or a change in the library cannot leave it stale.
"""

import importlib.util
import json
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def test_the_committed_fixture_is_what_the_library_computes():
    spec = importlib.util.spec_from_file_location(
        "make_parity_fixture", ROOT / "scripts" / "make_parity_fixture.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    committed = json.loads(module.FIXTURE.read_text(encoding="utf8"))
    fresh = json.loads(json.dumps(module.build(module.default_sources())))
    assert sorted(fresh["models"]) == sorted(committed["models"]), (
        "the fixture covers other models than are exported: run scripts/make_parity_fixture.py"
    )
    for name, model in fresh["models"].items():
        old = committed["models"][name]
        assert model["weights_sha256"] == old["weights_sha256"], (
            f"{name}: the exported weights changed: run scripts/make_parity_fixture.py"
        )
        assert [c["prompt"] for c in model["cases"]] == [c["prompt"] for c in old["cases"]]
        for new, ref in zip(model["cases"], old["cases"]):
            assert new["ids"] == ref["ids"], f"{name}: encode({new['prompt']!r}) changed"
            assert new["new_ids"] == ref["new_ids"], (
                f"{name}: greedy tokens after {new['prompt']!r}"
            )
            for key in ("logits_first", "logits_last"):
                np.testing.assert_allclose(new[key], ref[key], atol=1e-4, err_msg=f"{name} {key}")
