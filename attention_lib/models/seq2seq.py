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
import os
import zipfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from .._checks import as_float_dtype, as_int, as_int_array
from ..masks import padding_mask
from ..nn.additive import AdditiveAttention
from ..nn.block import Composite
from ..nn.layers import Embedding, Linear
from ..nn.losses import softmax_cross_entropy
from ..nn.recurrent import GRU, GRUCell
from ..data.paths import write_atomic
from .checkpoint import CheckpointError, check_shapes, read_config
from ..data.toy_translation import BOS, EOS, PAD


class RNNencdec(Composite):
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

    def __init__(
        self,
        n_src: int,
        n_tgt: int,
        emb: int = 16,
        hidden: int = 48,
        attn: int = 32,
        seed: int = 0,
        dtype: DTypeLike = np.float32,
    ) -> None:
        self.config = {
            "model": type(self).__name__,
            **self.check_config(n_src, n_tgt, emb, hidden, attn, seed),
        }
        dtype = as_float_dtype(dtype)
        n_src, n_tgt, emb, hidden, attn = (
            self.config[k] for k in ("n_src", "n_tgt", "emb", "hidden", "attn")
        )
        self._dlogits = None  # set by loss(), needed by backward()
        rng = np.random.default_rng(seed)
        H = hidden
        self.src_emb = Embedding(n_src, emb, rng)
        self.enc_fwd = GRU(emb, H, rng, dtype)
        self.enc_bwd = GRU(emb, H, rng, dtype, reverse=True)
        self.init = Linear(2 * H, H, rng)  # s_0 from the final states
        self.tgt_emb = Embedding(n_tgt, emb, rng)
        self.dec = GRUCell(emb + 2 * H, H, rng, dtype)
        self.att = AdditiveAttention(2 * H, H, attn, rng, dtype) if self.attention else None
        self.out = Linear(H + 2 * H + emb, n_tgt, rng)
        for layer in self.layers():  # Linear/Embedding draw float64
            layer.params = {k: v.astype(dtype) for k, v in layer.params.items()}
        self.dtype, self.hidden, self.emb = np.dtype(dtype), H, emb

    @staticmethod
    def check_config(
        n_src: int, n_tgt: int, emb: int, hidden: int, attn: int, seed: int
    ) -> dict[str, int]:
        """The sizes as a dict of ints, or ``TypeError``/``ValueError`` naming the bad one.

        ``n_tgt`` counts padding, ``<bos>`` and ``<eos>`` (ids 0, 1, 2), so it is at least 3.
        """
        return {
            "n_src": as_int(n_src, "n_src", 2),
            "n_tgt": as_int(n_tgt, "n_tgt", 3),
            "emb": as_int(emb, "emb", 1),
            "hidden": as_int(hidden, "hidden", 1),
            "attn": as_int(attn, "attn", 1),
            "seed": as_int(seed, "seed", 0),
        }

    @classmethod
    def param_shapes(
        cls, n_src: int, n_tgt: int, emb: int, hidden: int, attn: int, seed: int = 0
    ) -> dict[str, tuple[int, ...]]:
        """The shape of every parameter, ``{"layer.param": shape}``, without building the model.

        :func:`load` compares a file's arrays with these before it allocates anything.
        """
        c = cls.check_config(n_src, n_tgt, emb, hidden, attn, seed)
        e, H, a = c["emb"], c["hidden"], c["attn"]

        def gru(name, d_in):
            return {
                f"{name}.W_ih": (d_in, 3 * H),
                f"{name}.W_hh": (H, 3 * H),
                f"{name}.b_ih": (3 * H,),
                f"{name}.b_hh": (3 * H,),
            }

        shapes = {
            "src_emb.E": (c["n_src"], e),
            **gru("enc_fwd", e),
            **gru("enc_bwd", e),
            "init.W": (2 * H, H),
            "init.b": (H,),
            "tgt_emb.E": (c["n_tgt"], e),
            **gru("dec", e + 2 * H),
        }
        if cls.attention:
            shapes.update({"att.U_a": (2 * H, a), "att.W_a": (H, a), "att.v": (a,)})
        shapes.update({"out.W": (3 * H + e, c["n_tgt"]), "out.b": (c["n_tgt"],)})
        return shapes

    def named_layers(self) -> list[tuple[str, object]]:
        names = ["src_emb", "enc_fwd", "enc_bwd", "init", "tgt_emb", "dec", "att", "out"]
        return [(n, getattr(self, n)) for n in names if getattr(self, n) is not None]

    # -- encoder ---------------------------------------------------------
    def encode(
        self, src: ArrayLike, lengths: ArrayLike
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Encoder states ``H`` ``(B, S, 2H)``, their padding mask ``(B, S)`` and ``s_0`` ``(B, H)``."""
        src, lengths = self._check_source(src, lengths)
        self._dlogits = None  # a new forward: the last loss's gradients are gone
        mask = padding_mask(lengths, src.shape[1])
        x = self.src_emb.forward(src)  # (B, S, e)
        h_fwd = self.enc_fwd.forward(x, mask)  # (B, S, H)
        h_bwd = self.enc_bwd.forward(x, mask)  # (B, S, H)
        B = src.shape[0]
        summary = np.concatenate([h_fwd[np.arange(B), lengths - 1], h_bwd[:, 0]], axis=-1)
        s0 = np.tanh(self.init.forward(summary))  # (B, H)
        self._enc = (lengths, summary, s0)
        return np.concatenate([h_fwd, h_bwd], axis=-1), mask, s0

    @staticmethod
    def _check_source(src, lengths):
        src = as_int_array(src, "src")
        if src.ndim == 2 and (src.shape[0] == 0 or src.shape[1] == 0):
            raise ValueError(
                f"src must hold at least one sentence of at least one word, got shape {src.shape}"
            )
        lengths = as_int_array(lengths, "lengths")
        if src.ndim != 2 or lengths.shape != (src.shape[:1]):
            raise ValueError(
                f"src must be (B, S) and lengths (B,), got {src.shape} and {lengths.shape}"
            )
        if lengths.min() < 1 or lengths.max() > src.shape[1]:
            raise ValueError(
                f"lengths must lie in [1, {src.shape[1]}] (every sentence "
                f"needs a word, and src has {src.shape[1]} columns), got "
                f"{lengths.min()} to {lengths.max()}"
            )
        return src, lengths.astype(np.int64)

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
    def loss(
        self, src: ArrayLike, lengths: ArrayLike, tgt_in: ArrayLike, tgt_out: ArrayLike
    ) -> float:
        """Mean cross-entropy per target word (padding excluded), with teacher forcing.

        Parameters
        ----------
        src : ndarray of int, shape (B, S)
        lengths : sequence of int, shape (B,)
        tgt_in, tgt_out : ndarray of int, shape (B, T)
            ``<bos> y_1 .. y_n`` and ``y_1 .. y_n <eos>``, padded with 0.
        """
        src, lengths = self._check_source(src, lengths)
        tgt_in, tgt_out = as_int_array(tgt_in, "tgt_in"), as_int_array(tgt_out, "tgt_out")
        if tgt_in.ndim != 2 or tgt_out.shape != tgt_in.shape or tgt_in.shape[0] != src.shape[0]:
            raise ValueError(
                f"tgt_in and tgt_out must both have shape (B, T) with B = "
                f"{src.shape[0]} as in src, got {tgt_in.shape} and {tgt_out.shape}"
            )
        if not (tgt_out != PAD).any():
            raise ValueError("tgt_out holds only padding: there is no target word to score")
        n_tgt = self.tgt_emb.params["E"].shape[0]
        for name, t in (("tgt_in", tgt_in), ("tgt_out", tgt_out)):
            if t.min() < 0 or t.max() >= n_tgt:
                raise ValueError(
                    f"{name} must hold target ids in [0, {n_tgt}), got {t.min()} to {t.max()}"
                )
        H_enc, mask, s = self.encode(src, lengths)
        self._start_context(H_enc, mask)
        Ey = self.tgt_emb.forward(tgt_in)  # (B, T, e)
        B, T = tgt_in.shape
        S_all = np.empty((B, T, self.hidden), self.dtype)
        C_all = np.empty((B, T, H_enc.shape[-1]), self.dtype)
        alphas = np.zeros((B, T, H_enc.shape[1]), self.dtype)
        self.dec.zero_grad()
        self._steps = []
        for i in range(T):
            c, alpha, att_cache = self._context(s)  # c_i from s_{i-1}
            s, cell_cache = self.dec.step(np.concatenate([Ey[:, i], c], axis=-1), s)
            S_all[:, i], C_all[:, i] = s, c
            if alpha is not None:
                alphas[:, i] = alpha
            self._steps.append((att_cache, cell_cache))
        self.attention_weights = alphas if self.attention else None
        logits = self.out.forward(np.concatenate([S_all, C_all, Ey], axis=-1))  # (B, T, V)
        keep = tgt_out != PAD
        loss, g = softmax_cross_entropy(logits[keep], tgt_out[keep])
        self._dlogits = np.zeros_like(logits)
        self._dlogits[keep] = g
        self._shapes = (Ey.shape[-1], H_enc.shape)
        return loss

    def backward(self) -> None:
        """Gradients of the last :meth:`loss` for every parameter, in each layer's ``grads``.

        Every gradient is overwritten, so a second call gives the same gradients
        again (not twice them). It needs a :meth:`loss` since the last
        :meth:`encode` or :meth:`translate`, which replace what it reads.
        """
        if self._dlogits is None:
            raise RuntimeError(
                f"{type(self).__name__}.backward() needs a loss() first "
                f"(and none since the last encode() or translate())"
            )
        self.dec.zero_grad()  # the decoder and attention add up over steps
        if self.attention:
            self.att.zero_grad()
        e, H_shape = self._shapes
        dO = self.out.backward(self._dlogits)
        H = self.hidden
        dS, dC, dEy = dO[..., :H], dO[..., H : H + H_shape[-1]], dO[..., H + H_shape[-1] :].copy()
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
    def translate(
        self, src: ArrayLike, lengths: ArrayLike, max_len: int | None = None
    ) -> tuple[list[list[int]], np.ndarray]:
        """Greedy decoding without teacher forcing.

        Returns
        -------
        ids : list of list of int
            Each sentence's output up to (without) its ``<eos>``.
        weights : ndarray, shape (B, T_out, S)
            The attention weights at each output step (zeros without attention).
        """
        src, lengths = self._check_source(src, lengths)
        # Each sentence's own limit (2 * its length + 10), not its batch's padded width.
        limits = (
            2 * lengths + 10
            if max_len is None
            else np.full(len(lengths), as_int(max_len, "max_len", 1))
        )
        max_len = int(limits.max())
        H_enc, mask, s = self.encode(src, lengths)
        from .rnn_decoder import RNNsearchDecoder  # the layers' steps, overhead paid once

        decoder = RNNsearchDecoder(self, H_enc, mask, s, summary=self._enc[1])
        B, S = src.shape
        y = np.full(B, BOS)
        done = np.zeros(B, bool)
        out, weights = [], []
        for t in range(max_len):
            logits = decoder.logits(y)
            alpha = decoder.alpha
            y = np.where(done, PAD, logits.argmax(axis=-1))
            out.append(y)
            weights.append(np.zeros((B, S), self.dtype) if alpha is None else alpha)
            done |= (y == EOS) | (limits <= t + 1)
            if done.all():
                break
        out = np.stack(out, axis=1)
        ids = []
        for row in out:
            row = row.tolist()
            ids.append(row[: row.index(EOS)] if EOS in row else [t for t in row if t != PAD])
        return ids, np.stack(weights, axis=1)

    # -- checkpoints: state_dict() and save() write what load_state_dict() and load() read
    def load_state_dict(self, state: Mapping[str, ArrayLike], strict: bool = True) -> None:
        super().load_state_dict(state, strict)  # Composite's: all checked, then all set
        self._dlogits = None

    def save(self, path: str | os.PathLike, **extra) -> Path:
        """Write this model to ``path`` (``.npz``, config as JSON): :func:`save`."""
        return save(self, path, **extra)

    @classmethod
    def load(cls, path: str | os.PathLike, dtype: DTypeLike = np.float32) -> "RNNencdec":
        """A model of this class read from ``path``: :func:`load`, which checks everything.

        A file that holds the other model (an RNNsearch for ``RNNencdec.load``)
        raises :class:`~attention_lib.models.checkpoint.CheckpointError`.
        """
        return load(path, dtype, model=cls.__name__)


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


def save(model: RNNencdec, path: str | os.PathLike, **extra) -> Path:
    """Write a model to ``path`` as ``.npz``: its parameters and its config (JSON), no pickles.

    ``extra`` items are added to the config (they cannot replace its keys).
    The file is written under a temporary name and then renamed, so an
    interrupted save leaves the previous file (or none), never half a file.
    As :func:`numpy.savez` does, ``.npz`` is appended to a path without it.
    """
    clash = sorted(set(extra) & set(model.config))
    if clash:
        raise ValueError(f"extra keys {clash} would overwrite the model's own config")
    config = json.dumps({**model.config, **extra}, sort_keys=True)
    path = Path(path)
    if path.suffix != ".npz":
        path = path.with_name(path.name + ".npz")
    arrays = dict(model.state_dict())
    arrays["config"] = np.array(config)
    write_atomic(path, lambda f: np.savez(f, **arrays), "wb")
    return path


def load(
    path: str | os.PathLike, dtype: DTypeLike = np.float32, model: RNNencdec | None = None
) -> RNNencdec:
    """Read a model written by :func:`save` (``allow_pickle=False``).

    Everything is checked before the model is built: the file is a zip of
    arrays, its config is valid JSON naming a known model (``model``, a
    class name such as ``"RNNsearch"``, if given, must match), and every
    array has the shape that config implies, with nothing missing or extra.
    A tampered config asking for a huge model therefore allocates nothing.

    Raises
    ------
    FileNotFoundError
        If there is no file at ``path``.
    CheckpointError
        (a ``ValueError``) naming the file and the fault, for anything else.
    """
    path = Path(path)
    dtype = as_float_dtype(dtype)
    if model is not None and model not in MODELS:
        raise ValueError(f"model must be one of {sorted(MODELS)}, got {model!r}")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such checkpoint file")
    headers, config = read_config(path, "a checkpoint written by save() (a zip of .npy arrays)")
    try:
        if not isinstance(config, dict):
            raise TypeError("the config is not a JSON object")
        name = config.get("model")
        if name not in MODELS:
            raise ValueError(f"its config names model {name!r}, not one of {sorted(MODELS)}")
        if model is not None and name != model:
            raise ValueError(f"it holds a {name}, not a {model}")
        sizes = {k: config[k] for k in ("n_src", "n_tgt", "emb", "hidden", "attn", "seed")}
        cls = MODELS[name]
        shapes = cls.param_shapes(**sizes)
    except (KeyError, TypeError, ValueError) as err:  # JSONDecodeError is a ValueError
        what = f"the config has no {err}" if isinstance(err, KeyError) else err
        raise CheckpointError(f"{path}: {what}") from None
    check_shapes(path, headers, shapes, name)
    built = cls(**sizes, dtype=dtype)
    try:
        with np.load(path, allow_pickle=False) as f:
            built.load_state_dict({k: f[k] for k in shapes})
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as err:
        raise CheckpointError(f"{path}: {err}") from None
    built.config = config
    return built
