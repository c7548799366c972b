"""Speculative decoding: a small draft model proposes, the large target model checks.

Each round, the draft writes ``k`` tokens one at a time (cheap), and the
target scores all of them in **one** forward pass (its cost barely grows with
``k`` when one token's pass is dominated by reading the weights). The target
then keeps the longest prefix it agrees with and adds one token of its own,
so every round writes between 1 and ``k + 1`` tokens for one target pass.

**Greedy** (``temperature = 0``): a drafted token is kept when it is the
target's argmax at its position; the first disagreement is replaced by the
target's argmax. The output is plain greedy decoding's, token for token.

**Sampling** (Leviathan et al., 2023; Chen et al., 2023): with the target's
distribution ``p`` and the draft's ``q`` at a position, the drafted ``x`` (drawn
from ``q``) is kept with probability ``min(1, p(x) / q(x))``; at the first
rejection the token is drawn from the residual ``max(0, p - q)``
(renormalised), and if all ``k`` are kept a bonus token is drawn from the
target's next distribution. Every token then follows ``p`` exactly, whatever
the draft: a poor draft only costs speed.
"""

import numbers

import numpy as np

from .._checks import as_int, as_int_array, as_rng
from ..nn.multi_head_attention import KVCache
from ..sampling import scaled_logits
from ..softmax import softmax

__all__ = ["SelfDraft", "accept_drafts", "speculative_generate", "speculative_round"]


def _vocab(model) -> int:
    n = getattr(model, "n_vocab", None)
    return n if n is not None else model.tok.params["E"].shape[0]


class PromptLookup:
    """A draft without weights: copy what followed the last ``ngram`` tokens earlier on.

    Prompt lookup decoding (Saxena, 2023): text often repeats itself (names,
    phrases, and a small model's greedy loops), so the tokens that followed
    the latest earlier occurrence of the sequence's last ``n`` tokens (``n``
    from ``ngram`` down to 1) are a free guess at what comes next. Without
    any match it proposes the last token again. Its distribution is the
    proposal itself (one-hot), so the acceptance rule still keeps the
    target's distribution exactly.

    Examples
    --------
    >>> PromptLookup(5).propose(np.array([[1, 2, 3, 4, 1, 2]]), 3)
    array([[3, 4, 1]])
    """

    max_len = 2**62

    def __init__(self, n_vocab: int, ngram: int = 3) -> None:
        self.n_vocab = as_int(n_vocab, "n_vocab", 1)
        self.ngram = as_int(ngram, "ngram", 1)

    def propose(self, seq: np.ndarray, k: int) -> np.ndarray:
        """``k`` proposed tokens for each row of ``seq`` (B, T)."""
        out = np.empty((seq.shape[0], k), dtype=np.int64)
        for b, row in enumerate(np.asarray(seq)):
            out[b] = self._one(row, k)
        return out

    def _one(self, row, k):
        T = len(row)
        for n in range(min(self.ngram, T - 1), 0, -1):
            tail = row[T - n :]
            # windows that end before the last token: starts 0 .. T - n - 1
            windows = np.lib.stride_tricks.sliding_window_view(row[: T - 1], n)
            hits = np.flatnonzero((windows == tail).all(axis=1))
            if hits.size:
                start = hits[-1] + n
                copied = row[start : start + k]
                return np.concatenate([copied, np.repeat(copied[-1:], k - len(copied))])
        return np.repeat(row[-1:], k)


def _truncate(cache: list, n: int) -> None:
    """Keep the first ``n`` positions of every layer's cache."""
    for c in cache:
        if hasattr(c, "truncate"):
            c.truncate(n)
        elif isinstance(c, KVCache):
            if c.k is not None:
                c.k, c.v = c.k[..., :n, :], c.v[..., :n, :]
            c.position = n
        else:
            raise TypeError(f"cannot rewind a cache of type {type(c).__name__}")


