"""GGUF's Q8_0, Q4_0 and Q4_1 blocks: write them, read them, and small GGUF files that hold them.

ggml stores a quantized row as consecutive *blocks* of 32 weights
(``ggml-common.h``; the GGUF specification, ``docs/gguf.md`` in
https://github.com/ggml-org/ggml, lists the type ids), little-endian:

- **Q8_0** (type 8), 34 bytes: ``float16 d``, then 32 ``int8`` codes;
  weight ``i`` is ``d * q[i]``.
- **Q4_0** (type 2), 18 bytes: ``float16 d``, then 16 bytes ``qs`` whose low
  nibble holds code ``j`` and high nibble code ``j + 16`` (``j < 16``); weight
  ``i`` is ``d * (q[i] - 8)``.
- **Q4_1** (type 3), 20 bytes: ``float16 d``, ``float16 m``, then 16 bytes
  ``qs`` laid out as Q4_0's; weight ``i`` is ``q[i] * d + m``, with
  ``m`` the block's smallest weight and ``d = (max - min) / 15``. SmolLM2's
  matrices are stored so (:func:`attention_lib.models.smollm2.load_smollm2`).

The codes are those of :func:`attention_lib.quantize.quantize` with 8 or 4
bits and groups of 32 (ggml's reference quantizer, bit for bit); Q4_1's
are computed here as ggml's reference ``quantize_row_q4_1_ref`` does. Every size
is checked before anything is allocated: a block type this module does not
know, a row that is not a whole number of blocks, or data shorter than the
shape needs raise :class:`~attention_lib.data.gguf.GGUFError` naming it.
"""

import struct
from pathlib import Path

import numpy as np

from ..quantize import QuantizedTensor, dequantize, quantize
from .gguf import GGML_TYPE_NAMES, GGUFError, GGUFFile
from .paths import write_atomic

__all__ = [
    "BLOCKS",
    "block_bytes",
    "decode_blocks",
    "encode_blocks",
    "read_quantized",
    "write_gguf",
]

#: ggml type id -> (name, weights per block, bytes per block, bits)
BLOCKS = {8: ("Q8_0", 32, 34, 8), 2: ("Q4_0", 32, 18, 4), 3: ("Q4_1", 32, 20, 4)}
Q4_1 = 3
_BY_NAME = {name: t for t, (name, *_) in BLOCKS.items()}
F32 = 0


def _block_type(ggml_type) -> int:
    """The type id of ``ggml_type`` (an id or a name such as ``"Q4_0"``), known here or an error."""
    t = _BY_NAME.get(ggml_type, ggml_type)
    if isinstance(t, str) or t not in BLOCKS:
        known = ", ".join(f"{n} ({i})" for i, (n, *_) in BLOCKS.items())
        what = GGML_TYPE_NAMES.get(t, t) if not isinstance(t, str) else t
        raise GGUFError(
            f"block type {what!r} is not one this module reads or writes (it knows {known})"
        )
    return t


def block_bytes(ggml_type, shape) -> int:
    """Bytes a tensor of ``shape`` (NumPy order, rows last) takes in ``ggml_type``'s blocks."""
    t = _block_type(ggml_type)
    name, per_block, size, _ = BLOCKS[t]
    shape = tuple(int(n) for n in shape)
    if not shape or not shape[-1] or shape[-1] % per_block:
        raise GGUFError(
            f"a {name} row holds whole blocks of {per_block} weights, but the rows of shape "
            f"{shape} have {shape[-1] if shape else 0}"
        )
    return int(np.prod(shape, dtype=np.int64)) // per_block * size


def encode_blocks(w, ggml_type) -> np.ndarray:
    """The bytes (uint8) of ``w``'s rows as Q8_0 or Q4_0 blocks, as llama.cpp writes them.

    Examples
    --------
    >>> w = np.arange(-16, 16, dtype=np.float32)[None] / 16
    >>> b = encode_blocks(w, "Q4_0")
    >>> b.size, b[:2].view(np.float16)[0], hex(b[2])     # d = -1 / -8, then q[0] | q[16] << 4
    (18, np.float16(0.125), '0x80')
    """
    t = _block_type(ggml_type)
    name, per_block, size, bits = BLOCKS[t]
    w = np.asarray(w)
    block_bytes(t, w.shape)  # whole blocks, checked first
    if t == Q4_1:
        return _encode_q4_1(w)
    qt = quantize(w.reshape(-1, w.shape[-1]), bits, per_block)
    return _pack(qt, t).reshape(-1)


