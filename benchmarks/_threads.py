"""Set BLAS's thread count from ``--threads`` before NumPy is imported.

OpenBLAS reads its thread count once, when NumPy loads it, so a benchmark that
takes ``--threads`` must read it from ``sys.argv`` before its first NumPy
import: ``THREADS = threads_from_argv(default)`` at the top of the script.
"""

import os
import sys


def threads_from_argv(default, argv=None):
    """The value of ``--threads`` in ``argv`` (or ``default``), exported to BLAS."""
    argv = sys.argv[1:] if argv is None else argv
    threads = str(default)
    for i, arg in enumerate(argv):
        if arg == "--threads" and i + 1 < len(argv):
            threads = argv[i + 1]
        elif arg.startswith("--threads="):
            threads = arg.split("=", 1)[1]
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = threads
    return threads
