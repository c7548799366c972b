"""GGUF, the file format of llama.cpp and ggml, read with ``struct`` and NumPy.

A GGUF file is a header, a list of typed key-value pairs (the model's
configuration and its tokenizer), a list of tensor descriptions (name, shape,
element type, offset) and then the tensors' bytes, each starting at a multiple
of the file's alignment. Nothing in it is executed or unpickled: every field
is read with :func:`struct.unpack_from`, and every tensor is a NumPy view of
the file's bytes (memory-mapped, no copy).

Layout, all little-endian (the specification is ``docs/gguf.md`` in
https://github.com/ggml-org/ggml)::

    b"GGUF"  uint32 version  count n_tensors  count n_kv
    n_kv times:      string key, uint32 value_type, value
    n_tensors times: string name, uint32 n_dims, count dims[n_dims],
                     uint32 ggml_type, uint64 offset
    zero padding to a multiple of ALIGNMENT
    tensor data (each tensor at data_start + offset, offset % ALIGNMENT == 0)

A ``count`` (and a string's or an array's length) is a ``uint32`` in version 1
and a ``uint64`` from version 2 on; that is the only difference between the
versions that a reader sees (version 3 allows big-endian files, which this
reader refuses). ``ALIGNMENT`` is the ``uint32`` key ``general.alignment``,
32 when absent.

ggml lists a tensor's dimensions fastest-varying first (``ne[0]`` is the
length of a row), the reverse of NumPy's order: a ggml ``[64, 512]`` tensor
is a NumPy ``(512, 64)`` array. :attr:`GGUFTensorInfo.shape` is in NumPy's
order; :attr:`GGUFTensorInfo.dims` keeps the file's.

Every count and length is checked against the bytes left in the file before
anything is allocated, so a truncated or corrupted file raises
:class:`GGUFError` naming the file, the byte offset and what is wrong.
"""

import itertools
import mmap
import struct
from pathlib import Path

import numpy as np

MAGIC = b"GGUF"
VERSIONS = (1, 2, 3)
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4  # ggml's GGML_MAX_DIMS
MAX_NESTING = 8  # arrays of arrays of ...: deeper is surely corrupt

# metadata value types: id -> (name, struct format or None for variable size)
VALUE_TYPES = {
    0: ("uint8", "<B"),
    1: ("int8", "<b"),
    2: ("uint16", "<H"),
    3: ("int16", "<h"),
    4: ("uint32", "<I"),
    5: ("int32", "<i"),
    6: ("float32", "<f"),
    7: ("bool", "<B"),
    8: ("string", None),
    9: ("array", None),
    10: ("uint64", "<Q"),
    11: ("int64", "<q"),
    12: ("float64", "<d"),
}
STRING, ARRAY, BOOL = 8, 9, 7

#: The most elements one axis of a tensor may have (ggml's and NumPy's int64 limit).
MAX_ELEMENTS = 2**63 - 1

# tensor element types this reader turns into arrays: ggml id -> (name, NumPy dtype)
TENSOR_TYPES = {
    0: ("F32", "<f4"),
    1: ("F16", "<f2"),
    24: ("I8", "i1"),
    25: ("I16", "<i2"),
    26: ("I32", "<i4"),
    27: ("I64", "<i8"),
    28: ("F64", "<f8"),
}
# the others by name, so that an error can say what the file holds
GGML_TYPE_NAMES = {
    2: "Q4_0",
    3: "Q4_1",
    6: "Q5_0",
    7: "Q5_1",
    8: "Q8_0",
    9: "Q8_1",
    10: "Q2_K",
    11: "Q3_K",
    12: "Q4_K",
    13: "Q5_K",
    14: "Q6_K",
    15: "Q8_K",
    16: "IQ2_XXS",
    17: "IQ2_XS",
    18: "IQ3_XXS",
    19: "IQ1_S",
    20: "IQ4_NL",
    21: "IQ3_S",
    22: "IQ2_S",
    23: "IQ4_XS",
    29: "IQ1_M",
    30: "BF16",
    **{k: name for k, (name, _) in TENSOR_TYPES.items()},
}


class GGUFError(ValueError):
    """Not a valid GGUF file, or one this reader cannot read: the message says where and why."""