def _encode_q4_1(w) -> np.ndarray:
    """Q4_1 blocks of ``w`` as ggml's ``quantize_row_q4_1_ref`` writes them, in float32:
    ``d = (max - min) / 15``, ``q = min(15, trunc((x - min) / d + 1/2))``."""
    x = np.asarray(w, dtype=np.float32).reshape(-1, 32)
    if not np.isfinite(x).all():
        raise ValueError("Q4_1 blocks need finite weights; these hold NaN or inf")
    low = x.min(axis=1, keepdims=True)
    d = (x.max(axis=1, keepdims=True) - low) / np.float32(15)
    with np.errstate(over="ignore"):  # an overflow is refused just below
        d16, m16 = d.astype(np.float16), low.astype(np.float16)
    if not (np.isfinite(d16).all() and np.isfinite(m16).all()):
        raise ValueError(
            "Q4_1 keeps each block's scale and minimum in float16, whose largest value is "
            "65504: these weights are too large for it"
        )
    with np.errstate(divide="ignore"):
        inv = np.where(d == 0, np.float32(0), np.float32(1) / d)
    q = np.minimum(np.trunc((x - low) * inv + np.float32(0.5)), 15).astype(np.uint8)
    qs = q[:, :16] | (q[:, 16:] << np.uint8(4))
    head = np.concatenate([d16.view(np.uint8), m16.view(np.uint8)], axis=1)
    return np.concatenate([head, qs], axis=1).reshape(-1)


def _refuse_non_finite(values: np.ndarray, per_row: int, what: str) -> None:
    """Refuse blocks whose float16 ``what`` (one value a block, ``per_row`` blocks a row) is
    not finite, as ggml's validation and the runtime's quant.mjs refuse them."""
    bad = ~np.isfinite(values)
    if bad.any():
        i = int(np.argmax(bad))
        raise GGUFError(
            f"block {i % per_row} of row {i // per_row} has a {what} that is not finite "
            f"({values[i]}): the data is damaged"
        )


