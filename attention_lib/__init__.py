"""attention_lib: attention from first principles, in NumPy.

The library behind the book *Attention from Scratch*. Each module holds the
mathematics of one idea, written in the book's notation:

- :mod:`attention_lib.softmax`: the numerically stable softmax.
- :mod:`attention_lib.masks`: causal and padding masks.
- :mod:`attention_lib.interactive`: charts that recompute attention in the
  reader's browser (Altair, imported only when a chart is built).
- :mod:`attention_lib.additive`: Bahdanau (additive) attention.
- :mod:`attention_lib.bottleneck`: the information-bottleneck experiment (chapter 1).
- :mod:`attention_lib.dot_product`: scaled dot-product (QKV) attention.
- :mod:`attention_lib.blockwise`: the same attention in bounded memory (online softmax).
- :mod:`attention_lib.embeddings`: aligned English/French word vectors from ``data/``.
- :mod:`attention_lib.align`: word alignment from attention weights (and its CLI).
"""

from .additive import additive_attention, additive_scores
from .bottleneck import BottleneckResult, bottleneck_experiment
from .blockwise import blockwise_attention, online_softmax_step
from .dot_product import scaled_dot_product_attention
from .embeddings import (DataFileError, Tokens, data_dir, embed, load_embeddings,
                         load_vocab, tokenize)
from .masks import causal_mask, padding_mask
from . import interactive
from .softmax import softmax

__version__ = "1.0.0"

__all__ = [
    "interactive",
    "additive_attention",
    "additive_scores",
    "bottleneck_experiment",
    "BottleneckResult",
    "blockwise_attention",
    "causal_mask",
    "DataFileError",
    "data_dir",
    "embed",
    "load_embeddings",
    "load_vocab",
    "online_softmax_step",
    "padding_mask",
    "scaled_dot_product_attention",
    "softmax",
    "tokenize",
    "Tokens",
]
