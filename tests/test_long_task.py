"""Chapter 18's long-range tasks (scripts/train_long_task.py): the data, the scoring rule, the checkpoints."""

import json

import numpy as np
import pytest

from _fixtures import load_script
from attention_lib.data.paths import sha256

task = load_script("train_long_task")
RECALL = {**task.CONFIG, "context": 1024}
PASSKEY = {**RECALL, **task.PASSKEY}


def test_every_scored_recall_answer_is_the_value_after_the_keys_first_appearance():
    seqs, targets, dists = task.make_batch(np.random.default_rng(0), 4, RECALL)
    for seq, target, dist in zip(seqs, targets, dists):
        queries = np.flatnonzero(dist)
        assert len(queries) == RECALL["pairs"]
        for q in queries:
            p = q - dist[q]
            assert seq[q] == seq[p] and target[q] == seq[p + 1]
            assert 1 <= seq[q] <= RECALL["n_keys"] < target[q]  # a key, then a value
        keys = seq[(seq >= 1) & (seq <= RECALL["n_keys"])]
        assert np.all(np.bincount(keys) <= 2)  # a key appears once, and once again
        assert dist[queries].min() >= RECALL["min_distance"]
        assert dist[queries].max() < RECALL["max_distance"]


def test_the_passkey_is_the_only_place_its_answer_is_written():
    seqs, targets, dists = task.make_batch(np.random.default_rng(2), 8, PASSKEY)
    for seq, target, dist in zip(seqs, targets, dists):
        queries = np.flatnonzero(dist)
        assert len(queries) > PASSKEY["queries"] // 2
        (where,) = np.flatnonzero(seq > task.QUERY)  # one value token in the inputs
        assert where < PASSKEY["length"] // 2
        assert np.all(seq[queries] == task.QUERY)
        assert np.all(target[queries] == seq[where])
        np.testing.assert_array_equal(queries - dist[queries], where)


@pytest.mark.parametrize("cfg", [RECALL, PASSKEY], ids=["recall", "passkey"])
def test_a_window_scores_only_answers_it_holds(cfg):
    seqs, targets, dists = task.make_batch(np.random.default_rng(1), 4, cfg)
    x, y, scored, d = task.windows(seqs, targets, dists, 128)
    assert x.shape == (32, 128)
    t = np.nonzero(scored)
    assert np.all(t[1] - d[t] >= 0)  # where the answer was given is in the window
    far = (dists > 128).reshape(32, 128)
    assert far.any() and not scored[far].any()
    _, _, whole, _ = task.windows(seqs, targets, dists, 1024)
    assert whole.sum() == (dists > 0).sum()


@pytest.mark.parametrize("name", ["128", "1024", "128_then_128", "128_then_1024"])
def test_each_checkpoint_matches_its_manifest(name):
    folder = task.checkpoint_dir()
    manifest = json.loads((folder / f"long_task_{name}.json").read_text())
    assert sha256(folder / manifest["file"]) == manifest["sha256"]


@pytest.mark.parametrize("context", [128, 1024])
def test_the_passkey_models_reproduce_their_evaluation(context):
    folder = task.checkpoint_dir()
    manifest = json.loads((folder / f"long_task_passkey_{context}.json").read_text())
    path = folder / manifest["file"]
    assert sha256(path) == manifest["sha256"]
    cfg = manifest["config"]
    n = 16  # a slice of the held-out sequences: the same answers, fewer of them
    data = tuple(a[:n] for a in task.evaluation_set(cfg))
    got = task.evaluate(task.eval_model(task.load(path), cfg, context), cfg, data)
    want = manifest["evaluation"]
    # 16 of the 64 sequences: their accuracy within a few answers of the whole set's
    assert abs(got["accuracy_far"] - want["accuracy_far"]) < 0.1
    assert abs(got["accuracy_near"] - want["accuracy_near"]) < 0.1
