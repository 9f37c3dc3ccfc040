"""The simulated model `sim:<behaviour>[/<persona>][@<seed>]`: a `Generator` with no neural model, whose replies each
paper computes from its examples' gold data with effects planted as data, to check the measuring chain end to end.

`behaviour` is `paper` (each paper's effects at the paper's own sizes) or `null` (the same formats, no effect
anywhere); `persona` names one of a paper's models (its planted numbers and card: `sim:paper/Llama2-13B`); `seed`
draws another world (the per-question draws), 0 by default. The model itself knows no prompt: each paper's
`simulation` module teaches it (`teach`) the prompt kinds its notebooks send, once its examples are loaded (the
notebook door does it). A prompt no taught responder recognises is an error naming the prompt, never a blank reply.

Replies are deterministic per (world seed, decoding seed, prompt, sample) and ignore `max_new_tokens` (a simulated
reply is as long as its format needs). They are not cached: they cost microseconds, and the planted tables would
have to enter every key. Nothing here is evidence about the papers: tables, traces and the ledger name the model
`SIM_LABEL`.
"""

from __future__ import annotations

import hashlib
import random
import re
from typing import Any, Callable, Sequence

from covlib.core.claim import SIM_LABEL
from covlib.generation.base import Completion, check_decoding, check_pairs, check_prompts, first_stop, sample_seed

SIM_PREFIX = "sim:"
BEHAVIOURS = ("paper", "null")
MEAN_LOGPROB = -0.4  # a reply's log-probability per word when its responder says none

Reply = "str | tuple[str, float] | None"  # a text, or (text, mean log-probability per word); None: not this kind
Responder = Callable[[str, "SimLM", random.Random], Any]  # (prompt, model, this sample's stream) -> Reply
Scorer = Callable[[str, str, "SimLM"], Any]  # (prompt, continuation, model) -> total log-probability, or None

_SPEC = re.compile(r"^sim:(?P<behaviour>[a-z]+)(?:/(?P<persona>[^@]+))?(?:@(?P<seed>\d+))?$")


def is_simulated(model: Any) -> bool:
    """Whether `model` is a simulated model's spec (`sim:...`) or a `SimLM`."""
    return isinstance(model, SimLM) or (isinstance(model, str) and model.startswith(SIM_PREFIX))


def parse_sim(spec: str) -> tuple[str, str, int]:
    """(behaviour, persona, world seed) of `sim:<behaviour>[/<persona>][@<seed>]`; a bad spec raises, naming the form."""
    found = _SPEC.match(spec.strip())
    if not found or found.group("behaviour") not in BEHAVIOURS:
        raise ValueError(f"{spec!r} is not a simulated model: write sim:<behaviour>[/<persona>][@<seed>], behaviour one "
                         f"of {', '.join(BEHAVIOURS)} (e.g. sim:paper, sim:null@3, sim:paper/Llama2-13B)")
    return found.group("behaviour"), (found.group("persona") or "").strip(), int(found.group("seed") or 0)


def with_persona(spec: str, persona: str) -> str:
    """The spec of the same behaviour and world seed as `spec`, as `persona` (one of a paper's models)."""
    behaviour, _, seed = parse_sim(spec)
    return f"{SIM_PREFIX}{behaviour}/{persona}" + (f"@{seed}" if seed else "")


def uniform(*key: Any) -> float:
    """A uniform draw in [0, 1) that is a function of `key` alone (the same in every prompt that names it)."""
    digest = hashlib.sha256("\x00".join(map(str, key)).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "little") / 2.0 ** 64


class SimLM:
    """A simulated `Generator`: taught responders per prompt kind compute each reply; see the module docstring."""

    def __init__(self, spec: str, variant: str = ""):
        self.behaviour, self.persona, self.world_seed = parse_sim(spec)
        self.spec = spec.strip()
        self.variant = variant  # a planted fine-tuned variant, named by the adapter folder a notebook passed ('' none)
        world = f", world {self.world_seed}" if self.world_seed else ""
        self.name = (f"{self.persona}, " if self.persona else "") + f"{SIM_LABEL}, {self.behaviour}{world}" + \
            (f"+adapter:{variant}" if variant else "")  # what every table, trace and ledger row shows
        self.responders: dict[str, Responder] = {}
        self.scorers: dict[str, Scorer] = {}

    def teach(self, kind: str, responder: Responder, scorer: Scorer | None = None) -> None:
        """Answer the prompts `responder` recognises (it returns None for the others); `kind` names it in errors."""
        self.responders[kind] = responder
        if scorer is not None:
            self.scorers[kind] = scorer

    def draw(self, *key: Any) -> float:
        """This world's uniform draw for `key` (a question id, an arm), shared by every prompt and every variant that
        names the key: paired arms compare on the same draws."""
        return uniform(self.world_seed, self.persona, *key)

    def reply(self, prompt: str, rng: random.Random) -> tuple[str, float]:
        """(text, mean log-probability per word) from the first responder that recognises `prompt`."""
        for responder in self.responders.values():
            out = responder(prompt, self, rng)
            if out is not None:
                return out if isinstance(out, tuple) else (out, MEAN_LOGPROB)
        taught = ", ".join(self.responders) or "nothing (no paper taught it: load it through a notebook's session)"
        raise ValueError(f"{self.spec}: no simulated reply for this prompt (taught: {taught}); it begins "
                         f"{prompt[:160]!r}")

    def generate(self, prompts: Sequence[str], *, n: int = 1, temperature: float = 0.0, top_p: float = 1.0,
                 max_new_tokens: int = 128, stop: str | Sequence[str] = (), seed: int = 0, chat: bool = False,
                 progress: bool = True, desc: str = "generate") -> list[list[Completion]]:
        """`n` replies per prompt; greedy decoding repeats sample 0, sampling draws sample i's own stream."""
        prompts = check_prompts(prompts, "generate")
        decoding = check_decoding(n=n, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens, stop=stop,
                                  seed=seed)
        out = []
        for prompt in prompts:
            samples = []
            for i in range(n if temperature > 0 else 1):
                rng = random.Random(sample_seed(decoding["seed"] * 1_000_003 + self.world_seed, prompt, i))
                samples.append(_completion(*self.reply(prompt, rng), decoding["stop"]))
            out.append(samples * n if len(samples) == 1 else samples)
        return out

    def score(self, prompts: Sequence[str], continuations: Sequence[str], *, chat: bool = False, progress: bool = True,
              desc: str = "score") -> list[float]:
        """Each continuation's log-probability from the first scorer that knows its prompt, else per word."""
        prompts, continuations = check_pairs(prompts, continuations)
        out = []
        for p, c in zip(prompts, continuations):
            found = next((s for s in (f(p, c, self) for f in self.scorers.values()) if s is not None), None)
            out.append(float(found) if found is not None else MEAN_LOGPROB * max(1, len(c.split())))
        return out


def _completion(text: str, mean_logprob: float, stops: Sequence[str]) -> Completion:
    cut = first_stop(text, stops)
    text = text if cut is None else text[:cut]
    tokens = text.split()
    return Completion(text, tokens, [float(mean_logprob)] * len(tokens), "stop")
