"""attention_lib.glue: myst-nb's glue in the book's build, a plain display elsewhere."""

import pytest

from attention_lib import glue
from attention_lib.presentation import _glue


def test_without_myst_nb_the_value_is_printed_outside_ipython(monkeypatch, capsys):
    monkeypatch.setattr(_glue, "_myst_nb_glue", None)
    glue("n_heads", 8)
    assert capsys.readouterr().out == "8\n"


def test_without_myst_nb_display_false_shows_nothing(monkeypatch, capsys):
    monkeypatch.setattr(_glue, "_myst_nb_glue", None)
    glue("n_heads", 8, display=False)
    assert capsys.readouterr().out == ""


def test_without_myst_nb_a_notebook_displays_the_value(monkeypatch):
    ipython = pytest.importorskip("IPython")
    shown = []
    monkeypatch.setattr(_glue, "_myst_nb_glue", None)
    monkeypatch.setattr(ipython, "get_ipython", lambda: object())
    monkeypatch.setattr("IPython.display.display", lambda value: shown.append(value))
    glue("ratio", 0.25)
    assert shown == [0.25]


def test_with_myst_nb_the_call_is_handed_on(monkeypatch):
    calls = []
    monkeypatch.setattr(
        _glue, "_myst_nb_glue", lambda name, value, display: calls.append((name, value, display))
    )
    glue("bleu", 29.6, display=False)
    assert calls == [("bleu", 29.6, False)]


def test_the_real_myst_nb_glue_is_used_when_installed():
    myst_nb = pytest.importorskip("myst_nb")
    assert _glue._myst_nb_glue is myst_nb.glue


@pytest.mark.parametrize("name", ["", None, 3])
def test_a_name_that_is_not_a_string_is_refused(name):
    with pytest.raises(TypeError, match="name must be a non-empty string"):
        glue(name, 1)
