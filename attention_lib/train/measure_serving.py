"""Measure what the serving chapter reads: quantized models' quality, speculative decoding's speed.

Run as ``python -m attention_lib.train.measure_serving [--part quant spec speed]``.
It writes ``data/checkpoints/serving/measurements.json`` (each part its own
key, the others kept), with the CPU, the machine's load and the wall time of
every part. One BLAS thread throughout. The chapter executes in seconds by
reading this file; the measurements take minutes.

- ``quant``: for chapter 11's Shakespeare model, stories260K and chapter 10's
  Transformer translator, and each scheme of :data:`attention_lib.quantize.SCHEMES`:
  held-out loss (nats per token), KL divergence from the float model and
  top-1 agreement with it per position, and bytes; BLEU and chrF for the
  translator; and the Shakespeare model with an 8-bit KV cache.
- ``spec``: speculative decoding of chapter 11's model with the one-layer draft
  of :mod:`attention_lib.train.serving`, prompt lookup and the table
  distilled from the target (:mod:`attention_lib.models.ngram_draft`), greedy, k = 1 to 8:
  acceptance, tokens per target pass, and speed-up against plain greedy decoding
  (same tokens, checked), in CPU time (robust to a shared machine's load) and
  in wall-clock time; and the CPU time of one pass of the target over 1 to 9
  new tokens.
- ``speed``: tokens per second of one new token at a 1,024-token context for
  each KV variant at chapter 11's width (random weights: speed does not
  depend on them).
"""

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from ..data.paths import write_atomic
from ..quantize import SCHEMES, Int8KVCache, quantize_model
from ..softmax import log_softmax
from ..models.kv_variants import serving_dir
from .evaluate_long_context import cpu_name

#: Characters of Tiny Shakespeare's validation split scored (64 windows of 128).
SHAKESPEARE_WINDOWS = 64
#: Test sentences the quantized translators translate (of 1,450).
TEST_SENTENCES = 500
#: Stories sampled from the float stories260K (temperature 1, seeded) to score.
STORIES = 24


def _compare(ref_logits, logits, targets):
    """Loss (nats/token), KL(float || quantized) and top-1 agreement, over all positions."""
    lp_ref = log_softmax(ref_logits.astype(np.float64), axis=-1)
    lp = log_softmax(logits.astype(np.float64), axis=-1)
    loss = -np.take_along_axis(lp, targets[..., None], axis=-1).mean()
    kl = (np.exp(lp_ref) * (lp_ref - lp)).sum(axis=-1).mean()
    agree = (ref_logits.argmax(-1) == logits.argmax(-1)).mean()
    return {
        "loss": round(float(loss), 4),
        "kl": round(float(kl), 5),
        "top1": round(float(agree), 4),
    }


def _shakespeare_windows():
    from .shakespeare import load_text

    _, _, val = load_text()
    n, T = SHAKESPEARE_WINDOWS, 128
    x = val[: n * T].reshape(n, T)
    y = val[1 : n * T + 1].reshape(n, T)
    return x, y


def _logits(model, x, batch=16, caches=None):
    out = []
    for i in range(0, len(x), batch):
        cache = None if caches is None else caches()
        out.append(model.forward(x[i : i + batch], cache))
    return np.concatenate(out)


def quant_shakespeare():
    from ..models.pretrained import load_pretrained

    x, y = _shakespeare_windows()
    model, _ = load_pretrained("shakespeare")
    ref = _logits(model, x)
    rows = {"float32": {**_compare(ref, ref, y), "bytes": 4 * int(model.n_params())}}
    rows["float16"] = {**rows["float32"], "bytes": 2 * int(model.n_params())}
    for scheme in SCHEMES:
        m, _ = load_pretrained("shakespeare")
        report = quantize_model(m, scheme)
        rows[scheme] = {**_compare(ref, _logits(m, x), y), "bytes": report["bytes"]}
        rows[scheme]["fallback"] = report["fallback"]
    kv = _logits(model, x, caches=lambda: [Int8KVCache() for _ in model.blocks])
    d = model.blocks[0].attn.d_head
    heads = model.blocks[0].attn.n_heads
    rows["kv_int8"] = {
        **_compare(ref, kv, y),
        "cache_bytes_per_token": len(model.blocks) * 2 * heads * (d + 2),
        "float32_cache_bytes_per_token": len(model.blocks) * 2 * heads * d * 4,
    }
    return {
        "data": f"Tiny Shakespeare validation split, first {SHAKESPEARE_WINDOWS} windows of 128",
        "rows": rows,
    }


