"""The contrastive loss with in-batch negatives (attention_lib.nn.losses).

``multiple_negatives_ranking_loss`` is checked three ways: against
sentence-transformers' ``MultipleNegativesRankingLoss`` itself (called on
fixed embeddings through a stub model that returns them), against torch
autograd's gradients of that same loss, and against central differences in
float64; then its bad inputs.
"""

import os
import warnings

import numpy as np
import pytest

from attention_lib.gradcheck import numerical_gradient, relative_error
from attention_lib.nn import multiple_negatives_ranking_loss

REQUIRE_TORCH = os.environ.get("ATTENTION_REQUIRE_TORCH", "") not in ("", "0")


def batch(n=6, d=5, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(n, d)) * rng.uniform(0.5, 3, size=(n, 1))  # rows of several lengths
    p = a + 0.7 * rng.normal(size=(n, d))  # each positive near its anchor
    return a, p


def sentence_transformers_loss(a, p, scale):
    """sentence-transformers' loss and torch autograd's gradients on fixed embeddings."""
    if REQUIRE_TORCH:
        import torch
        from sentence_transformers.sentence_transformer.losses import (
            MultipleNegativesRankingLoss,
        )
    else:
        torch = pytest.importorskip("torch")
        st = pytest.importorskip("sentence_transformers.sentence_transformer.losses")
        MultipleNegativesRankingLoss = st.MultipleNegativesRankingLoss

    class Stub(torch.nn.Module):
        """A "model" whose sentence embedding is the batch it is given."""

        def forward(self, features):
            return {"sentence_embedding": features["embedding"]}

    ta = torch.tensor(a, dtype=torch.float64, requires_grad=True)
    tp = torch.tensor(p, dtype=torch.float64, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        loss_fn = MultipleNegativesRankingLoss(Stub(), scale=scale)
    loss = loss_fn([{"embedding": ta}, {"embedding": tp}], labels=None)
    loss.backward()
    return loss.item(), ta.grad.numpy(), tp.grad.numpy()


@pytest.mark.parametrize("scale", [20.0, 1.0])
@pytest.mark.parametrize("n", [1, 2, 7])
def test_equals_sentence_transformers_loss_and_autograd(n, scale):
    a, p = batch(n)
    loss, da, dp = multiple_negatives_ranking_loss(a, p, scale)
    ref_loss, ref_da, ref_dp = sentence_transformers_loss(a, p, scale)
    assert abs(loss - ref_loss) <= 1e-12 * max(1.0, abs(ref_loss))
    np.testing.assert_allclose(da, ref_da, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(dp, ref_dp, rtol=1e-10, atol=1e-13)


def test_gradients_against_central_differences():
    a, p = batch(5, 4, seed=3)
    loss, da, dp = multiple_negatives_ranking_loss(a, p)
    for x, dx in ((a, da), (p, dp)):
        num = numerical_gradient(lambda: multiple_negatives_ranking_loss(a, p)[0], x)
        assert relative_error(dx, num) < 1e-6


def test_loss_is_the_cross_entropy_of_scaled_cosines():
    """The definition written out, independently of the function's own steps."""
    a, p = batch(4, 3, seed=5)
    cos = np.array([[ai @ pj / np.linalg.norm(ai) / np.linalg.norm(pj) for pj in p] for ai in a])
    S = 20.0 * cos
    expected = np.mean([np.log(np.exp(row).sum()) - row[i] for i, row in enumerate(S)])
    assert multiple_negatives_ranking_loss(a, p)[0] == pytest.approx(expected, rel=1e-12)


def test_scaling_a_row_changes_nothing_and_float32_stays_float32():
    a, p = batch(4)
    loss, da, _ = multiple_negatives_ranking_loss(a, p)
    loss2, da2, _ = multiple_negatives_ranking_loss(3 * a, p)
    assert loss2 == pytest.approx(loss, rel=1e-12)
    np.testing.assert_allclose(3 * da2, da, rtol=1e-10, atol=1e-14)  # d/d(3a) = d/da / 3
    _, da32, dp32 = multiple_negatives_ranking_loss(a.astype(np.float32), p.astype(np.float32))
    assert da32.dtype == dp32.dtype == np.float32


@pytest.mark.parametrize(
    "args, message",
    [
        ((np.ones((3, 4)), np.ones((2, 4))), "one positive per anchor"),
        ((np.ones((0, 4)), np.ones((0, 4))), r"shape \(N, d\)"),
        ((np.ones(4), np.ones(4)), r"shape \(N, d\)"),
        ((np.array([[np.nan, 1.0]]), np.ones((1, 2))), "anchors contain NaN"),
        ((np.ones((1, 2)), np.array([[np.inf, 1.0]])), "positives contain NaN or infinity"),
        ((np.ones((2, 2)), np.ones((2, 2)), 0.0), "scale must be a positive"),
        ((np.ones((2, 2)), np.ones((2, 2)), np.nan), "scale must be a positive"),
    ],
)
def test_bad_input_is_refused(args, message):
    with pytest.raises(ValueError, match=message):
        multiple_negatives_ranking_loss(*args)
