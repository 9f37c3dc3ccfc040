"""A judge's measured error on the frozen key-fact test set, and key-fact rates corrected for it.

Key-fact recall and precision count a judge's "entailed" decisions. A judge that says "entailed" where the labels
do not inflates them; one that misses entailed pairs deflates them. The test set measures, for each stratum of pairs
(`stratum`: how much of the key fact's wording the premise holds, and number conflicts, computed from the text alone),
the judge's sensitivity and specificity there (`JudgeRates.error_posteriors`). A table's own pairs fall into the same
strata; its share of "entailed" decisions in a stratum, with those two rates, gives the share truly entailed there
(Rogan and Gladen 1978, per stratum, kept in [0, 1]), and with it each decision's probability of being right
(`covlib.papers.credibility.intervals.judge_corrected`). Sensitivity and specificity are what carries from the test
set to a table: the probability that an "entailed" is right depends on how many pairs are truly entailed, which
differs between tables (0 of 32 closed-book whole-answer test pairs are entailed, 31 of 76 with two references).

Rates are Jeffreys posteriors, Beta(x + 1/2, n - x + 1/2), their uncertainty drawn into intervals. A stratum with
fewer than `MIN_CELL` test pairs of a class borrows that class's rate pooled over every stratum (`pooled`, said in the
tables): no rate rests on a handful of pairs or on the prior alone.

Rates are measured apart for whole answers (recall's premise) and single sentences (precision's): the trained judge
rejects 96% of the non-entailed sentence pairs but 41% of the non-entailed whole-answer pairs. Sensitivity,
specificity and precision weighted back to the notebooks' mix of pairs (`JudgeRates.weighted`) describe the judge.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from covlib.core import stats
from covlib.core.text import FUNCTION_WORDS, overlap_words
from covlib.nli.base import Judge
from covlib.nli.labelled import NLIPair, load_keyfact_test_pairs
from covlib.nli.registry import get_judge
from covlib.nli.scoring import entailed, probabilities


STRATA = ("conflict", "high", "mid", "low")
TEST_SET = "the frozen key-fact test set (00b)"
MIN_CELL = 10  # test pairs of a class (entailed, not entailed) a stratum needs to carry its own rate of that class
_NUMBER = re.compile(r"\b\d[\d,.]*\b")


def share(premise: str, fact: str) -> float:
    """The share of the fact's content words (not `FUNCTION_WORDS`) found among the premise's words (`overlap_words`)."""
    content = [w for w in overlap_words(fact) if w not in FUNCTION_WORDS]
    have = set(overlap_words(premise))
    return sum(w in have for w in content) / len(content) if content else 0.0


def stratum(premise: str, fact: str) -> str:
    """The pair's stratum: conflict (share >= 0.4 and the fact has a number the premise lacks while the premise has
    another), else high (share >= 0.6), mid (>= 0.3) or low; the test set was drawn, and is corrected, by it."""
    s = share(premise, fact)
    numbers_fact, numbers_premise = set(_NUMBER.findall(fact)), set(_NUMBER.findall(premise))
    if s >= 0.4 and numbers_fact - numbers_premise and numbers_premise - numbers_fact:
        return "conflict"
    return "high" if s >= 0.6 else "mid" if s >= 0.3 else "low"


@dataclass(frozen=True)
class JudgeRates:
    """Per test question, the weighted sums [said & entailed, entailed, not said & not entailed, not entailed]; per
    stratum, the counts [said & entailed, said & not, not said & entailed, not said & not]."""

    judge: str
    sums: np.ndarray  # (questions, 4)
    n_pairs: int
    cells: dict = field(default_factory=dict)  # stratum -> np.array([tp, fp, fn, tn])
    measured_on: str = TEST_SET  # whose answers the labelled pairs came from: rates carry only to answers like them

    def error_posteriors(self, min_cell: int = MIN_CELL) -> dict[str, dict[str, Any]]:
        """Per stratum, Jeffreys Beta(a, b) parameters of the judge's sensitivity and specificity there; a stratum
        with fewer than `min_cell` entailed (not entailed) test pairs takes that rate pooled over every stratum,
        named in its `pooled` list."""
        total = np.sum([self.cells.get(name, np.zeros(4)) for name in STRATA], axis=0)
        out = {}
        for name in STRATA:
            tp, fp, fn, tn = self.cells.get(name, np.zeros(4))
            pooled = []
            if tp + fn < min_cell:
                tp, fn = total[0], total[2]
                pooled.append("sensitivity")
            if fp + tn < min_cell:
                fp, tn = total[1], total[3]
                pooled.append("specificity")
            out[name] = {"sensitivity": (tp + 0.5, fn + 0.5), "specificity": (tn + 0.5, fp + 0.5), "pooled": pooled}
        return out

    def error_draws(self, n_draws: int, seed: int = 0, min_cell: int = MIN_CELL) -> tuple[np.ndarray, np.ndarray]:
        """(sensitivity, specificity), each (strata, 1 + n_draws) in `STRATA` order: the posterior means, then draws."""
        rng = np.random.default_rng(seed)
        post = self.error_posteriors(min_cell)
        out = []
        for rate in ("sensitivity", "specificity"):
            out.append(np.array([[a / (a + b), *rng.beta(a, b, n_draws)]
                                 for a, b in (post[name][rate] for name in STRATA)]))
        return out[0], out[1]

    def rates(self) -> dict[str, float]:
        """Weighted sensitivity, specificity, precision and F1 of "entailed" over the whole set (`_weighted_rates`)."""
        return {name: float(v[0]) for name, v in _weighted_rates(self.sums.sum(axis=0)[None, :]).items()}

    @property
    def sensitivity(self) -> float:
        """Weighted share of the entailed pairs the judge calls entailed."""
        return self.rates()["sensitivity"]

    @property
    def specificity(self) -> float:
        """Weighted share of the pairs not entailed that the judge does not call entailed."""
        return self.rates()["specificity"]

    @property
    def precision(self) -> float:
        """Weighted share of the judge's "entailed" decisions that are entailed."""
        return self.rates()["precision"]

    def weighted(self, seed: int = 0, n_boot: int = stats.N_BOOT) -> dict[str, dict[str, float]]:
        """Weighted sensitivity, specificity, precision and F1 in %, each with a 95% interval resampling questions."""
        rng = np.random.default_rng(seed)
        draws = _weighted_rates(self.sums[rng.integers(0, len(self.sums), (n_boot, len(self.sums)))].sum(axis=1))
        return {name: _estimate(value, draws[name], n_boot, self) for name, value in self.rates().items()}


