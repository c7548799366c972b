"""Word embeddings: from a sentence to the matrix of its word vectors.

Chapter 3 compares English and French words by the dot product of their
vectors, which means something only if both languages share one vector space.
``data/`` holds such vectors (built by ``data/build_embeddings.py``, see
``data/README.md``): 300 numbers per word, rows of unit length, French rotated
into the English space. This module loads them and turns a sentence into:

* ``tokenize``: lower-case whitespace tokens looked up in a vocabulary, with
  a boolean ``known`` mask;
* ``embed``: the ``(n, 300)`` matrix of their vectors.

An unknown word gets a row of zeros, and a zero key would still receive
attention weight (its score is 0, not ``-inf``). So ``known`` is returned
alongside: pass it as the attention mask so unknown words get no weight.

Every data file is checked against the SHA-256 in ``data/MANIFEST.json``
(once per file per process) before it is used, so a truncated download or an
edited file gives a clear error rather than quietly wrong numbers.
"""

import hashlib
import json
import os
from pathlib import Path
from typing import NamedTuple

import numpy as np

LANGUAGES = ("en", "fr")
REBUILD = "python data/build_embeddings.py"
_MANIFEST = "MANIFEST.json"

_verified = {}   # path -> (size, mtime_ns) of the version that was checked
_cache = {}      # (kind, path) -> loaded object


class DataFileError(OSError):
    """A file in ``data/`` is missing, truncated or altered.

    The message names the file and says how to get it back.
    """


def data_dir():
    """The folder holding the embeddings, vocabularies and ``MANIFEST.json``.

    The repository's ``data/`` folder, found relative to this package (not
    the working directory, so notebooks in ``book/`` find it too). The
    environment variable ``ATTENTION_DATA_DIR`` overrides it.

    Returns
    -------
    pathlib.Path

    Examples
    --------
    >>> from attention_lib import data_dir
    >>> (data_dir() / "MANIFEST.json").exists()
    True
    """
    override = os.environ.get("ATTENTION_DATA_DIR")
    if override:
        return Path(override).resolve()
    return Path(__file__).resolve().parents[1] / "data"


def _problem(path, what):
    return DataFileError(
        f"{path}: {what}. Restore it from the repository (git checkout -- "
        f"data/) or rebuild the data with `{REBUILD}` (see data/README.md)")


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _manifest(folder):
    path = folder / _MANIFEST
    if not path.is_file():
        raise _problem(path, "the checksum manifest is missing")
    try:
        files = json.loads(path.read_text(encoding="utf8"))["files"]
    except (ValueError, KeyError, TypeError) as err:
        raise _problem(path, f"the checksum manifest is unreadable ({err})") from None
    return files


def verified_path(name):
    """Path of ``data/<name>`` after checking it against ``MANIFEST.json``.

    Parameters
    ----------
    name : str
        Path relative to :func:`data_dir`, e.g. ``"vocab_en.json"``.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    DataFileError
        If the file or the manifest is missing, the manifest does not list
        the file, or its size or SHA-256 differ from the manifest's.
    """
    folder = data_dir()
    path = folder / name
    if not folder.is_dir():
        raise DataFileError(
            f"the data folder {folder} does not exist. attention_lib looks for "
            "the repository's data/ beside the package, which works when the "
            "project is installed editable from a checkout (pip install -e .); "
            "otherwise set ATTENTION_DATA_DIR to the data/ folder, or rebuild the "
            f"data there with `{REBUILD}` (see data/README.md)")
    if not path.is_file():
        raise _problem(path, "the file is missing")
    stat = path.stat()
    stamp = (stat.st_size, stat.st_mtime_ns)
    if _verified.get(path) == stamp:
        return path
    entry = _manifest(folder).get(name)
    if entry is None:
        raise _problem(path, f"{_MANIFEST} has no checksum for this file")
    if stat.st_size != entry["bytes"]:
        raise _problem(path, f"it has {stat.st_size} bytes but {_MANIFEST} "
                             f"says {entry['bytes']} (truncated or altered)")
    if _sha256(path) != entry["sha256"]:
        raise _problem(path, f"its SHA-256 does not match {_MANIFEST} "
                             "(the file is corrupted or was altered)")
    _verified[path] = stamp
    return path


def _check_lang(lang):
    if lang not in LANGUAGES:
        raise ValueError(f"lang must be one of {', '.join(map(repr, LANGUAGES))}, "
                         f"got {lang!r}")


def _cached(kind, path, load):
    key = (kind, path, _verified[path])
    if key not in _cache:
        _cache[key] = load(path)
    return _cache[key]


def load_vocab(lang):
    """The vocabulary of one language: lower-case word -> row of its vector.

    Parameters
    ----------
    lang : {"en", "fr"}

    Returns
    -------
    dict of str to int
        A fresh copy (changing it does not change later calls).

    Raises
    ------
    ValueError
        If ``lang`` is not ``"en"`` or ``"fr"``.
    DataFileError
        If ``vocab_<lang>.json`` is missing or fails its checksum.

    Examples
    --------
    >>> from attention_lib import load_vocab
    >>> vocab = load_vocab("fr")
    >>> vocab["accord"] < len(vocab)
    True
    """
    _check_lang(lang)
    path = verified_path(f"vocab_{lang}.json")
    vocab = _cached("vocab", path,
                    lambda p: json.loads(p.read_text(encoding="utf8")))
    return dict(vocab)


