"""Issue 38, section 4: the faults the fourth adversarial pass found in the loaders,
the trainers, the command lines, the threaded attention and the losses' checks.

Each test here fails on the code before the fix (the issue's reproduction).
"""

import json
import multiprocessing
import os
import sys

import numpy as np
import pytest

from attention_lib import MultiHeadAttention

FORK = "fork" in multiprocessing.get_all_start_methods()


# -- a hang after fork ---------------------------------------------------------------


def _threaded_attention():
    """A call that deals its sequences out to the thread pool (several groups, 2 BLAS threads)."""
    from threadpoolctl import threadpool_limits

    layer = MultiHeadAttention(8, 4, rng=0)
    x = np.random.default_rng(1).normal(size=(4, 1024, 8))
    with threadpool_limits(limits=2, user_api="blas"):
        out, _ = layer(x, x, x)
    return float(out.sum())


def _child(queue):
    queue.put(_threaded_attention())


@pytest.mark.skipif(not FORK, reason="fork is POSIX-only")
def test_threaded_attention_runs_in_a_forked_child():
    expected = _threaded_attention()  # the parent's pool now exists
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child, args=(queue,))
    child.start()
    child.join(60)
    hung = child.is_alive()
    if hung:
        child.kill()
        child.join()
    assert not hung, "the attention call hung in the fork child"
    assert child.exitcode == 0
    assert queue.get(timeout=5) == expected


# -- the encoder-decoder's inputs and label smoothing ----------------------------------


def _tiny_transformer():
    from attention_lib.models.transformer import Transformer

    return Transformer(n_vocab=11, d_model=8, n_heads=2, d_ff=16, n_layers=1, max_len=8)


SRC, LENGTHS = np.array([[3, 4, 5], [6, 7, 0]]), np.array([3, 2])
TGT_IN, TGT_OUT = np.array([[1, 8, 9], [1, 10, 0]]), np.array([[8, 9, 2], [10, 2, 0]])


@pytest.mark.parametrize(
    "change, match",
    [
        ({"src": np.array([[3, 4, -1], [6, 7, 0]])}, r"src must be token ids in \[0, 11\), got -1"),
        ({"src": np.array([[3, 4, 11], [6, 7, 0]])}, r"src must be token ids in \[0, 11\), got 11"),
        ({"lengths": np.array([2.5, 2.0])}, "lengths must be integers"),
        ({"lengths": np.array([4, 2])}, "lengths must be at most the padded width S = 3"),
        ({"tgt_in": np.array([[1, 8, -1], [1, 10, 0]])}, r"tgt_in must be token ids"),
        ({"tgt_in": np.array([[1.0, 8, 9], [1, 10, 0]])}, "tgt_in must be integer"),
        ({"tgt_out": np.array([[8, 9, -1], [10, 2, 0]])}, r"tgt_out must be token ids"),
        ({"tgt_out": np.array([[8, 9, 12], [10, 2, 0]])}, r"tgt_out must be token ids"),
    ],
)
def test_the_encoder_decoder_refuses_bad_ids_lengths_and_targets(change, match):
    model = _tiny_transformer()
    args = {"src": SRC, "lengths": LENGTHS, "tgt_in": TGT_IN, "tgt_out": TGT_OUT, **change}
    with pytest.raises((ValueError, TypeError), match=match):
        model.loss(**args)


def test_the_encoder_decoder_checks_its_batch_sizes_itself():
    model = _tiny_transformer()
    with pytest.raises(ValueError, match="tgt_in has 1 sentences but the source has 2"):
        model.forward(SRC, LENGTHS, TGT_IN[:1])
    with pytest.raises(ValueError, match=r"src must be \(B, S\) and lengths \(B,\)"):
        model.forward(SRC, [3], TGT_IN)


def _torch_cross_entropy(logits, targets, smoothing):
    torch = pytest.importorskip("torch")
    return torch.nn.functional.cross_entropy(
        torch.tensor(logits), torch.tensor(targets), label_smoothing=smoothing, ignore_index=0
    )


LOGITS = np.random.default_rng(0).normal(size=(6, 5))
TARGETS = np.array([1, 0, 4, 2, 0, 3])


@pytest.mark.parametrize("smoothing", [0.0, 0.3, 1.0, 1])
def test_label_smoothing_agrees_with_pytorch_inside_0_1(smoothing):
    from attention_lib.models.transformer import label_smoothed_cross_entropy

    loss, _ = label_smoothed_cross_entropy(LOGITS, TARGETS, smoothing)
    assert loss == pytest.approx(float(_torch_cross_entropy(LOGITS, TARGETS, smoothing)), rel=1e-12)