class GGUFTensorInfo:
    """Where one tensor lives in a GGUF file.

    Attributes
    ----------
    name : str
    dims : tuple of int
        The dimensions as the file lists them (ggml order, fastest first).
    shape : tuple of int
        NumPy's order: ``dims`` reversed.
    ggml_type : int
        The element type's id in ggml (0 is F32, 1 is F16).
    type_name : str
        Its name, e.g. ``"F32"``.
    offset : int
        Absolute byte offset of the first element in the file.
    nbytes : int or None
        Size of the data, when the element type is one this reader supports.
    """

    __slots__ = ("dims", "ggml_type", "name", "nbytes", "offset", "shape", "type_name")

    def __init__(self, name, dims, ggml_type, offset):
        self.name = name
        self.dims = tuple(dims)
        self.shape = tuple(reversed(self.dims))
        self.ggml_type = ggml_type
        self.type_name = GGML_TYPE_NAMES.get(ggml_type, f"type {ggml_type}")
        self.offset = offset
        dtype = TENSOR_TYPES.get(ggml_type)
        self.nbytes = (
            int(np.prod(self.dims, dtype=object)) * np.dtype(dtype[1]).itemsize if dtype else None
        )

    def __repr__(self):
        return (
            f"GGUFTensorInfo({self.name!r}, shape={self.shape}, "
            f"type={self.type_name}, offset={self.offset})"
        )


class GGUFFile:
    """A parsed GGUF file: its metadata and its tensors.

    Made by :func:`read_gguf`. Tensors are read lazily, as read-only NumPy
    views of the memory-mapped file.

    Attributes
    ----------
    path : pathlib.Path
    version : int
        1, 2 or 3.
    metadata : dict
        key -> value: ``int``, ``float``, ``bool``, ``str``, a NumPy array for
        an array of numbers, a list of ``str`` for an array of strings, a list
        for an array of arrays.
    metadata_types : dict
        key -> the value's type in the file, e.g. ``"uint32"``,
        ``"array[string]"``.
    tensor_infos : dict
        name -> :class:`GGUFTensorInfo`, in file order.
    alignment : int
    data_offset : int
        Where the tensor data starts.
    """

    def __init__(
        self, path, buffer, version, metadata, metadata_types, tensor_infos, alignment, data_offset
    ):
        self.path = path
        self._buffer = buffer
        self.version = version
        self.metadata = metadata
        self.metadata_types = metadata_types
        self.tensor_infos = tensor_infos
        self.alignment = alignment
        self.data_offset = data_offset

    def tensor(self, name):
        """The tensor ``name`` as a read-only NumPy array in NumPy's axis order.

        Raises
        ------
        KeyError
            If the file has no tensor of that name (the message lists some).
        GGUFError
            If its element type is quantized (only F32, F16, F64 and the
            integer types are read).
        """
        info = self.tensor_infos.get(name)
        if info is None:
            names = ", ".join(list(self.tensor_infos)[:6])
            raise KeyError(
                f"{self.path}: no tensor named {name!r} (it has "
                f"{len(self.tensor_infos)} tensors: {names}, ...)"
            )
        if info.ggml_type not in TENSOR_TYPES:
            raise GGUFError(
                f"{self.path}: tensor {name!r} is {info.type_name}, a "
                "quantized type; this reader reads only F32, F16, F64 "
                "and integer tensors"
            )
        dtype = np.dtype(TENSOR_TYPES[info.ggml_type][1])
        count = info.nbytes // dtype.itemsize
        array = np.frombuffer(self._buffer, dtype=dtype, count=count, offset=info.offset)
        return array.reshape(info.shape)

    def __repr__(self):
        return (
            f"GGUFFile({str(self.path)!r}, version={self.version}, "
            f"{len(self.metadata)} keys, {len(self.tensor_infos)} tensors)"
        )


