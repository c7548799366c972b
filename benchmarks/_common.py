"""Helpers shared by the benchmark scripts: the machine's description, timing, memory."""

import os
import platform
import random
import statistics
import time
import tracemalloc

import numpy as np

from attention_lib.train.evaluate_long_context import cpu_name

MiB = 2**20


def _memory_gib():
    try:
        with open("/proc/meminfo") as f:
            kib = int(f.readline().split()[1])  # MemTotal: N kB
        return f"{kib / 2**20:.1f} GiB RAM"
    except (OSError, ValueError, IndexError):
        return "RAM unknown"


def _blas():
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return f"{blas['name']} {blas['version']}"
    except Exception:  # the layout of show_config differs between versions
        return "unknown BLAS"


def describe_machine(torch=None):
    """One paragraph saying what the numbers were measured on."""
    threads = os.environ.get("OPENBLAS_NUM_THREADS") or os.environ.get("OMP_NUM_THREADS")
    lines = [
        f"machine: {cpu_name()}, {os.cpu_count()} logical CPUs, {_memory_gib()}, "
        f"{platform.system()} {platform.release()}",
        f"python {platform.python_version()}, numpy {np.__version__} "
        f"({_blas()}, threads: {threads or 'BLAS default'})",
    ]
    if torch is not None:
        lines.append(f"torch {torch.__version__} ({torch.get_num_threads()} threads)")
    try:
        load = "load average before the run: {:.2f}, {:.2f}, {:.2f} (1, 5, 15 min)".format(
            *os.getloadavg()
        )
    except OSError:
        load = "load average unknown"
    lines.append(f"run at {time.strftime('%Y-%m-%d %H:%M %Z')}; {load}")
    return "\n".join(lines)


def peak_extra_memory(fn):
    """Run ``fn()`` once; return its result and the peak memory it allocated, in bytes.

    Measured with tracemalloc, which sees NumPy's array buffers (and every
    Python object) but not memory allocated by other libraries such as torch.
    The inputs, allocated before the call, are not counted.
    """
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before, _ = tracemalloc.get_traced_memory()
        result = fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, peak - before


def median_times(functions, repeats, min_seconds=0.0, seed=0):
    """Median wall time of each function, run in turns, in a shuffled order.

    Taking turns rather than timing one function ``repeats`` times and then
    the next spreads any slow spell of a shared machine over all of them; the
    order is shuffled every round because whichever call comes first after a
    pause pays for waking the BLAS threads. Runs at least ``repeats`` rounds,
    and more (up to 10x) while the whole has taken less than ``min_seconds``.
    """
    rng = random.Random(seed)
    names = list(functions)
    times = {name: [] for name in names}
    start = time.perf_counter()
    rounds = 0
    while rounds < repeats or (time.perf_counter() - start < min_seconds and rounds < 10 * repeats):
        rng.shuffle(names)
        for name in names:
            t0 = time.perf_counter()
            functions[name]()
            times[name].append(time.perf_counter() - t0)
        rounds += 1
    return {name: statistics.median(ts) for name, ts in times.items()}, rounds
