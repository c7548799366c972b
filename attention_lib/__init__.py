"""attention_lib: attention from first principles, in NumPy.

The library behind the book *Attention from Scratch*. Each module holds the
mathematics of one idea, written in the book's notation:

- :mod:`attention_lib.softmax`: the numerically stable softmax.
- :mod:`attention_lib.masks`: causal and padding masks.
- :mod:`attention_lib.additive`: Bahdanau (additive) attention.
- :mod:`attention_lib.dot_product`: scaled dot-product (QKV) attention.
"""

from .additive import additive_attention, additive_scores
from .dot_product import scaled_dot_product_attention
from .masks import causal_mask, padding_mask
from .softmax import softmax

__version__ = "1.0.0"

__all__ = [
    "additive_attention",
    "additive_scores",
    "causal_mask",
    "padding_mask",
    "scaled_dot_product_attention",
    "softmax",
]
