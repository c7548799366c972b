"""The window fixture (tests/js/fixtures/window.json) is what the library computes now.

``tests/js/window.test.mjs`` checks the browser runtime's sliding window with
attention sinks (``book/_static/runtime/window.mjs``) against this fixture;
here it is made again from the library and the committed checkpoint, so a
change in either cannot leave it stale.
"""

import numpy as np
from _fixtures import load_script, rebuilt


def test_the_committed_window_fixture_is_what_the_library_computes():
    _, fresh, committed = rebuilt("make_window_fixture")
    assert fresh["weights_sha256"] == committed["weights_sha256"], (
        "the exported weights changed: run scripts/make_window_fixture.py"
    )
    assert len(fresh["cases"]) == len(committed["cases"])
    for new, ref in zip(fresh["cases"], committed["cases"]):
        what = f"window {new['window']}, sinks {new['sinks']}"
        assert (new["prompt"], new["window"], new["sinks"]) == (
            ref["prompt"],
            ref["window"],
            ref["sinks"],
        )
        assert new["new_ids"] == ref["new_ids"], f"{what}: the greedy ids changed"
        assert new["rows"] == ref["rows"]
        assert sorted(new["logits"]) == sorted(ref["logits"])
        for step, logits in new["logits"].items():
            np.testing.assert_allclose(logits, ref["logits"][step], atol=1e-4, err_msg=what)


def test_the_rolling_cache_keeps_sinks_plus_window_rows_far_past_the_context():
    """The library side of the widget: memory flat over 600 tokens, the sinks kept in it."""
    module = load_script("make_window_fixture")
    model, _ = module.load_checkpoint(module.CHECKPOINT, max_len=200)
    cache = model.rolling_cache(32, sinks=3)
    ids = np.arange(600) % 60
    rows = []
    for i in ids:
        model.forward(np.array([[i]]), cache)
        rows.append(len(cache[0]))
    assert rows[0] == 1 and set(rows[40:]) == {3 + 32 - 1}
    assert cache[0].position == 600
    # the first three keys (the sinks) are the ones the first three tokens wrote
    # (fed one at a time there, three at once here: float32 rounding apart)
    first, _ = module.load_checkpoint(module.CHECKPOINT, max_len=200)
    fresh = first.rolling_cache(32, sinks=3)
    first.forward(ids[None, :3], fresh)
    np.testing.assert_allclose(cache[0].k[..., :3, :], fresh[0].k[..., :3, :], atol=1e-5)
