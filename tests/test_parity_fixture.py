"""The node parity fixture (tests/js/fixtures/parity.json) is what the library computes now.

``tests/js/parity.test.mjs`` compares the browser runtime with this fixture;
here the fixture is made again from the library and the committed
checkpoints and compared with the committed one, so that a retrained
checkpoint or a change in the library cannot leave it stale.
"""

import json

import numpy as np
from _fixtures import load_script, rebuilt


def test_the_committed_fixture_is_what_the_library_computes():
    _, fresh, committed = rebuilt("make_parity_fixture", lambda m: m.build(m.default_sources()))
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


def test_the_cropped_generation_fixture_is_what_the_library_computes():
    """Greedy past the context (tests/js/fixtures/crop.json): the first tokens past max_len."""
    module = load_script("make_parity_fixture")
    committed = json.loads(module.CROP_FIXTURE.read_text(encoding="utf8"))
    sources = module.default_sources()
    for name, ref in committed["models"].items():
        model, encode = module.LOADERS[name](sources[name])
        for case in ref["cases"]:
            ids = encode(case["prompt"])
            assert ids == case["ids"], f"{name}: encode({case['prompt']!r}) changed"
            # far enough to cross the context and re-encode at least once (greedy: a prefix)
            n = min(len(case["new_ids"]), max(model.max_len + 80 - len(ids), 80))
            assert module.crop_greedy(model, ids, n) == case["new_ids"][:n], (
                f"{name}: cropped greedy ids after {case['prompt'][:20]!r} changed: "
                "run scripts/make_parity_fixture.py --crop-only"
            )


def test_the_beam_fixture_is_what_the_library_computes_on_a_sample():
    """Beam search on every 29th test sentence (tests/js/fixtures/beam.json holds them all)."""
    module = load_script("make_parity_fixture")
    committed = json.loads(module.BEAM_FIXTURE.read_text(encoding="utf8"))
    fresh = module.build_beam(module.default_sources()["translator"], every=29)
    assert fresh["weights_sha256"] == committed["weights_sha256"]
    old = committed["cases"][::29]
    assert [c["source"] for c in fresh["cases"]] == [c["source"] for c in old]
    changed = [c["source"] for c, o in zip(fresh["cases"], old) if c["beam_ids"] != o["beam_ids"]]
    assert not changed, (
        f"the library's beam search changed on {changed}: "
        "run scripts/make_parity_fixture.py --beam-only"
    )
