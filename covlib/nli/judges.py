"""The NLI judges that run a model: any Hugging Face classifier, TRUE (T5), and an LLM asked yes / unclear / no.

`HFNLIJudge` reads its label order from the model's config (`map_nli_labels`); a two-label model's
not-entailment mass is split 50/50 over neutral and contradiction. `TrueT5Judge` reads the first
decoder step's '1' vs '0' logits. `LLMJudge` takes the softmax of a generator's log-probs of three
one-word answers. Models load lazily, on first use, on `device` (cuda when available if None); local
model folders enter `config` (and so the cache key) by a hash of their files' contents, taken once per judge
(`pin_files`): a judge keeps the key of the files it loaded even when they are replaced on disk while it lives,
and refuses to load files that changed after it gave its first key (a new judge takes the new files' key).
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterator

import numpy as np

from covlib.core.cache import fingerprint_dir
from covlib.core.devices import default_device
from covlib.generation.spec import load_failure
from covlib.nli.base import JUDGE_CHOICES, LABELS, ONNX_DIR


def _load_error(model_id: str, err: Exception) -> RuntimeError:
    """A model that transformers could not load, explained."""
    return RuntimeError(f"could not load NLI model {model_id!r}: {load_failure(model_id, err)}. "
                        f"Offline choices: {JUDGE_CHOICES}")


def pin_files(judge: Any, current: Callable[[], Any]) -> Any:
    """The fingerprint `current()` gives the first time a judge asks, kept in `judge._pinned` ever after."""
    if not hasattr(judge, "_pinned"):
        judge._pinned = current()
    return judge._pinned


def check_unchanged(source: Any, pinned: Any, loaded: Any) -> None:
    """Raise unless the files just loaded (`loaded`, their fingerprint) are those the judge's cache key names."""
    if loaded != pinned:
        raise RuntimeError(
            f"{source} changed on disk after this judge took its cache key ({pinned} -> {loaded}): its outputs "
            "would be cached under a key that names other files. Load the judge again (e.g. "
            "nli.load_trained_judge() or nli.load_judge(...)) to run the new files under their own key")


def map_nli_labels(id2label: dict[Any, str]) -> dict[int, str]:
    """Map a model's class ids to 'entailment' / 'neutral' / 'contradiction' / 'not_entailment'."""
    mapping: dict[int, str] = {}
    for idx, raw in id2label.items():
        name = str(raw).lower().replace("-", "_").replace(" ", "_")
        if "contra" in name:
            mapping[int(idx)] = "contradiction"
        elif "neutral" in name:
            mapping[int(idx)] = "neutral"
        elif "entail" in name and re.search(r"(^|_)(not|non)_?entail", name):
            mapping[int(idx)] = "not_entailment"
        elif "entail" in name:
            mapping[int(idx)] = "entailment"
        else:
            raise ValueError(
                f"cannot map NLI label {raw!r} (id {idx}) of id2label={dict(id2label)}; "
                "expected names containing 'entail' / 'neutral' / 'contra' (or 'not_entailment'); "
                "pass labels={id: name} to HFNLIJudge"
            )
    kinds = sorted(mapping.values())
    if kinds not in (["contradiction", "entailment", "neutral"], ["entailment", "not_entailment"]):
        raise ValueError(f"id2label={dict(id2label)} is neither 3-way NLI nor entailment/not_entailment")
    return mapping


def three_way(probs: np.ndarray, mapping: dict[int, str]) -> np.ndarray:
    """Class probabilities -> (entailment, neutral, contradiction); not_entailment splits 50/50."""
    out = np.zeros((probs.shape[0], 3))
    for idx, label in mapping.items():
        if label == "not_entailment":
            out[:, 1] += probs[:, idx] / 2
            out[:, 2] += probs[:, idx] / 2
        else:
            out[:, LABELS.index(label)] += probs[:, idx]
    return out


def length_batches(premises: list[str], hypotheses: list[str], batch_size: int) -> Iterator[list[int]]:
    """Pair indices in batches of `batch_size`, shortest pairs first (similar lengths pad less)."""
    order = sorted(range(len(premises)), key=lambda i: len(premises[i]) + len(hypotheses[i]))
    for start in range(0, len(order), batch_size):
        yield order[start : start + batch_size]


