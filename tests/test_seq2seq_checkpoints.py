"""The committed chapter 3 checkpoints: intact, and their evaluation table is theirs.

Retraining them is too slow for the test command (it runs weekly in
.github/workflows/retrain.yml, scripts/check-retrain.sh). Here: every file's
sha256 matches the manifest, and a slice of the manifest's table (the
shortest bucket for all four models, the longest for the two trained on 5-50
words) is re-evaluated from the files and must agree.
"""

import json

import pytest

pytest.importorskip("sacrebleu")

from attention_lib.train.evaluation import bleu, exact_accuracy, make_test_sets, translate_pairs  # noqa: E402
from attention_lib.train.seq2seq import (
    RUNS,
    checkpoint_dir,
    load_checkpoints,  # noqa: E402
    sha256,
)
from attention_lib.data.toy_translation import source_vocab, target_vocab  # noqa: E402

MANIFEST = json.loads((checkpoint_dir() / "manifest.json").read_text(encoding="utf8"))


def test_the_manifest_lists_the_four_runs_with_their_files_and_checksums():
    assert set(MANIFEST["models"]) == set(RUNS)
    for name, entry in MANIFEST["models"].items():
        path = checkpoint_dir() / entry["file"]
        assert sha256(path) == entry["sha256"], name
        assert entry["model"] == RUNS[name][0] and entry["steps"] == RUNS[name][3]
    assert MANIFEST["command"].startswith("python -m attention_lib.train.seq2seq")


def test_a_changed_checkpoint_is_refused(tmp_path):
    for name in ("manifest.json", MANIFEST["models"]["rnnsearch_20"]["file"]):
        (tmp_path / name).write_bytes((checkpoint_dir() / name).read_bytes())
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    manifest["models"] = {"rnnsearch_20": manifest["models"]["rnnsearch_20"]}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    load_checkpoints(tmp_path)  # intact: loads
    path = tmp_path / manifest["models"]["rnnsearch_20"]["file"]
    data = bytearray(path.read_bytes())
    data[-100] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="sha256"):
        load_checkpoints(tmp_path)


def test_re_evaluating_a_slice_gives_the_manifests_table():
    _, models = load_checkpoints()
    tests = make_test_sets(MANIFEST["test_per_bucket"], MANIFEST["test_seed"])
    sv, tv = source_vocab(), target_vocab()
    for name, model in models.items():
        table = {b["words"]: b for b in MANIFEST["models"][name]["evaluation"]["buckets"]}
        for lo, hi in [(5, 9)] + ([(45, 50)] if name.endswith("_50") else []):
            pairs = tests[(lo, hi)]
            hyps, _ = translate_pairs(model, pairs, sv, tv)
            refs = [p.target for p in pairs]
            row = table[f"{lo}-{hi}"]
            assert bleu(hyps, refs) == pytest.approx(row["bleu"], abs=0.5), (name, lo)
            assert exact_accuracy(hyps, refs) == pytest.approx(row["exact"], abs=0.011), (name, lo)
