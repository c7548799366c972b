"""sampling_probabilities: temperature, then top-k, then top-p, as PyTorch samplers do."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_lib.sampling import entropy, sampling_probabilities


def nucleus_by_hand(p, top_p):
    """Keep the likeliest tokens one by one until their mass reaches top_p."""
    kept, mass = [], 0.0
    for i in sorted(range(len(p)), key=lambda i: (-p[i], i)):
        kept.append(i)
        mass += p[i]
        if mass >= top_p:
            break
    q = np.zeros_like(p)
    q[kept] = p[kept]
    return q / q.sum()


@settings(max_examples=60)
@given(st.integers(0, 10_000), st.floats(0.05, 1.0), st.floats(0.2, 3.0))
def test_top_p_keeps_the_smallest_set_that_reaches_p(seed, top_p, temperature):
    z = np.random.default_rng(seed).normal(size=12) * 3
    got = sampling_probabilities(z, temperature, top_p=top_p)
    p = np.exp(z / temperature - (z / temperature).max())
    np.testing.assert_allclose(got, nucleus_by_hand(p / p.sum(), top_p), atol=1e-12)


def test_top_k_and_temperature_match_torch():
    torch = pytest.importorskip("torch")
    z = np.random.default_rng(0).normal(size=(5, 30))
    for k, tau in [(1, 1.0), (5, 0.7), (30, 1.5)]:
        t = torch.tensor(z) / tau
        v, _ = torch.topk(t, k)
        t[t < v[:, [-1]]] = -float("inf")
        expected = torch.softmax(t, dim=-1).numpy()
        np.testing.assert_allclose(
            sampling_probabilities(z, tau, top_k=k), expected, rtol=1e-12, atol=1e-15
        )


def test_the_knobs_apply_in_order_and_keep_at_least_one_token():
    z = np.log([0.4, 0.3, 0.2, 0.1])
    # top-k 3 first (0.444, 0.333, 0.222), then top-p 0.7 keeps two of those.
    np.testing.assert_allclose(sampling_probabilities(z, top_k=3, top_p=0.7), [4 / 7, 3 / 7, 0, 0])
    np.testing.assert_allclose(sampling_probabilities(z, top_p=1e-9), [1, 0, 0, 0])
    np.testing.assert_allclose(sampling_probabilities(z, top_p=1.0), [0.4, 0.3, 0.2, 0.1])
    np.testing.assert_array_equal(sampling_probabilities([[1, 3, 3]], 0), [[0, 1, 0]])


def test_higher_temperature_means_higher_entropy():
    z = np.random.default_rng(1).normal(size=65) * 2
    h = [entropy(sampling_probabilities(z, tau)) for tau in (0.25, 0.5, 1, 2, 4)]
    assert np.all(np.diff(h) > 0) and h[-1] < np.log(65)
    assert entropy(sampling_probabilities(z, 0)) == 0


def test_float32_logits_stay_float32_and_batches_work():
    z = np.random.default_rng(2).normal(size=(2, 3, 7)).astype(np.float32)
    p = sampling_probabilities(z, 0.8, top_k=4, top_p=0.9)
    assert p.dtype == np.float32 and p.shape == (2, 3, 7)
    np.testing.assert_allclose(p.sum(-1), 1, rtol=1e-6)
    assert ((p > 0).sum(-1) <= 4).all()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"temperature": -1}, "temperature must be a finite number >= 0, got -1"),
        ({"temperature": float("nan")}, "temperature must be a finite number"),
        ({"top_k": 0}, "top_k"),
        ({"top_p": 0}, r"top_p must be in \(0, 1\], got 0"),
        ({"top_p": 1.5}, r"top_p must be in \(0, 1\]"),
    ],
)
def test_bad_knobs_are_named(kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        sampling_probabilities(np.zeros(4), **kwargs)
    with pytest.raises(ValueError, match="at least one token"):
        sampling_probabilities(np.zeros((3, 0)))
