"""Round-to-nearest weight quantization, GGUF's Q8_0/Q4_0 blocks, and the 8-bit KV cache."""

import struct

import numpy as np
import pytest

from attention_lib.data.gguf import GGUFError, read_gguf
from attention_lib.data.gguf_quant import (
    block_bytes,
    decode_blocks,
    encode_blocks,
    read_quantized,
    write_gguf,
)
from attention_lib.nn import MultiHeadAttention
from attention_lib.quantize import SCHEMES, Int8KVCache, dequantize, quantize, quantize_matrix

RNG = np.random.default_rng(0)
W = RNG.normal(size=(6, 64)).astype(np.float32)


@pytest.mark.parametrize("bits", range(2, 9))
@pytest.mark.parametrize("group", [None, 32, 8])
def test_error_is_at_most_half_a_step_and_the_largest_weight_is_exact(bits, group):
    qt = quantize(W, bits, group)
    back = dequantize(qt)
    g = 64 if group is None else group
    d = np.abs(qt.scales.astype(np.float32)).repeat(g, axis=1)
    # Half a step inside the range both signs reach (plus the float16 rounding of
    # d times the largest code); one step at most beyond it, where the side
    # opposite the largest weight has one level fewer (below 8 bits).
    slack = 2 ** (bits - 1) * 2**-10
    err, inside = np.abs(back - W), np.abs(W) <= d * (2 ** (bits - 1) - 1)
    assert (err[inside] <= d[inside] * (0.5 + slack) + 1e-7).all()
    assert (err <= d * (1 + slack) + 1e-7).all()
    blocks = W.reshape(6, -1, g)
    big = np.abs(blocks).argmax(axis=-1)
    got = np.take_along_axis(back.reshape(6, -1, g), big[..., None], -1)
    want = np.take_along_axis(blocks, big[..., None], -1)
    np.testing.assert_allclose(got, want, rtol=2**-10)  # exact but for float16's d


def test_codes_use_the_whole_range_and_more_bits_are_closer():
    errors = [np.abs(dequantize(quantize(W, b, 32)) - W).mean() for b in range(2, 9)]
    assert all(a > b for a, b in zip(errors, errors[1:]))
    assert quantize(W, 4, 32).q.max() == 15 and quantize(W, 4, 32).q.min() <= 1
    assert np.abs(quantize(W, 8, 32).q).max() == 127


def test_bytes_per_scheme():
    n = W.size
    assert quantize(W, *SCHEMES["q8_0"]).nbytes == n // 32 * 34  # GGUF's Q8_0 block
    assert quantize(W, *SCHEMES["q4_0"]).nbytes == n // 32 * 18  # GGUF's Q4_0 block
    assert quantize(W, *SCHEMES["int8"]).nbytes == n + 2 * 6
    assert quantize(W, *SCHEMES["int2"]).nbytes == n // 4 + n // 32 * 2


def test_zero_rows_stay_zero():
    z = np.zeros((2, 32), np.float32)
    for bits in (8, 4, 2):
        np.testing.assert_array_equal(dequantize(quantize(z, bits, 32)), z)


def test_quantize_matrix_groups_along_the_input_axis():
    Wl = RNG.normal(size=(64, 5))  # (d_in, d_out)
    qt = quantize_matrix(Wl, 4, 32)
    assert qt.shape == (5, 64)
    np.testing.assert_array_equal(dequantize(qt), dequantize(quantize(Wl.T, 4, 32)))


@pytest.mark.parametrize(
    "args, err, match",
    [
        ((W, 4, 24), ValueError, "group_size = 24 does not divide the row length 64"),
        ((W, 1, 32), ValueError, "bits must be an integer from 2 to 8, got 1"),
        ((W, 9, 32), ValueError, "bits must be an integer from 2 to 8, got 9"),
        ((W, 4.0, 32), ValueError, "bits must be an integer"),
        ((W, 4, 0), ValueError, "group_size must be a positive integer"),
        ((W[0], 4, 32), ValueError, "2-D array of rows"),
        ((np.full((1, 32), np.nan), 8, 32), ValueError, "finite"),
        ((W.astype(str), 8, 32), TypeError, "real numbers"),
    ],
)
def test_bad_arguments_are_named(args, err, match):
    with pytest.raises(err, match=match):
        quantize(*args)


