"""A toy English-to-French grammar whose word alignment is known exactly.

Chapter 3 trains encoder-decoders on it. Every sentence is a chain of clauses
joined by "and"; every clause is ``subject verb object [near place]``, with
small twists that French makes and English does not:

- adjectives follow their noun: "the red cat" -> "le chat rouge";
- determiners and adjectives agree with the noun's gender: "the" is "le" or
  "la", "small" is "petit" or "petite", decided by a noun that comes *later*
  in the English;
- one word becomes two: "near" -> "près de", and "never" -> "ne ... jamais"
  around the verb;
- (a toy, not French: no elision or contraction, so "près de le" stays three words);
- two words become one: "a lot" (at the end of the English clause) ->
  "beaucoup" (right after the French verb).

The generator builds each target word together with the source word(s) it
translates, so the gold alignment is exact by construction, not estimated.

Examples
--------
>>> from attention_lib.data.toy_translation import generate_pairs
>>> pairs = generate_pairs(2, 5, 9, seed=1)
>>> [len(p.source) for p in pairs]
[7, 7]
>>> " ".join(pairs[0].source)
'the green flower watches this cold boat'
>>> " ".join(pairs[0].target)
'la fleur verte regarde ce bateau froid'
>>> pairs[0].alignment[:3]          # (source j, target i): "fleur" (1) is "flower" (2)
((0, 0), (2, 1), (1, 2))
"""

import itertools
from dataclasses import dataclass

import numpy as np

from .._checks import as_int

# English noun -> (French noun, gender)
NOUNS = {
    "cat": ("chat", "m"),
    "dog": ("chien", "m"),
    "garden": ("jardin", "m"),
    "book": ("livre", "m"),
    "boy": ("garçon", "m"),
    "boat": ("bateau", "m"),
    "horse": ("cheval", "m"),
    "car": ("voiture", "f"),
    "house": ("maison", "f"),
    "girl": ("fille", "f"),
    "table": ("table", "f"),
    "door": ("porte", "f"),
    "river": ("rivière", "f"),
    "flower": ("fleur", "f"),
}
# English adjective -> (masculine, feminine)
ADJECTIVES = {
    "red": ("rouge", "rouge"),
    "small": ("petit", "petite"),
    "green": ("vert", "verte"),
    "black": ("noir", "noire"),
    "cold": ("froid", "froide"),
    "long": ("long", "longue"),
    "happy": ("heureux", "heureuse"),
    "blue": ("bleu", "bleue"),
}
VERBS = {
    "sees": "voit",
    "likes": "aime",
    "takes": "prend",
    "finds": "trouve",
    "watches": "regarde",
    "follows": "suit",
    "paints": "peint",
    "pushes": "pousse",
    "wants": "veut",
    "hides": "cache",
}
DETERMINERS = {"the": ("le", "la"), "a": ("un", "une"), "this": ("ce", "cette")}

WORD_CLASSES = ("noun", "adjective", "verb", "determiner", "function")
CONTENT_CLASSES = ("noun", "adjective", "verb")
SPECIALS = ("<pad>", "<bos>", "<eos>")
PAD, BOS, EOS = 0, 1, 2
MIN_WORDS, CLAUSE_MAX = 5, 13  # a clause has 5 to 13 English words


@dataclass(frozen=True)
class Pair:
    """One sentence pair and its gold word alignment.

    Attributes
    ----------
    source, target : tuple of str
        The English and the French words.
    alignment : tuple of (int, int)
        Gold links ``(j, i)``: source word ``j`` translates into target word
        ``i``. Every target word has at least one link ("beaucoup" has two:
        "a" and "lot").
    classes : tuple of str
        The word class of each *target* word, one of :data:`WORD_CLASSES`.
    """

    source: tuple
    target: tuple
    alignment: tuple
    classes: tuple


def _fills():
    """Every combination of optional clause parts, by the clause length it gives."""
    fills = {}
    for combo in itertools.product((False, True), repeat=6):
        subj_adj, obj_adj, never, near, near_adj, a_lot = combo
        if (near_adj and not near) or (never and a_lot):
            continue
        n = 5 + subj_adj + obj_adj + never + near * (3 + near_adj) + 2 * a_lot
        fills.setdefault(n, []).append(combo)
    return fills


_FILLS = _fills()
_NOUNS, _ADJS, _VERBS, _DETS = tuple(NOUNS), tuple(ADJECTIVES), tuple(VERBS), tuple(DETERMINERS)


def _pick(rng, options):
    """A uniform choice (``rng.random`` is several times faster than ``rng.choice``)."""
    return options[int(rng.random() * len(options))]


def _clause(rng, n_words, start):
    """One clause of exactly ``n_words`` English words (5 to 13) starting at ``start``."""
    # The optional parts add English words: an adjective in a noun phrase (1),
    # "never" (1), "near" + a noun phrase (3 or 4), "a lot" (2, not with never).
    # Pick uniformly among the combinations that give exactly n_words.
    subj_adj, obj_adj, never, near, near_adj, a_lot = _pick(rng, _FILLS[n_words])
    en, fr = [], []

    def phrase(with_adj):
        det, noun = _pick(rng, _DETS), _pick(rng, _NOUNS)
        fr_noun, gender = NOUNS[noun]
        g = 0 if gender == "m" else 1
        p = start + len(en)
        en.append(det)
        out = [(DETERMINERS[det][g], (p,), "determiner")]
        if with_adj:
            adj = _pick(rng, _ADJS)
            en.extend([adj, noun])
            out += [(fr_noun, (p + 2,), "noun"), (ADJECTIVES[adj][g], (p + 1,), "adjective")]
        else:
            en.append(noun)
            out.append((fr_noun, (p + 1,), "noun"))
        return out

    fr += phrase(subj_adj)
    if never:
        en.append("never")
        p_never = start + len(en) - 1
        fr.append(("ne", (p_never,), "function"))
    verb = _pick(rng, _VERBS)
    en.append(verb)
    fr.append((VERBS[verb], (start + len(en) - 1,), "verb"))
    if never:
        fr.append(("jamais", (p_never,), "function"))
    verb_at = len(fr)
    fr += phrase(obj_adj)
    if near:
        en.append("near")
        p_near = start + len(en) - 1
        fr += [("près", (p_near,), "function"), ("de", (p_near,), "function")]
        fr += phrase(near_adj)
    if a_lot:
        en += ["a", "lot"]
        p = start + len(en) - 2
        fr.insert(verb_at, ("beaucoup", (p, p + 1), "function"))
    assert len(en) == n_words
    return en, fr


