"""The models exported for the browser runtime match the committed checkpoints.

``scripts/export_models.py`` writes ``book/_static/models/<name>.json`` and
``<name>.bin``; these tests read them back and compare every tensor with the
checkpoint it came from (the node tests in tests/js/ check the maths).
"""

import hashlib
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "book" / "_static" / "models"


def _script(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


export = _script("export_models")
EXPORTED = sorted(p.stem for p in MODELS.glob("*.json"))


def read(name):
    manifest = json.loads((MODELS / f"{name}.json").read_text(encoding="utf8"))
    blob = (MODELS / f"{name}.bin").read_bytes()
    tensors = {}
    for key, t in manifest["tensors"].items():
        dtype = np.dtype(t["dtype"]).newbyteorder("<")
        n = int(np.prod(t["shape"]))
        tensors[key] = np.frombuffer(blob, dtype, n, t["offset"]).reshape(t["shape"])
    return manifest, blob, tensors


def test_the_language_models_are_exported():
    assert {"shakespeare", "stories260k"} <= set(EXPORTED)


@pytest.mark.parametrize("name", EXPORTED)
def test_files_are_whole_small_and_from_the_committed_checkpoint(name):
    manifest, blob, _ = read(name)
    assert manifest["format"] == export.FORMAT and manifest["name"] == name
    assert len(blob) == manifest["bytes"] <= 8 * 1024 * 1024
    assert hashlib.sha256(blob).hexdigest() == manifest["sha256"]
    source = ROOT / manifest["source"]["file"]
    assert source.is_file(), f"{name} was exported from {source}, which is not committed"
    assert hashlib.sha256(source.read_bytes()).hexdigest() == manifest["source"]["sha256"], (
        f"{source} changed since {name} was exported: run scripts/export_models.py"
    )


@pytest.mark.parametrize("name", EXPORTED)
def test_every_tensor_equals_the_checkpoint(name):
    manifest, _, tensors = read(name)
    config, tokenizer, expected = export.runtime_tensors(name, export.source_paths()[name])
    assert manifest["config"] == json.loads(json.dumps(config))
    assert manifest["tokenizer"] == json.loads(json.dumps(tokenizer))
    assert sorted(tensors) == sorted(expected)
    for key, (array, dtype) in expected.items():
        assert tensors[key].dtype == np.dtype(dtype)
        np.testing.assert_array_equal(tensors[key], np.asarray(array, dtype=dtype), err_msg=key)


def test_shakespeare_qkv_split_puts_the_packed_matrix_back_together():
    # independent of the export's mapping: [wq | wk | wv] is the checkpoint's W_QKV
    _, _, tensors = read("shakespeare")
    with np.load(export.source_paths()["shakespeare"], allow_pickle=False) as f:
        for i in range(json.loads(str(f["config"]))["n_layers"]):
            packed = np.concatenate([tensors[f"layers.{i}.attn.w{x}"] for x in "qkv"], axis=1)
            np.testing.assert_array_equal(packed, f[f"blocks.{i}.attn.W_QKV"])
            np.testing.assert_array_equal(tensors[f"layers.{i}.ffn.w1"], f[f"blocks.{i}.ffn.fc1.W"])


def test_stories260k_matrices_are_the_gguf_transposed():
    from attention_lib.data.gguf import read_gguf

    _, _, tensors = read("stories260k")
    g = read_gguf(export.source_paths()["stories260k"])
    np.testing.assert_array_equal(tensors["layers.0.attn.wq"], g.tensor("blk.0.attn_q.weight").T)
    np.testing.assert_array_equal(tensors["layers.4.ffn.w2"], g.tensor("blk.4.ffn_down.weight").T)
    np.testing.assert_array_equal(tensors["tok_emb"], g.tensor("token_embd.weight"))


def test_a_checkpoint_with_nan_is_refused():
    with pytest.raises(ValueError, match="tensor w holds NaN"):
        export.pack({"w": (np.array([1.0, np.nan]), "float32")})


@pytest.mark.parametrize("name", EXPORTED)
def test_widget_html_carries_the_model_and_its_static_figure(name):
    from attention_lib import widget_html

    page = widget_html(name).data
    assert f'data-model="{name}"' in page and "<svg" in page
    assert "runtime/widgets.mjs" in page and "http" not in page.replace(
        'xmlns="http://www.w3.org/2000/svg"', ""
    )


def test_widget_html_refuses_an_unknown_model():
    from attention_lib import widget_html

    with pytest.raises(ValueError, match="model_name must be one of"):
        widget_html("gpt2")
