"""attention_lib: attention from first principles, in NumPy.

The library behind the book *Attention from Scratch*. Each module holds the
mathematics of one idea, written in the book's notation:

- :mod:`attention_lib.softmax`: the numerically stable softmax, log-softmax and log-sum-exp.
- :mod:`attention_lib.masks`: causal and padding masks.
- :mod:`attention_lib.presentation`: charts that recompute attention in the
  reader's browser (Altair, imported only when a chart is built).
- :mod:`attention_lib.additive`: Bahdanau (additive) attention.
- :mod:`attention_lib.bottleneck`: the information-bottleneck experiment (chapter 1).
- :mod:`attention_lib.toy_translation`: a toy English-to-French grammar with gold
  word alignments (chapter 3's task).
- :mod:`attention_lib.dot_product`: scaled dot-product (QKV) attention.
- :mod:`attention_lib.multi_head`: learned projections and multi-head attention.
- :mod:`attention_lib.positions`: word order (sinusoidal, rotary, ALiBi).
- :mod:`attention_lib.blockwise`: the same attention in bounded memory (online softmax).
- :mod:`attention_lib.backward`: the gradients of attention, by hand (plain and blockwise).
- :mod:`attention_lib.nn`: layers with their backward passes, losses and Adam.
- :mod:`attention_lib.models`: whole models assembled from those layers (chapter 3's
  RNNencdec and RNNsearch, their training script and evaluation; chapter 10's TinyGPT;
  chapter 13's Llama, read from a GGUF file).
- :mod:`attention_lib.data`: file formats and tokenizers (the GGUF reader, Llama's
  SentencePiece tokenizer).
- :mod:`attention_lib.toy_translation`: chapter 3's toy English-French grammar, with
  the gold word alignment of every pair.
- :mod:`attention_lib.presentation.tables`: plain-text tables for printed results.
- ``glue``: numbers for the prose (myst-nb's ``glue`` when it is installed, else
  the value is displayed), so a downloaded chapter runs in a plain Jupyter.
- :mod:`attention_lib.embeddings`: aligned English/French word vectors from ``data/``.
- :mod:`attention_lib.align`: word alignment from attention weights, IBM Model 1
  trained by EM, how to score them, and the command line.
- :mod:`attention_lib.sampling`: the distribution a language model samples from
  (temperature, top-k, top-p) and its entropy (chapter 12).
- :mod:`attention_lib.generate`: ``python -m attention_lib.generate``, text from the
  book's trained models (``attention_lib.models.load_pretrained``).
"""

from .additive import additive_attention, additive_scores
from .backward import (blockwise_attention_backward,
                       scaled_dot_product_attention_backward)
from .bottleneck import BottleneckResult, bottleneck_experiment
from .blockwise import blockwise_attention, online_softmax_step
from .dot_product import scaled_dot_product_attention
from .data.embeddings import Tokens, embed, load_embeddings, load_vocab, tokenize
from .data.paths import DataFileError, data_dir
from .masks import causal_mask, padding_mask
from .models import RNNencdec, RNNsearch, TinyGPT
from .multi_head import MultiHeadAttention
from .positions import alibi_bias, alibi_slopes, rotary, sinusoidal_positions
from .presentation import format_table, glue, print_table, widget_html
from .softmax import log_softmax, logsumexp, softmax, softmax_backward
from .data.toy_translation import Pair, generate_pairs

__version__ = "1.0.0"

__all__ = [
    "additive_attention",
    "additive_scores",
    "alibi_bias",
    "alibi_slopes",
    "bottleneck_experiment",
    "BottleneckResult",
    "blockwise_attention",
    "blockwise_attention_backward",
    "causal_mask",
    "DataFileError",
    "data_dir",
    "embed",
    "format_table",
    "generate_pairs",
    "glue",
    "load_embeddings",
    "load_vocab",
    "log_softmax",
    "logsumexp",
    "MultiHeadAttention",
    "RNNencdec",
    "RNNsearch",
    "TinyGPT",
    "online_softmax_step",
    "padding_mask",
    "Pair",
    "print_table",
    "rotary",
    "scaled_dot_product_attention",
    "scaled_dot_product_attention_backward",
    "sinusoidal_positions",
    "softmax",
    "softmax_backward",
    "widget_html",
    "tokenize",
    "Tokens",
]
