"""pyproject.toml: metadata that current build tools accept without warnings."""

from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")   # Python 3.11+

ROOT = Path(__file__).resolve().parents[1]


def _pyproject():
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf8"))


def test_license_is_an_spdx_expression():
    """``license = {text = ...}`` is deprecated by setuptools (PEP 639): builds
    fail from 2027. The SPDX string form needs setuptools 77 or later."""
    project = _pyproject()["project"]
    assert project["license"] == "MIT"
    assert not any(c.startswith("License ::") for c in project.get("classifiers", []))


def test_build_requires_a_setuptools_that_understands_spdx_licenses():
    requires = _pyproject()["build-system"]["requires"]
    setuptools = [r.replace(" ", "") for r in requires if r.startswith("setuptools")]
    assert len(setuptools) == 1 and setuptools[0].startswith("setuptools>=")
    minimum = tuple(int(p) for p in setuptools[0].split(">=")[1].split(".")[:2])
    assert minimum >= (77,)
