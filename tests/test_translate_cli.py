"""``python -m attention_lib.translate``: input handling, errors, batching and speed."""

import io
import subprocess
import sys

import pytest

from attention_lib.train.translation import checkpoint_dir
from attention_lib.translate import MAX_SOURCE_TOKENS, main

needs_models = pytest.mark.skipif(
    not (checkpoint_dir() / "manifest.json").exists(), reason="no committed translation checkpoints"
)


class Stdin(io.StringIO):
    """Standard input with a binary ``buffer``, as the real one has."""

    def __init__(self, data: bytes):
        super().__init__()
        self.buffer = io.BytesIO(data)


def run(argv, data=b""):
    out, err = io.StringIO(), io.StringIO()
    try:
        code = main(argv, stdin=Stdin(data), stdout=out, stderr=err)
    except SystemExit as exc:
        code = exc.code
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--model", "gpt"], "invalid choice"),
        (["--beam", "0"], "positive integer"),
        (["--beam", "two"], "positive integer"),
        (["/no/such/file.txt"], "cannot read it"),
        (["--length-penalty", "nan"], "length-penalty"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(argv, message, capsys):
    code, out, _ = run(argv)
    err = capsys.readouterr().err
    assert code == 2 and out == ""
    assert message in err and "Traceback" not in err
    assert len(err.strip().splitlines()[-1]) > 0


def test_non_utf8_input_exits_2(capsys):
    code, out, _ = run(["-"], "café\n".encode("latin-1"))
    assert code == 2 and out == ""
    assert "not UTF-8" in capsys.readouterr().err


def test_directory_exits_2(tmp_path, capsys):
    code, _, _ = run([str(tmp_path)])
    assert code == 2 and "is a directory" in capsys.readouterr().err


@needs_models
def test_one_line_out_per_line_in_and_empty_lines_stay_empty():
    code, out, _ = run(["-"], b"I am cold.\n\nWhere is the station?\n")
    lines = out.split("\n")
    assert code == 0 and len(lines) == 4 and lines[-1] == ""
    assert lines[0] and lines[1] == "" and lines[2]


@needs_models
def test_the_same_sentence_translates_the_same_alone_and_in_a_batch():
    code, alone, _ = run(["-"], b"Tom is here.\n")
    code2, batched, _ = run(
        ["-"], b"I like it.\nTom is here.\nShe runs every morning in the park.\n"
    )
    assert code == code2 == 0
    assert batched.split("\n")[1] == alone.split("\n")[0]


@needs_models
def test_a_too_long_line_is_truncated_and_named():
    long = " ".join(["word"] * (MAX_SOURCE_TOKENS + 20))
    code, out, err = run(["-"], f"Hello.\n{long}\n".encode())
    assert code == 0 and len(out.split("\n")) == 3
    assert "line 2" in err and str(MAX_SOURCE_TOKENS) in err


@needs_models
def test_beam_search_runs_from_the_command_line():
    code, out, _ = run(["--beam", "3", "-"], b"I am cold.\n")
    assert code == 0 and out.strip()


@needs_models
def test_rnnsearch_translates_too():
    code, out, _ = run(["--model", "rnnsearch", "-"], b"I am cold.\n")
    assert code == 0 and out.strip()


@needs_models
def test_a_closed_pipe_is_a_quiet_exit():
    lines = "".join(f"Sentence number {k} is short.\n" for k in range(600)).encode()
    proc = subprocess.Popen(
        [sys.executable, "-m", "attention_lib.translate"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdin.write(lines)
    proc.stdin.close()
    proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.wait(timeout=300)
    assert "Traceback" not in err and "BrokenPipe" not in err


@needs_models
def test_many_lines_are_translated_in_batches_in_input_order(monkeypatch):
    from attention_lib import translate

    calls = []
    real = translate.translate_ids

    def counting(model, src_ids, *args, **kwargs):
        calls.append(len(src_ids))
        return real(model, src_ids, *args, **kwargs)

    monkeypatch.setattr(translate, "translate_ids", counting)
    lines = ["Hello.", "Tom is here.", "I am cold."] * 30
    code, out, _ = run(["-"], "".join(s + "\n" for s in lines).encode())
    outs = out.split("\n")[:-1]
    assert code == 0 and len(outs) == 90 and calls == [90]
    assert outs[0::3] == [outs[0]] * 30 and outs[1::3] == [outs[1]] * 30
