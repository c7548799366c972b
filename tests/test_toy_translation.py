"""Tests for attention_lib.data.toy_translation: the grammar's pairs and gold alignments."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

from attention_lib.data.toy_translation import (
    ADJECTIVES,
    CONTENT_CLASSES,
    DETERMINERS,
    EOS,
    NOUNS,
    VERBS,
    WORD_CLASSES,
    encode_batch,
    generate_pairs,
    make_pair,
    source_vocab,
    target_vocab,
)

FRENCH = {**{f: e for e, (f, _) in NOUNS.items()}, **{v: e for e, v in VERBS.items()}}
for _e, _forms in {**ADJECTIVES, **DETERMINERS}.items():
    for _f in _forms:
        FRENCH.setdefault(_f, _e)
FUNCTION = {
    "ne": {"never"},
    "jamais": {"never"},
    "près": {"near"},
    "de": {"near"},
    "et": {"and"},
    "beaucoup": {"a", "lot"},
}


def test_the_same_seed_gives_the_same_pairs_and_another_seed_others():
    assert generate_pairs(50, seed=7) == generate_pairs(50, seed=7)
    assert generate_pairs(50, seed=7) != generate_pairs(50, seed=8)


@given(st.integers(5, 60), st.integers(0, 2**32 - 1))
def test_a_pair_has_exactly_the_length_asked_for(n_words, seed):
    assert len(make_pair(np.random.default_rng(seed), n_words).source) == n_words


@given(st.integers(5, 50), st.integers(0, 2**32 - 1))
def test_every_gold_link_joins_a_word_and_its_translation(n_words, seed):
    p = make_pair(np.random.default_rng(seed), n_words)
    linked = {i for _, i in p.alignment}
    assert linked == set(range(len(p.target)))  # every target word is aligned
    for j, i in p.alignment:
        f, e = p.target[i], p.source[j]
        if f in FUNCTION:
            assert e in FUNCTION[f]
        else:
            assert FRENCH[f] == e, (f, e)


@given(st.integers(5, 50), st.integers(0, 2**32 - 1))
def test_determiners_and_adjectives_agree_with_the_noun_they_belong_to(n_words, seed):
    p = make_pair(np.random.default_rng(seed), n_words)
    links = {i: j for j, i in p.alignment}
    for i, c in enumerate(p.classes):
        if c == "noun":
            g = 0 if NOUNS[p.source[links[i]]][1] == "m" else 1
            assert DETERMINERS[p.source[links[i - 1]]][g] == p.target[i - 1]
            if i + 1 < len(p.target) and p.classes[i + 1] == "adjective":
                # the adjective follows the noun in French but preceded it in English
                assert links[i + 1] == links[i] - 1
                assert ADJECTIVES[p.source[links[i + 1]]][g] == p.target[i + 1]


def test_the_alignment_is_not_the_diagonal():
    pairs = generate_pairs(200, seed=0)
    off = [sum(j != i for j, i in p.alignment) / len(p.alignment) for p in pairs]
    assert np.mean(off) > 0.3


def test_classes_cover_every_target_word_and_content_words_are_common():
    pairs = generate_pairs(100, seed=1)
    classes = [c for p in pairs for c in p.classes]
    assert all(len(p.classes) == len(p.target) for p in pairs)
    assert set(classes) <= set(WORD_CLASSES) and set(CONTENT_CLASSES) <= set(classes)


def test_lengths_cover_the_requested_range():
    lengths = {len(p.source) for p in generate_pairs(2000, 5, 50, seed=2)}
    assert lengths == set(range(5, 51))


def test_encode_batch_pads_and_frames_the_targets():
    pairs = generate_pairs(3, 5, 12, seed=3)
    sv, tv = source_vocab(), target_vocab()
    src, lengths, tgt_in, tgt_out = encode_batch(pairs, sv, tv)
    assert lengths.tolist() == [len(p.source) for p in pairs]
    for b, p in enumerate(pairs):
        assert sv.decode(src[b]) == list(p.source)
        assert tv.decode(tgt_out[b]) == list(p.target)
        assert tgt_out[b, len(p.target)] == EOS
        assert (tgt_in[b, 1 : len(p.target) + 1] == tgt_out[b, : len(p.target)]).all()


def test_bad_lengths_raise_errors_that_name_them():
    with pytest.raises(ValueError, match="max_words"):
        generate_pairs(3, 20, 10)
    with pytest.raises(ValueError, match="min_words"):
        generate_pairs(3, 2, 10)
