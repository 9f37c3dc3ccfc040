"""Answers: one batched generation per reference set and model, scored with the §4 metrics."""

from __future__ import annotations

from typing import Any, Sequence


from covlib import nli
from covlib.core import traces
from covlib.core.records import Example
from covlib.generation import Generator

import covlib.papers.credibility.trace as trace
from covlib.papers.credibility.key_facts import KeyFacts
from covlib.papers.credibility.metrics import score_answers, score_details
from covlib.papers.credibility.prompts import answer_prompt
from covlib.papers.credibility.references import ReferenceSet


# --------------------------------------------------------------------------- answers


def generate_answers(generator: Generator, examples: Sequence[Example], ref_sets: Sequence[ReferenceSet],
                     reflection: bool = False, max_new_tokens: int = 160, progress: bool = True,
                     desc: str = "answers") -> list[str]:
    """One greedy cited answer per (question, reference set), through the chat template, in one batched call
    (with `reflection`, a traced self-reflection run: refused or not, against whether a gold reference is missing)."""
    answers, prompts = answer_batch(generator, examples, ref_sets, reflection, max_new_tokens, progress, desc)
    if reflection and traces.active():
        trace.write_reflection_run(generator, examples, ref_sets, prompts, answers, max_new_tokens)
    return answers


def answer_batch(generator: Generator, examples: Sequence[Example], ref_sets: Sequence[ReferenceSet],
                 reflection: bool = False, max_new_tokens: int = 160, progress: bool = True,
                 desc: str = "answers") -> tuple[list[str], list[str]]:
    """`generate_answers`' answers and the prompts they answer (untraced; kept for a later scored run's trace)."""
    if len(examples) != len(ref_sets):
        raise ValueError(f"{len(examples)} questions but {len(ref_sets)} reference sets")
    for ex, refs in zip(examples, ref_sets):
        if ex.id != refs.question_id:
            raise ValueError(f"reference set of {refs.question_id!r} given for question {ex.id!r}")
    prompts = [answer_prompt(ex.question, refs.paragraphs, reflection) for ex, refs in zip(examples, ref_sets)]
    out = generator.generate(prompts, max_new_tokens=max_new_tokens, chat=True, progress=progress, desc=desc)
    answers = [c[0].text.strip() for c in out]
    trace.remember(generator, examples, ref_sets, prompts, answers, max_new_tokens)
    return answers, prompts


Run = tuple[list[str], list[ReferenceSet]]  # answers and the reference sets they were written from


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
            out[(g.name, s)] = (answers[j * q:(j + 1) * q], sets[s])
    return out


def score_runs(runs: dict[tuple[str, str], Run], examples: Sequence[Example], facts: Sequence[KeyFacts],
               judge: nli.Judge | str | None = None, progress: bool = True) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Per-answer metrics for every run at once: three NLI calls in all (see `score_answers`)."""
    keys, q = list(runs), len(examples)
    for key in keys:
        if len(runs[key][0]) != q or len(runs[key][1]) != q:
            raise ValueError(f"run {key} has {len(runs[key][0])} answers for {q} questions")
    inputs = ([a for k in keys for a in runs[k][0]], [r for k in keys for r in runs[k][1]], list(facts) * len(keys),
              [ex.answers for ex in examples] * len(keys))
    if not traces.active():
        rows = score_answers(*inputs, judge, progress)
        return {k: rows[i * q:(i + 1) * q] for i, k in enumerate(keys)}
    judge = nli.get_judge(judge)
    rows, details = score_details(*inputs, judge, progress)
    for i, (model, setting) in enumerate(keys):  # one trace per (model, reference set)
        part = slice(i * q, (i + 1) * q)
        trace.write_answer_run(model, setting, runs[(model, setting)][0], runs[(model, setting)][1], examples, facts,
                               rows[part], details[part], judge)
    return {k: rows[i * q:(i + 1) * q] for i, k in enumerate(keys)}
