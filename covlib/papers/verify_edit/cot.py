"""Standard, chain-of-thought (CoT) and CoT self-consistency (CoT-SC) prompting as in Verify-and-Edit.

Prompts are those of Zhao et al. (ACL 2023), Appendix C, in the exact layout of the official
code (github.com/RuochenZhao/Verify-and-Edit: `HotpotAdv/few_shot.py`, `HotpotAdv/utils.py`,
`2WikiMultihopQA/prompt_helper.py`, `Fever/prompt_helper.py`, `Fever/few_shot.py`):

| dataset        | shots | standard shot                 | CoT shot                                               |
|----------------|-------|-------------------------------|--------------------------------------------------------|
| hotpotqa       | 6     | `Q: {q}\\nA: {answer}\\n`      | `Q: {q}\\nA: {rationale} The answer is {answer}.\\n`     |
| 2wikimultihop  | 6     | `Q: {q}\\nA: {answer}\\n`      | `Question: {q}\\nA: {rationale} The answer is {answer}.\\n` |
| fever          | 3     | `Claim: {c}\\nA: {label}\\n`   | `Claim: {c}\\nA: {rationale} The answer is {label}.\\n`  |

Shots are joined by a blank line and followed by the test question (`...\\nA:`); FEVER prompts
start with the header "Determine if there is Observation that SUPPORTS or REFUTES a Claim, or
if there is NOT ENOUGH INFO.". Rationales are the hand-written ones of `data.load_fewshot`.
Which shots: the first k of the pool in the order of the few-shot *examples* file, which is
how the official code selects them and gives exactly the shots printed in Appendix C
(`PAPER_SHOT_IDS`; `load_fewshot` lists FEVER in rationale-file order, where "Black Mirror"
is 4th, not 3rd). `shots=` takes an int (first k in that order) or explicit (Example, rationale) pairs.

Parsing (`parse_answer`): the answer is the text after the FIRST "The answer is"
(case-insensitive; the official code splits on the first " The answer is" and takes the next
segment), cut at the first line break and the first sentence end, stripped of spaces, quotes
and trailing periods. No marker means a failed parse (None); the official code instead took
the whole text as the answer (HotpotQA) or NOT ENOUGH INFO (FEVER). FEVER answers are mapped to
SUPPORTS / REFUTES / NOT ENOUGH INFO with `metrics.normalize_fever_label` (an unmappable
answer is a failed parse). Standard prompts have no marker: their answer is the first line.

Self-consistency, on ONE scale [0, n] for n sampled paths (threshold ceil(n/2) means
"less than a majority" on every scale):

* `majority` = number of paths whose normalised answer equals the chosen answer.
* `wang` = n * sum_{i: a_i = a} w_i / sum_i w_i, with w_i = exp(mean token log-prob of path i)
  (Wang et al. 2022's length-normalised path probability, the variant they found best) and the
  sum in the denominator over ALL n paths, failed parses included. With equal weights it is
  exactly `majority` (rounded to 12 decimals, so that floating point cannot put a 3-of-5 majority
  at 2.999999999999999, below the threshold ceil(n/2) = 3); failed paths lower it as they lower `majority`.
* `wang_raw` = sum_{i: a_i = a} w_i, the paper's §5.6 "unnormalized answer probabilities
  marginalized over the rationales", and the score of the official code for all three datasets
  up to its commit b585f24 ("fixed consistency", Dec 2023), which replaced it by a vote
  fraction (below). Also in [0, n], but below the vote count by the paths' mean probability:
  with a small model it is far below ceil(n/2) for almost every question, so thresholding it
  edits nearly everything.

Since commit b585f24 the official code (HotpotQA, 2Wiki and FEVER alike) compares a vote
FRACTION (max count / 5, in [0, 1]) against thresholds of 3 to 3.6 and so edits every example;
here every score lives on [0, n].
Answers are compared after `metrics.normalize_answer` (FEVER: after label mapping). A path
without a parse votes for nothing; the chosen answer is the one with most votes (ties: larger
weight sum, then first sampled), or with `vote="wang"` the one with the largest weight sum
(Algorithm 1's argmax of the consistency score). The chosen rationale r* is that of the chosen
answer's path with the highest mean log-prob (official HotpotQA code). An example whose every
path failed gets prediction "" and counts as wrong; `parse_failures` counts failed paths.

Gold aliases: `answer_score` accepts a match with ANY gold alias. The shared 2Wiki dev file
carries up to 224 aliases per question, while the official code compared the prediction with
one answer string; `rescore(records, aliases="first")` scores the same predictions against the
first alias only, so a table can report EM both ways. That file lists aliases in no canonical
order (the dataset's answer "United States" is the last of 13 aliases beginning "the US"), so
first-alias EM is a one-string EM, not the official answer string's.

`answer_logprob` (what the official code ranks by for the accuracy-coverage AUC) is
log P(" {answer}." | prompt, chosen rationale, "The answer is") of the chosen path, scored in
one batched `lm.score` call; for standard prompts it is the log-prob of the one-line
completion; -inf when nothing parsed.

What a run returns: a `PromptRun`, the list of `PromptResult`s (example order) with what the call
did beside it: the generator, the decoding settings of the one generate call (`decoding`), the
shots and the vote, and the one score call's (result index, prompt, continuation) in `scored`. The
run writes no trace; `verify_edit.trace.write(tracer, run)` writes one from it.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Sequence

from covlib.core.metrics import accuracy_coverage_auc, f1_score
from covlib.core.records import Example
from covlib.data import load_fewshot
from covlib.papers.verify_edit.answers import (ALIAS_MODES, ANSWER_MARKER, DATASETS, answer_key, check_dataset, clean_answer,
                                              finish_answer, gold_answers, answer_score, parse_answer, rescore, split_cot)  # noqa: F401

NUM_SHOTS = {"hotpotqa": 6, "2wikimultihop": 6, "fever": 3}
# Appendix C's shots = the first records of each few-shot examples file that have a rationale.
PAPER_SHOT_IDS = {
    "hotpotqa": ("5ab29a54554299340b52552c", "5ae255345542994d89d5b3e2", "5ae7fc3a5542994a481bbe60",
                 "5ae140ac5542997b2ef7d17e", "5ae100a9554299422ee995b8", "5a8a2c8755429930ff3c0cd8"),
    "2wikimultihop": ("6f4fc1b4089b11ebbd78ac1f6bf848b6", "934bb6c40bda11eba7f7acde48001122",
                      "2c1df6880bda11eba7f7acde48001122", "cf4ef64708af11ebbd83ac1f6bf848b6",
                      "918b2e000bda11eba7f7acde48001122", "e2bb16a00bda11eba7f7acde48001122"),
    "fever": ("180017", "39149", "126412", "52968", "215766", "873"),
}
FEVER_HEADER = "Determine if there is Observation that SUPPORTS or REFUTES a Claim, or if there is NOT ENOUGH INFO."
COT_STOP = ("\n\n", "\nQ:", "\nQuestion:", "\nClaim:")
STANDARD_STOP = ("\n",)
CONSISTENCY_KINDS = ("wang", "majority", "wang_raw")
# Wang's score is rounded to this many decimals: with equal path weights 3 of 5 votes is 5 * 3w / 5w = 3 exactly, which
# floating point gives as 2.999999999999999 for some w (then edited below ceil(n/2) = 3) and 3.0000000000000004 for others
WANG_DIGITS = 12

Shot = tuple[Example, str]


# --------------------------------------------------------------------------- prompts


def fewshot_examples(dataset: str, shots: int | Sequence[Shot] | None = None) -> list[Shot]:
    """The (Example, rationale) shots: the first k (default 6 / 6 / 3) in Appendix C order, or the given pairs."""
    dataset = check_dataset(dataset)
    if shots is not None and not isinstance(shots, int):
        return list(shots)
    k = NUM_SHOTS[dataset] if shots is None else shots
    pool = load_fewshot(dataset)
    rank = {qid: i for i, qid in enumerate(PAPER_SHOT_IDS[dataset])}
    ordered = sorted(pool, key=lambda pair: rank.get(pair[0].id, len(rank)))  # stable: the rest in pool order
    if not 0 < k <= len(ordered):
        raise ValueError(f"{dataset} has {len(ordered)} few-shot examples, asked for {k}")
    return ordered[:k]


def shot_answer(example: Example, dataset: str) -> str:
    """The answer a shot shows: the FEVER label, else the gold answer."""
    return (example.label or "") if check_dataset(dataset) == "fever" else example.answer


def _question_line(question: str, dataset: str, cot: bool) -> str:
    if dataset == "fever":
        return f"Claim: {question.strip()}"
    if dataset == "2wikimultihop" and cot:
        return f"Question: {question.strip()}"
    return f"Q: {question.strip()}"


def _with_header(body: str, dataset: str) -> str:
    return f"{FEVER_HEADER}\n\n{body}" if dataset == "fever" else body


def standard_prompt(question: str, dataset: str, shots: Sequence[Shot]) -> str:
    """Appendix C.x.1 few-shot prompt: question -> answer."""
    dataset = check_dataset(dataset)
    parts = [f"{_question_line(ex.question, dataset, False)}\nA: {shot_answer(ex, dataset)}\n" for ex, _ in shots]
    parts.append(f"{_question_line(question, dataset, False)}\nA:")
    return _with_header("\n".join(parts), dataset)


def cot_prompt(question: str, dataset: str, shots: Sequence[Shot], rationale: str | None = None) -> str:
    """Appendix C.x.2 CoT prompt; with `rationale`, it ends '... A: {rationale} The answer is' (answering again)."""
    dataset = check_dataset(dataset)
    parts = [
        f"{_question_line(ex.question, dataset, True)}\nA: {rat.strip()} {ANSWER_MARKER} {shot_answer(ex, dataset)}.\n"
        for ex, rat in shots
    ]
    end = f"{_question_line(question, dataset, True)}\nA:"
    if rationale is not None:
        end = f"{end} {rationale.strip()} {ANSWER_MARKER}" if rationale.strip() else f"{end} {ANSWER_MARKER}"
    parts.append(end)
    return _with_header("\n".join(parts), dataset)


# --------------------------------------------------------------------------- parsing


# --------------------------------------------------------------------------- consistency


def path_weight(mean_logprob: float | None) -> float:
    """exp(mean token log-prob) of a path; 0 for a path without tokens."""
    return 0.0 if mean_logprob is None or math.isnan(mean_logprob) else math.exp(mean_logprob)


def self_consistency(answers: Sequence[str | None], mean_logprobs: Sequence[float | None], dataset: str,
                     vote: str = "majority") -> dict:
    """Chosen path index (-1: none parsed) and its `majority`, `wang`, `wang_raw` scores on [0, n].

    `answers` are parsed answers (None = failed parse, votes for nothing); see the module doc.
    """
    if len(answers) != len(mean_logprobs):
        raise ValueError(f"{len(answers)} answers for {len(mean_logprobs)} log-probs")
    if vote not in ("majority", "wang"):
        raise ValueError(f"vote must be 'majority' or 'wang', not {vote!r}")
    n = len(answers)
    keys = [answer_key(a, dataset) for a in answers]
    weights = [path_weight(m) for m in mean_logprobs]
    votes = Counter(k for k in keys if k is not None)
    if not votes:
        return {"chosen": -1, "majority": 0, "wang": 0.0, "wang_raw": 0.0}
    mass = {k: sum(w for kk, w in zip(keys, weights) if kk == k) for k in votes}
    first = {k: keys.index(k) for k in votes}
    if vote == "majority":
        best = max(votes, key=lambda k: (votes[k], mass[k], -first[k]))
    else:
        best = max(votes, key=lambda k: (mass[k], votes[k], -first[k]))
    paths = [i for i, k in enumerate(keys) if k == best]
    chosen = max(paths, key=lambda i: (weights[i], -i))
    total = sum(weights)
    return {
        "chosen": chosen,
        "majority": votes[best],
        "wang": round(n * mass[best] / total, WANG_DIGITS) if total > 0 else 0.0,
        "wang_raw": mass[best],
    }


# --------------------------------------------------------------------------- results


@dataclass
class PromptResult:
    """One example's prompting outcome; per-path lists have n entries (n = 1 for greedy methods)."""

    id: str
    question: str
    gold: list[str]
    dataset: str
    method: str  # "standard", "cot" or "cot_sc"
    prediction: str  # "" when no path parsed
    rationale: str  # rationale of the chosen path (r*); "" for standard prompts
    correct: float
    f1: float
    n: int
    majority: int  # [0, n]
    wang: float  # [0, n]
    wang_raw: float  # [0, n], unnormalised marginal (the official code's score before its commit b585f24)
    parse_failures: int
    chosen_path: int  # -1 when no path parsed
    answer_logprob: float  # official AUC confidence; -inf when nothing parsed
    prompt: str = field(repr=False, default="")
    texts: list[str] = field(default_factory=list, repr=False)
    rationales: list[str] = field(default_factory=list, repr=False)
    answers: list[str | None] = field(default_factory=list, repr=False)
    logprobs: list[float] = field(default_factory=list, repr=False)  # total per path
    mean_logprobs: list[float] = field(default_factory=list, repr=False)
    finish_reasons: list[str] = field(default_factory=list, repr=False)  # per path: "stop", "length", ...


