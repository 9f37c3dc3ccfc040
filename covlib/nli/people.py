"""The judges against people: Ye & Durrett's (2022) FACTUAL labels of GPT-3 rationales on Adversarial HotpotQA.

`load_factuality` reads the development half of the labels (`FACTUALITY_PROVENANCE`); `factual_scores` asks a
judge whether the paragraphs support a rationale by one of `RULES`; `people_agreement` scores that against
people's FACTUAL label (AUC of the score, balanced accuracy of the judge's own decision, precision and recall of
flagging a non-factual rationale), every interval resampling whole questions; `question_folds` and
`cross_validated` fit on some questions and score the others, never a question on both sides.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from covlib.core import paths, stats
from covlib.core.text import split_sentences
from covlib.data.readers import Loc, iter_records, require, str_list
from covlib.nli.base import Judge
from covlib.nli.registry import get_judge
from covlib.nli.scoring import entailed, probabilities

FACTUALITY_FILE = ("hotpotqa_adv", "factuality_dev.jsonl")  # under the data folder (../shared/data)
FORMATS = ("explain-predict", "predict-explain")  # each question's two rationales
# What made the file, in the words the loader, notebook 00b and docs/judges.md quote (a test keeps them equal).
FACTUALITY_PROVENANCE = (
    "GPT-3 (text-davinci) rationales and answers to 126 of the 250 Adversarial HotpotQA test questions, in two prompt "
    "formats (explain-predict, predict-explain), 252 in all, each labelled FACTUAL (every statement supported by the "
    "question's four paragraphs), CONSISTENT and CORRECT by people: the human annotations of Ye & Durrett (2022), "
    "shipped in the Verify-and-Edit repository (HotpotAdv/annotations), reformatted to JSON lines by the project's "
    "issue filer. The file holds half of the questions (split by a hash of qas_id); the other half is kept apart to "
    "measure the judge and is never read, fetched or tuned on here.")
RULES = {  # how a rationale is judged against its paragraphs
    "whole": "P(the four paragraphs entail the whole rationale); the judge's own decision",
    "claims": "every claim (sentence) entailed by the four paragraphs together; the score is the least P",
    "aligned": "every claim entailed by one of the paragraphs alone; the score is the least of each claim's best P",
}
# The one comparison that says which judge agrees best with people's FACTUAL labels, declared before the second
# build was scored: the balanced accuracy of the judge's own decision (what a credibility metric counts) with each
# claim against its best paragraph; AUC is reported beside it.
PRIMARY = ("aligned", "balanced_accuracy")
MEASURES = {"auc": "AUC", "balanced_accuracy": "balanced accuracy", "flag_precision": "flag precision",
            "flag_recall": "flag recall"}  # what `people_agreement` returns, and its name in tables
_OPENER = re.compile(r"^(?:first|second|third|fourth|fifth|then|next|so|thus|therefore|finally)\s*,\s*", re.I)


@dataclass(frozen=True)
class Rationale:
    """One labelled rationale: the question, its four paragraphs, GPT-3's rationale and answer, people's labels."""

    qas_id: str
    format: str
    question: str
    paragraphs: tuple[str, ...]
    rationale: str
    prediction: str
    gold_answer: str
    factual: bool
    consistent: bool
    correct: bool


def factuality_path() -> Path:
    """Where the people-labelled rationales live (the data folder)."""
    return paths.dataset_path(*FACTUALITY_FILE)


def _record(row: dict, loc: Loc) -> Rationale:
    """One record of the file as a `Rationale`; a DataError names the file, line and field that is wrong."""
    texts = {k: require(row, k, str, loc) for k in ("qas_id", "format", "question", "rationale", "prediction",
                                                     "gold_answer")}
    flags = {k: require(row, k, bool, loc) for k in ("factual", "consistent", "correct")}
    paragraphs = str_list(require(row, "paragraphs", list, loc), loc, "paragraphs")
    if len(paragraphs) != 4:
        raise loc.error(f"{len(paragraphs)} paragraphs, not four", field="paragraphs")
    if texts["format"] not in FORMATS:
        raise loc.error(f"format {texts['format']!r} is not one of {FORMATS}", field="format")
    return Rationale(**texts, **flags, paragraphs=tuple(paragraphs))


def load_factuality(path: str | Path | None = None) -> list[Rationale]:
    """The people-labelled rationales (`FACTUALITY_PROVENANCE`), read by the data readers and checked: four
    paragraphs each, both formats of every question, no rationale twice."""
    records = [_record(row, loc) for row, loc in iter_records(factuality_path() if path is None else path)]
    check_whole_questions(records)
    return records


def check_whole_questions(records: Sequence[Rationale]) -> dict[str, list[int]]:
    """{qas_id: the positions of its rationales}, refused unless every question is there whole (both formats, once each).

    People's agreement is measured over questions: a question's two rationales share paragraphs and a reader, so
    a measure over part of a question, or a fold with one rationale on each side, is not a measure by question."""
    groups: dict[str, list[int]] = {}
    for i, r in enumerate(records):
        groups.setdefault(r.qas_id, []).append(i)
    broken = [q for q, idx in groups.items() if sorted(records[i].format for i in idx) != sorted(FORMATS)]
    if not records or broken:
        raise ValueError(f"{len(broken)} of {len(groups)} questions are not whole (each needs exactly one rationale "
                         f"in each of {FORMATS}): {broken[:3]}" if records else "no rationales")
    return groups


def whole_questions(records: Sequence[Rationale], n: int) -> list[Rationale]:
    """The rationales of the first n questions (file order), every question whole."""
    keep = set(list(check_whole_questions(records))[:n])
    return [r for r in records if r.qas_id in keep]


def claims(rationale: str) -> list[str]:
    """A rationale's claims: its sentences, without the "First," / "Second," that open them."""
    out = [_OPENER.sub("", s).strip() for s in split_sentences(rationale)]
    out = [s[:1].upper() + s[1:] for s in out if s]
    return out or [rationale.strip()]


