"""Encoder-decoders for translation: RNNencdec and RNNsearch (Bahdanau et al., 2015).

Both share the encoder, a bidirectional GRU over the source words ``x_j``::

    h_j = [h->_j ; h<-_j]                  (B, S, 2H)   forward and backward GRU states

and a GRU decoder with teacher forcing that reads the previous target word
``y_{i-1}`` and a context ``c_i``::

    s_0 = tanh([h->_last ; h<-_1] W_s + b_s)            (B, H)
    s_i = GRU([E y_{i-1} ; c_i], s_{i-1})               (B, H)
    p(y_i | ...) = softmax([s_i ; c_i ; E y_{i-1}] W_o + b_o)   (B, V)

They differ only in the context:

- :class:`RNNencdec`: ``c_i = [h->_last ; h<-_1]`` for every ``i``: the whole
  sentence squeezed into one vector of ``2H`` numbers (the bottleneck of
  chapter 1);
- :class:`RNNsearch`: ``c_i = sum_j alpha_ij h_j`` with
  ``alpha_ij = softmax_j(v^T tanh(W_a s_{i-1} + U_a h_j))``, the additive
  attention of chapter 2 with learned weights
  (:class:`attention_lib.nn.AdditiveAttention`).

Every backward pass is written by hand (through time, through the
attention); ``tests/test_seq2seq.py`` checks every parameter against central
differences.
"""

import json

import numpy as np

from ..masks import padding_mask
from ..nn.additive import AdditiveAttention
from ..nn.layers import Embedding, Linear
from ..nn.losses import softmax_cross_entropy
from ..nn.recurrent import GRU, GRUCell
from ..toy_translation import BOS, EOS, PAD


