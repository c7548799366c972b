"""Reliability of the models in attention_lib.models under bad input and misuse (issue 26).

Seq2seq state and checkpoints, TinyGPT's constructor and generate(), and the
training command line. The numbers in the test names are the issue's.
"""

import json
import os
import subprocess
import sys
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest

from attention_lib import TinyGPT
from attention_lib.models import RNNencdec, RNNsearch, seq2seq
from attention_lib.models import gpt as gpt_module
from attention_lib.train import seq2seq as ts
from attention_lib.models.seq2seq import load, save

SRC = np.array([[3, 4, 5, 6], [6, 3, 0, 0], [5, 5, 4, 0]])
LENGTHS = [4, 2, 3]
TGT_IN = np.array([[1, 3, 4, 5], [1, 5, 0, 0], [1, 4, 3, 5]])
TGT_OUT = np.array([[3, 4, 5, 2], [5, 2, 0, 0], [4, 3, 5, 2]])
REPO = Path(__file__).resolve().parents[1]


def tiny(cls, seed=0, dtype=np.float64):
    return cls(n_src=7, n_tgt=6, emb=3, hidden=4, attn=5, seed=seed, dtype=dtype)


def gpt(dropout=0.0, **kw):
    args = {
        "n_vocab": 10,
        "d_model": 8,
        "n_heads": 2,
        "n_layers": 2,
        "d_ff": 16,
        "max_len": 12,
        "rng": np.random.default_rng(0),
        "dropout": dropout,
    }
    args.update(kw)
    return TinyGPT(**args)


def peak_bytes(fn):
    """The most memory ``fn()`` held at once (traced by Python's allocator hooks)."""
    tracemalloc.start()
    try:
        fn()
    except (TypeError, ValueError):
        pass
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


# -- 1. integer dtypes ------------------------------------------------------------


@pytest.mark.parametrize("cls", [RNNsearch, RNNencdec])
def test_1_a_seq2seq_model_with_an_integer_dtype_is_refused(cls):
    with pytest.raises(TypeError, match="dtype must be a floating dtype"):
        tiny(cls, dtype=np.int32)


# -- 4. a second backward gives the same gradients ---------------------------------


@pytest.mark.parametrize("cls", [RNNsearch, RNNencdec])
def test_4_a_second_backward_overwrites_every_gradient(cls):
    model = tiny(cls)
    model.loss(SRC, LENGTHS, TGT_IN, TGT_OUT)
    model.backward()
    first = {
        f"{i}.{k}": g.copy()
        for i, layer in enumerate(model.layers())
        for k, g in layer.grads.items()
    }
    model.backward()
    for i, layer in enumerate(model.layers()):
        for k, g in layer.grads.items():
            np.testing.assert_array_equal(g, first[f"{i}.{k}"], err_msg=f"{i}.{k}")


@pytest.mark.parametrize("cls", [RNNsearch, RNNencdec])
def test_4_backward_needs_a_loss_and_none_since_a_translate(cls):
    model = tiny(cls)
    with pytest.raises(RuntimeError, match=r"backward\(\) needs a loss\(\) first"):
        model.backward()
    model.loss(SRC, LENGTHS, TGT_IN, TGT_OUT)
    model.translate(SRC[:2], LENGTHS[:2], max_len=3)  # replaces what backward reads
    with pytest.raises(RuntimeError, match="needs a loss"):
        model.backward()


# -- 5. generate restores the mode and checks first ---------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"temperature": 1.0, "top_k": 0},
        {"temperature": 1.0, "top_p": 1.5},
        {"temperature": float("nan")},
        {"temperature": 1.0, "rng": "seed"},
        {"temperature": 0, "use_cache": "no"},
    ],
)
def test_5_generate_checks_every_argument_before_the_first_forward(kwargs, monkeypatch):
    model = gpt(dropout=0.1)
    calls = []
    monkeypatch.setattr(model, "forward", lambda *a, **k: calls.append(1))
    kwargs.setdefault("rng", np.random.default_rng(0))
    with pytest.raises((TypeError, ValueError)):
        model.generate(np.array([1, 2]), 3, **kwargs)
    assert calls == []
    assert all(d.training for b in model.blocks for d in b.dropouts())


