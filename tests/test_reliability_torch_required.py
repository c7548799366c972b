"""The test command's PyTorch cross-checks fail loudly when torch is missing (issue 26).

With ATTENTION_REQUIRE_TORCH=1 (set by scripts/run-tests.sh), tests/conftest.py
turns a missing torch into an error instead of ~200 quiet skips; without it,
a reader without torch still gets skips.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _run(tmp_path, require):
    hidden = tmp_path / "hidden" / "torch"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text(
        'raise ModuleNotFoundError("No module named \'torch\'", name="torch")\n'
    )
    suite = tmp_path / "suite"
    suite.mkdir()
    shutil.copy(HERE / "conftest.py", suite / "conftest.py")
    (suite / "test_x.py").write_text(
        "import pytest\n\n\ndef test_cross_check():\n    pytest.importorskip('torch')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "ATTENTION_REQUIRE_TORCH"}
    env["PYTHONPATH"] = str(tmp_path / "hidden")
    if require:
        env["ATTENTION_REQUIRE_TORCH"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(suite)],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )


def test_without_the_requirement_a_missing_torch_skips(tmp_path):
    result = _run(tmp_path, require=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 skipped" in result.stdout


def test_with_the_requirement_a_missing_torch_is_an_error(tmp_path):
    result = _run(tmp_path, require=True)
    assert result.returncode != 0
    assert "ATTENTION_REQUIRE_TORCH=1 but torch cannot be imported" in (
        result.stdout + result.stderr
    )