class RNNencdec:
    """An encoder-decoder whose decoder sees the source only through its final states.

    Parameters
    ----------
    n_src, n_tgt : int
        Source and target vocabulary sizes (id 0 is padding, 1 ``<bos>``, 2 ``<eos>``).
    emb : int
        Word-embedding size ``e``.
    hidden : int
        GRU state size ``H`` (per direction in the encoder; the decoder's too).
    attn : int
        Attention hidden size ``d_a`` (used by :class:`RNNsearch` only).
    seed : int
        Seeds the initial weights.
    dtype : numpy dtype
        float32 to train, float64 to check gradients.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.models import RNNsearch
    >>> model = RNNsearch(n_src=7, n_tgt=6, emb=3, hidden=4, attn=5, seed=0)
    >>> src = np.array([[3, 4, 5], [6, 3, 0]])           # second sentence padded
    >>> tgt_in, tgt_out = np.array([[1, 3, 4], [1, 5, 0]]), np.array([[3, 4, 2], [5, 2, 0]])
    >>> loss = model.loss(src, [3, 2], tgt_in, tgt_out)
    >>> model.backward()
    >>> model.attention_weights.shape        # (B, T, S): one row per target word
    (2, 3, 3)
    >>> float(model.attention_weights[1, :, 2].max())    # the padding gets nothing
    0.0
    """

    attention = False

    def __init__(self, n_src, n_tgt, emb=16, hidden=48, attn=32, seed=0, dtype=np.float32):
        self.config = {"model": type(self).__name__, "n_src": int(n_src), "n_tgt": int(n_tgt),
                       "emb": int(emb), "hidden": int(hidden), "attn": int(attn), "seed": int(seed)}
        rng = np.random.default_rng(seed)
        H = hidden
        self.src_emb = Embedding(n_src, emb, rng)
        self.enc_fwd = GRU(emb, H, rng, dtype)
        self.enc_bwd = GRU(emb, H, rng, dtype, reverse=True)
        self.init = Linear(2 * H, H, rng)                     # s_0 from the final states
        self.tgt_emb = Embedding(n_tgt, emb, rng)
        self.dec = GRUCell(emb + 2 * H, H, rng, dtype)
        self.att = AdditiveAttention(2 * H, H, attn, rng, dtype) if self.attention else None
        self.out = Linear(H + 2 * H + emb, n_tgt, rng)
        for layer in self.layers():                          # Linear/Embedding draw float64
            layer.params = {k: v.astype(dtype) for k, v in layer.params.items()}
        self.dtype, self.hidden, self.emb = np.dtype(dtype), H, emb

    def layers(self):
        """Every layer with parameters, each once (what :class:`~attention_lib.nn.Adam` takes)."""
        layers = [self.src_emb, self.enc_fwd, self.enc_bwd, self.init,
                  self.tgt_emb, self.dec, self.att, self.out]
        return [layer for layer in layers if layer is not None]

    def named_layers(self):
        names = ["src_emb", "enc_fwd", "enc_bwd", "init", "tgt_emb", "dec", "att", "out"]
        return [(n, getattr(self, n)) for n in names if getattr(self, n) is not None]

    def n_params(self):
        return sum(p.size for layer in self.layers() for p in layer.params.values())

    # -- encoder ---------------------------------------------------------
    def encode(self, src, lengths):
        """Encoder states ``H`` ``(B, S, 2H)``, their padding mask ``(B, S)`` and ``s_0`` ``(B, H)``."""
        src = np.asarray(src)
        lengths = np.asarray(lengths, dtype=np.int64)
        if src.ndim != 2 or lengths.shape != (src.shape[0],):
            raise ValueError(f"src must be (B, S) and lengths (B,), got {src.shape} and {lengths.shape}")
        if lengths.min() < 1:
            raise ValueError("lengths must be at least 1: every sentence needs a word")
        mask = padding_mask(lengths, src.shape[1])
        x = self.src_emb.forward(src)                         # (B, S, e)
        h_fwd = self.enc_fwd.forward(x, mask)                 # (B, S, H)
        h_bwd = self.enc_bwd.forward(x, mask)                 # (B, S, H)
        B = src.shape[0]
        summary = np.concatenate([h_fwd[np.arange(B), lengths - 1], h_bwd[:, 0]], axis=-1)
        s0 = np.tanh(self.init.forward(summary))              # (B, H)
        self._enc = (lengths, summary, s0)
        return np.concatenate([h_fwd, h_bwd], axis=-1), mask, s0

    def _encode_backward(self, dH, dsummary, ds0):
        lengths, summary, s0 = self._enc
        H, B = self.hidden, dH.shape[0]
        dsummary = dsummary + self.init.backward(ds0 * (1 - s0 * s0))
        dh_fwd, dh_bwd = dH[..., :H].copy(), dH[..., H:].copy()
        dh_fwd[np.arange(B), lengths - 1] += dsummary[:, :H]
        dh_bwd[:, 0] += dsummary[:, H:]
        dx = self.enc_fwd.backward(dh_fwd) + self.enc_bwd.backward(dh_bwd)
        self.src_emb.backward(dx)

    # -- context ---------------------------------------------------------
    def _start_context(self, H, mask):
        self._summary = self._enc[1]

    def _context(self, s):
        """``c_i`` and ``alpha_i`` (None without attention) from ``s_{i-1}``."""
        return self._summary, None, None

    # -- training --------------------------------------------------------
    def loss(self, src, lengths, tgt_in, tgt_out):
        """Mean cross-entropy per target word (padding excluded), with teacher forcing.

        Parameters
        ----------
        src : ndarray of int, shape (B, S)
        lengths : sequence of int, shape (B,)
        tgt_in, tgt_out : ndarray of int, shape (B, T)
            ``<bos> y_1 .. y_n`` and ``y_1 .. y_n <eos>``, padded with 0.
        """
        tgt_in, tgt_out = np.asarray(tgt_in), np.asarray(tgt_out)
        H_enc, mask, s = self.encode(src, lengths)
        self._start_context(H_enc, mask)
        Ey = self.tgt_emb.forward(tgt_in)                     # (B, T, e)
        B, T = tgt_in.shape
        S_all = np.empty((B, T, self.hidden), self.dtype)
        C_all = np.empty((B, T, H_enc.shape[-1]), self.dtype)
        alphas = np.zeros((B, T, H_enc.shape[1]), self.dtype)
        self.dec.zero_grad()
        self._steps = []
        for i in range(T):
            c, alpha, att_cache = self._context(s)            # c_i from s_{i-1}
            s, cell_cache = self.dec.step(np.concatenate([Ey[:, i], c], axis=-1), s)
            S_all[:, i], C_all[:, i] = s, c
            if alpha is not None:
                alphas[:, i] = alpha
            self._steps.append((att_cache, cell_cache))
        self.attention_weights = alphas if self.attention else None
        logits = self.out.forward(np.concatenate([S_all, C_all, Ey], axis=-1))   # (B, T, V)
        keep = tgt_out != PAD
        loss, g = softmax_cross_entropy(logits[keep], tgt_out[keep])
        self._dlogits = np.zeros_like(logits)
        self._dlogits[keep] = g
        self._shapes = (Ey.shape[-1], H_enc.shape)
        return loss

    def backward(self):
        """Gradients of the last :meth:`loss` for every parameter, in each layer's ``grads``."""
        e, H_shape = self._shapes
        dO = self.out.backward(self._dlogits)
        H = self.hidden
        dS, dC, dEy = dO[..., :H], dO[..., H:H + H_shape[-1]], dO[..., H + H_shape[-1]:].copy()
        ds = np.zeros_like(dS[:, 0])
        dsummary = np.zeros((dS.shape[0], H_shape[-1]), dS.dtype)
        for i in range(dS.shape[1] - 1, -1, -1):
            att_cache, cell_cache = self._steps[i]
            dx, ds = self.dec.step_backward(dS[:, i] + ds, cell_cache)
            dEy[:, i] += dx[:, :e]
            dc = dC[:, i] + dx[:, e:]
            if self.attention:
                ds = ds + self.att.step_backward(dc, att_cache)
            else:
                dsummary += dc
        self.tgt_emb.backward(dEy)
        dH = self.att.keys_backward() if self.attention else np.zeros(H_shape, dS.dtype)
        self._encode_backward(dH, dsummary, ds)

    # -- inference -------------------------------------------------------
    def translate(self, src, lengths, max_len=None):
        """Greedy decoding without teacher forcing.

        Returns
        -------
        ids : list of list of int
            Each sentence's output up to (without) its ``<eos>``.
        weights : ndarray, shape (B, T_out, S)
            The attention weights at each output step (zeros without attention).
        """
        src = np.asarray(src)
        H_enc, mask, s = self.encode(src, lengths)
        self._start_context(H_enc, mask)
        B, S = src.shape
        max_len = 2 * S + 10 if max_len is None else int(max_len)
        y = np.full(B, BOS)
        done = np.zeros(B, bool)
        out, weights = [], []
        for _ in range(max_len):
            c, alpha, _ = self._context(s)
            ey = self.tgt_emb.params["E"][y]
            s, _ = self.dec.step(np.concatenate([ey, c], axis=-1), s)
            logits = np.concatenate([s, c, ey], axis=-1) @ self.out.params["W"] + self.out.params["b"]
            y = np.where(done, PAD, logits.argmax(axis=-1))
            out.append(y)
            weights.append(np.zeros((B, S), self.dtype) if alpha is None else alpha)
            done |= y == EOS
            if done.all():
                break
        out = np.stack(out, axis=1)
        ids = []
        for row in out:
            row = row.tolist()
            ids.append(row[:row.index(EOS)] if EOS in row else row)
        return ids, np.stack(weights, axis=1)

    # -- checkpoints -----------------------------------------------------
    def state_dict(self):
        """Every parameter as ``{"layer.param": array}`` (what :func:`save` writes)."""
        return {f"{n}.{k}": v for n, layer in self.named_layers() for k, v in layer.params.items()}

    def load_state_dict(self, state):
        for n, layer in self.named_layers():
            for k, v in layer.params.items():
                arr = np.asarray(state[f"{n}.{k}"])
                if arr.shape != v.shape:
                    raise ValueError(f"{n}.{k} has shape {arr.shape} in the checkpoint "
                                     f"but {v.shape} in the model")
                layer.params[k] = arr.astype(self.dtype)