class _Reader:
    """A cursor over the file's bytes that checks every read against its end."""

    def __init__(self, path, buffer):
        self.path, self.buffer, self.pos, self.size = path, buffer, 0, len(buffer)
        self.count = "<I"  # set to "<Q" for versions 2 and 3

    def fail(self, what, at=None):
        at = self.pos if at is None else at
        return GGUFError(f"{self.path}: {what} (at byte {at:,} of {self.size:,})")

    def left(self):
        return self.size - self.pos

    def unpack(self, fmt, what):
        n = struct.calcsize(fmt)
        if n > self.left():
            raise self.fail(
                f"the file is truncated: it ends inside {what}, which needs "
                f"{n} bytes and {self.left()} remain"
            )
        value = struct.unpack_from(fmt, self.buffer, self.pos)[0]
        self.pos += n
        return value

    def counted(self, what, min_item_bytes):
        """A count (of items of at least ``min_item_bytes`` each) that fits in the file."""
        at = self.pos
        n = self.unpack(self.count, f"the count of {what}")
        if n * min_item_bytes > self.left():
            raise self.fail(
                f"the file says it holds {n:,} {what}, which need at least "
                f"{n * min_item_bytes:,} bytes, but only {self.left():,} "
                "remain (truncated or corrupted)",
                at,
            )
        return n

    def string(self, what):
        at = self.pos
        n = self.counted(f"bytes of {what}", 1)
        raw = bytes(self.buffer[self.pos : self.pos + n])
        self.pos += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"{what} is not valid UTF-8: {raw[:40]!r}", at) from None

    def value_type(self, what):
        """The (uint32) value type of ``what``, checked."""
        vtype = self.unpack("<I", f"the type of {what}")
        if vtype not in VALUE_TYPES:
            raise self.fail(
                f"{what} has value type {vtype}, which is not a GGUF type "
                f"(0 to {max(VALUE_TYPES)})",
                self.pos - 4,
            )
        return vtype

    def value(self, vtype, what, depth=0):
        name, fmt = VALUE_TYPES[vtype]
        if vtype == STRING:
            return self.string(what), "string"
        if vtype == ARRAY:
            return self.array(what, depth)
        at = self.pos
        v = self.unpack(fmt, what)
        if vtype == BOOL:
            if v not in (0, 1):
                raise self.fail(f"{what} is a bool stored as {v}; GGUF allows 0 or 1", at)
            v = bool(v)
        return v, name

    def array(self, what, depth):
        if depth >= MAX_NESTING:
            raise self.fail(f"{what} nests arrays more than {MAX_NESTING} deep")
        etype = self.value_type(f"each element of {what}")
        ename, fmt = VALUE_TYPES[etype]
        if fmt is not None and etype != BOOL:  # numbers: one view of the bytes
            size = struct.calcsize(fmt)
            n = self.counted(f"elements of {what}", size)
            values = np.frombuffer(
                self.buffer, dtype=np.dtype(fmt), count=n, offset=self.pos
            ).copy()
            self.pos += n * size
            return values, f"array[{ename}]"
        # strings (a length each), bools (checked one by one), arrays (type and count)
        c = struct.calcsize(self.count)
        min_bytes = {STRING: c, BOOL: 1, ARRAY: 4 + c}[etype]
        n = self.counted(f"elements of {what}", min_bytes)
        items = [self.value(etype, f"element {i} of {what}", depth + 1)[0] for i in range(n)]
        if etype == BOOL:
            items = np.array(items, dtype=bool)
        return items, f"array[{ename}]"


def read_gguf(path):
    """Read a GGUF file's metadata and tensor table; tensors are mapped, not read.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    GGUFFile

    Raises
    ------
    FileNotFoundError, IsADirectoryError
        If ``path`` is not a file.
    GGUFError
        If the file is not GGUF (wrong magic), is big-endian or of an unknown
        version, is truncated anywhere, holds a count or length larger than
        the bytes left, an unknown value type, a duplicate key or tensor name,
        a ``general.alignment`` that is not a power of two, or a tensor whose
        offset is not a multiple of the alignment, whose data runs past the
        end of the file or overlaps another tensor's.

    Examples
    --------
    >>> from attention_lib.data.gguf import read_gguf
    >>> from attention_lib import data_dir
    >>> f = read_gguf(data_dir() / "stories260k" / "tinyllamas-stories-260k-f32.gguf")
    >>> f.version, f.metadata["general.architecture"], f.metadata["llama.block_count"]
    (1, 'llama', 5)
    >>> f.tensor("token_embd.weight").shape     # one row per token
    (512, 64)
    """
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder, not a GGUF file")
    with open(path, "rb") as f:
        if f.seek(0, 2) == 0:
            raise GGUFError(f"{path}: the file is empty, not a GGUF file")
        buffer = memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
    return _parse(path, buffer)


