"""PyTorch eager versions of the book's two language models, for ``bench_generation.py``.

Written as one writes them in PyTorch (nanoGPT's GPT, llama2.c's ``model.py``
Llama), not translated from ``attention_lib``: ``F.layer_norm``, ``F.rms_norm``,
``F.gelu``, ``F.silu``, ``F.scaled_dot_product_attention``, rotary positions as
a complex product (``torch.polar``), keys and values repeated per group. Each
keeps a KV cache preallocated to the context and written in place, runs under
``torch.inference_mode()`` and takes the weights of the library's model (the
same float32 numbers), so that both sides compute the same model and must
give the same greedy tokens.
"""

import numpy as np
import torch

F = torch.nn.functional


def _t(a):
    return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))


class TorchGPT:
    """The library's :class:`~attention_lib.TinyGPT` (learned positions) in PyTorch eager."""

    def __init__(self, model):
        if model.positions != "learned":
            raise ValueError("TorchGPT implements learned positions only")
        self.max_len = model.max_len
        self.wte, self.wpe = _t(model.tok.params["E"]), _t(model.pos.params["E"])
        self.blocks = []
        for b in model.blocks:
            a = b.attn.params
            self.blocks.append(
                {
                    "ln1": (_t(b.ln1.params["gamma"]), _t(b.ln1.params["beta"]), b.ln1.eps),
                    # nanoGPT's c_attn: one (3 E, E) weight, PyTorch's (out, in) layout
                    "c_attn_w": _t(np.concatenate([a["W_Q"], a["W_K"], a["W_V"]], 1).T),
                    "c_attn_b": _t(np.concatenate([a["b_Q"], a["b_K"], a["b_V"]])),
                    "c_proj_w": _t(a["W_O"].T),
                    "c_proj_b": _t(a["b_O"]),
                    "ln2": (_t(b.ln2.params["gamma"]), _t(b.ln2.params["beta"]), b.ln2.eps),
                    "fc_w": _t(b.ffn.fc1.params["W"].T),
                    "fc_b": _t(b.ffn.fc1.params["b"]),
                    "proj_w": _t(b.ffn.fc2.params["W"].T),
                    "proj_b": _t(b.ffn.fc2.params["b"]),
                }
            )
        self.ln_f = (_t(model.ln_f.params["gamma"]), _t(model.ln_f.params["beta"]), model.ln_f.eps)
        self.head_w, self.head_b = _t(model.head.params["W"].T), _t(model.head.params["b"])
        self.n_heads = model.blocks[0].attn.n_heads
        self.d = self.wte.shape[1]

    def _ln(self, x, p):
        return F.layer_norm(x, (self.d,), p[0], p[1], p[2])

    def forward(self, idx, pos, cache):
        """Logits of the last position after ``idx`` (1, T) at positions ``pos ..``."""
        T, H, d = idx.shape[1], self.n_heads, self.d
        x = self.wte[idx] + self.wpe[pos : pos + T]
        for i, b in enumerate(self.blocks):
            q, k, v = F.linear(self._ln(x, b["ln1"]), b["c_attn_w"], b["c_attn_b"]).split(d, -1)
            q, k, v = (z.view(1, T, H, d // H).transpose(1, 2) for z in (q, k, v))
            cache[0][i, :, :, pos : pos + T] = k
            cache[1][i, :, :, pos : pos + T] = v
            keys, values = cache[0][i, :, :, : pos + T], cache[1][i, :, :, : pos + T]
            y = F.scaled_dot_product_attention(q, keys, values, is_causal=T > 1 and pos == 0)
            y = y.transpose(1, 2).reshape(1, T, d)
            x = x + F.linear(y, b["c_proj_w"], b["c_proj_b"])
            h = F.gelu(F.linear(self._ln(x, b["ln2"]), b["fc_w"], b["fc_b"]))
            x = x + F.linear(h, b["proj_w"], b["proj_b"])
        return F.linear(self._ln(x[:, -1], self.ln_f), self.head_w, self.head_b)

    def new_cache(self):
        shape = (len(self.blocks), 1, self.n_heads, self.max_len, self.d // self.n_heads)
        return torch.zeros(shape), torch.zeros(shape)


class TorchLlama:
    """The library's :class:`~attention_lib.models.llama.Llama` in PyTorch eager (llama2.c's model.py)."""

    def __init__(self, model):
        c = model.config
        self.max_len, self.d = c["max_len"], c["d_model"]
        self.H, self.H_kv, self.eps = c["n_heads"], c["n_kv_heads"], c["eps"]
        self.hd = self.d // self.H
        self.tok = _t(model.tok.params["E"])
        self.layers = []
        for b in model.blocks:
            a, f = b.attn.params, b.ffn.params
            self.layers.append(
                {
                    "attention_norm": _t(b.attn_norm.params["gamma"]),
                    "wq": _t(a["W_Q"].T),
                    "wk": _t(a["W_K"].T),
                    "wv": _t(a["W_V"].T),
                    "wo": _t(a["W_O"].T),
                    "ffn_norm": _t(b.ffn_norm.params["gamma"]),
                    "w1": _t(f["W1"].T),
                    "w2": _t(f["W2"].T),
                    "w3": _t(f["W3"].T),
                }
            )
        self.norm = _t(model.norm.params["gamma"])
        self.output = self.tok if model.head is None else _t(model.head.params["W"].T)
        freqs = 1.0 / (c["rotary_base"] ** (torch.arange(0, self.hd, 2).float() / self.hd))
        angles = torch.outer(torch.arange(self.max_len).float(), freqs)
        self.freqs_cis = torch.polar(torch.ones_like(angles), angles)

    def _rope(self, x, pos, T):
        xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        rot = self.freqs_cis[pos : pos + T].view(1, T, 1, -1)
        return torch.view_as_real(xc * rot).flatten(3)

    def forward(self, idx, pos, cache):
        T = idx.shape[1]
        H, H_kv, hd = self.H, self.H_kv, self.hd
        x = self.tok[idx]
        for i, L in enumerate(self.layers):
            h = F.rms_norm(x, (self.d,), L["attention_norm"], self.eps)
            q = self._rope(F.linear(h, L["wq"]).view(1, T, H, hd), pos, T)
            k = self._rope(F.linear(h, L["wk"]).view(1, T, H_kv, hd), pos, T)
            v = F.linear(h, L["wv"]).view(1, T, H_kv, hd)
            cache[0][i, :, :, pos : pos + T] = k.transpose(1, 2)
            cache[1][i, :, :, pos : pos + T] = v.transpose(1, 2)
            keys = cache[0][i, :, :, : pos + T].repeat_interleave(H // H_kv, dim=1)
            values = cache[1][i, :, :, : pos + T].repeat_interleave(H // H_kv, dim=1)
            y = F.scaled_dot_product_attention(
                q.transpose(1, 2), keys, values, is_causal=T > 1 and pos == 0
            )
            x = x + F.linear(y.transpose(1, 2).reshape(1, T, self.d), L["wo"])
            h = F.rms_norm(x, (self.d,), L["ffn_norm"], self.eps)
            x = x + F.linear(F.silu(F.linear(h, L["w1"])) * F.linear(h, L["w3"]), L["w2"])
        return F.linear(F.rms_norm(x[:, -1], (self.d,), self.norm, self.eps), self.output)

    def new_cache(self):
        shape = (len(self.layers), 1, self.H_kv, self.max_len, self.hd)
        return torch.zeros(shape), torch.zeros(shape)


def greedy(model, prompt, n):
    """The prompt (1-D ints) followed by ``n`` greedy tokens, with the model's KV cache."""
    with torch.inference_mode():
        cache = model.new_cache()
        ids = list(int(i) for i in prompt)
        logits = model.forward(torch.tensor([ids]), 0, cache)
        pos = len(ids)
        for i in range(n):
            nxt = int(torch.argmax(logits, dim=-1))
            ids.append(nxt)
            if i + 1 < n:
                logits = model.forward(torch.tensor([[nxt]]), pos, cache)
                pos += 1
    return np.array(ids)
