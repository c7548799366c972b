"""Export the book's trained models for the in-browser runtime (book/_static/runtime).

For each model this writes ``book/_static/models/<name>.json`` (the
configuration, the tokenizer, every tensor's name, shape, dtype and byte
offset, the sha256 of the weights and of the checkpoint they came from) and
``<name>.bin`` (the tensors, little-endian, one after another), from the
committed checkpoints:

- ``shakespeare``: ``data/checkpoints/shakespeare/shakespeare.npz`` (TinyGPT,
  stored in float16, exported in float16: the same numbers);
- ``stories260k``: ``data/stories260k/tinyllamas-stories-260k-f32.gguf``
  (Llama; float32, as the file holds it);
- ``translator``: ``data/checkpoints/translation/`` (the encoder-decoder), when
  it exists;
- ``shakespeare_window``: ``data/checkpoints/longctx/rotary_128.npz`` (chapter
  19's rotary character model, float32), for the sliding-window widget.

The runtime reads every matrix as ``(n_in, n_out)``, the library's ``x @ W``:
the Shakespeare model's packed ``W_QKV`` is split into ``wq, wk, wv`` (columns
``[q | k | v]``, as ``SelfAttention`` splits it) and the GGUF's ``(out, in)``
matrices are transposed. :func:`runtime_tensors` is that mapping, in one
place; ``tests/test_export_models.py`` checks the files against it and the
checkpoints, and the node parity tests (tests/js/) check the maths.

    python scripts/export_models.py                 # every model whose checkpoint exists
    python scripts/export_models.py --only shakespeare --shakespeare /tmp/ckpt.npz

Each model is also written quantized, as the site serves it, into
``book/_static/models/quantized/``: every matrix in the smallest scheme (Q4_0,
then Q8_0) whose measured held-out loss stays within 1% of the float model's
(:func:`served_scheme`, from ``data/checkpoints/serving/measurements.json``;
the choice and its evidence are in the manifest's ``quantization``), vectors
as before. ``book/_static/runtime/quant.mjs`` dequantizes them on load.
"""

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "book" / "_static" / "models"
MAX_BYTES = 8 * 1024 * 1024
FORMAT = "attention-from-scratch runtime model, version 1"


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def source_paths():
    """Where each model's committed checkpoint lives (the translator's may be missing)."""
    data = ROOT / "data"
    return {
        "shakespeare": data / "checkpoints" / "shakespeare" / "shakespeare.npz",
        "stories260k": data / "stories260k" / "tinyllamas-stories-260k-f32.gguf",
        "translator": data / "checkpoints" / "translation",
        "shakespeare_window": data / "checkpoints" / "longctx" / "rotary_128.npz",
    }


# ---------------------------------------------------------------------------
# Each model: (config, tokenizer, {runtime name: (array, dtype)})
# ---------------------------------------------------------------------------


