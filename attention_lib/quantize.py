"""Weight-only round-to-nearest quantization, and an 8-bit KV cache.

A weight row ``w`` is cut into groups of ``group_size`` numbers (or taken
whole: "per row"); each group keeps one float16 scale ``d`` and one small
integer ``q`` per weight, and is read back as ``d * q``:

- **8 bits** (GGUF's Q8_0 with groups of 32): ``d = max|w| / 127`` and
  ``q = round(w / d)`` in ``[-127, 127]``, rounding half away from zero as C's
  ``roundf``;
- **2 to 7 bits** (GGUF's Q4_0 with 4 bits and groups of 32): ``d = m / -2^(b-1)``
  where ``m`` is the group's weight of largest magnitude, with its sign, and
  ``q = min(2^b - 1, floor(w / d + 2^(b-1) + 1/2))`` in ``[0, 2^b)``, read back as
  ``d (q - 2^(b-1))``. The weight of largest magnitude is thereby exact, and
  all ``2^b`` levels are used (the asymmetric one on the side opposite ``m``).

Both compute in float32, as ggml's reference code does, so that the 8- and
4-bit groups of 32 are bit for bit the blocks :mod:`attention_lib.data.gguf_quant`
writes. The library's weight matrices map rows ``x`` to ``x W`` (shape
``(d_in, d_out)``), so :func:`quantize_matrix` groups along ``d_in``: each
output unit's weights, as a row of GGUF's (PyTorch's) ``(d_out, d_in)``.

This is "fake" quantization for measurement: :func:`dequantize` gives the
float32 weights a quantized model computes with, and
:attr:`QuantizedTensor.nbytes` the bytes it would store.
"""

from dataclasses import dataclass

import numpy as np

from .nn.multi_head_attention import KVCache

__all__ = [
    "SCHEMES",
    "Int8KVCache",
    "QuantizedTensor",
    "dequantize",
    "quantize",
    "quantize_matrix",
]

#: The schemes the chapter measures: ``name: (bits, group_size)``; None = per row.
SCHEMES = {
    "int8": (8, None),
    "q8_0": (8, 32),
    "q4_0": (4, 32),
    "int3": (3, 32),
    "int2": (2, 32),
}


@dataclass
class QuantizedTensor:
    """Integers ``q`` (int8 or uint8, the shape of the weights) and float16 ``scales`` per group.

    ``scales`` has shape ``(rows, n_groups)``; ``bits`` and ``group_size``
    (None: one group per row) say how to read ``q``.
    """

    q: np.ndarray
    scales: np.ndarray
    bits: int
    group_size: int | None

    @property
    def shape(self) -> tuple:
        return self.q.shape

    @property
    def nbytes(self) -> int:
        """Bytes stored: ``bits`` per weight, packed, and 2 per float16 scale."""
        return (self.q.size * self.bits + 7) // 8 + 2 * self.scales.size


def _check(w, bits, group_size):
    """``w`` as a float32 (rows, n) array; every argument checked before any work."""
    if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)) or not 2 <= bits <= 8:
        raise ValueError(f"bits must be an integer from 2 to 8, got {bits!r}")
    w = np.asarray(w)
    if w.dtype.kind not in "fiu":
        raise TypeError(f"weights must be real numbers, got dtype {w.dtype}")
    if w.ndim != 2 or w.shape[1] == 0:
        raise ValueError(f"weights must be a 2-D array of rows (rows, n), got shape {w.shape}")
    n = w.shape[1]
    if group_size is not None:
        if (
            isinstance(group_size, bool)
            or not isinstance(group_size, (int, np.integer))
            or group_size < 1
        ):
            raise ValueError(f"group_size must be a positive integer or None, got {group_size!r}")
        if n % group_size:
            raise ValueError(
                f"group_size = {group_size} does not divide the row length {n}: "
                f"every group must be whole (pad the rows, or pick a divisor of {n})"
            )
    if not np.isfinite(w).all():
        raise ValueError("weights must be finite: found NaN or infinity")
    return w.astype(np.float32, copy=False), (n if group_size is None else group_size)