@pytest.mark.parametrize("smoothing", [1.5, 1.0000001, -0.1, float("nan"), float("inf")])
def test_label_smoothing_refuses_smoothing_outside_0_1(smoothing):
    """PyTorch refuses above 1 ("label_smoothing must be between 0.0 and 1.0"); below 0
    and NaN it silently computes the unsmoothed loss, which the library refuses too."""
    from attention_lib.models.transformer import label_smoothed_cross_entropy

    try:
        _torch_cross_entropy(LOGITS, TARGETS, smoothing)
    except RuntimeError as err:
        assert "between 0.0 and 1.0" in str(err)
    else:  # torch ignores it: the loss is the plain cross-entropy
        assert not smoothing >= 0
        plain = _torch_cross_entropy(LOGITS, TARGETS, 0.0)
        assert float(_torch_cross_entropy(LOGITS, TARGETS, smoothing)) == float(plain)
    with pytest.raises(ValueError, match="smoothing must be between 0.0 and 1.0"):
        label_smoothed_cross_entropy(LOGITS, TARGETS, smoothing)
    with pytest.raises(TypeError, match="smoothing must be a number"):
        label_smoothed_cross_entropy(LOGITS, TARGETS, "0.1")


def test_label_smoothing_refuses_targets_outside_the_classes():
    from attention_lib.models.transformer import label_smoothed_cross_entropy

    with pytest.raises(ValueError, match=r"targets must be class ids in \[0, 5\)"):
        label_smoothed_cross_entropy(np.zeros((2, 5)), np.array([1, -1]))
    with pytest.raises(ValueError, match="targets must be integers"):
        label_smoothed_cross_entropy(np.zeros((2, 5)), np.array([1.0, 2.0]))


# -- GGUF: damaged metadata and tensors; sizes checked before allocating ----------------


def _stories_gguf(tmp_path, drop=(), change=None, tensors=None, name="m.gguf"):
    """stories260K's file rewritten with metadata keys dropped or changed ((type, value))."""
    from test_gguf import ARR, F32, FMT, STR, U32, build  # noqa: F401

    from attention_lib import data_dir
    from attention_lib.data.gguf import read_gguf

    ids = {"string": STR, "float32": F32, "uint32": U32, "int32": 5, "bool": 7}
    f = read_gguf(data_dir() / "stories260k" / "tinyllamas-stories-260k-f32.gguf")
    kvs = {}
    for key, vtype in f.metadata_types.items():
        value = f.metadata[key]
        if vtype.startswith("array["):
            kvs[key] = (ARR, (ids[vtype[6:-1]], list(value)))
        else:
            kvs[key] = (ids[vtype], value)
    for key in drop:
        del kvs[key]
    kvs.update(change or {})
    if tensors is None:
        tensors = [(n, np.array(f.tensor(n)), None) for n in f.tensor_infos]
    raw = build(kvs=[(k, t, v) for k, (t, v) in kvs.items()], tensors=tensors)
    path = tmp_path / name
    path.write_bytes(raw)
    return path


U32_, I32_, F32_, STR_, BOOL_, ARR_ = 4, 5, 6, 8, 7, 9

GGUF_METADATA_FAULTS = [
    ({"drop": ["llama.block_count"]}, "'llama.block_count' is missing"),
    ({"drop": ["llama.embedding_length"]}, "'llama.embedding_length' is missing"),
    ({"drop": ["llama.attention.head_count"]}, "'llama.attention.head_count' is missing"),
    ({"drop": ["llama.feed_forward_length"]}, "'llama.feed_forward_length' is missing"),
    ({"drop": ["llama.context_length"]}, "'llama.context_length' is missing"),
    ({"drop": ["llama.attention.layer_norm_rms_epsilon"]}, "layer_norm_rms_epsilon' is missing"),
    ({"drop": ["general.architecture"]}, "'general.architecture' is missing"),
    ({"change": {"llama.block_count": (STR_, "5")}}, "block_count' must be a positive integer"),
    ({"change": {"llama.block_count": (F32_, 5.0)}}, "block_count' must be a positive integer"),
    ({"change": {"llama.block_count": (I32_, -5)}}, "block_count' must be a positive integer"),
    ({"change": {"llama.attention.head_count": (BOOL_, 1)}}, "head_count' must be a positive"),
    ({"change": {"llama.embedding_length": (U32_, 0)}}, "embedding_length' must be a positive"),
    ({"change": {"llama.attention.head_count_kv": (U32_, 3)}}, "do not fit embedding_length 64"),
    ({"change": {"llama.attention.layer_norm_rms_epsilon": (STR_, "1e-5")}}, "a positive finite"),
    ({"change": {"llama.rope.freq_base": (F32_, -1.0)}}, "freq_base' must be a positive finite"),
    ({"change": {"general.architecture": (U32_, 7)}}, "'general.architecture' must be a string"),
    ({"change": {"llama.tensor_data_layout": (U32_, 1)}}, "tensor_data_layout' must be a string"),
    ({"change": {"llama.feed_forward_length": (U32_, 10**4)}}, r"ffn_gate.weight has shape"),
    ({"change": {"llama.context_length": (ARR_, (U32_, [512]))}}, "context_length' must be a"),
]