def test_bad_group_is_refused_before_any_work(monkeypatch):
    import attention_lib.quantize as q

    def boom(*a, **k):
        raise AssertionError("work started before the check")

    monkeypatch.setattr(q.np, "abs", boom)
    with pytest.raises(ValueError, match="does not divide"):
        q.quantize(np.zeros((1, 50), np.float32), 4, 32)


# GGUF blocks -------------------------------------------------------------


def _spec_q4_0_block(x):
    """One Q4_0 block written from the GGUF/ggml description, with struct, value by value."""
    m = max(x, key=abs)
    d = np.float32(m) / np.float32(-8)
    inv = np.float32(1) / d if d else np.float32(0)
    q = [min(15, int(np.float32(v) * inv + np.float32(8.5))) for v in x]
    return struct.pack("<e", d) + bytes(q[j] | (q[j + 16] << 4) for j in range(16))


def _spec_q8_0_block(x):
    d = np.float32(max(abs(v) for v in x)) / np.float32(127)
    inv = np.float32(1) / d if d else np.float32(0)
    q = [int(np.sign(v * inv) * np.floor(abs(np.float32(v) * inv) + np.float32(0.5))) for v in x]
    return struct.pack("<e", d) + struct.pack("<32b", *q)


def test_blocks_match_the_layout_of_the_specification():
    row = W[0]
    assert encode_blocks(row[None], "Q4_0").tobytes() == b"".join(
        _spec_q4_0_block(list(row[i : i + 32])) for i in (0, 32)
    )
    assert encode_blocks(row[None], "Q8_0").tobytes() == b"".join(
        _spec_q8_0_block(list(row[i : i + 32])) for i in (0, 32)
    )


def test_blocks_match_llama_cpp_gguf_package():
    gguf = pytest.importorskip("gguf")
    from gguf import quants

    x = RNG.normal(size=(7, 96)).astype(np.float32)
    x[0, :32] = 0  # an all-zero block
    for name, t in (
        ("Q8_0", gguf.GGMLQuantizationType.Q8_0),
        ("Q4_0", gguf.GGMLQuantizationType.Q4_0),
    ):
        ours = encode_blocks(x, name)
        theirs = quants.quantize(x, t).reshape(-1)
        np.testing.assert_array_equal(ours, theirs)
        np.testing.assert_array_equal(
            decode_blocks(ours, name, x.shape), quants.dequantize(theirs.reshape(7, -1), t)
        )


@pytest.mark.parametrize("name, bits", [("Q8_0", 8), ("Q4_0", 4)])
def test_block_round_trip(name, bits):
    data = encode_blocks(W, name)
    assert data.size == block_bytes(name, W.shape)
    qt = decode_blocks(data, name, W.shape, as_codes=True)
    ref = quantize(W, bits, 32)
    np.testing.assert_array_equal(qt.q, ref.q)
    np.testing.assert_array_equal(qt.scales, ref.scales)
    np.testing.assert_array_equal(decode_blocks(data, name, W.shape), dequantize(ref))
    # Writing what was read gives the same bytes.
    np.testing.assert_array_equal(encode_blocks(decode_blocks(data, name, W.shape), name), data)


def test_gguf_file_round_trip_and_llama_cpp_reads_it(tmp_path):
    path = tmp_path / "m.gguf"
    tensors = {"a": (W, "Q4_0"), "b": (W, "Q8_0"), "c": (W[:, :5], "F32")}
    write_gguf(path, tensors, {"general.name": "test", "test.layers": 2})
    f = read_gguf(path)
    assert f.metadata["general.name"] == "test" and f.metadata["test.layers"] == 2
    assert [f.tensor_infos[n].type_name for n in "abc"] == ["Q4_0", "Q8_0", "F32"]
    np.testing.assert_array_equal(read_quantized(f, "a"), dequantize(quantize(W, 4, 32)))
    np.testing.assert_array_equal(read_quantized(f, "b"), dequantize(quantize(W, 8, 32)))
    np.testing.assert_array_equal(read_quantized(f, "c"), W[:, :5])
    gguf = pytest.importorskip("gguf")
    reader = gguf.GGUFReader(path)
    got = {t.name: gguf.quants.dequantize(t.data, t.tensor_type) for t in reader.tensors}
    np.testing.assert_array_equal(got["a"].reshape(W.shape), read_quantized(f, "a"))


