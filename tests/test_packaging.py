"""pyproject.toml: metadata that current build tools accept without warnings."""

from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

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


def test_every_subpackage_and_the_chart_loader_are_packaged():
    """A subpackage missing from ``packages`` (or the chart loader missing from the
    package data) is absent from a wheel, though an editable install hides it."""
    tool = _pyproject()["tool"]["setuptools"]
    found = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "attention_lib").rglob("__init__.py")
    }
    assert set(tool["packages"]) == found
    assert (ROOT / "attention_lib/presentation/chart_loader.js").is_file()
    assert "*.js" in tool["package-data"]["attention_lib.presentation"]
