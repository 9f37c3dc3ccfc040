"""How well a judge agrees with gold labels: 3-way scores on labelled pairs, and its decision against the key-fact pairs' labels.

`evaluate` / `nli_scores` / `nli_confusion`: accuracy, macro-F1 and entailment AUC of the judge's labels
(`decided_labels`: its own decision f, so a two-label judge says "entailed" only when P > 0.5, never by
a 3-way argmax), and that decision's agreement, precision and recall with 95% Wilson intervals and n
(held-out FEVER pairs, the credibility fixture). `decision_accuracy` / `f1_difference` / `judge_note`:
how often the judge's own decision f (`entailed`) agrees with the gold "is entailed" of the
key-fact pairs (labelled by AI coding agents: `covlib.nli.labelled.KEYFACT_PAIRS_PROVENANCE`), with 95%
intervals; the credibility tables print `judge_note`.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from covlib.core import stats
from covlib.nli.base import LABELS, Judge, two_label
from covlib.nli.judge_error import judge_rates
from covlib.nli.labelled import NLIPair, load_keyfact_pairs
from covlib.nli.people import factual_scores, factuality_path, load_factuality, people_agreement
from covlib.nli.registry import get_judge
from covlib.nli.scoring import decided_labels, decision_rule, entailed, probabilities


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
    return {"judge": judge.name, **nli_scores(gold, probs, judge)}, probs


def _labels(probs: np.ndarray, judge: Judge | str | None) -> list[str]:
    """The judge's own labels (`decided_labels`), or the argmax when no judge is named."""
    return decided_labels(probs, judge) if judge is not None else [LABELS[i] for i in probs.argmax(axis=1)]


def _decision_intervals(said: np.ndarray, gold: np.ndarray, seed: int = 0) -> dict[str, dict[str, float]]:
    """The 'entailed' decision against the gold's, in % with 95% intervals (Wilson: 0/1 outcomes) and n:
    agreement over all pairs, precision over the pairs decided entailed, recall over the pairs labelled entailed."""
    said, gold = np.asarray(said, dtype=bool), np.asarray(gold, dtype=bool)
    hit = (said == gold).astype(float)
    return {"agreement": stats.mean_interval(hit, scale=100, seed=seed),
            "entail_precision": stats.mean_interval(hit[said], scale=100, seed=seed),
            "entail_recall": stats.mean_interval(hit[gold], scale=100, seed=seed)}


def nli_scores(gold: Sequence[str], probs: Any, judge: Judge | str | None = None) -> dict[str, Any]:
    """The judge's labels on gold-labelled pairs: 3-way accuracy and macro-F1, AUC of P(entailment), and the
    'entailed' decision's agreement / precision / recall in % with 95% intervals and n (`intervals`).

    The labels are the judge's own decision (`decided_labels`); with no judge, the argmax (right for a
    three-way judge without a threshold only). A two-label judge cannot tell neutral from contradiction:
    its 3-way accuracy and macro-F1 are NaN, and its decision is scored as entailed or not.
    """
    from sklearn.metrics import accuracy_score, f1_score as sk_f1, roc_auc_score

    probs = np.asarray(probs, dtype=float)
    gold = list(gold)
    if probs.shape != (len(gold), 3):
        raise ValueError(f"probabilities of shape {probs.shape} for {len(gold)} gold labels; expected ({len(gold)}, 3)")
    unknown = sorted(set(gold) - set(LABELS))
    if unknown:
        raise ValueError(f"gold labels {unknown} are not among {LABELS}")
    pred = _labels(probs, judge)
    is_entail = np.array([g == "entailment" for g in gold], dtype=bool)
    auc = roc_auc_score(is_entail, probs[:, 0]) if 0 < is_entail.sum() < len(gold) else float("nan")
    three_way = judge is None or not two_label(get_judge(judge))
    nan = float("nan")
    correct = np.array([p == g for p, g in zip(pred, gold)], dtype=float)
    accuracy = stats.mean_interval(correct, scale=100) if three_way else {"value": nan, "low": nan, "high": nan,
                                                                          "n": len(gold)}
    said = np.array([p == "entailment" for p in pred], dtype=bool)
    return {
        "accuracy": float(accuracy_score(gold, pred)) if three_way else nan,
        "macro_f1": float(sk_f1(gold, pred, labels=list(LABELS), average="macro", zero_division=0)) if three_way else nan,
        "entail_auc": float(auc),
        "n": len(gold),
        "decides": "argmax" if judge is None else decision_rule(judge),
        "intervals": {"accuracy": accuracy, **_decision_intervals(said, is_entail)},
    }


