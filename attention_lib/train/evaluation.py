"""How well a translation model does: BLEU, exact sentences, and alignment error.

- BLEU is computed by sacreBLEU (Post, 2018), the field's reference
  implementation, on whole test sets (corpus BLEU, 0-100).
- Exact-sequence accuracy: the share of sentences translated word for word right.
- Alignment error rate (AER, Och and Ney, 2003) of the attention's argmax
  against the grammar's gold links. Every gold link is "sure", so
  ``AER = 1 - 2 |A & G| / (|A| + |G|)`` with ``A`` the predicted links (one per
  target word: the source word with the largest ``alpha_ij``) and ``G`` the
  gold ones. Attention is read with teacher forcing on the reference, so row
  ``i`` belongs to reference word ``i`` whatever the model would have written.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..align.scoring import aer_from_counts
from .._checks import as_int
from ..data.toy_translation import CONTENT_CLASSES, WORD_CLASSES, Pair, encode_batch, generate_pairs

if TYPE_CHECKING:  # for the type hints only
    from ..models.seq2seq import RNNencdec

#: The length buckets of the test sets (source words, inclusive), as in the paper's Figure 2.
BUCKETS = ((5, 9), (10, 14), (15, 19), (20, 24), (25, 29), (30, 34), (35, 39), (40, 44), (45, 50))


def _same_length(a, b, name_a, name_b):
    """Raise unless ``a`` and ``b`` are non-empty and as long as each other (zip would cut)."""
    if len(a) != len(b) or not len(a):
        raise ValueError(
            f"{name_a} and {name_b} must be non-empty and of the same length "
            f"(one per sentence), got {len(a)} and {len(b)}"
        )


def make_test_sets(n_per_bucket: int = 100, seed: int = 2015) -> dict[tuple[int, int], list[Pair]]:
    """One test set per length bucket: ``{(lo, hi): [Pair, ...]}``, seeded apart from training."""
    n_per_bucket = as_int(n_per_bucket, "n_per_bucket", 1)
    seed = as_int(seed, "seed", 0)
    return {
        (lo, hi): generate_pairs(n_per_bucket, lo, hi, seed=seed + k)
        for k, (lo, hi) in enumerate(BUCKETS)
    }


def translate_pairs(
    model: RNNencdec, pairs: Sequence[Pair], src_vocab: dict, tgt_vocab: dict, batch: int = 100
) -> tuple[list, list]:
    """Greedy translations (lists of French words) and attention weights, one per pair."""
    batch = as_int(batch, "batch", 1)
    hyps, weights = [], []
    for start in range(0, len(pairs), batch):
        chunk = pairs[start : start + batch]
        src, lengths, _, _ = encode_batch(chunk, src_vocab, tgt_vocab)
        ids, w = model.translate(src, lengths)
        for b, row in enumerate(ids):
            hyps.append(tgt_vocab.decode(row))
            weights.append(w[b, : len(row) + 1, : lengths[b]])
    return hyps, weights


def bleu(hypotheses: Sequence[Sequence[str]], references: Sequence[Sequence[str]]) -> float:
    """Corpus BLEU (0-100) by sacreBLEU; sentences are lists of words."""
    _same_length(hypotheses, references, "hypotheses", "references")
    import sacrebleu  # imported here: only evaluation needs it

    return float(
        sacrebleu.corpus_bleu(
            [" ".join(h) for h in hypotheses], [[" ".join(r) for r in references]]
        ).score
    )


def exact_accuracy(
    hypotheses: Sequence[Sequence[str]], references: Sequence[Sequence[str]]
) -> float:
    """The share of hypotheses equal to their reference, word for word."""
    _same_length(hypotheses, references, "hypotheses", "references")
    return float(np.mean([list(h) == list(r) for h, r in zip(hypotheses, references)]))


def forced_attention(
    model: RNNencdec, pairs: Sequence[Pair], src_vocab: dict, tgt_vocab: dict, batch: int = 100
) -> list[np.ndarray]:
    """``alpha`` ``(T_i, S_i)`` of each pair's reference translation, read with teacher forcing."""
    batch = as_int(batch, "batch", 1)
    if not model.attention:
        raise ValueError(f"{type(model).__name__} has no attention to read")
    out = []
    for start in range(0, len(pairs), batch):
        chunk = pairs[start : start + batch]
        src, lengths, tgt_in, tgt_out = encode_batch(chunk, src_vocab, tgt_vocab)
        model.loss(src, lengths, tgt_in, tgt_out)
        for b, p in enumerate(chunk):
            out.append(model.attention_weights[b, : len(p.target), : len(p.source)])
    return out


