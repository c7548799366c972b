"""Execute every chapter notebook the way Binder will: from requirements.txt alone.

Binder (repo2docker) installs ``requirements.txt`` with pip from the repository
root (``runtime.txt`` picks the Python version) and opens a notebook with its
folder as the working directory. This script does the same without Binder:

1. create a fresh virtual environment in a temporary folder (no system or user
   site-packages) and ``pip install -r requirements.txt`` from the repository
   root, so a package the chapters import but requirements.txt forgets makes
   this check fail;
2. register that environment's Python as the only ``python3`` kernel;
3. run ``pytest --nbval`` on every notebook listed in ``_toc.yml``: nbval starts
   that kernel with the notebook's folder as working directory, executes every
   cell and compares its outputs with the committed ones (its rules and the
   notebooks' ``nbval-ignore-output``/``nbval-skip`` tags and ``# NBVAL_...``
   comments), with OpenBLAS forced onto another CPU kernel family than this
   machine's own (``--kernel-family``, default Sandybridge;
   scripts/cpu_families.py): an output that depends on the CPU fails here even
   on the machine that executed the notebook. A cell that raises, or prints
   other outputs, fails the check with nbval's report. pytest and nbval run
   from the test environment (:func:`nbval_runner`), not the one under test,
   so nothing they install can make up for a package requirements.txt lacks.

nbval never writes to the notebooks: the committed ones are never touched.
Prints the time of each step and of each notebook.

Usage::

    python3 scripts/binder_check.py            # fresh venv, every notebook in _toc.yml
    python3 scripts/binder_check.py --keep     # keep the temporary folder, print its path
    python3 scripts/binder_check.py --kernel-family native --no-compare  # errors only
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
from xml.etree import ElementTree

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
import cpu_families  # noqa: E402

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


#: ``pytest --nbval`` as every pass runs it: no cache folder, none of the project's
#: pytest options (pyproject.toml's doctest settings), the kernel named explicitly.
NBVAL = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", "--nbval"]


def nbval_runner(*candidates, check="binder check"):
    """The first Python of ``candidates`` (or this one, or the project's .venv) with nbval.

    pytest and nbval run outside the environment under test, so that nothing
    they install (pytest, coverage, ...) can make up for a package the
    chapters need and the environment lacks; the kernel they start is the
    environment's own (:func:`check_kernel`).
    """
    tried = []
    for python in [*candidates, sys.executable, REPO / ".venv" / "bin" / "python"]:
        if python is None or str(python) in tried or not Path(python).exists():
            continue
        tried.append(str(python))
        probe = subprocess.run(
            [str(python), "-c", "import nbval, pytest"], capture_output=True, env=clean_env()
        )
        if probe.returncode == 0:
            return str(python)
    raise SystemExit(
        f"{check}: no Python with pytest and nbval (tried {', '.join(tried)}): "
        "install requirements-test.txt (`source scripts/_venv.sh; ensure_venv "
        "requirements-test.txt`)"
    )


# Runs in the runner: where Jupyter finds the python3 kernel in this environment.
KERNEL_ARGV = r"""
from jupyter_client.kernelspec import KernelSpecManager
print(KernelSpecManager().get_kernel_spec("python3").argv[0])
"""


def check_kernel(runner, env, python, check):
    """Stop unless the ``python3`` kernel nbval will start is ``python``'s."""
    found = run([runner, "-c", KERNEL_ARGV], check, env=env).stdout.strip()
    if Path(found) != Path(python):
        raise SystemExit(
            f"{check}: nbval would start the python3 kernel {found}, not {python}: "
            "the notebooks would not run in the environment under test"
        )


def run_nbval(runner, notebooks, env, timeout, check, rootdir, compare=True):
    """Execute and compare ``notebooks`` with ``pytest --nbval``; print nbval's report.

    Each notebook runs in the ``python3`` kernel that ``env``'s Jupyter path names,
    with its own folder as working directory (nbval's), under ``env``'s CPU
    kernels and threads. ``compare=False`` runs ``--nbval-lax``: every cell is
    executed and any error fails, but outputs are not compared.

    Returns ``(seconds, failures)``: the seconds of each notebook, and for each
    failing notebook the failing cells' kinds: ``"differ"`` (nbval's "Cell
    outputs differ") or ``"error"`` (a cell raised, timed out, or the kernel died).
    """
    xml = Path(tempfile.mkdtemp(prefix="nbval-")) / "nbval.xml"
    cmd = [runner, *NBVAL, "--nbval-kernel-name", "python3"]
    cmd += ["--nbval-cell-timeout", str(timeout), f"--junitxml={xml}", "--rootdir", str(rootdir)]
    if not compare:
        cmd[cmd.index("--nbval")] = "--nbval-lax"
    t0 = time.monotonic()
    result = subprocess.run(
        [*cmd, *map(str, notebooks)], cwd=rootdir, env=env, capture_output=True, text=True
    )
    seconds, failures = {}, {}
    try:
        cases = ElementTree.parse(xml).getroot().iter("testcase")
    except (OSError, ElementTree.ParseError):
        cases = []
    for case in cases:
        # nbval's items are "<notebook>::Cell N"; junit's classname is the notebook's path
        # with dots, so match on the file name.
        name = case.get("classname", "")
        nb = next((n for n in notebooks if name.endswith(Path(n).stem + ".ipynb")), None)
        if nb is None:
            continue
        seconds[nb] = seconds.get(nb, 0.0) + float(case.get("time", 0))
        for fail in [*case.iter("failure"), *case.iter("error")]:
            text = (fail.get("message") or "") + (fail.text or "")
            kind = "differ" if "Cell outputs differ" in text else "error"
            failures.setdefault(nb, []).append((case.get("name"), kind))
    shutil.rmtree(xml.parent, ignore_errors=True)
    if result.returncode not in (0, 1) or (result.returncode == 1 and not failures):
        # pytest itself failed (usage error, collection error, internal error)
        sys.stdout.write(result.stdout[-8000:])
        sys.stderr.write(result.stderr[-3000:])
        raise SystemExit(f"{check}: pytest --nbval failed (exit code {result.returncode})")
    if failures:
        # nbval's own report: which cell, what it printed, what was committed
        print(re.sub(r"\x1b\[[0-9;]*m", "", result.stdout).rstrip())
    print(f"{check}: pytest --nbval on {len(notebooks)} notebook(s): {time.monotonic() - t0:.0f} s")
    return seconds, failures


def report(rel, seconds, failures, failed, where=""):
    """Print one notebook's outcome from :func:`run_nbval`; add it to ``failed`` if it failed."""
    if not failures:
        print(f"{str(rel):36s} ok   {seconds:5.1f} s")
        return
    failed.append(str(rel))
    cells = ", ".join(
        f"{cell} ({'outputs differ' if kind == 'differ' else 'error'})" for cell, kind in failures
    )
    print(f"{str(rel):36s} FAILED{where}: {cells}")


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
        "--mplbackend",
        metavar="NAME",
        help="MPLBACKEND for the kernel (the test command: agg, as on many CI machines "
        "and servers, where a chapter that does not set %%matplotlib inline itself "
        "draws nothing and nbval fails; default: unset, as for a reader)",
    )
    parser.add_argument(
        "--no-compare",
        dest="compare",
        action="store_false",
        help="only execute (nbval --nbval-lax: a cell that raises still fails); "
        "do not compare outputs with the committed ones",
    )


