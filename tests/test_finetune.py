"""Chapter 16's finetuning: LoRA's guarded step and ``translate --model smollm2-lora``.

``lora.step`` refuses a NaN gradient and changes nothing; the command line
translates with SmolLM2 and the committed adapters, one French line per
English line, and refuses a beam, a missing or an altered adapter in one line.
"""

import io
import shutil

import numpy as np
import pytest

from attention_lib import translate
from attention_lib.models.gpt import TinyGPT
from attention_lib.nn import Adam, lora

needs_adapter = pytest.mark.skipif(
    not translate.smollm2_adapter_path().is_file(), reason="no committed SmolLM2 adapter"
)


def small_lora_model():
    model = TinyGPT(10, 8, 2, 1, 16, 6, np.random.default_rng(0))
    adapters = lora.apply(model, ("q", "v"), rank=2, alpha=4, rng=np.random.default_rng(1))
    for a in adapters:
        a.params["lora_B"][:] = np.random.default_rng(2).normal(size=a.params["lora_B"].shape)
    return model, adapters


def test_step_clips_and_moves_only_the_adapters():
    model, adapters = small_lora_model()
    opt = Adam(adapters, lr=0.01)
    before = [a.params["lora_A"].copy() for a in adapters]
    logits = model.forward(np.array([[1, 2, 3, 4]]))
    model.backward(100.0 * np.ones_like(logits))  # a gradient far above norm 1
    norm = lora.step(adapters, opt, max_norm=1.0)
    after = np.sqrt(sum(float(np.sum(g**2)) for a in adapters for g in a.grads.values()))
    assert norm > 1.0 and after == pytest.approx(1.0, rel=1e-4)
    assert all(not np.array_equal(b, a.params["lora_A"]) for b, a in zip(before, adapters))


def test_step_refuses_a_nan_batch_and_changes_nothing():
    model, adapters = small_lora_model()
    opt = Adam(adapters, lr=0.01)
    logits = model.forward(np.array([[1, 2, 3, 4]]))
    model.backward(np.ones_like(logits))
    lora.step(adapters, opt)  # one good step: the optimiser has moments to keep
    state = [{k: v.copy() for k, v in a.params.items()} for a in adapters]
    moments = [{k: v.copy() for k, v in m.items()} for m in opt.m + opt.v]
    t = opt.t
    logits = model.forward(np.array([[1, 2, 3, 4]]))
    dlogits = np.ones_like(logits)
    dlogits[0, 1, 3] = np.nan
    model.backward(dlogits)
    with pytest.raises(ValueError, match="NaN or infinity .*step is refused"):
        lora.step(adapters, opt)
    for a, s in zip(adapters, state):
        for k in s:
            assert np.array_equal(a.params[k], s[k])
    assert opt.t == t
    for m, m0 in zip(opt.m + opt.v, moments):
        assert all(np.array_equal(m[k], m0[k]) for k in m0)


class Stdin(io.StringIO):
    def __init__(self, data: bytes):
        super().__init__()
        self.buffer = io.BytesIO(data)


def run(argv, data=b""):
    out, err = io.StringIO(), io.StringIO()
    try:
        code = translate.main(argv, stdin=Stdin(data), stdout=out, stderr=err)
    except SystemExit as exc:
        code = exc.code
    return code, out.getvalue(), err.getvalue()


def test_smollm2_lora_refuses_a_beam(capsys):
    code, out, _ = run(["--model", "smollm2-lora", "--beam", "2", "-"], b"Hello.\n")
    err = capsys.readouterr().err
    assert code == 2 and out == "" and "decodes greedily: --beam must be 1" in err


def test_a_missing_adapter_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(translate, "smollm2_adapter_path", lambda: tmp_path / "none.npz")
    code, out, _ = run(["--model", "smollm2-lora", "-"], b"Hello.\n")
    err = capsys.readouterr().err
    assert code == 1 and out == ""
    assert "none.npz is missing" in err and len(err.strip().splitlines()) == 1


@needs_adapter
def test_an_altered_adapter_is_refused_before_the_model_loads(tmp_path, monkeypatch, capsys):
    src = translate.smollm2_adapter_path()
    shutil.copy(src.with_name("smollm2_translate.json"), tmp_path / "smollm2_translate.json")
    data = bytearray(src.read_bytes())
    data[-100] ^= 1
    (tmp_path / src.name).write_bytes(bytes(data))
    monkeypatch.setattr(translate, "smollm2_adapter_path", lambda: tmp_path / src.name)
    code, out, _ = run(["--model", "smollm2-lora", "-"], b"Hello.\n")
    err = capsys.readouterr().err
    assert code == 1 and out == "" and "sha256" in err.lower()


@needs_adapter
def test_smollm2_lora_translates_one_french_line_per_line():
    code, out, _ = run(["--model", "smollm2-lora", "-"], b"I am cold.\n\nThank you.\n")
    lines = out.split("\n")
    assert code == 0 and len(lines) == 4 and lines[-1] == ""
    assert lines[0] and lines[1] == "" and lines[2]
    assert lines[0] != "I am cold." and lines[2] != "Thank you."  # translated, not echoed