class PromptRun(list):
    """The `PromptResult`s of one `run_standard` / `run_cot` / `run_cot_sc` call (a list, in example order) and what
    the call did: `lm` (the generator), `method` ("standard", "cot", "cot_sc"), `dataset`, `shots` (how many),
    `vote`, `decoding` (the settings of its one generate call: n, temperature, max_new_tokens, stop, seed) and
    `scored` (its one score call: (result index, prompt, continuation) per chosen answer scored)."""

    def __init__(self, results: Sequence[PromptResult] = (), *, lm: Any = None, method: str = "", dataset: str = "",
                 shots: int = 0, vote: str = "majority", decoding: dict | None = None,
                 scored: Sequence[tuple[int, str, str]] = ()) -> None:
        super().__init__(results)
        self.lm, self.method, self.dataset, self.shots, self.vote = lm, method, dataset, shots, vote
        self.decoding = dict(decoding or {})
        self.scored = list(scored)


def consistency_of(result: PromptResult, kind: str = "wang") -> float:
    """A result's consistency score on [0, n]: "wang", "majority" or "wang_raw"."""
    if kind not in CONSISTENCY_KINDS:
        raise ValueError(f"consistency must be one of {CONSISTENCY_KINDS}, not {kind!r}")
    return float(getattr(result, kind))


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def _build_results(lm, examples: Sequence[Example], dataset: str, method: str, prompts: list[str],
                   completions: list[list], vote: str, progress: bool, decoding: dict, shots: int) -> PromptRun:
    """Parse paths, vote, and score the chosen answers (one batched lm.score call)."""
    results = []
    to_score: list[tuple[int, str, str]] = []  # (result index, prefix, continuation)
    for ex, prompt, comps in zip(examples, prompts, completions):
        texts = [c.text for c in comps]
        if method == "standard":
            split = [("", parse_answer(t, dataset, marker=False), -1) for t in texts]
            raws = [clean_answer(t) for t in texts]
        else:
            parts = [split_cot(t) for t in texts]
            split = [(rat, finish_answer(raw, dataset), end) for rat, raw, end in parts]
            raws = [raw for _, raw, _ in parts]
        answers = [a for _, a, _ in split]
        means = [_mean(c.token_logprobs) for c in comps]
        sc = self_consistency(answers, means, dataset, vote=vote)
        chosen = sc["chosen"]
        prediction = answers[chosen] if chosen >= 0 else ""
        gold = gold_answers(ex, dataset)
        correct = answer_score(prediction, gold, dataset)
        f1 = correct if dataset == "fever" else (f1_score(prediction, gold) if prediction else 0.0)
        answer_logprob = float("-inf")
        if chosen >= 0 and method == "standard":
            answer_logprob = comps[chosen].logprob
        elif chosen >= 0:
            to_score.append((len(results), prompt + texts[chosen][: split[chosen][2]], f" {raws[chosen]}."))
        results.append(PromptResult(
            id=ex.id, question=ex.question, gold=gold, dataset=dataset, method=method,
            prediction=prediction, rationale=split[chosen][0] if chosen >= 0 else "",
            correct=correct, f1=f1, n=len(comps), majority=sc["majority"], wang=sc["wang"],
            wang_raw=sc["wang_raw"], parse_failures=sum(a is None for a in answers), chosen_path=chosen,
            answer_logprob=answer_logprob, prompt=prompt, texts=texts, rationales=[s[0] for s in split],
            answers=answers, logprobs=[c.logprob for c in comps], mean_logprobs=means,
            finish_reasons=[c.finish_reason for c in comps],
        ))
    if to_score:
        scores = lm.score([p for _, p, _ in to_score], [c for _, _, c in to_score], progress=progress,
                          desc=f"{method} answer log-probs")
        for (i, _, _), s in zip(to_score, scores):
            results[i].answer_logprob = s
    return PromptRun(results, lm=lm, method=method, dataset=dataset, shots=shots, vote=vote, decoding=decoding,
                     scored=to_score)


