"""causal_mask and padding_mask: shapes, meaning, and bad arguments."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

from attention_lib import causal_mask, padding_mask


@given(st.integers(0, 12), st.integers(0, 12))
def test_causal_mask_allows_exactly_the_past(L, S):
    mask = causal_mask(L, S)
    assert mask.shape == (L, S) and mask.dtype == bool
    i, j = np.indices((L, S))
    assert np.array_equal(mask, j <= i)


def test_causal_mask_defaults_to_square():
    assert causal_mask(3).shape == (3, 3)


@pytest.mark.parametrize(
    "args, error, message",
    [
        ((-1,), ValueError, "L must be non-negative, got -1"),
        ((2.5,), TypeError, "L must be an integer, got 2.5"),
        ((3, -2), ValueError, "S must be non-negative, got -2"),
        ((True,), TypeError, "L must be an integer"),
    ],
)
def test_causal_mask_rejects_bad_sizes(args, error, message):
    with pytest.raises(error, match=message):
        causal_mask(*args)


@given(st.lists(st.integers(0, 9), min_size=1, max_size=6))
def test_padding_mask_marks_real_positions(lengths):
    mask = padding_mask(lengths)
    assert mask.shape == (len(lengths), max(lengths))
    assert mask.sum(axis=1).tolist() == lengths
    # Real positions come first, then padding.
    for row, n in zip(mask, lengths):
        assert row[:n].all() and not row[n:].any()


def test_padding_mask_to_a_given_length():
    assert padding_mask([1, 2], S=4).tolist() == [
        [True, False, False, False],
        [True, True, False, False],
    ]


@pytest.mark.parametrize(
    "lengths, S, error, message",
    [
        ([3, 5], 4, ValueError, "exceed the padded length S=4"),
        ([2, -1], None, ValueError, "lengths must be non-negative"),
        ([1.5, 2], None, TypeError, "lengths must be a 1-D sequence of integers"),
        ([[1, 2]], None, TypeError, "lengths must be a 1-D sequence of integers"),
    ],
)
def test_padding_mask_rejects_bad_lengths(lengths, S, error, message):
    with pytest.raises(error, match=message):
        padding_mask(lengths, S)


# --- faults an adversarial pass found -------------------------------------------


def test_padding_mask_of_an_empty_batch_is_empty():
    """``padding_mask([])`` used to fail with "got float64 array of shape (0,)"."""
    assert padding_mask([]).shape == (0, 0)
    assert padding_mask([], S=3).shape == (0, 3)
    assert padding_mask(np.array([], dtype=np.int64), S=2).dtype == bool


@pytest.mark.parametrize(
    "lengths",
    [
        np.array([2**63], dtype=np.uint64),
        np.array([2**64 - 1, 1], dtype=np.uint64),
    ],
)
def test_padding_mask_refuses_lengths_beyond_int64(lengths):
    """A uint64 length of 2**63 used to give a (1, 0) mask silently."""
    with pytest.raises(ValueError, match="lengths .* too large"):
        padding_mask(lengths)


@pytest.mark.parametrize("lengths", [[True, False], ["3"]])
def test_padding_mask_refuses_non_integer_lengths(lengths):
    with pytest.raises(TypeError, match="lengths must be a 1-D sequence of integers"):
        padding_mask(lengths)
