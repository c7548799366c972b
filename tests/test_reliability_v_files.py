"""Reliability V: quantization's float16 scales, GGUF writing and reading, and the training CLIs.

Every command-line test calls the module's ``main(argv)`` in this process with
``--out`` in ``tmp_path`` (never ``data/``) and with the step that would start
the work replaced by one that fails the test: the error must come first.
"""

import json
import re
import struct

import numpy as np
import pytest

from attention_lib.data.gguf import GGUFError, read_gguf
from attention_lib.data.gguf_quant import decode_blocks, read_quantized, write_gguf
from attention_lib.quantize import Int8KVCache, dequantize, quantize, quantize_model


class WorkStarted(Exception):
    """Raised by the stand-in for the expensive step: the command did not refuse first."""


def _work_started(*args, **kwargs):
    raise WorkStarted


# --- 9: float16 scales that overflow or underflow -------------------------------------------


@pytest.mark.parametrize("bits", [8, 4, 3, 2])
@pytest.mark.parametrize("group_size", [32, None])
def test_quantize_refuses_weights_whose_float16_scale_overflows(bits, group_size):
    w = np.ones((2, 64), np.float32)
    w[1, 40] = 1e7  # row 1, group 1 (of 32); beyond 65504 * 127 for any number of bits
    with pytest.raises(ValueError, match=r"row 1.*65,?504") as err:
        quantize(w, bits, group_size)
    if group_size is not None:
        assert "group 1" in str(err.value)


@pytest.mark.parametrize("bits, tiny", [(8, 1e-7), (8, 1e-6), (4, 1e-7), (4, 3e-7)])
def test_quantize_refuses_a_group_whose_scale_underflows_to_zero_or_loses_its_precision(
    bits, tiny
):
    # the scale rounds to float16 0 (read back as zeros) or to a subnormal far off
    w = np.ones((2, 64), np.float32)
    w[1, 32:] = tiny
    with pytest.raises(ValueError, match=r"row 1, group 1.*too small for float16"):
        quantize(w, bits, 32)


@pytest.mark.parametrize("bits", [8, 4, 3, 2])
def test_quantized_small_groups_read_back_within_one_step(bits):
    w = np.random.default_rng(0).normal(size=(64, 32)).astype(np.float32)
    w *= np.logspace(-4, 0, 64, dtype=np.float32)[:, None]
    kept = 0
    for row in w[:, None]:  # each row is refused, loudly, or read back within one step
        try:
            qt = quantize(row, bits, 32)
        except ValueError as err:
            assert "too small for float16" in str(err)
            continue
        kept += 1
        step = np.abs(qt.scales.astype(np.float32))
        assert np.all(np.abs(dequantize(qt) - row) <= step * 1.001)
    assert kept >= 32


def test_quantize_keeps_small_groups_whose_scale_float16_holds_and_zero_groups():
    w = np.zeros((3, 32), np.float32)
    w[1] = np.linspace(-0.01, 0.01, 32)  # small but well within float16's scales
    back = dequantize(quantize(w, 8, 32))
    assert np.all(np.isfinite(back)) and np.abs(back - w).max() <= 0.01 / 127
    assert not back[0].any() and not back[2].any()


def test_quantize_model_names_the_matrix_and_leaves_the_model_unchanged():
    from attention_lib import TinyGPT

    m = TinyGPT(10, 32, 2, 1, 64, 8, np.random.default_rng(0))
    leaf, layer = m.named_leaves()[-1]
    k = next(k for k, a in layer.params.items() if np.ndim(a) == 2)
    layer.params[k] = layer.params[k].copy()
    layer.params[k][0, 0] = 1e7
    before = {key: v.copy() for key, v in m.state_dict().items()}
    with pytest.raises(ValueError, match=re.escape(f"{leaf}.{k}")):
        quantize_model(m, "q8_0")
    after = m.state_dict()
    assert all(np.array_equal(before[key], after[key]) for key in before)


def test_int8_kv_cache_refuses_keys_beyond_float16_scales():
    cache = Int8KVCache()
    k = np.ones((1, 1, 2, 4), np.float32)
    v = k.copy()
    v[0, 0, 1, 2] = 1e7
    with pytest.raises(ValueError, match="values.*float16"):
        cache.append(k, v)
    assert cache.nbytes == 0 and cache.k is None


# --- 10, 12, 13, 14: write_gguf's arguments --------------------------------------------------


def test_write_gguf_lays_data_out_at_the_alignment_its_metadata_gives(tmp_path):
    path = tmp_path / "a.gguf"
    w = np.linspace(-1, 1, 64, dtype=np.float32).reshape(2, 32)
    write_gguf(path, {"a": (w, "Q8_0"), "b": (w, "Q4_0")}, {"general.alignment": 64})
    f = read_gguf(path)
    assert f.alignment == 64
    assert np.abs(read_quantized(f, "b") - w).max() < 0.1


def test_write_gguf_refuses_an_alignment_that_contradicts_the_metadata(tmp_path):
    w = np.ones((1, 32), np.float32)
    with pytest.raises(GGUFError, match="general.alignment"):
        write_gguf(tmp_path / "a.gguf", {"w": (w, "Q8_0")}, {"general.alignment": 64}, 128)
    assert not (tmp_path / "a.gguf").exists()