def shakespeare(path):
    """The TinyGPT checkpoint as the runtime's decoder-only model."""
    with np.load(path, allow_pickle=False) as f:
        cfg = json.loads(str(f["config"]))
        arrays = {k: f[k] for k in f.files if k != "config"}
    if cfg.get("positions") not in ("learned", "sinusoidal", "rotary", None):
        raise ValueError(f"{path}: unknown positions {cfg.get('positions')!r}")
    d, n_layers = cfg["d_model"], cfg["n_layers"]
    t = {"tok_emb": arrays["tok.E"]}
    if cfg["positions"] == "learned":
        t["pos_emb"] = arrays["pos.E"]
    for i in range(n_layers):
        src, dst = f"blocks.{i}", f"layers.{i}"
        w, b = arrays[f"{src}.attn.W_QKV"], arrays[f"{src}.attn.b_QKV"]
        for j, name in enumerate("qkv"):  # columns [q | k | v], heads contiguous in each
            t[f"{dst}.attn.w{name}"] = w[:, j * d : (j + 1) * d]
            t[f"{dst}.attn.b{name}"] = b[j * d : (j + 1) * d]
        t[f"{dst}.attn.wo"] = arrays[f"{src}.attn.W_O"]
        t[f"{dst}.attn.bo"] = arrays[f"{src}.attn.b_O"]
        for n in (1, 2):
            t[f"{dst}.norm{n}.weight"] = arrays[f"{src}.ln{n}.gamma"]
            t[f"{dst}.norm{n}.bias"] = arrays[f"{src}.ln{n}.beta"]
        for n in (1, 2):
            t[f"{dst}.ffn.w{n}"] = arrays[f"{src}.ffn.fc{n}.W"]
            t[f"{dst}.ffn.b{n}"] = arrays[f"{src}.ffn.fc{n}.b"]
    t["norm_f.weight"], t["norm_f.bias"] = arrays["ln_f.gamma"], arrays["ln_f.beta"]
    t["head.weight"], t["head.bias"] = arrays["head.W"], arrays["head.b"]
    config = {
        "arch": "decoder",
        "n_vocab": cfg["n_vocab"],
        "d_model": d,
        "n_heads": cfg["n_heads"],
        "n_kv_heads": cfg["n_heads"],
        "n_layers": n_layers,
        "d_ff": cfg["d_ff"],
        "max_len": cfg["max_len"],
        "norm": "layernorm",
        "norm_eps": 1e-5,
        "ffn": "gelu",
        "positions": cfg["positions"],
        "rotary_layout": "interleaved",
        "tied_head": False,
    }
    tokenizer = {"type": "chars", "chars": cfg["chars"]}
    return config, tokenizer, {k: (np.asarray(a), "float16") for k, a in t.items()}


def stories260k(path):
    """The llama2.c model in GGUF as the runtime's decoder-only model (RMSNorm, SwiGLU, GQA)."""
    from attention_lib.data.gguf import read_gguf

    g = read_gguf(path)
    m = g.metadata
    arch = m["general.architecture"]
    if arch != "llama":
        raise ValueError(f"{path}: expected a llama model, got {arch!r}")
    d = int(m["llama.embedding_length"])
    n_layers = int(m["llama.block_count"])

    def mat(name):  # GGUF (out, in) -> runtime (in, out)
        return np.asarray(g.tensor(name), dtype=np.float32).T

    t = {"tok_emb": np.asarray(g.tensor("token_embd.weight"), dtype=np.float32)}
    for i in range(n_layers):
        src, dst = f"blk.{i}", f"layers.{i}"
        for ours, theirs in (
            ("wq", "attn_q"),
            ("wk", "attn_k"),
            ("wv", "attn_v"),
            ("wo", "attn_output"),
        ):
            t[f"{dst}.attn.{ours}"] = mat(f"{src}.{theirs}.weight")
        for ours, theirs in (("w1", "ffn_gate"), ("w2", "ffn_down"), ("w3", "ffn_up")):
            t[f"{dst}.ffn.{ours}"] = mat(f"{src}.{theirs}.weight")
        t[f"{dst}.norm1.weight"] = np.asarray(g.tensor(f"{src}.attn_norm.weight"), np.float32)
        t[f"{dst}.norm2.weight"] = np.asarray(g.tensor(f"{src}.ffn_norm.weight"), np.float32)
    t["norm_f.weight"] = np.asarray(g.tensor("output_norm.weight"), np.float32)
    tied = "output.weight" not in g.tensor_infos or np.array_equal(
        g.tensor("output.weight"), g.tensor("token_embd.weight")
    )
    if not tied:
        t["head.weight"] = mat("output.weight")
    n_heads = int(m["llama.attention.head_count"])
    config = {
        "arch": "decoder",
        "n_vocab": int(t["tok_emb"].shape[0]),
        "d_model": d,
        "n_heads": n_heads,
        "n_kv_heads": int(m.get("llama.attention.head_count_kv", n_heads)),
        "n_layers": n_layers,
        "d_ff": int(m["llama.feed_forward_length"]),
        "max_len": int(m["llama.context_length"]),
        "norm": "rmsnorm",
        "norm_eps": float(m["llama.attention.layer_norm_rms_epsilon"]),
        "ffn": "swiglu",
        "positions": "rotary",
        "rotary_layout": "interleaved",
        "rotary_base": float(m.get("llama.rope.freq_base", 10000.0)),
        "tied_head": bool(tied),
    }
    tokenizer = {
        "type": "llama2c",
        "tokens": list(m["tokenizer.ggml.tokens"]),
        "scores": [float(s) for s in m["tokenizer.ggml.scores"]],
        "bos_id": int(m["tokenizer.ggml.bos_token_id"]),
        "eos_id": int(m["tokenizer.ggml.eos_token_id"]),
    }
    return config, tokenizer, {k: (a, "float32") for k, a in t.items()}


