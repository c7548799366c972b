"""Loading the aligned word vectors, and turning sentences into matrices.

Error paths run on small fake data folders (``ATTENTION_DATA_DIR``) so the
real files in data/ are never touched.
"""

import hashlib
import json
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest

from attention_lib import (
    DataFileError,
    data_dir,
    embed,
    load_embeddings,
    load_vocab,
    scaled_dot_product_attention,
    tokenize,
)

REPO_DATA = Path(__file__).resolve().parents[1] / "data"
REBUILD = "python data/build_embeddings.py"
WIDTH = 300  # every vector in data/ has 300 numbers


def _entry(path):
    return {"sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "bytes": path.stat().st_size}


@pytest.fixture
def fake_data(tmp_path, monkeypatch):
    """A 3-word-per-language data folder with a correct manifest."""
    vocabs = {"en": {"the": 0, "cat": 1, "sat": 2}, "fr": {"le": 0, "chat": 1, "assis": 2}}
    files = {}
    for lang, vocab in vocabs.items():
        vectors = np.eye(3, WIDTH, dtype=np.float16)
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
    right = [
        "the",
        "agreement",
        "on",
        "the",
        "area",
        "economic",
        "european",
        "was",
        "was",
        "signed",
        "in",
        "august",
        "1992",
        ".",
    ]
    en, fr = tokenize(english, load_vocab("en")), tokenize(french, load_vocab("fr"))
    similarity = embed(fr, load_embeddings("fr")) @ embed(en, load_embeddings("en")).T
    best = [en.words[i].lower() for i in similarity.argmax(axis=1)]
    assert sum(b == r for b, r in zip(best, right)) >= 13


# ------------------------------------------------------------- data folder
def test_environment_variable_overrides_the_data_folder(fake_data):
    assert data_dir() == fake_data.resolve()
    assert load_vocab("en") == {"the": 0, "cat": 1, "sat": 2}
    np.testing.assert_array_equal(load_embeddings("fr"), np.eye(3, WIDTH))


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
    _, masked = scaled_dot_product_attention(query, K, K, attn_mask=keys.known, return_weights=True)
    assert unmasked[0, 1] > 0.2
    assert masked[0, 1] == 0.0
    np.testing.assert_allclose(masked.sum(), 1.0)


# ------------------------------------- faults an adversarial pass found
def _replace(folder, name, data):
    """Write ``data`` (bytes) to ``folder/name`` and record its true checksum,
    so the file passes the manifest and only its content is wrong."""
    path = folder / name
    path.write_bytes(data)
    manifest = json.loads((folder / "MANIFEST.json").read_text())
    manifest["files"][name] = _entry(path)
    (folder / "MANIFEST.json").write_text(json.dumps(manifest))
    return path


def _npy_bytes(tmp_path, array):
    scratch = tmp_path / "scratch.npy"
    np.save(scratch, array)
    return scratch.read_bytes()


def _npz_bytes(tmp_path, **arrays):
    scratch = tmp_path / "scratch.npz"
    np.savez(scratch, **arrays)
    return scratch.read_bytes()


@pytest.mark.parametrize(
    "manifest",
    [
        {"files": ["vocab_en.json"]},
        {"files": {"vocab_en.json": {"sha256": "0" * 64}}},  # no bytes
        {"files": {"vocab_en.json": "3b7060d6"}},  # a string entry
        {"files": {"vocab_en.json": {"sha256": "0" * 64, "bytes": "12"}}},
        {"files": {"vocab_en.json": {"sha256": "0" * 64, "bytes": True}}},
        {"files": {"vocab_en.json": {"sha256": 12, "bytes": 12}}},
        {"files": {"vocab_en.json": {"sha256": "xyz", "bytes": 12}}},
        ["files"],
        {"no files": {}},
    ],
    ids=[
        "files-list",
        "no-bytes",
        "string-entry",
        "bytes-string",
        "bytes-bool",
        "sha-number",
        "sha-not-hex",
        "top-level-list",
        "no-files-key",
    ],
)
def test_manifest_of_the_wrong_shape_is_a_data_file_error(fake_data, manifest):
    """Valid JSON of the wrong shape escaped DataFileError (raw KeyError etc.)."""
    path = fake_data / "MANIFEST.json"
    path.write_text(json.dumps(manifest))
    with pytest.raises(DataFileError, match="MANIFEST.json") as err:
        load_vocab("en")
    _assert_names_file_and_rebuild(err, path)


def test_manifest_that_is_not_json_is_a_data_file_error(fake_data):
    path = fake_data / "MANIFEST.json"
    path.write_bytes(b"\xff{not json")
    with pytest.raises(DataFileError, match="unreadable") as err:
        load_vocab("en")
    _assert_names_file_and_rebuild(err, path)


@pytest.mark.parametrize(
    "kind",
    [
        "object-array",
        "not-a-zip",
        "no-embeddings",
        "width-299",
        "integer-dtype",
        "nan",
        "rows-vs-vocab",
        "one-dimensional",
        "npy-not-npz",
        "pickle",
    ],
)
def test_malformed_embeddings_name_the_file_and_the_rebuild(fake_data, tmp_path, kind):
    """Files that pass their checksum but are malformed gave raw NumPy errors
    (or, for a width of 299, failed only later inside attention)."""
    data = {
        "object-array": lambda: _npz_bytes(tmp_path, embeddings=np.array([None, 1], dtype=object)),
        "not-a-zip": lambda: b"this is not a zip file",
        "no-embeddings": lambda: _npz_bytes(tmp_path, vectors=np.eye(3, WIDTH)),
        "width-299": lambda: _npz_bytes(tmp_path, embeddings=np.eye(3, 299, dtype=np.float16)),
        "integer-dtype": lambda: _npz_bytes(tmp_path, embeddings=np.eye(3, WIDTH, dtype=np.int64)),
        "nan": lambda: _npz_bytes(tmp_path, embeddings=np.full((3, WIDTH), np.nan, np.float16)),
        "rows-vs-vocab": lambda: _npz_bytes(
            tmp_path, embeddings=np.eye(4, WIDTH, dtype=np.float16)
        ),
        "one-dimensional": lambda: _npz_bytes(tmp_path, embeddings=np.ones(WIDTH, np.float16)),
        "npy-not-npz": lambda: _npy_bytes(tmp_path, np.eye(3, WIDTH, dtype=np.float16)),
        "pickle": lambda: pickle.dumps({"embeddings": np.eye(3, WIDTH)}),
    }[kind]()
    path = _replace(fake_data, "embeddings_en.npz", data)
    with pytest.raises(DataFileError) as err:
        load_embeddings("en")
    _assert_names_file_and_rebuild(err, path)


@pytest.mark.parametrize(
    "text, words",
    [
        (b"{not json", "not valid JSON"),
        (b"\xff\xfe bad utf-8", "not valid"),
        (b'["the", "cat"]', "not an object"),
        (b'{"the": 0, "cat": -1, "sat": 2}', "-1"),  # silently 'unknown' before
        (b'{"the": 0, "cat": 3, "sat": 2}', "3"),  # out of range
        (b'{"the": 0, "cat": 0, "sat": 2}', "twice"),  # two words, one row
        (b'{"the": 0, "cat": "1", "sat": 2}', "integer"),
        (b'{"the": 0, "cat": true, "sat": 2}', "integer"),
        (b'{"the": 0, "Cat": 1, "sat": 2}', "lower-case"),  # could never be looked up
    ],
)
def test_malformed_vocabulary_names_the_file_and_the_rebuild(fake_data, text, words):
    path = _replace(fake_data, "vocab_en.json", text)
    with pytest.raises(DataFileError, match=words) as err:
        load_vocab("en")
    _assert_names_file_and_rebuild(err, path)


# Unicode: decomposed accents, byte-order marks, zero-width and direction marks
@pytest.mark.parametrize(
    "sentence, words",
    [
        ("e\u0301te\u0301 chat", ["été", "chat"]),  # decomposed: e + U+0301
        ("\ufeffL accord", ["L", "accord"]),  # a byte-order mark
        ("ac\u200bcord", ["accord"]),  # zero-width space
        ("\u200eaccord\u200f", ["accord"]),  # direction marks
        ("l \u200b accord", ["l", "accord"]),  # a token of marks only
        ("ÉTÉ", ["ÉTÉ"]),
    ],
)
def test_tokenize_normalises_unicode_before_looking_up(sentence, words):
    vocab = {"été": 0, "chat": 1, "l": 2, "accord": 3}
    tokens = tokenize(sentence, vocab)
    assert tokens.words == words
    assert tokens.known.all(), tokens


def test_tokenize_normalises_a_token_list_the_same_way():
    tokens = tokenize(["\ufeffe\u0301te\u0301", "\u200b", "chat\u200f"], {"été": 0, "chat": 1})
    assert tokens.words == ["été", "chat"]
    assert tokens.ids.tolist() == [0, 1]


def test_tokenize_documents_its_normalisation():
    doc = " ".join(tokenize.__doc__.split())
    assert "NFC" in doc and "U+200B" in doc and "U+FEFF" in doc


@pytest.mark.parametrize("vocab", [["the"], None, "the"])
def test_tokenize_wants_a_dictionary(vocab):
    with pytest.raises(TypeError, match="vocab must be a dict"):
        tokenize("the cat", vocab)


@pytest.mark.parametrize(
    "embeddings, error, message",
    [
        (np.array([["a", "b"]]), TypeError, "embeddings must be an array of real numbers"),
        (np.full((2, 2), np.nan), ValueError, "embeddings contains NaN"),
    ],
)
def test_embed_checks_its_matrix(embeddings, error, message):
    with pytest.raises(error, match=message):
        embed(tokenize("a", {"a": 0}), embeddings)
