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




def test_sensitivity_and_specificity_are_read_per_stratum_and_pooled_where_a_class_is_sparse():
    # high: 12 entailed (said 9), 12 not (said 4); low: 12 not entailed (said 1), none entailed
    gold = [True] * 12 + [False] * 12 + [False] * 12
    said = [True] * 9 + [False] * 3 + [True] * 4 + [False] * 8 + [True] + [False] * 11
    pairs = _pairs(gold, [f"q{i % 6}" for i in range(36)], strata=["high"] * 24 + ["low"] * 12)
    post = nli.rates_from_decisions("j", said, pairs).error_posteriors()
    assert post["high"] == {"sensitivity": (9.5, 3.5), "specificity": (8.5, 4.5), "pooled": []}
    # low has 12 pairs, none entailed: its specificity is its own, its sensitivity the pooled one (not the prior's 0.5)
    assert post["low"] == {"sensitivity": (9.5, 3.5), "specificity": (11.5, 1.5),
                           "pooled": ["sensitivity"]}
    assert post["mid"]["pooled"] == ["sensitivity", "specificity"]  # nothing measured there: pooled both
    sens, spec = nli.rates_from_decisions("j", said, pairs).error_draws(4000, seed=1)
    assert sens.shape == spec.shape == (len(nli.STRATA), 4001)
    high = nli.STRATA.index("high")
    assert sens[high, 0] == pytest.approx(9.5 / 13) and sens[high, 1:].mean() == pytest.approx(9.5 / 13, abs=0.01)


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


def test_each_decision_is_replaced_by_its_probability_at_the_tables_own_share_entailed():
    from covlib.papers.credibility.intervals import entailed_given, judge_corrected

    # high: 20 entailed (said 16), 20 not (said 4): sensitivity and specificity 16.5/21 and 16.5/21 (Jeffreys)
    gold = [True] * 20 + [False] * 20
    said = [True] * 16 + [False] * 4 + [True] * 4 + [False] * 16
    rates = nli.rates_from_decisions("j", said, _pairs(gold, [f"q{i % 5}" for i in range(40)], strata=["high"] * 40))
    se = sp = 16.5 / 21
    # a table saying "entailed" to 3 of 4 high pairs: Rogan-Gladen's share (3/4 + sp - 1) / (se + sp - 1)
    share = (0.75 + sp - 1) / (se + sp - 1)
    yes, no = se * share / (se * share + (1 - sp) * (1 - share)), (1 - se) * share / ((1 - se) * share + sp * (1 - share))
    rows = [_table_row([["high", True], ["high", True]], [[0, "high", True], [1, "high", False]], 2),
            _table_row([["high", True], ["high", False]], [], 1),
            _table_row([], [], 0)]  # an empty answer: nothing judged, kept as 0
    out = judge_corrected(rows, {"answer": rates, "sentence": rates}, n_boot=300)
    assert out["R_corrected"]["value"] == pytest.approx(100 * (yes + (yes + no) / 2 + 0) / 3)
    assert out["R_corrected"]["observed"] == pytest.approx(100 * (1 + 0.5 + 0) / 3)
    assert out["R_corrected"]["low"] <= out["R_corrected"]["value"] <= out["R_corrected"]["high"]
    # the decisions' probabilities sum to the table's share entailed: nothing is lost or added
    q = entailed_given(np.array([[3.0]]), np.array([[4.0]]), np.array([[se]]), np.array([[sp]]))
    assert 3 * q[0, 0] + q[1, 0] == pytest.approx(4 * share)
    # a table with nothing said where the judge's specificity is high reads 0 entailed there, not a prior's floor
    assert entailed_given(np.array([[0.0]]), np.array([[12.0]]), np.array([[0.9]]), np.array([[0.96]]))[1, 0] == 0.0


