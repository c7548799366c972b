"""Write stories260K (``data/stories260k/``'s GGUF) in llama2.c's checkpoint and tokenizer formats.

``bench_generation.py`` times llama2.c's ``run.c`` on the same weights as the
library. llama2.c reads two files (see ``read_checkpoint`` and
``build_tokenizer`` in its ``run.c``):

- the checkpoint (its "legacy" version 0): a header of seven int32 (``dim,
  hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len``; a positive
  ``vocab_size`` means the output layer is the token embedding), then float32
  arrays in PyTorch's ``(out, in)`` layout: the token embedding, every
  layer's attention RMSNorm weights, ``wq``, ``wk``, ``wv``, ``wo``, the
  feed-forward RMSNorm weights, ``w1``, ``w2``, ``w3`` (each stacked over the
  layers), the final RMSNorm, and ``seq_len * head_size`` unused floats (the
  old rotary tables);
- the tokenizer: an int32 ``max_token_length``, then per token a float32
  score, an int32 byte length and the UTF-8 bytes, with SentencePiece's
  ``"▁"`` written as a space and ``<s>``, ``</s>`` as ``"\\n<s>\\n"``,
  ``"\\n</s>\\n"`` (as llama2.c's ``tokenizer.py`` exports them).

The GGUF file keeps PyTorch's layout and Meta's rotary pairs ``(2i, 2i+1)``,
which ``run.c`` uses too, so the tensors are copied as they are.

Usage::

    python benchmarks/llama2c_convert.py OUT_DIR     # writes OUT_DIR/stories260K.bin, tok512.bin
"""

import argparse
import struct
from pathlib import Path

import numpy as np

from attention_lib.data.gguf import read_gguf
from attention_lib.data.paths import verified_path
from attention_lib.models.llama import STORIES260K


def convert(gguf_path, out_dir):
    """Write ``stories260K.bin`` and ``tok512.bin`` into ``out_dir``; return their paths."""
    f = read_gguf(gguf_path)
    m = f.metadata
    L = m["llama.block_count"]
    emb = f.tensor("token_embd.weight")
    V, dim = emb.shape
    n_heads = m["llama.attention.head_count"]
    n_kv = m.get("llama.attention.head_count_kv", n_heads)
    hidden = m["llama.feed_forward_length"]
    seq_len = m["llama.context_length"]
    shared = "output.weight" not in f.tensor_infos or np.array_equal(f.tensor("output.weight"), emb)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model_path, tok_path = out_dir / "stories260K.bin", out_dir / "tok512.bin"

    def stacked(name):
        return np.stack([f.tensor(name.format(i=i)) for i in range(L)])

    arrays = [
        emb,
        stacked("blk.{i}.attn_norm.weight"),
        stacked("blk.{i}.attn_q.weight"),
        stacked("blk.{i}.attn_k.weight"),
        stacked("blk.{i}.attn_v.weight"),
        stacked("blk.{i}.attn_output.weight"),
        stacked("blk.{i}.ffn_norm.weight"),
        stacked("blk.{i}.ffn_gate.weight"),  # w1
        stacked("blk.{i}.ffn_down.weight"),  # w2
        stacked("blk.{i}.ffn_up.weight"),  # w3
        f.tensor("output_norm.weight"),
        np.zeros(seq_len * (dim // n_heads)),  # the old rotary tables, skipped by run.c
    ]
    if not shared:
        arrays.append(f.tensor("output.weight"))
    with open(model_path, "wb") as out:
        header = (dim, hidden, L, n_heads, n_kv, V if shared else -V, seq_len)
        out.write(struct.pack("7i", *header))
        for a in arrays:
            out.write(np.ascontiguousarray(a, dtype="<f4").tobytes())

    tokens = []
    for i, piece in enumerate(m["tokenizer.ggml.tokens"]):
        if i == m["tokenizer.ggml.bos_token_id"]:
            piece = "\n<s>\n"
        elif i == m["tokenizer.ggml.eos_token_id"]:
            piece = "\n</s>\n"
        tokens.append(piece.replace("\u2581", " ").encode("utf-8"))
    scores = np.asarray(m["tokenizer.ggml.scores"], dtype=np.float32)
    with open(tok_path, "wb") as out:
        out.write(struct.pack("I", max(len(t) for t in tokens)))
        for b, score in zip(tokens, scores):
            out.write(struct.pack("fI", float(score), len(b)))
            out.write(b)
    return model_path, tok_path


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", metavar="OUT_DIR", help="writes stories260K.bin and tok512.bin")
    args = parser.parse_args(argv)
    for p in convert(verified_path(STORIES260K), args.out_dir):
        print(p)


if __name__ == "__main__":
    main()