class _FastTarget:
    """The target's cached passes on its fast decoder (:mod:`~attention_lib.models.kv_cache`).

    One call of :meth:`rows` runs the new tokens through every layer at once
    (the decoder's preallocated cache, joined weights, one causal mask) and
    returns the logits at each of them; :meth:`truncate` rewinds the cache by
    moving its length back, without copying. None from :meth:`of` when the
    model has no such decoder: ``forward`` with ``new_cache()`` then.
    """

    def __init__(self, decoder):
        self.decoder = decoder

    @classmethod
    def of(cls, model):
        from .kv_cache import decoder_for

        decoder = decoder_for(model, 1)
        return cls(decoder) if hasattr(decoder, "prefill_rows") else None

    def __len__(self) -> int:
        return self.decoder.cache.length

    def rows(self, tokens):
        return self.decoder.prefill_rows(tokens)

    def truncate(self, n: int) -> None:
        self.decoder.cache.length = min(n, self.decoder.cache.length)


def _check_pair(target, draft, k):
    k = as_int(k, "k (tokens the draft proposes per round)", 1)
    vt, vd = _vocab(target), _vocab(draft)
    if vt != vd:
        raise ValueError(
            f"the draft model has a vocabulary of {vd} tokens but the target has {vt}: "
            "speculative decoding needs both to read and write the same tokens"
        )
    return k


def _check_temperature(temperature, rng):
    if (
        isinstance(temperature, (bool, np.bool_))
        or not isinstance(temperature, numbers.Real)
        or not np.isfinite(temperature)
        or temperature < 0
    ):
        raise ValueError(f"temperature must be >= 0 and finite, got {temperature!r}")
    if temperature > 0:
        if rng is None:
            raise ValueError("sampling (temperature > 0) needs rng, a numpy.random.Generator")
        as_rng(rng)
    return float(temperature)


def accept_drafts(p, q, drafted, rng=None):
    """The acceptance rule: how many drafted tokens to keep, and the token after them.

    Parameters
    ----------
    p : ndarray, shape (B, k + 1, V)
        The target's distributions at the ``k`` drafted positions and the one after.
    q : ndarray, shape (B, k, V)
        The draft's distributions the drafted tokens were drawn from.
    drafted : ndarray of int, shape (B, k)
    rng : numpy.random.Generator or None
        None: greedy (keep while the draft's token is the target's argmax).

    Returns
    -------
    n_accepted : ndarray of int, shape (B,)
    next_token : ndarray of int, shape (B,)
        The target's token at position ``n_accepted``: from the residual
        ``max(0, p - q)`` after a rejection, from ``p`` after ``k`` acceptances.

    Examples
    --------
    >>> p = np.array([[[0.1, 0.9], [0.5, 0.5]]])       # target: position 1, then 2
    >>> q = np.array([[[0.9, 0.1]]])                   # the draft proposed token 0
    >>> accept_drafts(p, q, np.array([[0]]))           # greedy: rejected, target's argmax
    (array([0]), array([1]))
    """
    B, k = drafted.shape
    rows = np.arange(B)
    if rng is None:
        best = p.argmax(axis=-1)  # (B, k + 1): the target's token at every position
        agree = best[:, :k] == drafted
        n = np.where(agree.all(axis=1), k, agree.argmin(axis=1))
        return n, best[rows, n]
    px = np.take_along_axis(p[:, :k], drafted[..., None], axis=-1)[..., 0]
    qx = np.take_along_axis(q, drafted[..., None], axis=-1)[..., 0]
    keep = rng.random((B, k)) * qx < px  # u < p(x) / q(x), without dividing by 0
    n = np.where(keep.all(axis=1), k, keep.argmin(axis=1))
    last = p[rows, n]  # (B, V): the bonus distribution when all were kept
    resid = np.maximum(last - q[rows, np.minimum(n, k - 1)], 0)
    resid = np.where((n < k)[:, None], resid, last)
    total = resid.sum(axis=-1, keepdims=True)
    resid = np.where(total > 0, resid / np.where(total > 0, total, 1), last)
    u = rng.random((B, 1))
    below = resid.cumsum(axis=-1) < u * resid.sum(axis=-1, keepdims=True)
    nxt = np.minimum(below.sum(axis=-1), resid.shape[-1] - 1)
    return n, nxt


