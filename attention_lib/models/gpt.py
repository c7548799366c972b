"""A decoder-only Transformer (GPT) small enough to train on a laptop CPU."""

import json
import numbers
import os
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike

from .._checks import as_bool, as_int, as_int_array, as_numeric, as_probability, as_rng
from ..nn.block import Composite, TransformerBlock
from ..nn.layers import Embedding, Linear
from ..nn.multi_head_attention import KVCache, RollingKVCache, _check_long
from ..nn.norm import LayerNorm
from ..positions import sinusoidal_positions
from ..sampling import filter_logits, inverse_cdf, scaled_logits
from ..softmax import softmax
from .checkpoint import CheckpointError, check_shapes, read_config

_POSITIONS = ("learned", "sinusoidal", "rotary", "alibi", None)


class TinyGPT(Composite):
    """Token embedding, positions, ``n_layers`` Transformer blocks, a final LayerNorm, logits.

    Parameters
    ----------
    n_vocab : int
        Number of distinct tokens.
    d_model, n_heads, d_ff : int
        Row size, heads per block, hidden units of each feed-forward.
    n_layers : int
        Number of :class:`~attention_lib.nn.TransformerBlock`.
    max_len : int
        Longest sequence the model accepts.
    rng : numpy.random.Generator
        Draws every weight.
    positions : {"learned", "sinusoidal", "rotary", "alibi", None}, optional
        How the model knows word order (chapter 7): a learned vector per
        position added to the token's (GPT-2, BERT; the default), the fixed
        sinusoids added likewise, rotary inside every attention layer,
        ALiBi's distance penalty on every layer's scores
        (:func:`~attention_lib.alibi_bias`, Press et al., 2022), or nothing
        (the causal mask alone).
    attention_only : bool, optional
        Blocks without their feed-forward half (default False).
    dropout : float, optional
        Dropout in every block while ``training`` (default 0).
    block_size : int, optional
        Every attention layer runs tiled, ``block_size`` positions a tile,
        forward and backward, never holding a (T, T) matrix (default None).
    window, sinks : int, optional
        Sliding-window attention with attention sinks in every layer (see
        :class:`~attention_lib.nn.MultiHeadAttention`).

    Notes
    -----
    ``forward(tokens)`` maps (B, T) integers to logits (B, T, n_vocab): the
    logits at position ``t`` score the token at ``t + 1``. ``backward``
    takes ``d loss / d logits`` and fills every layer's ``grads``;
    ``layers()`` is the list :class:`~attention_lib.nn.Adam` takes.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib import TinyGPT
    >>> model = TinyGPT(n_vocab=10, d_model=16, n_heads=2, n_layers=2, d_ff=32,
    ...                 max_len=12, rng=np.random.default_rng(0))
    >>> model.forward(np.zeros((3, 7), dtype=int)).shape
    (3, 7, 10)
    >>> len(model.layers())     # embeddings, 2 x 5 in the blocks, LayerNorm, output
    14
    >>> model.generate(np.array([1, 2, 3]), 4, temperature=0).shape
    (7,)
    """

    def __init__(
        self,
        n_vocab: int,
        d_model: int,
        n_heads: int,
        n_layers: int,
        d_ff: int,
        max_len: int,
        rng: np.random.Generator,
        positions: str | None = "learned",
        attention_only: bool = False,
        dropout: float = 0.0,
        block_size: int | None = None,
        window: int | None = None,
        sinks: int = 0,
    ) -> None:
        # Every argument is checked before anything is allocated: a million-token
        # vocabulary's table is 256 MB, not to be drawn for a model that cannot be built.
        if positions not in _POSITIONS:
            raise ValueError(f"positions must be one of {_POSITIONS}, got {positions!r}")
        n_vocab, d_model = as_int(n_vocab, "n_vocab", 1), as_int(d_model, "d_model", 1)
        n_heads, d_ff = as_int(n_heads, "n_heads", 1), as_int(d_ff, "d_ff", 1)
        n_layers = as_int(n_layers, "n_layers", 1)
        self.max_len = as_int(max_len, "max_len", 1)
        if d_model % n_heads:
            raise ValueError(
                f"n_heads = {n_heads} does not divide d_model = "
                f"{d_model}: each head gets d_model / n_heads features"
            )
        if positions == "rotary" and (d_model // n_heads) % 2:
            raise ValueError(
                f"rotary needs an even head size, got d_model / n_heads = {d_model // n_heads}"
            )
        if positions == "sinusoidal" and d_model % 2:
            raise ValueError(f"sinusoidal positions need an even d_model, got {d_model}")
        as_probability(dropout, "dropout")
        as_bool(attention_only, "attention_only")
        as_rng(rng)
        # The attention options are checked here too, before any table is drawn.
        long = {"block_size": block_size, "window": window, "sinks": sinks}
        _check_long(block_size, window, sinks, None, None, None, 1.0, n_heads, d_model // n_heads)
        self.positions = positions
        self.tok = Embedding(n_vocab, d_model, rng)
        if positions == "learned":
            self.pos = Embedding(self.max_len, d_model, rng)
        elif positions == "sinusoidal":
            self.pe = sinusoidal_positions(self.max_len, d_model)
        self.blocks = [
            TransformerBlock(
                d_model,
                n_heads,
                d_ff,
                rng,
                dropout,
                rotary=positions == "rotary",
                attention_only=attention_only,
                alibi=positions == "alibi",
                **long,
            )
            for _ in range(n_layers)
        ]
        self.ln_f = LayerNorm(d_model)
        self.head = Linear(d_model, n_vocab, rng)

    def save(self, path: str | os.PathLike, config: dict, chars: list[str]) -> None:
        """Write the model to ``path`` (``.npz``): float16 weights and ``config`` as JSON.

        ``chars`` (the vocabulary, one character per token) is stored in the
        config beside ``config``'s items (the training settings). The file is
        written beside ``path`` and renamed into place. Each attention layer's
        query, key and value weights are stored side by side (``W_QKV``), as
        the first checkpoints did; :meth:`load` reads it back.
        """
        from ..data.paths import write_atomic

        arrays = checkpoint_arrays(self, config, chars)
        write_atomic(Path(path), lambda f: np.savez(f, **arrays), mode="wb")

    @classmethod
    def load(cls, path: str | os.PathLike) -> tuple["TinyGPT", list[str]]:
        """``(model, chars)``: a float32 model from a file of :meth:`save`, and its characters.

        The config is checked against the file's arrays before the model is
        built (:func:`checked_config`: nothing is allocated for a model the
        file does not hold); a non-finite weight is refused. Every fault
        raises :class:`~attention_lib.models.checkpoint.CheckpointError`
        naming the file.
        """
        return _read(cls, path)

    def fast_decoder(self, batch: int, capacity: int | None = None):
        """This model's :class:`~attention_lib.models.kv_cache.GPTDecoder`, or None.

        Learned, sinusoidal, interleaved rotary or no positions are covered; a
        subclass with its own ``forward``, or another kind of position, gets
        None (use :func:`~attention_lib.models.kv_cache.decoder_for`, which
        also checks the attention layers).
        """
        if type(self).forward is not TinyGPT.forward:
            return None
        if self.positions not in ("learned", "sinusoidal", "rotary", None):
            return None
        rotary = self.positions == "rotary"
        if any((b.attn.rotary == "interleaved") != rotary for b in self.blocks):
            return None
        from .kv_cache import GPTDecoder

        return GPTDecoder(self, batch, capacity)

    def layers(self) -> list:
        first = [self.tok] + ([self.pos] if self.positions == "learned" else [])
        return first + [layer for b in self.blocks for layer in b.layers()] + [self.ln_f, self.head]

    def train(self, mode: bool = True) -> "TinyGPT":
        """Switch dropout on (``mode=True``) or off; returns the model."""
        mode = as_bool(mode, "mode")
        for block in self.blocks:
            for drop in block.dropouts():
                drop.training = mode
        return self

    def new_cache(self) -> list[KVCache]:
        """An empty KV cache, one :class:`KVCache` per block, for :meth:`forward`."""
        return [KVCache() for _ in self.blocks]

    def rolling_cache(self, window: int, sinks: int = 0) -> list[RollingKVCache]:
        """A cache that keeps ``sinks + window`` positions per layer (:class:`RollingKVCache`).

        With it, :meth:`forward` runs one stream of any length in constant
        memory, each query seeing the first ``sinks`` positions and its last
        ``window``: positions are counted inside the cache, so a model with
        rotary, ALiBi or no positions never meets a distance it was not
        trained on. Learned and sinusoidal positions are added at the input
        and use the position in the stream (learned ones stop at ``max_len``).
        """
        return [RollingKVCache(window, sinks) for _ in self.blocks]

    def forward(
        self,
        tokens: ArrayLike,
        cache: list[KVCache] | None = None,
    ) -> np.ndarray:
        """Logits (B, T, n_vocab) for ``tokens`` (B, T).

        With a ``cache`` (from :meth:`new_cache`), ``tokens`` continue the
        sequence the cache holds: they take the next positions and attend
        to the cached keys and values too, which the call extends.
        """
        tokens = as_numeric(tokens, "tokens")
        if tokens.ndim != 2:
            shape = tokens.shape
            raise ValueError(f"tokens must have shape (B, T), got {shape}")
        start = 0 if cache is None else cache[0].position
        T = tokens.shape[1]
        relative = self.positions in ("rotary", "alibi", None)
        rolling = cache is not None and isinstance(cache[0], RollingKVCache)
        if rolling and relative:
            longest = len(cache[0]) + T  # positions inside the cache
        else:
            longest = start + T
        if longest > self.max_len:
            have = f"the sequence would be {longest} tokens long"
            raise ValueError(f"{have} but max_len = {self.max_len}")
        x = self.tok.forward(tokens)  # (B, T, d_model)
        if self.positions == "learned":
            x = x + self.pos.forward(np.arange(start, start + T))
        elif self.positions == "sinusoidal":  # a float64 table, cast
            x = x + self.pe[start : start + T].astype(x.dtype, copy=False)
        for i, block in enumerate(self.blocks):
            x = block.forward(x, None if cache is None else cache[i])
        return self.head.forward(self.ln_f.forward(x))  # (B, T, n_vocab)

    def backward(self, dlogits: np.ndarray) -> None:
        """Fill ``grads`` of every layer from ``d loss / d logits`` (B, T, n_vocab)."""
        grad = self.ln_f.backward(self.head.backward(dlogits))
        for block in reversed(self.blocks):
            grad = block.backward(grad)
        if self.positions == "learned":
            self.pos.backward(grad.sum(axis=0))
        self.tok.backward(grad)

    def generate(
        self,
        tokens: ArrayLike,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        rng: np.random.Generator | None = None,
        use_cache: bool = True,
        top_p: float | None = None,
        crop: bool = True,
    ) -> np.ndarray:
        """Continue ``tokens`` by ``max_new_tokens`` tokens, one at a time.

        Parameters
        ----------
        tokens : array_like of int, shape (T,) or (B, T)
            The prompt.
        max_new_tokens : int
            How many tokens to add.
        temperature : float, optional
            0 picks the most likely token (greedy); otherwise the logits are
            divided by ``temperature`` and the next token is sampled. A
            temperature so small that ``logits / temperature`` is not finite
            (e.g. ``1e-320``) is refused with a ``ValueError`` naming
            ``temperature``, checked at every step before its token is
            sampled (for such a temperature, at the first step).
        top_k : int, optional
            Sample only among the ``top_k`` most likely tokens.
        top_p : float in [0, 1], optional
            Nucleus sampling (Holtzman et al., 2020): sample only among the
            smallest set of most likely tokens whose probabilities add up to
            at least ``top_p`` (always at least one token), as Hugging
            Face's ``top_p`` does. Applied after ``temperature`` and ``top_k``;
            1 (or None) keeps every token.
        rng : numpy.random.Generator, optional
            Needed when sampling (``temperature > 0``).
        use_cache : bool, optional
            Keep every layer's keys and values and feed the model only the
            newest token (default True); False runs the whole sequence
            through the model at every step. Both give the same tokens. The
            cache is :mod:`~attention_lib.models.kv_cache`'s fast path:
            preallocated, written in place, weights joined once per call.
        crop : bool, optional
            Past the context (``prompt + max_new_tokens > max_len``), keep
            writing from the last tokens (default True, as nanoGPT does): the
            context is refilled with the last ``max_len // 2`` tokens whenever
            it is full (:func:`stream_tokens` gives the rule). False refuses
            a generation that does not fit in ``max_len``.

        Returns
        -------
        ndarray of int, the prompt followed by the new tokens (same ndim).
        """
        drops = [d for b in self.blocks for d in b.dropouts()]
        was_training = [d.training for d in drops]
        self.train(False)
        try:
            return generate_tokens(
                self, tokens, max_new_tokens, temperature, top_k, top_p, rng, use_cache, crop=crop
            )
        finally:  # dropout as it was, even after an error
            for d, mode in zip(drops, was_training):
                d.training = mode


def generate_tokens(
    model,
    tokens,
    max_new_tokens,
    temperature,
    top_k,
    top_p,
    rng,
    use_cache,
    float64=False,
    crop=True,
):
    """:meth:`TinyGPT.generate`'s loop, for any model with its ``tok``, ``max_len``,
    ``new_cache`` and ``forward``. Every argument is checked before the first forward
    pass; ``float64`` samples from float64 logits.
    """
    seq = check_generation(model, tokens, max_new_tokens, temperature, top_k, top_p, rng, crop)
    out = [seq]
    for nxt in stream_tokens(
        model, seq, max_new_tokens, temperature, top_k, top_p, rng, use_cache, float64, crop
    ):
        out.append(nxt[:, None])
    seq = np.concatenate(out, axis=1)
    return seq[0] if np.ndim(tokens) == 1 else seq


def check_generation(model, tokens, max_new_tokens, temperature, top_k, top_p, rng, crop):
    """The prompt as a (B, T) int64 array, after checking every argument of generation."""
    tokens = as_int_array(tokens, "tokens")
    if tokens.ndim not in (1, 2) or tokens.shape[-1] == 0 or tokens.size == 0:
        raise ValueError(
            f"tokens must be a non-empty prompt of shape (T,) or (B, T) "
            f"with T >= 1, got shape {tokens.shape}: the model needs at "
            f"least one token to continue"
        )
    n_vocab = model.tok.params["E"].shape[0]
    if tokens.min() < 0 or tokens.max() >= n_vocab:
        raise ValueError(
            f"tokens must be integers in [0, {n_vocab}), got {tokens.min()} to {tokens.max()}"
        )
    seq = (tokens[None] if tokens.ndim == 1 else tokens).astype(np.int64)
    n_new = as_int(max_new_tokens, "max_new_tokens")
    if not as_bool(crop, "crop") and seq.shape[1] + n_new > model.max_len:
        raise ValueError(
            f"prompt ({seq.shape[1]}) + max_new_tokens ({n_new}) exceeds max_len = "
            f"{model.max_len} (crop=True keeps the last tokens and writes on)"
        )
    if (
        isinstance(temperature, (bool, np.bool_))
        or not isinstance(temperature, numbers.Real)
        or not np.isfinite(temperature)
        or temperature < 0
    ):
        raise ValueError(f"temperature must be >= 0 and finite, got {temperature!r}")
    if top_k is not None:
        as_int(top_k, "top_k", 1)
    if top_p is not None:
        as_probability(top_p, "top_p", high_open=False)
    if temperature > 0 and rng is None:
        raise ValueError("sampling (temperature > 0) needs rng, a numpy.random.Generator")
    if rng is not None:
        as_rng(rng)
    return seq


def stream_tokens(
    model,
    seq,
    max_new_tokens,
    temperature=0.0,
    top_k=None,
    top_p=None,
    rng=None,
    use_cache=True,
    float64=False,
    crop=True,
):
    """Yield the new tokens (B,) one step at a time after the prompt ``seq`` (B, T).

    The arguments are those of :meth:`TinyGPT.generate`, already checked
    (:func:`check_generation`). Past the context (``crop=True``) it follows
    the one cropping rule the JS runtime follows too: with ``W = max_len`` and
    ``H = W // 2``, a prompt longer than ``W`` is cut to its last ``W``
    tokens; each new token is fed at the next position while the cache holds
    fewer than ``W``; once it is full, the cache is dropped and the last ``H``
    tokens of the text are encoded again at positions ``0 .. H - 1``. Every
    prediction then sees between ``H`` and ``W`` tokens, and re-encoding
    costs ``H`` tokens once every ``W - H`` new ones (learned positions
    change with the window, so the cached keys cannot be kept).

    With ``use_cache`` the model's fast decoder
    (:mod:`attention_lib.models.kv_cache`) runs when it has one, else
    ``forward`` with the model's own cache; without, ``forward`` reads the
    whole window at every step.
    """
    n_new = as_int(max_new_tokens, "max_new_tokens")
    if n_new == 0:
        return
    top_k = None if top_k is None else as_int(top_k, "top_k", 1)
    top_p = None if top_p is None else as_probability(top_p, "top_p", high_open=False)
    W = model.max_len
    H = max(W // 2, 1)  # (a one-token context re-encodes its one token)
    B = seq.shape[0]
    use_cache = as_bool(use_cache, "use_cache")
    if use_cache:
        from .kv_cache import decoder_for  # the fast path, when the model has one

        # the cache holds at most the context, and never more than this text needs
        # (rounded up to 256 positions, so that similar calls share one build)
        capacity = min(W, -(-(min(seq.shape[1], W) + n_new) // 256) * 256)
        decoder = decoder_for(model, B, capacity)
    else:
        decoder = None
    state = {"cache": None, "window": None}

    def encode(x):  # a fresh context holding x (B, n), n <= W
        if decoder is not None:
            decoder.reset()
            return decoder.prefill(x)
        if use_cache:
            state["cache"] = model.new_cache()
            return model.forward(x, state["cache"])[:, -1]
        state["window"] = x
        return model.forward(x)[:, -1]

    def feed(t):  # t (B,) at the next position
        if decoder is not None:
            return decoder.step(t)
        if use_cache:
            return model.forward(t[:, None], state["cache"])[:, -1]
        state["window"] = np.concatenate([state["window"], t[:, None]], axis=1)
        return model.forward(state["window"])[:, -1]

    # The running text, as far as the context may still need it: a buffer whose
    # last `held` columns are the context, refilled when it runs out.
    text = np.empty((B, 2 * W), dtype=np.int64)
    held = min(seq.shape[1], W)  # positions in the context
    text[:, :held] = seq[:, -held:]
    end = held
    logits = encode(text[:, :end])
    for i in range(n_new):
        logits = logits.astype(np.float64) if float64 else logits
        nxt = pick_next_token(logits, temperature, top_k, top_p, rng)  # (B,)
        yield nxt
        if i + 1 == n_new:
            break
        if end == text.shape[1]:  # keep the last W - 1 tokens
            text[:, : W - 1] = text[:, end - (W - 1) : end]
            end = W - 1
        text[:, end] = nxt
        end += 1
        if held < W:
            logits = feed(nxt)
            held += 1
        else:  # full: the last H tokens again, at positions 0 .. H - 1
            logits = encode(text[:, end - H : end])
            held = H


def pick_next_token(logits, temperature, top_k, top_p, rng):
    """The next token of each row of ``logits`` (B, V): greedy or sampled.

    Sampling divides the logits by ``temperature`` and refuses (``ValueError``
    naming ``temperature``) a division that is not finite, before drawing.
    The draw is the inverse CDF: with ``u`` uniform in [0, 1) the token is the
    first whose cumulative probability exceeds ``u``, so a token of probability
    0 (outside top-k or top-p) is never picked; if rounding leaves the total
    below ``u``, the last token of positive probability is taken.
    """
    if temperature == 0:
        return logits.argmax(axis=-1)
    z = scaled_logits(logits, temperature)
    p = softmax(filter_logits(z, top_k, top_p), axis=-1)
    u = rng.random((p.shape[0], 1))
    return inverse_cdf(p, u)


# -- checkpoints: TinyGPT.save() writes what TinyGPT.load() reads ---------------

#: The checkpoint stores each attention layer's query, key and value
#: projections side by side, as the first checkpoints did: W_QKV = [W_Q W_K W_V].
_FUSED = {"W_QKV": ("W_Q", "W_K", "W_V"), "b_QKV": ("b_Q", "b_K", "b_V")}


def _slots(model):
    """``{name in the file: [arrays of the model it holds, side by side]}``."""
    layers = [("tok", model.tok)] + ([("pos", model.pos)] if hasattr(model, "pos") else [])
    for i, block in enumerate(model.blocks):
        parts = [("ln1", block.ln1), ("attn", block.attn)]
        if not block.attention_only:
            parts += [("ln2", block.ln2), ("ffn.fc1", block.ffn.fc1), ("ffn.fc2", block.ffn.fc2)]
        layers += [(f"blocks.{i}.{name}", layer) for name, layer in parts]
    slots = {}
    for name, layer in layers + [("ln_f", model.ln_f), ("head", model.head)]:
        params = {k: [a] for k, a in layer.params.items()}
        if name.endswith(".attn"):
            for k, names in _FUSED.items():
                if names[0] in params:
                    params[k] = [params.pop(n)[0] for n in names]
        for k, arrays in params.items():
            slots[f"{name}.{k}"] = arrays
    return slots


def named_params(model: TinyGPT) -> dict[str, np.ndarray]:
    """``{name: array}`` for every parameter of a TinyGPT, named by where it sits.

    The names are the checkpoint's: each attention layer's ``W_Q, W_K, W_V``
    appear as one ``W_QKV`` (and the biases as ``b_QKV``), a copy of the
    three side by side.
    """
    return {
        k: a[0] if len(a) == 1 else np.concatenate(a, axis=-1) for k, a in _slots(model).items()
    }


def checkpoint_arrays(model: TinyGPT, cfg: dict, chars: list[str]) -> dict:
    """What :meth:`TinyGPT.save` writes: float16 parameters and the config as JSON."""
    arrays = {k: a.astype(np.float16) for k, a in named_params(model).items()}
    arrays["config"] = np.array(json.dumps({**cfg, "n_vocab": len(chars), "chars": "".join(chars)}))
    return arrays


#: The longest ``max_len`` a checkpoint without learned positions may claim
#: (their table is computed, not read from the file, so the file cannot bound it).
MAX_LEN_LIMIT = 2**16


def checkpoint_shapes(cfg: dict) -> dict:
    """``{name: shape}`` of every array :meth:`TinyGPT.save` writes for ``cfg`` (no arrays)."""
    V, d, d_ff = cfg["n_vocab"], cfg["d_model"], cfg["d_ff"]
    shapes = {"tok.E": (V, d)}
    if cfg["positions"] == "learned":
        shapes["pos.E"] = (cfg["max_len"], d)
    ln = {"gamma": (d,), "beta": (d,)}
    for i in range(cfg["n_layers"]):
        block = {f"ln1.{k}": v for k, v in ln.items()} | {f"ln2.{k}": v for k, v in ln.items()}
        block |= {"attn.W_QKV": (d, 3 * d), "attn.b_QKV": (3 * d,)}
        block |= {"attn.W_O": (d, d), "attn.b_O": (d,)}
        block |= {"ffn.fc1.W": (d, d_ff), "ffn.fc1.b": (d_ff,)}
        block |= {"ffn.fc2.W": (d_ff, d), "ffn.fc2.b": (d,)}
        shapes |= {f"blocks.{i}.{k}": v for k, v in block.items()}
    shapes |= {f"ln_f.{k}": v for k, v in ln.items()}
    return shapes | {"head.W": (d, V), "head.b": (V,)}


def checked_config(path: Path) -> dict:
    """The config of a checkpoint, checked against its arrays' headers (no array is read).

    Raises :class:`~attention_lib.models.checkpoint.CheckpointError` (a ``ValueError``)
    naming the file for a damaged file, a config that is not a TinyGPT's, or
    arrays of other shapes than the config claims: nothing is allocated for a
    model the file does not hold.
    """
    headers, cfg = read_config(Path(path), "a checkpoint written by TinyGPT.save()")
    if not isinstance(cfg, dict):
        raise CheckpointError(f"{path}: its config is a JSON {type(cfg).__name__}, not an object")
    for k in ("n_vocab", "d_model", "n_heads", "n_layers", "d_ff", "max_len"):
        if type(cfg.get(k)) is not int or cfg[k] < 1:
            raise CheckpointError(
                f"{path}: the config's {k} must be a positive integer, got {cfg.get(k)!r}"
            )
    chars = cfg.get("chars")
    if not isinstance(chars, str) or len(chars) != cfg["n_vocab"] or len(set(chars)) != len(chars):
        raise CheckpointError(
            f"{path}: the config's chars must be {cfg['n_vocab']} distinct characters "
            f"(one per token), got {str(chars)[:40]!r}"
        )
    if cfg.get("positions") not in ("learned", "sinusoidal", "rotary", None):
        raise CheckpointError(f"{path}: the config's positions {cfg.get('positions')!r} is unknown")
    if cfg["positions"] != "learned" and cfg["max_len"] > MAX_LEN_LIMIT:
        raise CheckpointError(f"{path}: the config's max_len must be at most {MAX_LEN_LIMIT}")
    dropout = cfg.get("dropout", 0.0)
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:
        raise CheckpointError(f"{path}: the config's dropout must be in [0, 1), got {dropout!r}")
    shapes = checkpoint_shapes(cfg)
    check_shapes(path, headers, shapes)
    return cfg


def _read(cls, path: str | os.PathLike) -> tuple[TinyGPT, list[str]]:
    path = Path(path)
    cfg = checked_config(path)
    keys = ("d_model", "n_heads", "n_layers", "d_ff", "max_len", "positions")
    sizes = {k: cfg[k] for k in keys} | {"dropout": cfg.get("dropout", 0.0)}
    model = cls(cfg["n_vocab"], rng=np.random.default_rng(0), **sizes)
    for layer in model.layers():  # float32, as the model was trained
        for k in layer.params:
            layer.params[k] = layer.params[k].astype(np.float32)
    with np.load(path, allow_pickle=False) as f:
        for k, arrays in _slots(model).items():
            widths = np.cumsum([a.shape[-1] for a in arrays])[:-1]
            value = f[k]
            if not np.isfinite(value).all():
                raise CheckpointError(f"{path}: {k} holds NaN or infinity")
            for i, part in enumerate(np.split(value, widths, axis=-1)):
                arrays[i][...] = part  # (the slots are views of the model's parameters)
    return model.train(False), list(cfg["chars"])
