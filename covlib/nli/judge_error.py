"""A judge's measured error on the frozen key-fact test set, and key-fact rates corrected for it (Rogan-Gladen).

Key-fact recall and precision count a judge's "entailed" decisions. A judge that says "entailed" where the labels
do not (1 − specificity) inflates them; one that misses entailed pairs (1 − sensitivity) deflates them. With the
judge's sensitivity Se and specificity Sp measured on labelled pairs, Rogan and Gladen (1978) recover the true rate
from the observed one: π = (p + Sp − 1) / (Se + Sp − 1), clipped to [0, 1]. Its interval here resamples both the
metric's questions and the test set's questions (a percentile bootstrap), so it holds the judge's measurement error
as well as the metric's.

The test pairs were drawn by stratum (`scripts/keyfact_test_pairs.py`); each carries the weight that brings its
stratum back to its share of the notebooks' pairs, and Se / Sp are weighted means, measured apart for whole answers
(recall's premise) and single sentences (precision's): the trained judge rejects 96% of the non-entailed sentence
pairs but only 41% of the non-entailed whole-answer pairs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from covlib.core import stats
from covlib.nli.base import Judge
from covlib.nli.labelled import NLIPair, load_keyfact_test_pairs
from covlib.nli.registry import get_judge
from covlib.nli.scoring import entailed, probabilities


@dataclass(frozen=True)
class JudgeRates:
    """Per test question, the weighted sums [said & entailed, entailed, not said & not entailed, not entailed]."""

    judge: str
    sums: np.ndarray  # (questions, 4)
    n_pairs: int

    @property
    def sensitivity(self) -> float:
        """Weighted share of the entailed pairs the judge calls entailed."""
        total = self.sums.sum(axis=0)
        return float(total[0] / total[1]) if total[1] else float("nan")

    @property
    def specificity(self) -> float:
        """Weighted share of the pairs not entailed that the judge does not call entailed."""
        total = self.sums.sum(axis=0)
        return float(total[2] / total[3]) if total[3] else float("nan")

    @property
    def precision(self) -> float:
        """Weighted share of the judge's "entailed" decisions that are entailed."""
        tp, pos, tn, neg = self.sums.sum(axis=0)
        return float(tp / (tp + neg - tn)) if tp + neg - tn else float("nan")

    def weighted(self, seed: int = 0, n_boot: int = stats.N_BOOT) -> dict[str, dict[str, float]]:
        """Weighted sensitivity, specificity and precision in %, each with a 95% interval resampling questions."""
        rng = np.random.default_rng(seed)
        b = self.sums[rng.integers(0, len(self.sums), (n_boot, len(self.sums)))].sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            draws = {"sensitivity": b[:, 0] / b[:, 1], "specificity": b[:, 2] / b[:, 3],
                     "precision": b[:, 0] / (b[:, 0] + b[:, 3] - b[:, 2])}
        out = {}
        for name, d in draws.items():
            d = d[np.isfinite(d)]
            low, high = np.quantile(d, [0.025, 0.975]) if d.size >= n_boot // 2 else (np.nan, np.nan)
            out[name] = {"value": 100 * getattr(self, name), "low": 100 * float(low), "high": 100 * float(high),
                         "n": self.n_pairs, "clusters": len(self.sums)}
        return out

    def draws(self, seed: int = 0, n_boot: int = stats.N_BOOT) -> tuple[np.ndarray, np.ndarray]:
        """Sensitivity and specificity of `n_boot` resamples of the test set's questions."""
        rng = np.random.default_rng(seed)
        picked = self.sums[rng.integers(0, len(self.sums), (n_boot, len(self.sums)))].sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return picked[:, 0] / picked[:, 1], picked[:, 2] / picked[:, 3]


def rates_from_decisions(judge: str, said: Sequence[bool], pairs: Sequence[NLIPair]) -> JudgeRates:
    """`JudgeRates` from a judge's decisions on labelled pairs (weights and questions read from each pair's extra)."""
    said = np.asarray(said, dtype=bool)
    if said.size != len(pairs):
        raise ValueError(f"{said.size} decisions for {len(pairs)} pairs")
    gold = np.array([p.label == "entailment" for p in pairs])
    w = np.array([float(p.extra.get("weight", 1.0)) for p in pairs])
    questions = [p.extra.get("question_id", p.source) for p in pairs]
    order = list(dict.fromkeys(questions))
    sums = np.zeros((len(order), 4))
    for q, s, g, weight in zip(questions, said, gold, w):
        sums[order.index(q)] += weight * np.array([s and g, g, (not s) and (not g), not g], dtype=float)
    return JudgeRates(judge, sums, len(pairs))


