"""Execute every chapter notebook the way Binder will: from requirements.txt alone.

Binder (repo2docker) installs ``requirements.txt`` with pip from the repository
root (``runtime.txt`` picks the Python version) and opens a notebook with its
folder as the working directory. This script does the same without Binder:

1. create a fresh virtual environment in a temporary folder (no system or user
   site-packages) and ``pip install -r requirements.txt`` from the repository
   root, so a package the chapters import but requirements.txt forgets makes
   this check fail;
2. register that environment's Python as the only ``python3`` kernel;
3. execute every notebook listed in ``_toc.yml`` with nbclient (running inside
   the fresh environment), with the notebook's folder as working directory,
   and fail on the first cell that raises;
4. compare each executed notebook's outputs with the committed ones, as nbval
   does (scripts/notebook_outputs.py), with OpenBLAS forced onto another CPU
   kernel family than the nbval stage's (``--kernel-family``, default
   Sandybridge; scripts/cpu_families.py): an output that depends on the CPU
   fails here even on the machine that executed the notebook.

The executed copies go to the temporary folder: the committed notebooks are
never touched. Prints the time of each step and of each notebook.

Usage::

    python3 scripts/binder_check.py            # fresh venv, every notebook in _toc.yml
    python3 scripts/binder_check.py --keep     # keep the temporary folder, print its path
    python3 scripts/binder_check.py --kernel-family native --no-compare
    python3 scripts/binder_check.py book/05_masks.ipynb   # one chapter
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
import cpu_families  # noqa: E402
from notebook_outputs import differences  # noqa: E402

# Runs inside the fresh environment: execute one notebook with nbclient.
RUN_NOTEBOOK = r"""
import sys, time, nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
src, dst, cwd, timeout = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
nb = nbformat.read(src, as_version=4)
client = NotebookClient(nb, kernel_name="python3", timeout=timeout, allow_errors=False,
                        resources={"metadata": {"path": cwd}})
t0 = time.perf_counter()
try:
    client.execute()
except CellExecutionError as exc:
    nbformat.write(nb, dst)
    print(str(exc)[-3000:], file=sys.stderr)
    sys.exit(1)
nbformat.write(nb, dst)
print(f"{time.perf_counter() - t0:.1f}")
"""


# Runs inside the environment: the versions the chapters will run on.
VERSIONS = r"""
import platform
from importlib.metadata import PackageNotFoundError, version
names = ["numpy", "scipy", "matplotlib", "altair", "ipykernel", "myst-nb", "jupyter-book"]
found = []
for name in names:
    try:
        found.append(f"{name} {version(name)}")
    except PackageNotFoundError:
        pass
print(f"versions: Python {platform.python_version()}, " + ", ".join(found))
"""


def execute(python, notebook, executed, cwd, env, timeout):
    """Run one notebook with RUN_NOTEBOOK in ``cwd``.

    Returns ``(seconds, None)`` when every cell ran, or ``(None, error)`` with the
    failing cell and its error, without colour codes or kernel chatter.
    """
    result = subprocess.run(
        [str(python), "-c", RUN_NOTEBOOK, str(notebook), str(executed), str(cwd), str(timeout)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=max(600, 2 * timeout),
    )
    if result.returncode == 0:
        return float(result.stdout.strip().splitlines()[-1]), None
    error = re.sub(r"\x1b\[[0-9;]*m", "", result.stderr)
    return None, "\n".join(
        line for line in error.strip().splitlines() if "[IPKernelApp] WARNING" not in line
    )


def report(rel, seconds, error, failed, where=""):
    """Print one notebook's outcome from :func:`execute`; add it to ``failed`` if it failed."""
    if error is None:
        print(f"{str(rel):36s} ok   {seconds:5.1f} s")
        return
    failed.append(str(rel))
    print(f"{str(rel):36s} FAILED{where}:")
    print("    " + error.replace("\n", "\n    "))


