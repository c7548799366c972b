"""Llama's tokenizer: SentencePiece byte-pair merges, as llama2.c runs them.

A Llama-family model reads token ids, not characters. Its vocabulary (512
pieces for stories260K) holds three kinds of piece:

- *control* pieces: ``<unk>`` (id 0), ``<s>`` (1, the start of a text: BOS)
  and ``</s>`` (2, its end: EOS);
- 256 *byte* pieces ``<0x00>`` ... ``<0xFF>``, so that any text can be
  written, whatever characters it holds ("byte fallback");
- ordinary pieces, from single characters (``e``, ``▁``) to whole words
  (``▁the``), each with a score: the later a merge was learned, the lower.

SentencePiece writes a space as ``▁`` (U+2581) and puts one in front of the
text (the "dummy prefix"), so that a word is the same piece at the start of
a text and after a space. Encoding is then:

1. write the text as ``▁`` + the text with every space as ``▁``;
2. split it into characters (Unicode code points); a character that is not a
   piece becomes the byte pieces of its UTF-8 bytes;
3. repeatedly merge the adjacent pair whose concatenation is the piece with
   the highest score (the leftmost pair on a tie), until no pair is a piece.

Decoding undoes this (:meth:`LlamaTokenizer.decode`). Both follow ``encode``
and ``decode`` in llama2.c's ``run.c`` (https://github.com/karpathy/llama2.c)
and agree with the ``sentencepiece`` library on the same vocabulary
(``tests/test_llama_tokenizer.py``).
"""

import heapq
import re

import numpy as np

SPACE = "\u2581"  # ▁, SentencePiece's visible space
_BYTE_PIECE = re.compile(r"<0x([0-9A-F]{2})>")
# SentencePiece's piece types, as GGUF's tokenizer.ggml.token_type stores them
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6


def _type_of(piece):
    """A piece's type when the vocabulary does not say: control, byte or normal."""
    if piece in ("<unk>", "<s>", "</s>"):
        return CONTROL
    return BYTE if _BYTE_PIECE.fullmatch(piece) else NORMAL


