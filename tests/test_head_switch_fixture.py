"""The head-switch fixture (tests/js/fixtures/head_switches.json) is what the library computes now.

``tests/js/head-switches.test.mjs`` checks the runtime's head switches against this
fixture (the library's zero ablation, ``attention_lib.interp.ablate_heads``); here it is
made again from the library and the committed checkpoints and compared with the committed
one, so that a retrained checkpoint or a change in the library cannot leave it stale.
"""

import numpy as np
from _fixtures import rebuilt


def test_the_committed_head_switch_fixture_is_what_the_library_computes():
    # SmolLM2's entry is not made again here (half a minute): its GGUF is pinned by SHA-256
    # in the entry, and the library's SmolLM2 by tests/test_smollm2.py
    _, fresh, committed = rebuilt("make_head_switch_fixture", lambda m: m.build(smollm2=False))
    assert sorted(fresh["models"]) == sorted(committed["models"])
    for name, model in fresh["models"].items():
        old = committed["models"][name]
        assert model["weights_sha256"] == old["weights_sha256"], (
            f"{name}: the exported weights changed: run scripts/make_head_switch_fixture.py"
        )
        for new, ref in zip(model["cases"], old["cases"], strict=True):
            what = f"{name}, heads {new['heads']} off after {new['prompt']!r}"
            assert (new["prompt"], new["heads"], new["ids"]) == (
                ref["prompt"],
                ref["heads"],
                ref["ids"],
            )
            assert new["new_ids"] == ref["new_ids"], f"{what}: greedy ids changed"
            for key in ("logits_first", "logits_last"):
                np.testing.assert_allclose(new[key], ref[key], atol=1e-4, err_msg=f"{what} {key}")
    old = committed["induction"]
    new = fresh["induction"]
    assert (new["config"], new["tokens"]) == (old["config"], old["tokens"])
    for key, values in new["params"].items():
        np.testing.assert_allclose(values, old["params"][key], atol=1e-6, err_msg=key)
    for a, b in zip(new["cases"], old["cases"], strict=True):
        assert a["heads"] == b["heads"]
        np.testing.assert_allclose(a["logits"], b["logits"], atol=1e-4, err_msg=f"{a['heads']}")