def _estimate(value: float, draws: np.ndarray, n_boot: int, rates: JudgeRates) -> dict[str, float]:
    """A weighted rate in % with the 2.5 and 97.5 percentiles of its finite draws (NaN when under half are finite)."""
    d = draws[np.isfinite(draws)]
    low, high = np.quantile(d, [0.025, 0.975]) if d.size >= n_boot // 2 else (np.nan, np.nan)
    return {"value": 100 * value, "low": 100 * float(low), "high": 100 * float(high), "n": rates.n_pairs,
            "clusters": len(rates.sums)}


def _weighted_rates(b: np.ndarray) -> dict[str, np.ndarray]:
    """Sensitivity, specificity, precision and F1 of "entailed" from rows of weighted sums [tp, pos, tn, neg]."""
    with np.errstate(invalid="ignore", divide="ignore"):
        sens, spec, prec = b[:, 0] / b[:, 1], b[:, 2] / b[:, 3], b[:, 0] / (b[:, 0] + b[:, 3] - b[:, 2])
        return {"sensitivity": sens, "specificity": spec, "precision": prec, "f1": 2 * prec * sens / (prec + sens)}


def weighted_difference(a: JudgeRates, b: JudgeRates, seed: int = 0, n_boot: int = stats.N_BOOT) -> dict[str, dict]:
    """Judge a's weighted rates minus judge b's on the same pairs (same questions, same order), in points, each with
    a paired 95% interval resampling questions."""
    if a.sums.shape != b.sums.shape or a.n_pairs != b.n_pairs:
        raise ValueError("a paired difference needs both judges' rates on the same pairs")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(a.sums), (n_boot, len(a.sums)))
    da, db = _weighted_rates(a.sums[idx].sum(axis=1)), _weighted_rates(b.sums[idx].sum(axis=1))
    pa, pb = a.rates(), b.rates()
    return {name: _estimate(pa[name] - pb[name], da[name] - db[name], n_boot, a) for name in pa}


def rates_from_decisions(judge: str, said: Sequence[bool], pairs: Sequence[NLIPair],
                         measured_on: str = TEST_SET) -> JudgeRates:
    """`JudgeRates` from a judge's decisions on labelled pairs (weights and questions read from each pair's extra)."""
    said = np.asarray(said, dtype=bool)
    if said.size != len(pairs):
        raise ValueError(f"{said.size} decisions for {len(pairs)} pairs")
    gold = np.array([p.label == "entailment" for p in pairs])
    w = np.array([float(p.extra.get("weight", 1.0)) for p in pairs])
    questions = [p.extra.get("question_id", p.source) for p in pairs]
    row = {q: i for i, q in enumerate(dict.fromkeys(questions))}
    sums = np.zeros((len(row), 4))
    cells: dict[str, np.ndarray] = {}
    for q, s, g, weight, p in zip(questions, said, gold, w, pairs):
        sums[row[q]] += weight * np.array([s and g, g, (not s) and (not g), not g], dtype=float)
        cell = cells.setdefault(str(p.extra.get("stratum", "")), np.zeros(4))
        cell[[s and g, s and not g, (not s) and g, (not s) and (not g)].index(True)] += 1
    return JudgeRates(judge, sums, len(pairs), cells, measured_on)


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
