"""Each model's own save/load, and the checks they share (attention_lib/models/checkpoint.py)."""

import json

import numpy as np
import pytest

from attention_lib import DataFileError
from attention_lib.models import checkpoint, seq2seq, transformer
from attention_lib.models.checkpoint import CheckpointError, check_sha256, manifest_sha256
from attention_lib.models.gpt import TinyGPT
from attention_lib.models.seq2seq import RNNencdec, RNNsearch
from attention_lib.models.transformer import Transformer


def test_every_model_raises_the_one_checkpoint_error():
    assert seq2seq.CheckpointError is CheckpointError
    assert transformer.CheckpointError is CheckpointError
    assert issubclass(CheckpointError, ValueError)


def test_rnnsearch_saves_and_loads_itself_and_the_other_class_refuses_its_file(tmp_path):
    model = RNNsearch(7, 9, emb=4, hidden=6, attn=5, seed=3)
    path = model.save(tmp_path / "search")
    assert path.name == "search.npz"
    back = RNNsearch.load(path)
    assert type(back) is RNNsearch
    for k, a in model.state_dict().items():
        np.testing.assert_array_equal(back.state_dict()[k], a, err_msg=k)
    with pytest.raises(CheckpointError, match="holds a RNNsearch, not a RNNencdec"):
        RNNencdec.load(path)


def test_transformer_saves_float16_and_loads_itself(tmp_path):
    model = Transformer(11, d_model=8, n_heads=2, d_ff=12, n_layers=1, max_len=10, seed=1)
    model.save(tmp_path / "t.npz")
    back = Transformer.load(tmp_path / "t.npz")
    for k, a in model.state_dict().items():
        b = back.state_dict()[k]
        assert b.dtype == np.float32
        np.testing.assert_array_equal(b, a.astype(np.float16).astype(np.float32), err_msg=k)


def test_tinygpt_load_refuses_another_models_file_naming_it(tmp_path):
    path = RNNsearch(7, 9, emb=4, hidden=6, attn=5).save(tmp_path / "search.npz")
    with pytest.raises(CheckpointError, match=r"search\.npz: the config's n_vocab"):
        TinyGPT.load(path)
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"PK\x03\x04 not a zip")
    with pytest.raises(CheckpointError, match="not a checkpoint written by TinyGPT.save"):
        TinyGPT.load(junk)


def test_check_shapes_names_what_is_missing_and_what_is_wrong(tmp_path):
    headers = {"config": ((), np.dtype("<U9")), "W": ((2, 3), np.dtype("float16"))}
    checkpoint.check_shapes(tmp_path, headers, {"W": (2, 3)})  # fits: no error
    with pytest.raises(CheckpointError, match=r"missing \['b'\], unexpected none"):
        checkpoint.check_shapes(tmp_path, headers, {"W": (2, 3), "b": (3,)})
    with pytest.raises(CheckpointError, match=r"W is float16 \(2, 3\) but its config \(M\) needs"):
        checkpoint.check_shapes(tmp_path, headers, {"W": (3, 2)}, "M")


def test_the_manifest_checks_refuse_a_damaged_manifest_or_an_altered_file(tmp_path):
    weights = tmp_path / "m.npz"
    weights.write_bytes(b"weights")
    manifest = tmp_path / "manifest.json"
    manifest.write_text("<<<<<<< HEAD\n")
    with pytest.raises(DataFileError, match="manifest.json is not valid JSON"):
        manifest_sha256(manifest, "m.npz", "TinyGPT")
    manifest.write_text(json.dumps({"file": "m.npz", "model": "Llama", "sha256": "0" * 64}))
    with pytest.raises(DataFileError, match="describes 'Llama' in 'm.npz', not the TinyGPT"):
        manifest_sha256(manifest, "m.npz", "TinyGPT")
    manifest.write_text(json.dumps({"file": "m.npz", "sha256": "0" * 64}))
    digest = manifest_sha256(manifest, "m.npz", "TinyGPT")
    with pytest.raises(DataFileError, match="m.npz does not match the sha256 in"):
        check_sha256(weights, digest, manifest)
    import hashlib

    check_sha256(weights, hashlib.sha256(b"weights").hexdigest(), manifest)  # intact: no error
