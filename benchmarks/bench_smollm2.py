"""SmolLM2-135M-Instruct: the library against PyTorch eager (transformers) and llama.cpp.

    PYTHONPATH=. python benchmarks/bench_smollm2.py                 # decode, prefill, memory
    PYTHONPATH=. python benchmarks/bench_smollm2.py --part decode --threads 1 --repeat 3
    PYTHONPATH=. python benchmarks/bench_smollm2.py --llama-cpp /tmp/llamacpp/venv/bin/python

Its parts, each printing the load average beside its figures:

- ``decode``: milliseconds per generated token, greedy, after the chat prompt
  "What is the capital of France?" (37 tokens in the chat template), 64 new tokens.
  The library is its fast KV-cache decoder (``decoder_for(model, 1, 640)``,
  ``prefill`` then ``step``); PyTorch eager is transformers' ``LlamaForCausalLM``
  loaded from the same GGUF file in float32 (the same dequantized weights), with
  its own KV cache (passed back as ``cache=``), under ``torch.inference_mode()``. Both
  take the argmax of their logits in the loop, and must write the same 64 ids
  before any time is reported. The prompt's prefill is not timed.
- ``prefill``: seconds for the first 512 tokens of ``data/shakespeare/input.txt``
  (a fresh cache, logits of the last position only: transformers'
  ``logits_to_keep=1``, which its ``generate`` uses); the last logits must agree
  within 1e-3.
- ``memory``: each in a fresh subprocess, the time of ``load_smollm2()`` (the
  file's SHA-256 checked, every weight dequantized to float32; and without the
  check, ``verify=False``) and the peak resident memory (``ru_maxrss``) of loading,
  and of loading then ``model.generate`` of 64 tokens, beside ``import
  attention_lib`` alone.
- ``pieces`` (not run by default): the one-token step's matrix products and its
  attention, each timed alone, at each thread count, beside the whole step.

Threads: ``--threads 1,2`` measures each count in turn, NumPy's BLAS limited with
threadpoolctl and torch with ``torch.set_num_threads``; BLAS is started with the
largest. The sides take turns in a shuffled order each round; the median and the
best of ``--repeat`` rounds are given, wall and CPU time (CPU time of the process:
on a shared machine the steadier figure at one thread; at two it includes threads
that spin while waiting).

llama.cpp: with ``--llama-cpp PYTHON``, a Python that has ``llama_cpp``
(llama-cpp-python, built from its source distribution, never a requirement of
this project) runs the same Q4_1 file, in a worker process that takes its turn
in every round: the same prompt ids, ``n_threads`` and ``n_threads_batch`` set
to the count measured, greedy over its own logits (computed from 4-bit weights
and 8-bit activations: its ids may part from the float32 ones, and how many
agree is printed). Its times are taken inside the worker. Written against
llama-cpp-python 0.3.36's source, but not yet run: its build did not finish on
this project's machine (see benchmarks/README.md).
"""

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _threads import threads_from_argv  # noqa: E402  (before NumPy: BLAS reads it once)


def _thread_counts(argv):
    for i, arg in enumerate(argv):
        if arg == "--threads" and i + 1 < len(argv):
            return [int(t) for t in argv[i + 1].split(",")]
        if arg.startswith("--threads="):
            return [int(t) for t in arg.split("=", 1)[1].split(",")]
    return [1, 2]


THREAD_COUNTS = _thread_counts(sys.argv[1:])
threads_from_argv(max(THREAD_COUNTS), ["--threads", str(max(THREAD_COUNTS))])

import numpy as np  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

from _common import describe_machine  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
QUESTION = "What is the capital of France?"
CAPACITY = 640  # positions of the library's cache: the 512-token prefill and the decode

