"""Reading an answer out of a completion (after "The answer is"), and scoring it against the gold answers."""

from __future__ import annotations

import re
from typing import Sequence

from covlib.core.metrics import exact_match, normalize_answer, normalize_fever_label
from covlib.core.records import Example
from covlib.core.text import split_sentences


DATASETS = ("hotpotqa", "2wikimultihop", "fever")


ANSWER_MARKER = "The answer is"


def check_dataset(dataset: str) -> str:
    """The dataset name if it has prompts here ("adv_hotpotqa" is accepted for "hotpotqa")."""
    dataset = "hotpotqa" if dataset == "adv_hotpotqa" else dataset
    if dataset not in DATASETS:
        raise ValueError(f"no prompts for dataset {dataset!r}; choose one of {DATASETS}")
    return dataset


_MARKER = re.compile(re.escape(ANSWER_MARKER), re.IGNORECASE)


_QUOTES = "\"'“”‘’`"


def clean_answer(answer: str) -> str:
    """First line, first sentence, without surrounding spaces, quotes or trailing periods."""
    line = answer.strip().split("\n", 1)[0].strip()
    sentences = split_sentences(line)
    first = sentences[0] if sentences else line
    return first.strip().strip(_QUOTES).strip().rstrip(".").strip().strip(_QUOTES).strip()


def split_cot(text: str) -> tuple[str, str | None, int]:
    """(rationale, raw answer or None, index just after the marker or -1) of a CoT completion."""
    match = _MARKER.search(text)
    if match is None:
        return text.strip(), None, -1
    raw = clean_answer(text[match.end():])
    return text[: match.start()].strip(), (raw or None), match.end()


def finish_answer(raw: str | None, dataset: str) -> str | None:
    if raw is None:
        return None
    if dataset == "fever":
        return normalize_fever_label(raw)
    return raw if normalize_answer(raw) else None


def parse_answer(text: str, dataset: str = "hotpotqa", marker: bool = True) -> str | None:
    """The answer after the first "The answer is" (None when absent: a failed parse); FEVER: the label.

    With `marker=False` (standard prompts) the first line is the answer, or what follows the
    marker when the model wrote one anyway.
    """
    dataset = check_dataset(dataset)
    _, raw, _ = split_cot(text)
    if raw is None and not marker:
        raw = clean_answer(text) or None
    return finish_answer(raw, dataset)


def answer_key(answer: str | None, dataset: str) -> str | None:
    """What answers are compared by: the FEVER label, else `metrics.normalize_answer`."""
    if answer is None:
        return None
    if check_dataset(dataset) == "fever":
        return normalize_fever_label(answer)
    return normalize_answer(answer) or None


def answer_score(prediction: str, gold: Sequence[str], dataset: str) -> float:
    """1.0 for an exact match with any gold alias (FEVER: the right label), else 0.0; an empty prediction is wrong."""
    if not prediction:
        return 0.0
    if check_dataset(dataset) == "fever":
        return float(normalize_fever_label(prediction) == normalize_fever_label(gold[0]))
    return exact_match(prediction, gold)


def gold_answers(example: Example, dataset: str) -> list[str]:
    """Gold aliases of an example ([label] for FEVER)."""
    return [example.label or ""] if check_dataset(dataset) == "fever" else list(example.answers)


ALIAS_MODES = ("all", "first")


def rescore(records: Sequence, aliases: str = "first") -> list[float]:
    """Per-question correctness (0/1) of each record's prediction against its gold aliases.

    `aliases="all"`: any alias counts (what `answer_score` stored); `"first"`: only the first gold
    answer (one string, as the official code compares; see the module doc for 2Wiki's alias
    order). `records` are `PromptResult`s or
    `verify_edit.VERecord`s (anything with `prediction`, `gold` and `dataset`); FEVER labels
    have one gold, so both modes agree there.
    """
    if aliases not in ALIAS_MODES:
        raise ValueError(f"aliases must be one of {ALIAS_MODES}, not {aliases!r}")
    out = []
    for r in records:
        gold = list(r.gold) if aliases == "all" else list(r.gold[:1])
        out.append(answer_score(r.prediction, gold, r.dataset) if gold else 0.0)
    return out
