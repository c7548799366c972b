"""Execute every chapter notebook the way Google Colab does, without Colab.

Colab opens a chapter as a lone notebook in a kernel that has NumPy, SciPy,
Matplotlib, Altair and IPython but neither attention_lib nor data/; the chapter's
first code cell (written by scripts/sync_colab_cell.py) must fetch the
repository and install it. This script reproduces that offline:

1. a virtual environment (no system or user site-packages) with the
   reader-side packages Colab's image has, at requirements.txt's versions
   (NumPy, SciPy, Matplotlib, ipykernel, Altair for the interactive charts),
   and *without* attention_lib or myst-nb, which the set-up cell installs. It
   is kept in ``.venv/colab-check`` and rebuilt when requirements.txt changes
   (``--fresh`` rebuilds it anyway); attention_lib is uninstalled from it before
   and after every run, and the check stops if it is still importable;
2. the "network" is a snapshot of this working tree (tracked and untracked,
   not ignored, files) committed to a scratch git repository; the set-up cell
   clones it through ``BOOK_REPOSITORY`` into ``BOOK_CLONE_DIR``, a scratch
   stand-in for ``/content/attention-from-scratch``;
3. the kernel gets a fake ``google.colab`` module, imported at start-up as
   Colab's kernel does (an IPython start-up file), from a folder on the
   kernel's PYTHONPATH;
4. each notebook in ``_toc.yml`` is copied alone to a scratch folder (Colab's
   ``/content``, outside the repository: a chapter that reads ``../data``
   fails here, as it fails for a reader who downloads it), and ``pytest
   --nbval`` runs the copies there: nbval starts the environment's kernel in
   that folder, executes every cell (any error fails) and compares its outputs
   with the committed ones, with OpenBLAS forced onto its oldest x86-64
   kernels (Prescott), on one thread, and NumPy's SIMD narrowed to its
   baseline (scripts/cpu_families.py): a third CPU on which every printed
   output must hold. The set-up cell's output on Colab is git's and pip's, so
   the copy tags it ``nbval-ignore-output`` (it still runs, and must not raise).
   pytest and nbval run from the test environment, not the reader-side one
   (scripts/binder_check.py, ``nbval_runner``).

Chapters share one clone and one environment, as cells run in one Colab
runtime would; the first chapter's set-up cell clones and installs, the
others find both done (their cell checks, and skips).

Usage::

    python3 scripts/colab_check.py                  # every chapter in _toc.yml
    python3 scripts/colab_check.py book/04_qkv_alignment.ipynb
    python3 scripts/colab_check.py --fresh --keep   # new environment; keep scratch
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import binder_check  # noqa: E402
from binder_check import (
    add_kernel_options,
    add_share_option,
    check_imports,
    clean_env,
    kernel_env,
    report,
    share,
    toc_notebooks,
)

# How the set-up cell (scripts/sync_colab_cell.py) recognises Colab; repeated
# here because that script needs nbformat, and this one only the standard library.
MARKER = '"google.colab" in sys.modules'

REPO = Path(__file__).resolve().parents[1]
ENV_DIR = REPO / ".venv" / "colab-check"
# In Colab's image (pinned as requirements.txt pins them). Altair is preinstalled
# in Colab too, and the chapters with interactive charts import it.
COLAB_HAS = {"numpy", "scipy", "matplotlib", "ipykernel", "altair"}

FAKE_COLAB = '''"""Stand-in for Colab's google.colab (scripts/colab_check.py)."""
'''
STARTUP = "import google.colab  # as Colab's kernel does at start-up\n"


def run(cmd, **kwargs):
    """:func:`binder_check.run`, its failures named "colab check"."""
    return binder_check.run(cmd, "colab check", **kwargs)


def reader_requirements():
    """The lines of requirements.txt for packages Colab's image has."""
    lines = []
    for line in (REPO / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        name = re.split(r"[<>=!~\[; ]", line, maxsplit=1)[0].lower()
        if name in COLAB_HAS:
            lines.append(line)
    missing = COLAB_HAS - {re.split(r"[<>=!~\[; ]", l, maxsplit=1)[0].lower() for l in lines}
    return lines + sorted(missing)


def ensure_environment(python_for_venv, fresh):
    """The reader-side environment, rebuilt only when its requirements change."""
    packages = reader_requirements()
    digest = hashlib.sha256("\n".join(packages).encode()).hexdigest()[:16]
    stamp = ENV_DIR / ".requirements"
    python = ENV_DIR / "bin" / "python"
    env = clean_env(
        {
            "VIRTUAL_ENV": str(ENV_DIR),
            "PATH": f"{ENV_DIR / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        }
    )
    t0 = time.monotonic()
    if fresh or not python.exists() or (stamp.read_text() if stamp.exists() else "") != digest:
        shutil.rmtree(ENV_DIR, ignore_errors=True)
        run([python_for_venv, "-m", "venv", str(ENV_DIR)], env=env)
        run([str(python), "-m", "pip", "install", "--quiet", "--no-compile", *packages], env=env)
        stamp.write_text(digest)
        print(
            f"reader-side environment built: {time.monotonic() - t0:.0f} s ({' '.join(packages)})"
        )
    else:
        print(f"reader-side environment reused ({ENV_DIR.relative_to(REPO)})")
    forget_library(python, env)
    return python, env


def forget_library(python, env):
    """Make sure attention_lib is not installed: the set-up cell must install it."""
    subprocess.run(
        [str(python), "-m", "pip", "uninstall", "--quiet", "--yes", "attention-lib"],
        env=env,
        capture_output=True,
    )
    probe = subprocess.run(
        [str(python), "-c", "import attention_lib"], cwd="/", env=env, capture_output=True
    )
    if probe.returncode == 0:
        raise SystemExit(
            "colab check: attention_lib is still importable in "
            f"{ENV_DIR}; delete that folder and run again"
        )


def snapshot_repository(dest):
    """Commit this working tree (tracked + untracked, not ignored) to ``dest``."""
    files = run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO
    ).stdout.split("\0")
    for name in filter(None, files):
        src = REPO / name
        if not src.is_file():  # deleted but not yet committed
            continue
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)  # a copy: nothing here may touch the worktree
    git = [
        "git",
        "-c",
        "user.name=colab check",
        "-c",
        "user.email=colab-check@localhost",
        "-c",
        "init.defaultBranch=main",
        "-c",
        "commit.gpgsign=false",
    ]
    run(git + ["init", "--quiet"], cwd=dest)
    run(git + ["add", "--all"], cwd=dest)
    run(git + ["commit", "--quiet", "--message", "snapshot for the colab check"], cwd=dest)


def lone_copy(notebook, dest):
    """Copy ``notebook`` to ``dest``, its Colab set-up cell tagged ``nbval-ignore-output``.

    On Colab that cell's output is git's and pip's; the committed one is empty.
    The cell still runs in the check, and an error in it still fails.
    """
    nb = json.loads(Path(notebook).read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if cell["cell_type"] == "code" and MARKER in "".join(cell["source"]):
            tags = cell.setdefault("metadata", {}).setdefault("tags", [])
            if "nbval-ignore-output" not in tags:
                tags.append("nbval-ignore-output")
    Path(dest).write_text(json.dumps(nb, indent=1, ensure_ascii=False), encoding="utf-8")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "notebooks",
        nargs="*",
        type=Path,
        help="notebooks to run (default: every chapter in _toc.yml)",
    )
    parser.add_argument(
        "--python",
        default=os.environ.get("PYTHON", "python3"),
        help="interpreter for the environment",
    )
    parser.add_argument("--toc", default="_toc.yml")
    parser.add_argument("--timeout", type=int, default=300, help="seconds allowed per cell")
    parser.add_argument("--fresh", action="store_true", help="rebuild the environment")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    parser.add_argument(
        "--prepare",
        action="store_true",
        help="only build (or find) the reader-side environment, and stop (the test "
        "command builds it in the background while other stages run)",
    )
    add_kernel_options(parser, "Prescott", narrow=True, threads=1)
    add_share_option(parser)
    args = parser.parse_args(argv)

    started = time.monotonic()
    notebooks = (
        [p.resolve() for p in args.notebooks] if args.notebooks else toc_notebooks(REPO / args.toc)
    )
    if not notebooks:
        raise SystemExit(f"colab check: no notebooks listed in {args.toc}")
    notebooks, others = share(notebooks, args.share)
    python, env = ensure_environment(args.python, args.fresh)
    if args.prepare:
        return

    tmp = Path(tempfile.mkdtemp(prefix="colab-check-"))
    try:
        t0 = time.monotonic()
        remote = tmp / "github"
        remote.mkdir()
        snapshot_repository(remote)
        print(
            f"working tree snapshot committed to a scratch repository: "
            f"{time.monotonic() - t0:.1f} s"
        )

        # google.colab, importable by the kernel only, and imported at start-up.
        shim = tmp / "colab-shim"
        (shim / "google" / "colab").mkdir(parents=True)
        (shim / "google" / "__init__.py").write_text("")
        (shim / "google" / "colab" / "__init__.py").write_text(FAKE_COLAB)
        startup = tmp / "ipython" / "profile_default" / "startup"
        startup.mkdir(parents=True)
        (startup / "00-google-colab.py").write_text(STARTUP)
        kernel_dir = tmp / "jupyter" / "kernels" / "python3"
        kernel_dir.mkdir(parents=True)
        (kernel_dir / "kernel.json").write_text(
            json.dumps(
                {
                    "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                    "display_name": "Python 3 (colab check)",
                    "language": "python",
                    "env": {"PYTHONPATH": str(shim), "IPYTHONDIR": str(tmp / "ipython")},
                }
            )
        )

        content = tmp / "content"  # Colab's /content
        content.mkdir()
        run_env = dict(
            env,
            JUPYTER_PATH=str(tmp / "jupyter"),
            JUPYTER_PREFER_ENV_PATH="1",
            BOOK_REPOSITORY=f"file://{remote}",
            BOOK_CLONE_DIR=str(content / "attention-from-scratch"),
        )
        run_env = kernel_env(python, run_env, args, "colab check")
        runner = binder_check.nbval_runner(check="colab check")
        binder_check.check_kernel(runner, run_env, python, "colab check")
        alone = {}
        for nb in notebooks:
            alone[nb] = content / nb.name  # a lone notebook, outside the repo
            lone_copy(nb, alone[nb])
        seconds, failures = binder_check.run_nbval(
            runner,
            list(alone.values()),
            run_env,
            args.timeout,
            "colab check",
            content,
            args.compare,
        )
        failed = []
        for nb in notebooks:
            rel = nb.relative_to(REPO) if nb.is_relative_to(REPO) else nb
            report(rel, seconds.get(alone[nb], 0.0), failures.get(alone[nb], []), failed)
        # The set-up cell of the notebooks above installed the library from the clone.
        check_imports(python, run_env, others, content, "colab check")
        print(f"colab check: {len(notebooks)} notebooks, {time.monotonic() - started:.0f} s in all")
        if failed:
            raise SystemExit(
                f"colab check: {len(failed)} notebook(s) fail when run as "
                f"Colab runs them: {', '.join(failed)}"
            )
        print(
            (
                "every chapter runs"
                if not others
                else f"{len(notebooks)} of {len(notebooks) + len(others)} chapters run"
            )
            + " as lone notebooks in a Colab-like kernel"
        )
    finally:
        forget_library(python, env)
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