# The llama.cpp worker: one JSON command a line on stdin, one JSON answer a line on stdout.
LLAMA_CPP_WORKER = r"""
import json, sys, time
import numpy as np
import llama_cpp

path = sys.argv[1]
llms = {}

def llm_for(threads):
    if threads not in llms:
        llms[threads] = llama_cpp.Llama(
            model_path=path, n_ctx=1024, n_batch=512, n_ubatch=512, n_threads=threads,
            n_threads_batch=threads, verbose=False,
        )
    return llms[threads]

def last(llm):  # the argmax of the last position's logits (Llama.scores stays empty in 0.3.x)
    logits = np.ctypeslib.as_array(llm._ctx.get_logits_ith(-1), shape=(llm.n_vocab(),))
    return int(np.argmax(logits))

print(json.dumps({"version": llama_cpp.__version__}), flush=True)
for line in sys.stdin:
    cmd = json.loads(line)
    llm = llm_for(cmd["threads"])
    llm.reset()
    if cmd["op"] == "decode":
        llm.eval(cmd["ids"])
        nxt = last(llm)
        out = []
        w, c = time.perf_counter(), time.process_time()
        for _ in range(cmd["n"]):
            out.append(nxt)
            llm.eval([nxt])
            nxt = last(llm)
        w, c = time.perf_counter() - w, time.process_time() - c
        print(json.dumps({"wall": w, "cpu": c, "ids": out}), flush=True)
    else:
        w, c = time.perf_counter(), time.process_time()
        llm.eval(cmd["ids"])
        w, c = time.perf_counter() - w, time.process_time() - c
        print(json.dumps({"wall": w, "cpu": c, "last": last(llm)}), flush=True)
"""


def load():
    return "load average {:.2f}, {:.2f}, {:.2f}".format(*os.getloadavg())


def timed(fn):
    """``fn()``'s result, wall seconds, CPU seconds of this process."""
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


