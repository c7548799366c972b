"""attention_lib: attention from first principles, in NumPy.

The library behind the book *Attention from Scratch*. The folders show its
architecture; imports flow one way, from presentation to models to layers to
the functional maths (data is read by models and presentation):

- functional maths, at the top level, each module one idea in the book's notation:
  :mod:`~attention_lib.softmax` (softmax, log-softmax, log-sum-exp),
  :mod:`~attention_lib.masks` (causal and padding masks),
  :mod:`~attention_lib.additive` (Bahdanau's additive attention),
  :mod:`~attention_lib.dot_product` (scaled dot-product attention),
  :mod:`~attention_lib.positions` (sinusoidal, rotary, ALiBi),
  :mod:`~attention_lib.blockwise` (the online softmax: attention in bounded memory),
  :mod:`~attention_lib.backward` (the gradients of attention, by hand),
  :mod:`~attention_lib.gradcheck` (gradients checked by central differences),
  :mod:`~attention_lib.sampling` (temperature, top-k, top-p), and
  :mod:`~attention_lib.multi_head`, ``MultiHeadAttention`` with PyTorch's API;
- :mod:`attention_lib.nn`: layers with their backward passes, losses and Adam;
- :mod:`attention_lib.models`: whole models (chapter 1's bottleneck experiment,
  chapter 3's RNNencdec and RNNsearch, TinyGPT, the Transformer, Llama), each
  with its ``save``/``load``;
- :mod:`attention_lib.train`: the scripts that train and measure them
  (``python -m attention_lib.train.<name>``), which models never import;
- :mod:`attention_lib.data`: data sets and file formats (the toy grammar, word
  vectors, Tatoeba, GGUF, Llama's tokenizer) and the checksummed ``data/`` folder;
- :mod:`attention_lib.presentation`: static plots, interactive charts, tables,
  widgets and ``glue`` (numbers for the prose, with or without Jupyter Book);
- :mod:`attention_lib.interp`: what heads do, tested causally: hooks on every
  model, head ablation, activation and path patching, the logit lens;
- :mod:`attention_lib.align`: word alignment from attention and by IBM Model 1,
  its scores and command line; ``python -m attention_lib.generate`` and
  ``python -m attention_lib.translate`` run the book's trained models.
"""

# The function softmax shares its name with its module: imported now, so that
# ``attention_lib.softmax`` is the function however the modules get imported.
from ._lazy import lazy_names
from .softmax import log_softmax, logsumexp, softmax, softmax_backward

# Every other name is imported when it is first used (see :mod:`._lazy`).
__getattr__, __dir__ = lazy_names(
    __name__,
    {
        "additive": ("additive_attention", "additive_scores"),
        "backward": ("blockwise_attention_backward", "scaled_dot_product_attention_backward"),
        "blockwise": ("blockwise_attention", "online_softmax_step"),
        "dot_product": ("scaled_dot_product_attention",),
        "masks": ("causal_mask", "padding_mask"),
        "multi_head": ("MultiHeadAttention",),
        "positions": ("alibi_bias", "alibi_slopes", "rotary", "sinusoidal_positions"),
        "data.embeddings": ("Tokens", "embed", "load_embeddings", "load_vocab", "tokenize"),
        "data.paths": ("DataFileError", "data_dir"),
        "data.toy_translation": ("Pair", "generate_pairs"),
        "models": ("RNNencdec", "RNNsearch", "TinyGPT"),
        "models.bottleneck": ("BottleneckResult", "bottleneck_experiment"),
        "presentation": ("format_table", "glue", "print_table", "widget_html"),
    },
    ("align", "data", "interp", "models", "nn", "presentation"),
)

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
