"""The node LoRA fixture (tests/js/fixtures/lora-train.json) is what the library computes now.

``tests/js/train-lora.test.mjs`` checks the browser runtime's LoRA steps
(``book/_static/runtime/train-lora.mjs``) against this fixture; here it is made
again from the library (``attention_lib.nn.lora`` and ``train_step``) and
compared with the committed one, so that a change in the library's LoRA,
layers or optimiser cannot leave it stale.
"""

import numpy as np
from _fixtures import rebuilt


def test_the_committed_lora_fixture_is_what_the_library_computes():
    _, fresh, committed = rebuilt("make_lora_train_fixture")
    assert sorted(fresh["cases"]) == sorted(committed["cases"])
    for kind, new in fresh["cases"].items():
        old = committed["cases"][kind]
        for key in ("config", "lora", "train", "batches", "lrs"):
            assert new[key] == old[key], f"{kind}: its {key} changed"
        np.testing.assert_allclose(new["losses"], old["losses"], atol=1e-5, err_msg=kind)
        assert sorted(new["final"]) == sorted(old["final"]), f"{kind}: other adapters"
        for name, values in new["final"].items():
            ref = np.asarray(old["final"][name])
            scale = max(np.abs(ref).max(), 1e-3)
            assert np.abs(np.asarray(values) - ref).max() <= 1e-5 * scale, (
                f"{kind}: {name} changed: run scripts/make_lora_train_fixture.py"
            )


def test_the_widgets_held_out_shakespeare_is_the_validation_split():
    from _fixtures import load_script

    module = load_script("export_shakespeare_heldout")
    assert module.OUT.read_text(encoding="utf8") == module.heldout_text(), (
        "book/_static/models/shakespeare_heldout.txt is stale: run "
        "scripts/export_shakespeare_heldout.py"
    )