def alignment_error_rate(
    pairs: Sequence[Pair], weights: Sequence[np.ndarray], classes: Collection[str] | None = None
) -> float:
    """AER of the argmax of each target word's attention against the gold links.

    Parameters
    ----------
    pairs : list of Pair
    weights : list of ndarray, shape (T_i, S_i)
        Attention of each reference target word over the source words.
    classes : collection of str, optional
        Only score target words of these classes (e.g.
        :data:`~attention_lib.data.toy_translation.CONTENT_CLASSES`).

    Returns
    -------
    float
        ``1 - 2 |A & G| / (|A| + |G|)``: 0 when every argmax hits a gold link
        and no target word has a gold link the argmax missed.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.data.toy_translation import Pair
    >>> p = Pair(("a", "b"), ("x", "y"), ((1, 0), (0, 1)), ("noun", "verb"))
    >>> alignment_error_rate([p], [np.array([[0.1, 0.9], [0.8, 0.2]])])
    0.0
    >>> alignment_error_rate([p], [np.eye(2)])          # the diagonal is wrong here
    1.0
    """
    _same_length(pairs, weights, "pairs", "weights")
    hits = n_pred = n_gold = 0
    for k, (p, w) in enumerate(zip(pairs, weights)):
        if np.shape(w) != (len(p.target), len(p.source)):
            raise ValueError(
                f"weights[{k}] must have shape (target words, source words) = "
                f"{(len(p.target), len(p.source))}, got {np.shape(w)}"
            )
        keep = [i for i, c in enumerate(p.classes) if classes is None or c in classes]
        gold = {(j, i) for j, i in p.alignment if i in keep}
        pred = {(int(np.argmax(w[i])), i) for i in keep}
        hits += len(gold & pred)
        n_pred += len(pred)
        n_gold += len(gold)
    if n_pred + n_gold == 0:
        raise ValueError("no target word of these classes: nothing to score")
    return aer_from_counts(n_pred, n_gold, hits, hits)  # every gold link is Sure


def evaluate(
    model: RNNencdec, tests: dict, src_vocab: dict, tgt_vocab: dict, alignment: bool = True
) -> dict:
    """BLEU and exact accuracy per bucket, and AER by word class (attention models).

    ``alignment=False`` skips the AER (it needs a second, teacher-forced pass).

    Returns
    -------
    dict
        ``{"buckets": [{"words": "5-9", "bleu": ..., "exact": ...}, ...],
        "aer": {"all": ..., "content": ..., "noun": ..., ...}}`` (``aer`` is
        absent without attention). Numbers are rounded to 2 decimals (BLEU)
        and 4 (fractions).
    """
    rows, all_pairs, all_weights = [], [], []
    for (lo, hi), pairs in tests.items():
        hyps, _ = translate_pairs(model, pairs, src_vocab, tgt_vocab)
        refs = [p.target for p in pairs]
        rows.append(
            {
                "words": f"{lo}-{hi}",
                "bleu": round(bleu(hyps, refs), 2),
                "exact": round(exact_accuracy(hyps, refs), 4),
            }
        )
        if model.attention and alignment:
            all_pairs += pairs
            all_weights += forced_attention(model, pairs, src_vocab, tgt_vocab)
    result = {"buckets": rows}
    if model.attention and alignment:
        aer = {
            "all": alignment_error_rate(all_pairs, all_weights),
            "content": alignment_error_rate(all_pairs, all_weights, CONTENT_CLASSES),
        }
        for c in WORD_CLASSES:
            aer[c] = alignment_error_rate(all_pairs, all_weights, (c,))
        result["aer"] = {k: round(v, 4) for k, v in aer.items()}
    return result
