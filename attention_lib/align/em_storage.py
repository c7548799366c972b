"""The memory engineering under IBM Model 1 (:mod:`.em`): how a corpus is stored.

Model 1 needs, for every sentence pair, the translation-table entry of each
(source word, target word) that meets in it. Stored naively, as a dense
``(n_source, n_target)`` table and one array per sentence pair, a corpus of
100,000 real sentence pairs takes gigabytes. Here:

- **Cells.** The table lives in flat arrays, one entry per *cell*: a (source
  word, target word) pair of vocabulary ids that occur in the same sentence
  pair (plus ``NULL``, source id ``n_source``, with every target word). The
  distinct cells are found about a million keys at a time and merged, so
  memory follows the number of distinct cells, not the corpus's total
  ``n (m + 1)``; word ids and cell numbers are int32 where they fit.
- **Batches.** Sentence pairs of similar lengths share one padded
  ``(B, rows, cols)`` array of cell numbers (column 0 is ``NULL``, padding
  the extra cell ``n_cells``), so the E-step gathers the scores of a whole
  batch with one indexing operation and sums its weights per cell with
  :func:`numpy.bincount`.
- **Prior slabs.** The diagonal prior depends only on a pair's lengths, so a
  batch keeps one ``(rows, cols)`` slab per distinct ``(m, n)``.
- **Similarity.** The starting table's cosine similarities are computed once
  per corpus, one matrix-vector product per source word, converting to
  float64 only the vectors used.
"""

import numpy as np


