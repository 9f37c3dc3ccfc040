"""The tests' one scripted generator: a `covlib.generation.Generator` whose replies are a function of the prompt."""

from __future__ import annotations

import hashlib
import itertools
import json
from typing import Any, Callable, Mapping, Sequence, Union

from covlib.generation import Completion, check_pairs, check_prompts

Reply = Union[str, tuple[str, float], Sequence[tuple[str, float]]]  # text, (text, mean log-prob), or samples


def _samples(reply: Reply) -> list[tuple[str, float]]:
    if isinstance(reply, str):
        return [(reply, -0.1)]
    if isinstance(reply, tuple):
        return [reply]
    return list(reply)


def _completion(text: str, mean_logprob: float) -> Completion:
    tokens = text.split()
    return Completion(text, tokens, [mean_logprob] * len(tokens))


class ScriptedGenerator:
    """`generate` and `score` with `covlib.generation.LM`'s signatures, from a script instead of a model.

    `script` is a function of the prompt, or {substring: reply} tried in order (else `default`).
    A reply is a text, a (text, mean token log-prob) pair, or a list of such pairs: greedy calls
    take the first, sampled calls (temperature > 0) cycle through them. `score` is a fixed
    log-prob, {continuation: log-prob}, or a function of (prompt, continuation).
    Calls are recorded: `calls` (desc, prompts, chat), `generate_calls` (desc, number of prompts, n),
    `score_calls` (number of pairs) and `scored` (prompt, continuation).
    """

    def __init__(self, script: Callable[[str], Reply] | Mapping[str, Reply], default: Reply = "",
                 name: str = "scripted", score: float | Mapping[str, float] | Callable[[str, str], float] = -0.7):
        self.script, self.default, self.name, self._score = script, default, name, score
        self.calls: list[tuple[str, list[str], bool]] = []
        self.generate_calls: list[tuple[str, int, int]] = []
        self.score_calls: list[int] = []
        self.scored: list[tuple[str, str]] = []

    def _reply(self, prompt: str) -> Reply:
        if callable(self.script):
            return self.script(prompt)
        for needle, reply in self.script.items():
            if needle in prompt:
                return reply
        return self.default

    def generate(self, prompts: Sequence[str], *, n: int = 1, temperature: float = 0.0, top_p: float = 1.0,
                 max_new_tokens: int = 128, stop: str | Sequence[str] = (), seed: int = 0, chat: bool = False,
                 progress: bool = True, desc: str = "generate") -> list[list[Completion]]:
        """`n` scripted completions per prompt, as `LM.generate` returns them."""
        prompts = check_prompts(prompts, "generate")  # the same input rules as every real backend
        self.calls.append((desc, list(prompts), chat))
        self.generate_calls.append((desc, len(prompts), n))
        out = []
        for prompt in prompts:
            samples = _samples(self._reply(prompt))
            picks = [samples[0]] * n if temperature == 0 else list(itertools.islice(itertools.cycle(samples), n))
            out.append([_completion(*s) for s in picks])
        return out

    def score(self, prompts: Sequence[str], continuations: Sequence[str], *, chat: bool = False, progress: bool = True,
              desc: str = "score") -> list[float]:
        """The scripted log-probability of each continuation after its prompt."""
        prompts, continuations = check_pairs(prompts, continuations)
        self.score_calls.append(len(prompts))
        self.scored += list(zip(prompts, continuations))
        return [self._logprob(p, c) for p, c in zip(prompts, continuations)]

    def _logprob(self, prompt: str, continuation: str) -> Any:
        if callable(self._score):
            return self._score(prompt, continuation)
        if isinstance(self._score, Mapping):
            return self._score[continuation]
        return self._score


def _digest(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


class KeyedGenerator(ScriptedGenerator):
    """The scripted generator that also says its cache keys, as the real backends' `cache_keys` / `score_keys` do
    (one per distinct sample), for the traces' tests. It remembers the keys of the calls it served (`served`: prompt
    -> keys, `served_scores`: (prompt, continuation) -> key) and can fail: on a call whose `desc` contains `fail`, or
    on its `fail_on`-th generate call."""

    def __init__(self, *args: Any, fail: str | None = None, fail_on: int | None = None, **kw: Any):
        super().__init__(*args, **kw)
        self.fail, self.fail_on = fail, fail_on
        self.served: dict[str, list[str]] = {}
        self.served_scores: dict[tuple[str, str], str] = {}

    def cache_keys(self, prompts: Sequence[str], *, n: int = 1, temperature: float = 0.0, top_p: float = 1.0,
                   max_new_tokens: int = 128, stop: str | Sequence[str] = (), seed: int = 0,
                   chat: bool = False) -> list[list[str]]:
        """One key per distinct sample (greedy: one) per prompt, of everything that changes the reply."""
        stop = [stop] if isinstance(stop, str) else list(stop)
        distinct = 1 if temperature == 0 else n
        return [[_digest(self.name, p, temperature, top_p, max_new_tokens, stop, seed, chat, i) for i in range(distinct)]
                for p in prompts]

    def score_keys(self, prompts: Sequence[str], continuations: Sequence[str], *, chat: bool = False) -> list[str]:
        """One key per (prompt, continuation)."""
        return [_digest(self.name, "score", p, c, chat) for p, c in zip(prompts, continuations)]

    def _check(self, desc: str) -> None:
        if self.fail and self.fail in desc:
            raise RuntimeError(f"scripted failure in {desc}")
        if self.fail_on is not None and len(self.calls) + 1 >= self.fail_on:
            raise RuntimeError("the model went away")

    def generate(self, prompts: Sequence[str], *, n: int = 1, temperature: float = 0.0, top_p: float = 1.0,
                 max_new_tokens: int = 128, stop: str | Sequence[str] = (), seed: int = 0, chat: bool = False,
                 progress: bool = True, desc: str = "generate") -> list[list[Completion]]:
        """As `ScriptedGenerator.generate`, remembering each prompt's keys."""
        self._check(desc)
        self.served.update(zip(prompts, self.cache_keys(prompts, n=n, temperature=temperature, top_p=top_p,
                                                        max_new_tokens=max_new_tokens, stop=stop, seed=seed, chat=chat)))
        return super().generate(prompts, n=n, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens,
                                stop=stop, seed=seed, chat=chat, progress=progress, desc=desc)

    def score(self, prompts: Sequence[str], continuations: Sequence[str], *, chat: bool = False, progress: bool = True,
              desc: str = "score") -> list[float]:
        """As `ScriptedGenerator.score`, remembering each pair's key."""
        if self.fail and self.fail in desc:
            raise RuntimeError(f"scripted failure in {desc}")
        self.served_scores.update(zip(zip(prompts, continuations), self.score_keys(prompts, continuations, chat=chat)))
        return super().score(prompts, continuations, chat=chat, progress=progress, desc=desc)