def test_5_generate_restores_dropout_when_the_forward_raises(monkeypatch):
    model = gpt(dropout=0.1)

    def broken(*args, **kwargs):
        raise MemoryError("out of memory in the middle of generation")

    monkeypatch.setattr(model, "forward", broken)
    with pytest.raises(MemoryError):
        model.generate(np.array([1, 2]), 3, temperature=0)
    assert all(d.training for b in model.blocks for d in b.dropouts())


# -- 6. strict state dicts and checkpoints ------------------------------------------


def test_6_load_state_dict_refuses_unexpected_and_missing_keys():
    model = tiny(RNNsearch)
    state = model.state_dict()
    with pytest.raises(KeyError, match="unexpected key.*extra.W"):
        tiny(RNNsearch).load_state_dict({**state, "extra.W": np.zeros(3)})
    del state["att.v"]
    with pytest.raises(KeyError, match="missing key.*att.v"):
        tiny(RNNsearch).load_state_dict(state)


def test_6_an_rnnsearch_state_does_not_load_into_an_rnnencdec():
    search, encdec = tiny(RNNsearch, seed=1), tiny(RNNencdec, seed=2)
    before = {k: v.copy() for k, v in encdec.state_dict().items()}
    with pytest.raises(KeyError, match=r"unexpected key\(s\): att.U_a, att.W_a, att.v"):
        encdec.load_state_dict(search.state_dict())
    for k, v in encdec.state_dict().items():  # nothing changed
        np.testing.assert_array_equal(v, before[k])
    encdec.load_state_dict(search.state_dict(), strict=False)  # on request: the shared keys
    np.testing.assert_array_equal(encdec.out.params["W"], search.out.params["W"])


def test_6_a_bad_array_changes_nothing():
    model = tiny(RNNsearch)
    state = {k: v + 1 for k, v in model.state_dict().items()}
    state["out.b"] = np.full_like(state["out.b"], np.nan)
    before = model.state_dict()
    with pytest.raises(ValueError, match="out.b must hold finite real numbers"):
        model.load_state_dict(state)
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(v, before[k])


def _rewrite(path, config=None, drop=(), add=None):
    """Copy of checkpoint ``path`` with its config replaced and arrays dropped or added."""
    with np.load(path, allow_pickle=False) as f:
        arrays = {k: f[k] for k in f.files if k not in drop}
    if config is not None:
        arrays["config"] = np.array(json.dumps(config))
    arrays.update(add or {})
    out = path.with_name("tampered.npz")
    np.savez(out, **arrays)
    return out


def test_6_a_checkpoint_whose_config_names_another_model_is_refused(tmp_path):
    path = save(tiny(RNNsearch), tmp_path / "search.npz")
    config = json.loads(str(np.load(path)["config"]))
    tampered = _rewrite(path, {**config, "model": "RNNencdec"})
    with pytest.raises(
        seq2seq.CheckpointError,
        match=r"tampered.npz: its arrays do not fit its config "
        r"\(RNNencdec\).*unexpected \['att.U_a'",
    ):
        load(tampered)
    with pytest.raises(seq2seq.CheckpointError, match="holds a RNNsearch, not a RNNencdec"):
        load(path, model="RNNencdec")
    assert load(path, model="RNNsearch").attention


def test_6_load_checkpoints_checks_the_model_class_against_the_manifest(tmp_path):
    path = save(tiny(RNNsearch), tmp_path / "a.npz")
    manifest = {"models": {"a": {"file": "a.npz", "sha256": ts.sha256(path), "model": "RNNencdec"}}}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(seq2seq.CheckpointError, match="holds a RNNsearch, not a RNNencdec"):
        ts.load_checkpoints(tmp_path)


# -- 7. the manifest is merged and written atomically ----------------------------