def speculative_round(target, draft, seq, k, temperature=0.0, rng=None, t_cache=None, d_cache=None):
    """One round from ``seq`` (B, T): the draft proposes ``k`` tokens, the target checks them.

    Every row of ``seq`` continues from the same length. With caches (from
    ``new_cache()``), each model reads only the tokens its cache lacks; the
    caches are left holding everything they were fed (:func:`speculative_generate`
    rewinds them). The target's check is one pass over the ``k`` drafted tokens
    (and the token before them that its cache lacks), on its fast decoder when
    :func:`speculative_generate` gives it one. Returns
    ``(drafted (B, k), n_accepted (B,), next_token (B,))``.
    """
    B, T = seq.shape
    sample = temperature > 0
    if hasattr(draft, "propose"):  # a draft without a model: one-hot proposals
        drafted = draft.propose(seq, k)
        qs = []
        if sample:  # one-hot rows (B, k, V), set one by one (not rows of a V x V identity)
            q = np.zeros((B, k, _vocab(target)))
            q[np.arange(B)[:, None], np.arange(k), drafted] = 1
            qs = list(q.transpose(1, 0, 2))
        return _verify(target, seq, drafted, qs, k, temperature, rng, t_cache)
    fed = 0 if d_cache is None else len(d_cache[0])
    step, tokens, qs = seq[:, fed:], [], []
    ctx = seq
    for _ in range(k):
        logits = draft.forward(step if d_cache is not None else ctx, d_cache)[:, -1]
        logits = logits.astype(np.float64)
        if sample:
            qd = softmax(scaled_logits(logits, temperature), axis=-1)
            u = rng.random((B, 1))
            x = np.minimum((qd.cumsum(axis=-1) < u).sum(axis=-1), qd.shape[-1] - 1)
            qs.append(qd)
        else:
            x = logits.argmax(axis=-1)
        tokens.append(x)
        step = x[:, None]
        ctx = np.concatenate([ctx, step], axis=1)
    drafted = np.stack(tokens, axis=1)
    return _verify(target, seq, drafted, qs, k, temperature, rng, t_cache)


def _verify(target, seq, drafted, qs, k, temperature, rng, t_cache):
    """The target's one pass over the drafted tokens, and the acceptance rule."""
    sample = temperature > 0
    full = np.concatenate([seq, drafted], axis=1)
    if isinstance(t_cache, _FastTarget):
        logits = t_cache.rows(full[:, len(t_cache) :])
    else:
        fed = 0 if t_cache is None else len(t_cache[0])
        logits = target.forward(full[:, fed:] if t_cache is not None else full, t_cache)
    logits = logits[:, -(k + 1) :]  # greedy: argmax of float32 is argmax of float64
    if sample:
        p = softmax(scaled_logits(logits.astype(np.float64), temperature), axis=-1)
        n, nxt = accept_drafts(p, np.stack(qs, axis=1), drafted, rng)
    else:
        n, nxt = accept_drafts(logits, None, drafted)
    return drafted, n, nxt


