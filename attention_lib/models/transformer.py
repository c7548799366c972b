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
import zipfile
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from .._checks import as_float_dtype, as_int
from ..data.paths import write_atomic
from ..masks import padding_mask
from ..nn.block import Composite, FeedForward
from ..nn.layers import init_weight, sum_to_matrix
from ..nn.multi_head_attention import KVCache, MultiHeadAttention
from ..nn.norm import LayerNorm
from ..positions import sinusoidal_positions
from ..softmax import log_softmax
from .checkpoint import CheckpointError, check_shapes, read_config
from .decoding import beam_search
from .kv_cache import TransformerDecoder, replaced_forward

PAD, BOS, EOS = 0, 1, 2


def attention_layer(
    d_model: int, n_heads: int, rng: np.random.Generator, dtype: DTypeLike = np.float64
) -> MultiHeadAttention:
    """The library's :class:`~attention_lib.nn.MultiHeadAttention`, with this model's initial weights.

    ``W_Q, W_K, W_V, W_O`` are drawn one after the other from ``rng`` (variance
    ``1 / d_model``), biases start at zero: the draws the committed checkpoints
    were trained from, so that :mod:`attention_lib.train.translation` reproduces them.
    """
    att = MultiHeadAttention(d_model, n_heads, np.random.default_rng(0), dtype=dtype)
    for name in "QKVO":
        att.params[f"W_{name}"] = init_weight(rng, d_model, d_model).astype(dtype)
        att.params[f"b_{name}"] = np.zeros(d_model, dtype)
    return att


def _ffn_named(ffn):
    return [("ffn.fc1", ffn.fc1), ("ffn.fc2", ffn.fc2)]