class HFNLIJudge:
    """Any Hugging Face sequence-classification NLI model (label order read from config.id2label).

    Two-label models (entailment / not_entailment) cannot tell neutral from
    contradiction: their not_entailment probability is split equally between
    the two, so P(entailment) is exact and argmax labels never say contradiction.
    """

    def __init__(
        self,
        model_id_or_dir: str,
        device: str | None = None,
        batch_size: int = 16,
        max_length: int = 512,
        labels: dict[int, str] | None = None,
        name: str | None = None,
        threshold: float | None = None,
    ):
        self.model_id = str(model_id_or_dir)
        self.threshold = threshold  # entailed when P(entailment) > threshold; None: the argmax label
        self.device = device
        self.batch_size = batch_size
        self.max_length = max_length
        self.labels = labels
        self.name = name or f"hf:{self.model_id}"
        self._model = None
        self._tokenizer = None
        self._mapping: dict[int, str] | None = None

    @property
    def config(self) -> dict[str, Any]:
        """What, besides the name, changes the output; `files` is pinned at the judge's first key or load."""
        return {"max_length": self.max_length, "labels": self.labels, "files": self._files()}

    def _files(self) -> str | None:
        """The model folder's fingerprint, taken once (`pin_files`); exports (onnx/) are not read here."""
        return pin_files(self, lambda: fingerprint_dir(self.model_id, exclude=(ONNX_DIR,)))

    def _load(self) -> None:
        if self._model is not None:
            return
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.device = self.device or default_device()
        pinned = self._files()  # the key's files: those loaded must still be them
        try:
            tokenizer = AutoTokenizer.from_pretrained(self.model_id)
            model = AutoModelForSequenceClassification.from_pretrained(self.model_id)
        except (OSError, ValueError) as err:
            raise _load_error(self.model_id, err) from err
        check_unchanged(self.model_id, pinned, fingerprint_dir(self.model_id, exclude=(ONNX_DIR,)))
        self._tokenizer = tokenizer
        self._mapping = map_nli_labels(self.labels or model.config.id2label)
        self._model = model.to(self.device).eval()

    @property
    def mapping(self) -> dict[int, str]:
        """Class id -> NLI label, loading the model if needed."""
        self._load()
        return dict(self._mapping)

    @property
    def two_label(self) -> bool:
        """Whether the model is entailment / not_entailment only (read from its config, weights not loaded)."""
        if self._mapping is None and not self.labels:
            from transformers import AutoConfig

            try:
                id2label = AutoConfig.from_pretrained(self.model_id).id2label
            except (OSError, ValueError) as err:
                raise _load_error(self.model_id, err) from err
            return "not_entailment" in map_nli_labels(id2label).values()
        return "not_entailment" in (self._mapping or map_nli_labels(self.labels)).values()

    def probabilities(self, premises: list[str], hypotheses: list[str]) -> np.ndarray:
        """(N, 3) entailment/neutral/contradiction probabilities, in batches of similar length (less padding)."""
        import torch

        self._load()
        probs = np.zeros((len(premises), len(self._mapping)))
        for idx in length_batches(premises, hypotheses, self.batch_size):
            enc = self._tokenizer(
                [premises[i] for i in idx],
                [hypotheses[i] for i in idx],
                truncation=True,  # longest first: the premise, as hypotheses are short
                max_length=self.max_length,
                padding=True,
                return_tensors="pt",
            ).to(self.device)
            with torch.inference_mode():
                logits = self._model(**enc).logits.float()
            probs[idx] = torch.softmax(logits, dim=-1).cpu().numpy()
        return three_way(probs, self._mapping)


# --------------------------------------------------------------------------- TRUE (T5) judge


def true_input(premise: str, hypothesis: str) -> str:
    """The TRUE model's input text."""
    return f"premise: {premise} hypothesis: {hypothesis}"


