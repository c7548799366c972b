"""Generation speed: the library against PyTorch eager and llama2.c, beam search before and after.

    PYTHONPATH=. python benchmarks/bench_generation.py                 # everything
    PYTHONPATH=. python benchmarks/bench_generation.py --part lm --repeat 5
    PYTHONPATH=. python benchmarks/bench_generation.py --llama2c /tmp/llama2c --part lm

One thread on every side (one BLAS thread, ``torch.set_num_threads(1)``, llama2.c's
``run.c`` compiled without OpenMP). Four parts:

- ``lm``: milliseconds per generated token, greedy, with a KV cache, of the library
  (``model.generate``, its fast path), of a PyTorch eager version of the same model
  with the same weights (``torch_generation.py``) and, for stories260K, of llama2.c's
  ``run.c``. stories260K writes 256 tokens from ``<s>`` (``run.c``'s default); the
  Shakespeare model 121 characters after ``"ROMEO:\\n"`` (a full context of 128). The
  sides take turns in a shuffled order each round; every side must give the same ids
  (llama2.c: the same text, which must also be the one its documentation prints)
  before any time is reported. Wall time and CPU time are both given: on a shared
  machine the CPU time of the process is the steadier figure.
- ``crop``: the Shakespeare model writing 1,000 characters past its context
  (``crop=True``), in seconds.
- ``beam``: ``translate`` with ``--beam 4`` on 1,500 sentences (the 1,450 test
  sentences and the first 50 of the validation split), batched as the command line
  batches them, with today's decoder (``TransformerDecoder``, candidates by
  ``np.argpartition``) and with the one before it (``nn.KVCache`` steps, a full
  stable ``argsort`` of every candidate); the outputs must be identical.
- ``startup``: CPU and wall seconds of ``python -m attention_lib.generate`` writing
  one token (imports and loading), for each model, beside ``import numpy`` and
  ``import attention_lib`` alone (the floor the command line stands on).

llama2.c: with ``--llama2c DIR`` the script uses ``DIR/run`` (or builds it there from
``DIR/run.c`` with ``gcc -O3 -march=native``); ``DIR/run.c`` is fetched by hand from
karpathy/llama2.c at commit ``LLAMA2C_COMMIT`` (it is never committed here), and
``llama2c_convert.py`` writes the checkpoint and tokenizer into ``DIR/stories``.
Without ``--llama2c`` the llama2.c column is left out.
"""

import argparse
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _threads import threads_from_argv  # noqa: E402  (before NumPy: BLAS reads it once)

THREADS = threads_from_argv(1)

import numpy as np  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

from _common import describe_machine  # noqa: E402

LLAMA2C_COMMIT = "350e04fe35433e6d2941dce5a1f53308f87058eb"


def lscpu():
    """``lscpu``'s model name, CPU count and threads per core, in one line."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "lscpu: unavailable"
    keep = ("Model name", "CPU(s)", "Thread(s) per core", "Core(s) per socket")
    fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    return "lscpu: " + "; ".join(f"{k} {fields[k].strip()}" for k in keep if k in fields)


def load():
    return "load average {:.2f}, {:.2f}, {:.2f}".format(*os.getloadavg())


def child_cpu(cmd):
    """Run ``cmd``; return (stdout, stderr, CPU seconds of the child)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return proc.stdout, proc.stderr, cpu, wall


def llama2c(directory):
    """``(run, checkpoint, tokenizer)`` paths under ``directory``, built and converted if needed."""
    d = Path(directory)
    run = d / "run"
    if not run.exists():
        if not (d / "run.c").exists():
            sys.exit(f"{d / 'run.c'} is missing: fetch llama2.c's run.c at {LLAMA2C_COMMIT}")
        subprocess.run(
            ["gcc", "-O3", "-march=native", "-o", str(run), str(d / "run.c"), "-lm"], check=True
        )
    model, tok = d / "stories" / "stories260K.bin", d / "stories" / "tok512.bin"
    if not model.exists():
        from llama2c_convert import convert
        from attention_lib.data.paths import verified_path
        from attention_lib.models.llama import STORIES260K

        convert(verified_path(STORIES260K), d / "stories")
    return str(run), str(model), str(tok)