PREMISE_KINDS = {"answer": "whole answers (key-fact recall's premise)",
                 "sentence": "answer sentences (key-fact precision's premise)"}


def judge_rates(judge: Judge | str | None, pairs: Sequence[NLIPair] | None = None,
                progress: bool = False) -> dict[str, JudgeRates]:
    """The judge's error on the frozen key-fact test set (or on `pairs`) by premise kind (`PREMISE_KINDS`): a judge
    errs differently on a whole answer than on one sentence, so recall is corrected with the first, precision the second."""
    judge = get_judge(judge)
    pairs = load_keyfact_test_pairs() if pairs is None else list(pairs)
    probs = probabilities([p.premise for p in pairs], [p.hypothesis for p in pairs], judge, progress)
    said = entailed(probs, judge).astype(bool)
    out = {}
    for kind in PREMISE_KINDS:
        idx = [i for i, p in enumerate(pairs) if p.kind == kind]
        if idx:
            out[kind] = rates_from_decisions(judge.name, said[idx], [pairs[i] for i in idx])
    return out


def rogan_gladen(observed: Any, sensitivity: Any, specificity: Any) -> np.ndarray:
    """(p + Sp − 1) / (Se + Sp − 1) clipped to [0, 1]; NaN where Se + Sp ≤ 1 (the judge tells nothing apart)."""
    p, se, sp = (np.asarray(x, dtype=float) for x in (observed, sensitivity, specificity))
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.clip((p + sp - 1) / (se + sp - 1), 0.0, 1.0)
    return np.where(se + sp > 1, out, np.nan)


def corrected_mean(values: Sequence[float], rates: JudgeRates, facts_per_item: float = 1.0, scale: float = 100,
                   seed: int = 0, n_boot: int = stats.N_BOOT) -> dict[str, Any]:
    """The mean of per-question rates in [0, 1] corrected for the judge's error, with a 95% bootstrap interval.

    Where the observed mean is below the judge's false-positive rate on the test set (1 − Sp^k), the correction
    would clip to 0 with an interval of [0, 0]; the judge then errs differently on these answers (shorter ones,
    other questions) than on the test pairs, and the value is NaN with a `note` saying so, not a confident 0.
    `facts_per_item` > 1 is for key-fact precision, where an answer sentence counts when the judge calls *any* of its
    question's key facts entailed: a sentence then escapes a false "entailed" only if every fact does, so its
    specificity is Sp^k (k the mean number of key facts; independence assumed), its sensitivity Se.
    """
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return {"value": float("nan"), "low": float("nan"), "high": float("nan"), "n": 0, "judge": rates.judge}
    rng = np.random.default_rng(seed + 1)
    means = v[rng.integers(0, v.size, (n_boot, v.size))].mean(axis=1)
    se_b, sp_b = rates.draws(seed, n_boot)
    draws = rogan_gladen(means, se_b, sp_b ** facts_per_item)
    draws = draws[np.isfinite(draws)]
    value = float(rogan_gladen(v.mean(), rates.sensitivity, rates.specificity ** facts_per_item))
    low, high = (np.quantile(draws, [0.025, 0.975]) if draws.size >= n_boot // 2 else (np.nan, np.nan))
    floor = 1 - rates.specificity ** facts_per_item  # what the judge reports when nothing is entailed
    out = {"value": value * scale, "low": float(low) * scale, "high": float(high) * scale, "n": int(v.size),
           "observed": float(v.mean()) * scale, "floor": floor * scale, "sensitivity": rates.sensitivity,
           "specificity": rates.specificity, "test_pairs": rates.n_pairs, "judge": rates.judge}
    if v.mean() < floor:  # below what the judge's false "entailed" alone would give: its error here is not the test's
        out.update(value=float("nan"), low=float("nan"), high=float("nan"),
                   note=f"observed {100 * v.mean():.1f}% is below the judge's false-positive rate on the test set "
                        f"({100 * floor:.1f}%): it errs differently on these answers, so no correction is given")
    return out
