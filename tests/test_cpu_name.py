"""cpu_name: the processor every manifest and benchmark names."""

import io

import pytest

from attention_lib.train import evaluate_long_context as elc

TWO = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
model name\t: AMD EPYC

processor\t: 1
cpu family\t: 6
model\t\t: 85
model name\t: Another CPU
"""


def fake_open(text):
    def opener(path, *args, **kwargs):
        assert path == "/proc/cpuinfo"
        return io.StringIO(text)

    return opener


def test_cpu_name_gives_the_first_processors_name_family_and_model(monkeypatch):
    monkeypatch.setattr(elc, "open", fake_open(TWO), raising=False)
    assert elc.cpu_name() == "AMD EPYC (family 25, model 17)"


def test_cpu_name_without_family_gives_the_name_alone(monkeypatch):
    monkeypatch.setattr(elc, "open", fake_open("model name\t: Some ARM core\n"), raising=False)
    assert elc.cpu_name() == "Some ARM core"


@pytest.mark.parametrize("text", ["processor\t: 0\nBogoMIPS\t: 100\n", ""])
def test_cpu_name_without_a_model_name_is_unknown(monkeypatch, text):
    monkeypatch.setattr(elc, "open", fake_open(text), raising=False)
    assert elc.cpu_name() == "unknown"


def test_cpu_name_without_proc_is_unknown(monkeypatch):
    def missing(*args, **kwargs):
        raise FileNotFoundError("/proc/cpuinfo")

    monkeypatch.setattr(elc, "open", missing, raising=False)
    assert elc.cpu_name() == "unknown"
