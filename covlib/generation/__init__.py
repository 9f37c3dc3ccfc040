"""Text generation: `load_lm` picks the backend a model spec names; every backend is a `Generator`.

| `load_lm(...)`                          | backend                                             | module                         |
|-----------------------------------------|-----------------------------------------------------|--------------------------------|
| nothing (`EMBEDDED`, "")                | the embedded SmolLM2-135M-Instruct, in process      | `covlib.generation.decoder`    |
| `"owner/name"`, `"/a/model/folder"`     | any transformers causal LM, in process (CPU, CUDA)  | `covlib.generation.decoder`    |
| `"openai:<model>@<base_url>"`           | an OpenAI-compatible server                         | `covlib.generation.endpoint`   |
| `"sim:<behaviour>[/<persona>][@<seed>]"` | the simulated model: planted effects, no neural model | `covlib.generation.simulated`  |

Both backends get `generate` and `score` through the cache from `covlib.generation.cached`. The in-process one is
split by job: `decoder` (the `LM` class), `loading` (weights, adapter), `engine` (the fast paths exact for a model, a
call's model, tokenizer and settings), `decoding` (the batched loop), `sampling` (next token, stopping), `kvcache` (the
key/value cache written in place), `graphs` (decoding steps at fixed shapes, replayed as CUDA graphs on a GPU),
`prefix` (the prompts' shared prefix) and `scoring` (continuation log-probabilities); the default device comes from
`covlib.core.devices`.

`python -m covlib.generation` converts the embedded model once (what `make env` runs).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from covlib.core import paths
from covlib.core.cache import fingerprint_dir
from covlib.core.devices import default_device
from covlib.generation.base import (Completion, Generator, call_keys, check_decoding, check_pairs, check_prompts,
                                    first_stop, from_cache, sample_seed, score_keys)
from covlib.generation.decoder import LM
from covlib.generation.embedded import EMBEDDED_MODEL, EMBEDDED_NAME, embedded_model_dir
from covlib.generation.endpoint import EndpointLM
from covlib.generation.simulated import SIM_LABEL, SimLM, is_simulated
from covlib.generation.spec import EMBEDDED, EMBEDDED_LABEL, ENDPOINT_PREFIX, is_endpoint

__all__ = ["Completion", "Generator", "LM", "EndpointLM", "EMBEDDED", "EMBEDDED_LABEL", "ENDPOINT_PREFIX", "EMBEDDED_MODEL", "EMBEDDED_NAME",
           "check_decoding", "check_pairs", "check_prompts", "default_device", "describe", "embedded_model_dir",
           "first_stop", "from_cache", "is_endpoint", "is_simulated", "SIM_LABEL", "SimLM", "load_lm", "sample_seed", "call_keys", "score_keys"]


_LOADED: dict[tuple, Any] = {}


def load_lm(model: str = EMBEDDED, device: str | None = None, dtype: str | None = None,
            batch_size: int | None = None, adapter: str | Path | None = None,
            concurrency: int | None = None) -> Generator:
    """The generator for `model`: `EMBEDDED` ('', SmolLM2-135M-Instruct), a hub id or a local folder (in
    process, optionally with a LoRA adapter merged in), or `openai:<model>@<base_url>` (a server; `concurrency`
    requests in flight). Reused per process while the files stay the same."""
    model = model or None  # the in-process LM's own spelling of the embedded model
    adapter, device = adapter or None, device or None  # "" as a notebook parameter means the default
    if is_simulated(model):  # an adapter names a planted fine-tuned variant (its folder's name), no weights
        key = ("sim", model, Path(adapter).name if adapter else "")
        if key not in _LOADED:
            _LOADED[key] = SimLM(model, variant=key[2])
        return _LOADED[key]
    if is_endpoint(model):
        if adapter:
            raise ValueError(f"{model}: a LoRA adapter is served by the server (e.g. `vllm serve ... --enable-lora "
                             "--lora-modules name=folder`, then `openai:name@...`), not loaded by covlib")
        key = (model, str(paths.cache_dir()), concurrency)
        if key not in _LOADED:
            _LOADED[key] = EndpointLM.from_spec(model, concurrency=concurrency)
        return _LOADED[key]
    key = (model, device, dtype, batch_size, str(paths.cache_dir()), str(adapter),
           fingerprint_dir(model) if model else None, fingerprint_dir(adapter) if adapter else None)
    if key not in _LOADED:
        _LOADED[key] = LM(model, device=device, dtype=dtype, batch_size=batch_size, adapter=adapter)
    return _LOADED[key]


def describe(lm: Generator) -> dict[str, Any]:
    """Name and where it runs (device and dtype, or the server), for recorded results."""
    out: dict[str, Any] = {"model": lm.name}
    for attr in ("device", "dtype", "base_url", "served_model"):
        if getattr(lm, attr, None):
            out[attr] = getattr(lm, attr)
    if getattr(lm, "adapter_files", None):
        out["adapter_files"] = lm.adapter_files
    return out