def _clause_lengths(rng, n_words):
    """Split ``n_words`` into clause lengths (5 to 13 each) plus one "and" between clauses."""
    lengths = []
    while n_words > CLAUSE_MAX:
        # leave at least MIN_WORDS + 1 for the rest ("and" + a clause)
        k = int(rng.integers(MIN_WORDS, min(CLAUSE_MAX, n_words - MIN_WORDS - 1) + 1))
        lengths.append(k)
        n_words -= k + 1
    lengths.append(n_words)
    return lengths


def make_pair(rng, n_words):
    """One :class:`Pair` with exactly ``n_words`` English words (at least 5)."""
    n_words = as_int(n_words, "n_words", MIN_WORDS)
    en, fr = [], []
    for c, k in enumerate(_clause_lengths(rng, n_words)):
        if c:
            en.append("and")
            fr.append(("et", (len(en) - 1,), "function"))
        e, f = _clause(rng, k, len(en))
        en += e
        fr += f
    alignment = tuple((j, i) for i, (_, src, _) in enumerate(fr) for j in src)
    return Pair(tuple(en), tuple(w for w, _, _ in fr), alignment, tuple(c for _, _, c in fr))


def generate_pairs(n, min_words=5, max_words=50, seed=0):
    """``n`` sentence pairs with source lengths drawn uniformly from ``[min_words, max_words]``.

    Parameters
    ----------
    n : int
        How many pairs.
    min_words, max_words : int
        The range of English sentence lengths (inclusive; ``min_words >= 5``).
    seed : int
        Seeds :func:`numpy.random.default_rng`: the same arguments give the
        same pairs on every machine.

    Returns
    -------
    list of Pair
    """
    n = as_int(n, "n")
    lo, hi = as_int(min_words, "min_words", MIN_WORDS), as_int(max_words, "max_words", MIN_WORDS)
    if hi < lo:
        raise ValueError(f"max_words ({hi}) is below min_words ({lo})")
    rng = np.random.default_rng(seed)
    return [make_pair(rng, int(rng.integers(lo, hi + 1))) for _ in range(n)]


class Vocab:
    """Words <-> integer ids, with ``<pad>`` = 0, ``<bos>`` = 1, ``<eos>`` = 2.

    Examples
    --------
    >>> v = Vocab(["chat", "le"])
    >>> v.encode(["le", "chat"]), v.decode([4, 3, 2, 0])
    ([4, 3], ['le', 'chat'])
    """

    def __init__(self, words):
        self.words = list(SPECIALS) + sorted(set(words))
        self.index = {w: i for i, w in enumerate(self.words)}

    def __len__(self):
        return len(self.words)

    def encode(self, words):
        return [self.index[w] for w in words]

    def decode(self, ids):
        """Words up to the first ``<eos>``, skipping ``<pad>`` and ``<bos>``."""
        out = []
        for i in ids:
            if i == EOS:
                break
            if i > EOS:
                out.append(self.words[i])
        return out


def source_vocab():
    """The English vocabulary (every word the grammar can write)."""
    return Vocab([*NOUNS, *ADJECTIVES, *VERBS, *DETERMINERS, "never", "near", "and", "lot"])


def target_vocab():
    """The French vocabulary (every word the grammar can write)."""
    words = [f for f, _ in NOUNS.values()] + [w for pair in ADJECTIVES.values() for w in pair]
    words += list(VERBS.values()) + [w for pair in DETERMINERS.values() for w in pair]
    return Vocab(words + ["ne", "jamais", "près", "de", "beaucoup", "et"])


def encode_batch(pairs, src_vocab, tgt_vocab):
    """Pad a list of pairs into arrays.

    Returns
    -------
    src : ndarray of int, shape (B, S)
        Source ids, ``<pad>`` after each sentence's end.
    src_lengths : ndarray of int, shape (B,)
    tgt_in, tgt_out : ndarray of int, shape (B, T)
        Decoder inputs ``<bos> y_1 .. y_n`` and targets ``y_1 .. y_n <eos>``,
        padded with ``<pad>``; ``T`` is one more than the longest target.
    """
    S = max(len(p.source) for p in pairs)
    T = max(len(p.target) for p in pairs) + 1
    src = np.zeros((len(pairs), S), dtype=np.int64)
    tgt_in = np.zeros((len(pairs), T), dtype=np.int64)
    tgt_out = np.zeros((len(pairs), T), dtype=np.int64)
    for b, p in enumerate(pairs):
        s, t = src_vocab.encode(p.source), tgt_vocab.encode(p.target)
        src[b, : len(s)] = s
        tgt_in[b, : len(t) + 1] = [BOS] + t
        tgt_out[b, : len(t) + 1] = t + [EOS]
    lengths = np.array([len(p.source) for p in pairs], dtype=np.int64)
    return src, lengths, tgt_in, tgt_out
