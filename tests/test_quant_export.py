"""The quantized models the site serves (scripts/export_models.py -> book/_static/models/quantized/).

The runtime's side (dequantization bit for bit, logits within 1e-4) is
tests/js/quant.test.mjs; here: the exported blocks hold the library's
quantized weights, the committed files and fixture are current, and the
served scheme is the measured choice.
"""

import json
import re
from pathlib import Path

import numpy as np
import pytest

from _fixtures import load_script, rebuilt

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "book" / "_static" / "models"


export = load_script("export_models")


def decode(manifest, blob):
    """The runtime's weights of a quantized export, decoded here from the GGUF block layout."""
    out = {}
    for key, t in manifest["tensors"].items():
        if t["dtype"] in ("float16", "float32"):
            n = int(np.prod(t["shape"]))
            out[key] = np.frombuffer(blob, np.dtype(t["dtype"]).newbyteorder("<"), n, t["offset"])
            out[key] = out[key].reshape(t["shape"]).astype(np.float32)
            continue
        rows, cols = t["shape"][::-1] if t["transposed"] else t["shape"]
        g = t["group"]
        code = g if t["dtype"] == "q8_0" else g // 2
        n_blocks = rows * cols // g
        raw = np.frombuffer(blob, np.uint8, n_blocks * (2 + code), t["offset"])
        raw = raw.reshape(n_blocks, 2 + code)
        d = raw[:, :2].copy().view("<f2").astype(np.float32)
        if t["dtype"] == "q8_0":
            q = raw[:, 2:].view(np.int8).astype(np.float32)
        else:
            q = np.concatenate([raw[:, 2:] & 15, raw[:, 2:] >> 4], axis=1).astype(np.float32) - 8
        w = (q * d).reshape(rows, cols)
        out[key] = w.T if t["transposed"] else w
    return out


def read(name):
    manifest = json.loads((MODELS / "quantized" / f"{name}.json").read_text(encoding="utf8"))
    return manifest, (MODELS / "quantized" / f"{name}.bin").read_bytes()


@pytest.mark.parametrize("name", ["shakespeare", "stories260k", "translator"])
def test_committed_quantized_exports_are_current(name, tmp_path):
    manifest, blob = read(name)
    fresh = export.export_quantized(name, export.source_paths()[name], tmp_path)
    assert fresh == manifest, f"run scripts/export_models.py --only {name}"
    assert (tmp_path / "quantized" / f"{name}.bin").read_bytes() == blob


def test_shakespeare_blocks_hold_the_librarys_quantized_model():
    from attention_lib.models.pretrained import load_pretrained
    from attention_lib.quantize import quantize_model

    manifest, blob = read("shakespeare")
    scheme = manifest["quantization"]["scheme"]
    model, _ = load_pretrained("shakespeare")
    quantize_model(model, scheme)
    got = decode(manifest, blob)
    for i, block in enumerate(model.blocks):
        for x in "QKVO":
            np.testing.assert_array_equal(
                got[f"layers.{i}.attn.w{x.lower()}"], block.attn.params[f"W_{x}"]
            )
        np.testing.assert_array_equal(got[f"layers.{i}.ffn.w1"], block.ffn.fc1.params["W"])
        np.testing.assert_array_equal(got[f"layers.{i}.ffn.w2"], block.ffn.fc2.params["W"])
        np.testing.assert_array_equal(got[f"layers.{i}.ffn.b1"], block.ffn.fc1.params["b"])
    np.testing.assert_array_equal(got["tok_emb"], model.tok.params["E"])
    np.testing.assert_array_equal(got["pos_emb"], model.pos.params["E"])
    np.testing.assert_array_equal(got["head.weight"], model.head.params["W"])
    np.testing.assert_array_equal(got["head.bias"], model.head.params["b"])


def test_served_scheme_is_the_smallest_whose_loss_holds():
    rows = {"float32": {"loss": 2.0}, "q4_0": {"loss": 2.03}, "q8_0": {"loss": 2.001}}
    meas = {"quant": {"m": {"rows": rows}}}
    assert export.served_scheme("m", meas)[0] == "q8_0"  # q4_0: 1.5% worse
    rows["q4_0"]["loss"] = 2.019
    assert export.served_scheme("m", meas)[0] == "q4_0"
    rows["q8_0"]["loss"] = rows["q4_0"]["loss"] = 2.5
    with pytest.raises(ValueError, match="no scheme"):
        export.served_scheme("m", meas)
    for name, want in (("shakespeare", "q4_0"), ("stories260k", "q8_0"), ("translator", "q8_0")):
        assert read(name)[0]["quantization"]["scheme"] == want


def test_runtime_serves_the_quantized_folder():
    text = (ROOT / "book" / "_static" / "runtime" / "quant.mjs").read_text(encoding="utf8")
    served = dict(
        re.findall(r'(\w+): "([\w/]+)"', text.split("export const SERVED")[1].split("};")[0])
    )
    assert served == {n: f"{export.QUANTIZED_DIR}/{n}" for n in export.QUANTIZED_MODELS}
    assert set(export.QUANTIZED_MODELS) <= set(export.EXPORTERS)


def same_up_to_float_rounding(new, old, where="fixture"):
    """Equal structures, equal ints and strings; floats within 1e-4 (as the parity fixture's
    logits: float32 products round differently with another BLAS kernel or thread count)."""
    assert type(new) is type(old), f"{where}: {type(new).__name__} != {type(old).__name__}"
    if isinstance(new, dict):
        assert sorted(new) == sorted(old), f"{where}: keys {sorted(new)} != {sorted(old)}"
        for k in new:
            same_up_to_float_rounding(new[k], old[k], f"{where}.{k}")
    elif isinstance(new, list):
        assert len(new) == len(old), f"{where}: length {len(new)} != {len(old)}"
        for i, (a, b) in enumerate(zip(new, old)):
            same_up_to_float_rounding(a, b, f"{where}[{i}]")
    elif isinstance(new, float):
        assert abs(new - old) <= 1e-4, f"{where}: {new} != {old}"
    else:
        assert new == old, f"{where}: {new!r} != {old!r}"


def test_quant_fixture_is_current():
    _, fresh, committed = rebuilt("make_quant_fixture")
    same_up_to_float_rounding(fresh, committed)


def test_the_fixture_comparison_fails_on_a_changed_token_or_logit():
    committed = {"ids": [1, 2], "logits": [0.5, -1.25], "scheme": "q4_0"}
    same_up_to_float_rounding(
        {"ids": [1, 2], "logits": [0.50002, -1.25], "scheme": "q4_0"}, committed
    )
    for changed in (
        {"ids": [1, 3], "logits": [0.5, -1.25], "scheme": "q4_0"},
        {"ids": [1, 2], "logits": [0.5, -1.2], "scheme": "q4_0"},
        {"ids": [1, 2], "logits": [0.5], "scheme": "q4_0"},
        {"ids": [1, 2], "logits": [0.5, -1.25], "scheme": "q8_0"},
    ):
        with pytest.raises(AssertionError):
            same_up_to_float_rounding(changed, committed)