def speculative_generate(
    target, draft, tokens, max_new_tokens, k=4, temperature=0.0, rng=None
) -> tuple[np.ndarray, dict]:
    """Continue the prompt ``tokens`` (1-D) by ``max_new_tokens`` tokens, ``k`` drafted at a time.

    Parameters
    ----------
    target, draft : models with ``tok``, ``max_len``, ``new_cache`` and ``forward``
        (e.g. :class:`~attention_lib.models.TinyGPT`) over the same vocabulary.
    tokens : array_like of int, shape (T,)
    max_new_tokens : int
    k : int >= 1
        Tokens the draft proposes per round.
    temperature : float, optional
        0 is greedy (the output is the target's greedy output); otherwise
        both models' logits are divided by it and tokens are sampled.
    rng : numpy.random.Generator, needed when sampling

    Returns
    -------
    tokens : ndarray of int, the prompt followed by the new tokens
    stats : dict
        ``target_passes`` (rounds, the prompt's pass not counted), ``drafted``,
        ``accepted``, ``acceptance`` (accepted / drafted) and
        ``tokens_per_pass`` (new tokens / target passes).

    Examples
    --------
    >>> from attention_lib import TinyGPT
    >>> big = TinyGPT(5, 8, 2, 2, 16, 20, np.random.default_rng(0))
    >>> small = TinyGPT(5, 8, 2, 1, 16, 20, np.random.default_rng(1))
    >>> out, stats = speculative_generate(big, small, [1, 2], 10, k=3)
    >>> bool((out == big.generate(np.array([1, 2]), 10, temperature=0)).all())
    True
    """
    k = _check_pair(target, draft, k)
    temperature = _check_temperature(temperature, rng)
    seq = as_int_array(tokens, "tokens")
    if seq.ndim != 1 or seq.size == 0:
        raise ValueError(f"tokens must be a non-empty 1-D prompt, got shape {seq.shape}")
    V = _vocab(target)
    if seq.min() < 0 or seq.max() >= V:
        raise ValueError(f"tokens must be integers in [0, {V}), got {seq.min()} to {seq.max()}")
    n_new = as_int(max_new_tokens, "max_new_tokens")
    limit = min(target.max_len, draft.max_len)
    if len(seq) + n_new > limit:
        raise ValueError(
            f"prompt ({len(seq)}) + max_new_tokens ({n_new}) exceeds max_len = {limit} "
            "(the smaller of the target's and the draft's)"
        )
    seq = seq.astype(np.int64)[None]
    start = seq.shape[1]
    t_cache = _FastTarget.of(target)
    if t_cache is None:
        t_cache = target.new_cache()
    d_cache = None if hasattr(draft, "propose") else draft.new_cache()
    stats = {"target_passes": 0, "drafted": 0, "accepted": 0}
    with _eval(target), _eval(draft):
        while seq.shape[1] - start < n_new:
            left = n_new - (seq.shape[1] - start)
            kk = min(k, left - 1)
            if kk == 0:  # one token left: the target alone
                if isinstance(t_cache, _FastTarget):
                    logits = t_cache.rows(seq[:, len(t_cache) :])[:, -1]
                else:
                    logits = target.forward(seq[:, len(t_cache[0]) :], t_cache)[:, -1]
                logits = logits.astype(np.float64)
                if temperature > 0:
                    p = softmax(scaled_logits(logits, temperature), axis=-1)
                    nxt = np.minimum((p.cumsum(-1) < rng.random((1, 1))).sum(-1), V - 1)
                else:
                    nxt = logits.argmax(axis=-1)
                seq = np.concatenate([seq, nxt[:, None]], axis=1)
                stats["target_passes"] += 1
                continue
            drafted, n, nxt = speculative_round(
                target, draft, seq, kk, temperature, rng, t_cache, d_cache
            )
            n = int(n[0])
            seq = np.concatenate([seq, drafted[:, :n], nxt[:, None]], axis=1)
            stats["target_passes"] += 1
            stats["drafted"] += kk
            stats["accepted"] += n
            if isinstance(t_cache, _FastTarget):
                t_cache.truncate(seq.shape[1] - 1)
            else:
                _truncate(t_cache, seq.shape[1] - 1)
            if d_cache is not None:
                _truncate(d_cache, min(len(d_cache[0]), seq.shape[1] - 1))
    stats["acceptance"] = stats["accepted"] / max(stats["drafted"], 1)
    stats["tokens_per_pass"] = n_new / max(stats["target_passes"], 1)
    return seq[0], stats


