"""``python -m attention_lib.generate``: what it prints, its context window, its errors."""

import io
import os
import subprocess
import sys

import numpy as np
import pytest

from attention_lib.generate import continue_text, main
from attention_lib.models import load_pretrained


@pytest.fixture(scope="module")
def shakespeare():
    return load_pretrained("shakespeare")


def run(argv):
    out, err = io.StringIO(), io.StringIO()
    status = main(argv, stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


def test_it_prints_the_prompt_then_exactly_n_new_characters():
    status, out, err = run(
        ["--model", "shakespeare", "--prompt", "ROMEO:", "--max-new-tokens", "40", "--seed", "3"]
    )
    assert status == 0 and err == ""
    assert out.startswith("ROMEO:") and out.endswith("\n")
    assert len(out) == len("ROMEO:") + 40 + 1


def test_the_seed_makes_a_sample_repeatable_and_temperature_zero_is_greedy(shakespeare):
    argv = ["--model", "shakespeare", "--prompt", "KING:", "--max-new-tokens", "30"]
    first, second = run(argv + ["--seed", "7"])[1], run(argv + ["--seed", "7"])[1]
    assert first == second
    assert run(argv + ["--seed", "8"])[1] != first
    model, tok = shakespeare
    greedy = model.generate(tok.encode("KING:"), 30, temperature=0)
    assert run(argv + ["--temperature", "0"])[1] == tok.decode(greedy) + "\n"


def test_the_knobs_reach_the_sampler(shakespeare):
    # top-k 1 and a tiny top-p both leave one token: the greedy text, whatever the seed.
    argv = ["--model", "shakespeare", "--prompt", "First Citizen:", "--max-new-tokens", "25"]
    greedy = run(argv + ["--temperature", "0"])[1]
    assert run(argv + ["--top-k", "1", "--seed", "1"])[1] == greedy
    assert run(argv + ["--top-p", "1e-9", "--seed", "2"])[1] == greedy
    assert run(argv + ["--temperature", "2.0", "--seed", "1"])[1] != greedy


def test_zero_new_tokens_prints_the_prompt_alone():
    assert run(["--model", "shakespeare", "--prompt", "To be", "--max-new-tokens", "0"])[1:] == (
        "To be\n",
        "",
    )


def test_past_max_len_the_context_is_cropped_as_the_library_crops_it(shakespeare):
    model, tok = shakespeare
    prompt = tok.encode("ROMEO:\nO, she doth teach the torches to burn bright!\n")
    n = model.max_len - len(prompt) + 80  # 80 tokens past a full context
    got = np.concatenate([prompt, *continue_text(model, prompt, n, temperature=0)])
    assert len(got) == len(prompt) + n
    np.testing.assert_array_equal(got, model.generate(prompt, n, temperature=0))
    # The rule by hand: the context full at 128 tokens, then its last 64 read again.
    W, H = model.max_len, model.max_len // 2
    for t, start in [(W, 0), (W + 1, W + 1 - H), (W + H, W + 1 - H)]:
        window = got[start:t]
        assert got[t] == model.forward(window[None])[0, -1].argmax(), t


def test_1000_characters_past_the_shakespeare_context_come_quickly(shakespeare):
    model, tok = shakespeare
    status, out, err = run(
        ["--model", "shakespeare", "--prompt", "ROMEO:", "--max-new-tokens", "1128",
         "--temperature", "0"]
    )  # fmt: skip
    assert status == 0 and err == "" and len(out) == len("ROMEO:") + 1128 + 1
    assert out == tok.decode(model.generate(tok.encode("ROMEO:"), 1128, temperature=0)) + "\n"


def test_no_crop_refuses_a_generation_longer_than_the_context(capsys):
    argv = ["--model", "shakespeare", "--prompt", "ROMEO:", "--max-new-tokens", "122"]
    assert run(argv + ["--no-crop", "--temperature", "0"])[0] == 0  # 6 + 122 = 128 fits
    with pytest.raises(SystemExit) as exit_:
        main(argv[:-1] + ["123", "--no-crop"])
    assert exit_.value.code == 2
    assert "exceeds the model's context of 128 tokens" in capsys.readouterr().err


def test_a_temperature_too_small_to_divide_by_is_refused(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--model", "shakespeare", "--prompt", "a", "--max-new-tokens", "3",
              "--temperature", "1e-320"])  # fmt: skip
    assert exit_.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "--temperature: temperature = 1e-320 is too small" in captured.err