def _fast_runs(monkeypatch):
    """Two runs of a few steps each, in place of the four real ones."""
    runs = {"rnnsearch_20": ("RNNsearch", 5, 6, 2, 3), "rnnencdec_20": ("RNNencdec", 5, 6, 2, 4)}
    monkeypatch.setattr(ts, "RUNS", runs)
    monkeypatch.setattr(ts, "CONFIG", {**ts.CONFIG, "emb": 4, "hidden": 4, "attn": 4, "batch": 2})


def test_7_training_one_run_keeps_the_other_runs_in_the_manifest(tmp_path, monkeypatch, capsys):
    _fast_runs(monkeypatch)
    assert ts.main(["--out", str(tmp_path), "--test-per-bucket", "1"]) == 0
    first = json.loads((tmp_path / "manifest.json").read_text())
    assert set(first["models"]) == {"rnnsearch_20", "rnnencdec_20"}
    assert (
        ts.main(["--out", str(tmp_path), "--test-per-bucket", "1", "--runs", "rnnencdec_20"]) == 0
    )
    second = json.loads((tmp_path / "manifest.json").read_text())
    assert set(second["models"]) == {"rnnsearch_20", "rnnencdec_20"}
    assert second["models"]["rnnsearch_20"] == first["models"]["rnnsearch_20"]
    assert (
        second["command"]
        == first["command"]
        == ("python -m attention_lib.train.seq2seq --test-per-bucket 1")
    )
    ts.load_checkpoints(tmp_path)  # every sha256 still matches
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "manifest.json",
        "rnnencdec_20.npz",
        "rnnsearch_20.npz",
    ]  # no temporary files left


def test_7_an_interrupted_run_keeps_what_was_done(tmp_path, monkeypatch, capsys):
    _fast_runs(monkeypatch)
    assert ts.main(["--out", str(tmp_path), "--test-per-bucket", "1"]) == 0
    before = json.loads((tmp_path / "manifest.json").read_text())
    real_train, calls = ts.train, []

    def train_then_ctrl_c(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_train(*args, **kwargs)

    monkeypatch.setattr(ts, "train", train_then_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        ts.main(["--out", str(tmp_path), "--test-per-bucket", "1"])
    after = json.loads((tmp_path / "manifest.json").read_text())
    assert set(after["models"]) == set(before["models"])
    assert after["models"]["rnnencdec_20"] == before["models"]["rnnencdec_20"]
    ts.load_checkpoints(tmp_path)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


# -- 9. one BLAS thread, really ----------------------------------------------------


def test_9_training_runs_on_one_blas_thread(tmp_path, monkeypatch, capsys):
    threadpoolctl = pytest.importorskip("threadpoolctl")
    _fast_runs(monkeypatch)
    seen = []

    def record(*args, **kwargs):
        seen.append(
            [p["num_threads"] for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]
        )
        return [1.0]

    monkeypatch.setattr(ts, "train", record)
    monkeypatch.setattr(ts, "evaluate", lambda *a, **k: {"buckets": []})
    ts.main(["--out", str(tmp_path), "--test-per-bucket", "1", "--runs", "rnnsearch_20"])
    assert seen and all(n == [1] * len(n) and n for n in seen)


def test_9_importing_the_training_module_changes_no_environment_variable():
    code = (
        "import os; before = dict(os.environ); "
        "import attention_lib.train.seq2seq; "
        "print(sorted(set(os.environ.items()) ^ set(before.items())))"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO, check=True
    ).stdout
    assert out.strip() == "[]"


# -- 10. lengths are integers ------------------------------------------------------


@pytest.mark.parametrize(
    "lengths, error, match",
    [
        ([4.0, 2.7, 3.0], TypeError, "lengths must be integers"),
        ([4, 2, 5], ValueError, r"lengths must lie in \[1, 4\]"),
        ([4, 0, 3], ValueError, r"lengths must lie in \[1, 4\]"),
        ([4, 2], ValueError, r"lengths \(B,\)"),
    ],
)
def test_10_lengths_are_checked_not_truncated(lengths, error, match):
    model = tiny(RNNsearch)
    with pytest.raises(error, match=match):
        model.loss(SRC, lengths, TGT_IN, TGT_OUT)
    with pytest.raises(error, match=match):
        model.translate(SRC, lengths)


# -- 11. validate first, then allocate ----------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        {"n_heads": 3},
        {"d_ff": 0},
        {"dropout": 1.0},
        {"positions": "rotary", "n_heads": 8},
        {"rng": None},
        {"attention_only": "yes"},
    ],
)
def test_11_tinygpt_checks_its_arguments_before_drawing_the_embedding(bad):
    args = {
        "n_vocab": 1_000_000,
        "d_model": 8,
        "n_heads": 2,
        "n_layers": 1,
        "d_ff": 16,
        "max_len": 8,
        "rng": np.random.default_rng(0),
    }
    args.update(bad)
    with pytest.raises((TypeError, ValueError)):
        TinyGPT(**args)
    assert peak_bytes(lambda: TinyGPT(**args)) < 1_000_000  # the table would be 64 MB


