"""The browser checker's own logic, without a browser (scripts/check-browser.sh runs the rest).

Its self-test must say, when a fixture's verdicts drift (a new Chromium or
axe-core), which verdict is extra or missing and which rule or check gave it.
"""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytest.importorskip("playwright")
spec = importlib.util.spec_from_file_location(
    "browser_check", ROOT / "scripts" / "browser_check.py"
)
browser_check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(browser_check)


def test_an_extra_axe_verdict_is_traced_to_its_rule():
    detail = (
        "1280 px: color-contrast on 1 element(s): Elements must meet minimum color "
        "contrast ratio thresholds (e.g. mjx-utext)"
    )
    lines = browser_check.verdict_diff(
        "math_error.html",
        {"math-error"},
        [("math-error", "Missing argument for \\frac"), ("axe-serious", detail)],
    )
    assert len(lines) == 1
    assert lines[0].startswith(
        "math_error.html: EXTRA axe-serious from axe-core rule color-contrast"
    )
    assert "mjx-utext" in lines[0]


def test_a_missing_verdict_names_the_check_that_did_not_fire():
    lines = browser_check.verdict_diff("long_cell.html", {"long-cell"}, [])
    assert lines == [
        "long_cell.html: MISSING long-cell: a visible code cell longer than 20 lines did not "
        "fire; found instead: nothing"
    ]


def test_every_expected_verdict_of_the_fixtures_has_a_source():
    kinds = set().union(*(expected for _, _, expected in browser_check.SELF_TEST_PAGES.values()))
    kinds |= set().union(*(expected for _, _, expected in browser_check.CHART_PAGES.values()))
    kinds -= {"axe-critical", "axe-serious"}
    assert kinds <= set(browser_check.VERDICT_SOURCES), kinds - set(browser_check.VERDICT_SOURCES)


def test_axe_leaves_mathjax_error_boxes_to_the_math_error_check():
    # MathJax's own red-on-yellow error box is excluded from axe's run, whose verdict
    # on its colours changes with the browser; the page fails on math-error anyway
    assert "exclude: [['mjx-merror']]" in browser_check.AXE_RUN_JS
    assert browser_check.SELF_TEST_PAGES["math_error.html"][2] == {"math-error"}
