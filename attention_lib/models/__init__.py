"""Whole models assembled from the layers of :mod:`attention_lib.nn`.

Each model follows the layer protocol one level up: ``forward`` computes the
output, ``backward`` the gradients of every parameter, and ``layers()`` lists
every layer that has parameters (each once), the list :class:`~attention_lib.nn.Adam` takes.

- :mod:`attention_lib.models.bottleneck`: chapter 1's fixed-vector and attention models of
  the information bottleneck;
- :mod:`attention_lib.models.seq2seq`: RNNencdec and RNNsearch, the encoder-decoders
  of chapter 3;
- :mod:`attention_lib.models.gpt`: TinyGPT, the decoder-only Transformer of chapter 9;
- :mod:`attention_lib.models.pretrained`: ``load_pretrained(name)``, the book's trained
  language models (chapter 11's Shakespeare, chapter 12's stories260K) and their tokenizers.

A model reads and writes its own checkpoint (``TinyGPT.save`` and ``TinyGPT.load``,
``RNNsearch.load``, ``Transformer.load``), with the checks they share in
:mod:`attention_lib.models.checkpoint`. The scripts that train the models are in
:mod:`attention_lib.train`, which imports the models and is imported by none of them.
"""

from .._lazy import lazy_names

# Imported on first use (see :mod:`attention_lib._lazy`).
__getattr__, __dir__ = lazy_names(
    __name__,
    {
        "gpt": ("TinyGPT",),
        "pretrained": ("CharTokenizer", "load_pretrained"),
        "seq2seq": ("RNNencdec", "RNNsearch"),
    },
)

__all__ = ["CharTokenizer", "RNNencdec", "RNNsearch", "TinyGPT", "load_pretrained"]
