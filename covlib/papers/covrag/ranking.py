"""CoV-RAG's LLM-as-judge ranking (Table 3, Table 16): the ranking prompts, the judge's ranks parsed, and mean ranks.

Per question the systems' answers are shown in a seeded random order (`rank_answers`), the
judge's scores turned into ranks (`parse_ranking`) and mapped back; Table 3's mean rank per
system and criterion is `mean_ranks`, the per-question ranks behind it `rank_values`. `rank_answers` returns a
`Ranking`: the ranks, and the prompts, raw outputs and settings its trace is written from (`trace.write`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from covlib.core.records import Passage
from covlib.core.references import format_references
from covlib.generation import Generator
from covlib.papers.covrag.prompts import REFERENCE_TEMPLATE, SEP


RANK_CRITERIA = ("Citation Accuracy", "Correctness", "Truthfulness", "Conciseness")
CITATION_RANK_TEMPLATE = SEP.join([
    "Criteria Details For Answers include:",
    "Citation Accuracy(0,1): Evaluating whether the reference marks in the answer are accurate.",
    "<inputs>",
    "Now you are a reading comprehension examiner who should do things as below:",
    "1. Score the answer based on the evaluation criteria.",
    "2. Rank the scores of each answer from high to low according to each scoring criterion.",
    "3. Briefly state the reason for your Rank.",
    'Output format example:{ "rank_result": {"Citation Accuracy": [("answer3", 0.77), ("answer1",0.53), '
    '("answer2", 0.12)]}, "rank_reason": "The reason for this ranking." }',
])
OTHERS_RANK_TEMPLATE = SEP.join([
    "Criteria Details For Answers include:",
    "Correctness(0,1): Evaluating whether the question is correctly answered, you can refer to the golden label of "
    "the question below when evaluating",
    "Truthfulness(0,1): Evaluating whether the text itself violates common sense, logic or contains contradictions.",
    "Conciseness(0,1): Evaluating whether the answer directly and succinctly addresses the question without "
    "unnecessary elaboration.",
    "<inputs>",
    "Now you are a reading comprehension examiner who should do things as below:",
    "1. Score the answer based on the provided evaluation criteria.",
    "2. Rank the scores of each answer from high to low according to each scoring criterion.",
    "3. Briefly state the reason for your Rank.",
    'Output format example:{ "rank_result": {"Correctness": [("answer4", 0.77), ("answer1", 0.53), ("answer3", 0.37), '
    '("answer2", 0.12)], "Truthfulness": [("answer3", 0.92), ("answer4", 0.41), ("answer2", 0.22), ("answer1", 0.02)], '
    '"Conciseness":[("answer4", 0.69), ("answer3", 0.51), ("answer1", 0.2), ("answer2", 0.1)]}, "rank_reason": '
    '"The reason for this ranking." }',
])  # Table 16 is cut off after '("an-'; the last pair and the closing text are ours, copied from the Citation prompt


def ranking_prompt(kind: str, question: str, answers: Sequence[str], references: Sequence[Passage] = (),
                   gold: Sequence[str] = ()) -> str:
    """Table 16's prompt: kind "citation" (question, references, answers) or "others" (question, golden label, answers)."""
    slots = [f'"answer{i}": {a.strip()}' for i, a in enumerate(answers, 1)]
    if kind == "citation":
        refs = format_references(references, template=REFERENCE_TEMPLATE, sep=SEP)
        inputs = "{ " + ", ".join([f'"question": {question.strip()}', f'"reference": {refs}', *slots]) + " }"
        return CITATION_RANK_TEMPLATE.replace("<inputs>", inputs)
    if kind == "others":
        inputs = "{ " + ", ".join([f'"question": {question.strip()}', f'"golden label": {json.dumps(list(gold))}',
                                   *slots]) + " }"
        return OTHERS_RANK_TEMPLATE.replace("<inputs>", inputs)
    raise ValueError(f"ranking prompt kind must be 'citation' or 'others', not {kind!r}")


_RANK_ITEM = re.compile(r"""["']?answer\s*(\d+)["']?\s*,\s*(-?\d+(?:\.\d+)?)""", re.I)


def parse_ranking(text: str, criteria: Sequence[str], n_answers: int) -> dict[str, list[int] | None]:
    """Per criterion, the answers' ranks (1 = best) from the judge's scores, tied scores sharing the best rank
    ("1, 2, 2, 4": ours, the paper does not say how it ranked ties); None when the judge's list for that criterion
    is missing or does not score every answer exactly once. Lists may be of tuples or JSON arrays."""
    out: dict[str, list[int] | None] = {}
    for criterion in criteria:
        out[criterion] = None
        m = re.search(rf"""["']?{re.escape(criterion)}["']?\s*[:;]\s*\[""", text or "", re.I)
        if not m:
            continue
        depth, end = 0, None
        for i in range(m.end() - 1, len(text)):
            depth += {"[": 1, "]": -1}.get(text[i], 0)
            if depth == 0:
                end = i
                break
        items = [(int(a), float(x)) for a, x in _RANK_ITEM.findall(text[m.end():end if end is not None else None])]
        if end is None or sorted(a for a, _ in items) != list(range(1, n_answers + 1)):
            continue
        out[criterion] = [0] * n_answers
        for answer, score in items:
            out[criterion][answer - 1] = 1 + sum(other > score for _, other in items)
    return out