def _greedy(lm, examples: Sequence[Example], dataset: str, method: str, shots: int | Sequence[Shot] | None,
            max_new_tokens: int, progress: bool) -> PromptRun:
    """One greedy path per question with the `method` ('standard' or 'cot') prompt: one batched generate call."""
    dataset = check_dataset(dataset)
    pairs = fewshot_examples(dataset, shots)
    prompt, stop, name = {"standard": (standard_prompt, STANDARD_STOP, "standard"),
                          "cot": (cot_prompt, COT_STOP, "CoT")}[method]
    prompts = [prompt(ex.question, dataset, pairs) for ex in examples]
    decoding = dict(n=1, temperature=0.0, max_new_tokens=max_new_tokens, stop=list(stop))
    comps = lm.generate(prompts, **decoding, progress=progress, desc=f"{name} {dataset}")
    return _build_results(lm, examples, dataset, method, prompts, comps, "majority", progress, decoding, len(pairs))


def run_standard(lm, examples: Sequence[Example], dataset: str, shots: int | Sequence[Shot] | None = None,
                 max_new_tokens: int = 32, progress: bool = True) -> PromptRun:
    """Greedy standard few-shot prompting (one batched generate call)."""
    return _greedy(lm, examples, dataset, "standard", shots, max_new_tokens, progress)


