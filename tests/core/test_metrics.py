"""Answer metrics, FEVER labels, the accuracy-coverage AUC, recall and statistics on worked-out cases."""

from __future__ import annotations

import numpy as np
import pytest

from covlib.core import metrics as M
from covlib.core import stats as S


def test_normalize_answer():
    assert M.normalize_answer("  The  Eiffel-Tower!! ") == "eiffeltower"
    assert M.normalize_answer("A Tale of Two Cities") == "tale of two cities"
    assert M.normalize_answer("Anna") == "anna"  # 'an' only as a whole word


def test_exact_match_with_aliases():
    assert M.exact_match("the Beatles", ["Beatles"]) == 1.0
    assert M.exact_match("Sochi, Russia", ["Sochi", "Sochi, Russia"]) == 1.0
    assert M.exact_match("Sochi", "Sochi, Russia") == 0.0
    assert M.exact_match("", ["x"]) == 0.0 and M.exact_match("x", []) == 0.0


def test_f1_score():
    # pred tokens: sochi russia; gold: sochi -> P=1/2, R=1 -> F1=2/3
    assert M.f1_score("Sochi, Russia", "Sochi") == pytest.approx(2 / 3)
    assert M.f1_score("Sochi, Russia", ["Moscow", "Sochi Russia"]) == 1.0
    assert M.f1_score("yes", "no") == 0.0 and M.f1_score("yes it is", "yes") == 0.0  # HotpotQA yes/no rule
    assert M.f1_score("Paris", "London") == 0.0
    # pred: john smith jr ; gold: john smith -> P=2/3, R=1 -> 0.8
    assert M.f1_score("John Smith Jr.", "John Smith") == pytest.approx(0.8)


def test_accuracy_contains():
    assert M.accuracy_contains("I think it was The Beatles in 1963.", ["beatles", "the fab four"]) == 1.0
    assert M.accuracy_contains("It was Paris.", ["par"]) == 0.0  # whole-token containment
    assert M.accuracy_contains("Barack Obama", ["obama"]) == 1.0
    assert M.accuracy_contains("nothing", [""]) == 0.0


def test_fever_labels_and_accuracy():
    assert M.normalize_fever_label("supports") == "SUPPORTS"
    assert M.normalize_fever_label("Not Enough Information") == "NOT ENOUGH INFO"
    assert M.normalize_fever_label("NOT ENOUGH INFO.") == "NOT ENOUGH INFO"
    assert M.normalize_fever_label("The evidence refutes the claim") == "REFUTES"
    assert M.normalize_fever_label("supports or refutes") is None
    assert M.normalize_fever_label(None) is None
    preds = ["SUPPORTS", "refutes", "not enough information", "garbage"]
    labels = ["SUPPORTS", "REFUTES", "NOT ENOUGH INFO", "SUPPORTS"]
    assert M.fever_accuracy(preds, labels) == 0.75
    with pytest.raises(ValueError):
        M.fever_accuracy(["SUPPORTS"], ["maybe"])
    with pytest.raises(ValueError):
        M.fever_accuracy(["SUPPORTS"], [])


def _reference_f1auc(score, f1):
    """Ye & Durrett's f1auc_score transcribed (no ties in the inputs it is compared on)."""
    score, f1 = np.array(score), np.array(f1)
    idx = np.argsort(-score)
    f1 = f1[idx]
    n = f1.size
    segment = min(1000, n - 1)
    t = (np.arange(segment) + 1) / segment
    return np.mean([np.mean(f1[: int(n * x)]) for x in t]) * 100


def test_accuracy_coverage_auc_hand_computed():
    # sorted correct = 1,0,1,0; S = 3 coverages 1/3, 2/3, 1 -> prefixes 1, 2, 4 -> acc 1, 1/2, 1/2
    assert M.accuracy_coverage_auc([0.9, 0.8, 0.7, 0.6], [1, 0, 1, 0]) == pytest.approx(200 / 3)
    # order is by confidence, not by position
    assert M.accuracy_coverage_auc([0.6, 0.7, 0.8, 0.9], [0, 1, 0, 1]) == pytest.approx(200 / 3)
    assert M.accuracy_coverage_auc([0.1, 0.2, 0.3], [1, 1, 1]) == 100.0
    assert M.accuracy_coverage_auc([0.3], [1]) == 100.0
    # perfectly calibrated beats anti-calibrated on the same outcomes
    y = [1, 1, 0, 0]
    assert M.accuracy_coverage_auc([4, 3, 2, 1], y) > M.accuracy_coverage_auc([1, 2, 3, 4], y)
    with pytest.raises(ValueError):
        M.accuracy_coverage_auc([], [])