def quant_stories():
    from ..models.llama import load_stories260k

    model, tok = load_stories260k()
    rng = np.random.default_rng(260)
    prompt = np.array(tok.encode("Once upon a time"))
    stories = np.stack(
        [
            model.generate(prompt, 128 - len(prompt), temperature=1.0, rng=rng)
            for _ in range(STORIES)
        ]
    )
    x, y = stories[:, :-1], stories[:, 1:]
    ref = _logits(model, x)
    n = int(model.n_params())
    rows = {"float32": {**_compare(ref, ref, y), "bytes": 4 * n}}
    for scheme in SCHEMES:
        m, _ = load_stories260k()
        report = quantize_model(m, scheme)
        rows[scheme] = {**_compare(ref, _logits(m, x), y), "bytes": report["bytes"]}
        rows[scheme]["fallback"] = sorted(set(k.split(".")[-1] for k in report["fallback"]))
    return {
        "data": f"{STORIES} stories of 128 tokens sampled from the float model "
        "(temperature 1, seed 260, prompt 'Once upon a time'): TinyStories' own "
        "validation text is not in the repository, so the float model's loss is "
        "its own entropy and each row's excess over it estimates the KL",
        "rows": rows,
    }


def quant_translator():
    import sacrebleu

    from ..data.tatoeba import load_pairs, load_references
    from ..translate import load_model, translate_sentences
    from .translation import encode_pairs, pad_batch

    sources, refs = load_references("test")
    sources, refs = sources[:TEST_SENTENCES], refs[:TEST_SENTENCES]
    streams = [
        [r[k] if k < len(r) else None for r in refs] for k in range(max(len(r) for r in refs))
    ]

    def evaluate(m):
        hyps = translate_sentences(m, tok, sources)
        return {
            "bleu": round(sacrebleu.corpus_bleu(hyps, streams).score, 2),
            "chrf": round(sacrebleu.corpus_chrf(hyps, streams).score, 2),
        }

    model, tok = load_model("transformer")
    src, tgt = encode_pairs(tok, load_pairs("valid")[:256])
    batches = [pad_batch(src[i : i + 64], tgt[i : i + 64]) for i in range(0, len(src), 64)]

    def logits_of(m):
        out = []
        for s, lengths, t_in, t_out in batches:
            lg = m.forward(s, lengths, t_in)
            keep = t_out != 0
            out.append((lg[keep], t_out[keep]))
        return np.concatenate([a for a, _ in out]), np.concatenate([b for _, b in out])

    ref, y = logits_of(model)
    n = int(model.n_params())
    rows = {"float32": {**_compare(ref, ref, y), "bytes": 4 * n, **evaluate(model)}}
    for scheme in SCHEMES:
        m, _ = load_model("transformer")
        report = quantize_model(m, scheme)
        lg, _ = logits_of(m)
        rows[scheme] = {**_compare(ref, lg, y), "bytes": report["bytes"], **evaluate(m)}
        rows[scheme]["fallback"] = report["fallback"]
    return {
        "data": "loss, KL, top-1: first 256 validation pairs, teacher-forced; BLEU and chrF "
        f"(sacreBLEU, all references): the first {TEST_SENTENCES} of the 1,450 test "
        "sentences, greedy",
        "rows": rows,
    }


def measure_quant():
    return {
        "shakespeare": quant_shakespeare(),
        "stories260k": quant_stories(),
        "translator": quant_translator(),
    }


#: Speculative decoding's prompts: six openings of a speech (96 new characters after each).
PROMPTS = (
    "ROMEO:\nI will",
    "First Citizen:\n",
    "JULIET:\nO ",
    "KING HENRY VI:\n",
    "MENENIUS:\nWhat",
    "DUKE VINCENTIO:\n",
)


def measure_spec(ks=range(1, 9), new=96, repeats=3):
    from ..models.kv_variants import load_variant
    from ..models.pretrained import load_pretrained
    from ..models.speculative import PromptLookup, speculative_generate

    target, tok = load_pretrained("shakespeare")
    from ..models.ngram_draft import NgramDraft

    drafts = {
        "one-layer": load_variant(serving_dir() / "draft.npz")[0],
        "lookup": PromptLookup(target.tok.params["E"].shape[0]),
        "ngram": NgramDraft.load(serving_dir() / "ngram_draft.npz"),
    }
    prompts = [np.array(tok.encode(p)) for p in PROMPTS]
    plain_out = [target.generate(p, new, temperature=0) for p in prompts]
    result = {}
    for name, draft in drafts.items():
        rows = {}
        for k in ks:
            spec_t, plain_t, spec_c, plain_c, stats = [], [], [], [], []
            for _ in range(repeats):  # alternate: plain, speculative, plain, ...
                t0, c0 = time.perf_counter(), time.process_time()
                for p in prompts:
                    target.generate(p, new, temperature=0)
                plain_t.append(time.perf_counter() - t0)
                plain_c.append(time.process_time() - c0)
                t0, c0 = time.perf_counter(), time.process_time()
                outs = [speculative_generate(target, draft, p, new, k=k) for p in prompts]
                spec_t.append(time.perf_counter() - t0)
                spec_c.append(time.process_time() - c0)
            for (out, st), want in zip(outs, plain_out):
                if not np.array_equal(out, want):
                    raise AssertionError(f"{name}, k = {k}: speculative greedy output differs")
                stats.append(st)
            drafted = sum(s["drafted"] for s in stats)
            rows[k] = {
                "acceptance": round(sum(s["accepted"] for s in stats) / drafted, 4),
                "tokens_per_pass": round(
                    len(prompts) * new / sum(s["target_passes"] for s in stats), 3
                ),
                "seconds": round(min(spec_t), 3),
                "plain_seconds": round(min(plain_t), 3),
                "cpu_seconds": round(min(spec_c), 3),
                "plain_cpu_seconds": round(min(plain_c), 3),
            }
            rows[k]["speedup"] = round(rows[k]["plain_seconds"] / rows[k]["seconds"], 3)
            rows[k]["cpu_speedup"] = round(rows[k]["plain_cpu_seconds"] / rows[k]["cpu_seconds"], 3)
        best = max(rows, key=lambda k: rows[k]["cpu_speedup"])
        result[name] = {"rows": rows, "best_k": best}
    return {
        "prompts": list(PROMPTS),
        "new_tokens": new,
        "greedy_output_identical": True,
        "drafts": result,
        "pass_cpu_seconds": _pass_cost(target, prompts[0]),
        "draft_cpu_seconds_per_token": round(_per_token(drafts["one-layer"], prompts[0], new), 5),
        "ngram_cpu_seconds_per_token": round(_propose_cost(drafts["ngram"], prompts[0], new), 6),
        "target_cpu_seconds_per_token": round(_per_token(target, prompts[0], new), 5),
        "draft_parameters": int(drafts["one-layer"].n_params()),
        "target_parameters": int(target.n_params()),
    }


