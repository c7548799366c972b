"""Whole models assembled from the layers of :mod:`attention_lib.nn`.

Each model follows the layer protocol one level up: ``forward`` computes the
output, ``backward`` the gradients of every parameter, and ``layers()`` lists
every layer that has parameters (each once), the list :class:`~attention_lib.nn.Adam` takes.

- :mod:`attention_lib.models.seq2seq`: RNNencdec and RNNsearch, the encoder-decoders
  of chapter 3;
- :mod:`attention_lib.models.gpt`: TinyGPT, the decoder-only Transformer of chapter 10.
"""

from .gpt import TinyGPT
from .seq2seq import RNNencdec, RNNsearch

__all__ = ["RNNencdec", "RNNsearch", "TinyGPT"]