def add_kernel_options(parser, family, narrow, threads=None):
    """``--kernel-family``, ``--narrow-numpy``, ``--blas-threads``, ``--no-compare``."""
    parser.add_argument(
        "--kernel-family",
        default=family,
        choices=[name for name, _ in cpu_families.FAMILIES] + ["native"],
        help=f"OpenBLAS family to force while executing (default {family}; "
        "an older one if this CPU cannot run it)",
    )
    parser.add_argument(
        "--narrow-numpy",
        action=argparse.BooleanOptionalAction,
        default=narrow,
        help=f"narrow NumPy's SIMD dispatch to its baseline (default {'yes' if narrow else 'no'})",
    )
    parser.add_argument(
        "--blas-threads",
        type=int,
        default=threads,
        help="OPENBLAS_NUM_THREADS for the pass (a matrix product split over "
        "another number of threads rounds differently too; default "
        f"{threads or 'inherited'})",
    )
    parser.add_argument(
        "--no-compare",
        dest="compare",
        action="store_false",
        help="only execute; do not compare outputs with the committed ones",
    )


def kernel_env(python, env, args, check):
    """``env`` with the kernel family of ``args`` forced; prints what it runs on."""
    family = None if args.kernel_family == "native" else cpu_families.pick(args.kernel_family)
    env = cpu_families.family_env(python, family, args.narrow_numpy, base=env)
    if args.blas_threads:
        env["OPENBLAS_NUM_THREADS"] = str(args.blas_threads)
    threads = env.get("OPENBLAS_NUM_THREADS") or f"BLAS default ({os.cpu_count()} CPUs)"
    print(
        f"{check}: CPU kernels for this pass: {cpu_families.describe(python, env)}; "
        f"BLAS threads: {threads}"
    )
    if args.compare:
        print(f"{check}: outputs are compared with the committed ones (nbval's rules)")
    return env


def compare_outputs(notebook, executed, seconds, error, skip_cells=()):
    """Turn output differences into an error for :func:`report` (``error`` wins)."""
    if error is not None or seconds is None:
        return seconds, error
    problems = differences(notebook, executed, skip_cells)
    if not problems:
        return seconds, None
    return None, (
        "outputs differ from the committed ones under this pass's CPU kernels "
        "(an output that depends on the CPU: round it, or compare with a "
        "tolerance; see README, 'Outputs on every CPU'):\n" + "\n".join(problems)
    )


def add_share_option(parser):
    """``--share K/N``: execute every N-th notebook only; import-check the others."""
    parser.add_argument(
        "--share",
        default="1/1",
        metavar="K/N",
        help="execute only the K-th of every N notebooks (the test command gives the "
        "Binder and the Colab check one half each, and the weekly workflow every "
        "notebook to both); every module the other notebooks import is still "
        "imported in this environment",
    )


def share(notebooks, spec):
    """``(executed, import-checked)``: the K-th of every N of ``notebooks``, and the rest."""
    match = re.fullmatch(r"(\d+)/(\d+)", spec)
    if not match or not 1 <= int(match[1]) <= int(match[2]):
        raise SystemExit(f"--share must be K/N with 1 <= K <= N, not {spec!r}")
    k, n = int(match[1]), int(match[2])
    mine = [nb for i, nb in enumerate(notebooks) if i % n == k - 1]
    return mine, [nb for nb in notebooks if nb not in mine]


IMPORT_LINE = re.compile(r"^\s*(?:from\s+([A-Za-z_][\w.]*)\s+import\b|import\s+([\w., ]+))")


def notebook_imports(notebooks, leave_out=("google",)):
    """Every module the code cells of ``notebooks`` import at the start of a line, sorted."""
    modules = set()
    for nb in notebooks:
        for cell in json.loads(Path(nb).read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] != "code":
                continue
            for line in "".join(cell["source"]).splitlines():
                match = IMPORT_LINE.match(line)
                if not match:
                    continue
                names = [match[1]] if match[1] else match[2].split(",")
                modules.update(name.split()[0] for name in names if name.strip())
    return sorted(m for m in modules if m.split(".")[0] not in leave_out)


# Runs inside the environment: import each module named on the command line.
IMPORT_EACH = r"""
import importlib, sys
missing = []
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except Exception as exc:
        missing.append(f"{name} ({type(exc).__name__}: {exc})")
print("\n".join(missing))
"""