def confusion_columns(judge: Judge | str | None = None) -> tuple[str, ...]:
    """The predicted labels `nli_confusion` counts for a judge: the three, or entailment / not for a two-label judge."""
    return ("entailment", "not entailment") if judge is not None and two_label(get_judge(judge)) else LABELS


def nli_confusion(gold: Sequence[str], probs: Any, judge: Judge | str | None = None) -> np.ndarray:
    """Counts, rows gold (entailment, neutral, contradiction), columns the judge's own labels in `confusion_columns`
    order (`decided_labels`; the argmax when no judge is named): a two-label judge's are entailed or not."""
    columns = confusion_columns(judge)
    counts = np.zeros((len(LABELS), len(columns)), dtype=int)
    for g, p in zip(gold, _labels(np.asarray(probs, dtype=float).reshape(-1, 3), judge)):
        counts[LABELS.index(g), columns.index(p if p in columns else "not entailment")] += 1
    return counts


def decisions(judge: Judge | str | None, pairs: Sequence[NLIPair], progress: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(the judge's own 'entailed' decision, the pairs' gold one) per pair, as booleans."""
    judge = get_judge(judge)
    probs = probabilities([p.premise for p in pairs], [p.hypothesis for p in pairs], judge, progress)
    return entailed(probs, judge).astype(bool), np.array([p.label == "entailment" for p in pairs])


def _f1(said: np.ndarray, gold: np.ndarray) -> float:
    """F1 (%) of the 'entailed' decision: 2 TP / (decided + truly entailed); NaN when both are empty."""
    said, gold = np.asarray(said, dtype=bool), np.asarray(gold, dtype=bool)
    total = said.sum() + gold.sum()
    return float(200 * (said & gold).sum() / total) if total else float("nan")


def _questions(pairs: Sequence[NLIPair]) -> list[str]:
    """Each pair's question (the cluster its bootstrap resamples), its source where it names none."""
    return [str(p.extra.get("question_id") or p.source) for p in pairs]


def decision_scores(said: Sequence[bool], gold: Sequence[bool], questions: Sequence[str],
                    seed: int = 0) -> dict[str, dict[str, float]]:
    """The 'entailed' decision against the gold: accuracy, precision and recall with Wilson intervals (0/1 outcomes;
    `clopper_pearson` gives the exact ones), and F1 with a bootstrap over questions (pairs of one question move together)."""
    said, gold = np.asarray(said, dtype=bool), np.asarray(gold, dtype=bool)
    decision = _decision_intervals(said, gold, seed=seed)
    for key, hits, n in (("agreement", (said == gold).sum(), said.size), ("entail_precision", (said & gold).sum(), said.sum()),
                         ("entail_recall", (said & gold).sum(), gold.sum())):
        decision[key]["exact"] = [100 * x for x in stats.clopper_pearson(int(hits), int(n))]
    return {"accuracy": decision["agreement"], "entail_precision": decision["entail_precision"],
            "entail_recall": decision["entail_recall"],
            "entail_f1": stats.cluster_bootstrap(_f1, questions, said, gold, seed=seed)}


def decision_accuracy(judge: Judge | str | None, pairs: Sequence[NLIPair], seed: int = 0,
                      progress: bool = False) -> dict[str, Any]:
    """How often the judge's own decision f (`nli.entailed`) agrees with the gold 'is entailed' (`decision_scores`):
    accuracy, entailment precision and recall (over pairs decided / labelled entailed), and their F1."""
    if not pairs:
        raise ValueError("decision_accuracy of no pairs")
    judge = get_judge(judge)
    said, gold = decisions(judge, pairs, progress)
    return {"judge": judge.name, "threshold": getattr(judge, "threshold", None),
            **decision_scores(said, gold, _questions(pairs), seed=seed)}


def f1_difference(judge_a: Judge | str | None, judge_b: Judge | str | None, pairs: Sequence[NLIPair],
                  seed: int = 0) -> dict[str, float]:
    """F1 of judge a's 'entailed' decision minus judge b's on the same pairs, with a paired bootstrap over questions."""
    said_a, gold = decisions(get_judge(judge_a), pairs)
    said_b, _ = decisions(get_judge(judge_b), pairs)
    return stats.cluster_bootstrap(lambda a, b, g: _f1(a, g) - _f1(b, g), _questions(pairs), said_a, said_b, gold,
                                   seed=seed)


def judge_note(judge: Judge | str | None, seed: int = 0) -> str:
    """One line for beside a credibility table: how far the judge's decision agrees with the key-fact pairs' labels
    (which AI coding agents made: `KEYFACT_PAIRS_PROVENANCE`)."""
    d = decision_accuracy(judge, load_keyfact_pairs(), seed=seed)
    fmt = stats.format_interval
    rule = "" if d["threshold"] is None else f" (decides 'entailed' at P > {d['threshold']:.2f})"
    return (f"judge {d['judge']}{rule} on {d['accuracy']['n']} key-fact pairs labelled by AI coding agents "
            f"(docs/judges.md): agrees with their labels {fmt(d['accuracy'])}%; when it says 'entailed' it is right "
            f"{fmt(d['entail_precision'])}% "
            f"(n={d['entail_precision']['n']}); of the truly entailed it finds {fmt(d['entail_recall'])}% "
            f"(n={d['entail_recall']['n']}); F1 of 'entailed' {fmt(d['entail_f1'])}" + test_note(judge, seed)
            + "; " + people_note(judge, seed))


def ledger_note(judge: Judge | str | None, seed: int = 0) -> str:
    """The judge line a credibility row of the claims ledger carries: its frozen key-fact test-set rates (`test_note`,
    what the judge-corrected columns use) and its agreement with people's FACTUAL labels (`people_note`)."""
    return f"judge {get_judge(judge).name}" + test_note(judge, seed) + "; " + people_note(judge, seed)


def people_note(judge: Judge | str | None, seed: int = 0) -> str:
    """The judge against people's FACTUAL labels (`covlib.nli.people`), claim by claim as the credibility metrics
    judge: AUC and balanced accuracy with intervals over questions; says so where the labels are not here."""
    if not factuality_path().is_file():
        return f"its agreement with people's labels is not measured here (no {factuality_path()})"
    records = load_factuality()
    a = people_agreement(records, *factual_scores(records, judge, "claims"), seed=seed)
    fmt = stats.format_interval
    return (f"against people's FACTUAL labels of {a['auc']['n']} GPT-3 rationales ({a['auc']['clusters']} Adversarial "
            f"HotpotQA questions, Ye & Durrett 2022; docs/judges.md), each sentence against the paragraphs: AUC "
            f"{fmt(a['auc'], 2)}, balanced accuracy {fmt(a['balanced_accuracy'], 2)} (0.50 is chance; intervals by "
            "question)")


def test_note(judge: Judge | str | None, seed: int = 0) -> str:
    """The judge's weighted sensitivity and specificity on the frozen key-fact test set, per premise kind, for `judge_note`."""
    rates = judge_rates(judge)
    fmt = stats.format_interval
    parts = []
    for kind, label in (("answer", "whole answers"), ("sentence", "single sentences")):
        w = rates[kind].weighted(seed=seed)
        parts.append(f"on {label} ({w['sensitivity']['n']} pairs) it finds {fmt(w['sensitivity'])}% of the entailed "
                     f"and rejects {fmt(w['specificity'])}% of the rest")
    n = sum(r.n_pairs for r in rates.values())
    return (f"; on the frozen test set ({n} pairs of other questions, weighted to the notebooks' mix) "
            + "; ".join(parts) + ": the judge-corrected columns fold these test-set rates in, stratum by stratum (not "
            "the agreement with people, which is measured on another task)")
