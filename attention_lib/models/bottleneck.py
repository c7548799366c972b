"""The information bottleneck, measured.

A sequence-to-sequence encoder that hands the decoder one vector of ``d``
numbers must squeeze the whole input into those ``d`` numbers, however long
the input is. This module measures what that costs, with a toy anyone can
rerun in seconds:

- **Input.** A sequence of ``L`` tokens drawn uniformly from a vocabulary of
  ``V`` symbols; each symbol has a random embedding of ``p`` numbers
  (``token_size``), so a sequence is ``L * p`` numbers.
- **Fixed-vector model.** The best *linear* encoder/decoder of width ``d``:
  principal component analysis fitted on training sequences. The encoder
  keeps the ``d`` coordinates of largest variance, the decoder maps them
  back, and each position is read as its nearest vocabulary embedding.
  When ``L * p <= d`` nothing is lost; beyond that, ``L * p - d`` directions
  of the input are thrown away and recovery falls towards chance, ``1 / V``.
- **Attention model.** Keeps every encoder state
  ``h_j = [embedding(x_j) ; position_code(j)]`` (``L`` states, not one
  vector) and reads position ``t`` back with a query that holds only
  ``position_code(t)``: scaled dot-product attention puts almost all the
  weight on state ``t``, whose embedding part is then decoded the same way.

Recovery is the fraction of held-out tokens decoded correctly. Every random
draw comes from a generator seeded by ``(seed, L)``, so a result for one
length does not depend on which other lengths were run.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from .._checks import as_float, as_int, require_finite
from ..dot_product import scaled_dot_product_attention


@dataclass(frozen=True)
class BottleneckResult:
    """What :func:`bottleneck_experiment` measured.

    Attributes
    ----------
    lengths : ndarray of int, shape (n_lengths,)
        The sequence lengths ``L``.
    widths : ndarray of int, shape (n_widths,)
        The fixed-vector sizes ``d``.
    fixed : ndarray, shape (n_widths, n_lengths)
        ``fixed[w, l]``: fraction of tokens recovered from one vector of
        ``widths[w]`` numbers for sequences of length ``lengths[l]``.
    attention : ndarray, shape (n_lengths,)
        Fraction recovered by attending over all ``L`` encoder states.
    chance : float
        ``1 / vocab_size``, the recovery of a blind guess.
    token_size : int
        ``p``, the numbers per token; a sequence is ``L * p`` numbers.
    """

    lengths: np.ndarray
    widths: np.ndarray
    fixed: np.ndarray
    attention: np.ndarray
    chance: float
    token_size: int


def _positive_ints(values, name, allow_empty=False):
    arr = np.atleast_1d(np.asarray(values))
    if allow_empty and arr.size == 0:
        return arr.astype(int)
    if arr.ndim != 1 or arr.size == 0 or arr.dtype.kind not in "iu":
        raise TypeError(
            f"{name} must be a non-empty 1-D sequence of positive integers, got {values!r}"
        )
    if (arr < 1).any():
        raise ValueError(f"{name} must all be positive, got {arr.tolist()}")
    if int(arr.max()) > np.iinfo(np.int64).max:  # uint64 would wrap round
        raise ValueError(f"{name} are too large: the largest is {int(arr.max())}")
    return arr.astype(int)


def _tokens(tokens, embeddings, name):
    """Check ``tokens`` (N, L) index rows of ``embeddings`` (V, p); return both."""
    E = as_float(embeddings, "embeddings", np.float64)
    if E.ndim != 2:
        raise ValueError(f"embeddings must be 2-D (V, p), got shape {E.shape}")
    require_finite(E, "embeddings")
    t = np.asarray(tokens)
    if t.ndim != 2 or t.dtype.kind not in "iu":
        raise TypeError(
            f"{name} must be a 2-D integer array (N, L) of symbol ids, got "
            f"{t.dtype} array of shape {t.shape}"
        )
    if t.size and (t.min() < 0 or t.max() >= len(E)):
        raise ValueError(
            f"{name} holds symbol ids from {t.min()} to {t.max()}, but the "
            f"vocabulary has {len(E)} embeddings (ids 0 to {len(E) - 1})"
        )
    return t, E


def nearest_token(vectors: ArrayLike, embeddings: ArrayLike) -> np.ndarray:
    """Decode vectors to the vocabulary symbol whose embedding is nearest.

    Parameters
    ----------
    vectors : array_like, shape (..., p)
        Reconstructed token embeddings.
    embeddings : array_like, shape (V, p)
        One embedding per vocabulary symbol.

    Returns
    -------
    ndarray of int, shape (...)
        The index of the nearest embedding (Euclidean distance).

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.models.bottleneck import nearest_token
    >>> E = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    >>> nearest_token(np.array([[0.9, 0.2], [-0.6, 0.1], [0.1, 2.0]]), E)
    array([0, 2, 1])
    """
    x = as_float(vectors, "vectors", np.float64)
    E = as_float(embeddings, "embeddings", np.float64)
    if E.ndim != 2 or x.shape[-1:] != E.shape[-1:]:
        raise ValueError(
            f"vectors of shape {x.shape} and embeddings of shape {E.shape} do "
            f"not fit: embeddings must be (V, p) and vectors (..., p)"
        )
    if len(E) == 0:
        raise ValueError("embeddings is empty: there is no symbol to decode to")
    require_finite(x, "vectors")
    require_finite(E, "embeddings")
    # |x - e|^2 = |x|^2 - 2 x.e + |e|^2; |x|^2 is the same for every e.
    distances = (E**2).sum(axis=-1) - 2 * x @ E.T  # (..., V)
    return distances.argmin(axis=-1)


def fit_linear_code(X: ArrayLike, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Fit the best linear encoder/decoder of width ``d``: PCA.

    Among all ways of mapping ``X`` linearly to ``d`` numbers and back, the
    one that keeps the ``d`` directions of largest variance has the smallest
    squared reconstruction error (Eckart-Young).

    Parameters
    ----------
    X : array_like, shape (N, D)
        Training inputs, one flattened sequence per row.
    d : int
        The code size: how many numbers the encoder may output.

    Returns
    -------
    mean : ndarray, shape (D,)
        The training mean, removed before encoding.
    basis : ndarray, shape (D, min(d, D))
        Orthonormal columns. Encode with ``code = (x - mean) @ basis``
        (``d`` numbers), decode with ``mean + code @ basis.T``.

    Examples
    --------
    Points on a line in 3-D are kept exactly by a code of one number:

    >>> import numpy as np
    >>> from attention_lib.models.bottleneck import fit_linear_code
    >>> t = np.linspace(-1, 1, 5)[:, None]
    >>> X = t * np.array([1.0, 2.0, 2.0])
    >>> mean, basis = fit_linear_code(X, 1)
    >>> code = (X - mean) @ basis                  # (5, 1)
    >>> bool(np.allclose(mean + code @ basis.T, X))
    True
    """
    X = as_float(X, "X", np.float64)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (N, D), got shape {X.shape}")
    require_finite(X, "X")
    d = as_int(d, "d", minimum=1)
    mean = X.mean(axis=0)
    centred = X - mean
    D = X.shape[1]
    keep = min(d, D)
    # Only the top `keep` eigenvectors of the (D, D) scatter matrix are needed.
    import scipy.linalg  # here: SciPy's import is slow

    _, directions = scipy.linalg.eigh(centred.T @ centred, subset_by_index=[D - keep, D - 1])
    return mean, directions[:, ::-1]  # largest variance first