class TrueT5Judge:
    """TRUE (Honovich et al., 2022): a seq2seq model that answers '1' (entailed) or '0'.

    P(entailment) is softmax over the first decoder step's logits of the tokens
    '1' and '0'; being binary, the not-entailed mass is split 50/50 between
    neutral and contradiction, and its decision is its own, P(entailment) > 0.5 (`two_label`, see
    `entailed`). The default model is T5-11B (~45 GB in fp32).
    """

    two_label = True

    def __init__(
        self,
        model_id: str = "google/t5_xxl_true_nli_mixture",
        device: str | None = None,
        batch_size: int = 8,
        max_length: int = 512,
        dtype: str | None = None,
    ):
        self.model_id = str(model_id)
        self.device = device
        self.batch_size = batch_size
        self.max_length = max_length
        self.dtype = dtype
        self.name = f"true:{self.model_id}"
        self._model = None
        self._tokenizer = None
        self._ids: tuple[int, int] | None = None

    @property
    def config(self) -> dict[str, Any]:
        """What, besides the name, changes the output."""
        return {"max_length": self.max_length, "dtype": self.dtype,
                "files": pin_files(self, lambda: fingerprint_dir(self.model_id))}  # pinned, as HFNLIJudge's

    def _load(self) -> None:
        if self._model is not None:
            return
        import torch
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        self.device = self.device or default_device()
        kwargs = {"dtype": getattr(torch, self.dtype)} if self.dtype else {}
        pinned = self.config["files"]
        try:
            tokenizer = AutoTokenizer.from_pretrained(self.model_id)
            model = AutoModelForSeq2SeqLM.from_pretrained(self.model_id, **kwargs)
        except (OSError, ValueError) as err:
            raise _load_error(self.model_id, err) from err
        check_unchanged(self.model_id, pinned, fingerprint_dir(self.model_id))
        self._tokenizer, self._model = tokenizer, model.to(self.device).eval()
        self._ids = (self._token_id("1"), self._token_id("0"))

    def _token_id(self, text: str) -> int:
        ids = self._tokenizer(text, add_special_tokens=False).input_ids
        if not ids:
            raise ValueError(f"tokenizer of {self.model_id} has no token for {text!r}")
        return int(ids[-1])  # T5 may emit a lone '▁' before the digit

    def probabilities(self, premises: list[str], hypotheses: list[str]) -> np.ndarray:
        """(N, 3) probabilities from the first decoder step's '1' vs '0' logits."""
        import torch

        self._load()
        start_id = self._model.config.decoder_start_token_id
        one, zero = self._ids
        p_entail = []
        for start in range(0, len(premises), self.batch_size):
            texts = [true_input(p, h) for p, h in zip(premises[start : start + self.batch_size], hypotheses[start : start + self.batch_size])]
            enc = self._tokenizer(texts, truncation=True, max_length=self.max_length, padding=True, return_tensors="pt").to(self.device)
            decoder = torch.full((len(texts), 1), start_id, dtype=torch.long, device=self.device)
            with torch.inference_mode():
                logits = self._model(**enc, decoder_input_ids=decoder).logits[:, 0, :].float()
            pair = torch.stack([logits[:, one], logits[:, zero]], dim=-1)
            p_entail.append(torch.softmax(pair, dim=-1)[:, 0].cpu().numpy())
        p = np.concatenate(p_entail) if p_entail else np.zeros(0)
        return np.stack([p, (1 - p) / 2, (1 - p) / 2], axis=1)


# --------------------------------------------------------------------------- LLM as judge

LLM_TEMPLATE = (
    "Premise: {premise}\n"
    "Hypothesis: {hypothesis}\n"
    "Question: According to the premise, is the hypothesis true (yes), false (no), "
    "or not stated (unclear)? Answer with one word: yes, no, or unclear.\n"
    "Answer:"
)


class LLMJudge:
    """LLM-as-judge: softmax of lm.score log-probs of ' yes' / ' unclear' / ' no' -> (entail, neutral, contra).

    Scores are total log-probs, so an option spanning more tokens is penalised;
    keep options short (single tokens where the tokenizer allows).
    """

    def __init__(
        self,
        lm: Any,
        template: str = LLM_TEMPLATE,
        options: tuple[str, str, str] = (" yes", " unclear", " no"),
        chat: bool = False,
    ):
        self.lm = lm
        self.template = template
        self.options = tuple(options)
        self.chat = chat
        self.name = f"llm-judge:{lm.name}"

    @property
    def config(self) -> dict[str, Any]:
        """What, besides the name, changes the output."""
        return {"template": self.template, "options": list(self.options), "chat": self.chat, "dtype": str(getattr(self.lm, "dtype", None))}

    def prompt(self, premise: str, hypothesis: str) -> str:
        """The judge prompt for one pair."""
        return self.template.format(premise=premise, hypothesis=hypothesis)

    def probabilities(self, premises: list[str], hypotheses: list[str]) -> np.ndarray:
        """(N, 3) softmax of the three options' log-probs."""
        prompts = [self.prompt(p, h) for p, h in zip(premises, hypotheses)]
        n = len(prompts)
        if n == 0:
            return np.zeros((0, 3))
        all_prompts = [p for p in prompts for _ in self.options]
        continuations = [o for _ in prompts for o in self.options]
        scores = np.asarray(self.lm.score(all_prompts, continuations, chat=self.chat, progress=False), dtype=float)
        scores = scores.reshape(n, 3)
        scores -= scores.max(axis=1, keepdims=True)
        weights = np.exp(scores)
        return weights / weights.sum(axis=1, keepdims=True)
