"""Answers: one batched generation per reference set and model, scored with the §4 metrics.

The methods return what their traces need (`credibility.trace.write` turns it into the trace files): `Answers` carry
each answer's prompt, the generator and its decoding; `Scores` carry the answers they scored, the key facts, the
judge and every NLI verdict.
"""

from __future__ import annotations

from typing import Any, Sequence

from covlib import nli
from covlib.core.records import Example
from covlib.generation import Generator

from covlib.papers.credibility.key_facts import KeyFacts
from covlib.papers.credibility.metrics import score_details
from covlib.papers.credibility.prompts import answer_prompt
from covlib.papers.credibility.references import ReferenceSet


# --------------------------------------------------------------------------- answers


class Answers(list):
    """Cited answers, one text per question (a list of str), and what made them: the questions, the reference sets
    they were written from, the prompts sent, the generator and its `decoding` (the settings that enter the cache
    key: `max_new_tokens`, greedy, through the chat template)."""

    def __init__(self, texts: Sequence[str], generator: Generator, examples: Sequence[Example],
                 ref_sets: Sequence[ReferenceSet], prompts: Sequence[str], decoding: dict[str, Any]) -> None:
        super().__init__(texts)
        if not len(self) == len(examples) == len(ref_sets) == len(prompts):
            raise ValueError(f"{len(self)} answers, {len(examples)} questions, {len(ref_sets)} reference sets and "
                             f"{len(prompts)} prompts: they must line up")
        self.generator = generator
        self.examples = list(examples)
        self.ref_sets = list(ref_sets)
        self.prompts = list(prompts)
        self.decoding = dict(decoding)

    @property
    def model(self) -> str:
        """The generator's name."""
        return getattr(self.generator, "name", type(self.generator).__name__)

    def part(self, start: int, stop: int) -> "Answers":
        """The answers start..stop with what made them (a slice of a list subclass would drop it)."""
        return type(self)(self[start:stop], self.generator, self.examples[start:stop], self.ref_sets[start:stop],
                          self.prompts[start:stop], self.decoding)


class Reflection(Answers):
    """Answers to prompts that let the model refuse when the references are insufficient (self-reflection, §5.1):
    traced as a self-reflection run (refused or not, against whether a gold reference is missing)."""


def generate_answers(generator: Generator, examples: Sequence[Example], ref_sets: Sequence[ReferenceSet],
                     reflection: bool = False, max_new_tokens: int = 160, progress: bool = True,
                     desc: str = "answers") -> Answers:
    """One greedy cited answer per (question, reference set), through the chat template, in one batched call.

    With `reflection` the prompt lets the model refuse and the answers are a `Reflection`. The result is a list of
    the answer texts that also carries the prompts and decoding (`credibility.trace.write` traces a `Reflection`;
    other answers are traced when `score_runs` scores them).
    """
    if len(examples) != len(ref_sets):
        raise ValueError(f"{len(examples)} questions but {len(ref_sets)} reference sets")
    for ex, refs in zip(examples, ref_sets):
        if ex.id != refs.question_id:
            raise ValueError(f"reference set of {refs.question_id!r} given for question {ex.id!r}")
    prompts = [answer_prompt(ex.question, refs.paragraphs, reflection) for ex, refs in zip(examples, ref_sets)]
    decoding = {"max_new_tokens": max_new_tokens, "chat": True}
    out = generator.generate(prompts, **decoding, progress=progress, desc=desc)
    kind = Reflection if reflection else Answers
    return kind([c[0].text.strip() for c in out], generator, examples, ref_sets, prompts, decoding)


Run = tuple[list[str], list[ReferenceSet]]  # answers (an `Answers`, with their prompts) and their reference sets


def answer_runs(generators: Sequence[Generator], examples: Sequence[Example], sets: dict[str, list[ReferenceSet]],
                max_new_tokens: int = 160, progress: bool = True) -> dict[tuple[str, str], Run]:
    """Answers for every (model, setting): one batched generate call per model over all settings."""
    settings = list(sets)
    flat_sets = [r for s in settings for r in sets[s]]
    q = len(examples)
    out = {}
    for g in generators:
        answers = generate_answers(g, list(examples) * len(settings), flat_sets, max_new_tokens=max_new_tokens,
                                   progress=progress, desc=g.name)
        for j, s in enumerate(settings):
            out[(g.name, s)] = (answers.part(j * q, (j + 1) * q), sets[s])
    return out


class Scores(dict):
    """Per-answer metrics by (model, setting) (a dict of row lists), and what they were computed from: the runs,
    questions and key facts, the judge, and per answer the NLI pairs judged by metric (`details`, see
    `metrics.score_details`); `credibility.trace.write` writes one cited-answer run per (model, setting)."""

    def __init__(self, rows: dict[tuple[str, str], list[dict[str, Any]]], runs: dict[tuple[str, str], Run],
                 examples: Sequence[Example], facts: Sequence[KeyFacts], judge: nli.Judge,
                 details: dict[tuple[str, str], list[dict[str, list]]]) -> None:
        super().__init__(rows)
        self.runs = dict(runs)
        self.examples = list(examples)
        self.facts = list(facts)
        self.judge = judge
        self.details = details


def score_runs(runs: dict[tuple[str, str], Run], examples: Sequence[Example], facts: Sequence[KeyFacts],
               judge: nli.Judge | str | None = None, progress: bool = True) -> Scores:
    """Per-answer metrics for every run at once: three NLI calls in all (see `score_answers`); the result also
    carries the NLI verdicts behind them, for the trace."""
    keys, q = list(runs), len(examples)
    for key in keys:
        if len(runs[key][0]) != q or len(runs[key][1]) != q:
            raise ValueError(f"run {key} has {len(runs[key][0])} answers for {q} questions")
    judge = nli.get_judge(judge)
    rows, details = score_details([a for k in keys for a in runs[k][0]], [r for k in keys for r in runs[k][1]],
                                  list(facts) * len(keys), [ex.answers for ex in examples] * len(keys), judge, progress)
    return Scores({k: rows[i * q:(i + 1) * q] for i, k in enumerate(keys)}, runs, examples, facts, judge,
                  {k: details[i * q:(i + 1) * q] for i, k in enumerate(keys)})