def test_11_a_tampered_checkpoint_allocates_nothing_big(tmp_path):
    path = save(tiny(RNNsearch, dtype=np.float32), tmp_path / "small.npz")
    config = json.loads(str(np.load(path)["config"]))
    tampered = _rewrite(path, {**config, "hidden": 3000, "n_tgt": 5000})
    assert tampered.stat().st_size < 20_000
    with pytest.raises(seq2seq.CheckpointError, match="do not fit|needs a float array of shape"):
        load(tampered)
    assert peak_bytes(lambda: load(tampered)) < 2_000_000  # the model would take 500 MB+


# -- 12. errors that name the argument ----------------------------------------------


@pytest.mark.parametrize(
    "prompt", [np.array([], dtype=int), np.zeros((2, 0), dtype=int), np.zeros((0, 3), dtype=int)]
)
def test_12_generate_with_an_empty_prompt_says_so(prompt):
    with pytest.raises(ValueError, match="non-empty prompt"):
        gpt().generate(prompt, 3, temperature=0)


def test_12_generate_refuses_float_prompts_and_tokens_outside_the_vocabulary():
    with pytest.raises(TypeError, match="tokens must be integers"):
        gpt().generate(np.array([1.5, 2.0]), 2, temperature=0)
    with pytest.raises(ValueError, match=r"tokens must be integers in \[0, 10\)"):
        gpt().generate(np.array([1, 10]), 2, temperature=0)


@pytest.mark.parametrize(
    "src, tgt_in, tgt_out, match",
    [
        (SRC[:0], TGT_IN[:0], TGT_OUT[:0], "at least one sentence"),
        (SRC, TGT_IN, TGT_OUT[:, :3], "tgt_in and tgt_out must both have shape"),
        (SRC, TGT_IN[:2], TGT_OUT[:2], "B = 3 as in src"),
        (SRC, TGT_IN, np.zeros_like(TGT_OUT), "only padding"),
        (SRC, TGT_IN + 10, TGT_OUT, r"tgt_in must hold target ids in \[0, 6\)"),
    ],
)
def test_12_a_bad_seq2seq_batch_is_named(src, tgt_in, tgt_out, match):
    lengths = [4, 2, 3][: len(src)]
    with pytest.raises(ValueError, match=match):
        tiny(RNNsearch).loss(src, lengths, tgt_in, tgt_out)


def test_12_translate_needs_a_positive_max_len():
    with pytest.raises(ValueError, match="max_len must be a positive integer"):
        tiny(RNNsearch).translate(SRC, LENGTHS, max_len=0)
    with pytest.raises(TypeError, match="max_len must be a positive integer"):
        tiny(RNNsearch).translate(SRC, LENGTHS, max_len=2.5)


