"""The tests' one scripted generator: a `covlib.lm.Generator` whose replies are a function of the prompt."""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

from covlib.lm import Completion

Reply = Callable[[str], str]


class ScriptedGenerator:
    """Replies from `script`: a function of the prompt, or {substring: reply} tried in order (else `default`).

    Every call is recorded in `calls` as (desc, prompts, chat) so tests can check batching and prompts.
    """

    def __init__(self, script: Reply | Mapping[str, str], default: str = "", name: str = "scripted"):
        self.script, self.default, self.name = script, default, name
        self.calls: list[tuple[str, list[str], bool]] = []

    def _reply(self, prompt: str) -> str:
        if callable(self.script):
            return self.script(prompt)
        for needle, reply in self.script.items():
            if needle in prompt:
                return reply
        return self.default

    def generate(self, prompts: Sequence[str], *, n: int = 1, temperature: float = 0.0, top_p: float = 1.0,
                 max_new_tokens: int = 128, stop: Sequence[str] = (), seed: int = 0, chat: bool = False,
                 progress: bool = True, desc: str = "generate") -> list[list[Completion]]:
        """`n` copies of the scripted reply per prompt, as `LM.generate` returns them."""
        if isinstance(prompts, str):
            raise TypeError("generate() takes a list of prompts")
        self.calls.append((desc, list(prompts), chat))
        out = []
        for prompt in prompts:
            text = self._reply(prompt)
            out.append([Completion(text, text.split(), [-0.1] * len(text.split()))] * n)
        return out
