"""Whole models assembled from the layers of :mod:`attention_lib.nn`.

Each model follows the layer protocol one level up: ``forward`` computes the
output, ``backward`` the gradients of every parameter, and ``layers()`` lists
every layer that has parameters (each once), the list :class:`~attention_lib.nn.Adam` takes.
"""

from .seq2seq import RNNencdec, RNNsearch

__all__ = ["RNNencdec", "RNNsearch"]
