"""Beam search for any decoder that can take one step for many hypotheses at once.

A model provides ``step(y, t)``: the log-probabilities ``(N, V)`` of the next
token for ``N`` hypotheses whose last tokens are ``y`` ``(N,)`` at position ``t``,
and ``reorder(idx)``: keep the decoder states of rows ``idx`` (the surviving
hypotheses, in their new order). :func:`beam_search` does the rest, for
``B`` sentences of ``K`` hypotheses each, as ``B K`` rows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike


if TYPE_CHECKING:  # for the type hints only
    from .seq2seq import RNNsearch

PAD, BOS, EOS = 0, 1, 2


def length_penalty_gnmt(n: int | np.ndarray, alpha: float) -> float | np.ndarray:
    """GNMT's length penalty ``((5 + n) / 6) ** alpha`` (Wu et al., 2016)."""
    return ((5.0 + n) / 6.0) ** alpha


def beam_search(
    step: Callable,
    reorder: Callable,
    B: int,
    K: int,
    max_len: int | ArrayLike,
    length_penalty: float = 0.6,
) -> list:
    """The best hypothesis of each sentence (ids, without ``<bos>``/``<eos>``).

    Hypotheses are ranked by ``log p(y | x) / lp(|y|)``. At each step the ``2 K``
    best extensions of each sentence's live hypotheses are looked at in order: one
    that ends with ``<eos>`` is finished, the others fill the ``K`` live slots. A
    sentence stops when it has ``K`` finished hypotheses and no live one could still
    rank above them (the log-probability only falls), or after ``max_len`` steps:
    one number for every sentence, or one per sentence (B,), so that a sentence's
    output does not depend on the other sentences of its batch.
    """
    limits = np.broadcast_to(np.asarray(max_len, dtype=np.int64), (B,))
    scores = np.tile(np.r_[0.0, np.full(K - 1, -np.inf)], B)  # one live beam at first
    seqs = np.full((B * K, 1), BOS)
    finished = [[] for _ in range(B)]
    active = limits > 0
    for t in range(int(limits.max(initial=0))):
        logp = step(seqs[:, -1], t)  # (B K, V)
        V = logp.shape[1]
        lp = length_penalty_gnmt(t + 1, length_penalty)  # of a hypothesis that ends now
        cand = (scores[:, None] + logp).reshape(B, K * V)
        top = best_candidates(cand, 2 * K)
        rows, toks, new_scores = [], [], []
        for b in range(B):
            kept = 0
            for c in top[b]:
                k, tok, sc = c // V, c % V, cand[b, c]
                if not (active[b] and np.isfinite(sc)):
                    break
                if tok == EOS:
                    finished[b].append((sc / lp, seqs[b * K + k, 1:].tolist()))
                    continue
                rows.append(b * K + k)
                toks.append(tok)
                new_scores.append(sc)
                kept += 1
                if kept == K:
                    break
            dead = K - kept  # slots no live hypothesis fills
            rows += [b * K] * dead
            toks += [PAD] * dead
            new_scores += [-np.inf] * dead
            if active[b] and len(finished[b]) >= K:
                best_live = max(new_scores[-K:]) / length_penalty_gnmt(limits[b], length_penalty)
                worst_kept = sorted(s for s, _ in finished[b])[-K]
                if best_live < worst_kept:
                    active[b] = False
        idx = np.array(rows)
        seqs = np.concatenate([seqs[idx], np.array(toks)[:, None]], axis=1)
        scores = np.array(new_scores)
        reorder(idx)
        for b in np.flatnonzero(active & (limits == t + 1)):  # its last step
            _best_live(finished[b], scores, seqs, b, K)
            active[b] = False
        if not active.any():
            break
    out = []
    for b in range(B):
        _best_live(finished[b], scores, seqs, b, K)
        out.append(max(finished[b], key=lambda s: s[0])[1])
    return out


def best_candidates(cand: np.ndarray, n: int) -> np.ndarray:
    """The indices of the ``n`` largest entries of each row, largest first.

    Exactly ``np.argsort(-cand, axis=1, kind="stable")[:, :n]`` (equal values in
    the order of their indices), without sorting whole rows: ``np.argpartition``
    finds the ``n`` best in linear time, and only those are sorted. A row whose
    ``n``-th value is shared by entries left outside is sorted in full, so that
    ties keep the lowest indices as the stable sort does (only finite ties
    matter: beam search stops reading a row at its first ``-inf``).

    Examples
    --------
    >>> import numpy as np
    >>> best_candidates(np.array([[0.1, 0.5, 0.3, 0.5, -1.0]]), 3)
    array([[1, 3, 2]])
    """
    B, N = cand.shape
    n = min(n, N)
    if n == N:
        return np.argsort(-cand, axis=1, kind="stable")
    part = np.argpartition(-cand, n - 1, axis=1)[:, :n]  # the n best, in no order
    vals = np.take_along_axis(cand, part, axis=1)
    top = np.take_along_axis(part, np.lexsort((part, -vals), axis=-1), axis=1)
    kth = np.take_along_axis(cand, top[:, -1:], axis=1)  # each row's n-th value
    tied = (cand == kth).sum(axis=1) > (np.take_along_axis(cand, top, axis=1) == kth).sum(axis=1)
    for b in np.flatnonzero(tied & np.isfinite(kth[:, 0])):
        top[b] = np.argsort(-cand[b], kind="stable")[:n]
    return top


def _best_live(finished, scores, seqs, b, K):
    """If sentence ``b`` has no finished hypothesis, its best live one stands in."""
    if not finished:  # nothing ended: best live one
        k = int(np.argmax(scores[b * K : (b + 1) * K]))
        finished.append((0.0, seqs[b * K + k, 1:].tolist()))


def rnnsearch_beam_search(
    model: RNNsearch,
    src: ArrayLike,
    lengths: ArrayLike,
    beam: int = 4,
    length_penalty: float = 0.6,
    max_len: int | None = None,
) -> list:
    """Beam search for :class:`~attention_lib.models.RNNsearch`: its decoder step, ``K`` rows a sentence.

    The encoder runs once; its states are repeated for the ``K`` hypotheses of a
    sentence (they never change), and only the decoder state ``s`` follows the
    surviving hypotheses.
    """
    if int(beam) < 1:
        raise ValueError(f"beam must be at least 1, got {beam}")
    src, K = np.asarray(src), int(beam)
    B, S = src.shape
    # Each sentence's own limit: twice its length plus 10, not its batch's padded width.
    limits = 2 * np.asarray(lengths, dtype=np.int64) + 10 if max_len is None else int(max_len)
    H_enc, mask, s = model.encode(src, lengths)
    rows = np.repeat(np.arange(B), K)
    from .rnn_decoder import RNNsearchDecoder  # the layers' steps, overhead paid once

    summary = model._enc[1][rows]  # RNNencdec's fixed context
    decoder = RNNsearchDecoder(model, H_enc[rows], mask[rows], s[rows], summary=summary)
    return beam_search(decoder.log_probs, decoder.reorder, B, K, limits, length_penalty)
