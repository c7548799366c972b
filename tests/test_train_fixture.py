"""The node training fixture (tests/js/fixtures/train.json) is what the library computes now.

``tests/js/train.test.mjs`` checks the browser runtime's backward passes and
trainer against this fixture; here it is made again from the library and
compared with the committed one, so that a change in the library's layers,
optimiser or trainer cannot leave it stale.
"""

import numpy as np
from _fixtures import rebuilt


def test_the_committed_training_fixture_is_what_the_library_computes():
    _, fresh, committed = rebuilt("make_train_fixture")
    for kind, case in fresh["gradients"].items():
        old = committed["gradients"][kind]
        assert case["config"] == old["config"] and case["tokens"] == old["tokens"]
        assert case["targets"] == old["targets"]
        assert sorted(case["grads"]) == sorted(old["grads"]), f"{kind}: other parameters"
        for name, g in case["grads"].items():
            ref = np.asarray(old["grads"][name])
            scale = max(np.abs(ref).max(), 1e-3)
            assert np.abs(np.asarray(g) - ref).max() <= 1e-5 * scale, (
                f"{kind}: the gradient of {name} changed: run scripts/make_train_fixture.py"
            )
    new, old = fresh["training"], committed["training"]
    assert new["config"] == old["config"] and new["batches"] == old["batches"]
    np.testing.assert_allclose(new["losses"], old["losses"], atol=1e-5)
