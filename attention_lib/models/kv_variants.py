"""Chapter 11's character model with four kinds of attention: MHA, GQA, MQA and MLA.

:func:`build_variant` makes a :class:`~attention_lib.models.TinyGPT` and puts
in each block's ``attn`` slot the attention of the variant:

- ``"mha"``: multi-head attention, one key and value head per query head;
- ``"gqa"``: grouped-query attention with ``n_kv_heads`` (default 2) groups;
- ``"mqa"``: multi-query attention, one key and value head for all;
- ``"mla"``: multi-head latent attention (DeepSeek-V2), a latent of
  ``d_latent`` (default ``4 d_head``) and a rotary key of ``d_rope`` (default
  ``d_head / 2``) per token, DeepSeek-V2's proportions.

Checkpoints are ``.npz`` files of :meth:`state_dict` plus the configuration
as JSON (:func:`save_variant`, :func:`load_variant`); no pickles.
"""

import json
from pathlib import Path

import numpy as np

from ..data.paths import data_dir, write_atomic
from ..nn.latent_attention import GroupedSelfAttention, LatentCache, MultiHeadLatentAttention
from .gpt import TinyGPT

VARIANTS = ("mha", "gqa", "mqa", "mla")


def serving_dir() -> Path:
    """``data/checkpoints/serving``: chapter 20's variants and chapter 21's drafts, with their measurements."""
    return data_dir() / "checkpoints" / "serving"


class VariantGPT(TinyGPT):
    """A :class:`~attention_lib.models.TinyGPT` whose blocks use another attention (see module)."""

    variant = "mha"

    def new_cache(self) -> list:
        """An empty cache per block: latent caches for MLA, key/value caches otherwise."""
        if self.variant == "mla":
            return [LatentCache() for _ in self.blocks]
        return super().new_cache()

    def cache_bytes_per_token(self, itemsize: int = 4) -> int:
        """Bytes one token leaves in the cache of all layers (float32: ``itemsize=4``)."""
        return itemsize * sum(b.attn.cache_floats_per_token() for b in self.blocks)


def build_variant(cfg: dict, n_vocab: int, rng: np.random.Generator | None = None) -> VariantGPT:
    """A float32 model of ``cfg`` (TinyGPT's arguments, ``variant`` and its sizes).

    Examples
    --------
    >>> cfg = dict(d_model=16, n_heads=4, n_layers=1, d_ff=32, max_len=8,
    ...            variant="mla", seed=0)
    >>> model = build_variant(cfg, n_vocab=5)
    >>> model.forward(np.zeros((1, 3), dtype=int)).shape, model.cache_bytes_per_token()
    ((1, 3, 5), 72)
    """
    variant = cfg.get("variant", "mha")
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    rng = np.random.default_rng(cfg["seed"]) if rng is None else rng
    keys = ("d_model", "n_heads", "n_layers", "d_ff", "max_len")
    model = VariantGPT(
        n_vocab,
        rng=rng,
        positions=cfg.get("positions", "learned"),
        dropout=cfg.get("dropout", 0.0),
        **{k: cfg[k] for k in keys},
    )
    model.variant = variant
    d, H = cfg["d_model"], cfg["n_heads"]
    d_head = d // H
    for block in model.blocks:
        drop = block.attn.dropout.p
        if variant == "mla":
            block.attn = MultiHeadLatentAttention(
                d,
                H,
                cfg.get("d_latent", 4 * d_head),
                cfg.get("d_rope", max(2, d_head // 4 * 2)),
                rng,
                dropout=drop,
            )
        else:
            kv = {"mha": H, "gqa": cfg.get("n_kv_heads", 2), "mqa": 1}[variant]
            block.attn = GroupedSelfAttention(d, H, kv, rng, dropout=drop)
    for layer in model.layers():
        for k in layer.params:
            layer.params[k] = layer.params[k].astype(np.float32)
    return model


def save_variant(model: VariantGPT, cfg: dict, chars: list[str], path: str | Path) -> None:
    """Write every parameter (float32) and ``cfg`` with the characters as JSON into ``path``."""
    arrays = {k: np.asarray(a, np.float32) for k, a in model.state_dict().items()}
    arrays["config"] = np.array(json.dumps({**cfg, "n_vocab": len(chars), "chars": "".join(chars)}))
    write_atomic(Path(path), lambda f: np.savez(f, **arrays), mode="wb")


def load_variant(path: str | Path) -> tuple[VariantGPT, list[str]]:
    """The model and its characters from a file of :func:`save_variant` (no pickles)."""
    with np.load(path, allow_pickle=False) as f:
        cfg = json.loads(str(f["config"]))
        model = build_variant(cfg, cfg["n_vocab"], np.random.default_rng(0))
        model.load_state_dict({k: f[k] for k in f.files if k != "config"})
    return model.train(False), list(cfg["chars"])


def mean_pool_kv(mha: VariantGPT, cfg: dict) -> VariantGPT:
    """GQA uptraining's start (Ainslie et al., 2023): a GQA model whose K/V heads are group means.

    Every other weight is copied; each group's key and value projection (and
    bias) is the mean of the ``n_heads / n_kv_heads`` heads it replaces.
    """
    if mha.variant != "mha" or cfg.get("variant") != "gqa":
        raise ValueError("mean_pool_kv turns an 'mha' model into a cfg with variant 'gqa'")
    n_vocab = mha.tok.params["E"].shape[0]
    gqa = build_variant(cfg, n_vocab, np.random.default_rng(0))
    pooled = (".W_K", ".W_V", ".b_K", ".b_V")
    gqa.load_state_dict(
        {k: a for k, a in mha.state_dict().items() if not k.endswith(pooled)}, strict=False
    )
    for new_block, old_block in zip(gqa.blocks, mha.blocks):
        old, new = old_block.attn, new_block.attn
        H, H_kv, dh = old.n_heads, new.n_kv_heads, old.d_head
        for k in ("W_K", "W_V", "b_K", "b_V"):
            a = old.params[k]
            a = a.reshape(a.shape[:-1] + (H_kv, H // H_kv, dh)).mean(axis=-2)
            new.params[k] = a.reshape(a.shape[:-2] + (H_kv * dh,)).astype(np.float32)
    return gqa
