"""The translation trainer's checkpoint is the mean of its last snapshots (as the paper's)."""

import numpy as np
import pytest

from attention_lib.train import translation as tt

TINY = {"d_model": 16, "n_heads": 2, "d_ff": 32, "n_layers": 1, "batch": 16, "warmup": 5}


@pytest.fixture
def tiny(monkeypatch, tmp_path):
    """``main`` on 200 pairs with a tiny Transformer; returns a function: steps, average -> weights."""
    pairs = tt.load_pairs("train")[:200]
    monkeypatch.setattr(tt, "load_pairs", lambda split: pairs)
    monkeypatch.setattr(tt, "evaluate_checkpoint", lambda name, out, tok, entry: entry)

    def run(steps, average):
        config = {**tt.CONFIGS["transformer"], **TINY, "average": average, "average_every": 25}
        monkeypatch.setitem(tt.CONFIGS, "transformer", config)
        out = tmp_path / f"{steps}-{average}"
        tt.main(["--model", "transformer", "--steps", str(steps), "--out", str(out)])
        with np.load(out / "transformer_float32.npz", allow_pickle=False) as f:
            return {k: f[k] for k in f.files}

    return run


def test_the_checkpoint_averages_the_last_snapshots(tiny):
    raw = [tiny(steps, average=1) for steps in (50, 75, 100)]
    averaged = tiny(100, average=3)
    assert set(averaged) == set(raw[0])
    for k in averaged:
        mean = np.mean([r[k] for r in raw], axis=0)
        np.testing.assert_allclose(averaged[k], mean, rtol=1e-6, atol=1e-7, err_msg=k)
    # and it is not simply the last snapshot
    assert any(not np.allclose(averaged[k], raw[-1][k]) for k in averaged)
