"""The same layers written with PyTorch's functions, for the autograd cross-checks.

Each function takes the NumPy layer (to read its weights) and torch tensors,
so a test can compare our hand-written gradients with autograd's.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")   # collected without torch: skipped, not an error
F = torch.nn.functional


def tensors(layer):
    """The layer's parameters as float64 tensors that require grad."""
    return {k: torch.tensor(a, requires_grad=True) for k, a in layer.params.items()}


def rotary(x, start=0):
    """Rotate feature pairs (2i, 2i+1) at position p by p * 10000^(-2i/d)."""
    T, d = x.shape[-2], x.shape[-1]
    freqs = 10000.0 ** (-np.arange(0, d, 2) / d)
    angles = torch.tensor(np.arange(start, start + T)[:, None] * freqs)
    cos, sin = torch.cos(angles), torch.sin(angles)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos],
                       dim=-1).flatten(-2)


def self_attention(att, p, x):
    B, T, d = x.shape
    H = att.n_heads
    qkv = (x @ p["W_QKV"] + p["b_QKV"]).reshape(B, T, 3, H, d // H)
    q, k, v = qkv.permute(2, 0, 3, 1, 4)
    if att.rotary:
        q, k = rotary(q), rotary(k)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=att.causal)
    return ctx.transpose(1, 2).reshape(B, T, d) @ p["W_O"] + p["b_O"]


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
        x = block(blk, ps[i:i + n], x)
        i += n
    return layer_norm(ps[i], x) @ ps[i + 1]["W"] + ps[i + 1]["b"]
