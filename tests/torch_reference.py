"""The same layers written with PyTorch's functions, for the autograd cross-checks.

Each function takes the NumPy layer (to read its weights) and torch tensors,
so a test can compare our hand-written gradients with autograd's.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")  # collected without torch: skipped, not an error
F = torch.nn.functional


def tensors(layer):
    """The layer's parameters as float64 tensors that require grad."""
    return {k: torch.tensor(a, requires_grad=True) for k, a in layer.params.items()}


def rotary(x, start=0, layout="interleaved", base=10000.0):
    """Rotate feature pairs at position p by p * base^(-2i/d): pairs (2i, 2i+1)
    ("interleaved", Meta's Llama), or (i, i + d/2) ("half", Hugging Face's)."""
    T, d = x.shape[-2], x.shape[-1]
    freqs = base ** (-np.arange(0, d, 2) / d)
    angles = torch.tensor(np.arange(start, start + T)[:, None] * freqs, dtype=x.dtype)
    cos, sin = torch.cos(angles), torch.sin(angles)
    if layout == "half":
        a, b = x[..., : d // 2], x[..., d // 2 :]
        return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)


def attention(att, p, x_q, x_kv=None, is_causal=False, attn_mask=None):
    """:class:`attention_lib.nn.MultiHeadAttention` in PyTorch: its weights ``p``
    as tensors, grouped-query heads through ``enable_gqa``. ``attn_mask`` is a
    tensor in the book's convention (True = may attend), as PyTorch's."""
    x_kv = x_q if x_kv is None else x_kv
    B, T, _ = x_q.shape
    S = x_kv.shape[1]

    def proj(x, name, heads):
        y = x @ p["W_" + name] + p.get("b_" + name, 0)
        return y.reshape(B, x.shape[1], heads, -1).transpose(1, 2)

    q = proj(x_q, "Q", att.n_heads)
    k, v = proj(x_kv, "K", att.n_kv_heads), proj(x_kv, "V", att.n_kv_heads)
    if att.rotary:
        q = rotary(q, 0, att.rotary, att.rotary_base)
        k = rotary(k, 0, att.rotary, att.rotary_base)
    if is_causal:
        causal = torch.ones(T, S, dtype=torch.bool).tril()
        attn_mask = causal if attn_mask is None else attn_mask & causal
    ctx = F.scaled_dot_product_attention(
        q, k, v, attn_mask=attn_mask, enable_gqa=att.n_kv_heads != att.n_heads
    )
    out = ctx.transpose(1, 2).reshape(B, T, -1) @ p["W_O"]
    return out + p["b_O"] if "b_O" in p else out


def self_attention(att, p, x):
    return attention(att, p, x, is_causal=att.causal)


def layer_norm(p, x):
    return F.layer_norm(x, x.shape[-1:], weight=p["gamma"], bias=p["beta"], eps=1e-5)


def block(blk, ps, x):
    """``ps``: the tensors of ``blk.layers()``, in that order."""
    x = x + self_attention(blk.attn, ps[1], layer_norm(ps[0], x))
    if not blk.attention_only:
        h = F.gelu(layer_norm(ps[2], x) @ ps[3]["W"] + ps[3]["b"])
        x = x + h @ ps[4]["W"] + ps[4]["b"]
    return x


def model_logits(model, ps, tokens):
    """Logits of a TinyGPT whose ``layers()`` have the tensors ``ps``."""
    tokens = torch.tensor(tokens)
    x = ps[0]["E"][tokens]
    i = 1
    T = tokens.shape[1]
    if model.positions == "learned":
        x = x + ps[1]["E"][:T]
        i = 2
    elif model.positions == "sinusoidal":
        x = x + torch.tensor(model.pe[:T])
    for blk in model.blocks:
        n = len(blk.layers())
        x = block(blk, ps[i : i + n], x)
        i += n
    return layer_norm(ps[i], x) @ ps[i + 1]["W"] + ps[i + 1]["b"]