def _read_embeddings(path):
    with np.load(path, allow_pickle=False) as npz:
        if "embeddings" not in npz.files:
            raise _problem(path, f"it holds {npz.files}, not an array 'embeddings'")
        matrix = npz["embeddings"].astype(np.float32)
    if matrix.ndim != 2:
        raise _problem(path, f"'embeddings' has shape {matrix.shape}, not (n_words, d)")
    matrix.flags.writeable = False   # shared by every caller: keep it intact
    return matrix


def load_embeddings(lang):
    """The word vectors of one language, one unit-length row per word.

    Parameters
    ----------
    lang : {"en", "fr"}

    Returns
    -------
    ndarray of float32, shape (n_words, 300)
        Read-only and shared between calls (loaded once per process). Row
        ``load_vocab(lang)[word]`` is the vector of ``word``. Stored as
        float16, so norms are 1 to within about 1e-3.

    Raises
    ------
    ValueError
        If ``lang`` is not ``"en"`` or ``"fr"``.
    DataFileError
        If ``embeddings_<lang>.npz`` is missing or fails its checksum.

    Examples
    --------
    >>> from attention_lib import load_embeddings, load_vocab
    >>> E = load_embeddings("en")
    >>> E.shape[1], E.dtype
    (300, dtype('float32'))
    >>> bool(abs(np.linalg.norm(E[load_vocab("en")["agreement"]]) - 1) < 1e-3)
    True
    """
    _check_lang(lang)
    path = verified_path(f"embeddings_{lang}.npz")
    return _cached("embeddings", path, _read_embeddings)


class Tokens(NamedTuple):
    """A tokenised sentence.

    Attributes
    ----------
    words : list of str
        The tokens as written in the sentence.
    ids : ndarray of int64, shape (n,)
        Row of each token in the embedding matrix, ``-1`` if unknown.
    known : ndarray of bool, shape (n,)
        ``True`` where the token is in the vocabulary. Pass it as the key
        mask so that unknown words get no attention.
    """

    words: list
    ids: np.ndarray
    known: np.ndarray


def tokenize(sentence, vocab):
    """Split a sentence on whitespace and look each lower-cased token up.

    Parameters
    ----------
    sentence : str or sequence of str
        A sentence (split on whitespace) or a list of tokens.
    vocab : dict of str to int
        Lower-case word -> row, as returned by :func:`load_vocab`.

    Returns
    -------
    Tokens
        ``words`` (original spelling), ``ids`` (``-1`` for unknown words) and
        the boolean ``known`` mask.

    Examples
    --------
    >>> from attention_lib import tokenize
    >>> tokens = tokenize("The cat sat on the xyzzy", {"the": 0, "cat": 1, "sat": 2, "on": 3})
    >>> tokens.words
    ['The', 'cat', 'sat', 'on', 'the', 'xyzzy']
    >>> tokens.ids
    array([ 0,  1,  2,  3,  0, -1])
    >>> tokens.known
    array([ True,  True,  True,  True,  True, False])
    """
    if isinstance(sentence, str):
        words = sentence.split()
    elif isinstance(sentence, (list, tuple)) and all(isinstance(w, str) for w in sentence):
        words = list(sentence)
    else:
        raise TypeError("sentence must be a string or a list of strings, "
                        f"got {type(sentence).__name__}")
    ids = np.array([vocab.get(w.lower(), -1) for w in words], dtype=np.int64)
    return Tokens(words=words, ids=ids, known=ids >= 0)


def embed(tokens, embeddings):
    """Stack the vectors of a tokenised sentence into a matrix.

    Parameters
    ----------
    tokens : Tokens
        From :func:`tokenize`.
    embeddings : ndarray, shape (n_words, d)
        From :func:`load_embeddings` (the same language as the vocabulary
        used to tokenise).

    Returns
    -------
    ndarray of float32, shape (len(tokens.words), d)
        Row ``t`` is the vector of token ``t``, or zeros if it is unknown.
        Zeros are not "no information" to attention: a zero key scores 0
        and still gets weight, so mask it with ``tokens.known``.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib import tokenize, embed
    >>> E = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> embed(tokenize("b zzz a", {"a": 0, "b": 1}), E)
    array([[0., 1.],
           [0., 0.],
           [1., 0.]], dtype=float32)
    """
    if not isinstance(tokens, Tokens):
        raise TypeError("tokens must come from tokenize(sentence, vocab), "
                        f"got {type(tokens).__name__}")
    embeddings = np.asarray(embeddings)
    if embeddings.ndim != 2:
        raise ValueError("embeddings must be a matrix (n_words, d), "
                         f"got shape {embeddings.shape}")
    too_big = tokens.ids >= embeddings.shape[0]
    if too_big.any():
        word = tokens.words[int(np.argmax(too_big))]
        raise ValueError(
            f"{word!r} has row {tokens.ids[too_big][0]} but embeddings has only "
            f"{embeddings.shape[0]} rows: were the vocabulary and the embeddings "
            "loaded for the same language?")
    out = np.zeros((len(tokens.ids), embeddings.shape[1]), dtype=np.float32)
    out[tokens.known] = embeddings[tokens.ids[tokens.known]]
    return out
