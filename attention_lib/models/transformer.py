"""The Transformer encoder-decoder of *Attention Is All You Need* (Vaswani et al., 2017), in NumPy.

The three kinds of attention of chapter 5 work together in one network::

    source ids (B, S) -> E x * sqrt(d_model) + PE   (B, S, d_model)
      encoder layer x N:  x + SelfAttn(LN(x), key padding)      bidirectional self-attention
                          x + FFN(LN(x))
      LN -> memory M                                            (B, S, d_model)
    target ids (B, T) -> E y * sqrt(d_model) + PE   (B, T, d_model)
      decoder layer x N:  y + SelfAttn(LN(y), causal)           causal self-attention
                          y + CrossAttn(LN(y), M, key padding)  cross-attention: Q from y, K, V from M
                          y + FFN(LN(y))
      LN -> logits = y E^T                                      (B, T, V)   tied with the embedding

Differences from the paper, each a common modern choice: layer norm inside the
residual branch (pre-LN, as GPT-2 and ``torch.nn.Transformer(norm_first=True)``),
which trains without a long warm-up, with a final layer norm after each stack;
GELU in the feed-forward layer; no dropout (the model sees each sentence about
once). Sinusoidal positions, tied embeddings, label smoothing and the warm-up
schedule are the paper's.

Every backward pass is written by hand; ``tests/test_transformer.py`` checks
every parameter against central differences in float64 and against PyTorch's
``nn.Transformer`` with the weights copied across.
"""

import json
import os

import numpy as np

from ..dot_product import scaled_dot_product_attention
from ..masks import padding_mask
from ..nn.block import FeedForward
from ..nn.layers import _init, _sum_to_matrix
from ..nn.norm import LayerNorm
from ..positions import sinusoidal_positions
from ..softmax import softmax_backward
from .decoding import beam_search

PAD, BOS, EOS = 0, 1, 2


