"""Natural-language-inference judges: P(premise entails hypothesis), cached.

The credibility paper scores key-facts recall/precision and self-consistency
with TRUE (Honovich et al., 2022), a T5-11B NLI model, as the oracle
f(premise, hypothesis) in {0, 1}. Every judge here returns three columns
(entailment, neutral, contradiction) summing to 1, and every call goes
through one caching function, `probabilities`, keyed by judge name + judge
config + premise + hypothesis, so all backends are cached the same way.

Backends (pick with `load_judge(spec)`):

| spec              | judge                                              | needs           |
|-------------------|----------------------------------------------------|-----------------|
| "minilm-fever-nli"| `HFNLIJudge` on the cross-encoder `make judge`     | `make judge`    |
|                   | trains offline on FEVER (`load_trained_judge`)     | (~25 min CPU)   |
| "overlap"         | `OverlapJudge` -- approximate, NOT an NLI model    | nothing         |
| "llm", "llm:<m>"  | `LLMJudge(load_lm(m))` -- LLM-as-judge via scores  | covlib.generation model |
| "true"            | `TrueT5Judge` -- google/t5_xxl_true_nli_mixture    | the TRUE weights|
| "owner/name", dir | `HFNLIJudge(spec)` -- any HF sequence-classifier   | those weights   |

Any other spec (a bare word that names no judge, a path that does not exist, "") is refused at
once with the list of choices, instead of a slow hub lookup and a transformers error.

Input rules (`probabilities`, for every judge): premises and hypotheses are lists of strings of
the same length (a lone string is refused, not judged character by character). A pair whose
premise or hypothesis is empty or whitespace only is judged neutral (0, 1, 0) without calling
the judge: nothing is entailed by, or entails, an empty text (an empty model answer, say).

The default judge (`judge=None`) is `DEFAULT_JUDGE`, the trained judge, or the overlap heuristic
(`FALLBACK_JUDGE`) where `make judge` has not built it. Notebook 00b measures
every judge on held-out FEVER pairs, the hand-checked credibility fixture and
359 hand-labelled key-fact pairs (the metrics' real input); the default is the
judge whose own decision agrees best with people on the last (F1 of "entailed"). Every result records the judge's name; local model folders
(the trained judge included) also enter cache keys by a hash of their files'
contents, so retraining never returns the old model's cached probabilities.

OverlapJudge: method and limits
-------------------------------
P(entailment) is the content-word recall of the hypothesis in the premise:
both texts are lowercased, tokenised into words and numbers, stopwords are
removed and words are crudely stemmed (possessive 's, plural s/es/ies,
-ed/-ing on long words); recall is the share of the hypothesis's content
words and numbers found in the premise. It is then multiplied down by
numbers (years included; "two" counts as 2) of the hypothesis missing from
the premise (x0.2 when all are missing) and by a negation mismatch (x0.3)
between the hypothesis and the premise sentence that overlaps it most.
Contradiction mass is the remaining (1 - P(entail)) times recall times a
conflict strength: a missing number where the premise states another number
of the same kind (year vs year), or a negation mismatch. Whatever is left is
neutral. It is deterministic and fast, but it is a lexical proxy, not
inference: it misses paraphrases and synonyms ("died" vs "passed away"),
ignores word order and roles ("A beat B" == "B beat A"), sees only explicit
negation words, and rewards premises that merely mention the same words.
Use it for plumbing and relative comparisons, never as a stand-in for the
paper's absolute TRUE-based numbers.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Protocol, Sequence

import numpy as np

from covlib.core import paths
from covlib.core.cache import Cache, fingerprint_dir, make_key
from covlib.core.records import text_list
from covlib.generation import load_lm

LABELS = ("entailment", "neutral", "contradiction")
TRAINED_JUDGE = "minilm-fever-nli"  # the cross-encoder `make judge` trains on FEVER (covlib.nli.pairs)
# The judge `judge=None` means offline: the one whose own entailment decision (`entailed`) best agrees with
# people on the hand-labelled key-fact pairs (F1 of "entailed", notebook 00b): the trained judge, 59.6 against
# the overlap heuristic's 46.3 (paired difference +13.3 [2.9, 23.1]); see the README's "The offline NLI judge".
DEFAULT_JUDGE = TRAINED_JUDGE
FALLBACK_JUDGE = "overlap"  # what judge=None gets where `make judge` has not built DEFAULT_JUDGE (a fresh clone, CI)
CACHE_TABLE = "nli"
CHUNK = 64  # pairs judged (and committed to the cache) per step


class Judge(Protocol):
    """What `probabilities` needs from a backend."""

    name: str

    @property
    def config(self) -> dict[str, Any]: ...

    def probabilities(self, premises: list[str], hypotheses: list[str]) -> np.ndarray: ...


# --------------------------------------------------------------------------- caching front end


def trained_judge_dir(name: str = TRAINED_JUDGE) -> Path:
    """Folder of a judge built by `make judge` (scripts/build_judge.py) under the models folder."""
    return paths.models_dir() / name


def offline_judge() -> str:
    """The judge `judge=None` means (smoke runs and grading too): DEFAULT_JUDGE once `make judge` built it, else
    FALLBACK_JUDGE. Every result and every credibility table names the judge that ran."""
    return DEFAULT_JUDGE if (trained_judge_dir(DEFAULT_JUDGE) / "config.json").is_file() else FALLBACK_JUDGE


def load_trained_judge(name: str = TRAINED_JUDGE, device: str | None = None, batch_size: int = 64) -> "HFNLIJudge":
    """The cross-encoder trained offline on FEVER by `make judge`, named `name` in every cache key and result."""
    folder = trained_judge_dir(name)
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(
            f"the trained NLI judge {name!r} is not built (no {folder / 'config.json'}): run `make judge` "
            "(about 25 min on a 2-core CPU), or pick another judge: 'overlap', 'llm', 'true' or an HF NLI model id"
        )
    threshold = _card_threshold(folder)
    return HFNLIJudge(folder, device=device, batch_size=batch_size, max_length=256, name=name, threshold=threshold)


def _card_threshold(folder: Path) -> float | None:
    """The decision threshold `make judge` calibrated and wrote to the judge's card.json (None: argmax)."""
    card = folder / "card.json"
    value = json.loads(card.read_text()).get("decision_threshold") if card.is_file() else None
    if value is not None and not (isinstance(value, (int, float)) and 0 < value < 1):
        raise ValueError(f"{card}: decision_threshold must be a number in (0, 1), got {value!r}")
    return None if value is None else float(value)


