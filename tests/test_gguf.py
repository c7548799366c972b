"""The GGUF reader: every value type, versions 1-3, alignment, and bad files.

Small files are written here by a writer that follows the specification
(``docs/gguf.md`` in ggml) independently of the reader.
"""

import struct

import numpy as np
import pytest

from attention_lib import data_dir
from attention_lib.data.gguf import GGUFError, read_gguf

STORIES = data_dir() / "stories260k" / "tinyllamas-stories-260k-f32.gguf"

# value type ids of the specification
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
FMT = {
    U8: "<B",
    I8: "<b",
    U16: "<H",
    U16 + 1: "<h",
    U32: "<I",
    I32: "<i",
    F32: "<f",
    BOOL: "<B",
    U64: "<Q",
    I64: "<q",
    F64: "<d",
}


def _count(version, n):
    return struct.pack("<I" if version == 1 else "<Q", n)


def _string(version, s):
    raw = s.encode("utf-8") if isinstance(s, str) else s
    return _count(version, len(raw)) + raw


def _value(version, vtype, v):
    if vtype == STR:
        return _string(version, v)
    if vtype == ARR:
        etype, items = v
        body = b"".join(_value(version, etype, x) for x in items)
        return struct.pack("<I", etype) + _count(version, len(items)) + body
    return struct.pack(FMT[vtype], v)


