"""Write data/minilm/st_reference.npz: sentence-transformers' embeddings of fixed sentences.

Chapter 14 compares the book's NumPy all-MiniLM-L6-v2 with sentence-transformers (PyTorch)
on the page, where sentence-transformers and torch are not installed (Binder installs
requirements.txt only). This script runs sentence-transformers once, on the model files of
the pinned wheel (unpacked to a temporary folder; no network), and stores the sentences and
their embeddings; tests/test_minilm.py checks that the stored embeddings still equal what
sentence-transformers computes now, so the file cannot go stale.

    python scripts/make_minilm_reference.py          # needs requirements-test.txt

Writes ``st_reference.npz`` (``sentences``: unicode strings, ``embeddings``: float32
(N, 384), no pickles) and ``manifest.json`` (SHA-256, versions, wall time) in
``data/minilm/``, and the npz's entry in ``data/MANIFEST.json``.
"""

import argparse
import hashlib
import json
import os
import platform
import sys
import tempfile
import time
import zipfile
from importlib import metadata
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attention_lib.data.tatoeba import load_pairs  # noqa: E402
from attention_lib.models import minilm  # noqa: E402

OUT = ROOT / "data" / "minilm"
#: Sentences beyond Tatoeba's: accents, CJK, an emoji, and one long enough to be truncated.
EXTRA = [
    "Café, naïve résumé: déjà vu!",
    "東京 is Tokyo, 北京 is Beijing.",
    "Emoji 🙂 and symbols ™ © ½ are rare.",
    "one two three " * 100,
]


def sentences(n=256):
    """The first ``n`` distinct English sentences of Tatoeba's test split, then :data:`EXTRA`."""
    seen = dict.fromkeys(en for en, _ in load_pairs("test"))
    return list(seen)[:n] + EXTRA


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.parse_args(argv)
    os.environ["HF_HUB_OFFLINE"] = "1"
    import torch
    from sentence_transformers import SentenceTransformer

    torch.manual_seed(0)
    torch.set_num_threads(1)
    texts = sentences()
    started = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(minilm.wheel_path()) as z:
            z.extractall(tmp)
        model = SentenceTransformer(tmp, device="cpu")
        emb = model.encode(
            texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True
        ).astype(np.float32)
    seconds = time.time() - started
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / "st_reference.npz"
    np.savez_compressed(path, sentences=np.array(texts, dtype=str), embeddings=emb)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    manifest = {
        "file": path.name,
        "sha256": digest,
        "bytes": path.stat().st_size,
        "made_by": "scripts/make_minilm_reference.py",
        "what": "sentence-transformers' normalised embeddings of all-MiniLM-L6-v2 "
        "for the first 256 distinct English sentences of data/tatoeba/test.tsv "
        "and 4 more (accents, CJK, emoji, one truncated at 256 word pieces)",
        "model": {
            "wheel": f"{minilm.WHEEL}=={minilm.WHEEL_VERSION}",
            "upstream": minilm.UPSTREAM,
            "revision": minilm.UPSTREAM_REVISION,
            "model.safetensors sha256": minilm.SHA256["model.safetensors"],
        },
        "settings": {"batch_size": 32, "normalize_embeddings": True, "torch_threads": 1},
        "versions": {
            name: metadata.version(name)
            for name in ("sentence-transformers", "transformers", "torch", "tokenizers")
        },
        "python": platform.python_version(),
        "wall_time_s": round(seconds, 1),
    }
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    top = ROOT / "data" / "MANIFEST.json"
    m = json.loads(top.read_text())
    m["files"]["minilm/st_reference.npz"] = {"sha256": digest, "bytes": path.stat().st_size}
    top.write_text(json.dumps(m, indent=2, ensure_ascii=False) + "\n")
    print(
        f"wrote {path} ({path.stat().st_size:,} bytes, {len(texts)} sentences) in {seconds:.1f} s"
    )


if __name__ == "__main__":
    main()