@pytest.mark.parametrize("alignment", [0, 3, 7, 4, -32, 2**32, 32.0, True])
def test_write_gguf_refuses_an_alignment_that_is_not_a_power_of_two_of_at_least_8(
    tmp_path, alignment
):
    w = np.ones((1, 32), np.float32)
    with pytest.raises(GGUFError, match="alignment"):
        write_gguf(tmp_path / "a.gguf", {"w": (w, "Q8_0")}, alignment=alignment)
    with pytest.raises(GGUFError, match="alignment"):
        write_gguf(tmp_path / "b.gguf", {"w": (w, "Q8_0")}, {"general.alignment": alignment})
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("value", [2**64, -(2**63) - 1, 1e40, -1e39])
def test_write_gguf_names_the_metadata_key_whose_value_gguf_cannot_hold(tmp_path, value):
    w = np.ones((1, 32), np.float32)
    with pytest.raises(GGUFError, match="'my.key'"):
        write_gguf(tmp_path / "a.gguf", {"w": (w, "Q8_0")}, {"my.key": value})
    assert not (tmp_path / "a.gguf").exists()


def test_write_gguf_round_trips_the_extremes_gguf_holds(tmp_path):
    path = tmp_path / "a.gguf"
    meta = {"big": 2**64 - 1, "small": -(2**63), "f": 3.0e38}
    write_gguf(path, {"w": (np.ones((1, 32), np.float32), "Q8_0")}, meta)
    got = read_gguf(path).metadata
    assert got["big"] == 2**64 - 1 and got["small"] == -(2**63)
    assert got["f"] == pytest.approx(3.0e38, rel=1e-6)


@pytest.mark.parametrize("kind", ["Q8_0", "Q4_0"])
@pytest.mark.parametrize("array", [np.float32(1.0), np.zeros((3, 0), np.float32)])
def test_write_gguf_names_a_tensor_with_no_rows_of_blocks(tmp_path, kind, array):
    with pytest.raises(GGUFError, match="tensor 'empty'"):
        write_gguf(tmp_path / "a.gguf", {"empty": (array, kind)})
    assert not (tmp_path / "a.gguf").exists()


def test_write_gguf_names_the_tensor_whose_scale_overflows(tmp_path):
    w = np.ones((1, 32), np.float32)
    w[0, 3] = 1e7
    with pytest.raises(GGUFError, match="tensor 'big'.*float16"):
        write_gguf(tmp_path / "a.gguf", {"big": (w, "Q8_0")})


# --- 11: non-finite scales in the file --------------------------------------------------------


def _blocks_with_scale(scale, kind, n_blocks=3, bad=2):
    size = 34 if kind == "Q8_0" else 18
    raw = bytearray(size * n_blocks)
    for b in range(n_blocks):
        raw[b * size : b * size + 2] = np.float16(scale if b == bad else 0.5).tobytes()
        raw[b * size + 2] = 1
    return bytes(raw)


@pytest.mark.parametrize("kind", ["Q8_0", "Q4_0"])
@pytest.mark.parametrize("scale", [np.inf, -np.inf, np.nan])
def test_decode_blocks_refuses_a_scale_that_is_not_finite(kind, scale):
    # blocks 0, 1 on row 0 and block 0 on row 1 ... with 2 blocks a row, block 2 is row 1's first
    data = _blocks_with_scale(scale, kind, n_blocks=4, bad=2)
    with pytest.raises(GGUFError, match="block 0 of row 1 has a scale that is not finite"):
        decode_blocks(data, kind, (2, 64))


@pytest.mark.parametrize("kind", ["Q8_0", "Q4_0"])
def test_read_quantized_names_the_file_tensor_and_block_of_a_non_finite_scale(tmp_path, kind):
    path = tmp_path / "a.gguf"
    write_gguf(path, {"w": (np.ones((1, 96), np.float32), kind)})
    raw = bytearray(path.read_bytes())
    f = read_gguf(path)
    at = f.tensor_infos["w"].offset + (34 if kind == "Q8_0" else 18) * 2
    del f
    raw[at : at + 2] = np.float16(np.inf).tobytes()
    path.write_bytes(bytes(raw))
    f = read_gguf(path)
    with pytest.raises(GGUFError, match=r"a.gguf: tensor 'w'.*block 2 of row 0"):
        read_quantized(f, "w")


# --- 22: a zero dimension beside huge ones ----------------------------------------------------


def test_read_gguf_refuses_dimensions_numpy_cannot_shape_even_with_a_zero(tmp_path):
    name = b"t"
    dims = [0, 2**40, 2**40]
    head = b"GGUF" + struct.pack("<IQQ", 3, 1, 0)
    head += struct.pack("<Q", len(name)) + name + struct.pack("<I", len(dims))
    head += b"".join(struct.pack("<Q", n) for n in dims) + struct.pack("<IQ", 0, 0)
    head += b"\0" * (-len(head) % 32)
    path = tmp_path / "zero.gguf"
    path.write_bytes(head)
    with pytest.raises(GGUFError, match=r"zero\.gguf.*'t'"):
        read_gguf(path).tensor("t")


def test_read_gguf_still_reads_an_empty_tensor_of_reasonable_dimensions(tmp_path):
    name = b"t"
    dims = [0, 3]
    head = b"GGUF" + struct.pack("<IQQ", 3, 1, 0)
    head += struct.pack("<Q", len(name)) + name + struct.pack("<I", len(dims))
    head += b"".join(struct.pack("<Q", n) for n in dims) + struct.pack("<IQ", 0, 0)
    head += b"\0" * (-len(head) % 32)
    path = tmp_path / "empty.gguf"
    path.write_bytes(head)
    assert read_gguf(path).tensor("t").shape == (3, 0)