def _damaged(tmp_path, kind):
    path = save(tiny(RNNsearch), tmp_path / "model.npz")
    data = path.read_bytes()
    if kind == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif kind == "not a zip":
        path.write_text("hello")
    elif kind == "bad json":
        _rewrite(path, None, add={"config": np.array("{not json")}).replace(path)
    elif kind == "no config":
        _rewrite(path, None, drop=("config",)).replace(path)
    elif kind == "missing key":
        config = json.loads(str(np.load(path)["config"]))
        del config["hidden"]
        _rewrite(path, config).replace(path)
    elif kind == "missing array":
        _rewrite(path, None, drop=("att.v",)).replace(path)
    elif kind == "pickled array":
        with zipfile.ZipFile(path, "a") as zf, zf.open("evil.npy", "w") as f:
            np.lib.format.write_array(f, np.array([object()], dtype=object), allow_pickle=True)
    return path


@pytest.mark.parametrize(
    "kind",
    [
        "truncated",
        "not a zip",
        "bad json",
        "no config",
        "missing key",
        "missing array",
        "pickled array",
    ],
)
def test_12_a_damaged_checkpoint_gives_an_error_naming_the_file(tmp_path, kind):
    path = _damaged(tmp_path, kind)
    with pytest.raises(seq2seq.CheckpointError, match=str(path).replace(".", r"\.")):
        load(path)


def test_12_save_refuses_extra_keys_that_would_replace_the_config(tmp_path):
    with pytest.raises(ValueError, match="overwrite the model's own config"):
        save(tiny(RNNsearch), tmp_path / "m.npz", hidden=7)


# -- 13. the training command line ---------------------------------------------------


@pytest.mark.parametrize(
    "argv, match",
    [
        (["--test-per-bucket", "0"], "--test-per-bucket: must be a positive integer"),
        (["--test-per-bucket", "x"], "--test-per-bucket: must be a positive integer"),
        (["--runs"], "--runs: expected at least one argument"),
        (["--runs", "nope"], "invalid choice"),
        (["--bogus"], "unrecognized arguments"),
        (["--evaluate-only", "--runs", "rnnsearch_20"], "do not apply"),
    ],
)
def test_13_bad_arguments_exit_2_with_one_line_before_any_work(
    argv, match, tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(ts, "train", lambda *a, **k: pytest.fail("training started"))
    with pytest.raises(SystemExit) as exit_:
        ts.main(["--out", str(tmp_path / "out")] + argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: python -m attention_lib.train.seq2seq")
    last = err.strip().splitlines()[-1]  # the usage, then one line that says what is wrong
    assert last.startswith("python -m attention_lib.train.seq2seq: error:")
    assert match in last and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_13_an_out_that_is_a_file_or_a_foreign_manifest_is_refused_first(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(ts, "train", lambda *a, **k: pytest.fail("training started"))
    (tmp_path / "file").write_text("x")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "manifest.json").write_text("{broken")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "manifest.json").write_text(
        json.dumps({"config": ts.CONFIG, "test_per_bucket": 5, "test_seed": 2015, "models": {}})
    )
    for out, match in (
        ("file", "is a file"),
        ("bad", "cannot merge"),
        ("other", "other settings"),
        ("empty", "no manifest.json"),
    ):
        extra = ["--evaluate-only"] if out == "empty" else []
        with pytest.raises(SystemExit) as exit_:
            ts.main(["--out", str(tmp_path / out)] + extra)
        assert exit_.value.code == 2
        assert match in capsys.readouterr().err


def test_13_piped_into_head_it_exits_quietly(tmp_path):
    code = (
        "import sys\n"
        "from attention_lib.train import seq2seq as ts\n"
        "ts.RUNS = {'a': ('RNNsearch', 5, 6, 3, 1), 'b': ('RNNencdec', 5, 6, 3, 2)}\n"
        "ts.CONFIG = {**ts.CONFIG, 'emb': 4, 'hidden': 4, 'attn': 4, 'batch': 2}\n"
        "ts.evaluate = lambda *a, **k: {'buckets': []}\n"
        "ts.make_test_sets = lambda *a, **k: {}\n"
        f"sys.exit(ts.main(['--out', {str(tmp_path)!r}]))\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO
    )
    proc.stdout.readline()  # as `| head -1` does
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=120) == ts.EXIT_BROKEN_PIPE
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