def fixed_vector_recovery(
    train_tokens: ArrayLike, test_tokens: ArrayLike, embeddings: ArrayLike, widths: Sequence[int]
) -> np.ndarray:
    """Fraction of test tokens recovered through one vector of ``d`` numbers.

    Parameters
    ----------
    train_tokens : array_like of int, shape (N_train, L)
        Sequences used to fit the linear code.
    test_tokens : array_like of int, shape (N_test, L)
        Held-out sequences to encode, decode and score.
    embeddings : array_like, shape (V, p)
        The token embeddings.
    widths : sequence of int
        The code sizes ``d`` to try.

    Returns
    -------
    ndarray, shape (len(widths),)
        For each ``d``, the fraction of test tokens decoded correctly.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.models.bottleneck import fixed_vector_recovery
    >>> rng = np.random.default_rng(0)
    >>> E = rng.normal(size=(10, 4))               # V = 10 symbols, p = 4
    >>> train, test = rng.integers(10, size=(500, 6)), rng.integers(10, size=(200, 6))
    >>> fixed_vector_recovery(train, test, E, [24, 6]).round(2)  # L * p = 24
    array([1.  , 0.35])
    """
    train, E = _tokens(train_tokens, embeddings, "train_tokens")
    test, E = _tokens(test_tokens, embeddings, "test_tokens")
    if train.shape[1] != test.shape[1]:
        raise ValueError(
            f"train_tokens {train.shape} and test_tokens {test.shape} must have "
            f"the same sequence length L (axis 1)"
        )
    widths = _positive_ints(widths, "widths")
    n_test, L = test.shape
    X_train = E[train].reshape(len(train), -1)  # (N_train, L * p)
    X_test = E[test].reshape(n_test, -1)  # (N_test, L * p)
    mean, basis = fit_linear_code(X_train, int(widths.max()))
    recovered = []
    for d in widths:
        B = basis[:, :d]
        code = (X_test - mean) @ B  # (N_test, d): the whole sequence
        X_hat = mean + code @ B.T  # (N_test, L * p): read back
        decoded = nearest_token(X_hat.reshape(n_test, L, -1), E)
        recovered.append(np.mean(decoded == test))
    return np.array(recovered)