def rule_pairs(record: Rationale, rule: str) -> tuple[list[str], list[str]]:
    """What a rule asks of one rationale: (its hypotheses, the premises each is checked against)."""
    if rule == "whole":
        return [record.rationale], [" ".join(record.paragraphs)]
    return claims(record.rationale), (list(record.paragraphs) if rule == "aligned" else [" ".join(record.paragraphs)])


def factual_scores(records: Sequence[Rationale], judge: Judge | str | None = None, rule: str = "aligned",
                   progress: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(a score that is high when the paragraphs support the rationale, the judge's own decision "supported") per
    rationale, under `rule` (one of `RULES`): each hypothesis's best premise, then the rationale's least supported
    hypothesis; every pair goes through the cached `probabilities`."""
    if rule not in RULES:
        raise ValueError(f"rule {rule!r}: choose one of {sorted(RULES)}")
    judge = get_judge(judge)
    owner, premises, hypotheses = [], [], []
    for i, r in enumerate(records):
        claimed, units = rule_pairs(r, rule)
        for c, claim in enumerate(claimed):
            for unit in units:
                owner.append((i, c))
                premises.append(unit)
                hypotheses.append(claim)
    probs = probabilities(premises, hypotheses, judge, progress)
    said = entailed(probs, judge).astype(bool)
    best: dict[tuple[int, int], tuple[float, bool]] = {}
    for key, p, s in zip(owner, probs[:, 0], said):
        old = best.get(key, (0.0, False))
        best[key] = (max(old[0], float(p)), old[1] or bool(s))
    score, decided = np.ones(len(records)), np.ones(len(records), dtype=bool)
    for (i, _), (p, s) in best.items():
        score[i], decided[i] = min(score[i], p), decided[i] and s
    return score, decided


def _auc(factual: np.ndarray, score: np.ndarray) -> float:
    """ROC AUC of the score for factual (ties count half); NaN without both classes."""
    pos, neg = score[factual == 1], score[factual == 0]
    if not pos.size or not neg.size:
        return float("nan")
    return float(((pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()) / (pos.size * neg.size))


def _balanced(factual: np.ndarray, decided: np.ndarray) -> float:
    """Balanced accuracy of the decision "supported" against FACTUAL: the mean of the two classes' hit rates."""
    rates = [np.mean(decided[factual == k] == k) for k in (1, 0) if np.any(factual == k)]
    return float(np.mean(rates)) if len(rates) == 2 else float("nan")


def _flag_precision(factual: np.ndarray, decided: np.ndarray) -> float:
    """Of the rationales the judge flags (decides not supported), the share people call non-factual."""
    flagged = decided == 0
    return float(np.mean(factual[flagged] == 0)) if flagged.any() else float("nan")


def _flag_recall(factual: np.ndarray, decided: np.ndarray) -> float:
    """Of the rationales people call non-factual, the share the judge flags."""
    wrong = factual == 0
    return float(np.mean(decided[wrong] == 0)) if wrong.any() else float("nan")


def people_agreement(records: Sequence[Rationale], score: Sequence[float], decided: Sequence[bool],
                     seed: int = 0) -> dict[str, dict[str, float]]:
    """A judge's agreement with people's FACTUAL labels: AUC of its score, balanced accuracy of its decision, and
    precision / recall of flagging a non-factual rationale, each with a 95% interval that resamples whole questions
    (refused unless every question is whole: `check_whole_questions`)."""
    check_whole_questions(records)
    score, decided = np.asarray(score, dtype=float), np.asarray(decided, dtype=bool)
    if score.shape != (len(records),) or decided.shape != (len(records),) or not np.isfinite(score).all():
        raise ValueError(f"{score.shape} scores (all finite) and {decided.shape} decisions for {len(records)} "
                         "rationales")
    factual = np.array([r.factual for r in records], dtype=float)
    questions = [r.qas_id for r in records]
    return {name: stats.cluster_bootstrap(fn, questions, factual, column, seed=seed)
            for name, fn, column in (("auc", _auc, score), ("balanced_accuracy", _balanced, decided),
                                     ("flag_precision", _flag_precision, decided),
                                     ("flag_recall", _flag_recall, decided))}


def balanced_accuracy_difference(records: Sequence[Rationale], decided_a: Sequence[bool], decided_b: Sequence[bool],
                                 seed: int = 0) -> dict[str, float]:
    """Balanced accuracy of decision a minus decision b against people's FACTUAL, paired over the same whole questions."""
    check_whole_questions(records)
    factual = np.array([r.factual for r in records], dtype=float)
    return stats.cluster_bootstrap(lambda y, a, b: _balanced(y, a) - _balanced(y, b), [r.qas_id for r in records],
                                   factual, np.asarray(decided_a, dtype=float), np.asarray(decided_b, dtype=float),
                                   seed=seed)


def question_folds(records: Sequence[Rationale], k: int = 5, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """k (train, test) position splits by question (seeded): a question's rationales are all on one side."""
    groups = check_whole_questions(records)
    if not 2 <= k <= len(groups):
        raise ValueError(f"k={k} folds for {len(groups)} questions: choose 2 to {len(groups)}")
    order = np.random.default_rng(seed).permutation(sorted(groups))
    folds = []
    for f in range(k):
        test = np.array(sorted(i for q in order[f::k] for i in groups[q]), dtype=int)
        folds.append((np.setdiff1d(np.arange(len(records)), test), test))
    return folds


def cross_validated(records: Sequence[Rationale], features: np.ndarray, k: int = 5, seed: int = 0,
                    c: float = 1.0) -> np.ndarray:
    """Out-of-fold P(factual) from a logistic regression on `features` (one row per rationale), fitted on the other
    folds' questions only (`question_folds`)."""
    from sklearn.linear_model import LogisticRegression

    features = np.asarray(features, dtype=float).reshape(len(records), -1)
    factual = np.array([r.factual for r in records], dtype=int)
    out = np.full(len(records), np.nan)
    for train, test in question_folds(records, k, seed):
        model = LogisticRegression(C=c, class_weight="balanced").fit(features[train], factual[train])
        out[test] = model.predict_proba(features[test])[:, 1]
    return out