def test_accuracy_coverage_auc_ties():
    # n=3 -> S=2, coverages 1/2, 1 -> prefixes 1 and 3
    conf, y = [0.5, 0.5, 0.2], [1, 0, 1]
    assert M.accuracy_coverage_auc(conf, y) == pytest.approx(100 * (1 + 2 / 3) / 2)  # given order kept
    assert M.accuracy_coverage_auc(conf, [0, 1, 1]) == pytest.approx(100 * (0 + 2 / 3) / 2)
    assert M.accuracy_coverage_auc(conf, y, ties="average") == pytest.approx(100 * (0.5 + 2 / 3) / 2)
    assert M.accuracy_coverage_auc(conf, [0, 1, 1], ties="average") == pytest.approx(100 * (0.5 + 2 / 3) / 2)


def test_accuracy_coverage_auc_matches_reference():
    rng = np.random.default_rng(0)
    for n in (5, 250, 2500):
        conf = rng.permutation(n) / n  # distinct confidences
        y = (rng.random(n) < 0.5 + 0.4 * conf).astype(float)
        assert M.accuracy_coverage_auc(conf, y) == pytest.approx(_reference_f1auc(conf, y), abs=1e-9)
        assert M.accuracy_coverage_auc(conf, y, ties="average") == pytest.approx(_reference_f1auc(conf, y), abs=1e-9)
    f1 = rng.random(40)  # graded outcomes (F1) work the same way
    conf = rng.random(40)
    assert M.accuracy_coverage_auc(conf, f1) == pytest.approx(_reference_f1auc(conf, f1))


def test_accuracy_coverage_curve():
    x, acc = M.accuracy_coverage_curve([0.9, 0.8, 0.7, 0.6], [1, 0, 1, 0], ticks=4)
    assert list(x) == [0.25, 0.5, 0.75, 1.0] and list(acc) == [1.0, 0.5, 2 / 3, 0.5]


def test_recall_at_k():
    ranked = [["A", "x", "B", "y"], ["y", "C", "x", "x"]]
    gold = [["A", "B"], ["C", "D"]]
    assert M.recall_at_k(ranked, gold, ks=(1, 2, 3)) == {1: 0.25, 2: 0.5, 3: 0.75}
    assert M.all_recall_at_k(ranked, gold, ks=(1, 3, 4)) == {1: 0.0, 3: 0.5, 4: 0.5}
    with pytest.raises(ValueError):
        M.recall_at_k(ranked, gold[:1])


def test_correlations():
    x = np.arange(10.0)
    r, p = S.pearson(x, 2 * x + 1)
    assert r == pytest.approx(1.0) and p < 1e-6
    rho, _ = S.spearman(x, x**3)
    assert rho == pytest.approx(1.0)
    rho, _ = S.spearman(x, -x)
    assert rho == pytest.approx(-1.0)
    b = [0, 0, 0, 1, 1, 1]
    r, p = S.point_biserial(b, [1.0, 2.0, 1.5, 5.0, 6.0, 5.5])
    assert r > 0.9 and isinstance(r, float) and isinstance(p, float)
    with pytest.raises(ValueError):
        S.point_biserial([0, 2, 1], [1, 2, 3])


def test_mean_interval_is_seeded():
    v = np.random.default_rng(1).normal(5, 1, size=200)
    est = S.mean_interval(v, seed=3)
    assert est["value"] == pytest.approx(v.mean()) and est["low"] < est["value"] < est["high"]
    assert est["high"] - est["low"] == pytest.approx(2 * 1.96 * v.std() / np.sqrt(200), rel=0.25)
    assert S.mean_interval(v, seed=3) == est and S.mean_interval(v, seed=4) != est
    assert S.mean_interval([2.0, 2.0, 2.0])["low"] == 2.0


@pytest.mark.parametrize("n", [1, 2, 5, 12, 30, 60, 250, 1000])
def test_a_proportion_of_none_or_all_has_its_interval_end_exactly_at_the_estimate(n):
    """0 of n and n of n: the Wilson bound on that side is exactly 0 or 1 (it came out a few ulps inside, so the
    interval of 0 correct of 12 started at 2.8e-15, above the estimate)."""
    from covlib.core import stats

    assert stats.wilson_interval(0, n)[0] == 0.0 and stats.wilson_interval(n, n)[1] == 1.0
    none, every = stats.mean_interval([0.0] * n, scale=100), stats.mean_interval([1.0] * n, scale=100)
    assert none["low"] <= none["value"] == 0.0 < none["high"] and every["low"] < every["value"] == 100.0 <= every["high"]