class EncoderLayer(Composite):
    """``x + SelfAttn(LN(x))`` with a key-padding mask, then ``x + FFN(LN(x))``."""

    def __init__(self, d_model, n_heads, d_ff, rng):
        self.ln1, self.self_attn = LayerNorm(d_model), attention_layer(d_model, n_heads, rng)
        self.ln2, self.ffn = LayerNorm(d_model), FeedForward(d_model, d_ff, rng)

    def named_layers(self):
        return [("ln1", self.ln1), ("self_attn", self.self_attn), ("ln2", self.ln2)] + _ffn_named(
            self.ffn
        )

    def forward(self, x: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
        x = x + self.self_attn.forward(self.ln1.forward(x), attn_mask=mask)
        return x + self.ffn.forward(self.ln2.forward(x))

    def backward(self, grad):
        grad = grad + self.ln2.backward(self.ffn.backward(grad))
        return grad + self.ln1.backward(self.self_attn.backward(grad))


class DecoderLayer(Composite):
    """Causal ``SelfAttn``, then ``CrossAttn`` over the encoder's output, then ``FFN``; pre-LN."""

    def __init__(self, d_model, n_heads, d_ff, rng):
        self.ln1, self.self_attn = LayerNorm(d_model), attention_layer(d_model, n_heads, rng)
        self.ln2, self.cross_attn = LayerNorm(d_model), attention_layer(d_model, n_heads, rng)
        self.ln3, self.ffn = LayerNorm(d_model), FeedForward(d_model, d_ff, rng)

    def named_layers(self):
        return [
            ("ln1", self.ln1),
            ("self_attn", self.self_attn),
            ("ln2", self.ln2),
            ("cross_attn", self.cross_attn),
            ("ln3", self.ln3),
        ] + _ffn_named(self.ffn)

    def forward(
        self,
        y: np.ndarray,
        memory: np.ndarray,
        src_mask: np.ndarray | None,
        caches: tuple[KVCache, KVCache] | None = None,
    ) -> np.ndarray:
        """Three pre-LN sub-layers, each added to its input.

        ``caches``: two KVCaches (self- and cross-attention), or None.
        """
        self_cache, cross_cache = (None, None) if caches is None else caches
        # 1. causal self-attention: each French position sees the ones before it
        h = self.ln1.forward(y)
        y = y + self.self_attn.forward(h, is_causal=True, cache=self_cache)
        # 2. cross-attention: queries from y, keys and values from the memory
        h = self.ln2.forward(y)
        y = y + self.cross_attn.forward(h, memory, src_mask, cache=cross_cache)
        # 3. the position-wise feed-forward network
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
        self.params = {"E": rng.normal(scale=d_model**-0.5, size=(n_vocab, d_model))}
        self.grads = {}


def label_smoothed_cross_entropy(
    logits: np.ndarray, targets: np.ndarray, smoothing: float = 0.1, ignore: int = PAD
) -> tuple[float, np.ndarray]:
    """Mean cross-entropy against ``(1 - eps) onehot + eps / V`` over non-padding rows, and its gradient.

    The paper's label smoothing (Szegedy et al., 2016), as
    ``torch.nn.functional.cross_entropy(..., label_smoothing=eps, ignore_index=PAD)``.

    Parameters
    ----------
    logits : ndarray (..., V)
    targets : ndarray of int (...)
        Class ids in ``[0, V)``, or ``ignore``.
    smoothing : float in [0, 1]
        ``eps``; outside that range a ``ValueError``, as PyTorch's.
    ignore : int

    Returns
    -------
    loss : float
    grad : ndarray, the shape of ``logits``
        ``(softmax(z) - q) / N`` on the kept rows, 0 on padding.
    """
    V = logits.shape[-1]
    if isinstance(smoothing, (bool, np.bool_)) or not isinstance(
        smoothing, (int, float, np.integer, np.floating)
    ):
        raise TypeError(f"smoothing must be a number in [0, 1], got {smoothing!r}")
    if not 0.0 <= smoothing <= 1.0:  # NaN too; PyTorch's label_smoothing refuses the same
        raise ValueError(f"smoothing must be between 0.0 and 1.0, got {smoothing!r}")
    targets = np.asarray(targets)
    if targets.dtype.kind not in "iu" or targets.shape != logits.shape[:-1]:
        raise ValueError(
            f"targets must be integers of shape {logits.shape[:-1]} (one class per "
            f"row of logits), got {targets.dtype} {targets.shape}"
        )
    if np.isnan(logits).any() or np.isposinf(logits).any():
        raise ValueError("logits contain NaN or +inf: the loss would be NaN")
    bad = (targets != ignore) & ((targets < 0) | (targets >= V))
    if bad.any():
        raise ValueError(
            f"targets must be class ids in [0, {V}) (or {ignore}, ignored), "
            f"got {int(targets[bad][0])}"
        )
    keep = targets != ignore
    n = max(int(keep.sum()), 1)
    z = logits - logits.max(axis=-1, keepdims=True)
    grad = np.exp(z)
    total = grad.sum(axis=-1, keepdims=True)
    log_total = np.log(total)[..., 0]
    # log p = z - log_total, so nll = log_total - z[target] and mean(-log p) = log_total - mean(z)
    nll = log_total - np.take_along_axis(z, targets[..., None], axis=-1)[..., 0]
    smooth = log_total - z.mean(axis=-1)
    loss = float((((1 - smoothing) * nll + smoothing * smooth) * keep).sum() / n)
    grad /= total
    grad -= smoothing / V
    np.put_along_axis(
        grad,
        targets[..., None],
        np.take_along_axis(grad, targets[..., None], axis=-1) - (1 - smoothing),
        axis=-1,
    )
    grad *= (keep / n)[..., None].astype(grad.dtype)
    return loss, grad


class Transformer(Composite):
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

    def __init__(
        self,
        n_vocab,
        d_model=192,
        n_heads=4,
        d_ff=768,
        n_layers=3,
        max_len=64,
        seed=0,
        dtype=np.float32,
    ):
        # Checked before anything is drawn, as the other models' constructors do.
        n_vocab = as_int(n_vocab, "n_vocab", minimum=3)  # <pad>, <bos>, <eos> and more
        d_model, n_heads = as_int(d_model, "d_model", 1), as_int(n_heads, "n_heads", 1)
        d_ff, n_layers = as_int(d_ff, "d_ff", 1), as_int(n_layers, "n_layers", 1)
        max_len, seed = as_int(max_len, "max_len", 1), as_int(seed, "seed", 0)
        dtype = as_float_dtype(dtype)
        self.config = {
            "model": "Transformer",
            "n_vocab": int(n_vocab),
            "d_model": int(d_model),
            "n_heads": int(n_heads),
            "d_ff": int(d_ff),
            "n_layers": int(n_layers),
            "max_len": int(max_len),
            "seed": int(seed),
        }
        rng = np.random.default_rng(seed)
        self.emb = SharedEmbedding(n_vocab, d_model, rng)
        self.encoder = [EncoderLayer(d_model, n_heads, d_ff, rng) for _ in range(n_layers)]
        self.enc_ln = LayerNorm(d_model)
        self.decoder = [DecoderLayer(d_model, n_heads, d_ff, rng) for _ in range(n_layers)]
        self.dec_ln = LayerNorm(d_model)
        self.dtype, self.d_model, self.max_len = np.dtype(dtype), d_model, max_len
        self.pe = sinusoidal_positions(max_len, d_model).astype(dtype)
        for _, layer in self.named_leaves():
            for k, a in layer.params.items():
                layer.params[k] = a.astype(dtype)

    # -- parameters ------------------------------------------------------
    def save(self, path: str | Path, dtype: DTypeLike = np.float16, **extra) -> None:
        """Write this model to ``path`` (``.npz``, ``dtype`` weights, config as JSON): :func:`save`."""
        save(self, path, dtype, **extra)

    @classmethod
    def load(cls, path: str | Path, dtype: DTypeLike = np.float32) -> "Transformer":
        """A Transformer read from ``path``: :func:`load`, which checks everything first."""
        return load(path, dtype)

    def named_layers(self) -> list[tuple[str, object]]:
        """``(name, layer)`` for every layer with parameters; the names are the checkpoint's."""
        out = [("emb", self.emb)]
        out += [(f"encoder.{i}", layer) for i, layer in enumerate(self.encoder)]
        out += [("enc_ln", self.enc_ln)]
        out += [(f"decoder.{i}", layer) for i, layer in enumerate(self.decoder)]
        return out + [("dec_ln", self.dec_ln)]

    # -- forward ---------------------------------------------------------
    def embed(self, ids: np.ndarray, start: int = 0) -> np.ndarray:
        """``E[ids] * sqrt(d_model) + PE``: (B, T, d_model) for ids (B, T) at ``start``."""
        T = ids.shape[1]
        if start + T > self.max_len:
            raise ValueError(
                f"a sequence of {start + T} tokens is longer than max_len = "
                f"{self.max_len}, the model's longest"
            )
        return (
            self.emb.params["E"][ids] * self.dtype.type(np.sqrt(self.d_model))
            + self.pe[start : start + T]
        )

    def _token_ids(self, ids: ArrayLike, name: str) -> np.ndarray:
        """``ids`` as a (B, T) int64 array of ids in ``[0, n_vocab)``, or a one-line error."""
        ids = np.asarray(ids)
        if ids.dtype.kind not in "iu" and not (ids.size == 0 and ids.dtype.kind == "f"):
            raise TypeError(f"{name} must be integer token ids, got dtype {ids.dtype}")
        if ids.ndim != 2:
            raise ValueError(f"{name} must have shape (B, T), got {ids.shape}")
        ids = ids.astype(np.int64, copy=False)
        V = self.emb.params["E"].shape[0]
        bad = (ids < 0) | (ids >= V)
        if bad.any():
            raise ValueError(f"{name} must be token ids in [0, {V}), got {int(ids[bad][0])}")
        return ids

    def encode(self, src: ArrayLike, lengths: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """The memory ``M`` (B, S, d_model) and the source mask (B, 1, 1, S)."""
        src = self._token_ids(src, "src")
        lengths = np.asarray(lengths)
        # (an empty list is float64 to NumPy: no lengths of an empty batch, as for src)
        if lengths.dtype.kind not in "iu" and not (lengths.size == 0 and lengths.dtype.kind == "f"):
            raise TypeError(f"lengths must be integers, got dtype {lengths.dtype}")
        if lengths.shape != (src.shape[0],):
            raise ValueError(
                f"src must be (B, S) and lengths (B,), got {src.shape} and {lengths.shape}"
            )
        lengths = lengths.astype(np.int64)
        if lengths.size and lengths.min() < 1:
            raise ValueError("lengths must be at least 1: every sentence needs a token")
        if lengths.size and lengths.max() > src.shape[1]:
            raise ValueError(
                f"lengths must be at most the padded width S = {src.shape[1]}, "
                f"got {int(lengths.max())}"
            )
        mask = padding_mask(lengths, src.shape[1])[:, None, None, :]
        if src.shape[0] == 0:  # an empty batch: no rows to run through the layers
            return np.zeros((0, src.shape[1], self.d_model), self.dtype), mask
        x = self.embed(src)
        for layer in self.encoder:
            x = layer.forward(x, mask)
        self._src = src
        return self.enc_ln.forward(x), mask

    def _decode_hidden(self, tgt_in, memory, src_mask):
        """The decoder's final hidden states (B, T, d_model), kept for :meth:`backward`."""
        tgt_in = self._token_ids(tgt_in, "tgt_in")
        if tgt_in.shape[0] != memory.shape[0]:
            raise ValueError(
                f"tgt_in has {tgt_in.shape[0]} sentences but the source has {memory.shape[0]}"
            )
        y = self.embed(tgt_in)
        for layer in self.decoder:
            y = layer.forward(y, memory, src_mask)
        self._h = self.dec_ln.forward(y)
        self._tgt = np.asarray(tgt_in)
        self._keep = None
        return self._h

    def decode(self, tgt_in: ArrayLike, memory: np.ndarray, src_mask: np.ndarray) -> np.ndarray:
        """Logits (B, T, V) of every next token, with teacher forcing."""
        return self._decode_hidden(tgt_in, memory, src_mask) @ self.emb.params["E"].T

    def forward(self, src: ArrayLike, lengths: ArrayLike, tgt_in: ArrayLike) -> np.ndarray:
        memory, mask = self.encode(src, lengths)
        return self.decode(tgt_in, memory, mask)

    def loss(
        self,
        src: ArrayLike,
        lengths: ArrayLike,
        tgt_in: ArrayLike,
        tgt_out: ArrayLike,
        smoothing: float = 0.0,
    ) -> float:
        """Mean (label-smoothed) cross-entropy per target token, padding excluded.

        Only the non-padding positions go through the output layer: padding
        contributes nothing to the loss, so its logits are never computed.
        """
        tgt_out = self._token_ids(tgt_out, "tgt_out")  # before anything changes
        memory, mask = self.encode(src, lengths)
        h = self._decode_hidden(tgt_in, memory, mask)
        if tgt_out.shape != h.shape[:2]:
            raise ValueError(
                f"tgt_out must have the shape of tgt_in {h.shape[:2]}, got {tgt_out.shape}"
            )
        keep = tgt_out != PAD
        logits = h[keep] @ self.emb.params["E"].T  # (kept, V)
        loss, self._dlogits = label_smoothed_cross_entropy(logits, tgt_out[keep], smoothing)
        self._keep = keep
        return loss

    def backward(self, dlogits: np.ndarray | None = None) -> None:
        """Gradients of the last :meth:`loss` (or of ``dlogits``, shape (B, T, V)) for every parameter."""
        E = self.emb.params["E"]
        d = self.d_model
        if dlogits is None:
            if getattr(self, "_dlogits", None) is None or self._keep is None:
                raise RuntimeError("Transformer.backward() without dlogits needs loss() first")
            h = self._h[self._keep]  # (kept, d)
            dE = self._dlogits.T @ h  # (V, d): output side
            dh = np.zeros_like(self._h)
            dh[self._keep] = self._dlogits @ E
        else:
            dE = sum_to_matrix(dlogits, self._h)
            dh = dlogits @ E
        dy = self.dec_ln.backward(dh)
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
    def _caches(self):
        """One (self-attention, cross-attention) cache pair per decoder layer.

        The self-attention cache gains a row of keys and values per step; the
        cross-attention cache computes the encoder's keys and values at the first
        step and reuses them after.
        """
        return [(KVCache(), KVCache()) for _ in self.decoder]

    def _step(self, y, t, memory, mask, caches):
        """Log-probabilities (N, V) of the next token after ``y`` (N,) at position ``t``."""
        h = self.embed(y[:, None], start=t)
        for layer, pair in zip(self.decoder, caches):
            h = layer.forward(h, memory, mask, caches=pair)
        return log_softmax(self.dec_ln.forward(h)[:, 0] @ self.emb.params["E"].T)

    def greedy(
        self, src: ArrayLike, lengths: ArrayLike, max_len: int | None = None, cache: bool = True
    ) -> list[list[int]]:
        """Batched greedy decoding: each sentence's ids, up to (without) ``<eos>``.

        Each sentence stops at ``<eos>`` or after ``max_len`` tokens (default
        ``2 * its own length + 10``, whatever the other sentences' lengths).

        With ``cache=True`` each decoder layer keeps its self-attention keys and
        values (one row appended per step) and computes the cross-attention
        keys and values once; ``cache=False`` reruns the decoder over the whole
        prefix at every step (the same tokens, slower). The fast decoder
        (:class:`~attention_lib.models.kv_cache.TransformerDecoder`) redoes the
        layers' arithmetic; when a layer has a ``forward`` of its own (a hook of
        :mod:`attention_lib.interp`), the layers' own steps run instead, with
        their :class:`~attention_lib.nn.KVCache`.
        """
        src = np.asarray(src)
        B = src.shape[0]
        limits = self._max_out(lengths, max_len)
        memory, mask = self.encode(src, lengths)
        if B == 0:  # an empty batch: no sentences
            return []
        n_steps = int(limits.max(initial=0))
        fast = cache and replaced_forward(self) is None  # a layer's own forward must run
        if fast:  # one-token steps, cross-attention keys computed once
            decoder = TransformerDecoder(self, memory, mask, 1, max(n_steps, 1))
        elif cache:
            caches = self._caches()
        y = np.full(B, BOS)
        out, done = [y], limits <= 0
        for t in range(n_steps):
            if fast:
                logp = decoder.logits(out[-1], t)  # argmax as of the log-probabilities
            elif cache:
                logp = self._step(out[-1], t, memory, mask, caches)
            else:
                logits = self.decode(np.stack(out, axis=1), memory, mask)[:, -1]
                logp = logits
            nxt = np.where(done, PAD, logp.argmax(axis=-1))
            out.append(nxt)
            done |= (nxt == EOS) | (limits <= t + 1)  # ended, or at its own limit
            if done.all():
                break
        return [_until_eos(row) for row in np.stack(out[1:], axis=1).tolist()]

    def _max_out(self, lengths, max_len):
        """Each sentence's longest output (B,): ``2 * its length + 10`` by default.

        A sentence's own source length, not its batch's padded width: its
        translation must not depend on the sentences beside it.
        """
        limit = self.max_len - 1
        lengths = np.asarray(lengths, dtype=np.int64).reshape(-1)
        if max_len is None:
            return np.minimum(limit, 2 * lengths + 10)
        return np.full(lengths.shape, min(limit, int(max_len)))

    def beam_search(
        self,
        src: ArrayLike,
        lengths: ArrayLike,
        beam: int = 4,
        length_penalty: float = 0.6,
        max_len: int | None = None,
    ) -> list[list[int]]:
        """Beam search, batched over sentences and beams: each sentence's best ids.

        Hypotheses are ranked by ``log p(y | x) / lp(y)`` with GNMT's length penalty
        ``lp = ((5 + |y|) / 6) ** length_penalty`` (0 ranks by the raw
        log-probability, which favours short outputs). A sentence stops when it
        has ``beam`` finished hypotheses and no live one can still rank above them.
        """
        if int(beam) < 1:
            raise ValueError(f"beam must be at least 1, got {beam}")
        replaced = replaced_forward(self)
        if replaced is not None:
            raise ValueError(
                f"beam_search runs the fast decoder, which would skip the forward set on "
                f"{type(replaced).__name__} (a hook): use greedy(), which runs it"
            )
        src, K = np.asarray(src), int(beam)
        B = src.shape[0]
        limits = self._max_out(lengths, max_len)
        memory, mask = self.encode(src, lengths)
        if B == 0:  # an empty batch: no sentences
            return []
        # K rows per sentence. Self-attention caches follow the surviving hypotheses;
        # the cross-attention keys and values are the same for the K rows of a
        # sentence, and idx never leaves a sentence's rows: computed once per sentence.
        decoder = TransformerDecoder(self, memory, mask, K, max(int(limits.max(initial=0)), 1))

        def step(y, t):
            return log_softmax(decoder.logits(y, t))

        return beam_search(step, decoder.reorder, B, K, limits, length_penalty)


def _until_eos(row):
    return row[: row.index(EOS)] if EOS in row else [t for t in row if t != PAD]


def save(model: Transformer, path: str | Path, dtype: DTypeLike = np.float16, **extra) -> None:
    """Write the parameters (``dtype``, float16 by default) and the config (JSON) to ``.npz``.

    The file is written beside ``path`` and renamed into place, so a reader never
    sees half a checkpoint.
    """
    arrays = {k: a.astype(dtype) for k, a in model.state_dict().items()}
    arrays["config"] = np.array(json.dumps({**model.config, **extra}, sort_keys=True))
    write_atomic(path, lambda f: np.savez(f, **arrays), mode="wb")


#: The longest ``max_len`` a checkpoint may claim: its positions' table,
#: ``(max_len, d_model)``, is not in the file, so it cannot be checked against it.
MAX_LEN_LIMIT = 2**16


def param_shapes(n_vocab: int, d_model: int, n_heads: int, d_ff: int, n_layers: int) -> dict:
    """``{name: shape}`` of every parameter of a :class:`Transformer` of these sizes (no arrays)."""
    d = d_model
    attn = {f"W_{x}": (d, d) for x in "QKVO"} | {f"b_{x}": (d,) for x in "QKVO"}
    ln = {"gamma": (d,), "beta": (d,)}
    ffn = {"fc1.W": (d, d_ff), "fc1.b": (d_ff,), "fc2.W": (d_ff, d), "fc2.b": (d,)}
    shapes = {"emb.E": (n_vocab, d)}
    for i in range(n_layers):
        parts = {"ln1": ln, "self_attn": attn, "ln2": ln, "ffn": ffn}
        shapes |= {f"encoder.{i}.{p}.{k}": v for p, d_ in parts.items() for k, v in d_.items()}
    shapes |= {f"enc_ln.{k}": v for k, v in ln.items()}
    for i in range(n_layers):
        parts = {"ln1": ln, "self_attn": attn, "ln2": ln, "cross_attn": attn, "ln3": ln}
        parts["ffn"] = ffn
        shapes |= {f"decoder.{i}.{p}.{k}": v for p, d_ in parts.items() for k, v in d_.items()}
    return shapes | {f"dec_ln.{k}": v for k, v in ln.items()}


def load(path: str | Path, dtype: DTypeLike = np.float32) -> Transformer:
    """Read a model written by :func:`save` (``allow_pickle=False``).

    Everything is checked before the model is built: the file is a zip of
    arrays with a JSON config naming a Transformer, every size in it is a
    positive integer (``max_len`` at most :data:`MAX_LEN_LIMIT`), and every
    array has the shape the config implies, with nothing missing or extra, so a
    config claiming a 2 GB model in a 4 MB file allocates nothing.

    Raises
    ------
    FileNotFoundError
        If there is no file at ``path``.
    CheckpointError
        (a ``ValueError``) naming the file and the fault, for anything else.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such checkpoint file")
    headers, config = read_config(path, "a Transformer checkpoint written by save()")
    if not isinstance(config, dict) or config.get("model") != "Transformer":
        what = config.get("model") if isinstance(config, dict) else type(config).__name__
        raise CheckpointError(f"{path}: its config names model {what!r}, not 'Transformer'")
    keys = ("n_vocab", "d_model", "n_heads", "d_ff", "n_layers", "max_len", "seed")
    for k in keys:
        v = config.get(k)
        if type(v) is not int or v < (0 if k == "seed" else 1):
            raise CheckpointError(
                f"{path}: the config's {k} must be a {'non-negative' if k == 'seed' else 'positive'}"
                f" integer, got {v!r}"
            )
    if config["max_len"] > MAX_LEN_LIMIT or config["d_model"] % config["n_heads"]:
        raise CheckpointError(
            f"{path}: the config's max_len {config['max_len']} (at most {MAX_LEN_LIMIT}) or "
            f"its n_heads {config['n_heads']} (which must divide d_model {config['d_model']}) "
            "is not one a Transformer can have"
        )
    shapes = param_shapes(
        *(config[k] for k in ("n_vocab", "d_model", "n_heads", "d_ff", "n_layers"))
    )
    check_shapes(path, headers, shapes)
    model = Transformer(**{k: config[k] for k in keys}, dtype=as_float_dtype(dtype))
    try:
        with np.load(path, allow_pickle=False) as f:
            model.load_state_dict({k: f[k] for k in shapes})
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as err:
        raise CheckpointError(f"{path}: {err}") from None
    model.config = config
    return model
