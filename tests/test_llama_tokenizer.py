"""Llama's tokenizer (llama2.c's encoding and decoding) on stories260K's vocabulary.

Checked three ways: cases worked by hand on a toy vocabulary, the ids the
``sentencepiece`` library gives on the same vocabulary (stored in
``llama_tokenizer_golden.json`` by ``tests/spm_reference.py``, and compared live
when sentencepiece is installed), and a naive O(n^2) version of llama2.c's loop.
"""

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_lib import data_dir
from attention_lib.data.gguf import read_gguf
from attention_lib.data.llama_tokenizer import LlamaTokenizer

GGUF = data_dir() / "stories260k" / "tinyllamas-stories-260k-f32.gguf"
GOLDEN = json.loads(
    Path(__file__).with_name("llama_tokenizer_golden.json").read_text(encoding="utf8")
)
TOK = LlamaTokenizer.from_gguf(read_gguf(GGUF))
BYTES = [f"<0x{b:02X}>" for b in range(256)]


def toy(extra):
    """A vocabulary of <unk>, <s>, </s>, the 256 bytes and ``extra`` (piece, score)."""
    pieces = ["<unk>", "<s>", "</s>", *BYTES, *(p for p, _ in extra)]
    scores = [0.0] * 259 + [s for _, s in extra]
    return LlamaTokenizer(pieces, scores)


def pieces(tok, ids):
    return [tok.pieces[i] for i in ids]


def test_by_hand_merges_follow_the_scores():
    # "▁abab": characters ▁ a b a b; candidate merges ▁a (-3), ab (-1), ab (-1):
    # the best score is ab, leftmost first -> ▁ ab a b -> ▁ ab ab; then ▁ab (-2)
    # beats abab (-4) -> ▁ab ab; then ▁abab is not a piece: done.
    tok = toy(
        [
            ("\u2581", 0),
            ("a", 0),
            ("b", 0),
            ("ab", -1),
            ("\u2581ab", -2),
            ("\u2581a", -3),
            ("abab", -4),
        ]
    )
    assert pieces(tok, tok.encode("abab", bos=False)) == ["\u2581ab", "ab"]
    # with abab scored above ▁ab, the two ab merge first
    tok = toy(
        [
            ("\u2581", 0),
            ("a", 0),
            ("b", 0),
            ("ab", -1),
            ("\u2581ab", -3),
            ("\u2581a", -4),
            ("abab", -2),
        ]
    )
    assert pieces(tok, tok.encode("abab", bos=False)) == ["\u2581", "abab"]


def test_by_hand_ties_merge_the_leftmost_pair():
    tok = toy([("\u2581", 0), ("a", 0), ("aa", -1)])
    # ▁ a a a: both (a, a) pairs make aa with the same score: the left one wins
    assert pieces(tok, tok.encode("aaa", bos=False)) == ["\u2581", "aa", "a"]


def test_by_hand_unknown_characters_fall_back_to_their_utf8_bytes():
    tok = toy([("\u2581", 0), ("a", 0)])
    assert pieces(tok, tok.encode("aé", bos=True, eos=True)) == [
        "<s>",
        "\u2581",
        "a",
        "<0xC3>",
        "<0xA9>",
        "</s>",
    ]
    assert tok.decode(tok.encode("aé")) == "aé"


def test_stories260k_known_pieces():
    ids = TOK.encode("Once upon a time")
    assert pieces(TOK, ids) == ["<s>", "\u2581Once", "\u2581upon", "\u2581a", "\u2581time"]
    assert pieces(TOK, TOK.encode("\n", bos=False)) == ["\u2581", "<0x0A>"]
    assert pieces(TOK, TOK.encode("😀", bos=False)) == [
        "\u2581",
        "<0xF0>",
        "<0x9F>",
        "<0x98>",
        "<0x80>",
    ]
    assert TOK.encode("").tolist() == [1] and TOK.encode("", bos=False).size == 0
    assert TOK.encode("a", eos=True)[-1] == 2 and TOK.encode("a").dtype == np.int64


