"""The committed translation checkpoints: manifest, sizes, hashes, and what they translate."""

import json

import numpy as np
import pytest

from attention_lib.data.paths import sha256
from attention_lib.data.tatoeba import load_references, tatoeba_dir
from attention_lib.train.translation import checkpoint_dir
from attention_lib.translate import MODELS, load_model, translate_sentences

MAX_BYTES = 12 * 2**20


@pytest.fixture(scope="module")
def manifest():
    return json.loads((checkpoint_dir() / "manifest.json").read_text(encoding="utf8"))


@pytest.mark.parametrize("name", MODELS)
def test_checkpoint_matches_its_manifest_and_fits_the_size_limit(manifest, name):
    entry = manifest["models"][name]
    path = checkpoint_dir() / entry["file"]
    assert path.stat().st_size <= MAX_BYTES
    assert sha256(path) == entry["sha256"]
    assert sha256(tatoeba_dir() / "bpe.json") == entry["tokenizer_sha256"]
    with np.load(path, allow_pickle=False) as f:
        assert all(f[k].dtype == np.float16 for k in f.files if k != "config")
    for key in (
        "config",
        "steps",
        "wall_seconds",
        "cpu_seconds",
        "tokens_per_s",
        "command",
        "validation_loss_float16",
        "validation_loss_float32",
    ):
        assert key in entry, key
    # float16 storage changes the validation loss by less than the stated tolerance
    assert abs(entry["validation_loss_float16"] - entry["validation_loss_float32"]) < 0.01
    for mode in ("greedy", "beam"):
        assert 0 <= entry["evaluation"][mode]["all"]["bleu"] <= 100


@pytest.mark.parametrize("name", MODELS)
def test_committed_test_translations_are_what_the_model_writes(manifest, name):
    sources, _ = load_references("test")
    lines = (checkpoint_dir() / f"{name}_test_greedy.txt").read_text(encoding="utf8")
    lines = lines.split("\n")[:-1]
    assert len(lines) == len(sources)
    model, tok = load_model(name)
    again = translate_sentences(model, tok, sources[:24])
    assert np.mean([a == b for a, b in zip(again, lines)]) >= 0.9


def test_a_tampered_checkpoint_is_refused(tmp_path, manifest):
    for f in ("manifest.json", "transformer.npz"):
        (tmp_path / f).write_bytes((checkpoint_dir() / f).read_bytes())
    data = bytearray((tmp_path / "transformer.npz").read_bytes())
    data[-100] ^= 1
    (tmp_path / "transformer.npz").write_bytes(bytes(data))
    with pytest.raises(ValueError, match="sha256"):
        load_model("transformer", tmp_path)
