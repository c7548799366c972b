"""The Tatoeba subset, its split by English sentence, and the subword vocabulary."""

import json

import pytest

from attention_lib.data.tatoeba import (
    MAX_WORDS,
    Tokenizer,
    learn_bpe,
    load_pairs,
    load_references,
    sha256,
    split_of,
    tatoeba_dir,
)


@pytest.fixture(scope="module")
def splits():
    return {name: load_pairs(name) for name in ("train", "valid", "test")}


def test_no_english_sentence_is_in_two_splits(splits):
    english = {name: {en for en, _ in pairs} for name, pairs in splits.items()}
    assert not english["train"] & english["test"]
    assert not english["train"] & english["valid"]
    assert not english["valid"] & english["test"]


def test_each_pair_sits_in_the_split_its_english_hashes_to(splits):
    for name, pairs in splits.items():
        assert all(split_of(en) == name for en, _ in pairs[::50])
        assert all(1 <= len(en.split()) <= MAX_WORDS for en, _ in pairs)


def test_the_test_set_is_multi_reference():
    sources, refs = load_references("test")
    assert len(sources) == len(set(sources)) == len(refs)
    assert max(len(r) for r in refs) > 1
    assert sum(len(r) for r in refs) == len(load_pairs("test"))


def test_files_match_their_sha256_in_the_readme():
    readme = (tatoeba_dir().parent / "README.md").read_text(encoding="utf8")
    for name in ("train.tsv", "valid.tsv", "test.tsv", "bpe.json"):
        assert sha256(tatoeba_dir() / name) in readme, name


@pytest.mark.parametrize(
    "text",
    [
        "Zyxwvutsrq is not a word.",
        "Ça coûte 12,50 € à Zürich ?",
        "naïve café — 東京 🙂",
        "",
    ],
)
def test_any_text_round_trips_with_no_unknown_token(text):
    tok = Tokenizer.load()
    ids = tok.encode(text)
    assert tok.decode(ids) == " ".join(text.split())
    assert all(0 <= i < len(tok) for i in ids)
    assert tok.hf.get_vocab().get("<unk>") is None  # byte-level: there is no such token


def test_specials_have_fixed_ids_and_are_not_decoded():
    tok = Tokenizer.load()
    assert (tok.pad, tok.bos, tok.eos) == (0, 1, 2)
    assert tok.decode([tok.bos] + tok.encode("I am cold.") + [tok.eos, tok.pad]) == "I am cold."


def test_hand_written_bpe_learns_the_merges_of_hugging_face_tokenizers():
    tokenizers = pytest.importorskip("tokenizers")
    words = ("low " * 5 + "lower " * 2 + "newest " * 6 + "widest " * 3).split()
    alphabet = sorted(set("".join(words)))
    for n in (1, 4, 6, 9):
        hf = tokenizers.Tokenizer(tokenizers.models.BPE())
        hf.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
        trainer = tokenizers.trainers.BpeTrainer(vocab_size=len(alphabet) + n, show_progress=False)
        hf.train_from_iterator([" ".join(words)], trainer)
        merges = [tuple(m) for m in json.loads(hf.to_str())["model"]["merges"]]
        assert learn_bpe(words, n) == merges


def test_hand_written_bpe_on_an_empty_or_single_letter_corpus():
    assert learn_bpe([], 3) == []
    assert learn_bpe(["a", "a"], 3) == []
