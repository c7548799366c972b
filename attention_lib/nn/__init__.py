"""The few pieces a tiny attention model needs, each with its backward pass.

Every layer works the same way, and there is nothing else to learn:

- ``params``: a dict of the arrays it learns;
- ``forward(...)``: computes the output and keeps what the backward needs;
- ``backward(grad)``: takes ``d loss / d output``, stores
  ``d loss / d param`` in ``grads`` (same keys as ``params``) and returns the
  gradient with respect to its input(s).

No autograd, no graph: a model calls the forwards in order and the backwards
in reverse order, and every gradient is a line of NumPy a reader can check.
:class:`Adam` then updates the parameters of a list of layers.

Vectors are rows, as everywhere in the book: a linear layer maps ``x`` to
``x @ W + b``, with any number of leading batch axes.

The package holds one idea per module:

- :mod:`attention_lib.nn.layers`: ``Linear`` and ``Embedding``;
- :mod:`attention_lib.nn.multi_head_attention`: the attention layer every
  model uses (multi-head, grouped-query, cross-attention, rotary, a KV cache
  for generation), and its chapter names ``SelfAttention`` and ``Attention``;
- :mod:`attention_lib.nn.latent_attention`: attention with a smaller KV cache
  (grouped-query as a block's layer; DeepSeek-V2's multi-head latent attention);
- :mod:`attention_lib.nn.norm`: LayerNorm and RMSNorm;
- :mod:`attention_lib.nn.activations`: GELU and SiLU;
- :mod:`attention_lib.nn.dropout`: dropout;
- :mod:`attention_lib.nn.block`: the feed-forward layer and the Transformer block;
- :mod:`attention_lib.nn.swiglu`: Llama's gated feed-forward layer, SwiGLU;
- :mod:`attention_lib.nn.recurrent`: the GRU (PyTorch's equations), stepped or over a sequence;
- :mod:`attention_lib.nn.additive`: learned additive (Bahdanau) attention, one decoder step at a time;
- :mod:`attention_lib.nn.utils`: ``clip_grad_norm``;
- :mod:`attention_lib.nn.losses`: softmax cross-entropy and the contrastive loss
  with in-batch negatives;
- :mod:`attention_lib.nn.lora`: LoRA, low-rank adapters on frozen weights;
- :mod:`attention_lib.nn.optim`: Adam.

Imports flow one way: the functional maths (``softmax``, ``masks``,
``dot_product``, ``backward``, ...) <- these layers <- the models in
:mod:`attention_lib.models` <- the chapters.
"""

from .._lazy import lazy_names

# Imported on first use (see :mod:`attention_lib._lazy`).
__getattr__, __dir__ = lazy_names(
    __name__,
    {
        "activations": ("GELU", "SiLU"),
        "additive": ("AdditiveAttention",),
        "block": ("FeedForward", "TransformerBlock"),
        "dropout": ("Dropout",),
        "layers": ("Embedding", "Linear"),
        "lora": ("LoRALinear",),
        "losses": ("multiple_negatives_ranking_loss", "softmax_cross_entropy"),
        "multi_head_attention": (
            "Attention",
            "KVCache",
            "MultiHeadAttention",
            "RollingKVCache",
            "SelfAttention",
        ),
        "norm": ("LayerNorm", "RMSNorm"),
        "optim": ("Adam",),
        "recurrent": ("GRU", "GRUCell"),
        "swiglu": ("SwiGLU",),
        "utils": ("clip_grad_norm",),
    },
)

__all__ = [
    "GELU",
    "GRU",
    "Adam",
    "AdditiveAttention",
    "Attention",
    "Dropout",
    "Embedding",
    "FeedForward",
    "GRUCell",
    "KVCache",
    "RollingKVCache",
    "LayerNorm",
    "Linear",
    "LoRALinear",
    "MultiHeadAttention",
    "RMSNorm",
    "SelfAttention",
    "SiLU",
    "SwiGLU",
    "TransformerBlock",
    "clip_grad_norm",
    "multiple_negatives_ranking_loss",
    "softmax_cross_entropy",
]