def timed(fn):
    """``fn()``'s result, wall seconds, CPU seconds of this process."""
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def bench_lm(args):
    import torch

    from attention_lib.models import load_pretrained
    from attention_lib.models.llama import stories260k_reference
    from torch_generation import TorchGPT, TorchLlama, greedy

    torch.set_num_threads(1)
    c_paths = llama2c(args.llama2c) if args.llama2c else None
    cases = [("stories260k", TorchLlama, "", 256), ("shakespeare", TorchGPT, "ROMEO:\n", 121)]
    for name, torch_cls, prompt, n in cases:
        model, tok = load_pretrained(name)
        ids = np.asarray(tok.encode(prompt))
        tmodel = torch_cls(model)
        sides = {
            "library": lambda: model.generate(ids, n, temperature=0),
            "PyTorch eager": lambda: greedy(tmodel, ids, n),
        }
        if name == "stories260k" and c_paths:
            run, ckpt, tokfile = c_paths

            def c_side(steps=n):
                cmd = [run, ckpt, "-z", tokfile, "-t", "0.0", "-n", str(steps)]
                return child_cpu(cmd)

            sides["llama2.c run.c"] = c_side
        # Same ids (llama2.c: the same text) before anything is timed.
        lib = np.asarray(sides["library"]())
        assert np.array_equal(lib, sides["PyTorch eager"]()), f"{name}: torch ids differ"
        if "llama2.c run.c" in sides:
            text = sides["llama2.c run.c"]()[0]
            want = stories260k_reference()
            assert text.rstrip("\n") == want, "llama2.c's text is not its documented one"
            assert tok.decode(lib) == want, "the library's text is not llama2.c's"
            c_one_cpu = statistics.median(c_side(1)[2] for _ in range(3))
        times = {k: ([], []) for k in sides}  # wall, CPU per token (ms)
        rng = random.Random(0)
        with threadpool_limits(limits=1, user_api="blas"):
            for _ in range(args.repeat):
                order = list(sides)
                rng.shuffle(order)
                for k in order:
                    if k == "llama2.c run.c":
                        _, err, cpu, _ = sides[k]()
                        tok_s = float(err.split("achieved tok/s:")[1])
                        times[k][0].append(1e3 / tok_s)  # run.c's timer: tokens 2..n
                        times[k][1].append(1e3 * (cpu - c_one_cpu) / (n - 1))
                    else:
                        _, wall, cpu = timed(sides[k])
                        times[k][0].append(1e3 * wall / n)
                        times[k][1].append(1e3 * cpu / n)
        med = {k: (statistics.median(w), statistics.median(c)) for k, (w, c) in times.items()}
        print(f"\n{name}: {len(ids)} prompt tokens + {n} new, greedy, same ids on every side, "
              f"median of {args.repeat} rounds ({load()})")  # fmt: skip
        print(f"   {'side':<16}{'wall ms/token':>14}{'CPU ms/token':>14}"
              f"{'lib/side wall':>15}{'lib/side CPU':>14}")  # fmt: skip
        lw, lc = med["library"]
        for k, (w, c) in med.items():
            print(f"   {k:<16}{w:14.3f}{c:14.3f}{lw / w:15.2f}{lc / c:14.2f}")


def bench_crop(args):
    from attention_lib.models import load_pretrained

    model, tok = load_pretrained("shakespeare")
    ids = tok.encode("ROMEO:\n")
    n = model.max_len - len(ids) + 1000
    with threadpool_limits(limits=1, user_api="blas"):
        out, wall, cpu = timed(lambda: model.generate(ids, n, temperature=0))
    print(f"\nshakespeare past its context: {n} new characters ({n - model.max_len + len(ids)} "
          f"past the 128 of the context), greedy, crop=True: {wall:.2f} s wall, "
          f"{cpu:.2f} s CPU ({load()})")  # fmt: skip
    print("   " + repr(tok.decode(out[-80:])))