class SelfDraft:
    """A self-speculative draft: the target's own first ``n_layers`` blocks, final norm and head.

    Nothing is trained or stored: the draft is the target cut short (an
    "early exit", as LayerSkip, Elhoushi et al., 2024, trains for), reading
    the same weights, so a draft step costs the first blocks and the output
    layer instead of the whole model. It runs on its own fast decoder
    (:mod:`~attention_lib.models.kv_cache`). ``forward(tokens, cache)`` and
    ``new_cache()`` are those :func:`speculative_round` calls.

    Parameters
    ----------
    target : Llama
        A model with ``blocks`` and a fast decoder (``decoder_for``).
    n_layers : int
        Blocks kept, from 1 to all but one of the target's.

    Examples
    --------
    >>> from attention_lib.models.llama import Llama
    >>> big = Llama(12, 16, 3, 4, 2, 24, 40, np.random.default_rng(0))
    >>> out, stats = speculative_generate(big, SelfDraft(big, 1), [1, 2], 10, k=3)
    >>> bool((out == big.generate(np.array([1, 2]), 10, temperature=0)).all())
    True
    """

    def __init__(self, target, n_layers: int) -> None:
        import copy

        blocks = getattr(target, "blocks", None)
        if not blocks or not hasattr(target, "fast_decoder"):
            raise ValueError(
                f"a self-draft needs a target with blocks and a fast decoder, got "
                f"{type(target).__name__}"
            )
        self.n_layers = as_int(n_layers, "n_layers (blocks the draft keeps)", 1)
        if self.n_layers >= len(blocks):
            raise ValueError(
                f"n_layers must be below the target's {len(blocks)} blocks, got {self.n_layers}"
            )
        model = copy.copy(target)  # the same arrays: nothing is copied but the lists
        vars(model).pop("_fast_decoder_memo", None)
        model.blocks = list(blocks[: self.n_layers])
        model.config = {**target.config, "n_layers": self.n_layers}
        self.model, self.max_len, self.tok = model, target.max_len, target.tok

    def new_cache(self) -> list:
        """A cache: the draft's fast decoder, rewound by ``truncate`` as the target's is."""
        from .kv_cache import decoder_for

        return [_FastTarget(decoder_for(self.model, 1))]

    def forward(self, tokens: np.ndarray, cache: list) -> np.ndarray:
        """Logits (B, 1, V) after ``tokens`` (B, T), which continue what ``cache`` holds."""
        decoder = cache[0].decoder
        if tokens.shape == (1, 1):
            return decoder.step(tokens[:, 0])[:, None]
        return decoder.prefill(tokens)[:, None]


class _eval:
    """Dropout off while generating, restored afterwards (as ``TinyGPT.generate``)."""

    def __init__(self, model):
        self.drops = [d for b in getattr(model, "blocks", []) for d in b.dropouts()]

    def __enter__(self):
        self.modes = [d.training for d in self.drops]
        for d in self.drops:
            d.training = False

    def __exit__(self, *exc):
        for d, mode in zip(self.drops, self.modes):
            d.training = mode


#: Draft models ``python -m attention_lib.generate --draft NAME`` knows: name -> (file, target).
DRAFTS = {
    "one-layer": ("draft.npz", "shakespeare"),
    "ngram": ("ngram_draft.npz", "shakespeare"),
    "lookup": (None, None),
}
#: Tokens drafted per round by the command line (the chapter measures k = 1 to 8).
SPEC_K = 4


