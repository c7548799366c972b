"""Removing attention heads: each head's rows of ``W_O`` zeroed on a copy, inside a ``with`` block.

A head's output reaches the residual stream only through its ``d_head`` rows of
the output projection ``W_O`` (heads side by side: rows ``h d .. (h + 1) d``), so
zeroing those rows removes the head and nothing else; with grouped-query
attention the key/value head it shares stays. :meth:`Llama.ablate
<attention_lib.models.llama.Llama.ablate>` and :meth:`MiniLM.ablate
<attention_lib.models.minilm.MiniLM.ablate>` use :func:`zeroed_heads`.
"""

import contextlib

import numpy as np

from .._checks import as_int


@contextlib.contextmanager
def zeroed_heads(blocks, n_heads: int, d_head: int, heads):
    """Within the ``with`` block, heads ``(layer, head)`` of ``blocks`` give zero.

    Every pair is checked before any weight changes; the original ``W_O``
    arrays are put back on leaving the block, even after an error.

    Examples
    --------
    >>> import numpy as np
    >>> from types import SimpleNamespace
    >>> block = SimpleNamespace(attn=SimpleNamespace(params={"W_O": np.ones((4, 2))}))
    >>> with zeroed_heads([block], n_heads=2, d_head=2, heads=[(0, 1)]):
    ...     block.attn.params["W_O"].sum()
    np.float64(4.0)
    >>> block.attn.params["W_O"].sum()
    np.float64(8.0)
    """
    n_layers = len(blocks)
    pairs = []
    for pair in heads:
        if isinstance(pair, (str, bytes)) or np.ndim(pair) != 1 or len(pair) != 2:
            raise ValueError(f"heads must be (layer, head) pairs, got {pair!r}")
        layer, head = as_int(pair[0], "layer"), as_int(pair[1], "head")
        if layer >= n_layers or head >= n_heads:
            raise ValueError(
                f"(layer, head) = {(layer, head)} is outside this model's "
                f"{n_layers} layers of {n_heads} heads (both counted from 0)"
            )
        pairs.append((layer, head))
    saved = {}
    try:
        for layer, head in pairs:
            p = blocks[layer].attn.params
            if layer not in saved:
                saved[layer] = p["W_O"]
                p["W_O"] = p["W_O"].copy()
            p["W_O"][head * d_head : (head + 1) * d_head] = 0
        yield
    finally:
        for layer, W in saved.items():
            blocks[layer].attn.params["W_O"] = W