def build(version=3, kvs=(), tensors=(), alignment=None, pad_tensors=True):
    """Bytes of a GGUF file.

    kvs: (key, type, value); tensors: (name, array of float32/float16, offset or None).
    Offsets are relative to the data start; None places the tensor after the last.
    """
    kvs = list(kvs)
    if alignment is not None:
        kvs.append(("general.alignment", U32, alignment))
    align = alignment or 32
    head = b"GGUF" + struct.pack("<I", version) + _count(version, len(tensors))
    head += _count(version, len(kvs))
    for key, vtype, v in kvs:
        head += _string(version, key) + struct.pack("<I", vtype) + _value(version, vtype, v)
    data, infos, end = bytearray(), b"", 0
    for name, array, offset in tensors:
        array = np.ascontiguousarray(array)
        if offset is None:
            offset = -(-end // align) * align if pad_tensors else end
        end = offset + array.nbytes
        data = data.ljust(end, b"\0")
        data[offset:end] = array.tobytes()
        gtype = {np.float32: 0, np.float16: 1, np.int32: 26}[array.dtype.type]
        infos += _string(version, name) + struct.pack("<I", array.ndim)
        infos += b"".join(_count(version, d) for d in reversed(array.shape))
        infos += struct.pack("<IQ", gtype, offset)
    out = head + infos
    out = out.ljust(-(-len(out) // align) * align, b"\0")
    return out + bytes(data)


def write(tmp_path, raw, name="m.gguf"):
    path = tmp_path / name
    path.write_bytes(raw)
    return path


ALL_TYPES = [
    ("t.u8", U8, 255),
    ("t.i8", I8, -128),
    ("t.u16", U16, 65535),
    ("t.i16", I16, -32768),
    ("t.u32", U32, 4_000_000_000),
    ("t.i32", I32, -2_000_000_000),
    ("t.f32", F32, 0.5),
    ("t.bool", BOOL, 1),
    ("t.str", STR, "héllo ▁world"),
    ("t.u64", U64, 2**64 - 1),
    ("t.i64", I64, -(2**63)),
    ("t.f64", F64, 1e-300),
    ("t.arr_f32", ARR, (F32, [1.0, -2.5, 3.25])),
    ("t.arr_str", ARR, (STR, ["a", "", "▁b"])),
    ("t.arr_bool", ARR, (BOOL, [1, 0])),
    ("t.arr_arr", ARR, (ARR, [(I32, [1, 2]), (STR, ["x"])])),
    ("t.arr_empty", ARR, (U8, [])),
]


@pytest.mark.parametrize("version", [1, 2, 3])
def test_every_value_type_reads_back_in_every_version(tmp_path, version):
    f = read_gguf(write(tmp_path, build(version, ALL_TYPES)))
    m = f.metadata
    assert f.version == version and f.tensor_infos == {}
    assert (m["t.u8"], m["t.i8"], m["t.u16"], m["t.i16"]) == (255, -128, 65535, -32768)
    assert (m["t.u32"], m["t.i32"], m["t.u64"], m["t.i64"]) == (
        4_000_000_000,
        -2_000_000_000,
        2**64 - 1,
        -(2**63),
    )
    assert m["t.f32"] == 0.5 and m["t.f64"] == 1e-300
    assert m["t.bool"] is True and m["t.str"] == "héllo ▁world"
    np.testing.assert_array_equal(m["t.arr_f32"], [1.0, -2.5, 3.25])
    assert m["t.arr_f32"].dtype == np.float32
    assert m["t.arr_str"] == ["a", "", "▁b"]
    np.testing.assert_array_equal(m["t.arr_bool"], [True, False])
    assert m["t.arr_arr"][1] == ["x"] and list(m["t.arr_arr"][0]) == [1, 2]
    assert m["t.arr_empty"].shape == (0,)
    assert f.metadata_types["t.arr_str"] == "array[string]"
    assert f.metadata_types["t.u32"] == "uint32"


@pytest.mark.parametrize("version", [1, 2, 3])
@pytest.mark.parametrize("alignment", [None, 8, 64])
def test_tensors_come_back_in_numpy_order_at_aligned_offsets(tmp_path, version, alignment):
    rng = np.random.default_rng(0)
    a = rng.normal(size=(3, 5)).astype(np.float32)
    b = rng.normal(size=(7,)).astype(np.float16)
    c = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    raw = build(
        version,
        [("general.architecture", STR, "toy")],
        [("a", a, None), ("b", b, None), ("c", c, None)],
        alignment,
    )
    f = read_gguf(write(tmp_path, raw))
    align = alignment or 32
    assert f.alignment == align and f.data_offset % align == 0
    np.testing.assert_array_equal(f.tensor("a"), a)
    np.testing.assert_array_equal(f.tensor("b"), b)
    np.testing.assert_array_equal(f.tensor("c"), c)
    assert f.tensor("b").dtype == np.float16
    assert f.tensor_infos["a"].dims == (5, 3) and f.tensor_infos["a"].shape == (3, 5)
    assert all(info.offset % align == 0 for info in f.tensor_infos.values())
    assert not f.tensor("a").flags.writeable  # a view of the file, not a copy


def test_the_stories260k_file(tmp_path):
    f = read_gguf(STORIES)
    m = f.metadata
    assert (f.version, f.alignment, len(f.tensor_infos), len(m)) == (1, 32, 48, 18)
    assert m["general.architecture"] == "llama"
    assert (
        m["llama.embedding_length"],
        m["llama.block_count"],
        m["llama.context_length"],
        m["llama.attention.head_count"],
        m["llama.attention.head_count_kv"],
        m["llama.feed_forward_length"],
    ) == (64, 5, 512, 8, 4, 172)
    assert len(m["tokenizer.ggml.tokens"]) == len(m["tokenizer.ggml.scores"]) == 512
    assert sum(int(np.prod(i.shape)) for i in f.tensor_infos.values()) == 292_800
    assert f.tensor("blk.0.attn_k.weight").shape == (32, 64)
    assert f.tensor("blk.0.ffn_down.weight").shape == (64, 172)


def _valid(version=3):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    return build(
        version,
        [("general.architecture", STR, "toy"), ("toy.list", ARR, (STR, ["ab", "cd"]))],
        [("x", x, None), ("y", x[:1], None)],
    )


@pytest.mark.parametrize("version", [1, 3])
def test_every_truncation_is_a_clear_error(tmp_path, version):
    raw = _valid(version)
    path = tmp_path / "cut.gguf"
    for n in range(len(raw)):
        path.write_bytes(raw[:n])
        with pytest.raises(GGUFError) as err:
            read_gguf(path)
        message = str(err.value)
        assert str(path) in message, (n, message)
        assert "truncated" in message or "empty" in message or "not a GGUF" in message, (n, message)


def test_bad_magic_names_what_it_found(tmp_path):
    raw = b"GGML" + _valid()[4:]
    with pytest.raises(GGUFError, match=r"not a GGUF file: it starts with b'GGML'"):
        read_gguf(write(tmp_path, raw))


@pytest.mark.parametrize("version", [0, 4, 2**31])
def test_unknown_version(tmp_path, version):
    raw = _valid()
    raw = raw[:4] + struct.pack("<I", version) + raw[8:]
    with pytest.raises(GGUFError, match=f"GGUF version {version} is not supported"):
        read_gguf(write(tmp_path, raw))


def test_big_endian_is_refused_by_name(tmp_path):
    raw = _valid()
    raw = raw[:4] + struct.pack(">I", 3) + raw[8:]
    with pytest.raises(GGUFError, match="big-endian"):
        read_gguf(write(tmp_path, raw))


@pytest.mark.parametrize(
    "field_at, what",
    [
        (8, "tensors"),
        (16, "key-value pairs"),
        (24, "bytes of the key"),
    ],
)
def test_huge_counts_are_refused_before_allocating(tmp_path, field_at, what):
    raw = _valid(3)
    raw = raw[:field_at] + struct.pack("<Q", 2**62) + raw[field_at + 8 :]
    with pytest.raises(GGUFError, match=f"holds {2**62:,} {what}"):
        read_gguf(write(tmp_path, raw))


def test_huge_array_count_is_refused_before_allocating(tmp_path):
    raw = build(1, [("k", ARR, (F32, [1.0, 2.0]))])
    at = raw.index(struct.pack("<I", F32) + struct.pack("<I", 2)) + 4
    raw = raw[:at] + struct.pack("<I", 2**32 - 1) + raw[at + 4 :]
    with pytest.raises(GGUFError, match="elements of the value of 'k'"):
        read_gguf(write(tmp_path, raw))


def test_huge_tensor_dimensions_run_past_the_end(tmp_path):
    x = np.zeros((2, 2), np.float32)
    raw = build(3, [], [("x", x, None)])
    at = raw.index(struct.pack("<QQ", 2, 2))
    raw = raw[:at] + struct.pack("<QQ", 2**40, 2**40) + raw[at + 16 :]
    with pytest.raises(GGUFError, match="'x'.*the file is shorter"):
        read_gguf(write(tmp_path, raw))


def test_misaligned_offset(tmp_path):
    x = np.zeros(4, np.float32)
    raw = build(3, [], [("x", x, 4)], pad_tensors=False)
    with pytest.raises(GGUFError, match="offset 4, which is not a multiple of the alignment 32"):
        read_gguf(write(tmp_path, raw))


@pytest.mark.parametrize("alignment", [0, 3, 48])
def test_alignment_must_be_a_power_of_two(tmp_path, alignment):
    with pytest.raises(GGUFError, match="general.alignment must be a uint32 power of two"):
        read_gguf(write(tmp_path, build(3, [], [], alignment)))


def test_overlapping_tensors(tmp_path):
    x = np.ones(16, np.float32)
    raw = build(3, [], [("x", x, 0), ("y", x, 32)], pad_tensors=False)
    with pytest.raises(GGUFError, match="'x' and 'y' overlap"):
        read_gguf(write(tmp_path, raw))


def test_duplicates_unknown_types_and_bad_values(tmp_path):
    cases = [
        (build(3, [("a", U8, 1), ("a", U8, 2)]), "the key 'a' appears twice"),
        (build(3, [("a", BOOL, 2)]), "bool stored as 2"),
        (build(3, [("a", STR, b"\xff\xfe")]), "not valid UTF-8"),
        (
            build(
                3, [], [("x", np.ones(1, np.float32), None), ("x", np.ones(1, np.float32), None)]
            ),
            "two tensors are named 'x'",
        ),
    ]
    raw = build(3, [("a", U8, 1)])
    at = raw.index(b"a") + 1
    cases.append((raw[:at] + struct.pack("<I", 13) + raw[at + 4 :], "value type 13"))
    nested = (
        "a",
        ARR,
        (ARR, [(ARR, [(ARR, [(ARR, [(ARR, [(ARR, [(ARR, [(ARR, [(U8, [])])])])])])])])]),
    )
    cases.append((build(3, [nested]), "nests arrays more than 8 deep"))
    for i, (raw, message) in enumerate(cases):
        with pytest.raises(GGUFError, match=message):
            read_gguf(write(tmp_path, raw, f"{i}.gguf"))


def test_too_many_dimensions(tmp_path):
    x = np.zeros((1, 1, 1, 1), np.float32)
    raw = build(3, [], [("x", x, None)])
    at = raw.index(b"x") + 1
    raw = raw[:at] + struct.pack("<I", 5) + raw[at + 4 :]
    with pytest.raises(GGUFError, match="'x' has 5 dimensions; GGUF allows 1 to 4"):
        read_gguf(write(tmp_path, raw))


def test_quantized_tensors_are_listed_but_not_read(tmp_path):
    raw = bytearray(build(3, [], [("q", np.zeros(32, np.float32), None)]))
    at = raw.index(b"q") + 1 + 4 + 8
    raw[at : at + 4] = struct.pack("<I", 2)  # Q4_0
    f = read_gguf(write(tmp_path, bytes(raw)))
    assert f.tensor_infos["q"].type_name == "Q4_0"
    with pytest.raises(GGUFError, match="'q' is Q4_0, a quantized type"):
        f.tensor("q")
    with pytest.raises(KeyError, match="no tensor named 'r'"):
        f.tensor("r")


def test_not_a_file(tmp_path):
    with pytest.raises(IsADirectoryError, match="is a folder"):
        read_gguf(tmp_path)
    with pytest.raises(FileNotFoundError):
        read_gguf(tmp_path / "missing.gguf")
