"""Tests for the information-bottleneck experiment (attention_lib.models.bottleneck)."""

import numpy as np
import pytest

from attention_lib import BottleneckResult, bottleneck_experiment
from attention_lib.models.bottleneck import (
    attention_recovery,
    fit_linear_code,
    fixed_vector_recovery,
    nearest_token,
)

# Small but stable settings: p = 4 numbers per token, V = 16 symbols.
SMALL = dict(vocab_size=16, token_size=4, n_train=400, n_test=200, seed=3)


@pytest.fixture(scope="module")
def small_run():
    return bottleneck_experiment([1, 2, 4, 8, 12, 16, 24, 32], widths=[8, 16, 32], **SMALL)


def test_result_has_one_value_per_width_and_length(small_run):
    assert isinstance(small_run, BottleneckResult)
    assert small_run.fixed.shape == (3, 8)
    assert small_run.attention.shape == (8,)
    assert small_run.chance == pytest.approx(1 / 16)
    assert small_run.token_size == 4


def test_fixed_vector_is_lossless_while_the_input_fits(small_run):
    # L * p <= d: the code has room for every number of the input.
    for w, d in enumerate(small_run.widths):
        fits = small_run.lengths * small_run.token_size <= d
        assert fits.any()
        np.testing.assert_array_equal(small_run.fixed[w, fits], 1.0)


def test_fixed_vector_recovery_falls_with_length_once_it_overflows(small_run):
    for w, d in enumerate(small_run.widths):
        over = small_run.lengths * small_run.token_size > d
        curve = small_run.fixed[w, over]
        assert curve[0] < 1.0
        assert np.all(np.diff(curve) < 0), f"d={d}: {curve}"
    # Four times more input than code: most tokens are lost.
    d8_at_L8 = small_run.fixed[0, list(small_run.lengths).index(8)]
    assert d8_at_L8 < 0.5


def test_wider_codes_recover_more(small_run):
    assert np.all(np.diff(small_run.fixed, axis=0) >= 0)
    assert small_run.fixed[2, -1] > small_run.fixed[0, -1] + 0.1


def test_attention_recovery_stays_high_at_every_length(small_run):
    assert np.all(small_run.attention >= 0.99), small_run.attention
    assert small_run.attention[-1] > small_run.fixed[:, -1].max() + 0.5


def test_recovery_depends_on_input_numbers_per_code_number():
    # The capacity argument: what matters is L * p / d, not L or d alone.
    r = bottleneck_experiment([4, 8, 16], widths=[8, 16, 32], **SMALL)
    ratio_2 = [r.fixed[0, 0], r.fixed[1, 1], r.fixed[2, 2]]  # L * 4 / d = 2
    assert max(ratio_2) - min(ratio_2) < 0.1, ratio_2
    assert max(ratio_2) < 0.9


def test_same_seed_gives_identical_results_and_another_seed_differs():
    kwargs = dict(
        lengths=[6, 10], widths=[16], vocab_size=16, token_size=4, n_train=200, n_test=100
    )
    a = bottleneck_experiment(seed=7, **kwargs)
    b = bottleneck_experiment(seed=7, **kwargs)
    c = bottleneck_experiment(seed=8, **kwargs)
    np.testing.assert_array_equal(a.fixed, b.fixed)
    np.testing.assert_array_equal(a.attention, b.attention)
    assert not np.array_equal(a.fixed, c.fixed)


def test_a_length_gives_the_same_result_whichever_other_lengths_run():
    alone = bottleneck_experiment([10], widths=[16], **SMALL)
    among = bottleneck_experiment([3, 10, 20], widths=[16], **SMALL)
    assert alone.fixed[0, 0] == among.fixed[0, 1]
    assert alone.attention[0] == among.attention[1]


def test_empty_widths_measure_attention_only():
    both = bottleneck_experiment([4, 16], widths=[8], **SMALL)
    only = bottleneck_experiment([4, 16], widths=[], **SMALL)
    assert only.fixed.shape == (0, 2)
    np.testing.assert_array_equal(only.attention, both.attention)


def test_blunt_attention_cannot_pick_out_a_position():
    rng = np.random.default_rng(0)
    E = rng.normal(size=(16, 4))
    tokens = rng.integers(16, size=(100, 20))
    codes = rng.normal(size=(20, 16))
    codes /= np.linalg.norm(codes, axis=1, keepdims=True)
    sharp = attention_recovery(tokens, E, codes, sharpness=30.0)
    blunt = attention_recovery(tokens, E, codes, sharpness=0.01)
    assert sharp > 0.99
    assert blunt < 0.4  # nearly uniform weights give the average token


def test_nearest_token_decodes_exact_embeddings_to_themselves():
    E = np.random.default_rng(1).normal(size=(12, 5))
    ids = np.array([[3, 0, 11], [7, 7, 2]])
    np.testing.assert_array_equal(nearest_token(E[ids], E), ids)


def test_linear_code_is_exact_for_data_of_rank_at_most_d():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(50, 3)) @ rng.normal(size=(3, 10)) + 5.0  # rank 3
    mean, basis = fit_linear_code(X, 3)
    assert basis.shape == (10, 3)
    np.testing.assert_allclose(basis.T @ basis, np.eye(3), atol=1e-10)
    np.testing.assert_allclose(mean + (X - mean) @ basis @ basis.T, X, atol=1e-9)