def _parse(path, buffer):
    r = _Reader(path, buffer)
    magic = bytes(buffer[:4])
    if magic != MAGIC:
        raise r.fail(f"not a GGUF file: it starts with {magic!r}, not {MAGIC!r}", 0)
    r.pos = 4
    version = r.unpack("<I", "the version")
    if version not in VERSIONS and int.from_bytes(struct.pack("<I", version), "big") in VERSIONS:
        raise r.fail("this is a big-endian GGUF file; only little-endian files are read", 4)
    if version not in VERSIONS:
        raise r.fail(f"GGUF version {version} is not supported (versions 1, 2 and 3 are)", 4)
    r.count = "<I" if version == 1 else "<Q"
    c = struct.calcsize(r.count)
    n_tensors = r.counted("tensors", c + 4 + 4 + 8)  # name length, n_dims, type, offset
    n_kv = r.counted("key-value pairs", c + 4 + 1)  # key length, value type, value

    metadata, types = {}, {}
    for i in range(n_kv):
        key = r.string(f"the key of key-value pair {i}")
        if key in metadata:
            raise r.fail(f"the key {key!r} appears twice")
        vtype = r.value_type(f"the value of {key!r}")
        metadata[key], types[key] = r.value(vtype, f"the value of {key!r}")

    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if "general.alignment" in metadata and (
        types["general.alignment"] != "uint32" or alignment <= 0 or alignment & (alignment - 1)
    ):
        raise r.fail(
            f"general.alignment must be a uint32 power of two, got "
            f"{alignment!r} ({types['general.alignment']})"
        )

    infos = []
    for i in range(n_tensors):
        name = r.string(f"the name of tensor {i}")
        at = r.pos
        n_dims = r.unpack("<I", f"the number of dimensions of {name!r}")
        if not 1 <= n_dims <= MAX_DIMS:
            raise r.fail(
                f"tensor {name!r} has {n_dims} dimensions; GGUF allows 1 to {MAX_DIMS}", at
            )
        dims = [r.unpack(r.count, f"the dimensions of {name!r}") for _ in range(n_dims)]
        if max(dims) > MAX_ELEMENTS:  # (a larger product runs past the file's end, below)
            raise r.fail(
                f"tensor {name!r} has dimensions {dims}: more than 2**63 - 1 elements "
                "along one axis (NumPy, and ggml, cannot index them)",
                at,
            )
        nonzero = int(np.prod([n for n in dims if n], dtype=object))
        if 0 in dims and nonzero > MAX_ELEMENTS // 8:  # (without a zero: the file's end, below)
            raise r.fail(
                f"tensor {name!r} has dimensions {dims}: with the zero left out they "
                "multiply to more than 2**60, a shape NumPy (and ggml) cannot hold even "
                "empty",
                at,
            )
        ggml_type = r.unpack("<I", f"the element type of {name!r}")
        at = r.pos
        offset = r.unpack("<Q", f"the data offset of {name!r}")
        if offset % alignment:
            raise r.fail(
                f"tensor {name!r} has data offset {offset:,}, which is not a "
                f"multiple of the alignment {alignment}",
                at,
            )
        infos.append((name, dims, ggml_type, offset, at))

    data_offset = -(-r.pos // alignment) * alignment
    if data_offset > r.size and n_tensors:
        raise r.fail(
            f"the file is truncated: it ends before its tensor data starts (byte {data_offset:,})"
        )
    tensor_infos, spans = {}, []
    for name, dims, ggml_type, offset, at in infos:
        if name in tensor_infos:
            raise r.fail(f"two tensors are named {name!r}", at)
        info = GGUFTensorInfo(name, dims, ggml_type, data_offset + offset)
        if info.nbytes is not None:
            if info.offset + info.nbytes > r.size:
                raise r.fail(
                    f"tensor {name!r} ({info.type_name}, shape {info.shape}) "
                    f"needs bytes {info.offset:,} to {info.offset + info.nbytes:,} "
                    "but the file is shorter (truncated)",
                    at,
                )
            spans.append((info.offset, info.offset + info.nbytes, name))
        tensor_infos[name] = info
    spans.sort()
    for (_, end, first), (start, _, second) in itertools.pairwise(spans):
        if start < end:
            raise r.fail(f"the data of tensors {first!r} and {second!r} overlap")
    return GGUFFile(path, buffer, version, metadata, types, tensor_infos, alignment, data_offset)
