"""A `Generator` that runs no model: `Recorder` keeps each call it gets, keyed and tokenised as the model would be.

A run's plan (`covlib.runs.plan`) sends a notebook's calls to a `Recorder` in place of the model: the papers' own
methods build the prompts from the profile's questions, and the recorder keeps each call (`Call`: its prompts, `n`,
`max_new_tokens`, stop strings), with

* the prompts' token ids in the model's own tokenizer, read from files on this machine (where it is not here, the
  embedded model's, an estimate: `Call.estimated`; none for a served or simulated model: their tokens are unknown);
* the cache keys the model's backend reads for the call (`CachedGenerator.cache_keys` / `score_keys` of the backend
  `load_lm` would build, which loads no weights), so that a call the call cache holds, or an earlier call of the run
  made, costs nothing (`Call.cost`); a backend that cannot say its keys (an adapter not trained yet, a chat prompt
  without the tokenizer) gets keys of the plan's own that tell repeats apart all the same.

Where a later prompt is built from a reply (a rationale's sentences, a verification's revised query), the recorder
answers with a placeholder: by default `max_new_tokens` tokens of `FILLER`; a paper's `Script` shapes them (a
rationale with its answer, a refusal) and says, per step, in what words the data bounds a count (σ firing, a
refusal). A prompt that holds a placeholder has an upper bound for its size, not its size (`Call.placeholder`).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import math
import os
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence

from tokenizers.pre_tokenizers import ByteLevel

from covlib.core.cache import make_key
from covlib.generation.base import Completion, check_decoding, check_pairs, check_prompts
from covlib.generation.decoder import LM
from covlib.generation.embedded import EMBEDDED_MODEL
from covlib.generation.endpoint import EndpointLM
from covlib.generation.loading import load_tokenizer
from covlib.generation.prefix import MIN_SHARED_TOKENS, common_prefix
from covlib.generation.simulated import is_simulated
from covlib.generation.spec import is_endpoint

MIN_SPLIT = 200  # characters a shared start must have before it is tokenised apart
FILLER = " lorem"  # what placeholder replies are made of: a prompt holding it was built from one
Reply = Callable[["Recorder", str, int, int], str]  # (recorder, prompt, max_new_tokens, sample) -> the reply


@dataclass(frozen=True)
class Script:
    """Placeholder replies and count bounds per step, each by the longest prefix of the call's `desc` it matches."""

    replies: Mapping[str, Reply] = field(default_factory=dict)
    bounds: Mapping[str, str] = field(default_factory=dict)  # prefix -> how the data bounds the step's rows

    def find(self, table: Mapping[str, Any], desc: str) -> Any:
        """The entry of `table` whose key is the longest prefix of `desc` (None: none)."""
        hits = [k for k in table if desc.startswith(k)]
        return table[max(hits, key=len)] if hits else None


@dataclass
class Call:
    """One recorded `generate`, `score` or `train` call: a unit is a prompt (generate), a (prompt, continuation) pair
    (score) or a training text (train)."""

    kind: str  # "generate", "score" or "train"
    step: str  # the call's `desc`
    model: str  # the model spec the call was made on ('' the embedded model)
    new: int  # max_new_tokens (0 for score and train)
    keys: list[list[str]]  # per unit: its cache keys (generate: one per distinct sample; train: none)
    texts: list[str]  # per unit: the text prefilled (the prompt as rendered)
    tokenizer: Any = None  # the model's; None: tokens unknown
    extra: list[str] = field(default_factory=list)  # (score) per unit: the continuation
    bound: str = ""  # how the data bounds its rows ("" exact)
    placeholder: bool = False  # its prompts hold placeholder replies: their tokens are an upper bound
    stop: tuple[str, ...] = ()
    sequences: int = 0  # (train) the sequences trained, the texts in turn
    max_length: int = 0  # (train) a sequence's tokens at most
    estimated: bool = False  # tokens counted by the embedded model's tokenizer, the model's own not being here

    def cost(self, done: set[str]) -> tuple[int, int | None, int | None, int]:
        """(rows, own tokens prefilled, shared prefix tokens, longest row's own tokens) of the units whose keys are not
        in `done` (the call cache's and earlier calls'), as the backend prefills them (each distinct prompt once, the
        prefix they share once); adds their keys to `done`. Tokens are None when the tokenizer is unknown."""
        if self.kind == "train":  # never cached: every sequence a forward and a backward
            sizes = [min(n, self.max_length) for n in self.lengths(self.texts)] if self.tokenizer else []
            own = round(self.sequences * sum(sizes) / len(sizes)) if sizes else None
            return self.sequences, own, (0 if sizes else None), max(sizes, default=0)
        todo = []
        for i, ks in enumerate(self.keys):
            if any(k not in done for k in ks):
                todo.append(i)
                done.update(ks)
        rows = sum(len(self.keys[i]) for i in todo)
        if self.tokenizer is None or not todo:
            return rows, (None if self.tokenizer is None else 0), (None if self.tokenizer is None else 0), 0
        seqs = self.ids(list(dict.fromkeys(self.texts[i] for i in todo)))  # each prompt once (score: all its pairs)
        shared = common_prefix(seqs) if len(seqs) > 1 else 0
        shared = shared if shared >= MIN_SHARED_TOKENS else 0
        extra = self.lengths([self.extra[i] for i in todo]) if self.extra else [0] * len(todo)
        longest = max(len(ids) for ids in seqs) + max(extra) - shared
        return rows, sum(len(ids) - shared for ids in seqs) + sum(extra), shared, longest

    def ids(self, texts: list[str]) -> list[list[int]]:
        """The token ids of `texts` (distinct), in one batch; the text they all start with tokenised once, where a
        byte-level tokenizer's words make a cut that changes no token (`split_at`)."""
        cut = split_at(texts, self.tokenizer)
        if not cut:
            return self.tokenizer(texts, add_special_tokens=False).input_ids if texts else []
        head = self.tokenizer(texts[0][:cut], add_special_tokens=False).input_ids
        return [head + tail for tail in self.tokenizer([t[cut:] for t in texts], add_special_tokens=False).input_ids]

    def lengths(self, texts: list[str]) -> list[int]:
        """The tokens of each of `texts`, each distinct text tokenised once."""
        distinct = list(dict.fromkeys(texts))
        size = dict(zip(distinct, map(len, self.ids(distinct))))
        return [size[t] for t in texts]