def attention_recovery(
    tokens: ArrayLike, embeddings: ArrayLike, position_codes: ArrayLike, sharpness: float
) -> float:
    """Fraction of tokens recovered by attending over all encoder states.

    Encoder state ``j`` is ``h_j = [embedding(x_j) ; position_codes[j]]``.
    To read position ``t``, the query is ``[0 ; position_codes[t]]``, so its
    score against ``h_j`` is ``sharpness * position_codes[t] . position_codes[j]``;
    the context vector's embedding part is decoded to the nearest symbol.

    Parameters
    ----------
    tokens : array_like of int, shape (N, L)
        The sequences.
    embeddings : array_like, shape (V, p)
        The token embeddings.
    position_codes : array_like, shape (L, P)
        One code per position, ideally unit vectors far apart.
    sharpness : float
        The ``scale`` of the dot-product attention: larger means the weights
        concentrate more on the best-matching position.

    Returns
    -------
    float
        The fraction of tokens decoded correctly.

    Examples
    --------
    With one-hot position codes the query matches exactly one state:

    >>> import numpy as np
    >>> from attention_lib.models.bottleneck import attention_recovery
    >>> rng = np.random.default_rng(0)
    >>> E = rng.normal(size=(10, 4))
    >>> tokens = rng.integers(10, size=(50, 8))
    >>> attention_recovery(tokens, E, np.eye(8), sharpness=20.0)
    1.0
    """
    tokens, E = _tokens(tokens, embeddings, "tokens")
    codes = as_float(position_codes, "position_codes", np.float64)
    require_finite(codes, "position_codes")
    if codes.ndim != 2 or codes.shape[0] != tokens.shape[1]:
        raise ValueError(
            f"position_codes must be (L, P) with one code per position: tokens "
            f"have L = {tokens.shape[1]} positions, position_codes has shape "
            f"{codes.shape}"
        )
    if isinstance(sharpness, (bool, np.bool_)) or not isinstance(
        sharpness, (int, float, np.integer, np.floating)
    ):
        raise TypeError(f"sharpness must be a positive number, got {sharpness!r}")
    if not (np.isfinite(sharpness) and sharpness > 0):
        raise ValueError(f"sharpness must be a positive number, got {sharpness!r}")
    n, L = tokens.shape
    p = E.shape[1]
    states = np.concatenate(  # (N, L, p + P)
        [E[tokens], np.broadcast_to(codes, (n,) + codes.shape)], axis=-1
    )
    queries = np.concatenate([np.zeros((L, p)), codes], axis=-1)  # (L, p + P)
    context = scaled_dot_product_attention(
        queries, states, states, scale=sharpness
    )  # (N, L, p + P)
    decoded = nearest_token(context[..., :p], E)
    return float(np.mean(decoded == tokens))