def translator(folder):
    """The English-French Transformer (pre-LN encoder-decoder, tied embeddings) and its BPE."""
    folder = Path(folder)
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf8"))
    entry = manifest["models"]["transformer"]
    with np.load(folder / entry["file"], allow_pickle=False) as f:
        cfg = json.loads(str(f["config"]))
        a = {k: f[k] for k in f.files if k != "config"}
    t = {"tok_emb": a["emb.E"]}

    def attention(src, dst):
        for x in "QKVO":
            t[f"{dst}.w{x.lower()}"] = a[f"{src}.W_{x}"]
            t[f"{dst}.b{x.lower()}"] = a[f"{src}.b_{x}"]

    def norm(src, dst):
        t[f"{dst}.weight"], t[f"{dst}.bias"] = a[f"{src}.gamma"], a[f"{src}.beta"]

    def ffn(src, dst):
        for n in (1, 2):
            t[f"{dst}.w{n}"], t[f"{dst}.b{n}"] = a[f"{src}.fc{n}.W"], a[f"{src}.fc{n}.b"]

    for i in range(cfg["n_layers"]):
        attention(f"encoder.{i}.self_attn", f"enc.{i}.self")
        norm(f"encoder.{i}.ln1", f"enc.{i}.norm1")
        norm(f"encoder.{i}.ln2", f"enc.{i}.norm2")
        ffn(f"encoder.{i}.ffn", f"enc.{i}.ffn")
        attention(f"decoder.{i}.self_attn", f"dec.{i}.self")
        attention(f"decoder.{i}.cross_attn", f"dec.{i}.cross")
        for n in (1, 2, 3):
            norm(f"decoder.{i}.ln{n}", f"dec.{i}.norm{n}")
        ffn(f"decoder.{i}.ffn", f"dec.{i}.ffn")
    norm("enc_ln", "enc_norm")
    norm("dec_ln", "dec_norm")
    tok_path = ROOT / "data" / "tatoeba" / "bpe.json"
    if sha256(tok_path.read_bytes()) != entry["tokenizer_sha256"]:
        raise ValueError(f"{tok_path} is not the tokenizer the translator was trained with")
    config = {
        "arch": "encoder-decoder",
        "n_vocab": cfg["n_vocab"],
        "d_model": cfg["d_model"],
        "n_heads": cfg["n_heads"],
        "d_ff": cfg["d_ff"],
        "n_enc_layers": cfg["n_layers"],
        "n_dec_layers": cfg["n_layers"],
        "max_len": cfg["max_len"],
        "norm_eps": 1e-5,
        "norm_position": "pre",
        "emb_scale": float(np.sqrt(cfg["d_model"])),
        "positions": "sinusoidal",
        "activation": "gelu",
        "tied_head": True,
        "pad_id": 0,
        "bos_id": 1,
        "eos_id": 2,
        "max_source_tokens": 48,
    }
    tokenizer = {"type": "bpe", "json": json.loads(tok_path.read_text(encoding="utf8"))}
    return config, tokenizer, {k: (np.asarray(v), "float16") for k, v in t.items()}