# -- top_p: nucleus sampling ----------------------------------------------------------


def _hf_top_p(logits, top_p):
    """Hugging Face's TopPLogitsWarper, written with torch (min_tokens_to_keep=1)."""
    torch = pytest.importorskip("torch")
    scores = torch.tensor(logits)
    sorted_logits, sorted_indices = torch.sort(scores, descending=False)
    cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
    remove_sorted = cumulative <= (1 - top_p)
    remove_sorted[..., -1:] = False
    remove = remove_sorted.scatter(1, sorted_indices, remove_sorted)
    return scores.masked_fill(remove, -float("inf")).numpy()


@pytest.mark.parametrize("top_p", [0.0, 0.05, 0.3, 0.5, 0.9, 0.999])
def test_top_p_keeps_the_same_tokens_as_hugging_face(top_p):
    logits = np.random.default_rng(7).normal(scale=3, size=(200, 17))
    ours, theirs = gpt_module.filter_logits(logits, top_p=top_p), _hf_top_p(logits, top_p)
    np.testing.assert_array_equal(np.isfinite(ours), np.isfinite(theirs))
    np.testing.assert_array_equal(ours[np.isfinite(ours)], theirs[np.isfinite(theirs)])


def test_top_p_comes_after_temperature_and_top_k():
    z = np.log(np.array([[0.4, 0.3, 0.2, 0.1]]))
    # top_k = 2 leaves 0.4 and 0.3, renormalised to 4/7 and 3/7: top_p = 0.5 keeps one
    assert np.isfinite(gpt_module.filter_logits(z, top_k=2, top_p=0.5)).tolist() == [
        [True, False, False, False]
    ]
    # on the full distribution top_p = 0.5 needs two tokens
    assert np.isfinite(gpt_module.filter_logits(z, top_p=0.5)).sum() == 2


def test_generate_with_top_p_samples_only_from_the_nucleus():
    model = gpt()
    prompt = np.array([[1, 2, 3]])
    z = model.forward(prompt)[:, -1] / 0.8
    nucleus = set(np.flatnonzero(np.isfinite(gpt_module.filter_logits(z, top_p=0.6))).tolist())
    assert 1 <= len(nucleus) < 10
    rng = np.random.default_rng(3)
    seen = {
        int(model.generate(prompt, 1, temperature=0.8, top_p=0.6, rng=rng)[0, -1])
        for _ in range(200)
    }
    assert seen == nucleus


@pytest.mark.parametrize("top_p", [-0.1, 1.1, "0.5", True])
def test_top_p_must_be_a_probability(top_p):
    with pytest.raises(ValueError, match=r"top_p must be a probability in \[0, 1\]"):
        gpt().generate(np.array([1]), 1, temperature=1.0, top_p=top_p, rng=np.random.default_rng(0))


# -- evaluation: lists that zip would cut short -------------------------------------


def test_evaluation_refuses_lists_of_different_lengths():
    from attention_lib.train.evaluation import (
        alignment_error_rate,
        exact_accuracy,
        make_test_sets,
    )
    from attention_lib.data.toy_translation import Pair

    with pytest.raises(ValueError, match="same length"):
        exact_accuracy([["a"], ["b"]], [["a"]])
    with pytest.raises(ValueError, match="non-empty"):
        exact_accuracy([], [])
    p = Pair(("a", "b"), ("x", "y"), ((1, 0), (0, 1)), ("noun", "verb"))
    with pytest.raises(ValueError, match="same length"):
        alignment_error_rate([p, p], [np.eye(2)])
    with pytest.raises(ValueError, match=r"weights\[0\] must have shape"):
        alignment_error_rate([p], [np.eye(3)])
    with pytest.raises(ValueError, match="n_per_bucket must be a positive integer"):
        make_test_sets(0)
