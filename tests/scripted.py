"""The tests' one scripted generator: a `covlib.generation.Generator` whose replies are a function of the prompt."""

from __future__ import annotations

import itertools
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