class LlamaCpp:
    """llama.cpp in a worker process (the Python given by ``--llama-cpp``)."""

    def __init__(self, python, gguf):
        self.proc = subprocess.Popen(
            [python, "-c", LLAMA_CPP_WORKER, str(gguf)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.version = self._read()["version"]

    def _read(self):
        line = self.proc.stdout.readline()
        if not line:
            sys.exit(f"the llama.cpp worker stopped (exit {self.proc.wait()})")
        return json.loads(line)

    def ask(self, **cmd):
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def load_sides(args):
    """The library's model and decoder, transformers' model, and llama.cpp (or None)."""
    import torch
    import transformers

    from attention_lib.models.kv_cache import decoder_for
    from attention_lib.models.smollm2 import gguf_path, load_smollm2

    transformers.logging.set_verbosity_error()
    (model, tok), wall, _ = timed(load_smollm2)
    print(f"\nlibrary: load_smollm2() {wall:.1f} s ({load()})")
    path = gguf_path()
    ref, wall, _ = timed(
        lambda: transformers.AutoModelForCausalLM.from_pretrained(
            str(path.parent), gguf_file=path.name, dtype=torch.float32
        ).eval()
    )
    print(f"transformers {transformers.__version__}: from_pretrained(gguf_file=...) "
          f"{wall:.1f} s ({load()})")  # fmt: skip
    cpp = None
    if args.llama_cpp:
        cpp = LlamaCpp(args.llama_cpp, path)
        print(f"llama-cpp-python {cpp.version}, the same Q4_1 file")
    return model, tok, decoder_for(model, 1, CAPACITY), ref, cpp


def decode_sides(model, tok, dec, ref, cpp, n):
    """``{side: fn}``, each ``fn(threads)`` -> (ids, wall s, CPU s) of ``n`` decode steps."""
    import torch

    from attention_lib.models.smollm2 import chat_prompt

    ids = chat_prompt(tok, QUESTION)

    def library(threads):
        dec.reset()
        nxt = int(dec.prefill(ids[None])[0].argmax())
        out, token = [], np.empty(1, np.int64)
        w, c = time.perf_counter(), time.process_time()
        for _ in range(n):
            out.append(nxt)
            token[0] = nxt
            nxt = int(dec.step(token)[0].argmax())
        return out, time.perf_counter() - w, time.process_time() - c

    def pytorch(threads):
        with torch.inference_mode():
            res = ref(torch.from_numpy(ids[None]), use_cache=True, logits_to_keep=1)
            nxt = int(res.logits[0, -1].argmax())
            out = []
            w, c = time.perf_counter(), time.process_time()
            for _ in range(n):
                out.append(nxt)
                res = ref(torch.tensor([[nxt]]), cache=res.cache, use_cache=True)
                nxt = int(res.logits[0, -1].argmax())
            return out, time.perf_counter() - w, time.process_time() - c

    sides = {"library": library, "PyTorch eager": pytorch}
    if cpp is not None:

        def llama_cpp(threads):
            r = cpp.ask(op="decode", threads=threads, ids=ids.tolist(), n=n)
            return r["ids"], r["wall"], r["cpu"]

        sides["llama.cpp Q4_1"] = llama_cpp
    return ids, sides


def prefill_sides(model, tok, dec, ref, cpp, n):
    """``{side: fn}``, each ``fn(threads)`` -> (last logits or argmax, wall s, CPU s)."""
    import torch

    text = (ROOT / "data" / "shakespeare" / "input.txt").read_text()[:8000]
    ids = tok.encode(text)[:n]
    assert len(ids) == n, f"the text gives {len(ids)} tokens, fewer than {n}"

    def library(threads):
        dec.reset()
        return timed(lambda: dec.prefill(ids[None])[0])

    def pytorch(threads):
        with torch.inference_mode():
            x = torch.from_numpy(ids[None])
            out, w, c = timed(lambda: ref(x, use_cache=True, logits_to_keep=1))
            return out.logits[0, -1].numpy(), w, c

    sides = {"library": library, "PyTorch eager": pytorch}
    if cpp is not None:

        def llama_cpp(threads):
            r = cpp.ask(op="prefill", threads=threads, ids=ids.tolist())
            return r["last"], r["wall"], r["cpu"]

        sides["llama.cpp Q4_1"] = llama_cpp
    return ids, sides


def rounds(sides, threads, repeat, seed=0):
    """Every side once a round, in a shuffled order; ``{side: [(result, wall, cpu)]}``."""
    import torch

    rng = random.Random(seed)
    runs = {k: [] for k in sides}
    torch.set_num_threads(threads)
    with threadpool_limits(limits=threads, user_api="blas"):
        for k in sides:  # one untimed run each: first-call costs, the caches' pages
            sides[k](threads)
        for _ in range(repeat):
            order = list(sides)
            rng.shuffle(order)
            for k in order:
                runs[k].append(sides[k](threads))
    return runs


def report(runs, per, unit, scale):
    """Median and best wall and CPU of each side, and the library's ratio to each."""
    stats = {}
    for k, rs in runs.items():
        walls = [r[1] / per for r in rs]
        cpus = [r[2] / per for r in rs]
        stats[k] = (statistics.median(walls), min(walls), statistics.median(cpus), min(cpus))
    print(f"   {'side':<16}{'median wall':>12}{'best wall':>11}{'median CPU':>12}{'best CPU':>10}"
          f"   library / side: wall (median, best), CPU (median)")  # fmt: skip
    lib = stats["library"]
    for k, (mw, bw, mc, bc) in stats.items():
        print(f"   {k:<16}{mw * scale:12.2f}{bw * scale:11.2f}{mc * scale:12.2f}{bc * scale:10.2f}"
              f"   {lib[0] / mw:.2f}x, {lib[1] / bw:.2f}x, {lib[2] / mc:.2f}x")  # fmt: skip
    print(f"   ({unit})")
    return stats


def bench_decode(args, loaded):
    model, tok, dec, ref, cpp = loaded
    ids, sides = decode_sides(model, tok, dec, ref, cpp, args.tokens)
    for threads in THREAD_COUNTS:
        before = load()
        runs = rounds(sides, threads, args.repeat)
        lib_ids = runs["library"][0][0]
        assert all(r[0] == lib_ids for r in runs["library"]), "the library's ids vary"
        assert all(r[0] == lib_ids for r in runs["PyTorch eager"]), "PyTorch's ids differ"
        print(f"\ndecode, {threads} thread(s): {len(ids)} prompt tokens + {args.tokens} new, "
              f"greedy, library and PyTorch give the same ids; median and best of "
              f"{args.repeat} rounds ({before} before, {load()} after)")  # fmt: skip
        if cpp is not None:
            c_ids = runs["llama.cpp Q4_1"][0][0]
            same = next((i for i, (a, b) in enumerate(zip(lib_ids, c_ids)) if a != b), len(c_ids))
            print(f"   llama.cpp's ids: the first {same} of {len(c_ids)} equal the library's")
        report(runs, args.tokens, "ms per token", 1e3)


def bench_prefill(args, loaded):
    model, tok, dec, ref, cpp = loaded
    ids, sides = prefill_sides(model, tok, dec, ref, cpp, args.prefill)
    for threads in THREAD_COUNTS:
        before = load()
        runs = rounds(sides, threads, args.repeat)
        lib, torch_logits = runs["library"][0][0], runs["PyTorch eager"][0][0]
        diff = float(np.abs(lib - torch_logits).max())
        assert diff < 1e-3, f"the last logits differ by {diff}"
        print(f"\nprefill, {threads} thread(s): {len(ids)} tokens of Shakespeare, a fresh cache, "
              f"last logits within {diff:.1e} of PyTorch's; median and best of {args.repeat} "
              f"rounds ({before} before, {load()} after)")  # fmt: skip
        if cpp is not None:
            print(f"   llama.cpp's next token {runs['llama.cpp Q4_1'][0][0]}, "
                  f"the library's {int(lib.argmax())}")  # fmt: skip
        stats = report(runs, 1, "seconds for the 512 tokens", 1)
        print("   tokens per second (median wall): "
              + ", ".join(f"{k} {len(ids) / s[0]:.0f}" for k, s in stats.items()))  # fmt: skip


def bench_pieces(args):
    """The one-token step's matrix products, each alone, at every thread count."""
    from attention_lib.models.kv_cache import decoder_for
    from attention_lib.models.smollm2 import chat_prompt, load_smollm2

    model, tok = load_smollm2()
    dec = decoder_for(model, 1, CAPACITY)
    ids = chat_prompt(tok, QUESTION)
    _, attn, W13, d_ff, W2 = dec.layers[0]
    x = dec.E[int(ids[0])]
    u = x / np.linalg.norm(x)
    a = np.random.default_rng(0).standard_normal(d_ff).astype(np.float32)
    kv = dec.cache.kv[0, 0]
    pieces = {  # name: (fn, calls per token)
        "u @ W_qkv (576 x 960)": (lambda: np.dot(u, attn.W, out=attn.qkv_row), 30),
        "ctx @ W_O (576 x 576)": (lambda: np.dot(u, attn.W_O), 30),
        "u @ W13 (576 x 3072)": (lambda: np.dot(u, W13), 30),
        "a @ W2 (1536 x 576)": (lambda: np.dot(a, W2), 30),
        "attention row, pos 100": (lambda: attn.row(u, kv, 100), 30),
        "head (576 x 49152)": (lambda: np.dot(u, dec.W_head), 1),
    }
    token = np.array([int(ids[-1])])
    for threads in THREAD_COUNTS:
        print(f"\none-token step, its pieces alone (one layer's weights again and again: held in "
              f"cache, unlike a real step's), {threads} BLAS thread(s) ({load()})")  # fmt: skip
        print(f"   {'piece':<24}{'wall ms':>9}{'CPU ms':>9}{'per token: wall':>17}{'CPU':>8}")
        with threadpool_limits(limits=threads, user_api="blas"):
            for name, (fn, calls) in pieces.items():
                n = 10 if calls == 1 else 300
                fn()
                _, w, c = timed(lambda: [fn() for _ in range(n)])
                w, c = 1e3 * w / n, 1e3 * c / n
                print(f"   {name:<24}{w:9.3f}{c:9.3f}{w * calls:17.2f}{c * calls:8.2f}")
            dec.reset()
            dec.prefill(ids[None])
            _, w, c = timed(lambda: [dec.step(token) for _ in range(64)])
            print(f"   {'the whole step':<24}{'':18}{1e3 * w / 64:17.2f}{1e3 * c / 64:8.2f}")


MEMORY_CASES = {
    "import attention_lib": "import attention_lib.models.smollm2 as s",
    "load, sha256 checked": "import attention_lib.models.smollm2 as s\n"
    "t, c = clock(); model, tok = s.load_smollm2(); t, c = since(t, c)",
    "load, no check": "import attention_lib.models.smollm2 as s\n"
    "t, c = clock(); model, tok = s.load_smollm2(verify=False); t, c = since(t, c)",
    "load + 64 tokens": "import attention_lib.models.smollm2 as s\n"
    "model, tok = s.load_smollm2()\n"
    "ids = s.chat_prompt(tok, 'What is the capital of France?')\n"
    "t, c = clock(); model.generate(ids, 64, temperature=0); t, c = since(t, c)",
}


def bench_memory(args):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1"}
    print(f"\nload and memory, one BLAS thread, each case a fresh process, median of "
          f"{args.memory_repeat} ({load()} before)")  # fmt: skip
    print("   wall s, CPU s: the timed call (load_smollm2 or generate); process CPU s: the whole "
          "process, imports included")  # fmt: skip
    print(f"   {'case':<22}{'wall s':>9}{'CPU s':>9}{'process CPU s':>15}{'peak RSS MiB':>14}")
    for name, code in MEMORY_CASES.items():
        script = (
            "import resource, time\n"
            "def clock(): return time.perf_counter(), time.process_time()\n"
            "def since(t, c): return time.perf_counter() - t, time.process_time() - c\n"
            "t = c = float('nan')\n" + code + "\n"
            "print(t, c, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
        )
        rs = []
        for _ in range(args.memory_repeat):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            out = subprocess.run(
                [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True
            ).stdout.split()
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
            # ru_maxrss: KiB on Linux (MiB printed)
            rs.append((float(out[0]), float(out[1]), cpu, int(out[2]) / 1024))
        t, c, cpu, rss = (statistics.median(r[i] for r in rs) for i in range(4))
        print(f"   {name:<22}{t:9.2f}{c:9.2f}{cpu:15.2f}{rss:14.0f}")
    print(f"   ({load()} after)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", default="1,2", help="thread counts (default 1,2)")
    parser.add_argument(
        "--part", action="append", choices=["decode", "prefill", "memory", "pieces"]
    )
    parser.add_argument("--repeat", type=int, default=5, help="rounds per side (default 5)")
    parser.add_argument("--tokens", type=int, default=64, help="decode: new tokens (64)")
    parser.add_argument("--prefill", type=int, default=512, help="prefill: tokens (512)")
    parser.add_argument("--memory-repeat", type=int, default=3, help="memory: runs (3)")
    parser.add_argument("--llama-cpp", metavar="PYTHON", help="a Python with llama_cpp")
    args = parser.parse_args(argv)
    import torch

    print(describe_machine(torch))
    print(f"thread counts measured: {', '.join(map(str, THREAD_COUNTS))} (BLAS via "
          f"threadpoolctl, torch.set_num_threads, llama.cpp n_threads)")  # fmt: skip
    parts = args.part or ["decode", "prefill", "memory"]
    if "memory" in parts:  # first, before this process holds two models
        bench_memory(args)
    if "pieces" in parts:
        bench_pieces(args)
    if "decode" in parts or "prefill" in parts:
        loaded = load_sides(args)
        if "decode" in parts:
            bench_decode(args, loaded)
        if "prefill" in parts:
            bench_prefill(args, loaded)
        if loaded[-1] is not None:
            loaded[-1].close()
    print(f"\nafter the run: {load()}")


if __name__ == "__main__":
    main()
