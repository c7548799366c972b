"""Record the SmolLM2 runtime's speed figures (issue 55) in ``data/smollm2/runtime_speed.json``.

Runs section 1b of ``benchmarks/bench_browser.mjs`` (SmolLM2-135M-Instruct in the book's
runtime, node, one thread, WebAssembly SIMD, against the library's NumPy model at one BLAS
thread, greedy from the same chat prompt, sides in turn) and keeps its three figures, by
the names the issue gives them, in the file's ``"node"`` entry:

- ``smollm2_js_tokens_per_s``: decoding tokens per second of CPU time, node, one thread;
- ``smollm2_js_ms_per_token_ratio``: the runtime's CPU ms per token over the library's;
- ``smollm2_js_page_mib``: the memory the runtime holds for the model (MiB: the GGUF's
  blocks in WebAssembly memory, no float32 copy of a matrix);

with the command, the CPU, the load average before and after and the wall time. (The
file's ``"chromium"`` entry, tokens per second in the chat widget, is written by
``scripts/browser_smollm2.py --json``.) CPU time is the figure to read on a busy machine:
wall-clock rates fall with the load.

    python scripts/record_smollm2_js_speed.py [--rounds 3] [--tokens 48]
"""

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "data" / "smollm2" / "runtime_speed.json"
FIGURES = {
    "smollm2_js_tokens_per_s": r"smollm2_js_tokens_per_s ([\d.]+)",
    "smollm2_js_ms_per_token_ratio": r"smollm2_js_ms_per_token_ratio ([\d.]+)",
    "smollm2_js_page_mib": r"smollm2_js_page_mib ([\d.]+)",
}


def parse(text):
    """The three figures from bench_browser.mjs's output; a ValueError naming a missing one."""
    out = {}
    for name, pattern in FIGURES.items():
        m = re.search(pattern, text)
        if not m:
            raise ValueError(f"bench_browser.mjs printed no {name}: see its output above")
        out[name] = float(m.group(1))
    same = re.search(r"same ids: (true|false)", text)
    out["same_ids_as_the_library"] = same is not None and same.group(1) == "true"
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args(argv)
    command = [
        "node",
        "benchmarks/bench_browser.mjs",
        "--no-browser",
        "--only-smollm2",
        "--rounds",
        str(args.rounds),
        "--smollm2-tokens",
        str(args.tokens),
        "--python",
        sys.executable,
    ]
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    before = [round(x, 2) for x in os.getloadavg()]
    t0 = time.perf_counter()
    run = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    print(run.stdout, end="")
    if run.returncode != 0:
        print(run.stderr, file=sys.stderr)
        return run.returncode
    figures = parse(run.stdout)
    if not figures["same_ids_as_the_library"]:
        print("the runtime's ids are not the library's: no figures recorded", file=sys.stderr)
        return 1
    machine = re.search(r"^machine: (.+)$", run.stdout, re.M)
    path = Path(args.out).resolve()
    data = json.loads(path.read_text(encoding="utf8")) if path.exists() else {}
    data["node"] = {
        **figures,
        "what": "greedy decoding after the chat prompt of 'What is the capital of France?': CPU ms "
        f"per token of {args.tokens} tokens less the prompt and one, median of {args.rounds} "
        "rounds, runtime (node, one thread, WebAssembly SIMD, 4-bit blocks) and library "
        "(NumPy float32, one BLAS thread) in turns",
        "command": "python scripts/record_smollm2_js_speed.py "
        f"--rounds {args.rounds} --tokens {args.tokens}",
        "bench_command": " ".join(command[:-2]),
        "machine": machine.group(1) if machine else None,
        "cpus": os.cpu_count(),
        "load_average_before": before,
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "wall_s": round(wall, 1),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf8")
    print(f"wrote {path}: {figures}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