class Attention:
    """Multi-head attention whose keys and values come from ``x`` (self) or from a memory (cross).

    ``Q = x W_Q + b_Q``, ``K = m W_K + b_K``, ``V = m W_V + b_V`` with ``m = x``
    for self-attention and ``m`` the encoder's output for cross-attention, split
    into ``n_heads`` heads of ``d_model / n_heads`` features; each head computes
    :func:`~attention_lib.scaled_dot_product_attention` (masks: True = may
    attend); the heads are concatenated and mixed by ``W_O``.

    Parameters
    ----------
    d_model, n_heads : int
    rng : numpy.random.Generator
    causal : bool
        Query ``i`` sees keys ``j <= i`` only (decoder self-attention).

    Attributes
    ----------
    weights : ndarray, shape (B, H, L, S)
        The attention weights of the last forward pass.
    """

    def __init__(self, d_model, n_heads, rng, causal=False):
        if d_model % n_heads:
            raise ValueError(f"n_heads = {n_heads} does not divide d_model = {d_model}")
        self.n_heads, self.causal = n_heads, causal
        self.params = {}
        for name in ("Q", "K", "V", "O"):
            self.params[f"W_{name}"] = _init(rng, d_model, d_model)
            self.params[f"b_{name}"] = np.zeros(d_model)
        self.grads = {}

    def _split(self, x):                        # (B, T, d) -> (B, H, T, d_head)
        B, T, d = x.shape
        return x.reshape(B, T, self.n_heads, d // self.n_heads).transpose(0, 2, 1, 3)

    def keys_values(self, memory):
        """``K, V`` (B, H, S, d_head) of a memory: computed once per sentence when decoding."""
        p = self.params
        return (self._split(memory @ p["W_K"] + p["b_K"]),
                self._split(memory @ p["W_V"] + p["b_V"]))

    def forward(self, x, memory=None, mask=None, cache=None, kv=None):
        """Attend from ``x`` (B, L, d) to ``memory`` (B, S, d), or to ``x`` itself if None.

        ``mask`` broadcasts to (B, H, L, S). ``cache`` (a dict) keeps a decoder's
        self-attention keys and values across steps, appending the new ones;
        ``kv`` gives precomputed cross-attention keys and values.
        """
        p = self.params
        m = x if memory is None else memory
        self.x, self.m = x, m
        q = self._split(x @ p["W_Q"] + p["b_Q"])
        k, v = kv if kv is not None else self.keys_values(m)
        start = 0
        if cache is not None:
            if "k" in cache:
                start = cache["k"].shape[2]
                k = np.concatenate([cache["k"], k], axis=2)
                v = np.concatenate([cache["v"], v], axis=2)
            cache["k"], cache["v"] = k, v
        if self.causal and start > 0:           # new queries see the whole prefix
            L = q.shape[2]
            causal = np.arange(k.shape[2]) <= np.arange(start, start + L)[:, None]
            mask = causal if mask is None else mask & causal
        is_causal = self.causal and start == 0
        context, self.weights = scaled_dot_product_attention(
            q, k, v, mask, is_causal, return_weights=True)
        self.q, self.k, self.v = q, k, v
        B, H, L, dh = context.shape
        self.context = context.transpose(0, 2, 1, 3).reshape(B, L, H * dh)
        return self.context @ p["W_O"] + p["b_O"]

    def backward(self, grad):
        """``dx`` for self-attention; ``(dx, dmemory)`` for cross-attention."""
        p, g = self.params, self.grads
        _B, _L, d = grad.shape
        g["W_O"] = _sum_to_matrix(self.context, grad)
        g["b_O"] = grad.reshape(-1, d).sum(axis=0)
        d_ctx = self._split(grad @ p["W_O"].T)                       # (B, H, L, dh)
        P = self.weights
        dv = np.swapaxes(P, -1, -2) @ d_ctx                           # (B, H, S, dh)
        dS = softmax_backward(d_ctx @ np.swapaxes(self.v, -1, -2), P)
        scale = 1.0 / np.sqrt(self.q.shape[-1])
        dq, dk = (dS @ self.k) * scale, (np.swapaxes(dS, -1, -2) @ self.q) * scale

        def merge(t):                                                 # (B, H, T, dh) -> (B, T, d)
            return t.transpose(0, 2, 1, 3).reshape(t.shape[0], t.shape[2], d)

        dq, dk, dv = merge(dq), merge(dk), merge(dv)
        for name, inp, dt in (("Q", self.x, dq), ("K", self.m, dk), ("V", self.m, dv)):
            g[f"W_{name}"] = _sum_to_matrix(inp, dt)
            g[f"b_{name}"] = dt.reshape(-1, d).sum(axis=0)
        dx = dq @ p["W_Q"].T
        dm = dk @ p["W_K"].T + dv @ p["W_V"].T
        if self.m is self.x:
            return dx + dm
        return dx, dm


class Composite:
    """A layer made of named layers; ``params``/``grads`` are theirs, prefixed."""

    def named_layers(self):
        raise NotImplementedError

    @property
    def params(self):
        return {f"{n}.{k}": a for n, layer in self.named_layers() for k, a in layer.params.items()}

    @property
    def grads(self):
        return {f"{n}.{k}": a for n, layer in self.named_layers() for k, a in layer.grads.items()}


def _ffn_named(ffn):
    return [("ffn.fc1", ffn.fc1), ("ffn.fc2", ffn.fc2)]


class EncoderLayer(Composite):
    """``x + SelfAttn(LN(x))`` with a key-padding mask, then ``x + FFN(LN(x))``."""

    def __init__(self, d_model, n_heads, d_ff, rng):
        self.ln1, self.self_attn = LayerNorm(d_model), Attention(d_model, n_heads, rng)
        self.ln2, self.ffn = LayerNorm(d_model), FeedForward(d_model, d_ff, rng)

    def named_layers(self):
        return [("ln1", self.ln1), ("self_attn", self.self_attn), ("ln2", self.ln2)] + \
            _ffn_named(self.ffn)

    def forward(self, x, mask):
        x = x + self.self_attn.forward(self.ln1.forward(x), mask=mask)
        return x + self.ffn.forward(self.ln2.forward(x))

    def backward(self, grad):
        grad = grad + self.ln2.backward(self.ffn.backward(grad))
        return grad + self.ln1.backward(self.self_attn.backward(grad))


class DecoderLayer(Composite):
    """Causal ``SelfAttn``, then ``CrossAttn`` over the encoder's output, then ``FFN``; pre-LN."""

    def __init__(self, d_model, n_heads, d_ff, rng):
        self.ln1, self.self_attn = LayerNorm(d_model), Attention(d_model, n_heads, rng, causal=True)
        self.ln2, self.cross_attn = LayerNorm(d_model), Attention(d_model, n_heads, rng)
        self.ln3, self.ffn = LayerNorm(d_model), FeedForward(d_model, d_ff, rng)

    def named_layers(self):
        return [("ln1", self.ln1), ("self_attn", self.self_attn), ("ln2", self.ln2),
                ("cross_attn", self.cross_attn), ("ln3", self.ln3)] + _ffn_named(self.ffn)

    def forward(self, y, memory, src_mask, cache=None, cross_kv=None):
        y = y + self.self_attn.forward(self.ln1.forward(y), cache=cache)
        y = y + self.cross_attn.forward(self.ln2.forward(y), memory, src_mask, kv=cross_kv)
        return y + self.ffn.forward(self.ln3.forward(y))

    def backward(self, grad):
        """``(dy, dmemory)``."""
        grad = grad + self.ln3.backward(self.ffn.backward(grad))
        dy, dmem = self.cross_attn.backward(grad)
        grad = grad + self.ln2.backward(dy)
        return grad + self.ln1.backward(self.self_attn.backward(grad)), dmem


class SharedEmbedding:
    """One table ``E`` (V, d_model) for source tokens, target tokens and the output layer."""

    def __init__(self, n_vocab, d_model, rng):
        self.params = {"E": rng.normal(scale=d_model ** -0.5, size=(n_vocab, d_model))}
        self.grads = {}


def label_smoothed_cross_entropy(logits, targets, smoothing=0.1, ignore=PAD):
    """Mean cross-entropy against ``(1 - eps) onehot + eps / V`` over non-padding rows, and its gradient.

    The paper's label smoothing (Szegedy et al., 2016), as
    ``torch.nn.functional.cross_entropy(..., label_smoothing=eps, ignore_index=PAD)``.

    Returns
    -------
    loss : float
    grad : ndarray, the shape of ``logits``
        ``(softmax(z) - q) / N`` on the kept rows, 0 on padding.
    """
    V = logits.shape[-1]
    keep = targets != ignore
    n = max(int(keep.sum()), 1)
    z = logits - logits.max(axis=-1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    nll = -np.take_along_axis(log_p, targets[..., None], axis=-1)[..., 0]
    smooth = -log_p.mean(axis=-1)
    loss = float((((1 - smoothing) * nll + smoothing * smooth) * keep).sum() / n)
    grad = np.exp(log_p)
    grad -= smoothing / V
    np.put_along_axis(grad, targets[..., None],
                      np.take_along_axis(grad, targets[..., None], axis=-1) - (1 - smoothing),
                      axis=-1)
    grad *= (keep / n)[..., None].astype(grad.dtype)
    return loss, grad


class Transformer:
    """The encoder-decoder Transformer with a shared source/target vocabulary.

    Parameters
    ----------
    n_vocab : int
        Vocabulary size ``V`` (id 0 padding, 1 ``<bos>``, 2 ``<eos>``).
    d_model, n_heads, d_ff : int
    n_layers : int
        Encoder layers, and as many decoder layers.
    max_len : int
        Longest source or target sequence, in tokens (the positions' table).
    seed : int
    dtype : float32 to train, float64 to check gradients.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.models.transformer import Transformer
    >>> model = Transformer(n_vocab=11, d_model=8, n_heads=2, d_ff=16, n_layers=1, max_len=6)
    >>> src = np.array([[3, 4, 5], [6, 7, 0]])                 # second sentence padded
    >>> tgt_in, tgt_out = np.array([[1, 8, 9], [1, 10, 0]]), np.array([[8, 9, 2], [10, 2, 0]])
    >>> loss = model.loss(src, [3, 2], tgt_in, tgt_out)
    >>> model.backward()
    >>> model.decoder[0].cross_attn.weights.shape              # (B, heads, T, S)
    (2, 2, 3, 3)
    >>> float(model.decoder[0].cross_attn.weights[1, :, :, 2].max())   # padding gets nothing
    0.0
    """

    def __init__(self, n_vocab, d_model=192, n_heads=4, d_ff=768, n_layers=3, max_len=64,
                 seed=0, dtype=np.float32):
        self.config = {"model": "Transformer", "n_vocab": int(n_vocab), "d_model": int(d_model),
                       "n_heads": int(n_heads), "d_ff": int(d_ff), "n_layers": int(n_layers),
                       "max_len": int(max_len), "seed": int(seed)}
        rng = np.random.default_rng(seed)
        self.emb = SharedEmbedding(n_vocab, d_model, rng)
        self.encoder = [EncoderLayer(d_model, n_heads, d_ff, rng) for _ in range(n_layers)]
        self.enc_ln = LayerNorm(d_model)
        self.decoder = [DecoderLayer(d_model, n_heads, d_ff, rng) for _ in range(n_layers)]
        self.dec_ln = LayerNorm(d_model)
        self.dtype, self.d_model, self.max_len = np.dtype(dtype), d_model, max_len
        self.pe = sinusoidal_positions(max_len, d_model).astype(dtype)
        for layer in self.leaf_layers():
            for k, a in layer.params.items():
                layer.params[k] = a.astype(dtype)

    # -- parameters ------------------------------------------------------
    def named_layers(self):
        """``(name, layer)`` for every layer with parameters; the names are the checkpoint's."""
        out = [("emb", self.emb)]
        out += [(f"encoder.{i}", layer) for i, layer in enumerate(self.encoder)]
        out += [("enc_ln", self.enc_ln)]
        out += [(f"decoder.{i}", layer) for i, layer in enumerate(self.decoder)]
        return out + [("dec_ln", self.dec_ln)]

    def layers(self):
        """Every layer with parameters (what :class:`~attention_lib.nn.Adam` takes)."""
        return [layer for _, layer in self.named_layers()]

    def leaf_layers(self):
        out = []
        for _, layer in self.named_layers():
            out += [sub for _, sub in layer.named_layers()] if isinstance(layer, Composite) \
                else [layer]
        return out

    def n_params(self):
        return sum(a.size for layer in self.layers() for a in layer.params.values())

    def state_dict(self):
        return {f"{n}.{k}": a for n, layer in self.named_layers() for k, a in layer.params.items()}

    def load_state_dict(self, state):
        for n, layer in self.named_layers():
            subs = layer.named_layers() if isinstance(layer, Composite) else [(None, layer)]
            for sn, sub in subs:
                for k, a in sub.params.items():
                    key = f"{n}.{k}" if sn is None else f"{n}.{sn}.{k}"
                    arr = np.asarray(state[key])
                    if arr.shape != a.shape:
                        raise ValueError(f"{key} has shape {arr.shape} in the checkpoint "
                                         f"but {a.shape} in the model")
                    sub.params[k] = arr.astype(self.dtype)

    # -- forward ---------------------------------------------------------
    def _embed(self, ids, start=0):
        T = ids.shape[1]
        if start + T > self.max_len:
            raise ValueError(f"a sequence of {start + T} tokens is longer than max_len = "
                             f"{self.max_len}, the model's longest")
        return self.emb.params["E"][ids] * self.dtype.type(np.sqrt(self.d_model)) \
            + self.pe[start:start + T]

    def encode(self, src, lengths):
        """The memory ``M`` (B, S, d_model) and the source mask (B, 1, 1, S)."""
        src = np.asarray(src)
        lengths = np.asarray(lengths, dtype=np.int64)
        if src.ndim != 2 or lengths.shape != (src.shape[0],):
            raise ValueError(f"src must be (B, S) and lengths (B,), got {src.shape} and "
                             f"{lengths.shape}")
        if lengths.size and lengths.min() < 1:
            raise ValueError("lengths must be at least 1: every sentence needs a token")
        mask = padding_mask(lengths, src.shape[1])[:, None, None, :]
        x = self._embed(src)
        for layer in self.encoder:
            x = layer.forward(x, mask)
        self._src = src
        return self.enc_ln.forward(x), mask

    def decode(self, tgt_in, memory, src_mask):
        """Logits (B, T, V) of every next token, with teacher forcing."""
        y = self._embed(np.asarray(tgt_in))
        for layer in self.decoder:
            y = layer.forward(y, memory, src_mask)
        self._h = self.dec_ln.forward(y)
        self._tgt = np.asarray(tgt_in)
        return self._h @ self.emb.params["E"].T

    def forward(self, src, lengths, tgt_in):
        memory, mask = self.encode(src, lengths)
        return self.decode(tgt_in, memory, mask)

    def loss(self, src, lengths, tgt_in, tgt_out, smoothing=0.0):
        """Mean (label-smoothed) cross-entropy per target token, padding excluded."""
        logits = self.forward(src, lengths, tgt_in)
        loss, self._dlogits = label_smoothed_cross_entropy(logits, np.asarray(tgt_out),
                                                           smoothing)
        return loss

    def backward(self, dlogits=None):
        """Gradients of the last :meth:`loss` (or of ``dlogits``) for every parameter."""
        dlogits = self._dlogits if dlogits is None else dlogits
        E = self.emb.params["E"]
        d = self.d_model
        dE = _sum_to_matrix(dlogits, self._h)                    # (V, d): output side
        dy = self.dec_ln.backward(dlogits @ E)
        dmem = 0
        for layer in reversed(self.decoder):
            dy, dm = layer.backward(dy)
            dmem = dmem + dm
        dx = self.enc_ln.backward(dmem)
        for layer in reversed(self.encoder):
            dx = layer.backward(dx)
        s = self.dtype.type(np.sqrt(d))
        np.add.at(dE, self._tgt.reshape(-1), (dy * s).reshape(-1, d))
        np.add.at(dE, self._src.reshape(-1), (dx * s).reshape(-1, d))
        self.emb.grads["E"] = dE

    # -- decoding --------------------------------------------------------
    def _start(self, src, lengths):
        memory, mask = self.encode(src, lengths)
        cross = [layer.cross_attn.keys_values(memory) for layer in self.decoder]
        return memory, mask, cross

    def _step(self, y, t, memory, mask, caches, cross):
        """Log-probabilities (N, V) of the next token after ``y`` (N,) at position ``t``."""
        h = self._embed(y[:, None], start=t)
        for layer, cache, kv in zip(self.decoder, caches, cross):
            h = layer.forward(h, memory, mask, cache=cache, cross_kv=kv)
        logits = self.dec_ln.forward(h)[:, 0] @ self.emb.params["E"].T
        z = logits - logits.max(axis=-1, keepdims=True)
        return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))

    def greedy(self, src, lengths, max_len=None, cache=True):
        """Batched greedy decoding: each sentence's ids, up to (without) ``<eos>``.

        With ``cache=True`` each decoder layer keeps its self-attention keys and
        values (one row appended per step) and computes the cross-attention
        keys and values once; ``cache=False`` reruns the decoder over the whole
        prefix at every step (the same tokens, slower).
        """
        src = np.asarray(src)
        B, S = src.shape
        max_len = self._max_out(S, max_len)
        memory, mask, cross = self._start(src, lengths)
        caches = [{} for _ in self.decoder]
        y = np.full(B, BOS)
        out, done = [y], np.zeros(B, bool)
        for t in range(max_len):
            if cache:
                logp = self._step(out[-1], t, memory, mask, caches, cross)
            else:
                logits = self.decode(np.stack(out, axis=1), memory, mask)[:, -1]
                logp = logits
            nxt = np.where(done, PAD, logp.argmax(axis=-1))
            out.append(nxt)
            done |= nxt == EOS
            if done.all():
                break
        return [_until_eos(row) for row in np.stack(out[1:], axis=1).tolist()]

    def _max_out(self, S, max_len):
        limit = self.max_len - 1
        return min(limit, 2 * S + 10) if max_len is None else min(limit, int(max_len))

    def beam_search(self, src, lengths, beam=4, length_penalty=0.6, max_len=None):
        """Beam search, batched over sentences and beams: each sentence's best ids.

        Hypotheses are ranked by ``log p(y | x) / lp(y)`` with GNMT's length penalty
        ``lp = ((5 + |y|) / 6) ** length_penalty`` (0 ranks by the raw
        log-probability, which favours short outputs). A sentence stops when it
        has ``beam`` finished hypotheses and no live one can still rank above them.
        """
        if int(beam) < 1:
            raise ValueError(f"beam must be at least 1, got {beam}")
        src, K = np.asarray(src), int(beam)
        B, S = src.shape
        max_len = self._max_out(S, max_len)
        memory, mask, cross = self._start(src, lengths)
        rows = np.repeat(np.arange(B), K)                  # K rows per sentence
        memory, mask = memory[rows], mask[rows]
        cross = [(k[rows], v[rows]) for k, v in cross]     # computed once, repeated
        caches = [{} for _ in self.decoder]

        def step(y, t):
            return self._step(y, t, memory, mask, caches, cross)

        def reorder(idx):                                  # self-attention caches follow
            for cache in caches:
                cache["k"], cache["v"] = cache["k"][idx], cache["v"][idx]

        return beam_search(step, reorder, B, K, max_len, length_penalty)


def _until_eos(row):
    return row[:row.index(EOS)] if EOS in row else [t for t in row if t != PAD]


def save(model, path, dtype=np.float16, **extra):
    """Write the parameters (``dtype``, float16 by default) and the config (JSON) to ``.npz``.

    The file is written beside ``path`` and renamed into place, so a reader never
    sees half a checkpoint.
    """
    arrays = {k: a.astype(dtype) for k, a in model.state_dict().items()}
    arrays["config"] = np.array(json.dumps({**model.config, **extra}, sort_keys=True))
    tmp = f"{path}.tmp.npz"
    np.savez(tmp, **arrays)
    os.replace(tmp, path)


def load(path, dtype=np.float32):
    """Read a model written by :func:`save` (``allow_pickle=False``)."""
    with np.load(path, allow_pickle=False) as f:
        config = json.loads(str(f["config"]))
        kwargs = {k: config[k] for k in ("n_vocab", "d_model", "n_heads", "d_ff", "n_layers",
                                          "max_len", "seed")}
        model = Transformer(**kwargs, dtype=dtype)
        model.load_state_dict({k: f[k] for k in f.files if k != "config"})
    model.config = config
    return model
