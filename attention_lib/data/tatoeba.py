"""English-French sentence pairs from Tatoeba, split by English sentence, and their subwords.

The book's subset of the manythings.org/anki export of Tatoeba (2017-09-29;
CC BY 2.0 FR, "www.manythings.org/anki and tatoeba.org") lives in
``data/tatoeba/``:

- ``train.tsv``, ``valid.tsv``, ``test.tsv``: ``English<TAB>French`` lines, every
  pair whose English side has 1 to :data:`MAX_WORDS` words. The split is
  made **by English sentence** (a hash of its text, so it is deterministic
  and does not depend on the file's order): all the French translations of
  one English sentence land in the same file, so no test sentence is ever
  seen in training with another translation, and the test set is
  multi-reference.
- ``bpe.json``: the shared byte-level BPE vocabulary, learned with Hugging
  Face ``tokenizers`` on the training file (:func:`train_tokenizer`).

:func:`build_subset` makes the three text files from the original ``eng-fra.tsv``
and :func:`train_tokenizer` the vocabulary; ``python -m attention_lib.data.tatoeba
SRC.tsv`` runs both.
"""

import hashlib
import itertools
import json
import sys
import unicodedata
from collections import Counter
from pathlib import Path

import numpy as np

from .paths import DataFileError, data_dir, sha256

#: Longest English sentence kept, in words (split on spaces).
MAX_WORDS = 15
#: Per mille of English sentences in the test and validation files.
TEST_PER_MILLE, VALID_PER_MILLE = 15, 10
#: Special tokens, with fixed ids: padding, start and end of a sentence.
PAD, BOS, EOS = 0, 1, 2
SPECIALS = ["<pad>", "<bos>", "<eos>"]
#: Size of the shared English-French vocabulary, specials included.
VOCAB_SIZE = 4000


def tatoeba_dir():
    """``data/tatoeba``: the splits and the tokenizer."""
    return data_dir() / "tatoeba"


def normalize(text):
    """One sentence as the models see it: Unicode NFC, no surrounding or repeated spaces.

    A byte-order mark (U+FEFF) at either end goes too, as the runtime's
    ``String.trim`` drops it (Python's ``split`` keeps it, and the tokenizer
    would read it as three bytes of a word).
    """
    return " ".join(unicodedata.normalize("NFC", text).split()).strip(" \ufeff")


def split_of(english):
    """``"train"``, ``"valid"`` or ``"test"``, from the sha256 of the English sentence."""
    h = int.from_bytes(hashlib.sha256(english.encode("utf8")).digest()[:8], "big") % 1000
    if h < TEST_PER_MILLE:
        return "test"
    return "valid" if h < TEST_PER_MILLE + VALID_PER_MILLE else "train"


def build_subset(src, out=None, max_words=MAX_WORDS):
    """Write ``train.tsv``, ``valid.tsv`` and ``test.tsv`` from the original ``eng-fra.tsv``.

    Returns the number of pairs written to each file.
    """
    out = Path(out) if out is not None else tatoeba_dir()
    out.mkdir(parents=True, exist_ok=True)
    files = {name: [] for name in ("train", "valid", "test")}
    seen = set()
    for line in Path(src).read_text(encoding="utf8").splitlines():
        fields = line.split("\t")
        if len(fields) < 2:
            continue
        en, fr = normalize(fields[0]), normalize(fields[1])
        if not en or not fr or len(en.split()) > max_words or (en, fr) in seen:
            continue
        seen.add((en, fr))
        files[split_of(en)].append(f"{en}\t{fr}\n")
    for name, lines in files.items():
        (out / f"{name}.tsv").write_text("".join(lines), encoding="utf8")
    return {name: len(lines) for name, lines in files.items()}


def load_pairs(split="train"):
    """The ``(english, french)`` pairs of one split, in file order."""
    if split not in ("train", "valid", "test"):
        raise ValueError(f"split must be 'train', 'valid' or 'test', got {split!r}")
    path = tatoeba_dir() / f"{split}.tsv"
    try:
        text = path.read_text(encoding="utf8")
    except UnicodeDecodeError as err:
        raise DataFileError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    pairs = [tuple(line.split("\t")) for line in text.splitlines()]
    for k, pair in enumerate(pairs):
        if len(pair) != 2:
            raise DataFileError(
                f"{path}, line {k + 1}: {len(pair)} tab-separated fields, not 2 "
                "(English, French); restore the file with git checkout"
            )
    return pairs


def load_references(split="test", min_words=1, max_words=MAX_WORDS):
    """Each English sentence of a split once, with all its French translations.

    Returns
    -------
    sources : list of str
        English sentences of ``min_words`` to ``max_words`` words, in order of first appearance.
    references : list of list of str
        ``references[i]`` holds every French translation of ``sources[i]``.
    """
    refs = {}
    for en, fr in load_pairs(split):
        if min_words <= len(en.split()) <= max_words:
            refs.setdefault(en, []).append(fr)
    return list(refs), list(refs.values())


# -- subwords ---------------------------------------------------------------