def run_cot(lm, examples: Sequence[Example], dataset: str, shots: int | Sequence[Shot] | None = None,
            max_new_tokens: int = 96, progress: bool = True) -> PromptRun:
    """Greedy CoT prompting (one batched generate call, one batched score call)."""
    return _greedy(lm, examples, dataset, "cot", shots, max_new_tokens, progress)


def run_cot_sc(lm, examples: Sequence[Example], dataset: str, n: int = 5, temperature: float = 0.7, seed: int = 0,
               shots: int | Sequence[Shot] | None = None, max_new_tokens: int = 96, vote: str = "majority",
               progress: bool = True) -> PromptRun:
    """CoT self-consistency: n sampled paths per question (one batched generate call), voted as in the module doc."""
    dataset = check_dataset(dataset)
    if temperature <= 0:
        raise ValueError("CoT-SC samples: temperature must be > 0 (the paper uses 0.7)")
    pairs = fewshot_examples(dataset, shots)
    prompts = [cot_prompt(ex.question, dataset, pairs) for ex in examples]
    decoding = dict(n=n, temperature=temperature, max_new_tokens=max_new_tokens, stop=list(COT_STOP), seed=seed)
    comps = lm.generate(prompts, **decoding, progress=progress, desc=f"CoT-SC {dataset} n={n}")
    return _build_results(lm, examples, dataset, "cot_sc", prompts, comps, vote, progress, decoding, len(pairs))


def summarize(results: Sequence[PromptResult], consistency: str = "wang") -> dict:
    """Accuracy (%), F1 (%), AUC on the consistency and on the answer log-prob, parse failures."""
    if not results:
        raise ValueError("summarize of no results")
    correct = [r.correct for r in results]
    return {
        "n_examples": len(results),
        "accuracy": 100 * sum(correct) / len(correct),
        "f1": 100 * sum(r.f1 for r in results) / len(results),
        "auc_consistency": accuracy_coverage_auc([consistency_of(r, consistency) for r in results], correct),
        "auc_answer_logprob": accuracy_coverage_auc([r.answer_logprob for r in results], correct),
        "parse_failures": sum(r.parse_failures for r in results),
        "paths": sum(r.n for r in results),
        "no_prediction": sum(r.chosen_path < 0 for r in results),
    }