def test_decode_drops_the_dummy_prefix_and_control_pieces():
    ids = TOK.encode("Once upon a time")
    assert TOK.decode(ids) == TOK.decode(ids[1:]) == "Once upon a time"
    assert TOK.decode([1, *ids[1:], 2, 1, *ids[1:3]]) == "Once upon a timeOnce upon"
    assert TOK.decode(ids[2:]) == "upon a time"  # first piece: prefix dropped
    assert TOK.decode([]) == ""
    assert TOK.decode(TOK.encode("x", bos=False)[:1]) == ""  # the lone ▁
    # a character cut in the middle of its bytes comes back as U+FFFD
    assert TOK.decode(TOK.encode("😀", bos=False)[:3]) == "\ufffd"


@pytest.mark.parametrize("i", range(len(GOLDEN["texts"])))
def test_same_ids_as_sentencepiece(i):
    text, ids = GOLDEN["texts"][i], GOLDEN["ids"][i]
    assert TOK.encode(text, bos=False).tolist() == ids
    # a ▁ in the text is read as a space, by sentencepiece too
    assert TOK.decode(ids) == text.replace("\u2581", " ")


def test_reference_text_round_trip():
    text = (data_dir() / "stories260k" / "llama2c_doc_stories260K.md").read_text("utf8")
    ids = TOK.encode(text)
    assert TOK.decode(ids) == text
    assert len(ids) < 0.7 * len(text)  # merges happened (Markdown, URLs: 1.55 a token)


def naive_llama2c(tok, text):
    """llama2.c's encode as written in run.c: rescan every pair after each merge."""
    ids = [tok._id[" ".replace(" ", "\u2581")]] if text else []
    for ch in text.replace(" ", "\u2581"):
        if ch in tok._id:
            ids.append(tok._id[ch])
        else:
            ids += [tok.pieces.index(f"<0x{b:02X}>") for b in ch.encode()]
    while True:
        best = None
        for i in range(len(ids) - 1):
            j = tok._id.get(tok.pieces[ids[i]] + tok.pieces[ids[i + 1]])
            if j is not None and (best is None or tok.scores[j] > tok.scores[best[1]]):
                best = (i, j)
        if best is None:
            return ids
        ids[best[0] : best[0] + 2] = [best[1]]


text_strategy = st.text(
    alphabet=st.sampled_from(list("abcdefghilmnorstuwy .,'\n!é日😀")), max_size=60
)


@settings(max_examples=200, deadline=None)
@given(text_strategy)
def test_heap_merges_equal_llama2c_loop(text):
    assert TOK.encode(text, bos=False).tolist() == naive_llama2c(TOK, text)


@settings(max_examples=200, deadline=None)
@given(
    st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\u2581"), max_size=40)
)
def test_any_text_round_trips(text):
    assert TOK.decode(TOK.encode(text)) == text


@settings(max_examples=100, deadline=None)
@given(text_strategy)
def test_same_ids_as_sentencepiece_live(text):
    sp = _spm()
    assert TOK.encode(text, bos=False).tolist() == sp.encode(text)


_SP = []


def _spm():
    if not _SP:
        spm_reference = pytest.importorskip("spm_reference")
        _SP.append(spm_reference.processor())
    return _SP[0]


def test_bad_input():
    with pytest.raises(TypeError, match="text must be a str, got bytes"):
        TOK.encode(b"abc")
    with pytest.raises(ValueError, match="cannot be written in UTF-8"):
        TOK.encode("a\ud800b")
    with pytest.raises(ValueError, match="ids must be between 0 and 511, got 512"):
        TOK.decode([1, 512])
    with pytest.raises(ValueError, match="got -1"):
        TOK.decode([-1])
    with pytest.raises(TypeError, match="1-D sequence of integers"):
        TOK.decode([[1, 2]])
    with pytest.raises(TypeError, match="1-D sequence of integers"):
        TOK.decode([1.5])
    with pytest.raises(ValueError, match="no byte piece for 256 bytes"):
        LlamaTokenizer(["<unk>", "<s>", "</s>", "a"], [0, 0, 0, 0])
    with pytest.raises(ValueError, match="one value per piece"):
        LlamaTokenizer(["a"], [0, 0])
