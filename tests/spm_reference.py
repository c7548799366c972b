"""The ``sentencepiece`` library on stories260K's vocabulary, as an independent tokenizer.

llama2.c's ``tok512.model`` (the SentencePiece model the GGUF file's vocabulary came
from) is not in the repository, so this rebuilds an equivalent model from the GGUF
file's pieces, scores and types: a BPE model with byte fallback, the identity
normaliser, a dummy prefix and whitespace kept as is, which are the settings of
llama2.c's ``tinystories.py train_vocab``. Needs ``sentencepiece`` and ``protobuf``
(not in the project's requirements: tests that use this skip without them).
"""

import pytest

from attention_lib import data_dir
from attention_lib.data.gguf import read_gguf

spm = pytest.importorskip("sentencepiece")
model_pb2 = pytest.importorskip("sentencepiece.sentencepiece_model_pb2")

GGUF = data_dir() / "stories260k" / "tinyllamas-stories-260k-f32.gguf"


def processor():
    """A ``SentencePieceProcessor`` holding stories260K's vocabulary."""
    m = read_gguf(GGUF).metadata
    proto = model_pb2.ModelProto()
    for piece, score, kind in zip(
        m["tokenizer.ggml.tokens"],
        m["tokenizer.ggml.scores"],
        m["tokenizer.ggml.token_type"],
        strict=True,
    ):
        p = proto.pieces.add()
        p.piece, p.score, p.type = piece, float(score), int(kind)
    t = proto.trainer_spec
    t.model_type = model_pb2.TrainerSpec.BPE
    t.vocab_size = len(proto.pieces)
    t.byte_fallback = True
    t.unk_id, t.bos_id, t.eos_id, t.pad_id = 0, 1, 2, -1
    n = proto.normalizer_spec
    n.name = "identity"
    n.add_dummy_prefix = True
    n.remove_extra_whitespaces = False
    n.escape_whitespaces = True
    sp = spm.SentencePieceProcessor()
    sp.LoadFromSerializedProto(proto.SerializeToString())
    return sp


GOLDEN_TEXTS = [
    "Once upon a time",
    "Hello  world",
    " lead space",
    "trailing space ",
    "naïve café 😀 日本",
    "x\n\ny\t",
    "Lily's mom said, \"Lily, let's go to the park.\"",
    "1234567890 + 42 = 3.14159",
    "ÀÉÎÕÜ ß ø ł ŋ",
    "\u2581already a visible space",
    "<s> is not a control piece in text </s>",
    "   ",
    "a",
]


def write_golden(path):
    """Write ``{"texts": [...], "ids": [[...], ...]}`` from sentencepiece (no BOS)."""
    import json

    doc = (GGUF.parent / "llama2c_doc_stories260K.md").read_text(encoding="utf8")
    texts = [*GOLDEN_TEXTS, doc]
    sp = processor()
    golden = {
        "source": f"sentencepiece {spm.__version__}, tests/spm_reference.py",
        "texts": texts,
        "ids": [sp.encode(t) for t in texts],
    }
    path.write_text(json.dumps(golden, ensure_ascii=False) + "\n", encoding="utf8")


if __name__ == "__main__":  # python tests/spm_reference.py (with sentencepiece, protobuf)
    from pathlib import Path

    write_golden(Path(__file__).with_name("llama_tokenizer_golden.json"))
