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
