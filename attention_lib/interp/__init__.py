"""What heads do, tested causally: hooks, ablation, patching and the logit lens.

One hook interface (:class:`Hooks`) for every model of the book (TinyGPT,
the translation Transformer, Llama with stories260K and SmolLM2, MiniLM),
and the tools built on it: head ablation (:func:`ablate_heads`), activation
patching (:func:`patch_residual`, :func:`patch_heads`) scored by a
:func:`logit_diff`, path patching (:func:`path_patch`), the logit lens
(:func:`logit_lens`) and direct logit attribution per head
(:func:`head_logit_attribution`), and heads found by where they look
(:func:`offset_attention`: previous-token and induction heads).
"""

from .ablation import ABLATIONS, ablate_heads
from .hooks import Hooks, Layout, activation_names, layout, run, run_with_hooks
from .lens import head_logit_attribution, logit_lens
from .patching import logit_diff, patch_heads, patch_residual, path_patch, record_all
from .patterns import offset_attention

__all__ = [
    "ABLATIONS",
    "Hooks",
    "Layout",
    "ablate_heads",
    "activation_names",
    "head_logit_attribution",
    "layout",
    "logit_diff",
    "logit_lens",
    "offset_attention",
    "patch_heads",
    "patch_residual",
    "path_patch",
    "record_all",
    "run",
    "run_with_hooks",
]