@pytest.mark.parametrize("fault, match", GGUF_METADATA_FAULTS)
def test_damaged_llama_metadata_is_one_error_naming_the_file(tmp_path, fault, match):
    from attention_lib.models.llama import Llama

    path = _stories_gguf(tmp_path, **fault)
    with pytest.raises(ValueError, match=match) as err:
        Llama.from_gguf(path)
    assert str(err.value).startswith(str(path))


TOKENIZER_FAULTS = [
    ({"drop": ["tokenizer.ggml.tokens"]}, "'tokenizer.ggml.tokens' is missing"),
    ({"drop": ["tokenizer.ggml.scores"]}, "'tokenizer.ggml.scores' is missing"),
    ({"change": {"tokenizer.ggml.tokens": (STR_, "abc")}}, "tokens' must be an array of strings"),
    ({"change": {"tokenizer.ggml.scores": (ARR_, (STR_, ["x"] * 512))}}, "an array of numbers"),
    ({"change": {"tokenizer.ggml.scores": (ARR_, (F32_, [0.0] * 7))}}, "one value per piece"),
    ({"change": {"tokenizer.ggml.token_type": (STR_, "x")}}, "an array of integers"),
    ({"change": {"tokenizer.ggml.bos_token_id": (STR_, "1")}}, "an integer token id"),
    ({"change": {"tokenizer.ggml.eos_token_id": (U32_, 4000)}}, "eos_id must be a piece id"),
]


@pytest.mark.parametrize("fault, match", TOKENIZER_FAULTS)
def test_damaged_tokenizer_metadata_is_one_error_naming_the_file(tmp_path, fault, match):
    from attention_lib.models.llama import load_stories260k

    path = _stories_gguf(tmp_path, **fault)
    with pytest.raises(ValueError, match=match) as err:
        load_stories260k(path)
    assert str(err.value).startswith(str(path))