class RNNsearch(RNNencdec):
    """An encoder-decoder whose decoder attends over all encoder states at every step.

    The same parameters as :class:`RNNencdec`, plus :class:`~attention_lib.nn.AdditiveAttention`
    (``U_a, W_a, v``). After :meth:`loss`, ``attention_weights`` holds
    ``alpha_ij`` for every target word ``i`` and source word ``j``, ``(B, T, S)``.
    """

    attention = True

    def _start_context(self, H, mask):
        self.att.set_keys(H, mask)

    def _context(self, s):
        return self.att.step(s)


MODELS = {"RNNencdec": RNNencdec, "RNNsearch": RNNsearch}


def save(model, path, **extra):
    """Write a model to ``path`` as ``.npz``: its parameters and its config (JSON), no pickles."""
    arrays = dict(model.state_dict())
    arrays["config"] = np.array(json.dumps({**model.config, **extra}, sort_keys=True))
    np.savez(path, **arrays)


def load(path, dtype=np.float32):
    """Read a model written by :func:`save` (``allow_pickle=False``)."""
    with np.load(path, allow_pickle=False) as f:
        config = json.loads(str(f["config"]))
        kwargs = {k: config[k] for k in ("n_src", "n_tgt", "emb", "hidden", "attn", "seed")}
        model = MODELS[config["model"]](**kwargs, dtype=dtype)
        model.load_state_dict({k: f[k] for k in f.files if k != "config"})
    model.config = config
    return model