def bench_beam(args):
    from attention_lib.data.tatoeba import load_pairs, load_references
    from attention_lib.models import decoding
    from attention_lib.translate import load_model, translate_ids

    model, tok = load_model("transformer")
    sources = load_references("test")[0]
    sources += [en for en, _ in load_pairs("valid")][: args.sentences - len(sources)]
    encoded = [tok.encode(s)[:48] for s in sources[: args.sentences]]

    class Before:
        """The decoder before issue 39: nn.KVCache steps and a full stable sort."""

        def beam_search(self, src, lengths, beam, length_penalty):
            memory, mask = model.encode(src, lengths)
            B = len(lengths)
            rows = np.repeat(np.arange(B), beam)
            memory, mask, caches = memory[rows], mask[rows], model._caches()

            def step(y, t):
                return model._step(y, t, memory, mask, caches)

            def reorder(idx):
                for c, _ in caches:
                    c.k, c.v = c.k[idx], c.v[idx]

            limits = model._max_out(lengths, None)
            saved = decoding.best_candidates
            decoding.best_candidates = lambda c, n: np.argsort(-c, axis=1, kind="stable")[:, :n]
            try:
                return decoding.beam_search(step, reorder, B, beam, limits, length_penalty)
            finally:
                decoding.best_candidates = saved

    results, times = {}, {"after": [], "before": []}
    with threadpool_limits(limits=1, user_api="blas"):
        for r in range(args.beam_repeat):
            for label in ("after", "before") if r % 2 == 0 else ("before", "after"):
                m = model if label == "after" else Before()
                out, wall, cpu = timed(lambda: translate_ids(m, encoded, beam=4))
                results[label] = out
                times[label].append((wall, cpu))
    same = results["after"] == results["before"]
    print(f"\ntranslator, --beam 4, {len(encoded)} sentences, batches of 64 "
          f"({args.beam_repeat} run(s) each, alternating; {load()}); identical outputs: {same}")  # fmt: skip
    for label, ts in times.items():
        w = statistics.median(t[0] for t in ts)
        c = statistics.median(t[1] for t in ts)
        print(f"   {label:<7} {w:7.1f} s wall {c:7.1f} s CPU  {len(encoded) / w:6.1f} sentences/s")
    wb = statistics.median(t[0] for t in times["before"])
    wa = statistics.median(t[0] for t in times["after"])
    cb = statistics.median(t[1] for t in times["before"])
    ca = statistics.median(t[1] for t in times["after"])
    print(f"   speed-up: {wb / wa:.2f}x wall, {cb / ca:.2f}x CPU")
    assert same, "beam search outputs changed"


def bench_startup(args):
    import tempfile

    root = Path(__file__).resolve().parent.parent
    # Python's bytecode cache on, as in an installed package (in a temporary folder,
    # filled by a first run that is not timed): without it every start compiles each module.
    cache = tempfile.mkdtemp(prefix="bench-pycache-")
    env = {**os.environ, "PYTHONPATH": str(root), "OPENBLAS_NUM_THREADS": "1"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = cache
    print(f"\nstart-up of python -m attention_lib.generate, one token written, bytecode "
          f"cached ({load()})")  # fmt: skip
    generate = [sys.executable, "-m", "attention_lib.generate", "--prompt", "Once",
                "--max-new-tokens", "1", "--temperature", "0", "--model"]  # fmt: skip
    cases = {
        "shakespeare": generate + ["shakespeare"],
        "stories260k": generate + ["stories260k"],
        # what the two share: Python and NumPy, then the package itself
        "import numpy": [sys.executable, "-c", "import numpy"],
        "import attention_lib": [sys.executable, "-c", "import attention_lib"],
    }
    runs = {name: [] for name in cases}
    for cmd in cases.values():  # fills the bytecode cache
        subprocess.run(cmd, capture_output=True, check=True, env=env)
    for _ in range(args.repeat):  # the cases take turns
        for name, cmd in cases.items():
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            subprocess.run(cmd, capture_output=True, check=True, env=env)
            wall = time.perf_counter() - t0
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
            runs[name].append((cpu, wall))
    for name, rs in runs.items():
        cpu = statistics.median(r[0] for r in rs)
        wall = statistics.median(r[1] for r in rs)
        print(f"   {name:<21} {cpu:.2f} s CPU  {wall:.2f} s wall (median of {args.repeat})")
    shutil.rmtree(cache, ignore_errors=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", default="1", help="BLAS threads (default 1)")
    parser.add_argument("--part", action="append", choices=["lm", "crop", "beam", "startup"])
    parser.add_argument("--repeat", type=int, default=5, help="rounds per side (default 5)")
    parser.add_argument("--llama2c", metavar="DIR", help="llama2.c's run.c (or run) is here")
    parser.add_argument("--sentences", type=int, default=1500, help="beam: sentences (1500)")
    parser.add_argument("--beam-repeat", type=int, default=1, help="beam: runs of each (1)")
    args = parser.parse_args(argv)
    import torch

    print(describe_machine(torch))
    print(lscpu())
    print(f"{THREADS} BLAS thread(s); torch: 1 thread; llama2.c: 1 thread (no OpenMP)")
    parts = args.part or ["lm", "crop", "beam", "startup"]
    for part in parts:
        {"lm": bench_lm, "crop": bench_crop, "beam": bench_beam, "startup": bench_startup}[part](
            args
        )
    print(f"\nafter the run: {load()}")


if __name__ == "__main__":
    main()
