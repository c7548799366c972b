"""A decoder-only Transformer (GPT) small enough to train on a laptop CPU."""

import numpy as np

from .._checks import as_int, as_numeric
from ..positions import sinusoidal_positions
from ..softmax import softmax
from ..nn.block import Composite, TransformerBlock
from ..nn.layers import Embedding, Linear
from ..nn.norm import LayerNorm
from ..nn.multi_head_attention import KVCache

_POSITIONS = ("learned", "sinusoidal", "rotary", None)


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
    positions : {"learned", "sinusoidal", "rotary", None}, optional
        How the model knows word order (chapter 8): a learned vector per
        position added to the token's (GPT-2, BERT; the default), the fixed
        sinusoids added likewise, rotary inside every attention layer, or
        nothing (the causal mask alone).
    attention_only : bool, optional
        Blocks without their feed-forward half (default False).
    dropout : float, optional
        Dropout in every block while ``training`` (default 0).

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

    def __init__(self, n_vocab, d_model, n_heads, n_layers, d_ff, max_len, rng,
                 positions="learned", attention_only=False, dropout=0.0):
        if positions not in _POSITIONS:
            raise ValueError(f"positions must be one of {_POSITIONS}, got {positions!r}")
        n_layers = as_int(n_layers, "n_layers", 1)
        self.max_len = as_int(max_len, "max_len", 1)
        self.positions = positions
        self.tok = Embedding(n_vocab, d_model, rng)
        if positions == "learned":
            self.pos = Embedding(self.max_len, d_model, rng)
        elif positions == "sinusoidal":
            self.pe = sinusoidal_positions(self.max_len, d_model)
        self.blocks = [TransformerBlock(d_model, n_heads, d_ff, rng, dropout,
                                        rotary=positions == "rotary",
                                        attention_only=attention_only)
                       for _ in range(n_layers)]
        self.ln_f = LayerNorm(d_model)
        self.head = Linear(d_model, n_vocab, rng)

    def layers(self):
        first = [self.tok] + ([self.pos] if self.positions == "learned" else [])
        return (first + [layer for b in self.blocks for layer in b.layers()]
                + [self.ln_f, self.head])

    def train(self, mode=True):
        """Switch dropout on (``mode=True``) or off; returns the model."""
        for block in self.blocks:
            for drop in block.dropouts():
                drop.training = bool(mode)
        return self

    def new_cache(self):
        """An empty KV cache, one :class:`KVCache` per block, for :meth:`forward`."""
        return [KVCache() for _ in self.blocks]

    def forward(self, tokens, cache=None):
        """Logits (B, T, n_vocab) for ``tokens`` (B, T).

        With a ``cache`` (from :meth:`new_cache`), ``tokens`` continue the
        sequence the cache holds: they take the next positions and attend
        to the cached keys and values too, which the call extends.
        """
        tokens = as_numeric(tokens, "tokens")
        if tokens.ndim != 2:
            raise ValueError(f"tokens must have shape (B, T), got {tokens.shape}")
        start = 0 if cache is None else len(cache[0])
        T = tokens.shape[1]
        if start + T > self.max_len:
            raise ValueError(f"the sequence would be {start + T} tokens long but "
                             f"max_len = {self.max_len}")
        x = self.tok.forward(tokens)                          # (B, T, d_model)
        if self.positions == "learned":
            x = x + self.pos.forward(np.arange(start, start + T))
        elif self.positions == "sinusoidal":
            x = x + self.pe[start:start + T]
        for i, block in enumerate(self.blocks):
            x = block.forward(x, None if cache is None else cache[i])
        return self.head.forward(self.ln_f.forward(x))        # (B, T, n_vocab)

    def backward(self, dlogits):
        """Fill ``grads`` of every layer from ``d loss / d logits`` (B, T, n_vocab)."""
        grad = self.ln_f.backward(self.head.backward(dlogits))
        for block in reversed(self.blocks):
            grad = block.backward(grad)
        if self.positions == "learned":
            self.pos.backward(grad.sum(axis=0))
        self.tok.backward(grad)

    def generate(self, tokens, max_new_tokens, temperature=1.0, top_k=None,
                 rng=None, use_cache=True):
        """Continue ``tokens`` by ``max_new_tokens`` tokens, one at a time.

        Parameters
        ----------
        tokens : array_like of int, shape (T,) or (B, T)
            The prompt.
        max_new_tokens : int
            How many tokens to add.
        temperature : float, optional
            0 picks the most likely token (greedy); otherwise the logits are
            divided by ``temperature`` and the next token is sampled.
        top_k : int, optional
            Sample only among the ``top_k`` most likely tokens.
        rng : numpy.random.Generator, optional
            Needed when sampling (``temperature > 0``).
        use_cache : bool, optional
            Keep every layer's keys and values and feed the model only the
            newest token (default True); False runs the whole sequence
            through the model at every step. Both give the same tokens.

        Returns
        -------
        ndarray of int, the prompt followed by the new tokens (same ndim).
        """
        tokens = as_numeric(tokens, "tokens")
        squeeze = tokens.ndim == 1
        seq = tokens[None] if squeeze else tokens
        n_new = as_int(max_new_tokens, "max_new_tokens")
        if seq.shape[1] + n_new > self.max_len:
            raise ValueError(f"prompt ({seq.shape[1]}) + max_new_tokens ({n_new}) "
                             f"exceeds max_len = {self.max_len}")
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}")
        if temperature > 0 and rng is None:
            raise ValueError("sampling (temperature > 0) needs rng, a numpy.random.Generator")
        was_training = [d.training for b in self.blocks for d in b.dropouts()]
        self.train(False)
        cache = self.new_cache() if use_cache else None
        step = seq                       # what the model reads at this step
        for _ in range(n_new):
            logits = self.forward(step if use_cache else seq, cache)[:, -1]
            nxt = _pick(logits, temperature, top_k, rng)     # (B,)
            seq = np.concatenate([seq, nxt[:, None]], axis=1)
            step = nxt[:, None]
        for d, mode in zip([d for b in self.blocks for d in b.dropouts()], was_training):
            d.training = mode
        return seq[0] if squeeze else seq


def _pick(logits, temperature, top_k, rng):
    """The next token of each row of ``logits`` (B, V): greedy or sampled."""
    if temperature == 0:
        return logits.argmax(axis=-1)
    z = logits / temperature
    if top_k is not None:
        k = as_int(top_k, "top_k", 1)
        kth = np.sort(z, axis=-1)[:, -min(k, z.shape[-1])][:, None]
        z = np.where(z < kth, -np.inf, z)
    p = softmax(z, axis=-1)
    u = rng.random((z.shape[0], 1))
    return np.minimum((p.cumsum(axis=-1) < u).sum(axis=-1), z.shape[-1] - 1)