def test_a_claimed_3000_block_model_is_refused_before_it_is_drawn(tmp_path):
    import tracemalloc

    from attention_lib.models.llama import Llama

    path = _stories_gguf(tmp_path, change={"llama.block_count": (U32_, 3000)})
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="tensor blk.5.attn_norm.weight is missing") as err:
            Llama.from_gguf(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert str(err.value).startswith(str(path))
    assert peak < 20e6, f"{peak / 1e6:.0f} MB allocated before the refusal"


def test_zero_size_and_over_large_tensor_dimensions(tmp_path):
    import struct

    from attention_lib.data.gguf import GGUFError, read_gguf
    from attention_lib.models.llama import Llama

    # token_embd.weight with no rows: the model would have no vocabulary
    from attention_lib.data.gguf import read_gguf as _read
    from attention_lib import data_dir

    f = _read(data_dir() / "stories260k" / "tinyllamas-stories-260k-f32.gguf")
    tensors = [(n, np.array(f.tensor(n)), None) for n in f.tensor_infos]
    tensors[0] = ("token_embd.weight", np.zeros((0, 64), np.float32), None)
    path = _stories_gguf(tmp_path, tensors=tensors)
    with pytest.raises(ValueError, match=r"token_embd.weight is of shape \(0, 64\)") as err:
        Llama.from_gguf(path)
    assert str(err.value).startswith(str(path))
    # a dimension past int64 on an otherwise empty tensor
    from test_gguf import build

    raw = bytearray(build(tensors=[("a", np.zeros((0, 3), np.float32), None)]))
    at = raw.find(struct.pack("<QQ", 3, 0))
    raw[at : at + 8] = struct.pack("<Q", 2**64 - 1)
    bad = tmp_path / "huge.gguf"
    bad.write_bytes(bytes(raw))
    with pytest.raises(GGUFError, match="more than 2[*][*]63 - 1 elements") as err:
        read_gguf(bad).tensor("a")
    assert str(bad) in str(err.value)


def test_a_tokenizer_of_another_size_than_the_model_is_refused(tmp_path):
    from attention_lib.models.llama import load_stories260k

    path = _stories_gguf(
        tmp_path,
        change={
            "tokenizer.ggml.tokens": (ARR_, (STR_, [f"<0x{i:02X}>" for i in range(256)] + ["a"])),
            "tokenizer.ggml.scores": (ARR_, (F32_, [0.0] * 257)),
            "tokenizer.ggml.token_type": (ARR_, (I32_, [6] * 256 + [1])),
        },
    )
    with pytest.raises(ValueError, match="the tokenizer has 257 pieces but token_embd.weight"):
        load_stories260k(path)


# -- checkpoints: claimed sizes checked before allocating; damaged files and manifests --


def _rewrite_npz(src, dst, change_config=None, drop=(), arrays=None):
    """A copy of an .npz checkpoint with its JSON config changed and arrays dropped/replaced."""
    with np.load(src, allow_pickle=False) as f:
        out = {k: f[k] for k in f.files if k not in drop}
    config = json.loads(str(out["config"]))
    config.update(change_config or {})
    out["config"] = np.array(json.dumps(config))
    out.update(arrays or {})
    np.savez(dst, **out)
    return dst


def _peak_during(call):
    import tracemalloc

    tracemalloc.start()
    try:
        try:
            call()
        except Exception as err:  # the error is what the caller checks
            error = err
        else:
            error = None
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return error, peak


def test_transformer_load_checks_the_claimed_sizes_before_building(tmp_path):
    from attention_lib import data_dir
    from attention_lib.models.transformer import load

    src = data_dir() / "checkpoints" / "translation" / "transformer.npz"
    path = _rewrite_npz(src, tmp_path / "t.npz", {"n_layers": 30})
    error, peak = _peak_during(lambda: load(path))
    assert isinstance(error, ValueError) and str(error).startswith(str(path)), error
    assert "do not fit its config" in str(error)
    assert peak < 40e6, f"{peak / 1e6:.0f} MB allocated before the refusal"


@pytest.mark.parametrize(
    "change, match",
    [
        ({"n_vocab": "4000"}, "n_vocab must be a positive integer"),
        ({"d_model": 0}, "d_model must be a positive integer"),
        ({"max_len": 2 * 10**5}, "max_len 200000"),
        ({"model": "RNNsearch"}, "names model 'RNNsearch', not 'Transformer'"),
        ({"d_ff": 513}, r"fc1.W is float16 \(128, 512\) but its config needs"),
    ],
)
def test_transformer_load_refuses_a_damaged_config_naming_the_file(tmp_path, change, match):
    from attention_lib import data_dir
    from attention_lib.models.transformer import load

    src = data_dir() / "checkpoints" / "translation" / "transformer.npz"
    path = _rewrite_npz(src, tmp_path / "t.npz", change)
    with pytest.raises(ValueError, match=match) as err:
        load(path)
    assert str(err.value).startswith(str(path))


def test_transformer_load_refuses_non_checkpoints_naming_the_file(tmp_path):
    from attention_lib.models.transformer import load

    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(ValueError, match="not a Transformer checkpoint") as err:
        load(junk)
    assert str(junk) in str(err.value)
    listed = tmp_path / "list.npz"
    np.savez(listed, config=np.array("[1, 2]"))
    with pytest.raises(ValueError, match="names model 'list'"):
        load(listed)


def _shakespeare_copy(tmp_path, **rewrite):
    """The committed Shakespeare checkpoint, rewritten, with a manifest that matches it."""
    import shutil

    from attention_lib.data.paths import sha256
    from attention_lib.models.pretrained import shakespeare_dir

    folder = tmp_path / "shakespeare"
    folder.mkdir()
    _rewrite_npz(shakespeare_dir() / "shakespeare.npz", folder / "shakespeare.npz", **rewrite)
    shutil.copy(shakespeare_dir() / "manifest.json", folder / "manifest.json")
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["sha256"] = sha256(folder / "shakespeare.npz")
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


def test_load_pretrained_shakespeare_checks_the_claimed_sizes_before_building(tmp_path):
    from attention_lib.models import load_pretrained

    folder = _shakespeare_copy(tmp_path, change_config={"n_layers": 40})
    error, peak = _peak_during(lambda: load_pretrained("shakespeare", folder))
    assert isinstance(error, ValueError), error
    assert str(error).startswith(str(folder / "shakespeare.npz"))
    assert peak < 40e6, f"{peak / 1e6:.0f} MB allocated before the refusal"


@pytest.mark.parametrize(
    "rewrite, match",
    [
        ({"change_config": {"n_vocab": 64}}, "chars must be 64 distinct characters"),
        ({"change_config": {"d_model": 1.5}}, "d_model must be a positive integer"),
        ({"change_config": {"positions": "alibi"}}, "positions 'alibi' is unknown"),
        ({"drop": ["head.b"]}, r"missing \['head.b'\]"),
        ({"arrays": {"head.b": np.full(65, np.nan, np.float16)}}, "head.b holds NaN"),
        ({"arrays": {"head.b": np.zeros(65, np.int16)}}, "head.b is int16"),
    ],
)
def test_a_damaged_shakespeare_checkpoint_is_one_error_naming_it(tmp_path, rewrite, match):
    from attention_lib.models import load_pretrained

    folder = _shakespeare_copy(tmp_path, **rewrite)
    with pytest.raises(ValueError, match=match) as err:
        load_pretrained("shakespeare", folder)
    assert str(err.value).startswith(str(folder / "shakespeare.npz"))


@pytest.mark.parametrize(
    "text, match",
    [
        ('<<<<<<< HEAD\n{"sha256": "x"}\n=======\n', "is not valid JSON"),
        ("[1, 2]", "must be a JSON object, got a list"),
        ('{"sha256": 5}', '"sha256" must be 64 hex digits'),
        ('{"sha256": "' + "0" * 64 + '", "file": "rnnsearch.npz"}', "describes"),
        ('{"sha256": "' + "0" * 64 + '", "model": "Llama"}', "not the TinyGPT"),
    ],
)
def test_a_damaged_shakespeare_manifest_is_one_error_naming_it(tmp_path, text, match):
    from attention_lib import DataFileError
    from attention_lib.models import load_pretrained

    folder = _shakespeare_copy(tmp_path)
    (folder / "manifest.json").write_text(text)
    with pytest.raises(DataFileError, match=match) as err:
        load_pretrained("shakespeare", folder)
    assert str(folder / "manifest.json") in str(err.value)


def _translation_copy(tmp_path):
    import shutil

    from attention_lib.train.translation import checkpoint_dir

    folder = tmp_path / "translation"
    shutil.copytree(checkpoint_dir(), folder)
    return folder


def _edit_manifest(folder, edit):
    path = folder / "manifest.json"
    manifest = json.loads(path.read_text())
    path.write_text(json.dumps(edit(manifest)))


@pytest.mark.parametrize(
    "damage, match",
    [
        ("<<<<<<< HEAD\n{\n", "is not valid JSON"),
        (lambda m: [m], '"models" is an object'),
        (lambda m: {**m, "models": []}, '"models" is an object'),
        (lambda m: {"models": {**m["models"], "transformer": m["models"]["rnnsearch"]}}, "entry"),
        (
            lambda m: {"models": {"transformer": {**m["models"]["transformer"], "file": "../x"}}},
            "must be an object with",
        ),
        (lambda m: {"models": {"transformer": {"file": "transformer.npz"}}}, "64 hex digits"),
        (lambda m: {"models": {}}, "no transformer checkpoint"),
    ],
)
def test_a_damaged_translation_manifest_is_one_error_naming_it(tmp_path, damage, match):
    from attention_lib import DataFileError
    from attention_lib.translate import load_model

    folder = _translation_copy(tmp_path)
    if isinstance(damage, str):  # a merge-conflict marker
        (folder / "manifest.json").write_text(damage)
    else:
        _edit_manifest(folder, damage)
    with pytest.raises(DataFileError, match=match) as err:
        load_model("transformer", folder)
    assert str(folder / "manifest.json") in str(err.value)


# -- the command lines' error paths ------------------------------------------------------


def _translate_cli(argv, data=b"I am cold.\n", stdout=None):
    import io
    import types

    from attention_lib.translate import main

    stdin = types.SimpleNamespace(buffer=io.BytesIO(data))
    out, err = io.StringIO() if stdout is None else stdout, io.StringIO()
    try:
        code = main(argv, stdin=stdin, stdout=out, stderr=err)
    except SystemExit as exc:
        code = exc.code
    return code, err.getvalue()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--beam", "100000"], "argument --beam: must be an integer from 1 to 64, got '100000'"),
        (["--length-penalty", "400"], "--length-penalty must be a number in [0, 10], got 400.0"),
        (["--length-penalty", "nan"], "--length-penalty must be a number in [0, 10], got nan"),
    ],
)
def test_translate_refuses_a_huge_beam_and_length_penalty(argv, message, capsys):
    code, _ = _translate_cli(argv)
    err = capsys.readouterr().err
    assert code == 2
    assert message in err.splitlines()[-1] and "Traceback" not in err


