"""The judge's error on labelled key-fact pairs, and key-fact rates corrected for it (per stratum and decision)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from covlib import nli
from covlib.core import stats
from covlib.nli.evaluation import decision_accuracy, decision_scores
from covlib.nli import labelled as L
from covlib.nli.labelled import NLIPair, load_keyfact_pairs


def _pairs(gold: list[bool], questions: list[str], weights: list[float] | None = None,
           strata: list[str] | None = None) -> list[NLIPair]:
    weights = weights or [1.0] * len(gold)
    strata = strata or ["high"] * len(gold)
    return [NLIPair("p", "h", "entailment" if g else "neutral", extra={"question_id": q, "weight": w, "stratum": s})
            for g, q, w, s in zip(gold, questions, weights, strata)]


def test_rates_weight_each_stratum_back():
    # question a: 2 entailed pairs, the judge finds 1; question b: 2 not entailed, one of weight 3 called entailed
    pairs = _pairs([True, True, False, False], ["a", "a", "b", "b"], [1, 1, 3, 1])
    rates = nli.rates_from_decisions("j", [True, False, True, False], pairs)
    assert rates.sensitivity == pytest.approx(0.5)
    assert rates.specificity == pytest.approx(1 / 4)  # weighted: 1 of weight 4 right
    assert rates.sums.shape == (2, 4)
    assert rates.precision == pytest.approx(1 / 4)  # 1 right "entailed" of weight 1, 1 wrong of weight 3
    weighted = rates.weighted(n_boot=200)
    assert weighted["precision"]["value"] == pytest.approx(25.0) and weighted["sensitivity"]["clusters"] == 2
    with pytest.raises(ValueError, match="decisions for"):
        nli.rates_from_decisions("j", [True], pairs)


def test_cluster_bootstrap_widens_for_correlated_pairs():
    # ten questions, each all right or all wrong: resampling pairs would pretend 100 independent outcomes
    values = np.repeat([1, 0, 1, 1, 0, 1, 0, 1, 1, 0], 10).astype(float)
    questions = np.repeat(np.arange(10), 10)
    by_pair = stats.bootstrap(np.mean, values, seed=0)
    by_question = stats.cluster_bootstrap(np.mean, questions, values, seed=0)
    assert by_question["clusters"] == 10 and by_question["n"] == 100
    assert by_question["high"] - by_question["low"] > 2 * (by_pair["high"] - by_pair["low"])
    with pytest.raises(ValueError, match="cluster ids"):
        stats.cluster_bootstrap(np.mean, questions[:5], values)


def test_decision_scores_give_exact_intervals_and_an_f1_over_questions():
    gold = np.array([True] * 19 + [False] * 81)
    said = gold.copy()
    said[19:30] = True  # 11 false "entailed"
    questions = [f"q{i % 25}" for i in range(100)]
    d = decision_scores(said, gold, questions)
    # 19 of 19 found: the exact lower bound is 82.4%, never [100, 100]
    assert d["entail_recall"]["exact"][0] == pytest.approx(82.35, abs=0.01)
    assert d["entail_recall"]["low"] < 100
    assert d["entail_precision"]["n"] == 30
    assert d["entail_f1"]["clusters"] == 25


def test_decision_accuracy_on_the_development_pairs_resamples_questions():
    d = decision_accuracy("overlap", load_keyfact_pairs())
    assert d["entail_f1"]["clusters"] == 60  # the development pairs' questions
    assert d["entail_recall"]["exact"][0] < d["entail_recall"]["value"]


def test_rates_are_measured_apart_for_whole_answers_and_sentences():
    rates = nli.judge_rates("overlap")
    assert set(rates) == {"answer", "sentence"}
    assert rates["answer"].n_pairs + rates["sentence"].n_pairs == 581
    # the heuristic says "entailed" for a long on-topic answer far more often than for one sentence
    assert rates["sentence"].specificity > rates["answer"].specificity + 0.1




def test_the_probability_of_entailment_given_a_decision_is_read_per_stratum():
    # high: 3 said (2 right), 1 not said (entailed); low: 4 not said, none entailed
    pairs = _pairs([True, True, False, True, False, False, False, False], list("aabbabab"),
                   strata=["high"] * 4 + ["low"] * 4)
    rates = nli.rates_from_decisions("j", [True, True, True, False, False, False, False, False], pairs)
    assert rates.entailed_given("high", True) == pytest.approx(2.5 / 4)  # Jeffreys: (2 + 1/2) / (3 + 1)
    assert rates.entailed_given("high", False) == pytest.approx(1.5 / 2)
    assert rates.entailed_given("low", False) == pytest.approx(0.5 / 5)  # none seen: small, not zero
    assert rates.entailed_given("mid", True) == pytest.approx(0.5)  # nothing measured: the prior's mean
    draws = rates.entailed_draws(4000, seed=1)
    assert draws[("low", False)].mean() == pytest.approx(0.1, abs=0.02) and draws[("low", False)].max() > 0.3


def test_the_stratum_of_a_pair_is_what_the_test_set_was_drawn_by():
    assert nli.stratum("Paris is the capital of France.", "Paris is the capital of France.") == "high"
    assert nli.stratum("He was born in 1950 in Ohio.", "He was born in 1956 in Ohio.") == "conflict"
    assert nli.stratum("The film stars Tom.", "Rome lies on the Tiber river.") == "low"
    rows = [json.loads(line) for line in L.keyfact_test_path().read_text(encoding="utf-8").splitlines()[1:]]
    assert all(nli.stratum(r["premise"], r["hypothesis"]) == r["stratum"] for r in rows)


def _table_row(recall_pairs, precision_pairs, n_sentences):
    said_r = [s for _, s in recall_pairs]
    by = {}
    for j, _, s in precision_pairs:
        by[j] = by.get(j, False) or s
    return {"recall": float(np.mean(said_r)) if said_r else 0.0, "recall_pairs": recall_pairs,
            "precision": sum(by.values()) / n_sentences if n_sentences else 0.0, "precision_pairs": precision_pairs,
            "n_sentences": n_sentences, "n_key_facts": 2}


def test_each_decision_is_replaced_by_the_probability_its_pair_is_entailed():
    from covlib.papers.credibility.intervals import judge_corrected

    pairs = _pairs([True, False, False, False], list("abab"), strata=["high"] * 4)
    rates = nli.rates_from_decisions("j", [True, True, False, False], pairs)  # high: said 1 of 2 right, not said 0 of 2
    said_q, not_q = 1.5 / 3, 0.5 / 3
    rows = [_table_row([["high", True], ["high", False]], [[0, "high", True], [0, "high", False], [1, "high", False],
                                                           [1, "high", False]], 2),
            _table_row([], [], 0)]  # an empty answer: nothing judged, kept as 0
    out = judge_corrected(rows, {"answer": rates, "sentence": rates}, n_boot=300)
    assert out["R_corrected"]["value"] == pytest.approx(100 * ((said_q + not_q) / 2 + 0) / 2)
    first = 1 - (1 - said_q) * (1 - not_q)  # a sentence counts when any of its facts is entailed
    second = 1 - (1 - not_q) ** 2
    assert out["P_corrected"]["value"] == pytest.approx(100 * ((first + second) / 2 + 0) / 2)
    assert out["R_corrected"]["observed"] == pytest.approx(25.0)
    assert out["R_corrected"]["low"] <= out["R_corrected"]["value"] <= out["R_corrected"]["high"]


def test_the_corrected_recall_covers_the_truth_where_the_judges_error_depends_on_the_stratum():
    """A judge that says "entailed" for most high-overlap pairs and few others; a test set drawn by stratum; the
    corrected recall's interval covers the true recall about 95% of the time, the raw one almost never."""
    from covlib.papers.credibility.intervals import judge_corrected

    rng = np.random.default_rng(0)
    truth = {"high": 0.5, "mid": 0.05, "low": 0.0, "conflict": 0.1}  # P(entailed) per stratum
    said_if = {"high": (0.95, 0.6), "mid": (0.7, 0.2), "low": (0.5, 0.05), "conflict": (0.8, 0.4)}  # P(said | e / not)
    share = {"high": 0.2, "mid": 0.3, "low": 0.45, "conflict": 0.05}

    def sample(n, strata_p):
        names = rng.choice(list(strata_p), n, p=list(strata_p.values()))
        gold = np.array([rng.random() < truth[s] for s in names])
        said = np.array([rng.random() < said_if[s][0 if g else 1] for s, g in zip(names, gold)])
        return names, gold, said

    covered = raw_covered = 0
    true_recall = sum(share[s] * truth[s] for s in share)
    for sim in range(60):
        names, gold, said = sample(400, {s: 0.25 for s in share})
        rates = nli.rates_from_decisions("sim", said, _pairs(list(gold), [f"q{i % 40}" for i in range(400)],
                                                             strata=list(names)))
        rows = []
        for _ in range(100):  # 100 answers, 3 facts each
            n3, g3, s3 = sample(3, share)
            rows.append(_table_row([[str(n), bool(s)] for n, s in zip(n3, s3)], [], 0))
        est = judge_corrected(rows, {"answer": rates, "sentence": rates}, seed=sim, n_boot=400)["R_corrected"]
        covered += est["low"] <= 100 * true_recall <= est["high"]
        raw = stats.mean_interval([r["recall"] for r in rows], scale=100)
        raw_covered += raw["low"] <= 100 * true_recall <= raw["high"]
    assert covered / 60 >= 0.85
    assert raw_covered / 60 <= 0.3
