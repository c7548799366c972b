"""The Binder and Colab checks' sharing of the chapters (scripts/binder_check.py).

The test command gives each check every other chapter (``--share 1/2``, ``--share
2/2``): together they must execute every chapter exactly once, and each must
import, in its own environment, what the chapters it does not execute import.
"""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
spec = importlib.util.spec_from_file_location("binder_check", ROOT / "scripts" / "binder_check.py")
binder_check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(binder_check)


def test_the_two_halves_execute_every_chapter_once():
    notebooks = binder_check.toc_notebooks(ROOT / "_toc.yml")
    first, rest_of_first = binder_check.share(notebooks, "1/2")
    second, rest_of_second = binder_check.share(notebooks, "2/2")
    assert sorted(first + second) == sorted(notebooks)
    assert not set(first) & set(second)
    assert rest_of_first == second and rest_of_second == first
    assert binder_check.share(notebooks, "1/1") == (notebooks, [])


@pytest.mark.parametrize("spec", ["0/2", "3/2", "1", "a/b", "1/0"])
def test_a_bad_share_is_refused_by_name(spec):
    with pytest.raises(SystemExit, match="--share must be K/N"):
        binder_check.share([Path("a.ipynb")], spec)


def notebook(tmp_path, *sources):
    cells = [{"cell_type": "code", "source": s, "metadata": {}} for s in sources]
    cells.append({"cell_type": "markdown", "source": "import markdown_is_not_code"})
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps({"cells": cells}))
    return path


def test_notebook_imports_reads_every_form_of_import(tmp_path):
    nb = notebook(
        tmp_path,
        "import os, sys\nimport numpy as np\n",
        "from attention_lib.models import gpt\n  from scipy.special import ndtr\n",
        "import google.colab\nx = 'import not_at_line_start'\n%matplotlib inline\n",
    )
    assert binder_check.notebook_imports([nb]) == [
        "attention_lib.models",
        "numpy",
        "os",
        "scipy.special",
        "sys",
    ]


def test_check_imports_names_a_module_that_does_not_import(tmp_path, capsys):
    good = notebook(tmp_path, "import json\n")
    binder_check.check_imports(sys.executable, None, [good], tmp_path, "binder check")
    assert "every one of the 1 module(s) they import imports here" in capsys.readouterr().out
    bad = notebook(tmp_path, "import json\nimport no_such_module_here\n")
    with pytest.raises(SystemExit, match="no_such_module_here"):
        binder_check.check_imports(sys.executable, None, [bad], tmp_path, "binder check")