def test_translate_sentences_refuses_them_too():
    from attention_lib.translate import translate_sentences

    with pytest.raises(ValueError, match="beam must be at most 64"):
        translate_sentences(None, None, ["x"], beam=100000)
    with pytest.raises(ValueError, match="length_penalty must be a finite number in"):
        translate_sentences(None, None, ["x"], beam=4, length_penalty=400.0)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_output_to_a_full_disk_is_one_line_and_a_failure():
    with open("/dev/full", "w", encoding="utf8") as full:
        code, err = _translate_cli([], stdout=full)
    assert code == 1
    assert (
        err == "python -m attention_lib.translate: error: cannot write the output to "
        "/dev/full: No space left on device\n"
    )


@pytest.mark.parametrize("module", ["attention_lib.translate", "attention_lib.generate"])
def test_a_closed_stdout_is_one_line_and_a_failure(module, tmp_path):
    import subprocess

    src = tmp_path / "in.txt"
    src.write_text("I am cold.\n")
    args = (
        [str(src)]
        if module.endswith("translate")
        else ["--model", "shakespeare", "--prompt", "ROMEO:", "--max-new-tokens", "3"]
    )
    cmd = " ".join([sys.executable, "-m", module, *(f"'{a}'" for a in args)]) + " >&-"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(cmd, shell=True, capture_output=False, stderr=subprocess.PIPE, env=env)
    err = done.stderr.decode()
    assert done.returncode == 1, err
    assert "standard output is closed" in err and "Traceback" not in err, err
    assert err.count("\n") == 1, err


