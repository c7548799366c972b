"""A draft for speculative decoding that costs almost nothing: a table distilled from the target.

In NumPy a neural draft is not cheap: a one-layer model's token costs about a
fifth of the four-layer target's (Python's overhead per layer, not arithmetic),
and it agrees with the target a third of the time. This draft is a table: for
each context of the last ``n`` characters seen in the training text (``n`` from
``order`` down to 1), the character the **target** most often predicts after
it (its argmax, read from one pass of the target over the training text:
distillation). A proposal is a few binary searches.

The committed draft is built by ``python -m attention_lib.train.ngram_draft``
(:mod:`attention_lib.train.ngram_draft`).
"""

import json
from pathlib import Path

import numpy as np

from .._checks import as_int

__all__ = ["NgramDraft", "build_tables", "distill_labels", "max_order"]


def _keys(ids: np.ndarray, n: int, n_vocab: int) -> np.ndarray:
    """Every window of ``n`` tokens of ``ids`` as one integer (base ``n_vocab``)."""
    T = len(ids)
    key = np.zeros(T - n + 1, dtype=np.int64)
    for j in range(n):
        key = key * n_vocab + ids[j : T - n + 1 + j]
    return key


def max_order(n_vocab: int) -> int:
    """The longest context :func:`build_tables` takes over ``n_vocab`` tokens.

    A context of ``n`` tokens is one integer key below ``n_vocab ** n``, which
    must stay below ``2**62``.

    Examples
    --------
    >>> max_order(65)          # Tiny Shakespeare's characters
    10
    """
    if n_vocab < 2:
        raise ValueError(f"n_vocab must be at least 2, got {n_vocab}")
    order = int(62 * np.log(2) / np.log(n_vocab)) + 1
    while order * np.log(n_vocab) >= 62 * np.log(2):  # build_tables' own test, exactly
        order -= 1
    return order