def _decode_q4_1(blocks: np.ndarray, shape) -> np.ndarray:
    """Float32 weights ``q d + m`` of Q4_1 ``blocks`` (n, 20), computed as ggml does."""
    d = blocks[:, 0:2].copy().view("<f2").astype(np.float32)  # (n, 1)
    m = blocks[:, 2:4].copy().view("<f2").astype(np.float32)
    _refuse_non_finite(d[:, 0], shape[-1] // 32, "scale")
    _refuse_non_finite(m[:, 0], shape[-1] // 32, "minimum")
    qs = blocks[:, 4:]
    out = np.empty((blocks.shape[0], 32), np.float32)
    np.bitwise_and(qs, np.uint8(0x0F), out=out[:, :16], casting="unsafe")
    np.right_shift(qs, np.uint8(4), out=out[:, 16:], casting="unsafe")
    out *= d
    out += m
    return out.reshape(shape)


def _pack(qt: QuantizedTensor, t: int) -> np.ndarray:
    _, per_block, size, bits = BLOCKS[t]
    codes = qt.q.reshape(-1, per_block)
    d = qt.scales.reshape(-1, 1).astype("<f2").view(np.uint8)
    if bits == 8:
        qs = codes.view(np.uint8)
    else:  # two codes a byte: j in the low nibble, j + 16 in the high one
        qs = codes[:, : per_block // 2] | (codes[:, per_block // 2 :] << np.uint8(4))
    return np.concatenate([d, qs], axis=1)


def decode_blocks(data, ggml_type, shape, as_codes: bool = False):
    """Float32 weights of ``shape`` from Q8_0, Q4_0 or Q4_1 block bytes (or the codes and scales).

    Parameters
    ----------
    data : bytes-like or uint8 array
        Exactly :func:`block_bytes` bytes (more are ignored, fewer are an error).
    ggml_type : int or str
    shape : tuple of int
        NumPy order; the last axis is a row of whole blocks.
    as_codes : bool, optional
        Return the :class:`~attention_lib.quantize.QuantizedTensor` instead
        (Q8_0 and Q4_0 only).
    """
    t = _block_type(ggml_type)
    name, per_block, size, bits = BLOCKS[t]
    need = block_bytes(t, shape)
    raw = np.frombuffer(data, dtype=np.uint8) if not isinstance(data, np.ndarray) else data
    if raw.dtype != np.uint8 or raw.ndim != 1:
        raise TypeError(f"data must be bytes or a 1-D uint8 array, got {raw.dtype} {raw.shape}")
    if raw.size < need:
        raise GGUFError(
            f"a {name} tensor of shape {tuple(shape)} needs {need:,} bytes "
            f"({need // size:,} blocks of {size}), but the data has {raw.size:,}: truncated"
        )
    blocks = raw[:need].reshape(-1, size)
    if t == Q4_1:
        if as_codes:
            raise ValueError("Q4_1 blocks have a minimum as well as a scale: no QuantizedTensor")
        return _decode_q4_1(blocks, tuple(shape))
    d = blocks[:, :2].copy().view("<f2").astype(np.float16)
    _refuse_non_finite(d[:, 0], shape[-1] // per_block, "scale")
    qs = blocks[:, 2:]
    if bits == 8:
        codes = qs.view(np.int8)
    else:
        codes = np.concatenate([qs & np.uint8(0x0F), qs >> np.uint8(4)], axis=1)
    rows = need // size * per_block // shape[-1]
    qt = QuantizedTensor(codes.reshape(rows, shape[-1]), d.reshape(rows, -1), bits, per_block)
    if as_codes:
        return qt
    return dequantize(qt).reshape(shape)


def read_quantized(f: GGUFFile, name: str) -> np.ndarray:
    """Tensor ``name`` of a GGUF file read by :func:`~attention_lib.data.gguf.read_gguf`, as float32.

    F32/F16 tensors are read by ``f.tensor``; Q8_0, Q4_0 and Q4_1 ones are decoded
    here; any other quantized type is refused by name.
    """
    info = f.tensor_infos.get(name)
    if info is None:
        raise KeyError(f"{f.path}: no tensor named {name!r}")
    if info.ggml_type not in BLOCKS:
        return np.asarray(f.tensor(name), dtype=np.float32)
    need = block_bytes(info.ggml_type, info.shape)
    have = len(f._buffer) - info.offset
    if have < need:
        raise GGUFError(
            f"{f.path}: tensor {name!r} ({info.type_name}, shape {info.shape}) needs "
            f"{need:,} bytes from byte {info.offset:,}, but the file ends after {max(have, 0):,}: "
            "truncated"
        )
    data = np.frombuffer(f._buffer, dtype=np.uint8, count=need, offset=info.offset)
    try:
        return decode_blocks(data, info.ggml_type, info.shape)
    except GGUFError as err:
        raise GGUFError(f"{f.path}: tensor {name!r} ({info.type_name}): {err}") from None


def _string(s: str) -> bytes:
    b = s.encode("utf8")
    return struct.pack("<Q", len(b)) + b


def _value(key: str, v) -> bytes:
    """``v``'s GGUF type id and bytes; a value no GGUF type holds is refused, naming ``key``."""
    if isinstance(v, bool):
        return struct.pack("<IB", 7, v)
    if isinstance(v, int):
        if not -(2**63) <= v < 2**64:
            raise GGUFError(
                f"metadata {key!r} = {v} is beyond GGUF's integers "
                "(int64 from -2**63, uint64 up to 2**64 - 1)"
            )
        return struct.pack("<Iq", 11, v) if v < 0 else struct.pack("<IQ", 10, v)
    if isinstance(v, float):
        try:
            return struct.pack("<If", 6, v)
        except OverflowError:
            raise GGUFError(
                f"metadata {key!r} = {v!r} is beyond float32's range (about 3.4e38), "
                "the type this writer stores a float in"
            ) from None
    if isinstance(v, str):
        return struct.pack("<I", 8) + _string(v)
    raise TypeError(
        f"metadata {key!r}: values must be bool, int, float or str, got {type(v).__name__}"
    )


def _alignment(alignment, in_metadata) -> int:
    """The alignment to lay the data out at: the argument's or the metadata's, checked."""
    for what, a in (("alignment", alignment), ("general.alignment", in_metadata)):
        if a is not None and (
            isinstance(a, bool)
            or not isinstance(a, (int, np.integer))
            or not 8 <= a < 2**32
            or a & (a - 1)
        ):
            raise GGUFError(
                f"{what} must be a power of two from 8 to 2**31 (GGUF's specification asks "
                f"for a multiple of 8, ggml's reader for a power of two), got {a!r}"
            )
    if alignment is not None and in_metadata is not None and alignment != in_metadata:
        raise GGUFError(
            f"alignment = {alignment} but the metadata's general.alignment is {in_metadata}: "
            "the data would be laid out at one and read at the other; give one of them"
        )
    return int(next((a for a in (alignment, in_metadata) if a is not None), 32))


def write_gguf(
    path, tensors: dict, metadata: dict | None = None, alignment: int | None = None
) -> None:
    """Write a GGUF (version 3) file of ``{name: (array, type)}``, type "F32", "Q8_0" or "Q4_0".

    The file is what llama.cpp's ``gguf`` writer makes of the same tensors;
    :func:`~attention_lib.data.gguf.read_gguf` and :func:`read_quantized`
    read it back.

    Parameters
    ----------
    path : str or os.PathLike
    tensors : dict
        ``{name: (array, type)}``; a quantized array's last axis is its rows.
    metadata : dict, optional
        ``{key: bool, int, float or str}``: ints are stored as int64 or uint64,
        floats as float32.
    alignment : int, optional
        Where each tensor's data starts: a power of two from 8 to 2**31 (GGUF's
        specification asks for a multiple of 8, ggml's reader for a power of
        two). Default: the metadata's ``general.alignment``, else 32.

    Raises
    ------
    GGUFError
        Before anything is written: an alignment that is not such a power of
        two or that contradicts ``general.alignment``, a metadata value no GGUF
        type holds (naming its key), or a tensor that cannot be stored in its
        type (naming it: no whole blocks in its rows, or a float16 scale out
        of range).

    Examples
    --------
    >>> import tempfile, os
    >>> from attention_lib.data.gguf import read_gguf
    >>> w = np.linspace(-1, 1, 64, dtype=np.float32).reshape(2, 32)
    >>> path = os.path.join(tempfile.mkdtemp(), "tiny.gguf")
    >>> write_gguf(path, {"w": (w, "Q8_0")}, {"general.name": "tiny"})
    >>> f = read_gguf(path)
    >>> f.tensor_infos["w"].type_name, bool(np.abs(read_quantized(f, "w") - w).max() < 0.01)
    ('Q8_0', True)
    """
    metadata = dict(metadata or {})
    alignment = _alignment(alignment, metadata.get("general.alignment"))
    if alignment != 32:
        metadata["general.alignment"] = alignment
    pairs = b""  # every key and value checked before any tensor is encoded
    for k, v in metadata.items():
        if not isinstance(k, str):
            raise GGUFError(f"metadata keys must be strings, got {k!r}")
        if k == "general.alignment":
            pairs += _string(k) + struct.pack("<II", 4, v)
        else:
            pairs += _string(k) + _value(k, v)
    parts, infos, offset = [], [], 0
    for name, (array, kind) in tensors.items():  # every tensor checked before writing
        array = np.asarray(array)
        if kind == "F32":
            data = np.ascontiguousarray(array, dtype="<f4").view(np.uint8).reshape(-1)
            t = F32
        else:
            try:
                t = _block_type(kind)
                data = encode_blocks(array, t)
            except ValueError as err:  # GGUFError too
                raise GGUFError(f"tensor {name!r}: {err}") from None
        infos.append((name, array.shape[::-1], t, offset))
        pad = -data.size % alignment
        parts.append(data.tobytes() + b"\0" * pad)
        offset += data.size + pad
    head = b"GGUF" + struct.pack("<IQQ", 3, len(infos), len(metadata)) + pairs
    for name, dims, t, off in infos:
        head += _string(name) + struct.pack("<I", len(dims))
        head += b"".join(struct.pack("<Q", n) for n in dims) + struct.pack("<IQ", t, off)
    head += b"\0" * (-len(head) % alignment)
    write_atomic(Path(path), lambda f: f.write(head + b"".join(parts)), mode="wb")