def _draft_sha256(manifest, ngram: bool) -> str:
    """The draft's sha256 from ``manifest``: its top level (n-gram) or ``runs.draft``.

    A damaged manifest (not JSON, not an object, no entry, no sha256) raises
    :class:`~attention_lib.DataFileError` naming it.
    """
    from ..data.paths import DataFileError, is_sha256
    from .checkpoint import read_manifest

    data = read_manifest(manifest)
    where = "its top level"
    if not ngram:
        where = '"runs" -> "draft"'
        runs = data.get("runs") if isinstance(data, dict) else None
        data = runs.get("draft") if isinstance(runs, dict) else None
    if not isinstance(data, dict):
        raise DataFileError(
            f"{manifest} has no draft entry at {where} (a JSON object with the draft's "
            "sha256); restore it with git checkout"
        )
    digest = data.get("sha256")
    if not is_sha256(digest):
        raise DataFileError(
            f'{manifest}: the draft\'s "sha256" must be 64 hex digits, got {digest!r}; '
            "restore it with git checkout"
        )
    return digest


def load_draft(name: str, n_vocab: int | None = None):
    """A draft model of :data:`DRAFTS`, its sha256 checked against its manifest.

    ``"lookup"`` is :class:`PromptLookup` over ``n_vocab`` tokens; ``"ngram"``
    the table distilled from the Shakespeare model
    (:mod:`attention_lib.models.ngram_draft`, built by :mod:`attention_lib.train.ngram_draft`;
    manifest ``ngram_draft.json``).
    """
    from ..data.paths import DataFileError, sha256
    from .kv_variants import load_variant
    from .kv_variants import serving_dir

    if name not in DRAFTS:
        raise ValueError(f"draft must be one of {', '.join(DRAFTS)}, got {name!r}")
    if name == "lookup":
        return PromptLookup(n_vocab)
    folder = serving_dir()
    path = folder / DRAFTS[name][0]
    ngram = name == "ngram"
    manifest = folder / ("ngram_draft.json" if ngram else "manifest.json")
    if not path.is_file() or not manifest.is_file():
        maker = "ngram_draft" if ngram else "serving --only draft"
        raise DataFileError(
            f"{path} is missing: it is committed with the repository, or made by "
            f"python -m attention_lib.train.{maker}"
        )
    if sha256(path) != _draft_sha256(manifest, ngram):
        raise DataFileError(f"{path} does not match the sha256 in {manifest}")
    if ngram:
        from .ngram_draft import NgramDraft

        return NgramDraft.load(path)
    return load_variant(path)[0]


def speculative_pieces(target, draft, tokens, max_new_tokens, temperature, rng, rest, k=SPEC_K):
    """New tokens for the command line: speculative while the context has room, then ``rest``.

    ``rest(tokens, n)`` yields the pieces of plain generation (the sliding
    window past ``max_len``).
    """
    seq = np.asarray(tokens, dtype=np.int64)
    room = min(target.max_len, draft.max_len) - len(seq)
    n = min(max_new_tokens, max(room, 0))
    if n:
        out, _ = speculative_generate(target, draft, seq, n, k, temperature, rng)
        yield out[len(seq) :]
        seq = out
    if max_new_tokens > n:
        yield from rest(seq, max_new_tokens - n)


def draft_pieces(parser, args, model, context, rng, continue_text):
    """``generate --draft NAME``'s pieces; a bad combination exits through ``parser.error``."""
    from ..data.paths import DataFileError

    if args.top_k is not None or args.top_p is not None:
        parser.error("--draft samples from the temperature alone: drop --top-k and --top-p")
    try:
        draft = load_draft(args.draft, _vocab(model))
        _check_pair(model, draft, SPEC_K)
    except DataFileError as err:
        parser.exit(1, f"{parser.prog}: error: {err}\n")
    except ValueError as err:
        parser.error(f"--draft {args.draft}: {err}")

    def rest(seq, n):
        # The whole text so far (at most max_len tokens): continue_text then
        # crops exactly as plain generation does past the context.
        return continue_text(model, seq, n, args.temperature, rng=rng)

    return speculative_pieces(
        model, draft, context, args.max_new_tokens, args.temperature, rng, rest
    )