def split_at(texts: list[str], tokenizer: Any) -> int:
    """Where the text all `texts` start with may be cut and tokenised apart (0: nowhere): between a letter and a space
    before a letter, at least `MIN_SPLIT` characters in, for a byte-level BPE that splits words by its regex and
    normalises nothing (the embedded model's): no token crosses that cut, and each side is split as in the whole."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    pre = getattr(backend, "pre_tokenizer", None)
    if len(texts) < 2 or not isinstance(pre, ByteLevel) or backend.normalizer is not None or not pre.use_regex \
            or pre.add_prefix_space:
        return 0
    head = os.path.commonprefix(texts)
    for i in range(len(head) - 2, MIN_SPLIT - 1, -1):
        if head[i] == " " and head[i - 1].isalpha() and head[i + 1].isalpha():
            return i
    return 0


class Recorder:
    """A `Generator` that records its calls (`calls`) and answers with placeholders (see the module doc)."""

    def __init__(self, model: str, keyer: Any = None, tokenizer: Any = None, label: str = "",
                 renderer: Any = None, estimated: bool = False) -> None:
        self.model, self.keyer, self.tokenizer, self.estimated = model, keyer, tokenizer, estimated
        self.renderer = renderer if tokenizer is not None else None  # an `LM` (no weights) applying the chat template
        self.name = label or getattr(keyer, "name", model)
        self.calls: list[Call] = []
        self.script = Script()
        self._filler_tokens: int | None = None

    @contextlib.contextmanager
    def playing(self, script: Script) -> Iterator["Recorder"]:
        """Answer and bound the calls made inside by `script`."""
        before, self.script = self.script, script
        try:
            yield self
        finally:
            self.script = before

    def filler(self, tokens: int, prompt: str = "", sample: int = 0) -> str:
        """A placeholder text of at least `tokens` tokens (words, where the tokenizer is unknown), ending in a tag of
        `prompt` and `sample`: replies to different prompts differ, the same prompt gets the same reply."""
        if self._filler_tokens is None:
            self._filler_tokens = len(self.tokenizer(FILLER, add_special_tokens=False).input_ids) if self.tokenizer else 1
        tag = hashlib.sha256(f"{sample}\x00{prompt}".encode()).hexdigest()[:6] if prompt else ""
        return FILLER * max(1, math.ceil(tokens / self._filler_tokens)) + (f" {tag}" if tag else "")

    # ------------------------------------------------------------- the protocol
    def generate(self, prompts: Sequence[str], *, n: int = 1, temperature: float = 0.0, top_p: float = 1.0,
                 max_new_tokens: int = 128, stop: str | Sequence[str] = (), seed: int = 0, chat: bool = False,
                 progress: bool = True, desc: str = "generate") -> list[list[Completion]]:
        """Record the call; `n` placeholder completions per prompt."""
        prompts = check_prompts(prompts, "generate")
        decoding = check_decoding(n=n, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens, stop=stop,
                                  seed=seed)
        texts = self._texts(prompts, chat)
        if self._keyed(chat):
            keys = self.keyer.cache_keys(prompts, n=n, chat=chat, **decoding)
        else:
            distinct = 1 if temperature == 0 else n
            keys = [[make_key(kind="plan", model=self.name, prompt=t, chat=chat, sample=i, **decoding)
                     for i in range(distinct)] for t in texts]
        self._record("generate", desc, max_new_tokens, keys, texts, [], tuple(decoding["stop"]))
        reply = self.script.find(self.script.replies, desc) or _filled
        return [[Completion(reply(self, p, max_new_tokens, i if temperature else 0)) for i in range(n)] for p in prompts]

    def score(self, prompts: Sequence[str], continuations: Sequence[str], *, chat: bool = False, progress: bool = True,
              desc: str = "score") -> list[float]:
        """Record the call; a log-probability of -1 per pair."""
        prompts, continuations = check_pairs(prompts, continuations)
        texts = self._texts(prompts, chat)
        if self._keyed(chat):
            keys = [[k] for k in self.keyer.score_keys(prompts, continuations, chat=chat)]
        else:
            keys = [[make_key(kind="plan-score", model=self.name, prompt=t, continuation=c, chat=chat)]
                    for t, c in zip(texts, continuations)]
        self._record("score", desc, 0, keys, texts, list(continuations), ())
        return [-1.0] * len(prompts)

    def train(self, texts: Sequence[str], sequences: int, max_length: int, desc: str = "train") -> None:
        """Record a LoRA run: `sequences` sequences drawn in turn from `texts` (prompt and target), each cut to
        `max_length` tokens."""
        self.calls.append(Call("train", desc, self.model, 0, [], list(texts), self.tokenizer, bound=self.script.find(
            self.script.bounds, desc) or "", placeholder=any(FILLER in t for t in texts), sequences=sequences,
            max_length=max_length, estimated=self.estimated))

    def render(self, prompt: str, chat: bool = False) -> str:
        """The text the model would be fed (a chat prompt through its template, where the tokenizer is here)."""
        return self._texts([prompt], chat)[0]

    # ------------------------------------------------------------- helpers
    def _keyed(self, chat: bool) -> bool:
        """Whether the backend's own keys can be had: a backend, which renders a chat prompt only with its tokenizer."""
        return self.keyer is not None and not (chat and isinstance(self.keyer, LM) and self.renderer is None)

    def _texts(self, prompts: list[str], chat: bool) -> list[str]:
        return [self.renderer.render(p, True) for p in prompts] if chat and self.renderer is not None else list(prompts)

    def _record(self, kind: str, desc: str, new: int, keys: list[list[str]], texts: list[str], extra: list[str],
                stop: tuple[str, ...]) -> None:
        placeholder = any(FILLER in t for t in texts)
        self.calls.append(Call(kind, desc, self.model, new, keys, texts, self.tokenizer, extra,
                               self.script.find(self.script.bounds, desc) or "", placeholder, stop,
                               estimated=self.estimated))


