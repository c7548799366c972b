"""Word embeddings: from a sentence to the matrix of its word vectors.

Chapter 4 compares English and French words by the dot product of their
vectors, which means something only if both languages share one vector space.
``data/`` holds such vectors (built by ``data/build_embeddings.py``, see
``data/README.md``): 300 numbers per word, rows of unit length, French rotated
into the English space. This module loads them and turns a sentence into
tokens with a boolean ``known`` mask (:func:`tokenize`) and the ``(n, 300)``
matrix of their vectors (:func:`embed`). An unknown word's row of zeros would
still get attention weight: pass ``known`` as the attention mask.

Each file is checked against ``data/MANIFEST.json`` (:mod:`.paths`) and its
structure when it is loaded, else a ``DataFileError`` names it.
"""

import json
import unicodedata
import zipfile
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

from .._checks import as_numeric, require_finite
from .paths import data_file_error, read_cached, verified_path

LANGUAGES = ("en", "fr")
EMBEDDING_DIM = 300  # numbers per word vector in data/ (data/README.md)


def _check_lang(lang):
    if lang not in LANGUAGES:
        raise ValueError(f"lang must be one of {', '.join(map(repr, LANGUAGES))}, got {lang!r}")


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
        If ``vocab_<lang>.json`` is missing, fails its checksum, or is not a
        JSON object mapping distinct lower-case words to the rows
        ``0 .. n_words - 1``; also if ``MANIFEST.json`` is malformed.

    Examples
    --------
    >>> from attention_lib import load_vocab
    >>> vocab = load_vocab("fr")
    >>> vocab["accord"] < len(vocab)
    True
    """
    _check_lang(lang)
    path = verified_path(f"vocab_{lang}.json")
    return dict(read_cached(path, _read_vocab))


def _read_vocab(path):
    """Parse and check a vocabulary: lower-case NFC words -> rows 0 .. n-1."""
    try:
        vocab = json.loads(path.read_text(encoding="utf8"))
    except UnicodeDecodeError as err:
        raise data_file_error(path, f"it is not valid UTF-8 ({err})") from None
    except ValueError as err:
        raise data_file_error(path, f"it is not valid JSON ({err})") from None
    if not isinstance(vocab, dict):
        raise data_file_error(
            path, f"it holds a JSON {type(vocab).__name__}, not an object mapping words to rows"
        )
    seen = {}
    for word, row in vocab.items():
        if type(row) is not int:
            raise data_file_error(path, f"the row of {word!r} is {row!r}, not an integer")
        if not 0 <= row < len(vocab):
            raise data_file_error(
                path,
                f"the row of {word!r} is {row}, outside 0 .. {len(vocab) - 1} (one row per word)",
            )
        if row in seen:
            raise data_file_error(
                path, f"{seen[row]!r} and {word!r} both have row {row}: rows are used twice"
            )
        seen[row] = word
        if word != _normalise(word).lower() or not word:
            raise data_file_error(
                path,
                f"the word {word!r} is not lower-case NFC text "
                "without format characters, so tokenize could "
                "never find it",
            )
    return vocab


def _read_embeddings(path):
    try:
        npz = np.load(path, allow_pickle=False)
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as err:
        raise data_file_error(
            path, f"it is not a readable .npz of numeric arrays ({type(err).__name__}: {err})"
        ) from None
    if not isinstance(npz, np.lib.npyio.NpzFile):  # a bare .npy array
        raise data_file_error(path, "it is a single .npy array, not an .npz archive")
    with npz:
        if "embeddings" not in npz.files:
            raise data_file_error(path, f"it holds {npz.files}, not an array 'embeddings'")
        try:
            matrix = npz["embeddings"]
        except (zipfile.BadZipFile, ValueError, OSError, EOFError) as err:
            raise data_file_error(
                path,
                f"its array 'embeddings' cannot be read without "
                f"pickle ({type(err).__name__}: {err})",
            ) from None
    if matrix.ndim != 2 or matrix.shape[1] != EMBEDDING_DIM:
        raise data_file_error(
            path, f"'embeddings' has shape {matrix.shape}, not (n_words, {EMBEDDING_DIM})"
        )
    if matrix.dtype.kind != "f":
        raise data_file_error(path, f"'embeddings' has dtype {matrix.dtype}, not floating")
    matrix = matrix.astype(np.float32)
    if not np.isfinite(matrix).all():
        raise data_file_error(path, "'embeddings' holds NaN or infinity")
    matrix.flags.writeable = False  # shared by every caller: keep it intact
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
        If ``embeddings_<lang>.npz`` is missing, fails its checksum, is not a
        readable ``.npz``, or its ``embeddings`` array is not a finite
        floating ``(n_words, 300)`` matrix with one row per vocabulary word;
        also if ``MANIFEST.json`` is malformed.

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
    matrix = read_cached(path, _read_embeddings)
    n_words = len(read_cached(verified_path(f"vocab_{lang}.json"), _read_vocab))
    if matrix.shape[0] != n_words:
        raise data_file_error(
            path,
            f"it has {matrix.shape[0]} rows but vocab_{lang}.json "
            f"has {n_words} words (one row per word)",
        )
    return matrix


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


def _normalise(text):
    """NFC, without format characters (Unicode category Cf)."""
    text = unicodedata.normalize("NFC", text)
    return "".join(c for c in text if unicodedata.category(c) != "Cf")


def tokenize(sentence, vocab):
    """Split a sentence on whitespace and look each lower-cased token up.

    The text is normalised first, so that words which look the same are the
    same: it is brought to Unicode normal form NFC (``e`` followed by the
    combining accent U+0301 becomes the single character ``é``, as in the
    vocabulary), and format characters (Unicode category Cf) are removed,
    such as the byte-order mark U+FEFF at the start of a file, the zero-width
    space U+200B and the direction marks U+200E and U+200F. A token made only
    of format characters disappears.

    Parameters
    ----------
    sentence : str or sequence of str
        A sentence (split on whitespace) or a list of tokens.
    vocab : dict of str to int
        Lower-case word -> row, as returned by :func:`load_vocab`.

    Returns
    -------
    Tokens
        ``words`` as written (after normalisation), their ``ids`` and ``known``.

    Raises
    ------
    TypeError
        If ``sentence`` is not a string or a list of strings, or ``vocab`` is
        not a dict.

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
        words = _normalise(sentence).split()
    elif isinstance(sentence, (list, tuple)) and all(isinstance(w, str) for w in sentence):
        words = [w for w in map(_normalise, sentence) if w]
    else:
        raise TypeError(
            f"sentence must be a string or a list of strings, got {type(sentence).__name__}"
        )
    if not isinstance(vocab, Mapping):
        raise TypeError(
            f"vocab must be a dict of word -> row (from load_vocab), got {type(vocab).__name__}"
        )
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

    Raises
    ------
    TypeError
        If ``tokens`` does not come from :func:`tokenize`, or ``embeddings``
        is not real numbers.
    ValueError
        If ``embeddings`` is not a matrix, has fewer rows than a token's id,
        or the rows used hold NaN or infinity.

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
        raise TypeError(
            f"tokens must come from tokenize(sentence, vocab), got {type(tokens).__name__}"
        )
    embeddings = as_numeric(embeddings, "embeddings")
    if embeddings.ndim != 2:
        raise ValueError(f"embeddings must be a matrix (n_words, d), got shape {embeddings.shape}")
    too_big = tokens.ids >= embeddings.shape[0]
    if too_big.any():
        word = tokens.words[int(np.argmax(too_big))]
        raise ValueError(
            f"{word!r} has row {tokens.ids[too_big][0]} but embeddings has only "
            f"{embeddings.shape[0]} rows: were the vocabulary and the embeddings "
            "loaded for the same language?"
        )
    out = np.zeros((len(tokens.ids), embeddings.shape[1]), dtype=np.float32)
    out[tokens.known] = embeddings[tokens.ids[tokens.known]]
    require_finite(out, "embeddings")  # only the rows used: cheap on big tables
    return out