class LlamaTokenizer:
    """Text to token ids and back, with a SentencePiece vocabulary and scores.

    Parameters
    ----------
    pieces : sequence of str
        The vocabulary; piece ``i`` has id ``i``.
    scores : sequence of float
        One per piece: merges that make a higher-scoring piece come first.
    types : sequence of int, optional
        SentencePiece's type of each piece (1 normal, 2 unknown, 3 control,
        6 byte). When omitted, ``<unk>``, ``<s>`` and ``</s>`` are control
        pieces, ``<0xNN>`` byte pieces and the rest normal.
    bos_id, eos_id : int
        The ids of ``<s>`` and ``</s>``.

    Examples
    --------
    >>> from attention_lib import data_dir
    >>> from attention_lib.data.gguf import read_gguf
    >>> gguf = read_gguf(data_dir() / "stories260k" / "tinyllamas-stories-260k-f32.gguf")
    >>> tok = LlamaTokenizer.from_gguf(gguf)
    >>> ids = tok.encode("Once upon a time")
    >>> ids.tolist()
    [1, 403, 407, 261, 378]
    >>> [tok.pieces[i] for i in ids]
    ['<s>', '▁Once', '▁upon', '▁a', '▁time']
    >>> tok.decode(ids)
    'Once upon a time'
    """

    def __init__(self, pieces, scores, types=None, bos_id=1, eos_id=2):
        pieces = [str(p) for p in pieces]
        if types is None:
            types = [_type_of(p) for p in pieces]
        scores = np.asarray(scores, dtype=np.float64)
        types = np.asarray(types, dtype=np.int64)
        for name, values in (("scores", scores), ("types", types)):
            if values.shape != (len(pieces),):
                raise ValueError(
                    f"{name} must have one value per piece ({len(pieces)}), "
                    f"got shape {values.shape}"
                )
        for name, i in (("bos_id", bos_id), ("eos_id", eos_id)):
            if not 0 <= i < len(pieces):
                raise ValueError(f"{name} must be a piece id (0 to {len(pieces) - 1}), got {i}")
        self.pieces, self.scores, self.types = pieces, scores, types
        self.bos_id, self.eos_id = int(bos_id), int(eos_id)
        # the pieces that text can be written in and merged into
        self._id = {p: i for i, p in enumerate(pieces) if types[i] in (NORMAL, USER_DEFINED)}
        matches = [(i, _BYTE_PIECE.fullmatch(p)) for i, p in enumerate(pieces) if types[i] == BYTE]
        self._byte_id = {int(match.group(1), 16): i for i, match in matches if match}
        missing = sorted(set(range(256)) - set(self._byte_id))
        if missing:
            raise ValueError(
                f"the vocabulary has no byte piece for {len(missing)} bytes "
                f"(e.g. <0x{missing[0]:02X}>): byte fallback needs all 256"
            )
        self._byte_of = {i: b for b, i in self._byte_id.items()}

    @classmethod
    def from_gguf(cls, gguf):
        """The tokenizer stored in a GGUF file's ``tokenizer.ggml.*`` keys.

        Parameters
        ----------
        gguf : GGUFFile
            From :func:`attention_lib.data.gguf.read_gguf`.
        """
        m = gguf.metadata
        model = m.get("tokenizer.ggml.model")
        if model != "llama":
            raise ValueError(
                f"{gguf.path}: tokenizer.ggml.model is {model!r}; only "
                "'llama' (SentencePiece) tokenizers are read"
            )
        types = gguf.metadata_types

        def key(name, want, default=None):
            if name not in m:
                if default is not None:
                    return default
                raise ValueError(f"{gguf.path}: the metadata key {name!r} is missing")
            ok = {
                "strings": types[name] == "array[string]",
                "numbers": types[name].startswith("array[")
                and types[name][6:-1].startswith(("float", "int", "uint")),
                "integers": types[name].startswith(("array[int", "array[uint")),
                "id": types[name].startswith(("int", "uint")),
            }[want]
            if not ok:
                raise ValueError(
                    f"{gguf.path}: the metadata key {name!r} must be "
                    f"{'an array of ' + want if want != 'id' else 'an integer token id'}, "
                    f"got {types[name]}"
                )
            return m[name]

        try:
            return cls(
                key("tokenizer.ggml.tokens", "strings"),
                key("tokenizer.ggml.scores", "numbers"),
                key("tokenizer.ggml.token_type", "integers")
                if "tokenizer.ggml.token_type" in m
                else None,
                bos_id=key("tokenizer.ggml.bos_token_id", "id", default=1),
                eos_id=key("tokenizer.ggml.eos_token_id", "id", default=2),
            )
        except ValueError as err:
            if str(err).startswith(str(gguf.path)):
                raise
            raise ValueError(f"{gguf.path}: the tokenizer in its metadata: {err}") from None

    @property
    def vocab_size(self):
        """Number of pieces (``V``)."""
        return len(self.pieces)

    n_vocab = vocab_size  # the name the book's character tokenizer uses

    def encode(self, text, bos=True, eos=False):
        """Token ids of ``text``.

        Parameters
        ----------
        text : str
        bos, eos : bool
            Put ``<s>`` in front, ``</s>`` at the end.

        Returns
        -------
        numpy.ndarray of int64, shape (n,)
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as err:
            raise ValueError(
                f"text cannot be written in UTF-8: {err.reason} at character {err.start}"
            ) from None
        ids = [self.bos_id] if bos else []
        if text:
            ids += self._merge(self._characters(SPACE + text.replace(" ", SPACE)))
        if eos:
            ids.append(self.eos_id)
        return np.array(ids, dtype=np.int64)

    def _characters(self, text):
        """Step 2: one id per character, or its UTF-8 bytes' ids."""
        ids = []
        for ch in text:
            i = self._id.get(ch)
            if i is not None:
                ids.append(i)
            else:
                ids.extend(self._byte_id[b] for b in ch.encode("utf-8"))
        return ids

    def _merge(self, ids):
        """Step 3: best-scoring merges first, leftmost on ties.

        A linked list of symbols and a heap of candidate pairs (stale entries
        are skipped when popped), so a long text takes O(n log n), not O(n^2).
        """
        n = len(ids)
        pieces = [self.pieces[i] for i in ids]
        prev, nxt = list(range(-1, n - 1)), [*range(1, n), -1]
        alive = [True] * n
        heap = []

        def push(left):
            right = nxt[left]
            if right < 0:
                return
            merged = self._id.get(pieces[left] + pieces[right])
            if merged is not None:
                heapq.heappush(heap, (-self.scores[merged], left, right, merged))

        for i in range(n - 1):
            push(i)
        while heap:
            _, left, right, merged = heapq.heappop(heap)
            if not (
                alive[left]
                and alive[right]
                and nxt[left] == right
                and self._id.get(pieces[left] + pieces[right]) == merged
            ):
                continue  # one of the two has merged with something else
            ids[left], pieces[left] = merged, self.pieces[merged]
            alive[right] = False
            nxt[left] = nxt[right]
            if nxt[right] >= 0:
                prev[nxt[right]] = left
            push(left)
            if prev[left] >= 0:
                push(prev[left])
        return [ids[i] for i in range(n) if alive[i]]

    def decode(self, ids):
        """The text of token ids: pieces joined, ``▁`` as spaces, bytes as bytes.

        Control pieces (``<s>``, ``</s>``, ``<unk>``) write nothing, and the
        space at the start of the first piece, or of the piece after a ``<s>``,
        is dropped (it is the dummy prefix), so ``decode(encode(text)) == text``
        as in SentencePiece. To see what a model added after a prompt, decode
        the whole sequence and cut off the decoded prompt. Byte pieces are
        joined as bytes before they are read as UTF-8, so a character split
        into bytes comes back whole; bytes that are not valid UTF-8 become U+FFFD.

        Parameters
        ----------
        ids : array_like of int, shape (n,)

        Returns
        -------
        str
        """
        arr = np.asarray(ids)
        if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
            raise TypeError(
                f"ids must be a 1-D sequence of integers, got shape "
                f"{arr.shape} and dtype {arr.dtype}"
            )
        bad = arr[(arr < 0) | (arr >= self.vocab_size)]
        if bad.size:
            raise ValueError(f"ids must be between 0 and {self.vocab_size - 1}, got {bad[0]}")
        out, after_bos = bytearray(), True
        for i in arr.tolist():
            if i in self._byte_of:
                out.append(self._byte_of[i])
            elif self.types[i] in (NORMAL, USER_DEFINED):
                piece = self.pieces[i].replace(SPACE, " ")
                out += (piece[1:] if after_bos and piece.startswith(" ") else piece).encode()
            after_bos = i == self.bos_id
        return out.decode("utf-8", errors="replace")