def _pass_cost(model, prompt, sizes=range(1, 10), repeats=30):
    """CPU seconds of one cached pass of ``n`` new tokens after the prompt, per ``n``.

    On the model's fast decoder, as speculative decoding's check runs
    (``prefill_rows``: the logits at every new position).
    """
    from ..models.kv_cache import decoder_for

    decoder = decoder_for(model, 1)
    out = {}
    for n in sizes:
        best = np.inf
        for _ in range(repeats):
            decoder.reset()
            decoder.prefill(prompt[None])
            t0 = time.process_time()  # CPU time: robust to a shared machine's load
            decoder.prefill_rows(np.zeros((1, n), dtype=np.int64))
            best = min(best, time.process_time() - t0)
        out[n] = round(best, 6)
    return out


def _propose_cost(draft, prompt, new, repeats=3):
    """CPU seconds per token a table draft proposes (``new`` tokens in one call)."""
    best = np.inf
    for _ in range(repeats):
        t0 = time.process_time()
        draft.propose(prompt[None], new)
        best = min(best, time.process_time() - t0)
    return best / new


def _per_token(model, prompt, new, repeats=3):
    best = np.inf
    for _ in range(repeats):
        t0 = time.process_time()
        model.generate(prompt, new, temperature=0)
        best = min(best, time.process_time() - t0)
    return best / new


def speed_at_context(variant, context=1024, new=16, cfg=None, repeats=3):
    """Seconds per new token after a ``context``-token prefix, chapter 11's width."""
    from ..models.kv_variants import build_variant

    cfg = cfg or {
        "d_model": 192,
        "n_heads": 4,
        "n_layers": 4,
        "d_ff": 768,
        "max_len": context + new,
        "seed": 0,
        "variant": variant,
        "n_kv_heads": 2,
        "d_latent": 192,
        "d_rope": 24,
    }
    model = build_variant(cfg, 65).train(False)
    prompt = np.random.default_rng(0).integers(0, 65, (1, context))
    best = np.inf
    for _ in range(repeats):
        cache = model.new_cache()
        model.forward(prompt, cache)
        t0 = time.perf_counter()
        tok = prompt[:, -1:]
        for _ in range(new):
            tok = model.forward(tok, cache)[:, -1].argmax(-1)[:, None]
        best = min(best, (time.perf_counter() - t0) / new)
    return best, model.cache_bytes_per_token()


def measure_speed(context=1024):
    rows = {}
    for v in ("mha", "gqa", "mqa", "mla"):
        s, nbytes = speed_at_context(v, context)
        rows[v] = {
            "tokens_per_second": round(1 / s, 1),
            "cache_bytes_per_token": nbytes,
            "cache_mib_at_context": round(nbytes * context / 2**20, 2),
        }
    return {"context": context, "width": "chapter 11's: 4 layers of 192, 4 heads", "rows": rows}


PARTS = {"quant": measure_quant, "spec": measure_spec, "speed": measure_speed}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", nargs="*", choices=list(PARTS), default=list(PARTS))
    parser.add_argument("--out", default=str(serving_dir() / "measurements.json"))
    args = parser.parse_args(argv)
    out = Path(args.out)
    for part in args.part:
        result = json.loads(out.read_text()) if out.exists() else {}
        load0 = os.getloadavg()[0]
        t0 = time.perf_counter()
        with threadpool_limits(limits=1, user_api="blas"):
            data = PARTS[part]()
        result[part] = {
            **data,
            "wall_seconds": round(time.perf_counter() - t0, 1),
            "load_average_1min": [round(load0, 2), round(os.getloadavg()[0], 2)],
            "cpu": cpu_name(),
            "threads": 1,
            "command": f"python -m attention_lib.train.measure_serving --part {part}",
        }
        write_atomic(out, lambda f: f.write(json.dumps(result, indent=1) + "\n"))
        print(part, json.dumps(data)[:400], flush=True)


if __name__ == "__main__":
    main()
