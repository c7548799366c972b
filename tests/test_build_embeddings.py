"""The pure functions of data/build_embeddings.py (no spaCy packages needed)."""

import importlib.util
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "data" / "build_embeddings.py"


@pytest.fixture(scope="module")
def build():
    spec = importlib.util.spec_from_file_location("build_embeddings", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Keys found in the packages' vocab/key2row for these strings (spaCy's
# StringStore hashes), plus the value spaCy's documentation prints for
# "coffee". Lengths 1-20 bytes cover every tail length case and 0-2 blocks.
SPACY_KEYS = {
    "coffee": 3197928453018144401,
    ".": 12646065887601541794,
    "a": 11901859001352538922,
    "the": 7425985699627899538,
    "1992": 15234164213553011410,
    "Area": 2833979519971634056,
    "août": 14850365459564353736,  # 5 bytes: non-ASCII
    "european": 3835399326309433301,  # exactly one block, no tail
    "agreement": 16246638286389273127,
    "économique": 1842990786055754634,
    "aujourd'hui": 9478438274351682003,
    "responsibilities": 9386680256496015529,  # exactly two blocks
    "internationalisation": 8729853314229540275,
}


@pytest.mark.parametrize("text, key", sorted(SPACY_KEYS.items()))
def test_murmurhash64a_matches_spacy_string_keys(build, text, key):
    assert build.murmurhash64a(text.encode("utf8")) == key


def test_murmurhash64a_depends_on_seed_and_every_byte(build):
    data = "internationalisation".encode("utf8")
    assert build.murmurhash64a(data, seed=2) != build.murmurhash64a(data)
    flipped = data[:-1] + b"N"
    assert build.murmurhash64a(flipped) != build.murmurhash64a(data)


def test_procrustes_recovers_a_random_rotation(build):
    rng = np.random.default_rng(0)
    Q, _ = np.linalg.qr(rng.normal(size=(20, 20)))
    X = rng.normal(size=(200, 20))
    noisy_target = X @ Q + 0.01 * rng.normal(size=(200, 20))
    W = build.procrustes(X, noisy_target)
    np.testing.assert_allclose(W @ W.T, np.eye(20), atol=1e-10)
    np.testing.assert_allclose(W, Q, atol=1e-2)


def test_normalize_gives_unit_rows_and_removes_the_common_direction(build):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(500, 10)) + 5.0  # every row shares a large offset
    N = build.normalize(X)
    np.testing.assert_allclose(np.linalg.norm(N, axis=1), 1.0, rtol=1e-12)
    # after centring, the mean direction no longer dominates
    assert (
        np.linalg.norm(N.mean(axis=0))
        < 0.2
        < np.linalg.norm((X / np.linalg.norm(X, axis=1, keepdims=True)).mean(axis=0))
    )


def test_mutual_csls_pairs_recover_a_shuffled_copy(build):
    rng = np.random.default_rng(2)
    x = build.normalize(rng.normal(size=(300, 16)))
    perm = rng.permutation(300)
    y = build.normalize(x[perm] + 0.05 * rng.normal(size=(300, 16)))
    pairs = build.mutual_csls_pairs(x, y)
    # y[k] is a noisy x[perm[k]], so x_i pairs with y_j where perm[j] == i
    inverse = np.argsort(perm)
    assert len(pairs) > 290
    assert all(j == inverse[i] for i, j in pairs)


def test_lowercase_vocabulary_keeps_the_most_frequent_casing(build):
    words = ["The", "the", None, "http://x", "a_b", ",", "Aujourd'hui", "peut-être", "THE"]
    vectors = np.arange(len(words), dtype=float)[:, None] * np.ones((1, 3))
    vocab, matrix = build.lowercase_vocabulary(words, vectors)
    assert vocab == ["the", ",", "aujourd'hui", "peut-être"]
    np.testing.assert_array_equal(matrix[:, 0], [0, 5, 6, 7])


def test_read_vector_table_maps_rows_to_owner_strings(build, tmp_path):
    msgpack = pytest.importorskip("msgpack")
    strings = ["apple", "pear", "plum", "Pear"]
    key = {s: build.murmurhash64a(s.encode("utf8")) for s in strings}
    # two rows: "pear" owns row 0, "apple" row 1; "Pear" was pruned onto row 0
    key2row = {key["pear"]: 0, key["apple"]: 1, key["Pear"]: 0}
    np.save(tmp_path / "vectors.npy", np.eye(2, 3, dtype=np.float32))
    (tmp_path / "vectors.npy").rename(tmp_path / "vectors")
    (tmp_path / "key2row").write_bytes(msgpack.packb(key2row))
    (tmp_path / "strings.json").write_text(json.dumps(strings))
    words, vectors = build.read_vector_table(tmp_path)
    assert words == ["pear", "apple"]
    assert vectors.shape == (2, 3)


def test_read_vector_table_refuses_an_unknown_layout(build, tmp_path):
    msgpack = pytest.importorskip("msgpack")
    np.save(tmp_path / "vectors.npy", np.zeros((2, 3), dtype=np.float32))
    (tmp_path / "vectors.npy").rename(tmp_path / "vectors")
    (tmp_path / "key2row").write_bytes(msgpack.packb({1: 0, 2: 0}))  # row 1 unowned
    (tmp_path / "strings.json").write_text("[]")
    with pytest.raises(build.BuildError, match="do not own rows"):
        build.read_vector_table(tmp_path)


def test_write_npz_is_loadable_and_has_fixed_timestamps(build, tmp_path):
    array = np.arange(12, dtype=np.float16).reshape(3, 4)
    build.write_npz(tmp_path / "a.npz", embeddings=array)
    build.write_npz(tmp_path / "b.npz", embeddings=array)
    assert (tmp_path / "a.npz").read_bytes() == (tmp_path / "b.npz").read_bytes()
    with zipfile.ZipFile(tmp_path / "a.npz") as zf:
        assert [i.date_time for i in zf.infolist()] == [(1980, 1, 1, 0, 0, 0)]
    with np.load(tmp_path / "a.npz", allow_pickle=False) as npz:
        np.testing.assert_array_equal(npz["embeddings"], array)
        assert npz["embeddings"].dtype == np.float16


def test_find_package_says_how_to_install_a_missing_package(build, monkeypatch):
    monkeypatch.setitem(build.PACKAGES, "en", ("no-such-package-xyz", "1.0"))
    with pytest.raises(build.BuildError, match=r"pip install no-such-package-xyz==1\.0"):
        build.find_package("en")


def test_find_package_rejects_another_version(build, monkeypatch):
    monkeypatch.setitem(build.PACKAGES, "en", ("numpy", "0.0.1"))
    with pytest.raises(
        build.BuildError, match=r"numpy .* is installed but the build needs 0\.0\.1"
    ):
        build.find_package("en")


def test_manifest_lists_every_committed_data_file_and_both_inputs(build):
    manifest = json.loads((SCRIPT.parent / "MANIFEST.json").read_text(encoding="utf8"))
    expected = {
        f"{kind}_{lang}.{ext}"
        for lang in ("en", "fr")
        for kind, ext in (("embeddings", "npz"), ("vocab", "json"))
    }
    assert set(manifest["files"]) == expected | set(build.COPIED_FILES)
    for name, entry in manifest["files"].items():
        assert (SCRIPT.parent / name).stat().st_size == entry["bytes"], name
    assert {v["package"]: v["version"] for v in manifest["inputs"].values()} == {
        name: version for name, version in build.PACKAGES.values()
    }
