"""Chapter 19's committed SmolLM2 measurements (data/checkpoints/smollm2_long/) agree with themselves.

The runs take minutes to an hour (scripts/smollm2_passkey.py, smollm2_stream.py,
smollm2_rope_loss.py), so the chapter reads their JSON; these tests check that
each file says what its own numbers say: a trial is marked correct exactly when
its answer holds the key, every summary is the mean of the bins it summarises,
and every method and length the chapter glues was run.
"""

import json
from pathlib import Path

import numpy as np
import pytest

from attention_lib.models.smollm2 import GGUF_SHA256

FOLDER = Path(__file__).resolve().parents[1] / "data" / "checkpoints" / "smollm2_long"
METHODS = ("none", "pi", "ntk", "yarn")


def load(name):
    return json.loads((FOLDER / name).read_text(encoding="utf8"))


def test_every_passkey_trial_is_marked_by_its_answer_and_every_cell_was_run():
    trials = load("passkey.json")["trials"]
    for name, t in trials.items():
        assert name == f"{t['method']}_{t['length']}_{t['depth']}"
        assert t["correct"] == (str(t["key"]) in t["answer"]), name
        assert t["factor"] == (1.0 if t["method"] == "none" else 2.0), name
        assert t["wall_seconds"] > 0 and len(t["load_average_1min"]) == 2
    ran = {(t["method"], t["length"]) for t in trials.values()}
    assert ran >= {(m, L) for m in METHODS for L in (4096, 8192, 16384)}


def test_the_rope_loss_summaries_are_the_means_of_their_bins():
    rope = load("rope_loss.json")
    assert rope["weights_sha256"] == GGUF_SHA256
    assert rope["tokens"] == 2 * rope["trained_length"] == 16384
    half = rope["trained_length"] // rope["bin"]
    assert sorted(rope["results"]) == sorted(METHODS)
    for method, r in rope["results"].items():
        bins = np.array(r["by_bin"])
        assert len(bins) == rope["tokens"] // rope["bin"], method
        # bins of equal size: the mean of a half is the mean of its bins (to rounding)
        assert r["mean_inside"] == pytest.approx(bins[:half].mean(), abs=2e-4), method
        assert r["mean_past"] == pytest.approx(bins[half:].mean(), abs=2e-4), method
        assert 0 < r["cpu_seconds"] <= r["wall_seconds"] * 1.05, method


def test_the_stream_summaries_are_the_means_of_their_bins():
    stream = load("stream.json")
    assert stream["weights_sha256"] == GGUF_SHA256
    skip = stream["window"] // stream["bin"]
    for name, r in stream["results"].items():
        bins = np.array(r["by_bin"])
        assert len(bins) == stream["tokens"] // stream["bin"], name
        assert r["mean"] == pytest.approx(bins.mean(), abs=2e-4), name
        assert r["mean_past_window"] == pytest.approx(bins[skip:].mean(), abs=2e-4), name
