"""The one generation interface every backend satisfies: `Generator`, `Completion` and the shared argument checks.

A `Generator` turns prompts into `Completion`s (`generate`) and scores continuations (`score`).
Two backends satisfy it, and notebooks and paper modules never know which one they hold:

| `covlib.generation.load_lm(...)`                         | backend                                             | module           |
|-----------------------------------------|-----------------------------------------------------|------------------|
| nothing (`EMBEDDED`, "")                | the embedded SmolLM2-135M-Instruct, in process      | `covlib.generation.decoder` |
| `"owner/name"`, `"/a/model/folder"`     | any transformers causal LM, in process (CPU, CUDA)  | `covlib.generation.decoder` |
| `"openai:<model>@<base_url>"`           | an OpenAI-compatible server (vLLM, llama.cpp, SGLang, `transformers serve`, a hosted API) | `covlib.generation.endpoint` |

Both store every completion in the same persistent cache (`covlib.core.cache`), keyed by everything
that changes the output: backend and model (a served model by its URL too), rendered prompt,
decoding parameters, seed and sample index. Sample `i` of a prompt always uses the seed
`sample_seed(seed, prompt, i)`, so sampled runs repeat and do not depend on batch composition.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence, runtime_checkable

from covlib.core.records import text_list


@dataclass
class Completion:
    """One generated continuation."""

    text: str
    tokens: list[str] = field(default_factory=list)
    token_logprobs: list[float] = field(default_factory=list)
    finish_reason: str = "stop"  # "stop" (EOS or stop string) or "length"

    @property
    def logprob(self) -> float:
        """Total log-probability of the generated tokens."""
        return float(sum(self.token_logprobs))


@runtime_checkable
class Generator(Protocol):
    """What every generation backend offers: `decoder.LM`, `endpoint.EndpointLM`, the tests' scripted generator."""

    name: str

    def generate(
        self,
        prompts: Sequence[str],
        *,
        n: int = 1,
        temperature: float = 0.0,
        top_p: float = 1.0,
        max_new_tokens: int = 128,
        stop: str | Sequence[str] = (),
        seed: int = 0,
        chat: bool = False,
        progress: bool = True,
        desc: str = "generate",
    ) -> list[list[Completion]]:
        """`n` completions for each prompt; `stop` is one string or several; bad prompts fail `check_prompts`."""
        ...

    def score(
        self,
        prompts: Sequence[str],
        continuations: Sequence[str],
        *,
        chat: bool = False,
        progress: bool = True,
        desc: str = "score",
    ) -> list[float]:
        """Total log-probability of each continuation after its prompt."""
        ...


def check_prompts(prompts: Any, method: str, what: str = "prompt") -> list[str]:
    """The prompts as a list; refuses what no backend can generate from: a lone string, a non-string, an empty
    string, invalid Unicode (a lone surrogate)."""
    prompts = text_list(prompts, what, f"{method}()")
    for i, p in enumerate(prompts):
        if not p:
            raise ValueError(f"{method}(): {what} {i} is empty: there is no token to condition on")
    return prompts


def check_pairs(prompts: Any, continuations: Any) -> tuple[list[str], list[str]]:
    """`score`'s inputs as two lists of the same length, each checked as `check_prompts` does."""
    prompts = check_prompts(prompts, "score")
    continuations = check_prompts(continuations, "score", what="continuation")
    if len(prompts) != len(continuations):
        raise ValueError(f"{len(prompts)} prompts but {len(continuations)} continuations")
    return prompts, continuations


def from_cache(found: dict[str, Any], keys: list[list[str]], n: int) -> list[list[Completion]]:
    """`n` completions per prompt from cached records; a greedy prompt has one key, repeated `n` times."""
    out = []
    for ks in keys:
        comps = [Completion(**found[k]) for k in ks]
        out.append(comps * n if len(ks) == 1 else comps)
    return out


def check_decoding(*, n: int, temperature: float, top_p: float, max_new_tokens: int, stop: str | Sequence[str],
                   seed: int) -> dict[str, Any]:
    """The decoding parameters as they enter cache keys (greedy: top_p 1, seed 0); bad values raise."""
    stop = (stop,) if isinstance(stop, str) else tuple(stop)  # stop="Answer:" is one stop string
    if not all(isinstance(s, str) for s in stop):
        raise TypeError(f"stop must be a string or a list of strings, got {stop!r:.80}")
    if n < 1 or max_new_tokens < 1:
        raise ValueError(f"n and max_new_tokens must be >= 1, got n={n}, max_new_tokens={max_new_tokens}")
    if not (math.isfinite(temperature) and temperature >= 0 and math.isfinite(top_p) and 0 < top_p <= 1):
        raise ValueError(f"need a finite temperature >= 0 and 0 < top_p <= 1, got {temperature}, {top_p}")
    greedy = temperature == 0
    return dict(temperature=float(temperature), top_p=float(top_p) if not greedy else 1.0,
                max_new_tokens=int(max_new_tokens), stop=list(stop), seed=int(seed) if not greedy else 0)


def first_stop(text: str, stops: Sequence[str]) -> int | None:
    """Where the earliest stop string starts in `text`, or None: completions are cut there in every backend."""
    cuts = [text.find(s) for s in stops if s and s in text]
    return min(cuts) if cuts else None


def sample_seed(seed: int, prompt: str, sample: int) -> int:
    """The seed of sample `sample` of `prompt` (63 bits), the same in every backend and batch."""
    digest = hashlib.sha256(f"{seed}\x00{sample}\x00{prompt}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def call_keys(lm: Generator, prompts: Sequence[str], **decoding: Any) -> list[list[str | None]]:
    """The cache keys of `lm.generate(prompts, **decoding)`, per prompt (one per distinct sample); [None] per prompt
    from a generator that does not say its keys."""
    keys = getattr(lm, "cache_keys", None)
    return keys(prompts, **decoding) if keys else [[None] for _ in prompts]


def score_keys(lm: Generator, prompts: Sequence[str], continuations: Sequence[str], chat: bool = False) -> list[str | None]:
    """The cache keys of `lm.score(prompts, continuations)`; None per pair from a generator that does not say them."""
    keys = getattr(lm, "score_keys", None)
    return keys(prompts, continuations, chat=chat) if keys else [None for _ in prompts]