def test_unknown_block_type_and_bad_rows_are_named():
    with pytest.raises(GGUFError, match=r"block type 'Q4_K' is not one this module"):
        encode_blocks(W, 12)
    with pytest.raises(GGUFError, match="block type 'Q5_0'"):
        decode_blocks(b"", "Q5_0", (1, 32))
    with pytest.raises(GGUFError, match="whole blocks of 32 weights.*have 50"):
        encode_blocks(np.zeros((2, 50)), "Q8_0")


def test_truncated_q4_0_tensor_is_refused_before_allocation():
    data = encode_blocks(W, "Q4_0")
    with pytest.raises(GGUFError, match=r"needs 216 bytes \(12 blocks of 18\).*has 215: truncated"):
        decode_blocks(data[:-1], "Q4_0", W.shape)
    # A shape of 10^12 weights is refused from its size, before any array is made.
    with pytest.raises(GGUFError, match="truncated"):
        decode_blocks(data, "Q4_0", (10**6, 10**6 // 32 * 32))


def test_truncated_q4_0_tensor_in_a_file(tmp_path):
    path = tmp_path / "m.gguf"
    write_gguf(path, {"a": (W, "Q4_0")})
    raw = path.read_bytes()
    (tmp_path / "cut.gguf").write_bytes(raw[:-40])
    f = read_gguf(tmp_path / "cut.gguf")
    with pytest.raises(GGUFError, match="'a' \\(Q4_0, shape \\(6, 64\\)\\) needs 216 bytes"):
        read_quantized(f, "a")


# 8-bit KV cache -----------------------------------------------------------


def test_int8_kv_cache_is_close_and_a_quarter_of_the_bytes():
    att = MultiHeadAttention(16, 4, np.random.default_rng(0), dtype=np.float32)
    x = np.random.default_rng(1).normal(size=(1, 10, 16)).astype(np.float32)
    exact = att.forward(x, is_causal=True)
    cache = Int8KVCache()
    out = np.concatenate(
        [att.forward(x[:, :6], is_causal=True, cache=cache)]
        + [att.forward(x[:, t : t + 1], is_causal=True, cache=cache) for t in range(6, 10)],
        axis=1,
    )
    assert 0 < np.abs(out - exact).max() < 0.02
    # 4 heads x 4 features: int8 codes plus a float16 scale per row, keys and values.
    assert cache.nbytes == 2 * 10 * 4 * (4 + 2)
    cache.truncate(7)
    assert len(cache) == 7 and cache.nbytes == 2 * 7 * 4 * (4 + 2)


# Whole models -------------------------------------------------------------


def test_quantize_model_changes_every_matrix_and_counts_the_bytes():
    from attention_lib import TinyGPT
    from attention_lib.quantize import quantize_model

    model = TinyGPT(10, 64, 2, 2, 96, 8, np.random.default_rng(0))
    before = {k: a.copy() for k, a in model.params.items()}
    report = quantize_model(model, "q4_0")
    for k, a in model.params.items():
        changed = not np.array_equal(a, before[k])
        assert changed == (a.ndim == 2), k  # matrices quantized, vectors kept
    # Every matrix is on the 4-bit grid of its groups: quantizing again changes nothing.
    again = {k: a.copy() for k, a in model.params.items()}
    quantize_model(model, "q4_0")
    for k, a in model.params.items():
        np.testing.assert_allclose(a, again[k], atol=1e-6, err_msg=k)
    matrices = sum(a.size for a in before.values() if a.ndim == 2)
    vectors = sum(a.size for a in before.values() if a.ndim != 2)
    assert report["bytes"] == matrices // 32 * 18 + 4 * vectors
    assert report["float32_bytes"] == 4 * (matrices + vectors) and report["fallback"] == []


def test_quantize_model_falls_back_to_int8_rows_and_refuses_unknown_schemes():
    from attention_lib import TinyGPT
    from attention_lib.quantize import quantize_model

    model = TinyGPT(10, 64, 2, 1, 40, 8, np.random.default_rng(0))  # d_ff = 40
    report = quantize_model(model, "int2")
    assert len(report["fallback"]) == 1 and report["fallback"][0].endswith(".W")
    with pytest.raises(ValueError, match="scheme must be one of int8, q8_0, q4_0, int3, int2"):
        quantize_model(model, "q5_k")
