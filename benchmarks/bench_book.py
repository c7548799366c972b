"""Time the book: each chapter notebook's execution, and a full clean build.

    python benchmarks/bench_book.py              # every notebook in book/, then the build
    python benchmarks/bench_book.py --no-build   # notebooks only

Each notebook is executed in memory (the file is not touched) in a fresh
kernel, with the book/ directory as working directory, as nbval runs it. The
table separates the kernel's start-up from the execution of the cells, which is
what the 15 s budget per chapter is about. The build is the README's
``jupyter-book build . -W -n`` into a new temporary directory, so it starts
from nothing (the site shows the committed outputs: the build itself does not
execute the notebooks).
"""

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from _common import describe_machine

ROOT = Path(__file__).resolve().parent.parent
BUDGET_SECONDS = 15.0


def time_notebook(path, timeout):
    """Return (kernel start-up seconds, cell execution seconds, error or None)."""
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    t0 = time.perf_counter()
    with client.setup_kernel(stderr=subprocess.DEVNULL):  # no start-up chatter
        client.wait_for_reply(client.kc.kernel_info())  # kernel is ready
        t1 = time.perf_counter()
        try:
            for index, cell in enumerate(nb.cells):
                client.execute_cell(cell, index)
            error = None
        except CellExecutionError as err:
            last_line = str(err).strip().splitlines()[-1]
            error = re.sub(r"\x1b\[[0-9;]*m", "", last_line)[:100]  # no colour codes
        t2 = time.perf_counter()
    return t1 - t0, t2 - t1, error


def time_build():
    """Build the whole book into a new temporary directory; return (seconds, exit status, log)."""
    jupyter_book = Path(sys.executable).with_name("jupyter-book")
    command = [
        str(jupyter_book) if jupyter_book.exists() else "jupyter-book",
        "build",
        str(ROOT),
        "-W",
        "-n",
    ]
    with tempfile.TemporaryDirectory(prefix="book-build-") as out:
        t0 = time.perf_counter()
        done = subprocess.run(command + ["--path-output", out], capture_output=True, text=True)
        seconds = time.perf_counter() - t0
    return seconds, done.returncode, done.stdout + done.stderr


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "notebooks", nargs="*", type=Path, help="notebooks to time (default: every book/*.ipynb)"
    )
    parser.add_argument("--no-build", action="store_true", help="skip the book build")
    parser.add_argument(
        "--timeout", type=int, default=600, help="seconds allowed per cell (default: %(default)s)"
    )
    args = parser.parse_args(argv)
    notebooks = args.notebooks or sorted((ROOT / "book").glob("*.ipynb"))

    print(describe_machine())
    print(f"budget: {BUDGET_SECONDS:.0f} s of cell execution per chapter\n")
    header = f"{'notebook':<28} {'kernel s':>8} {'cells s':>8}  status"
    print(header)
    print("-" * len(header))
    total = 0.0
    failed = False
    for path in notebooks:
        start, cells, error = time_notebook(path.resolve(), args.timeout)
        total += start + cells
        if error:
            status, failed = f"FAILED: {error}", True
        elif cells > BUDGET_SECONDS:
            status = f"over the {BUDGET_SECONDS:.0f} s budget"
        else:
            status = "ok"
        print(f"{path.name:<28} {start:>8.1f} {cells:>8.1f}  {status}")
        sys.stdout.flush()
    print(f"{'all notebooks (wall)':<28} {total:>17.1f}")

    if not args.no_build:
        print("\nclean build: jupyter-book build . -W -n (into a new temporary directory)")
        seconds, status, log = time_build()
        if status == 0:
            print(f"built in {seconds:.1f} s")
        else:
            failed = True
            print(f"build FAILED (exit status {status}) after {seconds:.1f} s; end of its log:")
            print("\n".join(log.strip().splitlines()[-15:]))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