def build_tables(ids, labels, order: int, n_vocab: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """For ``n = 1 .. order``: the sorted contexts of ``n`` tokens and their most frequent label.

    ``labels[t]`` is what follows ``ids[: t + 1]`` (the next token, or the
    target's argmax there; -1 to skip). Ties go to the smaller token. An entry
    whose label is what the shorter context already predicts is dropped:
    :meth:`NgramDraft.propose` backs off to the same answer.

    Examples
    --------
    >>> ids = np.array([1, 0, 1, 2, 0, 2, 1, 0, 1])
    >>> tabs = build_tables(ids, np.r_[ids[1:], -1], 2, 3)   # labels: the next token
    >>> [(keys.tolist(), labels.tolist()) for keys, labels in tabs]
    [([0, 1, 2], [1, 0, 0]), ([1, 2, 6], [2, 1, 2])]

    After 0 comes 1 (twice of three), but after "2 0" comes 2: key 2 * 3 + 0.
    """
    order = as_int(order, "order", 1)
    if order * np.log(n_vocab) >= 62 * np.log(2):
        raise ValueError(f"order {order} with {n_vocab} tokens overflows a 64-bit context key")
    ids, labels = np.asarray(ids, np.int64), np.asarray(labels, np.int64)
    if ids.shape != labels.shape or ids.ndim != 1:
        raise ValueError(
            f"ids and labels must be 1-D of one length, got {ids.shape}, {labels.shape}"
        )
    if order > len(ids):
        raise ValueError(f"order {order} needs at least {order} tokens, got {len(ids)}")
    tables, full = [], []
    for n in range(1, order + 1):
        ctx, lab = _keys(ids, n, n_vocab), labels[n - 1 :]
        ok = lab >= 0
        # each (context, label) pair and its count, sorted by context then label (a
        # key ctx * n_vocab + label would overflow 64 bits near the longest order)
        ctx, lab = ctx[ok], lab[ok]
        o = np.lexsort((lab, ctx))
        ctx, lab = ctx[o], lab[o]
        starts = np.flatnonzero(np.r_[True, (ctx[1:] != ctx[:-1]) | (lab[1:] != lab[:-1])])
        uc, ul, c = ctx[starts], lab[starts], np.diff(np.r_[starts, len(ctx)])
        o = np.lexsort((ul, -c, uc))  # by context, then most frequent, then smallest token
        uc, ul = uc[o], ul[o]
        first = np.r_[True, uc[1:] != uc[:-1]]
        keys, best = uc[first], ul[first]
        full.append((keys, best))
        if n > 1:  # drop what the context one shorter already predicts
            pk, pb = full[-2]
            shorter = pb[np.searchsorted(pk, keys % n_vocab ** (n - 1))]
            keep = best != shorter
            keys, best = keys[keep], best[keep]
        tables.append((keys, best.astype(np.int64)))
    return tables


class NgramDraft:
    """Propose ``k`` tokens by table look-up: the longest known context's label.

    A draft without a forward pass (like
    :class:`~attention_lib.models.speculative.PromptLookup`): its proposals are
    one-hot distributions, so the acceptance rule keeps the target's
    distribution exactly, greedy or sampled.

    Parameters
    ----------
    tables : list of (keys, labels), from :func:`build_tables`
    n_vocab : int

    Examples
    --------
    >>> ids = np.array([0, 1, 2, 0, 1, 2, 0])
    >>> d = NgramDraft(build_tables(ids[:-1], ids[1:], 2, 3), 3)
    >>> d.propose(np.array([[2, 0]]), 4)
    array([[1, 2, 0, 1]])
    """

    max_len = 2**62

    def __init__(self, tables, n_vocab: int) -> None:
        self.n_vocab = as_int(n_vocab, "n_vocab", 1)
        if not tables:
            raise ValueError("tables must hold at least the order-1 table")
        self.tables = [(np.asarray(k, np.int64), np.asarray(v, np.int64)) for k, v in tables]
        self.order = len(self.tables)
        self.fallback = int(self.tables[0][1][0]) if len(self.tables[0][1]) else 0
        # one dict per order: a look-up is one hash, not a binary search through NumPy
        self._maps = [dict(zip(k.tolist(), v.tolist())) for k, v in self.tables]

    def _next(self, ctx: list[int]) -> int:
        V, maps = self.n_vocab, self._maps
        key, scale, keys_by_n = 0, 1, []
        for tok in reversed(ctx[-self.order :]):
            key += tok * scale
            scale *= V
            keys_by_n.append(key)
        for n in range(len(keys_by_n), 0, -1):
            label = maps[n - 1].get(keys_by_n[n - 1])
            if label is not None:
                return label
        return self.fallback

    def propose(self, seq: np.ndarray, k: int) -> np.ndarray:
        """``k`` proposed tokens for each row of ``seq`` (B, T)."""
        out = np.empty((seq.shape[0], k), dtype=np.int64)
        for b, row in enumerate(np.asarray(seq)):
            ctx = row[-self.order :].tolist()
            for i in range(k):
                ctx.append(self._next(ctx))
                out[b, i] = ctx[-1]
        return out

    def save(self, path: str | Path, config: dict) -> None:
        """Write the tables and ``config`` (JSON) into an ``.npz`` (no pickles)."""
        from ..data.paths import write_atomic

        arrays = {"config": np.array(json.dumps({**config, "n_vocab": self.n_vocab}))}
        for n, (k, v) in enumerate(self.tables, 1):
            arrays[f"keys_{n}"] = k
            arrays[f"labels_{n}"] = v.astype(np.uint8 if self.n_vocab <= 256 else np.int32)
        write_atomic(Path(path), lambda f: np.savez_compressed(f, **arrays), mode="wb")

    @classmethod
    def load(cls, path: str | Path) -> "NgramDraft":
        """The draft written by :meth:`save`."""
        with np.load(path, allow_pickle=False) as f:
            cfg = json.loads(str(f["config"]))
            tables = [(f[f"keys_{n}"], f[f"labels_{n}"]) for n in range(1, cfg["order"] + 1)]
        return cls(tables, cfg["n_vocab"])


def distill_labels(target, ids, window=128, keep=96, batch=32, log=None) -> np.ndarray:
    """The target's argmax after each prefix of ``ids``: ``out[t]`` follows ``ids[: t + 1]``.

    Windows of ``window`` tokens overlap so that every labelled position
    (``-1`` where none is) has at least ``window - keep`` tokens of context.
    """
    out = np.full(len(ids), -1, dtype=np.int64)
    starts = np.arange(0, len(ids) - window + 1, keep)
    for i in range(0, len(starts), batch):
        st = starts[i : i + batch]
        x = np.stack([ids[s : s + window] for s in st])
        am = target.forward(x).argmax(-1)
        for row, s in zip(am, st):
            lo = 0 if s == 0 else window - keep
            out[s + lo : s + window] = row[lo:]
        if log is not None and (i // batch) % 50 == 0:
            print(f"labelled {i + len(st)} of {len(starts)} windows", file=log, flush=True)
    return out