def check_imports(python, env, notebooks, cwd, check):
    """Fail, naming them, if modules that ``notebooks`` import do not import in ``env``."""
    if not notebooks:
        return
    modules = notebook_imports(notebooks)
    missing = run([str(python), "-c", IMPORT_EACH, *modules], check, cwd=cwd, env=env).stdout
    if missing.strip():
        raise SystemExit(
            f"{check}: modules that {len(notebooks)} notebook(s) not executed in this pass "
            f"import fail to import here:\n    " + missing.strip().replace("\n", "\n    ")
        )
    print(
        f"{check}: the other {len(notebooks)} notebook(s) not executed (--share); "
        f"every one of the {len(modules)} module(s) they import imports here"
    )


def toc_notebooks(toc_file):
    """Notebooks (``.ipynb``) listed in ``_toc.yml``, in reading order.

    Reads the file with a regular expression, so the check needs nothing but the
    standard library before the fresh environment exists.
    """
    files = re.findall(
        r"^\s*-?\s*(?:file|root):\s*['\"]?([^'\"\s#]+)",
        Path(toc_file).read_text(),
        flags=re.MULTILINE,
    )
    notebooks = []
    for f in files:
        path = REPO / f
        if path.suffix != ".ipynb":
            path = path.with_suffix(".ipynb")
        if path.is_file():
            notebooks.append(path)
    return notebooks


#: This machine's Python and Jupyter settings, kept out of a reader's environment.
LOCAL_SETTINGS = {
    "PYTHONPATH",
    "PYTHONHOME",
    "VIRTUAL_ENV",
    "PIP_REQUIRE_VIRTUALENV",
    "JUPYTER_PATH",
    "JUPYTER_CONFIG_DIR",
    "JUPYTER_DATA_DIR",
    "MPLBACKEND",
    "IPYTHONDIR",
    "ATTENTION_DATA_DIR",
}