def shakespeare_window(path):
    """Chapter 19's rotary character model (``attention_lib.train.long_context``), float32,
    for the window widget: the library's own loader reads it, so the names are the layers' own."""
    sys.path.insert(0, str(ROOT))
    from attention_lib.train.long_context import load_checkpoint

    model, cfg = load_checkpoint(path)
    if model.positions not in ("rotary", None):
        raise ValueError(f"{path}: the window widget needs rotary or no positions")
    t = {"tok_emb": model.tok.params["E"]}
    for i, block in enumerate(model.blocks):
        dst, a = f"layers.{i}", block.attn.params
        for n in "qkvo":
            t[f"{dst}.attn.w{n}"], t[f"{dst}.attn.b{n}"] = a[f"W_{n.upper()}"], a[f"b_{n.upper()}"]
        for n, ln in ((1, block.ln1), (2, block.ln2)):
            t[f"{dst}.norm{n}.weight"], t[f"{dst}.norm{n}.bias"] = (
                ln.params["gamma"],
                ln.params["beta"],
            )
        for n, fc in ((1, block.ffn.fc1), (2, block.ffn.fc2)):
            t[f"{dst}.ffn.w{n}"], t[f"{dst}.ffn.b{n}"] = fc.params["W"], fc.params["b"]
    t["norm_f.weight"], t["norm_f.bias"] = model.ln_f.params["gamma"], model.ln_f.params["beta"]
    t["head.weight"], t["head.bias"] = model.head.params["W"], model.head.params["b"]
    d = cfg["d_model"]
    config = {
        "arch": "decoder",
        "n_vocab": cfg["n_vocab"],
        "d_model": d,
        "n_heads": cfg["n_heads"],
        "n_kv_heads": cfg["n_heads"],
        "n_layers": cfg["n_layers"],
        "d_ff": cfg["d_ff"],
        "max_len": cfg["context"],
        "norm": "layernorm",
        "norm_eps": 1e-5,
        "ffn": "gelu",
        "positions": model.positions,
        "rotary_layout": "interleaved",
        "tied_head": False,
    }
    tokenizer = {"type": "chars", "chars": cfg["chars"]}
    return config, tokenizer, {k: (np.asarray(a), "float32") for k, a in t.items()}


EXPORTERS = {
    "shakespeare": shakespeare,
    "stories260k": stories260k,
    "translator": translator,
    "shakespeare_window": shakespeare_window,
}

# ---------------------------------------------------------------------------
# Quantized exports: what the site serves (book/_static/models/quantized/)
# ---------------------------------------------------------------------------

#: The schemes a model may be served in, smallest first (attention_lib.quantize.SCHEMES).
SERVED_SCHEMES = ("q4_0", "q8_0")
#: A scheme serves a model when its held-out loss (measure_serving's "quant" part) is at
#: most this much above the float model's, relative.
MAX_LOSS_RISE = 0.01
#: Embedding tables: quantized along their rows (one row per token), as quantize_model does;
#: every other matrix (n_in, n_out) along n_in, stored transposed (one row per output unit).
EMBEDDINGS = ("tok_emb", "pos_emb")
QUANTIZED_DIR = "quantized"
#: The models the site serves quantized (their held-out losses per scheme are in
#: measure_serving's "quant" part). Chapter 19's window model is served as it is
#: (434 KB of float32): its runtime (window.mjs) is checked against the library's
#: float model, token for token (tests/js/window.test.mjs).
QUANTIZED_MODELS = ("shakespeare", "stories260k", "translator")


