"""The SmolLM2 chat widget's placeholder (attention_lib.widget_html("smollm2")) and its export.

The page's part: the placeholder names the widget kind the runtime mounts
(``widget-smollm2.mjs``), carries the static figure shown without JavaScript, and, once
``scripts/export_smollm2.py`` has cut the GGUF in chunks, the download's size (shown on the
button before anything loads). The export: chunks of at most 25 MB whose SHA-256 sums are in
the manifest, joined equal to the pinned file; another file is refused.
"""

import hashlib
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_widget_html_carries_the_chat_widget_and_its_static_figure():
    from attention_lib import widget_html

    page = widget_html("smollm2").data
    assert 'data-model="smollm2"' in page and 'data-kind="smollm2"' in page
    assert "<svg" in page and "The capital of France is Paris." in page
    assert "runtime/widgets.mjs" in page
    assert "http" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_export_cuts_the_file_in_checked_chunks(tmp_path, monkeypatch):
    sys.path.insert(0, str(ROOT / "scripts"))
    import export_smollm2

    data = bytes(range(256)) * 1000  # a stand-in file of 256,000 bytes
    src = tmp_path / "model.gguf"
    src.write_bytes(data)
    monkeypatch.setattr(export_smollm2.smollm2, "GGUF_SHA256", hashlib.sha256(data).hexdigest())
    out = tmp_path / "out"
    m = export_smollm2.export(src, out, chunk=100_000)
    assert [c["bytes"] for c in m["chunks"]] == [100_000, 100_000, 56_000]
    joined = b"".join((out / c["name"]).read_bytes() for c in m["chunks"])
    assert joined == data and m["bytes"] == len(data)
    for c in m["chunks"]:
        assert hashlib.sha256((out / c["name"]).read_bytes()).hexdigest() == c["sha256"]
    assert json.loads((out / "smollm2.json").read_text()) == m
    # the widget's size: the file and its manifest, once exported
    assert export_smollm2.CHUNK <= 25_000_000
    other = tmp_path / "other.gguf"
    other.write_bytes(data[:-1])
    with pytest.raises(SystemExit, match="other.gguf: its SHA-256 is [0-9a-f]{12}..., not "):
        export_smollm2.export(other, tmp_path / "out2")
    assert not (tmp_path / "out2").exists()
