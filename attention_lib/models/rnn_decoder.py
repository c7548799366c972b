"""RNNsearch's decoder, one step for many rows, with the overhead paid once per batch.

:meth:`RNNencdec.translate <attention_lib.models.RNNencdec.translate>` and
:func:`~attention_lib.models.decoding.rnnsearch_beam_search` run the layers'
own ``step`` methods: every step checks its arguments, joins the previous
word's embedding and the context into one input, multiplies it by the GRU's
input weights and computes the attention's context with ``np.einsum``. This
class does the same arithmetic for a whole batch of sentences (or of
hypotheses):

- the previous word's share of the GRU's input gates, ``E_y W_ih[:e] + b_ih``,
  is a table over the target vocabulary, computed once: a row lookup replaces
  a matrix product;
- the encoder states' projection ``U_a h_j`` is computed once per batch (as the
  layer does), the padding mask is an additive 0 / -inf row, and the context
  ``sum_j alpha_ij h_j`` is one batched matrix product;
- no step checks its arguments (the batch was checked when it was encoded).

The logits are those of the plain step to float rounding (the products are
grouped differently): ``tests/test_rnn_decoder.py`` compares them at every
step, and the translations of the committed test set.
"""

from __future__ import annotations

import numpy as np

from ..softmax import log_softmax


def _sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # as the GRU layer's (no overflow)


class RNNsearchDecoder:
    """The decoder of an encoded batch: :meth:`logits` of the next word, step by step.

    Parameters
    ----------
    model : RNNencdec or RNNsearch
    H_enc : ndarray (N, S, 2 hidden)
        The encoder's states (:meth:`~attention_lib.models.RNNencdec.encode`),
        one row per sentence or hypothesis.
    mask : ndarray of bool (N, S)
        True where a row has a source word.
    s0 : ndarray (N, hidden)
        The decoder's first state.
    summary : ndarray (N, 2 hidden), optional
        RNNencdec's fixed context (the encoder's summary); not used by RNNsearch.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.models import RNNsearch
    >>> model = RNNsearch(10, 12, emb=8, hidden=6, attn=5)
    >>> src, lengths = np.array([[3, 4, 5], [6, 7, 0]]), np.array([3, 2])
    >>> H, mask, s0 = model.encode(src, lengths)
    >>> dec = RNNsearchDecoder(model, H, mask, s0)
    >>> dec.logits(np.array([1, 1])).shape      # after <bos>: (N, target vocabulary)
    (2, 12)
    """

    def __init__(self, model, H_enc, mask, s0, summary=None):
        p, att = model.dec.params, model.att if model.attention else None
        E = model.tgt_emb.params["E"]
        e, hidden = E.shape[1], model.hidden
        self.hidden, self.dtype = hidden, E.dtype
        # the previous word's share of the input gates, for every word at once
        self.gates_E = E @ p["W_ih"][:e] + p["b_ih"]  # (V, 3 hidden)
        self.W_ic = np.ascontiguousarray(p["W_ih"][e:])  # the context's share
        self.W_hh, self.b_hh = p["W_hh"], p["b_hh"]
        self.E = E
        self.W_out, self.b_out = model.out.params["W"], model.out.params["b"]
        self.s = s0
        self.H = H_enc
        if att is not None:
            self.UH = H_enc @ att.params["U_a"]  # (N, S, d_a)
            self.W_a, self.v = att.params["W_a"], att.params["v"]
            self.mask = np.where(mask, 0, -np.inf).astype(self.dtype)
            self.fixed = None
        else:
            self.fixed = summary  # RNNencdec: the same context at every step
        self.alpha = None

    def context(self):
        """``c_i`` (N, 2 hidden) from the current state; sets :attr:`alpha` (N, S)."""
        if self.fixed is not None:
            return self.fixed
        pre = self.UH + (self.s @ self.W_a)[:, None, :]  # (N, S, d_a)
        np.tanh(pre, out=pre)
        scores = pre @ self.v  # (N, S)
        scores += self.mask
        scores -= np.maximum.reduce(scores, axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= np.add.reduce(scores, axis=-1, keepdims=True)
        self.alpha = scores
        return (scores[:, None, :] @ self.H)[:, 0]

    def logits(self, y: np.ndarray) -> np.ndarray:
        """Logits (N, V) of the next word after the words ``y`` (N,); the state moves on."""
        c = self.context()
        h, H = self.s, self.hidden
        gi = self.gates_E[y] + c @ self.W_ic
        gh = h @ self.W_hh
        gh += self.b_hh
        r = _sigmoid(gi[:, :H] + gh[:, :H])
        z = _sigmoid(gi[:, H : 2 * H] + gh[:, H : 2 * H])
        n = np.tanh(gi[:, 2 * H :] + r * gh[:, 2 * H :])
        self.s = s = (1 - z) * n + z * h
        out = np.concatenate([s, c, self.E[y]], axis=-1) @ self.W_out
        out += self.b_out
        return out

    def log_probs(self, y: np.ndarray, t: int = 0) -> np.ndarray:
        """:func:`~attention_lib.log_softmax` of :meth:`logits`: beam search's ``step(y, t)``."""
        return log_softmax(self.logits(y))

    def reorder(self, idx: np.ndarray) -> None:
        """Keep the state of rows ``idx`` (beam search's surviving hypotheses).

        The encoder's rows are those of the sentences, which the hypotheses of
        one sentence share and never leave; only the decoder state follows.
        """
        self.s = self.s[idx]