# -- the trainers: arguments, records, artifacts under --out, checkpoint and manifest ----


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--steps", "0"], "argument --steps: must be a positive integer (1, 2, ...), got '0'"),
        (["--steps", "-3"], "argument --steps: must be a positive integer"),
        (["--save-every", "0"], "argument --save-every: must be a positive integer"),
        (["--threads", "0"], "argument --threads: must be a positive integer"),
    ],
)
def test_the_translation_trainer_refuses_bad_arguments_in_one_line(argv, message, capsys):
    from attention_lib.train import translation as tt

    with pytest.raises(SystemExit) as exit_:
        tt.main(["--model", "transformer", *argv])
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert message in err.splitlines()[-1] and "Traceback" not in err


def test_the_shakespeare_trainer_refuses_bad_arguments_in_one_line(tmp_path, capsys):
    from attention_lib.train import shakespeare as ts

    with pytest.raises(SystemExit) as exit_:
        ts.main(["--threads", "0", "--out", str(tmp_path)])
    assert exit_.value.code == 2
    assert "argument --threads: must be a positive integer" in capsys.readouterr().err
    afile = tmp_path / "a-file"
    afile.write_text("")
    with pytest.raises(SystemExit) as exit_:
        ts.main(["--out", str(afile / "sub")])
    assert exit_.value.code == 2
    assert f"--out {afile / 'sub'}: cannot make the folder" in capsys.readouterr().err


TINY_TRANSFORMER = {"d_model": 16, "n_heads": 2, "d_ff": 32, "n_layers": 1, "batch": 16}


@pytest.fixture
def tiny_translation(monkeypatch):
    """The translation trainer on 200 pairs, a tiny Transformer, no test-set evaluation."""
    from attention_lib.train import translation as tt

    pairs = tt.load_pairs("train")[:200]
    monkeypatch.setattr(tt, "load_pairs", lambda split: pairs)
    monkeypatch.setattr(tt, "evaluate_checkpoint", lambda name, out, tok, entry: entry)
    config = {**tt.CONFIGS["transformer"], **TINY_TRANSFORMER, "warmup": 5, "average": 1}
    monkeypatch.setitem(tt.CONFIGS, "transformer", config)
    return tt


@pytest.mark.parametrize("save_every", [10, 30])
def test_a_checkpoint_is_recorded_at_its_own_step(tiny_translation, tmp_path, save_every):
    """--save-every below the logging interval (25) and not a multiple of it."""
    tt = tiny_translation
    seen = []
    real_record = tt.record

    def spy(model, name, config, out, history, *rest):
        entry = real_record(model, name, config, out, history, *rest)
        with np.load(out / "transformer.npz", allow_pickle=False) as f:
            seen.append((entry["steps"], json.loads(str(f["config"]))["train_steps"]))
        return entry

    tt.record = spy
    try:
        tt.main(["--model", "transformer", "--steps", "40", "--save-every", str(save_every),
                 "--out", str(tmp_path)])  # fmt: skip
    finally:
        tt.record = real_record
    steps = [s for s in range(save_every, 40, save_every)] + [40]
    assert seen == [(s, s) for s in steps]


def test_every_artifact_of_a_run_stays_under_out(tiny_translation, tmp_path, monkeypatch):
    import pathlib
    import tempfile

    tt = tiny_translation
    outside = tmp_path / "system-temp"
    outside.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(outside))
    monkeypatch.setenv("TMPDIR", str(outside))
    old_copy = pathlib.Path("/tmp/translation_transformer_float32.npz")  # the old fixed path

    def state():
        return old_copy.stat().st_mtime_ns if old_copy.exists() else None

    before = state()
    out = tmp_path / "run"
    tt.main(["--model", "transformer", "--steps", "30", "--out", str(out)])
    assert sorted(p.name for p in out.iterdir()) == [
        "manifest.json",
        "transformer.npz",
        "transformer_float32.npz",
        "transformer_log.json",
    ]
    assert not any(outside.iterdir())
    assert state() == before, f"the run wrote {old_copy}"


def test_evaluate_only_works_on_the_committed_checkpoints_alone(tmp_path, monkeypatch):
    """A fresh clone has no float32 copy: the run's recorded float32 loss is kept."""
    from attention_lib.train import translation as tt

    folder = _translation_copy(tmp_path)
    committed = json.loads((folder / "manifest.json").read_text())["models"]["transformer"]
    monkeypatch.setattr(tt, "validation_loss", lambda model, name, tok, n=512: 1.25)
    monkeypatch.setattr(tt, "evaluate_checkpoint", lambda name, out, tok, entry: entry)
    entry = tt.main(["--model", "transformer", "--evaluate-only", "--out", str(folder)])
    assert entry["validation_loss_float32"] == committed["validation_loss_float32"]
    assert entry["validation_loss_float16"] == 1.25