def mean_ranks(rankings: Sequence[dict[str, list[int] | None]], systems: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Table 3: rank = Σ x_i / N per system and criterion over the questions the judge ranked completely (N kept)."""
    out: dict[str, dict[str, Any]] = {}
    criteria = sorted({c for r in rankings for c in r})
    for c in criteria:
        ranked = [r[c] for r in rankings if r.get(c)]
        out[c] = {"n": len(ranked), "unparsed": sum(1 for r in rankings if c in r and not r[c])}
        for j, system in enumerate(systems):
            out[c][system] = sum(r[j] for r in ranked) / len(ranked) if ranked else None
    return out


def rank_values(rankings: Sequence[dict[str, list[int] | None]],
                systems: Sequence[str]) -> dict[str, dict[str, list[int]]]:
    """Per criterion and system, its rank on each question the judge ranked completely (their mean is `mean_ranks`)."""
    criteria = sorted({c for r in rankings for c in r})
    return {c: {s: [r[c][j] for r in rankings if r.get(c)] for j, s in enumerate(systems)} for c in criteria}


@dataclass(eq=False, repr=False)
class Ranking(list):
    """What `rank_answers` returns: per question, each criterion's ranks in the systems' order (None: not parsed), a
    list; and how they came about: the judge, the prompts as shown (answers in `orders`), its raw outputs, the ranks
    as it gave them (`shown_ranks`, by position shown) and the decoding settings (what `trace.write` records)."""

    judge: Generator
    kind: str  # Table 16's prompt: "citation" or "others"
    systems: list[str]
    criteria: list[str]
    questions: list[str]
    golds: list[list[str]] | None
    seed: int
    max_new_tokens: int
    chat: bool
    prompts: list[str]
    orders: list[list[int]]  # per question, the systems' indices in the order their answers were shown
    shown: list[list[str]]  # per question, the answers as shown
    raw: list[str] = field(default_factory=list)  # per question, the judge's output
    shown_ranks: list[dict[str, list[int] | None]] = field(default_factory=list)  # per question, ranks by position

    @property
    def decoding(self) -> dict[str, Any]:
        """The judging call's settings that enter its cache key."""
        return {"max_new_tokens": self.max_new_tokens, "chat": self.chat}


def rank_answers(judge: Generator, kind: str, questions: Sequence[str], answers: dict[str, Sequence[str]],
                 criteria: Sequence[str], references: Sequence[Sequence[Passage]] = (),
                 golds: Sequence[Sequence[str]] = (), seed: int = 0, max_new_tokens: int = 160,
                 chat: bool = True) -> Ranking:
    """Table 3's judging: per question, the systems' answers in a seeded random order (no position bias) in one
    batched call; the judge's ranks mapped back to the systems' order of `answers` (a `Ranking`: its trace is
    `trace.write`'s)."""
    import random

    systems = list(answers)
    prompts, orders, shown_answers = [], [], []
    for i, q in enumerate(questions):
        order = list(range(len(systems)))
        random.Random(f"{seed}:{i}:{q}").shuffle(order)
        orders.append(order)
        shown_answers.append([answers[systems[j]][i] for j in order])
        prompts.append(ranking_prompt(kind, q, shown_answers[-1], references[i] if references else (),
                                      golds[i] if golds else ()))
    ranked = Ranking(judge=judge, kind=kind, systems=systems, criteria=list(criteria), questions=list(questions),
                     golds=[list(g) for g in golds] if golds else None, seed=seed, max_new_tokens=max_new_tokens,
                     chat=chat, prompts=prompts, orders=orders, shown=shown_answers)
    outs = judge.generate(prompts, **ranked.decoding, desc=f"judge ({kind})")
    for order, out in zip(orders, outs):
        shown_ranks = parse_ranking(out[0].text, criteria, len(systems))
        back: dict[str, list[int] | None] = {}
        for criterion, ranks in shown_ranks.items():
            if ranks is None:
                back[criterion] = None
                continue
            per_system = [0] * len(systems)
            for position, system_index in enumerate(order):
                per_system[system_index] = ranks[position]
            back[criterion] = per_system
        ranked.append(back)
        ranked.raw.append(out[0].text)
        ranked.shown_ranks.append(shown_ranks)
    return ranked