def clean_env(extra=None):
    """``os.environ`` without :data:`LOCAL_SETTINGS`, no user site, then ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in LOCAL_SETTINGS}
    env.update(PYTHONNOUSERSITE="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.update(extra or {})
    return env


def run(cmd, check="binder check", **kwargs):
    """Run ``cmd``; on failure print its output and stop, naming ``check``, with a clear message."""
    result = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        sys.stdout.write(result.stdout[-5000:])
        sys.stderr.write(result.stderr[-5000:])
        raise SystemExit(
            f"{check}: `{' '.join(map(str, cmd))}` failed (exit code {result.returncode})"
        )
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "notebooks",
        nargs="*",
        type=Path,
        help="notebooks to run (default: every notebook in _toc.yml)",
    )
    parser.add_argument(
        "--python",
        default=sys.executable,
        help="interpreter for the fresh environment (runtime.txt pins 3.11)",
    )
    parser.add_argument("--requirements", default="requirements.txt")
    parser.add_argument("--toc", default="_toc.yml")
    parser.add_argument("--timeout", type=int, default=300, help="seconds allowed per cell")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    parser.add_argument(
        "--venv",
        type=Path,
        help="use this environment if it exists (made by the caller, e.g. "
        "scripts/check-newest.sh) instead of a fresh one",
    )
    parser.add_argument(
        "--differences",
        choices=("fail", "report"),
        default="fail",
        help="outputs that differ from the committed ones fail the check "
        "(default) or are only reported (newest releases)",
    )
    add_kernel_options(parser, "Sandybridge", narrow=False)
    add_share_option(parser)
    args = parser.parse_args(argv)

    started = time.monotonic()
    runtime = (REPO / "runtime.txt").read_text().strip() if (REPO / "runtime.txt").exists() else ""
    version = run(
        [args.python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"]
    ).stdout.strip()
    print(f"runtime.txt asks for {runtime or '(nothing)'}; this check uses Python {version}")
    if runtime.startswith("python-") and runtime.removeprefix("python-") != version:
        print(f"note: Binder will use {runtime}, not Python {version}")

    notebooks = (
        [p.resolve() for p in args.notebooks] if args.notebooks else toc_notebooks(REPO / args.toc)
    )
    if not notebooks:
        raise SystemExit(f"binder check: no notebooks listed in {args.toc}")
    notebooks, others = share(notebooks, args.share)

    tmp = Path(tempfile.mkdtemp(prefix="binder-check-"))
    try:
        venv = args.venv.resolve() if args.venv else tmp / "venv"
        python = venv / "bin" / "python"
        # Nothing from this machine's Python setup may leak into the environment.
        env = clean_env(
            {
                "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
                "VIRTUAL_ENV": str(venv),
                "JUPYTER_PATH": str(tmp / "jupyter"),
                "JUPYTER_PREFER_ENV_PATH": "1",
            }
        )

        t0 = time.monotonic()
        if python.exists() and args.venv:
            print(f"environment {venv} reused")
        else:
            run([args.python, "-m", "venv", str(venv)], env=env)
            # From the repository root, like Binder: requirements.txt holds `-e .`.
            run(
                [
                    str(python),
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--no-compile",
                    "-r",
                    args.requirements,
                ],
                cwd=REPO,
                env=env,
            )
            print(
                f"fresh environment from {args.requirements} alone: {time.monotonic() - t0:.0f} s"
            )
        print(run([str(python), "-c", VERSIONS], env=env).stdout.strip())
        # Binder's image always has a Jupyter server and kernel; add them only if
        # requirements.txt does not bring them, so this check never blames it for those.
        probe = subprocess.run(
            [str(python), "-c", "import nbclient, nbformat, ipykernel"],
            env=env,
            capture_output=True,
        )
        if probe.returncode != 0:
            print("adding nbclient and ipykernel (Binder's base image provides them)")
            run(
                [
                    str(python),
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "nbclient",
                    "nbformat",
                    "ipykernel",
                ],
                env=env,
            )

        # The fresh environment's Python is the only kernel the notebooks can get
        # (JUPYTER_PATH comes first in Jupyter's search path).
        kernel_dir = tmp / "jupyter" / "kernels" / "python3"
        kernel_dir.mkdir(parents=True)
        (kernel_dir / "kernel.json").write_text(
            json.dumps(
                {
                    "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                    "display_name": "Python 3 (binder check)",
                    "language": "python",
                }
            )
        )

        env = kernel_env(python, env, args, "binder check")
        out_dir = tmp / "executed"
        out_dir.mkdir()
        failed, changed = [], []
        for nb in notebooks:
            rel = nb.relative_to(REPO)
            outcome = execute(python, nb, out_dir / nb.name, nb.parent, env, args.timeout)
            if args.compare and args.differences == "report" and outcome[1] is None:
                problems = differences(nb, out_dir / nb.name)
                changed.extend(f"{rel}: {p}" for p in problems)
            elif args.compare:
                outcome = compare_outputs(nb, out_dir / nb.name, *outcome)
            report(rel, *outcome, failed, where=f" (cwd {nb.parent.relative_to(REPO) or '.'})")
        check_imports(python, env, others, REPO / "book", "binder check")
        print(
            f"binder check: {len(notebooks)} notebooks, {time.monotonic() - started:.0f} s in all"
        )
        if changed:
            print(
                f"\n{len(changed)} output(s) differ from the committed ones (reported, not "
                "failed: review them, see README 'Newest releases'):"
            )
            print("    " + "\n    ".join(c.replace("\n", "\n    ") for c in changed))
        elif args.compare and args.differences == "report":
            print("every output matches the committed one")
        if failed:
            raise SystemExit(
                f"binder check: {len(failed)} notebook(s) fail (or print other "
                f"outputs) in a fresh environment built from {args.requirements} "
                f"alone: {', '.join(failed)}"
            )
        print(
            (
                "every chapter runs"
                if not others
                else f"{len(notebooks)} of {len(notebooks) + len(others)} chapters run"
            )
            + f" in an environment built from {Path(args.requirements).name}"
            + (" alone" if Path(args.requirements).name == "requirements.txt" else "")
        )
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