def learn_bpe(words, n_merges):
    """Byte-pair encoding by hand: the ``n_merges`` most frequent adjacent pairs, merged in turn.

    A short teaching version of what ``tokenizers`` does (Sennrich et al., 2016):
    start from characters, count every adjacent pair of symbols over the
    corpus (each word weighted by its count), merge the most frequent pair
    everywhere, repeat. Ties go, as in ``tokenizers``, to the pair whose
    symbols have the smaller ids (characters numbered in sorted order, each
    new symbol numbered after them in the order it was made).

    Parameters
    ----------
    words : iterable of str
        The corpus, one word per item (repeats count).
    n_merges : int

    Returns
    -------
    merges : list of (str, str)
        The merges in the order learned.

    Examples
    --------
    >>> learn_bpe("low low low lower lowest newest newest".split(), 3)
    [('l', 'o'), ('lo', 'w'), ('e', 's')]
    """
    counts = Counter(words)
    corpus = {w: list(w) for w in counts}  # each word as its current symbols
    ids = {c: i for i, c in enumerate(sorted(set("".join(counts))))}
    merges = []
    for _ in range(n_merges):
        pairs = Counter()
        for w, symbols in corpus.items():
            for pair in itertools.pairwise(symbols):
                pairs[pair] += counts[w]
        if not pairs:
            break
        best = max(pairs.values())
        pair = min((p for p, c in pairs.items() if c == best), key=lambda p: (ids[p[0]], ids[p[1]]))
        merges.append(pair)
        ids.setdefault(pair[0] + pair[1], len(ids))
        for w, symbols in corpus.items():
            i, merged = 0, []
            while i < len(symbols):
                if symbols[i : i + 2] == list(pair):
                    merged.append(symbols[i] + symbols[i + 1])
                    i += 2
                else:
                    merged.append(symbols[i])
                    i += 1
            corpus[w] = merged
    return merges


def train_tokenizer(pairs, vocab_size=VOCAB_SIZE):
    """A shared byte-level BPE (Hugging Face ``tokenizers``) learned on both sides of ``pairs``.

    Byte-level: the alphabet is the 256 bytes, so any text encodes with no
    unknown token (an unseen word falls back to smaller pieces, at worst bytes).
    """
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import decoders, models, pre_tokenizers, trainers

    tok = HFTokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator((s for pair in pairs for s in pair), trainer)
    return tok


class Tokenizer:
    """The committed subword vocabulary (``data/tatoeba/bpe.json``): text <-> token ids.

    Examples
    --------
    >>> from attention_lib.data.tatoeba import Tokenizer
    >>> tok = Tokenizer.load()
    >>> ids = tok.encode("Zyxwv is a word nobody typed.")
    >>> tok.decode(ids)
    'Zyxwv is a word nobody typed.'
    >>> tok.pad, tok.bos, tok.eos
    (0, 1, 2)
    """

    pad, bos, eos = PAD, BOS, EOS

    def __init__(self, hf_tokenizer):
        self.hf = hf_tokenizer
        for i, name in enumerate(SPECIALS):
            if self.hf.token_to_id(name) != i:
                raise ValueError(f"the tokenizer must give {name} the id {i}")

    @classmethod
    def load(cls, path=None):
        """Read a tokenizer from JSON (default: the committed ``bpe.json``)."""
        from tokenizers import Tokenizer as HFTokenizer

        path = Path(path) if path is not None else tatoeba_dir() / "bpe.json"
        if not path.is_file():
            raise DataFileError(f"{path}: no such tokenizer file")
        try:
            hf = HFTokenizer.from_file(str(path))
        except Exception as err:  # the tokenizers library raises a bare Exception
            raise DataFileError(f"{path}: not a tokenizer file ({err})") from None
        try:
            return cls(hf)
        except ValueError as err:
            raise DataFileError(f"{path}: {err}") from None

    def __len__(self):
        return self.hf.get_vocab_size()

    def encode(self, text):
        """The ids of one sentence (no ``<bos>``/``<eos>``)."""
        return self.hf.encode(normalize(text)).ids

    def encode_batch(self, texts):
        return [e.ids for e in self.hf.encode_batch([normalize(t) for t in texts])]

    def tokens(self, text):
        """The subword strings of one sentence (byte-level: a space shows as ``Ġ``)."""
        return self.hf.encode(normalize(text)).tokens

    def decode(self, ids):
        """Text from ids; specials are dropped. Ids must be integers in ``[0, len(self))``."""
        ids = np.asarray(ids)
        if ids.size == 0:
            return ""
        if ids.dtype.kind not in "iu" or ids.ndim != 1:
            raise TypeError(f"ids must be a sequence of integers, got {ids.dtype} {ids.shape}")
        bad = (ids < 0) | (ids >= len(self))
        if bad.any():
            raise ValueError(f"ids must be in [0, {len(self)}), got {int(ids[bad][0])}")
        return self.hf.decode(ids.tolist(), skip_special_tokens=True).strip()

    def decode_batch(self, batch):
        return [self.decode(ids) for ids in batch]


def pad_batch(src: list[list[int]], tgt: list[list[int]] | None = None) -> tuple[np.ndarray, ...]:
    """``(src, lengths)`` or ``(src, lengths, tgt_in, tgt_out)`` as padded int arrays."""
    lengths = np.array([len(s) for s in src])
    S = np.zeros((len(src), lengths.max()), np.int64)
    for b, s in enumerate(src):
        S[b, : len(s)] = s
    if tgt is None:
        return S, lengths
    T = max(len(t) for t in tgt) + 1
    tin, tout = np.full((len(tgt), T), PAD), np.full((len(tgt), T), PAD)
    for b, t in enumerate(tgt):
        tin[b, : len(t) + 1] = [BOS] + t
        tout[b, : len(t) + 1] = t + [EOS]
    return S, lengths, tin, tout


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        sys.exit("usage: python -m attention_lib.data.tatoeba path/to/eng-fra.tsv")
    counts = build_subset(argv[0])
    tok = train_tokenizer(load_pairs("train"))
    tok.save(str(tatoeba_dir() / "bpe.json"))
    info = {
        "pairs": counts,
        "vocab_size": tok.get_vocab_size(),
        "sha256": {
            f: sha256(tatoeba_dir() / f) for f in ("train.tsv", "valid.tsv", "test.tsv", "bpe.json")
        },
    }
    print(json.dumps(info, indent=1))


if __name__ == "__main__":
    main()
