"""Serving speed of chapter 11's Shakespeare model: KV variants, quantized weights, speculative decoding.

    python benchmarks/bench_serving.py [--context 1024] [--new 16] [--repeats 3] [--draft ngram]

In one run, on one BLAS thread, alternating the sides of each comparison:

1. tokens per second of one new token after ``--context`` tokens, for each KV
   variant (MHA, GQA with 2 groups, MQA, MLA) at chapter 11's width (4 blocks
   of 192, 4 heads; random weights: speed does not depend on them);
2. the same for float32 weights against Q8_0 and Q4_0 weights dequantized on
   the fly (NumPy has no integer matrix kernels: each step dequantizes the
   matrices it multiplies, so this measures the cost of that, not a saving);
3. speculative decoding of the committed Shakespeare model with a committed
   draft (``--draft``: the table distilled from the target, by default; the
   one-layer model; prompt lookup) at its best k (``--k``, default the one
   ``data/checkpoints/serving/measurements.json`` records), greedy: the
   speed-up over plain greedy decoding in wall-clock and CPU time, with the
   output checked to be the same. Goal: at least 1.5x.

It prints the CPU model (``lscpu``), the threads and the machine's load.
"""

import argparse
import json
import os
import subprocess
import time

import numpy as np
from threadpoolctl import threadpool_limits

from attention_lib.models.kv_variants import build_variant
from attention_lib.train.measure_serving import PROMPTS
from attention_lib.models.pretrained import load_pretrained
from attention_lib.models.speculative import load_draft, speculative_generate
from attention_lib.models.kv_variants import serving_dir
from attention_lib.quantize import dequantize, quantize_matrix

WIDTH = {"d_model": 192, "n_heads": 4, "n_layers": 4, "d_ff": 768, "seed": 0}


def cpu_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        return next(
            line.split(":", 1)[1].strip() for line in out.splitlines() if "Model name" in line
        )
    except (OSError, subprocess.CalledProcessError, StopIteration):
        return "unknown"


def time_new_tokens(model, context, new):
    """Seconds per new token after a ``context``-token prompt (cache filled first)."""
    prompt = np.random.default_rng(0).integers(0, 65, (1, context))
    cache = model.new_cache()
    model.forward(prompt, cache)
    tok = prompt[:, -1:]
    t0 = time.perf_counter()
    for _ in range(new):
        tok = model.forward(tok, cache)[:, -1].argmax(-1)[:, None]
    return (time.perf_counter() - t0) / new


def quantized_forward(model, scheme):
    """Make every Linear of ``model`` multiply by weights dequantized at each call."""
    bits = {"q8_0": 8, "q4_0": 4}[scheme]
    layers = [layer for b in model.blocks for layer in (b.ffn.fc1, b.ffn.fc2)] + [model.head]
    for layer in layers:
        qt = quantize_matrix(layer.params["W"], bits, 32)
        forward = layer.forward

        def on_the_fly(x, _qt=qt, _layer=layer, _forward=forward):
            _layer.params["W"] = dequantize(_qt).T
            return _forward(x)

        layer.forward = on_the_fly
    for b in model.blocks:
        att = b.attn
        qts = {k: quantize_matrix(att.params[k], bits, 32) for k in ("W_Q", "W_K", "W_V", "W_O")}
        forward = att.forward

        def att_on_the_fly(x, cache=None, _att=att, _qts=qts, _forward=forward):
            for k, qt in _qts.items():
                _att.params[k] = dequantize(qt).T
            return _forward(x, cache)

        att.forward = att_on_the_fly
    return model


def speed(args, cfg):
    """Parts 1-2: one new token after ``--context`` tokens, per KV variant and weight format."""
    models = {
        v: build_variant({**cfg, "variant": v}, 65).train(False)
        for v in ("mha", "gqa", "mqa", "mla")
    }
    models["mha q8_0"] = quantized_forward(build_variant({**cfg, "variant": "mha"}, 65), "q8_0")
    models["mha q4_0"] = quantized_forward(build_variant({**cfg, "variant": "mha"}, 65), "q4_0")
    best = {name: np.inf for name in models}
    for _ in range(args.repeats):  # alternate the sides, keep each one's fastest
        for name, m in models.items():
            best[name] = min(best[name], time_new_tokens(m, args.context, args.new))
    print(f"\n1-2. one new token after {args.context} tokens (chapter 11's width)")
    print(f"{'model':12} {'cache B/token':>14} {'tokens/s':>9} {'vs MHA':>7}")
    for name, s in best.items():
        nbytes = models[name].cache_bytes_per_token()
        print(f"{name:12} {nbytes:14,d} {1 / s:9.1f} {best['mha'] / s:7.2f}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--new", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--k", type=int, default=None)
    parser.add_argument("--draft", default="ngram", choices=["ngram", "one-layer", "lookup"])
    parser.add_argument(
        "--spec-only", action="store_true", help="only part 3 (speculative decoding)"
    )
    args = parser.parse_args(argv)
    print(f"CPU: {cpu_model()}; 1 BLAS thread; load average {os.getloadavg()[0]:.1f}")
    cfg = {
        **WIDTH,
        "max_len": args.context + args.new,
        "n_kv_heads": 2,
        "d_latent": 192,
        "d_rope": 24,
    }
    with threadpool_limits(limits=1, user_api="blas"):
        if not args.spec_only:
            speed(args, cfg)
        target, tok = load_pretrained("shakespeare")
        draft = load_draft(args.draft, target.tok.params["E"].shape[0])
        k = args.k
        if k is None:
            meas = json.loads((serving_dir() / "measurements.json").read_text())
            k = int(meas["spec"]["drafts"][args.draft]["best_k"])
        prompts = [np.array(tok.encode(p)) for p in PROMPTS]
        times, same = [], True  # (plain wall, plain CPU, speculative wall, speculative CPU)
        for _ in range(args.repeats):  # alternate: plain, speculative, plain, ...
            t0, c0 = time.perf_counter(), time.process_time()
            plain = [target.generate(p, 96, temperature=0) for p in prompts]
            t1, c1 = time.perf_counter(), time.process_time()
            fast = [speculative_generate(target, draft, p, 96, k=k)[0] for p in prompts]
            times.append((t1 - t0, c1 - c0, time.perf_counter() - t1, time.process_time() - c1))
            same &= all(np.array_equal(a, b) for a, b in zip(plain, fast))
    times = np.array(times)
    plain_t, plain_c, spec_t, spec_c = times.min(axis=0)
    speedup, cpu_speedup = plain_t / spec_t, plain_c / spec_c
    # each turn's own ratio (plain / speculative, run back to back), median over the turns
    med_wall, med_cpu = np.median(times[:, 0] / times[:, 2]), np.median(times[:, 1] / times[:, 3])
    print(
        f"\n3. speculative decoding, draft {args.draft}, k = {k}, "
        f"{len(prompts)} prompts x 96 tokens, greedy, fastest of {args.repeats} (alternating)"
    )
    print(
        f"wall: plain {plain_t:.2f} s, speculative {spec_t:.2f} s: speed-up {speedup:.2f}x\n"
        f"CPU:  plain {plain_c:.2f} s, speculative {spec_c:.2f} s: speed-up {cpu_speedup:.2f}x\n"
        f"median of the {args.repeats} turns' ratios: wall {med_wall:.2f}x, CPU {med_cpu:.2f}x\n"
        f"goal >= 1.5x: {'met' if min(speedup, cpu_speedup) >= 1.5 else 'NOT met'}; "
        f"same output: {same}"
    )
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
