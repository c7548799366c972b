"""Issue 38, section 4: the faults the fourth adversarial pass found in the loaders,
the trainers, the command lines, the threaded attention and the losses' checks.

Each test here fails on the code before the fix (the issue's reproduction).
"""

import multiprocessing

import numpy as np
import pytest

from attention_lib import MultiHeadAttention

FORK = "fork" in multiprocessing.get_all_start_methods()


# -- a hang after fork ---------------------------------------------------------------


def _threaded_attention():
    """A call that deals its sequences out to the thread pool (several groups, 2 BLAS threads)."""
    from threadpoolctl import threadpool_limits

    layer = MultiHeadAttention(8, 4, rng=0)
    x = np.random.default_rng(1).normal(size=(4, 1024, 8))
    with threadpool_limits(limits=2, user_api="blas"):
        out, _ = layer(x, x, x)
    return float(out.sum())


def _child(queue):
    queue.put(_threaded_attention())


@pytest.mark.skipif(not FORK, reason="fork is POSIX-only")
def test_threaded_attention_runs_in_a_forked_child():
    expected = _threaded_attention()  # the parent's pool now exists
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child, args=(queue,))
    child.start()
    child.join(60)
    hung = child.is_alive()
    if hung:
        child.kill()
        child.join()
    assert not hung, "the attention call hung in the fork child"
    assert child.exitcode == 0
    assert queue.get(timeout=5) == expected