def test_a_sparse_stratum_sets_no_floor_on_the_corrected_recall():
    """The old correction put P(entailed | not said) = 0.5/13 on every low-stratum pair (a Jeffreys prior on 12 pairs),
    +2.4 points on a recall it should leave alone: the corrected recall of a table whose judge is right is now its own."""
    from covlib.papers.credibility.intervals import judge_corrected

    test_gold = [True] * 30 + [False] * 30 + [False] * 12
    test_said = [True] * 27 + [False] * 3 + [True] * 3 + [False] * 27 + [False] * 12
    rates = nli.rates_from_decisions("j", test_said, _pairs(test_gold, [f"q{i % 12}" for i in range(72)],
                                                            strata=["high"] * 60 + ["low"] * 12))
    rows = [_table_row([["high", i % 7 == 0], ["low", False], ["low", False]], [], 0) for i in range(70)]
    est = judge_corrected(rows, {"answer": rates, "sentence": rates}, n_boot=400)["R_corrected"]
    high_share = 10 / 70  # the high pairs said "entailed": none of the low ones, where specificity is 12.5/13
    assert est["value"] <= 100 * high_share / 3 + 0.5 and est["pooled"]["low"] == ["sensitivity"]


def test_the_corrected_recall_holds_where_a_tables_prevalence_differs_from_the_test_sets():
    """Sensitivity and specificity held per stratum, the table's share entailed half the test set's (and a stratum of
    12 test pairs): the corrected recall is unbiased and its interval covers the truth; carrying the test set's
    predictive values over (the old correction) was biased by about +8 points and covered 22% of the time."""
    from covlib.papers.credibility.intervals import judge_corrected

    rng = np.random.default_rng(3)
    sens, spec = {"high": 0.9, "mid": 0.75, "low": 0.75, "conflict": 0.8}, {"high": 0.6, "mid": 0.85, "low": 0.9,
                                                                             "conflict": 0.7}
    test_counts = {"high": (60, 60), "mid": (20, 60), "low": (0, 12), "conflict": (10, 20)}  # (entailed, not) pairs
    test_prev = {s: e / (e + ne) for s, (e, ne) in test_counts.items()}
    table_prev = {s: p / 2 for s, p in test_prev.items()}
    mix = {"high": 0.4, "mid": 0.3, "low": 0.2, "conflict": 0.1}
    errors, covered = [], 0
    for sim in range(40):
        gold, said, strata = [], [], []
        for s, (e, ne) in test_counts.items():
            for g in [True] * e + [False] * ne:
                gold.append(g)
                said.append(bool(rng.random() < (sens[s] if g else 1 - spec[s])))
                strata.append(s)
        rates = nli.rates_from_decisions("sim", said, _pairs(gold, [f"q{i % 40}" for i in range(len(gold))],
                                                             strata=strata))
        rows, truth = [], []
        for _ in range(120):
            names = rng.choice(list(mix), 3, p=list(mix.values()))
            g3 = [bool(rng.random() < table_prev[s]) for s in names]
            s3 = [bool(rng.random() < (sens[s] if g else 1 - spec[s])) for s, g in zip(names, g3)]
            rows.append(_table_row([[str(n), s] for n, s in zip(names, s3)], [], 0))
            truth.append(np.mean(g3))
        est = judge_corrected(rows, {"answer": rates, "sentence": rates}, seed=sim, n_boot=400)["R_corrected"]
        true_recall = 100 * sum(mix[s] * table_prev[s] for s in mix)
        errors.append(est["value"] - true_recall)
        covered += est["low"] <= true_recall <= est["high"]
    assert abs(np.mean(errors)) < 2.0 and covered / 40 >= 0.85


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


