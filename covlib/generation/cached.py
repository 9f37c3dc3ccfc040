"""What the in-process and HTTP backends share: `generate` and `score` through the persistent cache, one batch a call.

`CachedGenerator` checks the arguments, keys every call (`cache_keys`, `score_keys`) and runs it through
`covlib.core.cache.cached_batch`: cached results are read, the misses go to the backend in one call and are committed
as they come. A backend (`covlib.generation.decoder.LM`, `covlib.generation.endpoint.EndpointLM`) says what keys a
prompt (`_texts`), how a call is keyed (`_key`, `_generate_keys`) and how the misses are computed (`_generate_missing`,
`_score_missing`).
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence

from covlib.core.cache import Cache, cached_batch, completion_shape, number_shape
from covlib.generation.base import Completion, check_decoding, check_pairs, check_prompts, from_cache


class CachedGenerator:
    """A `covlib.generation.base.Generator` behind the persistent cache; subclasses supply the hooks below."""

    cache: Cache

    # ------------------------------------------------------------- the hooks
    def _texts(self, prompts: Sequence[str], chat: bool) -> list[str]:
        """The texts that key the prompts' calls: the prompts themselves unless a backend renders them."""
        return list(prompts)

    def _score_texts(self, prompts: Sequence[str], chat: bool, desc: str) -> list[str]:
        """`_texts` for `score` (a backend that cannot score chat prompts refuses here)."""
        return self._texts(prompts, chat)

    def _key(self, kind: str, **parts: Any) -> str:
        raise NotImplementedError

    def _generate_keys(self, texts: list[str], n_distinct: int, decoding: dict, chat: bool) -> list[list[str]]:
        raise NotImplementedError

    def _generate_missing(self, todo: dict[str, tuple[str, int]], samples: dict[str, list[str]], decoding: dict,
                          chat: bool, progress: bool, desc: str) -> Iterator[dict[str, Any]]:
        """The completion records of `todo` ({key: (text, sample index)}; `samples`: each text's sample keys), yielded
        as {key: record} batches."""
        raise NotImplementedError

    def _score_missing(self, todo: dict[str, tuple[str, str]], progress: bool, desc: str) -> Iterator[dict[str, float]]:
        """The log-probabilities of `todo` ({key: (text, continuation)}), yielded as {key: value} batches."""
        raise NotImplementedError

    # ------------------------------------------------------------------ keys
    def _keyed(self, prompts: Sequence[str], chat: bool, **options: Any) -> tuple[list[str], dict, list[list[str]]]:
        """(the texts, the decoding parameters as they enter keys, each text's sample keys) of a `generate` call."""
        decoding = check_decoding(**options)
        texts = self._texts(prompts, chat)
        return texts, decoding, self._generate_keys(texts, 1 if decoding["temperature"] == 0 else options["n"],
                                                    decoding, chat)

    def cache_keys(self, prompts: Sequence[str], *, n: int = 1, temperature: float = 0.0, top_p: float = 1.0,
                   max_new_tokens: int = 128, stop: str | Sequence[str] = (), seed: int = 0,
                   chat: bool = False) -> list[list[str]]:
        """The cache keys `generate` reads for these arguments: one per distinct sample (greedy: one) per prompt."""
        return self._keyed(prompts, chat, n=n, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens,
                           stop=stop, seed=seed)[2]

    def score_keys(self, prompts: Sequence[str], continuations: Sequence[str], *, chat: bool = False) -> list[str]:
        """The cache keys `score` reads for these pairs."""
        return [self._key("score", prompt=t, continuation=c) for t, c in zip(self._texts(prompts, chat), continuations)]

    # ------------------------------------------------------------ the calls
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
        """`n` completions for each prompt (greedy when temperature is 0), from cache where possible."""
        prompts = check_prompts(prompts, "generate")
        texts, decoding, keys = self._keyed(prompts, chat, n=n, temperature=temperature, top_p=top_p,
                                            max_new_tokens=max_new_tokens, stop=stop, seed=seed)
        samples = dict(zip(texts, keys))
        jobs = ((k, (t, i)) for t, ks in zip(texts, keys) for i, k in enumerate(ks))
        found = cached_batch(self.cache, jobs, lambda todo: self._generate_missing(todo, samples, decoding, chat,
                                                                                  progress, desc), completion_shape)
        return from_cache(found, keys, n)

    def score(
        self,
        prompts: Sequence[str],
        continuations: Sequence[str],
        *,
        chat: bool = False,
        progress: bool = True,
        desc: str = "score",
    ) -> list[float]:
        """Total log-probability of each continuation given its prompt (cached)."""
        prompts, continuations = check_pairs(prompts, continuations)
        texts = self._score_texts(prompts, chat, desc)
        keys = self.score_keys(texts, continuations)  # the texts as they are (rendered already)
        found = cached_batch(self.cache, zip(keys, zip(texts, continuations)),
                             lambda todo: self._score_missing(todo, progress, desc), number_shape)
        return [float(found[k]) for k in keys]
