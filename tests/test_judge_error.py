"""The judge's error on labelled key-fact pairs, and key-fact rates corrected for it (Rogan-Gladen)."""

from __future__ import annotations

import numpy as np
import pytest

from covlib import nli
from covlib.core import stats
from covlib.nli.evaluation import decision_accuracy, decision_scores
from covlib.nli.labelled import NLIPair, load_keyfact_pairs


def _pairs(gold: list[bool], questions: list[str], weights: list[float] | None = None) -> list[NLIPair]:
    weights = weights or [1.0] * len(gold)
    return [NLIPair("p", "h", "entailment" if g else "neutral", extra={"question_id": q, "weight": w})
            for g, q, w in zip(gold, questions, weights)]


def test_rogan_gladen_recovers_the_true_rate_and_refuses_a_useless_judge():
    # true rate 0.3, Se 0.9, Sp 0.8: the judge reports 0.3 * 0.9 + 0.7 * 0.2 = 0.41
    assert nli.rogan_gladen(0.41, 0.9, 0.8) == pytest.approx(0.3)
    assert nli.rogan_gladen(0.05, 0.9, 0.8) == 0.0  # below the judge's false-positive floor: clipped
    assert np.isnan(nli.rogan_gladen(0.5, 0.5, 0.5))  # Se + Sp = 1 tells nothing apart


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


def test_corrected_mean_covers_the_true_rate():
    """Simulated metric and judge: the corrected interval covers the true rate about 95% of the time, the
    uncorrected mean almost never (the judge inflates it)."""
    rng = np.random.default_rng(0)
    se, sp, truth, covered, raw_covered = 0.8, 0.75, 0.25, 0, 0
    for sim in range(120):
        questions = [f"q{i // 10}" for i in range(400)]
        gold = rng.random(400) < 0.3
        said = np.where(gold, rng.random(400) < se, rng.random(400) > sp)
        rates = nli.rates_from_decisions("sim", said, _pairs(list(gold), questions))
        true_values = rng.random(300) < truth
        observed = np.where(true_values, rng.random(300) < se, rng.random(300) > sp).astype(float)
        est = nli.corrected_mean(observed, rates, seed=sim, n_boot=600)
        covered += est["low"] <= 100 * truth <= est["high"]
        raw = stats.mean_interval(observed, scale=100)
        raw_covered += raw["low"] <= 100 * truth <= raw["high"]
    assert covered / 120 >= 0.88
    assert raw_covered / 120 <= 0.3


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


def test_recall_is_corrected_with_answer_rates_and_precision_with_sentence_rates():
    from covlib.papers.credibility.intervals import judge_corrected

    answer = nli.rates_from_decisions("j", [True, True, True, False], _pairs([True, True, False, False], list("abab")))
    sentence = nli.rates_from_decisions("j", [True, False, False, False], _pairs([True, True, False, False], list("abab")))
    rows = [{"recall": 0.6, "precision": 0.4, "n_key_facts": 2}, {"recall": 0.8, "precision": 0.2, "n_key_facts": 2}]
    out = judge_corrected(rows, {"answer": answer, "sentence": sentence})
    assert out["R_corrected"]["value"] == pytest.approx(100 * nli.rogan_gladen(0.7, 1.0, 0.5))
    assert out["P_corrected"]["value"] == pytest.approx(100 * nli.rogan_gladen(0.3, 0.5, 1.0 ** 2))
    assert out["R_corrected"]["sensitivity"] == 1.0 and out["P_corrected"]["sensitivity"] == 0.5


def test_a_rate_below_the_judges_false_positive_floor_gets_no_correction():
    # Sp 0.5: the judge alone says "entailed" for half the non-entailed pairs; an observed 20% cannot come from it
    rates = nli.rates_from_decisions("j", [True, True, True, False], _pairs([True, True, False, False], list("abab")))
    est = nli.corrected_mean([0.2, 0.2, 0.2, 0.2], rates, n_boot=200)
    assert np.isnan(est["value"]) and est["floor"] == pytest.approx(50.0) and "below" in est["note"]
    assert stats.format_interval(est) == "n/a"
    above = nli.corrected_mean([0.8, 0.7, 0.9, 0.8], rates, n_boot=200)
    assert above["value"] == pytest.approx(100 * nli.rogan_gladen(0.8, 1.0, 0.5)) and "note" not in above