def _filled(rec: Recorder, prompt: str, max_new_tokens: int, sample: int) -> str:
    """The default placeholder reply: `max_new_tokens` tokens of filler, tagged by its prompt."""
    return rec.filler(max_new_tokens, prompt, sample)


@functools.lru_cache(maxsize=None)
def local_tokenizer(model_id: str) -> Any:
    """The tokenizer of `model_id` from files on this machine, read once; None when they are not here."""
    try:
        return load_tokenizer(model_id, local_only=True)
    except RuntimeError:
        return None


def recorder(model: str = "", adapter: str = "", device: str = "cpu") -> Recorder:
    """The recorder standing in for `load_lm(model, device=device, adapter=adapter)`: that backend's keys (an adapter
    not trained yet: keys of the plan's own), the model's tokenizer where it can be read offline, else the embedded
    model's (an estimate, `Call.estimated`; prompts not rendered by a chat template it does not have)."""
    if is_simulated(model):
        return Recorder(model, None, None, model)
    if is_endpoint(model):
        return Recorder(model, EndpointLM.from_spec(model), None)
    base = LM(model or None, device=device)  # no weights read
    trained = not adapter or (Path(adapter) / "adapter_config.json").is_file()
    keyer = (LM(model or None, device=device, adapter=adapter) if adapter else base) if trained else None
    tokenizer = local_tokenizer(base.model_id)
    for lm in (base, keyer) if tokenizer is not None else ():
        if lm is not None:
            lm.tokenizer = tokenizer  # a chat prompt is rendered with it, the hub not asked
    label = keyer.name if keyer is not None else f"{base.name}+adapter:{adapter}"
    if tokenizer is None:
        return Recorder(model, keyer, local_tokenizer(EMBEDDED_MODEL), label, estimated=True)
    return Recorder(model, keyer, tokenizer, label, base)
