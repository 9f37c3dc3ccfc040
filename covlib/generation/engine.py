"""The in-process decoder's contract with the model it runs: which fast paths apply, decided before a call's first
forward from the cache layers the model's config asks for, with the reason for each path not taken.

transformers builds a model's key/value cache from its config, one layer class per attention layer: `DynamicLayer` for
full attention, `DynamicSlidingWindowLayer` for a sliding (or chunked) window, which keeps only the window's last
tokens and for which the model builds its masks. The decoder's fast paths are exact on full attention only:

- the in-place cache (`covlib.generation.kvcache`) replaces the `DynamicLayer`s, and only those: a sliding-window
  layer made full-length is read through a mask built for the window (wrong text, or a shape error);
- fixed shapes (`covlib.generation.graphs`, CUDA graphs on a GPU) give every layer one mask over its whole buffer,
  which would drop a window: only where every layer is full attention, so every layer is in place;
- the shared prefix (`covlib.generation.prefix`) lays a row out as [prefix][padding][suffix]; under a sliding window
  the padding in the middle takes up window places, so a prefix is shared under full attention only, and read through
  cascade attention only in the architectures it was checked against (`CASCADE_MODELS`), over SDPA.

What is left runs on the plain path: dynamic shapes, transformers' own cache (tests/generation/test_families.py checks
each path against transformers' `generate`, family by family). A cache layer of any other kind (linear attention,
convolutions, a layer reading another's cache) is refused with the reason: the decoder was never checked on it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

FULL, SLIDING = "DynamicLayer", "DynamicSlidingWindowLayer"  # transformers' cache layers: full, sliding window
CASCADE = "covlib_shared_prefix"  # the attention implementation `prefix.enable_cascade` registers with transformers
# the architectures cascade attention was checked against: SmolLM2 and Llama 2/3 (tests/generation/test_prefix.py),
# and tiny random models of each against transformers' generate (tests/generation/test_families.py)
CASCADE_MODELS = ("llama", "mistral", "qwen2", "qwen3", "phi3")


@dataclass
class Engine:
    """What one `generate` or `score` call of the in-process `LM` runs on, the fast paths it takes, its forward count."""

    model: Any  # a transformers causal LM
    tokenizer: Any
    device: str
    batch_size: int
    layers: tuple[str, ...] = ()  # the class of each cache layer transformers builds for the model
    in_place: bool = False  # its full-attention layers written in place (`kvcache.reserve`)
    fixed: bool = False  # decoding steps at fixed shapes (`graphs`; CUDA graphs on CUDA)
    share_prefix: bool = False  # the prompts' common token prefix prefilled once per call (`prefix.SharedPrefix`)
    cascade: bool = False  # and read through cascade attention where the rows' own parts are short
    reasons: dict[str, str] = field(default_factory=dict)  # each path not taken -> why
    forward_calls: int = 0

    @property
    def pad(self) -> int:
        """The token id rows are padded with."""
        return self.tokenizer.pad_token_id

    def check(self, kv: Any) -> None:
        """Refuse a cache a forward returned that is not the one the paths were decided for."""
        found = tuple(type(layer).__name__ for layer in getattr(kv, "layers", ()))
        if found != self.layers:
            raise ValueError(f"{model_type(self.model)}: a forward returned cache layers {found or type(kv).__name__}, "
                             f"not the {self.layers} its config describes, which the decoder's paths were decided for")


def model_type(model: Any) -> str:
    """The model's architecture as its config names it ('llama', 'gemma2', ...)."""
    return str(getattr(model.config, "model_type", type(model).__name__))


def cache_layers(model: Any) -> tuple[str, ...]:
    """The class names of the cache layers transformers builds for `model` from its config (as a forward does)."""
    from transformers import DynamicCache

    return tuple(type(layer).__name__ for layer in DynamicCache(config=model.config).layers)


def graphs_asked(device: str, setting: bool | None) -> bool:
    """Whether fixed shapes are asked for: the `cuda_graphs` setting, where None means on a CUDA device unless
    COVLIB_CUDA_GRAPHS=0."""
    if setting is None:
        return str(device).startswith("cuda") and os.environ.get("COVLIB_CUDA_GRAPHS", "1").strip() != "0"
    return bool(setting)


def build(model: Any, tokenizer: Any, device: str, batch_size: int, share_prefix: bool = True,
          cuda_graphs: bool | None = None) -> Engine:
    """The engine of a call: each fast path asked for that is exact for `model`'s cache layers; a model with layers
    of another kind is refused."""
    layers, kind = cache_layers(model), model_type(model)
    if odd := sorted(set(layers) - {FULL, SLIDING}):
        raise ValueError(f"{kind}: cache layers {odd}: the in-process decoder runs full and sliding-window attention "
                         "only (serve the model and use openai:<model>@<url>)")
    window = f"sliding-window layers {[i for i, t in enumerate(layers) if t == SLIDING]}"
    full = set(layers) == {FULL}
    reasons = {}
    if FULL not in layers:
        reasons["in_place"] = f"{window} only: transformers' own cache"
    if not graphs_asked(device, cuda_graphs):
        reasons["fixed"] = "not asked (off CUDA, lm.cuda_graphs = False or COVLIB_CUDA_GRAPHS=0)"
    elif not full:
        reasons["fixed"] = f"{window}: one mask over a whole buffer has no window"
    if not share_prefix:
        reasons["share_prefix"] = "not asked (lm.share_prefix = False or COVLIB_SHARE_PREFIX=0)"
    elif not full:
        reasons["share_prefix"] = f"{window}: the padding after the prefix would take up window places"
    attention = getattr(model.config, "_attn_implementation", None)
    if "share_prefix" in reasons:
        reasons["cascade"] = "no shared prefix"
    elif kind not in CASCADE_MODELS:
        reasons["cascade"] = f"{kind} was not checked against cascade attention: each batch copies the prefix's cache"
    elif attention not in ("sdpa", CASCADE):
        reasons["cascade"] = f"{attention} attention: cascade attention stands in for SDPA only"
    return Engine(model, tokenizer, device, batch_size, layers, in_place="in_place" not in reasons,
                  fixed="fixed" not in reasons, share_prefix="share_prefix" not in reasons,
                  cascade="cascade" not in reasons, reasons=reasons)
