"""The CPU kernel families a notebook's printed outputs must not depend on.

NumPy's matrix products run in OpenBLAS, which picks a kernel family for the
CPU at start-up (Haswell for AVX2, Sandybridge for AVX, and so on); NumPy's
own loops (exp, sum, ...) pick SIMD code for the CPU too. Different families
round differently in the last bits, so a float32 result printed to too many
digits, or an ``np.allclose`` that holds by a hair, prints one thing on the
machine that executed the notebook and another on a reader's. The test
command therefore runs the chapters under several families, forced with
``OPENBLAS_CORETYPE`` and ``NPY_DISABLE_CPU_FEATURES``; this module says
which ones this CPU can execute and what each pass really ran on.

Which pass uses which family (each pass already executes every chapter):

- the nbval stage: the CPU's own families (native OpenBLAS, native NumPy SIMD);
- the Binder check: OpenBLAS forced onto ``Sandybridge`` (AVX without AVX2;
  ``Nehalem`` on a CPU without AVX);
- the Colab check: OpenBLAS forced onto ``Prescott`` (SSE3, the oldest
  x86-64 family; OpenBLAS reports it as "Katmai") and NumPy's SIMD dispatch
  narrowed to its baseline (every dispatched feature disabled).

Usage::

    python scripts/cpu_families.py                 # what this CPU can run, and the native pass
    python scripts/cpu_families.py --describe Prescott --narrow-numpy
    NPY_DISABLE_CPU_FEATURES="$(python scripts/cpu_families.py --npy-disable)" ...
"""

import argparse
import os
import platform
import re
import subprocess
import sys

#: OpenBLAS x86-64 families, newest first, with the CPU flag each needs
#: (in /proc/cpuinfo). Prescott needs only SSE3, which every x86-64 CPU has.
FAMILIES = (("Haswell", "avx2"), ("Sandybridge", "avx"), ("Nehalem", "sse4_2"), ("Prescott", None))

#: Run by the Python whose NumPy is used: its dispatched SIMD features (to
#: narrow to the baseline) and what OpenBLAS and NumPy say they run on.
_PROBE = r"""
import json, sys
import numpy as np
try:
    from numpy._core._multiarray_umath import (__cpu_baseline__ as base,
                                               __cpu_dispatch__ as dispatch,
                                               __cpu_features__ as features)
except ImportError:             # NumPy 1.x
    from numpy.core._multiarray_umath import (__cpu_baseline__ as base,
                                              __cpu_dispatch__ as dispatch,
                                              __cpu_features__ as features)
print(json.dumps({"numpy": np.__version__, "baseline": list(base), "dispatch": list(dispatch),
                  "enabled": [f for f in dispatch if features.get(f)]}))
"""


