"""An independent Llama forward pass in PyTorch, for cross-checking the NumPy model.

Written from llama2.c's ``model.py`` and Meta's Llama code, not from
``attention_lib``: ``torch.nn.RMSNorm``, rotary positions as complex
multiplication (``torch.polar``), ``F.scaled_dot_product_attention`` with
``enable_gqa=True`` and ``F.silu``. It reads the tensors straight from the GGUF
file (PyTorch's ``(out, in)`` weight layout, as the file stores them) and runs
in float64.
"""

import numpy as np
import pytest

from attention_lib.data.gguf import read_gguf

torch = pytest.importorskip("torch")  # collected without torch: skipped, not an error
F = torch.nn.functional


class TorchLlama:
    def __init__(self, path):
        f = read_gguf(path)
        m = f.metadata
        self.n_layers = m["llama.block_count"]
        self.n_heads = m["llama.attention.head_count"]
        self.n_kv_heads = m.get("llama.attention.head_count_kv", self.n_heads)
        self.dim = m["llama.embedding_length"]
        self.eps = float(m["llama.attention.layer_norm_rms_epsilon"])
        self.w = {
            name: torch.tensor(np.array(f.tensor(name), dtype=np.float64))
            for name in f.tensor_infos
        }
        head_dim = self.dim // self.n_heads
        freqs = 1.0 / 10000.0 ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
        angles = torch.outer(torch.arange(m["llama.context_length"], dtype=torch.float64), freqs)
        self.rot = torch.polar(torch.ones_like(angles), angles)  # (max_len, head_dim / 2)

    def norm(self, x, weight):
        return F.rms_norm(x, (self.dim,), weight=weight, eps=self.eps)

    def rotate(self, x):  # x: (B, T, heads, head_dim), pairs (2i, 2i + 1)
        z = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())
        z = z * self.rot[: x.shape[1], None, :]
        return torch.view_as_real(z).flatten(-2)

    @torch.no_grad()
    def forward(self, ids):
        """Logits (B, T, V) of token ids (B, T)."""
        ids = torch.as_tensor(np.asarray(ids))
        B, T = ids.shape
        w, hd = self.w, self.dim // self.n_heads
        x = w["token_embd.weight"][ids]
        for i in range(self.n_layers):
            p = f"blk.{i}."
            h = self.norm(x, w[p + "attn_norm.weight"])
            q = self.rotate(F.linear(h, w[p + "attn_q.weight"]).view(B, T, self.n_heads, hd))
            k = self.rotate(F.linear(h, w[p + "attn_k.weight"]).view(B, T, self.n_kv_heads, hd))
            v = F.linear(h, w[p + "attn_v.weight"]).view(B, T, self.n_kv_heads, hd)
            o = F.scaled_dot_product_attention(
                q.transpose(1, 2),
                k.transpose(1, 2),
                v.transpose(1, 2),
                is_causal=True,
                enable_gqa=True,
            )
            x = x + F.linear(o.transpose(1, 2).reshape(B, T, self.dim), w[p + "attn_output.weight"])
            h = self.norm(x, w[p + "ffn_norm.weight"])
            gate = F.silu(F.linear(h, w[p + "ffn_gate.weight"]))
            x = x + F.linear(gate * F.linear(h, w[p + "ffn_up.weight"]), w[p + "ffn_down.weight"])
        x = self.norm(x, w["output_norm.weight"])
        return F.linear(x, w["output.weight"]).numpy()

    def greedy(self, ids, n_new):
        """Greedy continuation (no cache: the whole sequence each step)."""
        seq = list(ids)
        for _ in range(n_new):
            seq.append(int(self.forward(np.array([seq]))[0, -1].argmax()))
        return np.array(seq)
