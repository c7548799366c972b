"""The committed checkpoints of chapter 20's KV-cache variants: intact, and theirs.

Retraining them takes most of an hour (weekly, scripts/check-retrain.sh
serving). Here: each file's sha256 matches the manifest, its configuration is
the one ``attention_lib.train.serving`` trains today (chapter 11's shape), the
cache bytes per token and the parameter count are recomputed from the loaded
model, each run kept to the budget the chapter states, and the loss on a slice of
the held-out text, re-evaluated from the file, is near the manifest's.
"""

import json

import numpy as np
import pytest

from attention_lib.data.paths import sha256
from attention_lib.models.kv_variants import load_variant, serving_dir
from attention_lib.train.serving import BASE, RUNS
from attention_lib.train.shakespeare import load_text, validation_loss

MANIFEST = json.loads((serving_dir() / "manifest.json").read_text(encoding="utf8"))
TRAINED = ("mha", "gqa", "mqa", "mla", "gqa_uptrained")


@pytest.mark.parametrize("name", TRAINED)
def test_each_variant_is_the_committed_file_of_todays_configuration(name):
    entry = MANIFEST["runs"][name]
    path = serving_dir() / entry["file"]
    assert sha256(path) == entry["sha256"]
    assert entry["config"] == json.loads(json.dumps(RUNS[name]))
    model, chars = load_variant(path)
    assert len(chars) == 65 and model.max_len == 128
    assert model.n_params() == entry["parameters"]
    assert model.cache_bytes_per_token() == entry["cache_bytes_per_token_float32"]
    # the budget of the issue and the chapter: at most 15 minutes on 2 cores each
    assert entry["threads"] == 2 and entry["wall_seconds"] <= 15 * 60


def test_the_four_variants_are_chapter_12s_shape_trained_alike():
    ch12_manifest = serving_dir().parent / "shakespeare" / "manifest.json"
    ch12 = json.loads(ch12_manifest.read_text())["config"]
    for key in ("d_model", "n_heads", "n_layers", "d_ff", "max_len", "positions"):
        assert BASE[key] == ch12[key], key
    same = {k: v for k, v in MANIFEST["runs"]["mha"]["config"].items() if k != "variant"}
    for name in ("gqa", "mqa", "mla"):
        config = MANIFEST["runs"][name]["config"]
        assert {k: config[k] for k in same} == same, name
    # bytes per token, float32, 4 blocks: 2 (k, v) x heads kept x 48 (MLA: d_c + d_R)
    bytes_per = {n: MANIFEST["runs"][n]["cache_bytes_per_token_float32"] for n in TRAINED}
    assert bytes_per == {
        "mha": 4 * 2 * 4 * 48 * 4,
        "gqa": 4 * 2 * 2 * 48 * 4,
        "mqa": 4 * 2 * 1 * 48 * 4,
        "mla": 4 * (192 + 24) * 4,
        "gqa_uptrained": 4 * 2 * 2 * 48 * 4,
    }


@pytest.fixture(scope="module")
def held_out_slice():
    val = load_text()[2]
    return val[: 24 * 128 + 1]  # 24 windows of the last 10%: about a tenth of a second each


@pytest.mark.parametrize("name", TRAINED)
def test_a_slice_of_the_held_out_text_gives_about_the_manifests_loss(name, held_out_slice):
    model, _ = load_variant(serving_dir() / MANIFEST["runs"][name]["file"])
    loss = validation_loss(model, held_out_slice, 128)
    full = MANIFEST["runs"][name]["evaluation"]["val_loss"]
    assert np.isfinite(loss) and abs(loss - full) < 0.12, (loss, full)


def test_uptraining_started_from_the_committed_mha_model():
    up = MANIFEST["runs"]["gqa_uptrained"]
    assert up["config"]["from"] == "mha"
    before, after = up["evaluation"]["val_loss_before_fine_tune"], up["evaluation"]["val_loss"]
    assert after < before  # the short fine-tune helps: pooling alone costs loss