def _float16_scales(d, top, where):
    """The float32 scales ``d`` as float16, refused where float16 cannot hold them.

    ``top`` is the largest code's magnitude (127, or ``2^(b-1)``): a stored scale
    off by ``e`` moves a group's largest weight by ``top * e``. Up to half a step
    (``|d| / 2``) is rounding that quantization allows anyway; more is a wrong
    value. That happens only outside float16's range: a scale above 65,504
    overflows to infinity (weights beyond about ``65504 * top``), one far below
    float16's smallest normal number (6.1e-05) keeps too few bits, or becomes 0
    below 6e-08 (weights below about ``1e-5``). ggml's reference quantizer
    stores such scales as they round, silently; here they raise a
    ``ValueError`` that says ``where(index)`` the group is.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        d16 = d.astype(np.float16)
        off = np.abs(d16.astype(np.float32) - d)
    bad = ~np.isfinite(d16) | (off * np.float32(top) > np.abs(d) / 2)
    if not bad.any():
        return d16
    index = tuple(int(i) for i in np.argwhere(bad)[0])
    scale = abs(float(d[index]))
    if not np.isfinite(d16[index]):
        problem = (
            f"its scale {scale:.3g} overflows float16, whose largest value is 65,504 "
            f"(weights up to about {65504 * top:.3g} in magnitude fit): scale the weights down"
        )
    else:
        problem = (
            f"its scale {scale:.3g} is too small for float16 (smallest 6e-08, full "
            f"precision from 6.1e-05), which would store it as {abs(float(d16[index])):.3g} "
            "and move the weights by more than half a step: scale the weights up"
        )
    raise ValueError(f"{where(index)}: {problem}")


def quantize(w, bits: int = 8, group_size: int | None = 32) -> QuantizedTensor:
    """Round-to-nearest quantization of the rows of ``w`` (rows, n), in groups along each row.

    Parameters
    ----------
    w : array_like, shape (rows, n)
    bits : int from 2 to 8
    group_size : int or None
        Numbers sharing one scale; must divide ``n``. None: one scale per row.

    Returns
    -------
    QuantizedTensor

    Raises
    ------
    ValueError
        For a bad argument, weights that are not finite, or a group whose
        float16 scale would overflow (weights beyond about 8.3e6 in 8 bits,
        5.2e5 in 4) or lose its precision (a nonzero group whose weights are
        all below about 1e-3 in 8 bits): the message names the row and group.

    Examples
    --------
    >>> w = np.array([[0.5, -1.0, 0.25, 0.0]])
    >>> qt = quantize(w, bits=4, group_size=4)
    >>> qt.q, qt.scales
    (array([[12,  0, 10,  8]], dtype=uint8), array([[0.125]], dtype=float16))
    >>> dequantize(qt)
    array([[ 0.5 , -1.  ,  0.25,  0.  ]], dtype=float32)
    """
    w, g = _check(w, bits, group_size)
    rows, n = w.shape
    blocks = w.reshape(rows, n // g, g)
    if bits == 8:
        d = np.abs(blocks).max(axis=-1, keepdims=True) / np.float32(127)
        inv = np.divide(np.float32(1), d, out=np.zeros_like(d), where=d != 0)
        x = blocks * inv
        q = (np.sign(x) * np.floor(np.abs(x) + np.float32(0.5))).astype(np.int8)
        top = 127
    else:
        half = top = 2 ** (bits - 1)
        idx = np.abs(blocks).argmax(axis=-1)[..., None]
        d = np.take_along_axis(blocks, idx, axis=-1) / np.float32(-half)
        inv = np.divide(np.float32(1), d, out=np.zeros_like(d), where=d != 0)
        x = blocks * inv + np.float32(half + 0.5)
        q = np.minimum(2 * half - 1, np.trunc(x)).astype(np.uint8)
    where = (
        (lambda i: f"weights row {i[0]}")
        if group_size is None
        else (lambda i: f"weights row {i[0]}, group {i[1]} (of {g})")
    )
    scales = _float16_scales(d[..., 0], top, where)
    return QuantizedTensor(q.reshape(rows, n), scales, int(bits), group_size)


def dequantize(qt: QuantizedTensor) -> np.ndarray:
    """The float32 weights a :class:`QuantizedTensor` stands for: ``d * q`` (minus the offset)."""
    rows, n = qt.q.shape
    g = n if qt.group_size is None else qt.group_size
    q = qt.q.reshape(rows, n // g, g).astype(np.float32)
    if qt.bits < 8:
        q -= np.float32(2 ** (qt.bits - 1))
    return (q * qt.scales.astype(np.float32)[..., None]).reshape(rows, n)


def quantize_matrix(W, bits: int = 8, group_size: int | None = 32) -> QuantizedTensor:
    """Quantize a library weight ``W`` (d_in, d_out) along ``d_in``; ``dequantize(...).T`` reads it back.

    Examples
    --------
    >>> W = np.random.default_rng(0).normal(size=(64, 3))
    >>> qt = quantize_matrix(W, bits=8, group_size=32)
    >>> qt.shape, bool(np.abs(dequantize(qt).T - W).max() < 0.02)
    ((3, 64), True)
    """
    W = np.asarray(W)
    if W.ndim != 2:
        raise ValueError(f"W must be a 2-D weight matrix (d_in, d_out), got shape {W.shape}")
    return quantize(W.T, bits, group_size)


class Int8KVCache(KVCache):
    """A :class:`~attention_lib.nn.KVCache` that stores keys and values in 8 bits.

    Each new row of ``d_head`` numbers (one head, one position) keeps int8
    codes and one float16 scale (``max |x| / 127``), so a token costs
    ``d_head + 2`` bytes per head instead of ``4 d_head``. :meth:`append`
    returns the dequantized float32 keys and values the layer attends to.

    Examples
    --------
    >>> cache = Int8KVCache()
    >>> k = np.linspace(-1, 1, 8, dtype=np.float32).reshape(1, 1, 2, 4)
    >>> k_all, _ = cache.append(k, k)
    >>> float(np.abs(k_all - k).max()) < 1 / 254, cache.nbytes
    (True, 24)
    """

    def __init__(self) -> None:
        super().__init__()
        self._codes = None

    @staticmethod
    def _encode(x, what="keys"):
        x = np.asarray(x, np.float32)
        d = np.abs(x).max(axis=-1, keepdims=True) / np.float32(127)
        inv = np.divide(np.float32(1), d, out=np.zeros_like(d), where=d != 0)
        y = x * inv
        q = (np.sign(y) * np.floor(np.abs(y) + np.float32(0.5))).astype(np.int8)
        where = lambda i: f"{what} at index {i[:-1]} (batch, head, position)"  # noqa: E731
        return q, _float16_scales(d, 127, where)

    @staticmethod
    def _decode(q, d):
        return q.astype(np.float32) * d.astype(np.float32)

    @property
    def nbytes(self) -> int:
        """Bytes of the int8 codes and float16 scales (what an 8-bit cache stores)."""
        if self._codes is None:
            return 0
        return sum(a.nbytes for a in self._codes)

    def append(self, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        self.check(k.shape[0], k.shape)
        new = (*self._encode(k, "keys"), *self._encode(v, "values"))
        if self._codes is None:
            self._codes = new
        else:
            self._codes = tuple(np.concatenate([a, b], axis=-2) for a, b in zip(self._codes, new))
        qk, dk, qv, dv = self._codes
        # k and v (dequantized) are what the layer reads; a real kernel would
        # dequantize block by block instead of keeping them.
        self.k, self.v = self._decode(qk, dk), self._decode(qv, dv)
        return self.k, self.v

    def truncate(self, n: int) -> None:
        """Keep the first ``n`` positions."""
        if self._codes is not None:
            self._codes = tuple(a[..., :n, :] for a in self._codes)
            self.k, self.v = self.k[..., :n, :], self.v[..., :n, :]
        self.position = n


def quantize_model(model, scheme: str) -> dict:
    """Quantize every weight matrix of ``model`` in place (as float32 read back); report the bytes.

    ``model`` is any of the book's models (a :class:`~attention_lib.nn.block.Composite`).
    Every 2-D parameter is a weight matrix: an embedding table ``E`` (one row
    per token) is quantized along its rows, every other matrix ``W`` (d_in,
    d_out) along ``d_in`` (:func:`quantize_matrix`). Vectors (biases, norms'
    gains) stay float32, as llama.cpp keeps them. A matrix whose rows are not
    a whole number of groups falls back to ``int8`` per row, as llama.cpp
    falls back to another type, and is listed.

    Parameters
    ----------
    model : Composite
    scheme : one of :data:`SCHEMES`

    Returns
    -------
    dict
        ``bytes`` (quantized matrices plus float32 vectors), ``float32_bytes``,
        ``fallback`` (names of the matrices kept at int8 per row).

    Examples
    --------
    >>> from attention_lib import TinyGPT
    >>> m = TinyGPT(10, 32, 2, 1, 64, 8, np.random.default_rng(0))
    >>> report = quantize_model(m, "q4_0")
    >>> report["fallback"], report["bytes"] < report["float32_bytes"] / 4
    ([], True)
    """
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {', '.join(SCHEMES)}, got {scheme!r}")
    bits, group = SCHEMES[scheme]
    leaves = model.named_leaves()
    plan = []  # every matrix checked before any changes
    for name, layer in leaves:
        for k, a in layer.params.items():
            if np.ndim(a) != 2:
                continue
            rows_along = a.shape[1] if k == "E" else a.shape[0]
            fits = group is None or rows_along % group == 0
            plan.append((name, layer, k, fits))
    report = {"bytes": 0, "float32_bytes": 0, "fallback": []}
    for name, layer in leaves:
        for a in layer.params.values():
            report["float32_bytes"] += 4 * np.size(a)
            if np.ndim(a) != 2:
                report["bytes"] += 4 * np.size(a)
    quantized = []  # every matrix quantized before any is replaced: an error changes nothing
    for name, layer, k, fits in plan:
        a = layer.params[k]
        b, g = (bits, group) if fits else (8, None)
        if not fits:
            report["fallback"].append(f"{name}.{k}")
        try:
            if k == "E":
                qt = quantize(a, b, g)
                back = dequantize(qt)
            else:
                qt = quantize_matrix(a, b, g)
                back = dequantize(qt).T
        except ValueError as err:
            raise ValueError(f"{name}.{k}: {err}") from None
        quantized.append((layer, k, back.astype(a.dtype)))
        report["bytes"] += qt.nbytes
    for layer, k, back in quantized:
        layer.params[k] = back
    return report
