"""Llama.ablate: removing query heads by zeroing their rows of W_O, and restoring them."""

import numpy as np
import pytest

from attention_lib.models import load_pretrained


@pytest.fixture(scope="module")
def stories():
    model, tok = load_pretrained("stories260k")
    return model, tok.encode("Once upon a time, Lily saw a big cat.")[None]


def test_ablating_heads_equals_a_model_with_those_rows_of_W_O_zeroed(stories):
    model, ids = stories
    rebuilt, _ = load_pretrained("stories260k")
    d = 64 // 8
    for layer, head in [(1, 3), (1, 6), (4, 0)]:
        rebuilt.blocks[layer].attn.params["W_O"][head * d : (head + 1) * d] = 0
    with model.ablate([(1, 3), (1, 6), (4, 0)]):
        ablated = model.forward(ids)
    expected = rebuilt.forward(ids)
    np.testing.assert_array_equal(ablated, expected)
    # and it changed something: the heads did contribute
    assert np.abs(model.forward(ids) - ablated).max() > 1e-3


def test_only_the_query_head_goes_not_its_key_value_group(stories):
    model, ids = stories
    model.forward(ids)
    before = [b.attn.weights.copy() for b in model.blocks]
    with model.ablate([(0, 2)]):  # heads 2 and 3 share key/value head 1
        model.forward(ids)
        after = model.blocks[0].attn.weights
        # layer 0's attention pattern is its input's: unchanged by its own W_O
        np.testing.assert_array_equal(after, before[0])
        assert not model.blocks[0].attn.params["W_O"][16:24].any()  # head 2 gone
        assert model.blocks[0].attn.params["W_O"][24:32].any()  # head 3 kept


def test_weights_are_restored_after_the_block_and_after_an_error(stories):
    model, ids = stories
    W = [b.attn.params["W_O"] for b in model.blocks]
    copies = [w.copy() for w in W]
    clean = model.forward(ids)
    with pytest.raises(RuntimeError, match="inside"):
        with model.ablate([(2, 0), (2, 7)]):
            assert not model.blocks[2].attn.params["W_O"][:8].any()
            raise RuntimeError("inside")
    for b, w, c in zip(model.blocks, W, copies):
        assert b.attn.params["W_O"] is w
        np.testing.assert_array_equal(w, c)
    np.testing.assert_array_equal(model.forward(ids), clean)


@pytest.mark.parametrize(
    "heads, message",
    [
        ([(5, 0)], "outside this model's 5 layers of 8 heads"),
        ([(0, 8)], "outside this model's 5 layers of 8 heads"),
        ([(-1, 0)], "layer must be non-negative"),
        ([(0, 1.0)], "head must be an integer"),
        ([(0, 1, 2)], r"heads must be \(layer, head\) pairs"),
        ([3], r"heads must be \(layer, head\) pairs"),
        (["ab"], r"heads must be \(layer, head\) pairs"),
    ],
)
def test_bad_pairs_are_refused_before_any_weight_changes(stories, heads, message):
    model, _ = stories
    W = [b.attn.params["W_O"] for b in model.blocks]
    with pytest.raises((ValueError, TypeError), match=message):
        with model.ablate([(0, 0), *heads]):
            pass
    assert all(b.attn.params["W_O"] is w for b, w in zip(model.blocks, W))
    assert W[0][:8].any()


def test_smollm2_heads_ablate_and_restore(smollm2_or_skip):
    model, tok = smollm2_or_skip
    ids = tok.encode("The cat sat on the mat.")[None]
    clean = model.forward(ids)
    W = model.blocks[18].attn.params["W_O"]
    with model.ablate([(18, 6), (29, 8)]):
        assert not model.blocks[18].attn.params["W_O"][6 * 64 : 7 * 64].any()
        assert model.blocks[18].attn.params["W_O"][5 * 64 : 6 * 64].any()
        ablated = model.forward(ids)
    assert model.blocks[18].attn.params["W_O"] is W and W[6 * 64 : 7 * 64].any()
    assert np.abs(ablated - clean).max() > 1e-3
    np.testing.assert_array_equal(model.forward(ids), clean)
    with pytest.raises(ValueError, match="30 layers of 9 heads"):
        with model.ablate([(30, 0)]):
            pass