def test_a_difference_between_reference_conditions_reads_the_corrected_recall_not_the_judges_bias():
    """Two conditions with the same true recall; the judge inflates the one whose pairs overlap the premise more
    (raw recall's bias differs by condition, as it does by 15 to 39 points on the test set): the raw paired
    difference is "significant", the judge-corrected one (`corrected_difference`, the claims' estimate) is not."""
    from covlib.papers.credibility.intervals import corrected_difference
    from covlib.report import claims as ledger

    rng = np.random.default_rng(5)
    sens, spec = {"high": 0.95, "mid": 0.8}, {"high": 0.45, "mid": 0.95}
    gold, said, strata = [], [], []
    for s in ("high", "mid"):
        for g in [True] * 40 + [False] * 40:
            gold.append(g), strata.append(s)
            said.append(bool(rng.random() < (sens[s] if g else 1 - spec[s])))
    rates = nli.rates_from_decisions("sim", said, _pairs(gold, [f"q{i % 40}" for i in range(160)], strata=strata))
    rates = {"answer": rates, "sentence": rates}

    def arm(stratum: str) -> list[dict]:
        rows = []
        for i in range(150):
            g3 = [bool(rng.random() < 0.3) for _ in range(3)]
            s3 = [bool(rng.random() < (sens[stratum] if g else 1 - spec[stratum])) for g in g3]
            rows.append({**_table_row([[stratum, s] for s in s3], [], 0), "question_id": f"q{i}"})
        return rows

    many, few = arm("high"), arm("mid")
    est = corrected_difference(many, few, rates, rates, seed=2)
    assert est["raw"]["p"] < 0.001 and est["raw"]["value"] > 15  # the judge's bias alone
    assert est["low"] < 0 < est["high"] and est["p"] >= 0.05 and est["test"].startswith("paired bootstrap")
    rec = {"claim": "cred-complete-beats-partial", "scope": "hotpotqa", "unit": "points", **est}
    assert ledger.verdict(rec)[0] == "inconclusive at this n"


def test_a_difference_between_conditions_corrected_by_one_measurement_is_shown_not_counted(tmp_path):
    """The judge errs differently on each condition's answers (specificity 14% vs 62% in one stratum of a simulated
    run), which rates measured once, on other answers, cannot show: with one measurement for both arms the ledger
    reads the row "not testable here" (judge-bound) whatever its interval; with each arm's own rates it is counted."""
    from covlib.papers.credibility import claims as cred
    from covlib.papers.credibility.intervals import corrected_difference
    from covlib.report import claims as ledger

    rng = np.random.default_rng(3)
    gold = [True] * 40 + [False] * 40
    said = [bool(rng.random() < (0.9 if g else 0.1)) for g in gold]

    def measured(on: str) -> dict[str, nli.JudgeRates]:
        r = nli.rates_from_decisions("j", said, _pairs(gold, [f"q{i % 40}" for i in range(80)], strata=["high"] * 80),
                                     measured_on=on)
        return {"answer": r, "sentence": r}

    def arm(truth: float) -> list[dict]:
        return [{**_table_row([["high", bool(rng.random() < (0.9 if rng.random() < truth else 0.1))]
                               for _ in range(3)], [], 0), "question_id": f"q{i}"} for i in range(150)]

    complete, partial = arm(0.7), arm(0.2)
    shared = measured(nli.judge_error.TEST_SET)
    rows = {}
    for name, (ra, rb) in {"one measurement": (shared, shared),
                           "per condition": (measured("complete answers"), measured("partial answers"))}.items():
        est = corrected_difference(complete, partial, ra, rb, seed=1)
        assert est["low"] > 20, est  # a clear difference either way
        rec = cred.estimate("cred-complete-beats-partial", "hotpotqa, 10 references", est, "points", model="m")
        (tmp_path / "06_knowledge_recall.json").write_text(json.dumps(
            {"metrics": {"claims": [rec]}, "params": {"profile": "cpu"}, "meta": {"model": "m"}}))
        (rows[name],) = [r for r in ledger.collect(ledger.read_results(tmp_path), cred.CLAIMS)
                         if r["id"] == "cred-complete-beats-partial"]
    assert rows["one measurement"]["verdict"] == "not testable here" and not rows["one measurement"]["counted"]
    assert "measured once, on the frozen key-fact test set" in rows["one measurement"]["reason"]
    assert rows["per condition"]["verdict"] == "supported" and rows["per condition"]["counted"]