def test_linear_code_beats_a_random_code_of_the_same_width():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(300, 12)) * np.linspace(3, 0.1, 12)  # unequal variances
    mean, basis = fit_linear_code(X, 4)
    pca_error = np.sum((X - mean - (X - mean) @ basis @ basis.T) ** 2)
    random_basis, _ = np.linalg.qr(rng.normal(size=(12, 4)))
    random_error = np.sum((X - mean - (X - mean) @ random_basis @ random_basis.T) ** 2)
    assert pca_error < 0.5 * random_error


def test_fixed_vector_recovery_matches_the_experiment_pieces():
    rng = np.random.default_rng(5)
    E = rng.normal(size=(8, 2))
    train, test = rng.integers(8, size=(300, 5)), rng.integers(8, size=(100, 5))
    full, starved = fixed_vector_recovery(train, test, E, [10, 2])
    assert full == 1.0
    assert starved < 0.6


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        (dict(lengths=[0, 4]), ValueError, "lengths"),
        (dict(lengths=[2.5]), TypeError, "lengths"),
        (dict(lengths=[]), TypeError, "lengths"),
        (dict(widths=[-8]), ValueError, "widths"),
        (dict(vocab_size=1), ValueError, "vocab_size"),
        (dict(token_size=0), ValueError, "token_size"),
        (dict(n_test=2.0), TypeError, "n_test"),
        (dict(seed=-1), ValueError, "seed"),
        (dict(seed="42"), TypeError, "seed"),
        (dict(sharpness=float("nan")), ValueError, "sharpness"),
        (dict(sharpness=-1.0), ValueError, "sharpness"),
    ],
)
def test_experiment_rejects_bad_arguments_by_name(kwargs, error, words):
    args = dict(lengths=[2], widths=[8], n_train=20, n_test=5)
    args.update(kwargs)
    with pytest.raises(error, match=words):
        bottleneck_experiment(**args)


def test_token_ids_outside_the_vocabulary_are_rejected():
    E = np.zeros((5, 2))
    with pytest.raises(ValueError, match="vocabulary has 5 embeddings"):
        attention_recovery(np.array([[0, 5]]), E, np.eye(2), 10.0)
    with pytest.raises(ValueError, match="vocabulary has 5 embeddings"):
        fixed_vector_recovery(np.array([[0, 1]]), np.array([[-1, 2]]), E, [2])
    with pytest.raises(TypeError, match="symbol ids"):
        attention_recovery(np.array([[0.0, 1.0]]), E, np.eye(2), 10.0)


def test_shape_mismatches_name_what_does_not_fit():
    E = np.zeros((5, 2))
    with pytest.raises(ValueError, match="one code per position"):
        attention_recovery(np.array([[0, 1, 2]]), E, np.eye(2), 10.0)
    with pytest.raises(ValueError, match="same sequence length"):
        fixed_vector_recovery(np.zeros((4, 3), int), np.zeros((4, 2), int), E, [2])
    with pytest.raises(ValueError, match="embeddings must be"):
        nearest_token(np.zeros((3, 4)), E)
    with pytest.raises(ValueError, match="X must be 2-D"):
        fit_linear_code(np.zeros(5), 2)


# --- faults of the kinds an adversarial pass found -------------------------------


def test_nearest_token_refuses_nan_vectors_instead_of_answering_symbol_0():
    """NaN distances made argmin return index 0 silently."""
    with pytest.raises(ValueError, match="vectors contains NaN"):
        nearest_token(np.array([[np.nan, 0.0, 0.0]]), np.eye(3))
    with pytest.raises(ValueError, match="embeddings contains NaN"):
        nearest_token(np.eye(3), np.full((3, 3), np.nan))


def test_nearest_token_names_non_numeric_and_empty_embeddings():
    with pytest.raises(TypeError, match="embeddings must be an array of real numbers"):
        nearest_token(np.ones((1, 3)), np.array([["a", "b", "c"]]))
    with pytest.raises(ValueError, match="embeddings is empty"):
        nearest_token(np.zeros((1, 3)), np.zeros((0, 3)))


def test_fit_linear_code_names_nan_input():
    with pytest.raises(ValueError, match="X contains NaN"):
        fit_linear_code(np.array([[np.nan, 1.0], [1.0, 2.0]]), 1)
    with pytest.raises(TypeError, match="X must be an array of real numbers"):
        fit_linear_code(np.array([["a", "b"]]), 1)


def test_attention_recovery_names_nan_position_codes():
    """NaN codes were reported as 'query contains NaN', a name the caller never used."""
    with pytest.raises(ValueError, match="position_codes contains NaN"):
        attention_recovery(np.zeros((5, 2), int), np.eye(3), np.full((2, 2), np.nan), 1.0)


def test_fixed_vector_recovery_names_nan_embeddings():
    tokens = np.zeros((5, 2), int)
    with pytest.raises(ValueError, match="embeddings contains NaN"):
        fixed_vector_recovery(tokens, tokens, np.full((3, 3), np.nan), [1])


def test_lengths_beyond_int64_are_refused_clearly():
    with pytest.raises(ValueError, match="lengths .*too large"):
        bottleneck_experiment(np.array([2**64 - 1], dtype=np.uint64), [1])