def cpu_flags():
    """The CPU's feature flags from /proc/cpuinfo (empty off Linux)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def available():
    """The OpenBLAS families this CPU can execute, newest first.

    Empty on a CPU that is not x86-64 (OpenBLAS's ARM families are not
    forced here): the passes then all run the native kernels, and say so.
    """
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return []
    flags = cpu_flags()
    return [name for name, flag in FAMILIES if flag is None or flag in flags]


def pick(preferred):
    """``preferred`` if the CPU can run it, else the next older family it can run."""
    names = [name for name, _ in FAMILIES]
    can = available()
    if not can:
        return None
    for name in names[names.index(preferred) :]:
        if name in can:
            return name
    return can[-1]


def probe(python, env=None):
    """NumPy's SIMD features and OpenBLAS's core as ``python`` sees them under ``env``."""
    import json

    env = dict(os.environ if env is None else env, OPENBLAS_VERBOSE="2")
    result = subprocess.run(
        [str(python), "-c", _PROBE], env=env, capture_output=True, text=True, cwd="/"
    )
    if result.returncode != 0:
        raise SystemExit(
            f"cpu_families: {python} cannot import NumPy under "
            f"OPENBLAS_CORETYPE={env.get('OPENBLAS_CORETYPE', '')!r}, "
            f"NPY_DISABLE_CPU_FEATURES={env.get('NPY_DISABLE_CPU_FEATURES', '')!r}:"
            f"\n{result.stderr[-2000:]}"
        )
    info = json.loads(result.stdout.strip().splitlines()[-1])
    core = re.search(r"Core:\s*(\S+)", result.stderr + result.stdout)
    info["openblas_core"] = core.group(1) if core else "unknown"
    return info


def family_env(python, family, narrow_numpy=False, base=None):
    """Environment variables that force ``family`` (None: native) on ``python``.

    With ``narrow_numpy``, every SIMD feature NumPy dispatches at run time on
    this CPU is disabled, so its loops run the baseline code (x86-64-v2 for NumPy 2.4).
    """
    env = dict(os.environ if base is None else base)
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("NPY_DISABLE_CPU_FEATURES", None)
    if family:
        env["OPENBLAS_CORETYPE"] = family
    if narrow_numpy:
        disable = npy_disable(python, env)
        if disable:
            env["NPY_DISABLE_CPU_FEATURES"] = disable
    return env


def npy_disable(python, env=None):
    """The ``NPY_DISABLE_CPU_FEATURES`` value that narrows NumPy to its baseline on this CPU.

    Every SIMD target NumPy dispatches to at run time and this CPU has:
    ``X86_V3`` on an AVX2 CPU, and on an AVX-512 CPU also ``X86_V4``,
    ``AVX512_ICL``, ``AVX512_SPR`` (NumPy 2.x's names; NumPy 1.x lists
    ``AVX512F``, ``AVX512_SKX``, ... and is handled the same way). Disabling
    ``X86_V3`` alone leaves the AVX-512 loops on where the CPU has them, so an
    AVX-512 machine would run other kernels than an AVX2 one. Only targets this
    CPU has are named: older NumPy refuses to disable the others. Afterwards
    the narrowing is checked: if NumPy still dispatches to any target, this
    raises ``SystemExit`` rather than let a pass claim a baseline it does not run.
    """
    env = dict(os.environ if env is None else env)
    env.pop("NPY_DISABLE_CPU_FEATURES", None)
    enabled = probe(python, env)["enabled"]
    if not enabled:
        return ""
    value = " ".join(enabled)
    left = probe(python, dict(env, NPY_DISABLE_CPU_FEATURES=value))["enabled"]
    if left:
        raise SystemExit(
            f"cpu_families: NPY_DISABLE_CPU_FEATURES={value!r} leaves NumPy "
            f"dispatching to {' '.join(left)}: cannot narrow it to the baseline"
        )
    return value


def describe(python, env):
    """One line: the OpenBLAS core and NumPy SIMD a pass really runs on."""
    info = probe(python, env)
    forced = env.get("OPENBLAS_CORETYPE")
    simd = ", ".join(info["enabled"]) or "none beyond the baseline"
    return (
        f"OpenBLAS core {info['openblas_core']}"
        f" ({'forced: OPENBLAS_CORETYPE=' + forced if forced else 'native'});"
        f" NumPy {info['numpy']} SIMD: baseline {' '.join(info['baseline']) or '-'},"
        f" dispatched {simd}"
        + (
            f" (NPY_DISABLE_CPU_FEATURES={env['NPY_DISABLE_CPU_FEATURES']})"
            if env.get("NPY_DISABLE_CPU_FEATURES")
            else ""
        )
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument(
        "--describe",
        metavar="FAMILY",
        nargs="?",
        const="native",
        help="print what a pass forced onto FAMILY runs on ('native': nothing forced)",
    )
    parser.add_argument(
        "--narrow-numpy",
        action="store_true",
        help="with --describe: narrow NumPy's SIMD to its baseline",
    )
    parser.add_argument(
        "--npy-disable",
        action="store_true",
        help="print the NPY_DISABLE_CPU_FEATURES value that narrows NumPy "
        "to its baseline on this CPU (AVX-512 targets included)",
    )
    args = parser.parse_args(argv)
    if args.npy_disable:
        print(npy_disable(args.python))
        return
    if args.describe:
        family = None if args.describe == "native" else pick(args.describe)
        print(describe(args.python, family_env(args.python, family, args.narrow_numpy)))
        return
    can = available()
    print(
        f"CPU: {platform.machine()}; OpenBLAS families it can execute: "
        f"{', '.join(can) if can else 'none forced (not x86-64): native only'}"
    )
    print(f"native pass: {describe(args.python, family_env(args.python, None))}")


if __name__ == "__main__":
    main()