def served_scheme(name, measurements=None):
    """``(scheme, evidence)``: the smallest of :data:`SERVED_SCHEMES` whose loss holds."""
    if measurements is None:
        path = ROOT / "data" / "checkpoints" / "serving" / "measurements.json"
        measurements = json.loads(path.read_text(encoding="utf8"))
    rows = measurements["quant"][name]["rows"]
    base = rows["float32"]["loss"]
    for scheme in SERVED_SCHEMES:
        rise = rows[scheme]["loss"] / base - 1
        if rise <= MAX_LOSS_RISE:
            keep = ("loss", "kl", "top1", "bleu", "chrf")
            return scheme, {
                "rule": f"the smallest of {', '.join(SERVED_SCHEMES)} whose held-out loss is "
                f"at most {MAX_LOSS_RISE:.0%} above the float model's",
                "float32": {k: v for k, v in rows["float32"].items() if k in keep},
                scheme: {k: v for k, v in rows[scheme].items() if k in keep},
                "measured_by": "python -m attention_lib.train.measure_serving --part quant",
            }
    raise ValueError(f"{name}: no scheme of {SERVED_SCHEMES} keeps the loss within {MAX_LOSS_RISE}")


def quantize_tensor(name, array, scheme):
    """``(raw bytes, entry fields, float32 weights read back)`` of one runtime matrix.

    The codes and scales are :func:`attention_lib.quantize.quantize`'s; the bytes
    are GGUF's blocks (book/_static/runtime/quant.mjs reads them).
    """
    from attention_lib.quantize import SCHEMES, dequantize, quantize

    bits, group = SCHEMES[scheme]
    transposed = name not in EMBEDDINGS
    rows = np.asarray(array, np.float32)
    rows = rows.T if transposed else rows
    dtype = scheme
    if rows.shape[1] % group:  # the library's fallback: 8 bits, one group per row
        bits, group, dtype = 8, rows.shape[1], "q8_0"
    qt = quantize(rows, bits, group)
    R, C = rows.shape
    codes = qt.q.reshape(R, C // group, group)
    if bits == 4:  # byte j: number j (low nibble) and number j + 16 (high nibble)
        codes = codes[..., : group // 2] | (codes[..., group // 2 :] << 4)
    scales = np.ascontiguousarray(qt.scales, "<f2").view(np.uint8).reshape(R, C // group, 2)
    raw = np.concatenate([scales, codes.astype(np.uint8)], axis=-1).tobytes()
    back = dequantize(qt)
    back = np.ascontiguousarray(back.T if transposed else back, dtype="<f4")
    fields = {"dtype": dtype, "group": int(group), "transposed": transposed}
    return raw, fields, back


def pack_quantized(tensors, scheme):
    """Like :func:`pack`, every matrix in ``scheme`` (vectors as they were); also the weights read back."""
    chunks, entries, back, offset = [], {}, {}, 0
    for name, (array, dtype) in tensors.items():
        a = np.asarray(array)
        if a.ndim == 2:
            raw, fields, back[name] = quantize_tensor(name, a, scheme)
            fields["dequantized_sha256"] = sha256(back[name].tobytes())
        else:
            a = np.ascontiguousarray(a, dtype=np.dtype(dtype).newbyteorder("<"))
            raw, fields, back[name] = a.tobytes(), {"dtype": dtype}, a.astype(np.float32)
        entries[name] = {"shape": list(a.shape), **fields, "offset": offset}
        pad = (-len(raw)) % 4
        chunks.append(raw + b"\0" * pad)
        offset += len(raw) + pad
    return b"".join(chunks), entries, back


def _manifest(name, path, config, tokenizer, blob, entries, **extra):
    """A model file's manifest: its weights' size and sha256, ``extra`` (the served copy's
    quantization), the checkpoint it came from, and where each tensor lies in ``blob``."""
    source = path if path.is_file() else path / "manifest.json"
    return {
        "format": FORMAT,
        "name": name,
        "config": config,
        "tokenizer": tokenizer,
        "bytes": len(blob),
        "sha256": sha256(blob),
        **extra,
        "source": {
            "file": source.relative_to(ROOT).as_posix()
            if source.is_relative_to(ROOT)
            else source.name,
            "sha256": sha256(source.read_bytes()),
        },
        "tensors": entries,
    }


def export_quantized(name, path, out=OUT, measurements=None):
    """Write the served ``quantized/<name>.json`` and ``.bin``; return the manifest."""
    path = Path(path)
    scheme, evidence = served_scheme(name, measurements)
    config, tokenizer, tensors = runtime_tensors(name, path)
    float_bytes = len(pack(tensors)[0])
    blob, entries, _ = pack_quantized(tensors, scheme)
    manifest = _manifest(
        name,
        path,
        config,
        tokenizer,
        blob,
        entries,
        quantization={
            "scheme": scheme,
            "bytes_before": float_bytes,
            "bytes_after": len(blob),
            "made_by": f"python scripts/export_models.py --only {name}",
            **evidence,
        },
    )
    _write(Path(out) / QUANTIZED_DIR, name, blob, manifest)
    return manifest


def _write(out, name, blob, manifest):
    out.mkdir(parents=True, exist_ok=True)
    text = json.dumps(manifest, separators=(",", ":"), ensure_ascii=False) + "\n"
    for suffix, data in ((".bin", blob), (".json", text.encode("utf8"))):
        tmp = out / f"{name}{suffix}.tmp"
        tmp.write_bytes(data)
        os.replace(tmp, out / f"{name}{suffix}")


def runtime_tensors(name, path):
    """``(config, tokenizer, {runtime name: (array, dtype)})`` of one model's checkpoint."""
    return EXPORTERS[name](path)


# ---------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------


def pack(tensors):
    """The .bin bytes and each tensor's entry: little-endian, 4-byte aligned, in name order."""
    chunks, entries, offset = [], {}, 0
    for name, (array, dtype) in tensors.items():
        a = np.ascontiguousarray(array, dtype=np.dtype(dtype).newbyteorder("<"))
        if not np.isfinite(a).all():
            raise ValueError(f"tensor {name} holds NaN or infinity")
        raw = a.tobytes()
        entries[name] = {"shape": list(a.shape), "dtype": dtype, "offset": offset}
        pad = (-len(raw)) % 4
        chunks.append(raw + b"\0" * pad)
        offset += len(raw) + pad
    return b"".join(chunks), entries


def export(name, path, out=OUT):
    """Write ``<name>.json`` and ``<name>.bin`` into ``out``; return the manifest."""
    path = Path(path)
    config, tokenizer, tensors = runtime_tensors(name, path)
    blob, entries = pack(tensors)
    if len(blob) > MAX_BYTES:
        raise ValueError(f"{name}: {len(blob)} bytes of weights, over the {MAX_BYTES} allowed")
    manifest = _manifest(name, path, config, tokenizer, blob, entries)
    _write(Path(out), name, blob, manifest)
    return manifest


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only",
        choices=sorted(EXPORTERS),
        action="append",
        help="export only this model (repeatable)",
    )
    parser.add_argument("--out", default=str(OUT), help="output folder")
    for name in EXPORTERS:
        parser.add_argument(f"--{name}", metavar="PATH", help=f"{name}'s checkpoint")
    args = parser.parse_args(argv)
    paths = source_paths()
    for name in args.only or sorted(EXPORTERS):
        path = Path(getattr(args, name) or paths[name])
        if not path.exists():
            print(f"{name}: no checkpoint at {path}, skipped", file=sys.stderr)
            continue
        m = export(name, path, Path(args.out))
        print(f"{name}: {len(m['tensors'])} tensors, {m['bytes']:,} bytes -> {args.out}/{name}.bin")
        if name not in QUANTIZED_MODELS:
            continue
        q = export_quantized(name, path, Path(args.out))
        print(
            f"{name}: served as {q['quantization']['scheme']}, {q['bytes']:,} bytes "
            f"-> {args.out}/{QUANTIZED_DIR}/{name}.bin"
        )


if __name__ == "__main__":
    main()