def test_evaluate_only_without_a_checkpoint_is_one_line(tmp_path, capsys):
    from attention_lib.train import translation as tt

    with pytest.raises(SystemExit) as exit_:
        tt.main(["--model", "transformer", "--evaluate-only", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert exit_.value.code == 1
    assert f"{tmp_path / 'manifest.json'} is missing" in err and "Traceback" not in err


def test_files_written_as_a_group_are_all_old_or_all_new_under_an_interrupt(
    tmp_path, monkeypatch, request
):
    """A SIGINT arriving between the renames is held until both are done."""
    import signal

    from attention_lib.data import paths

    a, b = tmp_path / "a.npz", tmp_path / "manifest.json"
    a.write_text("old"), b.write_text("old")
    real_replace, calls = os.replace, []

    def replace(src, dst):
        real_replace(src, dst)
        calls.append(dst)
        if len(calls) == 1:
            signal.raise_signal(signal.SIGINT)  # Ctrl-C right after the first rename

    monkeypatch.setattr(paths.os, "replace", replace)
    # Ctrl-C's usual handler, whatever this process started with: a process that a
    # non-interactive shell starts in the background (`cmd &`, as scripts/run-tests.sh
    # runs the library's tests beside other stages) begins with SIGINT ignored, and
    # write_atomic_group rightly restores that, so the test would see no interrupt.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    request.addfinalizer(lambda: signal.signal(signal.SIGINT, previous))
    with pytest.raises(KeyboardInterrupt):
        paths.write_atomic_group(
            [(a, lambda f: f.write("new"), "w"), (b, lambda f: f.write("new"), "w")]
        )
    assert (a.read_text(), b.read_text()) == ("new", "new")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.npz", "manifest.json"]


def _tiny_shakespeare(monkeypatch):
    from attention_lib.train import shakespeare as ts

    text = (ts.text_path().read_text(encoding="utf8"))[:20000]
    chars = sorted(set(text))
    ids = np.array([chars.index(c) for c in text])
    monkeypatch.setattr(ts, "load_text", lambda: (chars, ids[:18000], ids[18000:]))
    small = {"d_model": 16, "n_heads": 2, "n_layers": 1, "d_ff": 32, "max_len": 16,
             "batch": 4, "steps": 3, "warmup": 1, "eval_every": 3, "eval_batches": 1}  # fmt: skip
    monkeypatch.setattr(ts, "CONFIG", {**ts.CONFIG, **small})
    return ts


def test_an_interrupted_shakespeare_run_leaves_the_old_pair_loadable(tmp_path, monkeypatch):
    from attention_lib.models import load_pretrained

    ts = _tiny_shakespeare(monkeypatch)
    ts.main(["--out", str(tmp_path), "--threads", "1"])
    before = load_pretrained("shakespeare", tmp_path)[0].head.params["b"].copy()

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(ts, "CONFIG", {**ts.CONFIG, "seed": 7})
    monkeypatch.setattr(ts, "validation_loss", interrupted)  # Ctrl-C while evaluating
    with pytest.raises(KeyboardInterrupt):
        ts.main(["--out", str(tmp_path), "--threads", "1"])
    model, _ = load_pretrained("shakespeare", tmp_path)  # the old pair, still matched
    np.testing.assert_array_equal(model.head.params["b"], before)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json", "shakespeare.npz"]


# -- further faults: file readers and losses --------------------------------------------


def test_a_damaged_tatoeba_split_names_the_file_and_line(tmp_path, monkeypatch):
    from attention_lib import DataFileError
    from attention_lib.data import tatoeba

    (tmp_path / "train.tsv").write_text("I am cold.\tJ'ai froid.\nno tab here\n")
    (tmp_path / "valid.tsv").write_bytes(b"I am\t\xff\xfe\n")
    monkeypatch.setattr(tatoeba, "tatoeba_dir", lambda: tmp_path)
    with pytest.raises(DataFileError, match=r"train.tsv, line 2: 1 tab-separated fields, not 2"):
        tatoeba.load_pairs("train")
    with pytest.raises(DataFileError, match=r"valid.tsv: not UTF-8 text"):
        tatoeba.load_pairs("valid")


def test_a_damaged_tokenizer_file_names_the_file(tmp_path):
    from attention_lib import DataFileError
    from attention_lib.data.tatoeba import Tokenizer

    bad = tmp_path / "bpe.json"
    bad.write_text('{"version": ')
    with pytest.raises(DataFileError, match="not a tokenizer file") as err:
        Tokenizer.load(bad)
    assert str(bad) in str(err.value)
    with pytest.raises(DataFileError, match="no such tokenizer file"):
        Tokenizer.load(tmp_path / "missing.json")


@pytest.mark.parametrize(
    "ids, error, match",
    [
        ([5, -1], ValueError, r"ids must be in \[0, 4000\), got -1"),
        ([5, 10**6], ValueError, r"ids must be in \[0, 4000\), got 1000000"),
        ([5.7], TypeError, "ids must be a sequence of integers"),
    ],
)
def test_the_translation_tokenizer_refuses_ids_outside_its_vocabulary(ids, error, match):
    from attention_lib.data.tatoeba import Tokenizer

    with pytest.raises(error, match=match):
        Tokenizer.load().decode(ids)


def test_the_losses_refuse_nan_logits_naming_them():
    from attention_lib.models.transformer import label_smoothed_cross_entropy
    from attention_lib.nn import softmax_cross_entropy

    logits = np.array([[np.nan, 1.0], [0.0, 1.0]])
    with pytest.raises(ValueError, match="logits contain NaN"):
        label_smoothed_cross_entropy(logits, np.array([1, 1]))
    with pytest.raises(ValueError, match="logits contain NaN"):
        softmax_cross_entropy(logits, np.array([1, 1]))


def test_a_bad_target_leaves_the_model_as_it_was():
    model = _tiny_transformer()
    model.loss(SRC, LENGTHS, TGT_IN, TGT_OUT)
    h = model._h.copy()
    with pytest.raises(ValueError, match="tgt_out must be token ids"):
        model.loss(SRC[:, :2], [2, 2], TGT_IN, np.array([[8, 9, -1], [10, 2, 0]]))
    np.testing.assert_array_equal(model._h, h)
    model.backward()  # the last good loss() can still be differentiated


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"sentences": "I am cold."}, TypeError, "got one string"),
        ({"sentences": ["I am cold.", 5]}, TypeError, "sentences must be str, got int"),
        ({"batch": 0}, ValueError, "batch must be a positive integer"),
        ({"max_tokens": -3}, ValueError, "max_tokens must be a positive integer"),
        ({"max_tokens": 2.5}, TypeError, "max_tokens must be a positive integer"),
    ],
)
def test_translate_sentences_refuses_what_a_new_user_might_pass(kwargs, error, match):
    """A string is not a list of sentences; batch 0 and negative max_tokens were silent
    (or a ValueError from range()): -3 used to drop each sentence's last three tokens."""
    from attention_lib.translate import translate_sentences

    args = {"model": None, "tok": None, "sentences": ["I am cold."], **kwargs}
    with pytest.raises(error, match=match):
        translate_sentences(**args)


