"""Verify-and-Edit (Zhao et al., ACL 2023), Algorithm 1, batched across examples and sentences.

For every CoT-SC result whose consistency is below the threshold (default ceil(n/2), on the
[0, n] scale of `covlib.papers.verify_edit.cot`):

1. split r*, the chosen path's rationale, into sentences: at the "First, / Second, / Third, /
   Fourth," markers when present (the official `rationale_tokenize`, markers dropped), else
   with `data.split_sentences`;
2. generate one verifying question per sentence (2-shot prompt of Appendix C.x.3, input =
   original question + rationale sentence, greedy); an empty question falls back to the sentence;
3. retrieve sentences for each verifying question from a `Knowledge` source and keep the top 3
   most similar to the question (`retrieval.top_sentences_batch`, embedded MiniLM);
4. generate the verifying answer from those sentences (Appendix C.x.4, greedy, first line; a
   trailing ".." copied from the HotpotQA shots, which the official prompt prints as "1991..",
   becomes ".");
5. rebuild the rationale from the verifying answers, "First, {a1} Second, {a2} ..." (the
   official `answer_again.rationale`), and answer again with the CoT prompt ending
   "A: {edited rationale} The answer is" (greedy). An empty re-answer keeps the old prediction
   (counted in `reanswer_failed`).

At or above the threshold the CoT-SC prediction stays. Each step is ONE `lm.generate` call
over all examples and sentences (plus one `lm.score` call for the new answers' log-probs).

Verifying-answer shots follow Appendix C and the official code: 3 for HotpotQA (the first 3
few-shot questions with their 4 paragraphs and hand-written full-sentence answers,
manual_answer.txt), 3 fixed contexts for 2WikiMultihop, 2 for FEVER; §4's "same number of
examples as answer generation" does not match those prompts. The 2Wiki prompt's typo
"\\Answer:" is written "Answer:".

Threshold ablation: `compute_edits(..., max_threshold=t_max)` edits every example below t_max
once (an edit does not depend on the threshold); `apply_threshold(results, edits, t)` then picks
edited vs original per example, so a sweep over 0..n costs one pass (`sweep_thresholds`,
`correctness_by_threshold`).

Confidence for the accuracy-coverage AUC (`VERecord.confidence`, on [0, n]): an unedited
example keeps its consistency score; an edited one gets n * P(new answer), the probability of
" {answer}." after "... The answer is" given the edited rationale. The official code ranks
all examples by the answer span's log-prob instead (kept as `VERecord.answer_logprob`: the
CoT-SC chosen path's for unedited, the re-answer's for edited).

`compute_edits` returns `Edits` ({example id: `Edit`}) whose `steps` (`EditSteps`) hold the call's
settings and each batched step's prompts, decoding, retrieved sentences and score call;
`verify_and_edit` a `VERecords` list with those `edits`. Neither writes a trace:
`verify_edit.trace.write(tracer, result)` writes one from what they return.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from covlib.core.metrics import accuracy_coverage_auc
from covlib.core.records import Example
from covlib.core.stats import bootstrap, mean_interval
from covlib.papers.verify_edit.cot import (CONSISTENCY_KINDS, NUM_SHOTS, PromptResult, answer_score, check_dataset,
                                           clean_answer, consistency_of, cot_prompt, fewshot_examples, parse_answer)
from covlib.papers.verify_edit.knowledge import Knowledge
from covlib.papers.verify_edit.prompts import (REANSWER_STOP, VA_STOP, VQ_STOP, join_rationale, split_rationale,
                                               verifying_answer_header, verifying_answer_prompt,
                                               verifying_question_prompt)
from covlib.retrieval import top_sentences_batch


# --------------------------------------------------------------------------- what an edit run returns


@dataclass
class Edit:
    """The verify-and-edit outcome for one example (independent of the threshold)."""

    id: str
    original_rationale: str
    sentences: list[str]
    verifying_questions: list[str]
    retrieved: list[list[str]]  # top sentences per verifying question
    verifying_answers: list[str]
    edited_rationale: str
    text: str  # the re-answer completion after "The answer is"
    answer: str | None  # parsed new answer (None: empty re-answer)
    answer_logprob: float  # log P(" {answer}." | ..., "The answer is"); -inf when None
    prompt: str = field(default="", repr=False)


@dataclass
class EditSteps:
    """What one `compute_edits` / `verify_and_edit` call did: its settings, and each batched step's inputs and
    outputs. A unit is one rationale sentence of one edited example (units of examples without a sentence, whose
    verifying question is the question itself, come last); edited examples are in `results` order."""

    lm: Any = field(repr=False)  # the generator (its name and cache keys)
    method: str  # "compute_edits" (the edits of a threshold sweep) or "verify_edit" (one threshold)
    dataset: str
    knowledge: Knowledge
    results: list[PromptResult] = field(repr=False)  # the CoT-SC results, every one, in order
    consistency: str
    threshold: float  # edited: consistency < threshold (compute_edits: its max_threshold)
    n: int
    shots: int
    top_k: int
    vq_max_new_tokens: int
    va_max_new_tokens: int
    answer_max_new_tokens: int
    per_example: list[list[int]] = field(default_factory=list)  # each edited example's units
    questions: list[str] = field(default_factory=list)  # the verifying question of each unit
    vq_prompts: list[str] = field(default_factory=list, repr=False)  # units with a sentence
    vq_decoding: dict = field(default_factory=dict)
    found: list[list[str]] = field(default_factory=list, repr=False)  # retrieved sentences per unit
    ranked: list[list[tuple[str, float]]] = field(default_factory=list, repr=False)  # top_k and their similarity
    va_prompts: list[str] = field(default_factory=list, repr=False)  # per unit
    va_decoding: dict = field(default_factory=dict)
    reanswer_prompts: list[str] = field(default_factory=list, repr=False)  # per edited example
    reanswer_decoding: dict = field(default_factory=dict)
    scored: list[int] = field(default_factory=list)  # edited examples whose new answer was scored
    score_continuations: list[str] = field(default_factory=list)  # " {answer}." of each, after its re-answer prompt

    @property
    def sweep(self) -> bool:
        """Whether these are the edits of a threshold sweep (compute_edits) rather than of one threshold."""
        return self.method == "compute_edits"


class Edits(dict):
    """{example id: `Edit`} for every example edited (in `results` order), and `steps`: the `EditSteps` of the call
    that made them."""

    def __init__(self, edits: Any = (), steps: EditSteps | None = None) -> None:
        super().__init__(edits)
        self.steps = steps


@dataclass
class VERecord:
    """One example after Verify-and-Edit at a given threshold."""

    id: str
    question: str
    gold: list[str]
    dataset: str
    threshold: float
    consistency_kind: str
    consistency: float  # CoT-SC score on [0, n]
    n: int
    edited: bool
    original_prediction: str
    prediction: str
    original_correct: float
    correct: float
    confidence: float  # [0, n]: consistency if unedited, n * P(new answer) if edited
    answer_logprob: float  # official AUC confidence
    reanswer_failed: bool
    original_rationale: str
    edited_rationale: str = ""
    verifying_questions: list[str] = field(default_factory=list)
    retrieved: list[list[str]] = field(default_factory=list)
    verifying_answers: list[str] = field(default_factory=list)


class VERecords(list):
    """The `VERecord`s of one `verify_and_edit` call (a list, in `results` order) and `edits`, the `Edits` (with
    their `steps`) it applied."""

    def __init__(self, records: Sequence[VERecord] = (), edits: Edits | None = None) -> None:
        super().__init__(records)
        self.edits = edits


# --------------------------------------------------------------------------- editing


def _n_of(results: Sequence[PromptResult], n: int | None) -> int:
    sizes = {r.n for r in results}
    if len(sizes) > 1:
        raise ValueError(f"results mix different numbers of paths: {sorted(sizes)}")
    found = sizes.pop() if sizes else (n or 0)
    if n is not None and results and n != found:
        raise ValueError(f"n={n} but the results have {found} paths each")
    return found


def default_threshold(n: int) -> int:
    """ceil(n / 2): edit when less than a majority agrees."""
    return math.ceil(n / 2)


def _chosen_rationale(r: PromptResult) -> str:
    """r*: the chosen path's rationale; with no parse, the most probable path's text."""
    if r.chosen_path >= 0:
        return r.rationale
    if not r.texts:
        return ""
    means = [-1e9 if math.isnan(m) else m for m in r.mean_logprobs]
    best = max(range(len(r.texts)), key=lambda i: (means[i], -i))
    return r.rationales[best]


def _first_line(text: str) -> str:
    return text.strip().split("\n", 1)[0].strip()


def compute_edits(lm, results: Sequence[PromptResult], examples: Sequence[Example], dataset: str,
                  knowledge: Knowledge, max_threshold: float | None = None, consistency: str = "wang",
                  shots: int | Sequence[Any] | None = None, top_k: int = 3, encoder: Any = None,
                  vq_max_new_tokens: int = 40, va_max_new_tokens: int = 64,
                  answer_max_new_tokens: int = 24, progress: bool = True) -> Edits:
    """Verify and edit every result with consistency < max_threshold (default n, enough for a 0..n sweep).

    Returns the `Edits` with their `steps` (what `verify_edit.trace.write` writes the run's trace from)."""
    dataset = check_dataset(dataset)
    if consistency not in CONSISTENCY_KINDS:
        raise ValueError(f"consistency must be one of {CONSISTENCY_KINDS}, not {consistency!r}")
    n = _n_of(results, None)
    max_threshold = n if max_threshold is None else max_threshold
    steps = EditSteps(
        lm=lm, method="compute_edits", dataset=dataset, knowledge=knowledge, results=list(results),
        consistency=consistency, threshold=max_threshold, n=n,
        shots=NUM_SHOTS[dataset] if shots is None else shots if isinstance(shots, int) else len(shots), top_k=top_k,
        vq_max_new_tokens=vq_max_new_tokens, va_max_new_tokens=va_max_new_tokens,
        answer_max_new_tokens=answer_max_new_tokens)
    by_id = {ex.id: ex for ex in examples}
    missing = [r.id for r in results if r.id not in by_id]
    if missing:
        raise ValueError(f"{len(missing)} results have no example (first: {missing[0]!r})")
    todo = [r for r in results if consistency_of(r, consistency) < max_threshold]
    if not todo:
        return Edits({}, steps)
    todo_ex = [by_id[r.id] for r in todo]

    # 1-2. rationale sentences and one verifying question each (no sentence: the question itself)
    sentences = [split_rationale(_chosen_rationale(r)) for r in todo]
    units = [(i, s) for i, ss in enumerate(sentences) for s in ss]
    vq_prompts = [verifying_question_prompt(todo[i].question, s, dataset) for i, s in units]
    vq = dict(n=1, temperature=0.0, max_new_tokens=vq_max_new_tokens, stop=list(VQ_STOP))
    vq_comps = lm.generate(vq_prompts, **vq, progress=progress, desc="verifying questions") if vq_prompts else []
    questions = [_first_line(c[0].text) or s for c, (_, s) in zip(vq_comps, units)]
    for i, ss in enumerate(sentences):
        if not ss:
            units.append((i, ""))
            questions.append(todo[i].question)

    # 3. retrieve (one batch) and keep the top sentences per verifying question
    found = knowledge.retrieve_batch(questions, [todo_ex[i] for i, _ in units])
    ranked = top_sentences_batch(questions, found, k=top_k, encoder=encoder)
    top = [[s for s, _ in row] for row in ranked]

    # 4. verifying answers (one generate call)
    header = verifying_answer_header(dataset)
    va_prompts = [verifying_answer_prompt(q, t, dataset, header) for q, t in zip(questions, top)]
    va = dict(n=1, temperature=0.0, max_new_tokens=va_max_new_tokens, stop=list(VA_STOP))
    va_comps = lm.generate(va_prompts, **va, progress=progress, desc="verifying answers")
    answers = [re.sub(r"\.{2,}$", ".", _first_line(c[0].text)) for c in va_comps]  # shots end "..": not copied

    # 5. edited rationales and answering again (one generate call, one score call)
    per_example: list[list[int]] = [[] for _ in todo]
    for j, (i, _) in enumerate(units):
        per_example[i].append(j)
    edited = [join_rationale([answers[j] for j in js]) for js in per_example]
    pairs = fewshot_examples(dataset, shots)
    re_prompts = [cot_prompt(ex.question, dataset, pairs, rationale=rat) for ex, rat in zip(todo_ex, edited)]
    again = dict(n=1, temperature=0.0, max_new_tokens=answer_max_new_tokens, stop=list(REANSWER_STOP))
    re_comps = lm.generate(re_prompts, **again, progress=progress, desc="answering again")
    texts = [c[0].text for c in re_comps]
    new_answers = [parse_answer(f"The answer is{t}", dataset) for t in texts]
    raws = [clean_answer(t) for t in texts]
    scored = [i for i, a in enumerate(new_answers) if a is not None]
    continuations = [f" {raws[i]}." for i in scored]
    logps = lm.score([re_prompts[i] for i in scored], continuations, progress=progress,
                     desc="new answer log-probs") if scored else []
    answer_logprob = [float("-inf")] * len(todo)
    for i, lp in zip(scored, logps):
        answer_logprob[i] = lp

    edits = {}
    for i, r in enumerate(todo):
        js = per_example[i]
        edits[r.id] = Edit(
            id=r.id, original_rationale=_chosen_rationale(r), sentences=sentences[i],
            verifying_questions=[questions[j] for j in js], retrieved=[top[j] for j in js],
            verifying_answers=[answers[j] for j in js], edited_rationale=edited[i], text=texts[i],
            answer=new_answers[i], answer_logprob=answer_logprob[i], prompt=re_prompts[i],
        )
    return Edits(edits, replace(
        steps, per_example=per_example, questions=questions, vq_prompts=vq_prompts, vq_decoding=vq, found=found,
        ranked=ranked, va_prompts=va_prompts, va_decoding=va, reanswer_prompts=re_prompts, reanswer_decoding=again,
        scored=scored, score_continuations=continuations))


def apply_threshold(results: Sequence[PromptResult], edits: dict[str, Edit], threshold: float,
                    consistency: str = "wang") -> list[VERecord]:
    """Per example: the edit when consistency < threshold (it must be in `edits`), else the CoT-SC prediction."""
    if consistency not in CONSISTENCY_KINDS:
        raise ValueError(f"consistency must be one of {CONSISTENCY_KINDS}, not {consistency!r}")
    out = []
    for r in results:
        score = consistency_of(r, consistency)
        record = VERecord(
            id=r.id, question=r.question, gold=r.gold, dataset=r.dataset, threshold=threshold,
            consistency_kind=consistency, consistency=score, n=r.n, edited=score < threshold,
            original_prediction=r.prediction, prediction=r.prediction, original_correct=r.correct,
            correct=r.correct, confidence=score, answer_logprob=r.answer_logprob, reanswer_failed=False,
            original_rationale=_chosen_rationale(r),
        )
        if record.edited:
            if r.id not in edits:
                raise KeyError(f"no edit for {r.id!r} (consistency {score:.3g} < threshold {threshold}): "
                               "compute_edits with a max_threshold at least this high")
            e = edits[r.id]
            record.edited_rationale = e.edited_rationale
            record.verifying_questions, record.retrieved = e.verifying_questions, e.retrieved
            record.verifying_answers = e.verifying_answers
            record.reanswer_failed = e.answer is None
            if e.answer is not None:
                record.prediction = e.answer
                record.correct = answer_score(e.answer, r.gold, r.dataset)
            record.answer_logprob = e.answer_logprob
            record.confidence = r.n * math.exp(e.answer_logprob) if e.answer is not None else 0.0
        out.append(record)
    return out


def verify_and_edit(lm, results: Sequence[PromptResult], examples: Sequence[Example], dataset: str,
                    knowledge: Knowledge, threshold: float | None = None, n: int | None = None,
                    consistency: str = "wang", **kwargs: Any) -> VERecords:
    """Algorithm 1: edit CoT-SC results with consistency < threshold (default ceil(n/2)); kwargs go to compute_edits.

    Consistency and threshold share the [0, n] scale (since its commit b585f24 the official code
    compares a 0-1 vote fraction with thresholds of 3-3.6 and so edits every example; before it,
    the unnormalised sum `wang_raw`). Returns the records with the `edits` they applied (and their `steps`).
    """
    n = _n_of(results, n)
    threshold = default_threshold(n) if threshold is None else threshold
    edits = compute_edits(lm, results, examples, dataset, knowledge, max_threshold=threshold, consistency=consistency,
                          **kwargs)
    edits.steps = replace(edits.steps, method="verify_edit")  # the edits of this one threshold
    return VERecords(apply_threshold(results, edits, threshold, consistency), edits)


# --------------------------------------------------------------------------- the threshold sweep


def correctness_by_threshold(results: Sequence[PromptResult], edits: dict[str, Edit],
                             thresholds: Sequence[float] | None = None, consistency: str = "wang") -> dict:
    """{threshold: per-question correctness (0/1, in `results` order)} at each threshold (default 0..n).

    The same questions at every threshold, so two thresholds compare with a paired bootstrap
    (`stats.paired_difference(by_t[a], by_t[b], scale=100)`: EM points).
    """
    n = _n_of(results, None)
    return {t: [r.correct for r in apply_threshold(results, edits, t, consistency)]
            for t in (range(n + 1) if thresholds is None else thresholds)}


def sweep_thresholds(results: Sequence[PromptResult], edits: dict[str, Edit],
                     thresholds: Sequence[float] | None = None, consistency: str = "wang",
                     intervals: bool = False, seed: int = 0) -> list[dict]:
    """Accuracy (%), AUC on `confidence` and on the answer log-prob, and edit count at each threshold (default 0..n).

    With `intervals=True` each row also has `n` and, for `accuracy`, `auc` and
    `auc_answer_logprob`, the bounds `<metric> low` / `<metric> high` of a 95% percentile
    bootstrap over questions (seeded; `stats.mean_interval` / `stats.bootstrap`).
    """
    n = _n_of(results, None)
    rows = []
    for t in (range(n + 1) if thresholds is None else thresholds):
        records = apply_threshold(results, edits, t, consistency)
        correct = [r.correct for r in records]
        confidence = [r.confidence for r in records]
        answer_logprob = [r.answer_logprob for r in records]
        row = {
            "threshold": t,
            "edited": sum(r.edited for r in records),
            "accuracy": 100 * sum(correct) / len(correct),
            "auc": accuracy_coverage_auc(confidence, correct),
            "auc_answer_logprob": accuracy_coverage_auc(answer_logprob, correct),
        }
        if intervals:
            for name, est in (("accuracy", mean_interval(correct, scale=100, seed=seed)),
                              ("auc", bootstrap(accuracy_coverage_auc, confidence, correct, seed=seed)),
                              ("auc_answer_logprob", bootstrap(accuracy_coverage_auc, answer_logprob, correct, seed=seed))):
                row[f"{name} low"], row[f"{name} high"] = est["low"], est["high"]
            row["n"] = len(records)
        rows.append(row)
    return rows
