"""Reliability V: quantization's float16 scales, GGUF writing and reading, and the training CLIs.

Every command-line test calls the module's ``main(argv)`` in this process with
``--out`` in ``tmp_path`` (never ``data/``) and with the step that would start
the work replaced by one that fails the test: the error must come first.
"""

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
def test_quantize_refuses_a_group_whose_scale_underflows_to_zero_or_loses_its_precision(bits, tiny):
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


# --- the training and measuring command lines: bad arguments refused before any work ----------


def _refused(capsys, main, argv, *words):
    """``main(argv)`` exits with status 2 and a one-line message holding ``words``."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "Traceback" not in err and all(w in err for w in words), err
    return err


@pytest.fixture
def long_context(monkeypatch):
    from attention_lib.train import long_context

    monkeypatch.setattr(long_context, "train", _work_started)
    return long_context


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["--steps", "0"], "--steps"),
        (["--steps", "-1"], "--steps"),
        (["--context", "0"], "--context"),
        (["--context", "4096"], "--context"),
        (["--block-size", "0"], "--block-size"),
        (["--threads", "0"], "--threads"),
    ],
)
def test_long_context_refuses_bad_numbers_before_training(
    long_context, capsys, tmp_path, argv, flag
):
    _refused(
        capsys, long_context.main, ["--positions", "rotary", "--out", str(tmp_path), *argv], flag
    )
    assert not list(tmp_path.iterdir())


def test_long_context_starts_training_with_good_numbers(long_context, tmp_path):
    argv = ["--positions", "rotary", "--steps", "1", "--context", "1024", "--block-size", "64"]
    with pytest.raises(WorkStarted):
        long_context.main([*argv, "--out", str(tmp_path)])


def test_long_context_and_serving_refuse_an_out_folder_under_a_file(
    long_context, capsys, monkeypatch, tmp_path
):
    from attention_lib.train import serving

    monkeypatch.setattr(serving, "run", _work_started)
    (tmp_path / "file").write_text("not a folder")
    out = str(tmp_path / "file" / "x")
    _refused(capsys, long_context.main, ["--positions", "rotary", "--out", out], "--out", out)
    _refused(capsys, serving.main, ["--out", out], "--out", out)


@pytest.mark.parametrize("order", ["0", "100", "11"])
def test_ngram_draft_refuses_an_order_before_labelling(capsys, monkeypatch, tmp_path, order):
    from attention_lib.train import ngram_draft

    monkeypatch.setattr(ngram_draft, "load_pretrained", _work_started)
    monkeypatch.setattr(ngram_draft, "distill_labels", _work_started)
    _refused(capsys, ngram_draft.main, ["--order", order, "--out", str(tmp_path)], "--order")
    with pytest.raises(WorkStarted):  # the longest order its 64-bit keys hold is fine
        ngram_draft.main(["--order", "10", "--out", str(tmp_path)])


@pytest.fixture
def evaluate(monkeypatch, tmp_path):
    from attention_lib.train import evaluate_long_context as evaluate

    monkeypatch.setattr(evaluate, "checkpoint_dir", lambda: tmp_path)
    for part in ("memory", "extrapolation", "stream"):
        monkeypatch.setattr(evaluate, part, _work_started)
    (tmp_path / "rotary_128.npz").write_bytes(b"")
    (tmp_path / "rotary_ntk_finetuned_1024.npz").write_bytes(b"")
    return evaluate


@pytest.mark.parametrize(
    "argv",
    [
        ["extrapolation"],
        ["extrapolation", "--scheme", "nonsense"],
        ["extrapolation", "--scheme", "../longctx/rotary"],
        ["stream"],
        ["stream", "--scheme", "rotary_ntk_finetuned_1024"],
        ["memory", "--scheme", "nonsense"],
    ],
)
def test_evaluate_long_context_refuses_a_missing_or_unknown_scheme(
    evaluate, capsys, tmp_path, argv
):
    _refused(capsys, evaluate.main, argv, "--scheme")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "rotary_128.npz",
        "rotary_ntk_finetuned_1024.npz",
    ]


@pytest.mark.parametrize(
    "argv",
    [
        ["memory"],
        ["extrapolation", "--scheme", "rotary"],
        ["extrapolation", "--scheme", "rotary_ntk_finetuned_1024"],
        ["stream", "--scheme", "rotary"],
    ],
)
def test_evaluate_long_context_measures_a_known_scheme(evaluate, argv):
    with pytest.raises(WorkStarted):
        evaluate.main(argv)


def test_the_committed_schemes_are_known():
    from attention_lib.train.evaluate_long_context import schemes

    assert {"rotary", "learned", "none", "rotary_ntk_finetuned_1024"} <= set(
        schemes("extrapolation")
    )
    assert "rotary_ntk_finetuned_1024" not in schemes("stream")


# --- 20: damaged draft manifests ----------------------------------------------------------------


@pytest.mark.parametrize(
    "name, manifest, text",
    [
        ("ngram", "ngram_draft.json", '{"file": "ngram_draft.npz", "sha'),
        ("ngram", "ngram_draft.json", "[]"),
        ("ngram", "ngram_draft.json", '{"file": "ngram_draft.npz"}'),
        ("one-layer", "manifest.json", "[]"),
        ("one-layer", "manifest.json", '{"runs": {}}'),
        ("one-layer", "manifest.json", '{"runs": {"draft": []}}'),
        ("one-layer", "manifest.json", '{"runs": {"draft": {"file": "draft.npz"}}}'),
        ("one-layer", "manifest.json", '{"runs": {"draft": {"sha256": 3}}}'),
    ],
)
def test_load_draft_names_a_damaged_manifest(monkeypatch, tmp_path, name, manifest, text):
    from attention_lib import DataFileError
    from attention_lib.models import kv_variants
    from attention_lib.models.speculative import load_draft

    monkeypatch.setattr(kv_variants, "serving_dir", lambda: tmp_path)
    for f in ("draft.npz", "ngram_draft.npz"):
        (tmp_path / f).write_bytes(b"weights")
    (tmp_path / manifest).write_text(text)
    with pytest.raises(DataFileError, match=re.escape(str(tmp_path / manifest))):
        load_draft(name, 65)


# --- 23: seq2seq's default folder ---------------------------------------------------------------


def test_seq2seq_evaluates_the_librarys_checkpoints_from_any_folder(monkeypatch, tmp_path):
    from attention_lib.train import seq2seq

    class Loaded(Exception):
        pass

    def load_checkpoints(directory):
        raise Loaded(directory)

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(seq2seq, "load_checkpoints", load_checkpoints)
    with pytest.raises(Loaded) as got:
        seq2seq.main(["--evaluate-only"])
    from pathlib import Path

    assert Path(got.value.args[0]) == seq2seq.checkpoint_dir()


# --- align --iterations: an upper bound ---------------------------------------------------------


def test_align_refuses_more_em_iterations_than_its_limit(capsys, monkeypatch, tmp_path):
    from attention_lib.align import cli

    monkeypatch.setattr(cli, "EMAligner", _work_started)
    (tmp_path / "en").write_text("the cat\n")
    (tmp_path / "fr").write_text("le chat\n")
    argv = ["--src", str(tmp_path / "en"), "--tgt", str(tmp_path / "fr"), "--method", "em"]
    _refused(capsys, cli.main, [*argv, "--iterations", "1001"], "--iterations", "1000")
    with pytest.raises(WorkStarted):
        cli.main([*argv, "--iterations", str(cli.MAX_ITERATIONS)])


def test_max_order_is_the_longest_order_build_tables_takes():
    from attention_lib.models.ngram_draft import build_tables, max_order

    ids = np.zeros(4, np.int64)
    for n_vocab in (2, 3, 65, 1000, 2**20):
        k = max_order(n_vocab)
        assert n_vocab**k < 2**62 <= n_vocab ** (k + 1)
        with pytest.raises(ValueError, match="overflows"):  # checked before the ids are read
            build_tables(ids, ids, k + 1, n_vocab)


@pytest.mark.parametrize("damage", ["{not json", "[]", "\udcff"])
def test_serving_refuses_a_damaged_manifest_in_its_out_folder(
    capsys, monkeypatch, tmp_path, damage
):
    from attention_lib.train import serving

    monkeypatch.setattr(serving, "run", _work_started)
    if damage == "\udcff":  # not UTF-8
        (tmp_path / "manifest.json").write_bytes(b"\xff\xfe{")
    else:
        (tmp_path / "manifest.json").write_text(damage)
    _refused(capsys, serving.main, ["--out", str(tmp_path)], "--out", "manifest.json")