@pytest.mark.parametrize(
    "change, error, match",
    [
        ({"n_vocab": 2.5}, TypeError, "n_vocab must be an integer"),
        ({"n_vocab": -1}, ValueError, "n_vocab must be at least 3"),
        ({"n_layers": 0}, ValueError, "n_layers must be a positive integer"),
        ({"max_len": 0}, ValueError, "max_len must be a positive integer"),
        ({"seed": -1}, ValueError, "seed must be non-negative"),
        ({"dtype": np.int32}, TypeError, "dtype must be a floating dtype"),
    ],
)
def test_the_encoder_decoder_checks_its_sizes_before_drawing(change, error, match):
    from attention_lib.models.transformer import Transformer

    sizes = {"n_vocab": 11, "d_model": 8, "n_heads": 2, "d_ff": 16, "n_layers": 1, "max_len": 8}
    with pytest.raises(error, match=match):
        Transformer(**{**sizes, **change})


def test_transformer_load_refuses_an_integer_dtype():
    from attention_lib import data_dir
    from attention_lib.models.transformer import load

    with pytest.raises(TypeError, match="dtype must be a floating dtype"):
        load(data_dir() / "checkpoints" / "translation" / "transformer.npz", dtype=np.int8)


def test_the_translation_trainer_checks_its_manifest_before_training(tmp_path, capsys):
    from attention_lib.train import translation as tt

    (tmp_path / "manifest.json").write_text("<<<<<<< HEAD\n")
    with pytest.raises(SystemExit) as exit_:
        tt.main(["--model", "transformer", "--steps", "1", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "is not valid JSON" in err and "Traceback" not in err
    with pytest.raises(SystemExit) as exit_:
        tt.main(["--model", "transformer", "--evaluate-only", "--steps", "5"])
    assert "--evaluate-only evaluates what --out holds: --steps" in capsys.readouterr().err


def test_load_pretrained_shakespeare_given_the_file_says_to_pass_its_folder():
    from attention_lib import DataFileError
    from attention_lib.models import load_pretrained
    from attention_lib.models.pretrained import shakespeare_dir

    with pytest.raises(DataFileError, match="is a file: pass the folder that holds"):
        load_pretrained("shakespeare", shakespeare_dir() / "shakespeare.npz")
