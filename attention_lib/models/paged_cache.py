"""A paged KV cache: keys and values in fixed-size pages, found through a block table.

A server holds the caches of many conversations at once, of lengths nobody
knows in advance. :class:`~attention_lib.models.kv_cache.StaticKVCache`
reserves the longest context for every row; vLLM's PagedAttention (Kwon et
al., 2023) instead cuts memory into *pages* of ``page_size`` positions, hands
a sequence a new page only when its last one is full, and keeps, per
sequence, a **block table**: the list of its pages, in order. Position ``t``
of a sequence lives in page ``table[t // page_size]`` at row
``t % page_size``. A finished sequence gives its pages back to the pool, so
memory is lost only in each sequence's last, partly filled page.

This is one layer's cache; a model keeps one per layer (or one pool with a
layer axis). Reading gathers a sequence's pages back into one array, which
is what a paged attention kernel avoids by reading the pages in place.
"""

from __future__ import annotations

import numpy as np

from .._checks import as_int

__all__ = ["PagedKVCache"]


class PagedKVCache:
    """One layer's keys and values for many sequences, in pages of a shared pool.

    Parameters
    ----------
    n_pages, page_size, n_kv_heads, d_head : int
        The pool holds ``n_pages`` pages of ``page_size`` positions, each
        position ``n_kv_heads`` keys and values of ``d_head`` numbers.
    dtype : float32 or float64, optional

    Attributes
    ----------
    pool : ndarray, shape (n_pages, 2, n_kv_heads, page_size, d_head)
        Keys (``pool[:, 0]``) and values (``pool[:, 1]``) of every page.
    tables : dict
        Sequence id -> list of its pages, in order (the block table).
    lengths : dict
        Sequence id -> positions stored.

    Examples
    --------
    >>> cache = PagedKVCache(n_pages=4, page_size=2, n_kv_heads=1, d_head=3)
    >>> k = np.arange(9.0).reshape(1, 3, 3)          # 3 positions of one head
    >>> cache.append("a", k, -k)
    >>> cache.tables["a"], cache.lengths["a"]      # 3 positions: 2 pages
    ([0, 1], 3)
    >>> K, V = cache.read("a")
    >>> bool((K == k).all()), len(cache.free)
    (True, 2)
    """

    def __init__(self, n_pages, page_size, n_kv_heads, d_head, dtype=np.float32):
        n_pages, self.page_size = as_int(n_pages, "n_pages", 1), as_int(page_size, "page_size", 1)
        shape = (n_pages, 2, as_int(n_kv_heads, "n_kv_heads", 1), self.page_size)
        self.pool = np.zeros((*shape, as_int(d_head, "d_head", 1)), dtype)
        self.free = list(range(n_pages))[::-1]  # pop() hands out page 0 first
        self.tables: dict = {}
        self.lengths: dict = {}

    def append(self, seq, k: np.ndarray, v: np.ndarray) -> None:
        """Store ``k, v`` (n_kv_heads, T, d_head) at the next ``T`` positions of sequence ``seq``."""
        k, v = np.asarray(k), np.asarray(v)
        want = (self.pool.shape[2], self.pool.shape[4])
        if np.shape(k) != np.shape(v) or np.ndim(k) != 3 or (k.shape[0], k.shape[2]) != want:
            raise ValueError(
                f"keys and values must both have shape (n_kv_heads={want[0]}, T, "
                f"d_head={want[1]}), got {np.shape(k)} and {np.shape(v)}"
            )
        table, n = self.tables.get(seq, []), self.lengths.get(seq, 0)
        need = -(-(n + k.shape[1]) // self.page_size) - len(table)  # new pages
        if need > len(self.free):
            raise ValueError(
                f"sequence {seq!r} needs {need} more pages but {len(self.free)} are free: "
                "release a finished sequence first"
            )
        table = table + [self.free.pop() for _ in range(need)]
        for t in range(k.shape[1]):  # position n + t: page table[p // size], row p % size
            page, row = divmod(n + t, self.page_size)
            self.pool[table[page], :, :, row] = k[:, t], v[:, t]
        self.tables[seq], self.lengths[seq] = table, n + k.shape[1]

    def read(self, seq) -> tuple[np.ndarray, np.ndarray]:
        """Keys and values of sequence ``seq``, gathered: two (n_kv_heads, length, d_head) arrays."""
        if seq not in self.tables:
            raise KeyError(f"no sequence {seq!r} in the cache (it holds {list(self.tables)})")
        pages = self.pool[self.tables[seq]]  # (pages, 2, H_kv, page_size, d)
        kv = pages.transpose(1, 2, 0, 3, 4).reshape(*pages.shape[1:3], -1, pages.shape[-1])
        n = self.lengths[seq]
        return kv[0, :, :n], kv[1, :, :n]

    def release(self, seq) -> None:
        """Forget sequence ``seq`` and give its pages back to the pool."""
        if seq not in self.tables:
            raise KeyError(f"no sequence {seq!r} in the cache (it holds {list(self.tables)})")
        self.free.extend(reversed(self.tables.pop(seq)))
        del self.lengths[seq]
