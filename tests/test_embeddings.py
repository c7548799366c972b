"""Loading the aligned word vectors, and turning sentences into matrices.

Error paths run on small fake data folders (``ATTENTION_DATA_DIR``) so the
real files in data/ are never touched.
"""

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from attention_lib import (DataFileError, data_dir, embed, load_embeddings, load_vocab,
                           scaled_dot_product_attention, tokenize)

REPO_DATA = Path(__file__).resolve().parents[1] / "data"
REBUILD = "python data/build_embeddings.py"


def _entry(path):
    return {"sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            "bytes": path.stat().st_size}


@pytest.fixture
def fake_data(tmp_path, monkeypatch):
    """A 3-word-per-language data folder with a correct manifest."""
    vocabs = {"en": {"the": 0, "cat": 1, "sat": 2}, "fr": {"le": 0, "chat": 1, "assis": 2}}
    files = {}
    for lang, vocab in vocabs.items():
        vectors = np.eye(3, 4, dtype=np.float16)
        np.savez(tmp_path / f"embeddings_{lang}.npz", embeddings=vectors)
        (tmp_path / f"vocab_{lang}.json").write_text(json.dumps(vocab), encoding="utf8")
        for name in (f"embeddings_{lang}.npz", f"vocab_{lang}.json"):
            files[name] = _entry(tmp_path / name)
    (tmp_path / "MANIFEST.json").write_text(json.dumps({"files": files}), encoding="utf8")
    monkeypatch.setenv("ATTENTION_DATA_DIR", str(tmp_path))
    return tmp_path


def _assert_names_file_and_rebuild(err, path):
    message = str(err.value)
    assert str(path) in message
    assert REBUILD in message


# ------------------------------------------------------------- the real data
def test_committed_embeddings_have_unit_rows_matching_their_vocabularies(monkeypatch):
    monkeypatch.delenv("ATTENTION_DATA_DIR", raising=False)
    for lang in ("en", "fr"):
        E, vocab = load_embeddings(lang), load_vocab(lang)
        assert E.dtype == np.float32 and E.shape == (len(vocab), 300)
        assert sorted(vocab.values()) == list(range(len(vocab)))
        assert all(w == w.lower() for w in vocab)
        np.testing.assert_allclose(np.linalg.norm(E, axis=1), 1.0, atol=2e-3)


def test_data_dir_is_found_from_any_working_directory(tmp_path, monkeypatch):
    monkeypatch.delenv("ATTENTION_DATA_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    assert data_dir() == REPO_DATA
    assert "accord" in load_vocab("fr")


def test_translations_are_nearest_neighbours_on_the_seed_sentence_pair(monkeypatch):
    """At least 13 of the 14 French words of the seeds' example find their
    English word (the published prototype gets 13)."""
    monkeypatch.delenv("ATTENTION_DATA_DIR", raising=False)
    english = "The agreement on the European Economic Area was signed in August 1992 ."
    french = "L accord sur la zone économique européenne a été signé en août 1992 ."
    right = ["the", "agreement", "on", "the", "area", "economic", "european",
             "was", "was", "signed", "in", "august", "1992", "."]
    en, fr = tokenize(english, load_vocab("en")), tokenize(french, load_vocab("fr"))
    similarity = embed(fr, load_embeddings("fr")) @ embed(en, load_embeddings("en")).T
    best = [en.words[i].lower() for i in similarity.argmax(axis=1)]
    assert sum(b == r for b, r in zip(best, right)) >= 13


# ------------------------------------------------------------- data folder
def test_environment_variable_overrides_the_data_folder(fake_data):
    assert data_dir() == fake_data.resolve()
    assert load_vocab("en") == {"the": 0, "cat": 1, "sat": 2}
    np.testing.assert_array_equal(load_embeddings("fr"), np.eye(3, 4))


def test_missing_file_names_the_file_and_the_rebuild_command(fake_data):
    (fake_data / "embeddings_en.npz").unlink()
    with pytest.raises(DataFileError, match="missing") as err:
        load_embeddings("en")
    _assert_names_file_and_rebuild(err, fake_data / "embeddings_en.npz")


def test_missing_data_folder_says_how_to_point_at_it(tmp_path, monkeypatch):
    """A non-editable install has no data/ beside the package: say what to do."""
    monkeypatch.setenv("ATTENTION_DATA_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(DataFileError, match="does not exist.*pip install -e .*ATTENTION_DATA_DIR"):
        load_vocab("en")


def test_truncated_file_is_reported_with_both_sizes(fake_data):
    path = fake_data / "embeddings_fr.npz"
    size = path.stat().st_size
    path.write_bytes(path.read_bytes()[: size // 2])
    with pytest.raises(DataFileError, match=f"{size // 2} bytes .* says {size}") as err:
        load_embeddings("fr")
    _assert_names_file_and_rebuild(err, path)


def test_altered_bytes_fail_the_checksum(fake_data):
    path = fake_data / "vocab_en.json"
    path.write_text(path.read_text().replace('"cat"', '"dog"'), encoding="utf8")
    with pytest.raises(DataFileError, match="SHA-256 does not match") as err:
        load_vocab("en")
    _assert_names_file_and_rebuild(err, path)


def test_corrupted_array_bytes_fail_the_checksum_before_loading(fake_data):
    path = fake_data / "embeddings_en.npz"
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(DataFileError, match="SHA-256") as err:
        load_embeddings("en")
    _assert_names_file_and_rebuild(err, path)


def test_missing_manifest_is_reported(fake_data):
    (fake_data / "MANIFEST.json").unlink()
    with pytest.raises(DataFileError, match="manifest is missing") as err:
        load_vocab("fr")
    _assert_names_file_and_rebuild(err, fake_data / "MANIFEST.json")


def test_file_without_a_checksum_is_refused(fake_data):
    manifest = json.loads((fake_data / "MANIFEST.json").read_text())
    del manifest["files"]["vocab_fr.json"]
    (fake_data / "MANIFEST.json").write_text(json.dumps(manifest))
    with pytest.raises(DataFileError, match="no checksum"):
        load_vocab("fr")


def test_data_file_error_is_an_os_error():
    assert issubclass(DataFileError, OSError)


@pytest.mark.parametrize("lang", ["de", "EN", "", None])
def test_unknown_language_names_the_allowed_values(lang):
    with pytest.raises(ValueError, match="'en', 'fr'"):
        load_vocab(lang)
    with pytest.raises(ValueError, match="'en', 'fr'"):
        load_embeddings(lang)


def test_loaded_embeddings_are_shared_and_read_only(fake_data):
    E = load_embeddings("en")
    assert load_embeddings("en") is E
    with pytest.raises(ValueError):
        E[0, 0] = 5.0


def test_load_vocab_returns_a_copy(fake_data):
    load_vocab("en")["mouse"] = 99
    assert "mouse" not in load_vocab("en")


def test_real_files_copied_and_corrupted_elsewhere_are_caught(tmp_path, monkeypatch):
    for name in ("MANIFEST.json", "vocab_fr.json"):
        shutil.copy(REPO_DATA / name, tmp_path / name)
    monkeypatch.setenv("ATTENTION_DATA_DIR", str(tmp_path))
    assert load_vocab("fr") == json.loads((REPO_DATA / "vocab_fr.json").read_text())
    with open(tmp_path / "vocab_fr.json", "ab") as f:
        f.write(b" ")
    with pytest.raises(DataFileError, match="vocab_fr.json"):
        load_vocab("fr")


# ------------------------------------------------------- tokenize and embed
def test_tokenize_lowercases_lookups_but_keeps_the_spelling():
    tokens = tokenize("  The CAT\tsat ", {"the": 0, "cat": 1, "sat": 2})
    assert tokens.words == ["The", "CAT", "sat"]
    np.testing.assert_array_equal(tokens.ids, [0, 1, 2])
    assert tokens.ids.dtype == np.int64
    assert tokens.known.all()


def test_unknown_words_are_flagged_and_get_zero_rows():
    vocab = {"le": 0, "chat": 1}
    E = np.array([[1.0, 2.0], [3.0, 4.0]])
    tokens = tokenize("le chien chat", vocab)
    np.testing.assert_array_equal(tokens.ids, [0, -1, 1])
    np.testing.assert_array_equal(tokens.known, [True, False, True])
    X = embed(tokens, E)
    assert X.dtype == np.float32
    np.testing.assert_array_equal(X, [[1, 2], [0, 0], [3, 4]])


def test_tokenize_accepts_a_token_list_and_an_empty_sentence():
    assert tokenize(["Le", "chat"], {"le": 0}).known.tolist() == [True, False]
    empty = tokenize("", {"le": 0})
    assert empty.words == [] and empty.ids.shape == (0,)
    assert embed(empty, np.ones((1, 5))).shape == (0, 5)


def test_tokenize_rejects_non_text():
    with pytest.raises(TypeError, match="string or a list of strings"):
        tokenize(42, {})


def test_embed_catches_a_vocabulary_from_the_other_language():
    tokens = tokenize("a b", {"a": 0, "b": 7})
    with pytest.raises(ValueError, match="'b' has row 7 but embeddings has only 2 rows"):
        embed(tokens, np.ones((2, 3)))


def test_embed_wants_tokens_from_tokenize():
    with pytest.raises(TypeError, match="tokenize"):
        embed(["a", "b"], np.ones((2, 3)))


def test_known_mask_keeps_attention_off_unknown_words():
    """A zero row still gets weight unless the known mask is passed."""
    vocab = {"a": 0, "b": 1}
    E = np.array([[1.0, 0.0], [0.0, 1.0]])
    keys = tokenize("a zzz b", vocab)
    K = embed(keys, E)
    query = np.array([[0.2, 0.1]])
    _, unmasked = scaled_dot_product_attention(query, K, K, return_weights=True)
    _, masked = scaled_dot_product_attention(query, K, K, attn_mask=keys.known,
                                             return_weights=True)
    assert unmasked[0, 1] > 0.2
    assert masked[0, 1] == 0.0
    np.testing.assert_allclose(masked.sum(), 1.0)