class CellIndex:
    """A corpus of sentence pairs of word ids, numbered into cells and padded batches.

    Parameters
    ----------
    source, target : sequence of array_like of int
        One array of vocabulary ids (``>= 0``) per sentence, the same number
        of sentences on both sides. Pairs with an empty side get no cells.
    max_batch_cells : int, optional
        The most entries a padded batch may hold (a batch holds at least one pair).

    Attributes
    ----------
    n_source, n_target : int
        Number of source and target word ids; ``NULL`` is source id ``n_source``.
    m, n : ndarray of int, shape (n_pairs,)
        Source and target lengths (0 for a pair with an empty side).
    cell_source, cell_target : ndarray of int, shape (n_cells,)
        The word ids of each cell.
    batches : list of (ndarray, ndarray)
        ``(members, cells)``: the pairs of a batch and their padded
        ``(B, rows, cols)`` cell numbers.
    """

    def __init__(self, source, target, max_batch_cells=1 << 17):
        if len(source) != len(target):
            raise ValueError(
                f"source has {len(source)} sentences but target has "
                f"{len(target)}: they must be sentence pairs"
            )
        src = [self._ids(s, "source") for s in source]
        tgt = [self._ids(s, "target") for s in target]
        self.n_source = max((int(s.max()) + 1 for s in src if len(s)), default=0)
        self.n_target = max((int(s.max()) + 1 for s in tgt if len(s)), default=0)
        # a cell's key, source id * (number of target ids) + target id, is an int64
        if (self.n_source + 1) * max(self.n_target, 1) >= np.iinfo(np.int64).max:
            raise ValueError(
                f"word ids up to {self.n_source - 1} (source) and {self.n_target - 1} (target) "
                f"are too large to number their pairs in int64: number the words "
                f"0, 1, 2, ... (as EMAligner.prepare does)"
            )
        # A pair with an empty side has nothing to align: treat it as empty.
        self.m = np.array([len(s) if len(t) else 0 for s, t in zip(src, tgt)])
        self.n = np.array([len(t) if len(s) else 0 for s, t in zip(src, tgt)])
        self._index_cells(src, tgt)
        self._make_batches(src, tgt, max_batch_cells)

    @staticmethod
    def _ids(sentence, name):
        ids = np.asarray(sentence)
        if ids.size == 0:
            return np.zeros(0, dtype=np.int64)
        if ids.ndim != 1 or ids.dtype.kind not in "iu" or ids.min() < 0:
            raise ValueError(f"each {name} sentence must be a 1-D array of word ids >= 0")
        return ids.astype(np.int64)

    def _cell_keys(self, s, t):
        """The ``(n, m + 1)`` keys ``source id * width + target id`` of one pair."""
        width = max(self.n_target, 1)
        return np.concatenate(([self.n_source], s))[None, :] * width + t[:, None]

    def _index_cells(self, src, tgt, chunk=1 << 20):
        """Number the cells in the order of their keys (see **Cells** above)."""
        width = max(self.n_target, 1)
        unique = np.zeros(0, np.int64)

        def distinct(sorted_keys):
            return sorted_keys[np.r_[True, sorted_keys[1:] != sorted_keys[:-1]]]

        def merge(unique, pending):
            # sort the new keys, then merge two sorted runs (a stable sort
            # does that in one pass) and drop the repeats
            new = distinct(np.sort(np.concatenate(pending)))
            return distinct(np.sort(np.concatenate([unique, new]), kind="stable"))

        pending, size = [], 0
        for k in np.flatnonzero(self.n):
            pending.append(self._cell_keys(src[k], tgt[k]).ravel())
            size += pending[-1].size
            # merge when the new keys are as many as the distinct ones so far
            # (at least a million): merging costs about the same each time
            if size >= max(chunk, len(unique)):
                unique, pending, size = merge(unique, pending), [], 0
        if pending:
            unique = merge(unique, pending)
        self._cell_key = unique
        # word ids fit in int32 (half the memory of the table's index columns)
        ids = np.int32 if max(self.n_source + 1, width) < np.iinfo(np.int32).max else np.int64
        self.cell_source = (unique // width).astype(ids)
        self.cell_target = (unique % width).astype(ids)
        self.n_cells = len(unique)

    def _make_batches(self, src, tgt, max_batch_cells):
        """Group pairs of similar lengths into padded batches (see **Batches** above)."""
        order = np.lexsort((self.m, self.n))
        order = order[self.n[order] > 0]
        self.batches = []
        self.slot_batch = np.full(len(self.n), -1, dtype=np.int64)
        self.slot_row = np.full(len(self.n), -1, dtype=np.int64)
        index_type = np.int32 if self.n_cells < np.iinfo(np.int32).max else np.int64
        start = 0
        while start < len(order):
            stop = start + 1
            while stop < len(order):  # grow the batch while its padded size fits
                m_max = self.m[order[start : stop + 1]].max()
                if (stop + 1 - start) * self.n[order[stop]] * (m_max + 1) > max_batch_cells:
                    break
                stop += 1
            members = order[start:stop]
            rows, cols = self.n[members].max(), self.m[members].max() + 1
            cells = np.full((len(members), rows, cols), self.n_cells, dtype=index_type)
            keys = np.concatenate([self._cell_keys(src[k], tgt[k]).ravel() for k in members])
            by_key = np.argsort(keys)  # sorted needles: a cache-friendly search
            found = np.empty(len(keys), dtype=index_type)
            found[by_key] = np.searchsorted(self._cell_key, keys[by_key])
            start_of = np.cumsum([0] + [self.n[k] * (self.m[k] + 1) for k in members])
            for b, k in enumerate(members):
                n, m = self.n[k], self.m[k]
                cells[b, :n, : m + 1] = found[start_of[b] : start_of[b + 1]].reshape(n, m + 1)
            self.slot_batch[members] = len(self.batches)
            self.slot_row[members] = np.arange(len(members))
            self.batches.append((members, cells))
            start = stop
        del self._cell_key  # only needed to number cells

    def batch_prior(self, log_prior, members, rows, cols):
        """``log_prior(m, n, rows, cols)`` of a batch, each distinct ``(m, n)`` computed once.

        Returns the slabs (**Prior slabs** above) and which slab each pair uses,
        for :meth:`expand_prior`.
        """
        lengths = np.stack((self.m[members], self.n[members]), axis=1)
        distinct, which = np.unique(lengths, axis=0, return_inverse=True)
        slabs = log_prior(distinct[:, 0], distinct[:, 1], rows, cols)
        return slabs, which.reshape(-1)

    @staticmethod
    def expand_prior(batch_prior, rows=slice(None)):
        """The ``(B, rows, cols)`` log prior of a batch (or of some of its ``rows``)."""
        slabs, which = batch_prior
        return slabs[which[rows]]

    def pair(self, k, priors):
        """Pair ``k``'s ``(n, m + 1)`` cell numbers and log prior (``priors``: one per batch)."""
        batch, b = self.slot_batch[k], self.slot_row[k]
        n, m = self.n[k], self.m[k]
        return (
            self.batches[batch][1][b, :n, : m + 1],
            self.expand_prior(priors[batch], b)[:n, : m + 1],
        )


class Similarity:
    """Cosine similarity of word pairs, computed once per corpus and looked up."""

    def __init__(self, words_en, words_fr, vocab, vectors):
        self.width = len(words_fr)
        self.rows = {
            lang: np.array([vocab[lang].get(w, -1) for w in words], dtype=np.int64)
            for lang, words in (("en", words_en), ("fr", words_fr))
        }
        # for each English word, the id of the same string in French (or -1)
        fr_id = {w: k for k, w in enumerate(words_fr)}
        self.same = np.array([fr_id.get(w, -1) for w in words_en], dtype=np.int64)
        self.vectors = vectors
        self.keys = self.values = None

    def _compute(self, en, fr):
        out = (self.same[en] == fr).astype(np.float64)  # no vectors: same string?
        r_en, r_fr = self.rows["en"][en], self.rows["fr"][fr]
        known = np.flatnonzero((r_en >= 0) & (r_fr >= 0))
        if not len(known):
            return out
        # only the rows used go to float64: a float64 copy of both tables is 240 MB
        order = known[np.argsort(r_en[known], kind="stable")]
        e_sorted = r_en[order]
        starts = np.flatnonzero(np.r_[True, e_sorted[1:] != e_sorted[:-1]])
        vec_en, vec_fr = self.vectors["en"], self.vectors["fr"]
        for a, b in zip(starts, np.r_[starts[1:], len(order)]):
            cells = order[a:b]
            partners = vec_fr[r_fr[cells]].astype(np.float64)
            out[cells] = partners @ vec_en[e_sorted[a]].astype(np.float64)
        return out

    def __call__(self, en, fr):
        keys = np.asarray(en, dtype=np.int64) * self.width + fr  # int32 ids could overflow
        if self.keys is None:
            order = np.argsort(keys, kind="stable")  # usually sorted already
            self.keys, self.values = keys[order], self._compute(en[order], fr[order])
        pos = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        found = self.keys[pos] == keys
        out = np.empty(len(keys))
        out[found] = self.values[pos[found]]
        if not found.all():
            out[~found] = self._compute(en[~found], fr[~found])
        return out