def test_a_prompt_longer_than_the_context_is_kept_whole_and_read_from_its_end(shakespeare):
    model, tok = shakespeare
    prompt = (
        "Now is the winter of our discontent\nMade glorious summer by this sun of York;\n"
    ) * 4  # > 128 characters
    assert len(prompt) > model.max_len
    status, out, err = run(
        ["--model", "shakespeare", "--prompt", prompt, "--max-new-tokens", "5",
         "--temperature", "0"]
    )  # fmt: skip
    assert status == 0 and out.startswith(prompt)
    assert "continues from the last 128" in err and "\n" not in err.rstrip("\n")
    expected = model.generate(tok.encode(prompt)[-model.max_len :], 1, temperature=0)
    assert out[len(prompt)] == tok.decode(expected[-1:])


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--prompt", "a", "--max-new-tokens", "3"], "--model"),
        (["--model", "gpt2", "--prompt", "a", "--max-new-tokens", "3"], "invalid choice: 'gpt2'"),
        (["--model", "shakespeare", "--prompt", "a"], "--max-new-tokens"),
        (["--model", "shakespeare", "--prompt", "a", "--max-new-tokens", "-1"], "integer >= 0"),
        (["--model", "shakespeare", "--prompt", "a", "--max-new-tokens", "ten"], "integer >= 0"),
        (["--model", "shakespeare", "--max-new-tokens", "3"], "--prompt is empty"),
        (["--model", "shakespeare", "--prompt", "", "--max-new-tokens", "3"], "--prompt is empty"),
        (
            ["--model", "shakespeare", "--prompt", "Café 😀", "--max-new-tokens", "3"],
            "2 characters outside the vocabulary of 65: 'é', '😀'",
        ),
        (
            [
                "--model",
                "shakespeare",
                "--prompt",
                "a",
                "--max-new-tokens",
                "3",
                "--temperature",
                "-0.5",
            ],
            "--temperature: must be >= 0",
        ),
        (
            [
                "--model",
                "shakespeare",
                "--prompt",
                "a",
                "--max-new-tokens",
                "3",
                "--temperature",
                "nan",
            ],
            "--temperature: must be a finite number",
        ),
        (
            ["--model", "shakespeare", "--prompt", "a", "--max-new-tokens", "3", "--top-k", "0"],
            "--top-k: must be a positive integer",
        ),
        (
            ["--model", "shakespeare", "--prompt", "a", "--max-new-tokens", "3", "--top-p", "0"],
            "--top-p: must be a probability in (0, 1]",
        ),
        (
            ["--model", "shakespeare", "--prompt", "a", "--max-new-tokens", "3", "--top-p", "1.5"],
            "--top-p: must be a probability in (0, 1]",
        ),
        (
            ["--model", "shakespeare", "--prompt", "a", "--max-new-tokens", "3", "--seed", "-2"],
            "--seed: must be an integer >= 0",
        ),
    ],
)
def test_bad_input_is_one_line_on_stderr_and_status_2(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    last = captured.err.rstrip("\n").splitlines()[-1]
    assert last.startswith("python -m attention_lib.generate: error: ")
    assert message in last
    assert "Traceback" not in captured.err


def test_a_missing_checkpoint_is_status_1_without_a_traceback(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "attention_lib.generate",
            "--model",
            "shakespeare",
            "--prompt",
            "a",
            "--max-new-tokens",
            "3",
        ],
        check=False,
        capture_output=True,
        text=True,
        env={**os.environ, "ATTENTION_DATA_DIR": str(tmp_path)},
    )
    assert result.returncode == 1 and result.stdout == ""
    assert "shakespeare.npz is missing" in result.stderr and "Traceback" not in result.stderr


def test_it_runs_as_a_module_and_stops_quietly_when_the_pipe_closes():
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "attention_lib.generate",
            "--model",
            "shakespeare",
            "--prompt",
            "ROMEO:\n",
            "--max-new-tokens",
            "3000",
            "--seed",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    first = proc.stdout.readline()
    proc.stdout.close()  # what `head -1` does after one line
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=120) == 141  # 128 + SIGPIPE, as a shell reports
    assert first == b"ROMEO:\n"
    assert err == ""


def test_stories260k_writes_from_its_start_token():
    pytest.importorskip("attention_lib.models.llama")
    status, out, _ = run(
        [
            "--model",
            "stories260k",
            "--prompt",
            "Once upon a time",
            "--max-new-tokens",
            "20",
            "--temperature",
            "0",
        ]
    )
    model, tok = load_pretrained("stories260k")
    ids = tok.encode("Once upon a time")
    greedy = tok.decode(model.generate(ids, 20, temperature=0))
    assert status == 0 and out.startswith("Once upon a time")
    assert out == greedy + "\n"