JUDGE_CHOICES = "'minilm-fever-nli' (after `make judge`), 'overlap', 'llm', 'llm:<model>', 'true', an HF NLI model id " \
    "'owner/name' or a local model folder"


def load_judge(spec: str) -> Judge:
    """A judge from a short spec: 'minilm-fever-nli' (trained), 'overlap', 'llm', 'llm:<model>', 'true', or an HF model id/dir."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"empty judge spec {spec!r}; choose {JUDGE_CHOICES}")
    spec = spec.strip()
    low = spec.lower()
    if low in (TRAINED_JUDGE, "trained"):
        return load_trained_judge()
    if spec and "/" not in spec and (trained_judge_dir(spec) / "card.json").is_file():
        return load_trained_judge(spec)  # any judge scripts/build_judge.py wrote under the models folder, by name
    if low in ("overlap", "approx", "approx-overlap"):
        return OverlapJudge()
    if low == "llm" or low.startswith("llm:"):
        model = spec.split(":", 1)[1] if ":" in spec else None
        return LLMJudge(load_lm(model or None))
    if low in ("true", "t5-true", "true-t5"):
        return TrueT5Judge()
    if Path(spec).expanduser().is_dir():
        return HFNLIJudge(str(Path(spec).expanduser()))
    if "/" in spec and paths.is_hub_id(spec):
        return HFNLIJudge(spec)
    if Path(spec).expanduser().exists():
        raise ValueError(f"judge spec {spec!r} is a file; a local judge is a model folder. Choose {JUDGE_CHOICES}")
    if "/" in spec or "\\" in spec or spec.startswith((".", "~")):
        raise FileNotFoundError(f"judge folder {spec!r} does not exist (and it is not a hub id `owner/name`)")
    raise ValueError(f"unknown judge {spec!r}; choose {JUDGE_CHOICES}")


def _load_error(model_id: str, err: Exception) -> RuntimeError:
    """A model that transformers could not load, explained."""
    return RuntimeError(f"could not load NLI model {model_id!r}: {paths.load_failure(model_id, err)}. "
                        f"Offline choices: {JUDGE_CHOICES}")


def get_judge(judge: Judge | str | None = None) -> Judge:
    """Resolve None (-> `offline_judge()`: DEFAULT_JUDGE, or FALLBACK_JUDGE until it is built), a spec, or a judge."""
    if judge is None:
        return load_judge(offline_judge())
    if isinstance(judge, str):
        return load_judge(judge)
    return judge


def _judge_config(judge: Judge) -> dict[str, Any]:
    return dict(getattr(judge, "config", {}) or {})


def _check_probs(probs: Any, n: int, judge: Judge) -> np.ndarray:
    probs = np.asarray(probs, dtype=float)
    if probs.shape != (n, 3) or not np.all(np.isfinite(probs)) or np.any(probs < -1e-6):
        raise ValueError(f"judge {judge.name!r} returned invalid probabilities of shape {probs.shape}")
    probs = np.clip(probs, 0.0, None)
    return probs / probs.sum(axis=1, keepdims=True)


EMPTY_PAIR = (0.0, 1.0, 0.0)  # what a pair with an empty premise or hypothesis is judged


def probabilities(
    premises: Sequence[str],
    hypotheses: Sequence[str],
    judge: Judge | str | None = None,
    progress: bool = True,
) -> np.ndarray:
    """(N, 3) array of P(entailment, neutral, contradiction), cached per (judge, pair)."""
    premises, hypotheses = text_list(premises, "premise", "probabilities()"), text_list(hypotheses, "hypothesis", "probabilities()")
    if len(premises) != len(hypotheses):
        raise ValueError(f"{len(premises)} premises but {len(hypotheses)} hypotheses")
    judge = get_judge(judge)
    config = _judge_config(judge)
    keys = [
        make_key(kind="nli", judge=judge.name, config=config, premise=p, hypothesis=h)
        for p, h in zip(premises, hypotheses)
    ]
    cache = Cache(table=CACHE_TABLE)
    found = cache.get_many(keys)
    todo: dict[str, tuple[str, str]] = {}
    for key, p, h in zip(keys, premises, hypotheses):
        if not p.strip() or not h.strip():
            found[key] = list(EMPTY_PAIR)  # nothing entails or is entailed by an empty text; the judge is not asked
        elif key not in found:
            todo.setdefault(key, (p, h))
    pending = list(todo.items())
    cache.require_writable(len(pending))
    starts = range(0, len(pending), CHUNK)
    if progress and len(pending) > CHUNK:
        try:
            from tqdm.auto import tqdm

            starts = tqdm(starts, desc=f"NLI ({judge.name})", unit="batch")
        except ImportError:
            pass
    for start in starts:
        chunk = pending[start : start + CHUNK]
        probs = _check_probs(judge.probabilities([p for _, (p, _) in chunk], [h for _, (_, h) in chunk]), len(chunk), judge)
        new = {key: [float(x) for x in row] for (key, _), row in zip(chunk, probs)}
        cache.put_many(new)
        found.update(new)
    cache.close()
    return np.array([found[k] for k in keys], dtype=float).reshape(len(keys), 3)


def entailment(
    premises: Sequence[str],
    hypotheses: Sequence[str],
    judge: Judge | str | None = None,
    progress: bool = True,
) -> np.ndarray:
    """P(entailment) in [0, 1] for each (premise, hypothesis) pair, batched and cached."""
    return probabilities(premises, hypotheses, judge=judge, progress=progress)[:, 0]


def two_label(judge: Judge) -> bool:
    """Whether the judge only tells entailment from not-entailment (TRUE, 2-label classifiers)."""
    return bool(getattr(judge, "two_label", False))


def entailed(probs: Any, judge: Judge | str | None = None) -> np.ndarray:
    """The judge's own entailment decision f in {0, 1} per row of `probabilities`' output.

    A three-way judge decides by its argmax label. A two-label judge (TRUE, the credibility
    paper's f) decides entailed when P(entailment) > 0.5, its own threshold: its
    not-entailment mass is spread over two columns, so an argmax would call p in (1/3, 0.5]
    entailed. A judge with a calibrated `threshold` (the trained judge's card.json, set by
    `make judge` on held-out pairs) decides entailed when P(entailment) > threshold.
    """
    probs = np.asarray(probs, dtype=float).reshape(-1, 3)
    if not len(probs):
        return np.zeros(0)
    judge = get_judge(judge)
    threshold = getattr(judge, "threshold", None)
    if threshold is not None:
        return (probs[:, 0] > threshold).astype(float)
    if two_label(judge):
        return (probs[:, 0] > 0.5).astype(float)
    return (probs.argmax(axis=1) == 0).astype(float)


def entailment_labels(
    premises: Sequence[str],
    hypotheses: Sequence[str],
    judge: Judge | str | None = None,
    progress: bool = True,
) -> list[str]:
    """Label ('entailment' / 'neutral' / 'contradiction') per pair: the argmax, or for a two-label judge
    'entailment' when P(entailment) > 0.5 and otherwise the larger of the other two."""
    judge = get_judge(judge)
    probs = probabilities(premises, hypotheses, judge=judge, progress=progress)
    decided = entailed(probs, judge)
    return ["entailment" if d else LABELS[1 + int(p[2] > p[1])] for d, p in zip(decided, probs)]


def evaluate(
    premises: Sequence[str],
    hypotheses: Sequence[str],
    gold: Sequence[str],
    judge: Judge | str | None = None,
    progress: bool = True,
) -> tuple[dict[str, Any], np.ndarray]:
    """(accuracy / macro-F1 / entailment AUC / n with the judge's name, the (N, 3) probabilities) on gold-labelled pairs."""
    judge = get_judge(judge)
    probs = probabilities(premises, hypotheses, judge=judge, progress=progress)
    return {"judge": judge.name, **nli_scores(gold, probs)}, probs


# --------------------------------------------------------------------------- Hugging Face classifiers


def _default_device(device: str | None) -> str:
    if device:
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


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


def _three_way(probs: np.ndarray, mapping: dict[int, str]) -> np.ndarray:
    """Class probabilities -> (entailment, neutral, contradiction); not_entailment splits 50/50."""
    out = np.zeros((probs.shape[0], 3))
    for idx, label in mapping.items():
        if label == "not_entailment":
            out[:, 1] += probs[:, idx] / 2
            out[:, 2] += probs[:, idx] / 2
        else:
            out[:, LABELS.index(label)] += probs[:, idx]
    return out


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
        """What, besides the name, changes the output."""
        return {"max_length": self.max_length, "labels": self.labels, "files": fingerprint_dir(self.model_id)}

    def _load(self) -> None:
        if self._model is not None:
            return
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.device = _default_device(self.device)
        try:
            self._tokenizer = AutoTokenizer.from_pretrained(self.model_id)
            model = AutoModelForSequenceClassification.from_pretrained(self.model_id)
        except (OSError, ValueError) as err:
            raise _load_error(self.model_id, err) from err
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
        order = sorted(range(len(premises)), key=lambda i: len(premises[i]) + len(hypotheses[i]))
        probs = np.zeros((len(premises), len(self._mapping)))
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
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
        return _three_way(probs, self._mapping)


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
        return {"max_length": self.max_length, "dtype": self.dtype, "files": fingerprint_dir(self.model_id)}

    def _load(self) -> None:
        if self._model is not None:
            return
        import torch
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        self.device = _default_device(self.device)
        kwargs = {"dtype": getattr(torch, self.dtype)} if self.dtype else {}
        try:
            self._tokenizer = AutoTokenizer.from_pretrained(self.model_id)
            self._model = AutoModelForSeq2SeqLM.from_pretrained(self.model_id, **kwargs).to(self.device).eval()
        except (OSError, ValueError) as err:
            raise _load_error(self.model_id, err) from err
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


# --------------------------------------------------------------------------- approximate lexical judge

STOPWORDS = frozenset(
    """a an the and or but if then than so as of at by for from in into on onto to with within about above
    after again against before below between during over under up down out off through via per
    is are was were be been being am has have had having do does did doing will would shall should can
    could may might must it its itself this that these those there here which who whom whose what when
    where why how i me my we our ours you your yours he him his she her hers they them their theirs
    one's also too very just only such same other another any all both each few more most some own
    s t d ll m re ve y o""".split()
)
NEGATIONS = frozenset("not no never none nobody nothing neither nor without cannot nowhere".split())
WORD_NUMBERS = {
    w: str(i)
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen twenty".split()
    )
}
_TOKEN = re.compile(r"\d+(?:[.,]\d+)*|[a-z]+(?:'[a-z]+)?")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


def _stem(word: str) -> str:
    for suffix in ("'s", "'"):
        if word.endswith(suffix):
            word = word[: -len(suffix)]
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 5 and word.endswith("ied"):
        return word[:-3] + "y"
    if len(word) > 5 and word.endswith(("sses", "shes", "ches", "xes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    if len(word) > 6 and word.endswith("ing"):
        return word[:-3]
    if len(word) > 5 and word.endswith("ed"):
        return word[:-2]
    return word


def _analyse(text: str) -> tuple[set[str], set[str], bool]:
    """(content word stems, normalised numbers, has negation) of a text."""
    words: set[str] = set()
    numbers: set[str] = set()
    negated = False
    for tok in _TOKEN.findall(text.lower()):
        if tok[0].isdigit():
            numbers.add(tok.replace(",", ""))
        elif tok in WORD_NUMBERS:
            numbers.add(WORD_NUMBERS[tok])
        elif tok in NEGATIONS or tok.endswith("n't"):
            negated = True
        elif tok not in STOPWORDS:
            words.add(_stem(tok))
    return words, numbers, negated


def _is_year(number: str) -> bool:
    return len(number) == 4 and number.isdigit() and 1000 <= int(number) <= 2100


def _best_sentence_negated(premise: str, content: set[str]) -> bool:
    """Whether the premise sentence sharing most content with the hypothesis has a negation."""
    best, best_overlap = False, -1
    for sentence in _SENTENCE.split(premise):
        words, numbers, negated = _analyse(sentence)
        overlap = len(content & (words | numbers))
        if sentence.strip() and overlap > best_overlap:
            best, best_overlap = negated, overlap
    return best


class OverlapJudge:
    """APPROXIMATE, not NLI: content-word recall with number and negation penalties (see module docstring)."""

    name = "approx-overlap (not NLI)"

    def __init__(self, number_penalty: float = 0.8, negation_factor: float = 0.3, conflict_strength: float = 0.8):
        self.number_penalty = number_penalty
        self.negation_factor = negation_factor
        self.conflict_strength = conflict_strength

    @property
    def config(self) -> dict[str, Any]:
        """Version and weights of the heuristic (bump version when the method changes)."""
        return {
            "version": 2,  # 2: a hypothesis with no content word is neutral (was uniform, argmax "entailment")
            "number_penalty": self.number_penalty,
            "negation_factor": self.negation_factor,
            "conflict_strength": self.conflict_strength,
        }

    def score_pair(self, premise: str, hypothesis: str) -> tuple[float, float, float]:
        """(entailment, neutral, contradiction) for one pair."""
        h_words, h_nums, h_neg = _analyse(hypothesis)
        if not h_words and not h_nums:
            return EMPTY_PAIR  # nothing to check ("It is."): neutral, never an argmax "entailment"
        p_words, p_nums, _ = _analyse(premise)
        content = h_words | h_nums
        recall = len(content & (p_words | p_nums)) / len(content)

        missing = h_nums - p_nums
        miss_frac = len(missing) / len(h_nums) if h_nums else 0.0
        conflicts = [n for n in missing if any(_is_year(n) == _is_year(m) for m in p_nums)]
        conflict_frac = len(conflicts) / len(h_nums) if h_nums else 0.0

        negation_mismatch = h_neg != _best_sentence_negated(premise, content)

        entail = recall * (1 - self.number_penalty * miss_frac)
        if negation_mismatch:
            entail *= self.negation_factor
        strength = min(1.0, self.conflict_strength * (conflict_frac + float(negation_mismatch)))
        contra = (1 - entail) * recall * strength
        return (entail, 1 - entail - contra, contra)

    def probabilities(self, premises: list[str], hypotheses: list[str]) -> np.ndarray:
        """(N, 3) heuristic probabilities."""
        rows = [self.score_pair(p, h) for p, h in zip(premises, hypotheses)]
        return np.array(rows, dtype=float).reshape(len(rows), 3)


def nli_scores(gold: Sequence[str], probs: Any) -> dict[str, float]:
    """3-way accuracy and macro-F1 of argmax labels, and AUC of P(entailment) for gold == entailment."""
    from sklearn.metrics import accuracy_score, f1_score as sk_f1, roc_auc_score

    probs = np.asarray(probs, dtype=float)
    gold = list(gold)
    if probs.shape != (len(gold), 3):
        raise ValueError(f"probabilities of shape {probs.shape} for {len(gold)} gold labels; expected ({len(gold)}, 3)")
    unknown = sorted(set(gold) - set(LABELS))
    if unknown:
        raise ValueError(f"gold labels {unknown} are not among {LABELS}")
    pred = [LABELS[i] for i in probs.argmax(axis=1)]
    is_entail = [g == "entailment" for g in gold]
    auc = roc_auc_score(is_entail, probs[:, 0]) if 0 < sum(is_entail) < len(gold) else float("nan")
    return {
        "accuracy": float(accuracy_score(gold, pred)),
        "macro_f1": float(sk_f1(gold, pred, labels=list(LABELS), average="macro", zero_division=0)),
        "entail_auc": float(auc),
        "n": len(gold),
    }


def nli_confusion(gold: Sequence[str], probs: Any) -> np.ndarray:
    """3x3 counts: rows gold, columns argmax prediction, both in (entailment, neutral, contradiction) order."""
    from sklearn.metrics import confusion_matrix

    pred = [LABELS[i] for i in np.asarray(probs).argmax(axis=1)]
    return confusion_matrix(list(gold), pred, labels=list(LABELS))