def bottleneck_experiment(
    lengths,
    widths,
    vocab_size=32,
    token_size=8,
    n_train=2000,
    n_test=500,
    position_size=32,
    sharpness=20.0,
    seed=0,
):
    """Recovery against sequence length: fixed vectors of several sizes vs attention.

    Parameters
    ----------
    lengths : sequence of int
        Sequence lengths ``L`` to test.
    widths : sequence of int
        Fixed-vector sizes ``d`` to test; empty to measure attention only.
    vocab_size : int, optional
        ``V``, the number of distinct symbols (chance recovery is ``1 / V``).
    token_size : int, optional
        ``p``, the size of each token's random embedding.
    n_train, n_test : int, optional
        Sequences per length used to fit the linear code and to score both
        models. ``n_train`` should exceed ``max(lengths) * token_size`` so the
        code is fitted on more sequences than it has dimensions.
    position_size : int, optional
        ``P``, the size of the random unit position codes of the attention model.
    sharpness : float, optional
        The attention's score scale (see :func:`attention_recovery`).
    seed : int, optional
        Seeds every random draw; the same arguments give the same result.

    Returns
    -------
    BottleneckResult

    Examples
    --------
    >>> from attention_lib import bottleneck_experiment
    >>> r = bottleneck_experiment([2, 8], widths=[16], n_train=300, n_test=100)
    >>> r.fixed.round(2), r.attention
    (array([[1.  , 0.23]]), array([1., 1.]))
    """
    lengths = _positive_ints(lengths, "lengths")
    widths = _positive_ints(widths, "widths", allow_empty=True)
    V = as_int(vocab_size, "vocab_size", minimum=1)
    if V < 2:
        raise ValueError(
            f"vocab_size must be at least 2, got {V}: with one symbol there is nothing to recover"
        )
    p = as_int(token_size, "token_size", minimum=1)
    n_train = as_int(n_train, "n_train", minimum=1)
    n_test = as_int(n_test, "n_test", minimum=1)
    P = as_int(position_size, "position_size", minimum=1)
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be a non-negative integer, got {seed!r}")
    if seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed}")
    seed = int(seed)

    embeddings = np.random.default_rng([seed, 0]).normal(size=(V, p))
    fixed = np.empty((len(widths), len(lengths)))
    attention = np.empty(len(lengths))
    for l, L in enumerate(lengths):
        rng = np.random.default_rng([seed, int(L)])  # lengths are >= 1
        train = rng.integers(V, size=(n_train, L))
        test = rng.integers(V, size=(n_test, L))
        codes = rng.normal(size=(L, P))
        codes /= np.linalg.norm(codes, axis=1, keepdims=True)
        if len(widths):
            fixed[:, l] = fixed_vector_recovery(train, test, embeddings, widths)
        attention[l] = attention_recovery(test, embeddings, codes, sharpness)
    return BottleneckResult(
        lengths=lengths,
        widths=widths,
        fixed=fixed,
        attention=attention,
        chance=1.0 / V,
        token_size=p,
    )