def kernel_env(python, env, args, check):
    """``env`` with the kernel family of ``args`` forced; prints what it runs on."""
    family = None if args.kernel_family == "native" else cpu_families.pick(args.kernel_family)
    env = cpu_families.family_env(python, family, args.narrow_numpy, base=env)
    if args.blas_threads:
        env["OPENBLAS_NUM_THREADS"] = str(args.blas_threads)
    if args.mplbackend:
        env["MPLBACKEND"] = args.mplbackend
    threads = env.get("OPENBLAS_NUM_THREADS") or f"BLAS default ({os.cpu_count()} CPUs)"
    print(
        f"{check}: CPU kernels for this pass: {cpu_families.describe(python, env)}; "
        f"BLAS threads: {threads}" + (f"; MPLBACKEND={args.mplbackend}" if args.mplbackend else "")
    )
    if args.compare:
        print(f"{check}: pytest --nbval compares the outputs with the committed ones")
    return env


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
        "scripts/check-newest.sh, or by --prepare) instead of a fresh one",
    )
    parser.add_argument(
        "--prepare",
        action="store_true",
        help="only build the fresh environment into --venv, and stop (the test command "
        "builds it in the background while other stages run)",
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
    if args.prepare and not args.venv:
        parser.error("--prepare needs --venv DIR: where to build the environment")

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
        # Binder's image always has a Jupyter kernel; add ipykernel only if
        # requirements.txt does not bring it, so this check never blames it for that.
        probe = subprocess.run(
            [str(python), "-c", "import ipykernel"], env=env, capture_output=True
        )
        if probe.returncode != 0:
            print("adding ipykernel (Binder's base image provides it)")
            run([str(python), "-m", "pip", "install", "--quiet", "ipykernel"], env=env)
        if args.prepare:
            print(f"binder check: environment ready in {venv}")
            return

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
        runner = nbval_runner(python if args.venv else None)
        check_kernel(runner, env, python, "binder check")
        seconds, failures = run_nbval(
            runner, notebooks, env, args.timeout, "binder check", REPO, args.compare
        )
        failed, changed = [], []
        for nb in notebooks:
            rel = nb.relative_to(REPO)
            mine = failures.get(nb, [])
            if args.differences == "report" and all(kind == "differ" for _, kind in mine):
                changed.extend(f"{rel}: {cell}" for cell, _ in mine)
                mine = []
            where = f" (cwd {nb.parent.relative_to(REPO) or '.'})"
            report(rel, seconds.get(nb, 0.0), mine, failed, where=where)
        check_imports(python, env, others, REPO / "book", "binder check")
        print(
            f"binder check: {len(notebooks)} notebooks, {time.monotonic() - started:.0f} s in all"
        )
        if changed:
            print(
                f"\n{len(changed)} cell(s) print other outputs than the committed ones "
                "(nbval's report above; reported, not failed: review them, see "
                "CONTRIBUTING.md 'Newest releases'):"
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
