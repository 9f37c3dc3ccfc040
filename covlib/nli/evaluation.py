"""How well a judge agrees with gold labels: 3-way scores on labelled pairs, and its decision against people's.

`evaluate` / `nli_scores` / `nli_confusion`: accuracy, macro-F1 and entailment AUC of the argmax label
(held-out FEVER pairs, the credibility fixture). `decision_accuracy` / `f1_difference` / `judge_note`:
how often the judge's own decision f (`entailed`) agrees with people's "is entailed" on the
hand-labelled key-fact pairs, with 95% intervals; the credibility tables print `judge_note`.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from covlib.core import metrics
from covlib.nli.base import LABELS, Judge
from covlib.nli.labelled import NLIPair, load_keyfact_pairs
from covlib.nli.registry import get_judge
from covlib.nli.scoring import entailed, probabilities


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


def _decisions(judge: Judge, pairs: Sequence[NLIPair], progress: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(the judge's own 'entailed' decision, people's) per pair, as booleans."""
    probs = probabilities([p.premise for p in pairs], [p.hypothesis for p in pairs], judge, progress)
    return entailed(probs, judge).astype(bool), np.array([p.label == "entailment" for p in pairs])


def _f1(said: np.ndarray, gold: np.ndarray) -> float:
    """F1 (%) of the 'entailed' decision: 2 TP / (decided + truly entailed); NaN when both are empty."""
    said, gold = np.asarray(said, dtype=bool), np.asarray(gold, dtype=bool)
    total = said.sum() + gold.sum()
    return float(200 * (said & gold).sum() / total) if total else float("nan")


def decision_accuracy(judge: Judge | str | None, pairs: Sequence[NLIPair], seed: int = 0,
                      progress: bool = False) -> dict[str, dict[str, float]]:
    """How often the judge's own decision f (`nli.entailed`) agrees with the gold 'is entailed', with 95% intervals:
    accuracy, entailment precision and recall (over pairs decided / labelled entailed), and their F1."""
    if not pairs:
        raise ValueError("decision_accuracy of no pairs")
    judge = get_judge(judge)
    said, gold = _decisions(judge, pairs, progress)
    hit = (said == gold).astype(float)
    return {
        "judge": judge.name,
        "threshold": getattr(judge, "threshold", None),
        "accuracy": metrics.mean_interval(hit, scale=100, seed=seed),
        "entail_precision": metrics.mean_interval(hit[said], scale=100, seed=seed),
        "entail_recall": metrics.mean_interval(hit[gold], scale=100, seed=seed),
        "entail_f1": metrics.bootstrap(_f1, said, gold, seed=seed),
    }


def f1_difference(judge_a: Judge | str | None, judge_b: Judge | str | None, pairs: Sequence[NLIPair],
                  seed: int = 0) -> dict[str, float]:
    """F1 of judge a's 'entailed' decision minus judge b's on the same pairs, with a paired bootstrap interval."""
    said_a, gold = _decisions(get_judge(judge_a), pairs)
    said_b, _ = _decisions(get_judge(judge_b), pairs)
    return metrics.bootstrap(lambda a, b, g: _f1(a, g) - _f1(b, g), said_a, said_b, gold, seed=seed)


def judge_note(judge: Judge | str | None, seed: int = 0) -> str:
    """One line for beside a credibility table: how far the judge's decision agrees with people on the key-fact pairs."""
    d = decision_accuracy(judge, load_keyfact_pairs(), seed=seed)
    fmt = metrics.format_interval
    rule = "" if d["threshold"] is None else f" (decides 'entailed' at P > {d['threshold']:.2f})"
    return (f"judge {d['judge']}{rule} on {d['accuracy']['n']} hand-labelled key-fact pairs: agrees with people "
            f"{fmt(d['accuracy'])}%; when it says 'entailed' it is right {fmt(d['entail_precision'])}% "
            f"(n={d['entail_precision']['n']}); of the truly entailed it finds {fmt(d['entail_recall'])}% "
            f"(n={d['entail_recall']['n']}); F1 of 'entailed' {fmt(d['entail_f1'])}")
