"""The paged KV cache (models/paged_cache.py) against the contiguous cache it replaces."""

import numpy as np
import pytest

from attention_lib.models.kv_cache import StaticKVCache
from attention_lib.models.paged_cache import PagedKVCache


def test_interleaved_sequences_read_back_what_a_contiguous_cache_holds():
    rng = np.random.default_rng(0)
    H_kv, d, size = 2, 4, 3
    paged = PagedKVCache(n_pages=12, page_size=size, n_kv_heads=H_kv, d_head=d, dtype=np.float64)
    rows = {"a": 0, "b": 1, "c": 2}  # a sequence's row of the contiguous cache
    static = StaticKVCache(1, 3, H_kv, 32, d, np.float64)
    # three sequences grow in turns, by chunks of 1 to 5 positions (a prompt, then steps)
    for seq, T in [("a", 5), ("b", 1), ("a", 1), ("c", 4), ("b", 2), ("a", 3), ("c", 1)]:
        k, v = rng.normal(size=(2, H_kv, T, d))
        paged.append(seq, k, v)
        n = paged.lengths[seq] - T
        static.k[0, rows[seq], :, n : n + T], static.v[0, rows[seq], :, n : n + T] = k, v
    for seq, row in rows.items():
        K, V = paged.read(seq)
        n = paged.lengths[seq]
        assert K.shape == (H_kv, n, d)
        np.testing.assert_array_equal(K, static.k[0, row, :, :n])
        np.testing.assert_array_equal(V, static.v[0, row, :, :n])
        assert len(paged.tables[seq]) == -(-n // size)  # only the last page is partly empty
    # the block tables share no page
    used = [p for table in paged.tables.values() for p in table]
    assert len(used) == len(set(used)) and len(used) + len(paged.free) == 12


def test_a_released_sequence_gives_its_pages_to_the_next():
    paged = PagedKVCache(n_pages=3, page_size=2, n_kv_heads=1, d_head=2)
    one = np.ones((1, 4, 2), np.float32)
    paged.append("a", one, one)
    pages = paged.tables["a"]
    paged.release("a")
    assert "a" not in paged.tables and len(paged.free) == 3
    paged.append("b", 2 * one, 3 * one)
    assert sorted(paged.tables["b"]) == sorted(pages)
    K, V = paged.read("b")
    assert (K == 2).all() and (V == 3).all()


def test_a_full_pool_is_refused_and_changes_nothing():
    paged = PagedKVCache(n_pages=2, page_size=2, n_kv_heads=1, d_head=2)
    x = np.ones((1, 3, 2), np.float32)
    paged.append("a", x, x)
    before = paged.pool.copy()
    with pytest.raises(ValueError, match="needs 1 more pages but 0 are free"):
        paged.append("b", x[:, :1], x[:, :1])
    assert "b" not in paged.tables and paged.free == []
    np.testing.assert_array_equal(paged.pool, before)


@pytest.mark.parametrize("shape", [(2, 3, 2), (1, 3, 5), (3, 2)])
def test_keys_of_the_wrong_shape_are_named(shape):
    paged = PagedKVCache(n_pages=2, page_size=2, n_kv_heads=1, d_head=2)
    with pytest.raises(ValueError, match=r"must both have shape \(n_kv_heads=1, T, d_head=2\)"):
        paged.append("a", np.zeros(shape), np.zeros(shape))
    assert paged.tables == {} and len(paged.free) == 2


def test_an_unknown_sequence_is_named():
    paged = PagedKVCache(n_pages=2, page_size=2, n_kv_heads=1, d_head=2)
    with pytest.raises(KeyError, match="no sequence 'z'"):
        paged.read("z")
