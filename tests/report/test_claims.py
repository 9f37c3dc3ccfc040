"""The claims ledger: exact tests on paired outcomes, one verdict per claim, Holm, power, the papers' own sentences."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from covlib.core import paths, power, stats
from covlib.papers.covrag import claims as covrag_claims
from covlib.papers.covrag.parameters import PARAMETERS as COVRAG_PARAMETERS
from covlib.papers.credibility import claims as credibility_claims
from covlib.papers.verify_edit import claims as ve
from covlib.report import claims

CLAIMS = ve.CLAIMS + credibility_claims.CLAIMS + covrag_claims.CLAIMS


def _paired(better: int, worse: int, both: int = 10, n: int = 60) -> tuple[list[int], list[int]]:
    """Two 0/1 columns over n questions: `better` right only in a, `worse` right only in b, `both` right in both."""
    neither = n - better - worse - both
    a = [1] * better + [0] * worse + [1] * both + [0] * neither
    b = [0] * better + [1] * worse + [1] * both + [0] * neither
    return a, b


def _record(claim_id: str, scope: str, est: dict, **meta) -> dict:
    paper = next(m for m in (ve, credibility_claims, covrag_claims) if claim_id in {c.id for c in m.CLAIMS})
    return paper.estimate(claim_id, scope, est, "EM points", **{"model": "m", **meta})


def _ledger(tmp_path, notebook: str, records: list[dict], profile: str = "cpu") -> list[dict]:
    (tmp_path / f"{notebook}.json").write_text(json.dumps(
        {"metrics": {"claims": records}, "params": {"profile": profile}, "meta": {"model": "m"}}))
    return claims.collect(claims.read_results(tmp_path), CLAIMS)


# --------------------------------------------------------------------------- 1. exact tests on paired 0/1


@pytest.mark.parametrize("better, worse, p", [(8, 2, 0.109375), (7, 1, 0.0703125), (6, 0, 0.03125)])
def test_paired_outcomes_get_the_exact_mcnemar_test(better, worse, p):
    est = stats.paired_difference(*_paired(better, worse), scale=100)
    assert est["test"] == "exact McNemar" and (est["better"], est["worse"]) == (better, worse)
    assert est["p"] == pytest.approx(p) and est["value"] == pytest.approx(10.0)
    assert est["low"] < est["value"] < est["high"]


def test_eight_better_two_worse_of_sixty_is_not_supported():
    """The old percentile bootstrap called +10.0 [1.7, 20.0] 'supported'; the exact p is 0.109."""
    rec = _record("ve-beats-cot-sc", "hotpotqa, dataset", stats.paired_difference(*_paired(8, 2), scale=100))
    verdict, reason = claims.verdict(rec)
    assert verdict == "inconclusive at this n"
    assert "8 better, 2 worse of 60" in reason and "p = 0.109" in reason
    assert claims.verdict(_record("ve-beats-cot-sc", "x", stats.paired_difference(*_paired(6, 0), scale=100)))[0] \
        == "supported"
    assert claims.verdict(_record("ve-beats-cot-sc", "x", stats.paired_difference(*_paired(0, 6), scale=100)))[0] \
        == "contradicted"


def test_the_paired_interval_is_newcombes_and_covers_the_difference():
    # Newcombe (1998) method 10 on 10 both / 6 better / 0 worse / 44 neither (worked from the paper's formula)
    est = stats.paired_difference(*_paired(6, 0), scale=100)
    assert (round(est["low"], 1), round(est["high"], 1)) == (2.3, 18.5)
    # coverage of the true difference p10 - p01 = 0.20 at n = 60 (the interval conditioning on the discordant
    # count, which ends at the estimate when nothing is worse, covered it about half the time)
    rng, hits, sims = np.random.default_rng(0), 0, 400
    for _ in range(sims):
        cells = rng.multinomial(60, [0.3, 0.25, 0.05, 0.4])  # both, better, worse, neither
        a = [1] * cells[0] + [1] * cells[1] + [0] * cells[2] + [0] * cells[3]
        b = [1] * cells[0] + [0] * cells[1] + [1] * cells[2] + [0] * cells[3]
        e = stats.paired_difference(a, b)
        hits += e["low"] <= 0.20 <= e["high"]
    assert hits / sims > 0.92


def test_an_exact_binomial_p_agrees_with_its_clopper_pearson_interval():
    est = stats.above_chance([1] * 26 + [0] * 4, chance=0.7, scale=100)
    assert est["low"] < 0 < est["high"] and est["p"] == pytest.approx(0.0603, abs=1e-3)  # equal-tailed, not minlike
    rec = credibility_claims.estimate("cred-reflection-above-chance", "hotpotqa", est, "points", model="m")
    assert claims.verdict(rec)[0] == "inconclusive at this n"


def test_continuous_differences_get_bca_and_a_permutation_p():
    rng = np.random.default_rng(0)
    a, b = rng.normal(1.0, 1.0, 40), rng.normal(0.0, 1.0, 40)
    est = stats.paired_difference(a, b, seed=1)
    assert est["test"].startswith("sign-flip") and est["low"] < est["value"] < est["high"]
    assert 0 < est["p"] < 0.05 and est["sd"] == pytest.approx(np.std(a - b, ddof=1))
    assert stats.sign_flip_p([1.0, 1.0, 1.0]) == pytest.approx(2 / 8)  # exact: 2 of the 8 sign patterns as extreme
    null = stats.paired_difference(rng.normal(0, 1, 30), rng.normal(0, 1, 30), seed=2)
    assert null["p"] > 0.05 and null["low"] < 0 < null["high"]


def test_proportions_get_wilson_and_chance_gets_an_exact_test():
    est = stats.mean_interval([1] * 19 + [0] * 0, scale=100)
    assert est["high"] == 100 and est["low"] == pytest.approx(100 * stats.wilson_interval(19, 19)[0])
    assert est["low"] == pytest.approx(83.2, abs=0.1)  # Wilson; the old percentile bootstrap gave [100, 100]
    chance = stats.above_chance([1] * 35 + [0] * 25, scale=100)
    assert chance["p"] == pytest.approx(0.245, abs=1e-3) and chance["low"] < 0 < chance["high"]


# --------------------------------------------------------------------------- 2. strict claims


def test_one_better_none_worse_supports_nothing():
    """The old "at least" rule supported a claim from 1 better / 0 worse of 60 (p = 1)."""
    est = stats.paired_difference(*_paired(1, 0), scale=100)
    rec = _record("covrag-multi-round-beats-single", "NQ, BM25", est)
    assert claims.verdict(rec)[0] == "inconclusive at this n" and est["p"] == 1.0
    assert not hasattr(claims, "AT_LEAST")
    assert all("at least" not in c.text for c in CLAIMS)


# --------------------------------------------------------------------------- 3. one verdict per claim


def test_the_primary_scope_gives_the_verdict_and_secondaries_are_holm_adjusted(tmp_path):
    strong = stats.paired_difference(*_paired(9, 0), scale=100)  # p = 0.0039
    weak = stats.paired_difference(*_paired(7, 0), scale=100)  # p = 0.0156: 3 x that is 0.047, 4 x is 0.0625
    records = [_record("ve-beats-cot-sc", "hotpotqa, bm25", strong),
               _record("ve-beats-cot-sc", "hotpotqa, dataset", stats.paired_difference(*_paired(3, 2), scale=100)),
               *[_record("ve-beats-cot-sc", f"2wikimultihop, {k}", weak) for k in ("bm25", "tfidf", "dense")],
               _record("ve-beats-cot-sc", "fever, bm25", weak)]
    rows = [r for r in _ledger(tmp_path, "03_verify_and_edit_tables", records) if r["id"] == "ve-beats-cot-sc"]
    primary = [r for r in rows if r["role"] == "primary"]
    assert len(primary) == 1 and primary[0]["scope"] == "hotpotqa, dataset"
    assert primary[0]["verdict"] == "inconclusive at this n"  # a strong secondary row does not rescue it
    secondary = [r for r in rows if r["role"] == "secondary"]
    assert len(secondary) == 5
    assert {round(r["p_holm"], 4) for r in secondary if r["scope"] != "hotpotqa, bm25"} == {0.0625}
    assert all(r["verdict"] == "inconclusive at this n" for r in secondary if r["scope"] != "hotpotqa, bm25")
    assert claims.summary(rows)["n_tests"] == 6


def test_a_claim_whose_primary_setting_did_not_run_is_not_testable(tmp_path):
    rows = _ledger(tmp_path, "03_verify_and_edit_tables",
                   [_record("ve-beats-cot-sc", "fever, bm25", stats.paired_difference(*_paired(9, 0), scale=100))])
    (primary,) = [r for r in rows if r["id"] == "ve-beats-cot-sc" and r["role"] == "primary"]
    assert primary["verdict"] == "not testable here" and "hotpotqa, dataset" in primary["reason"]


def test_every_claim_is_listed_and_a_missing_notebook_is_named(tmp_path):
    rows = claims.collect(claims.read_results(tmp_path), CLAIMS)
    assert {r["id"] for r in rows} == {c.id for c in CLAIMS}
    assert all(r["verdict"] == "not testable here" for r in rows)
    human = next(r for r in rows if r["id"] == "ve-human-study")
    assert "no rating was collected" in human["reason"]


def test_unreadable_results_are_named(tmp_path):
    (tmp_path / "01_consistency_kde.json").write_text("{not json")
    with pytest.raises(ValueError, match="01_consistency_kde.json"):
        claims.read_results(tmp_path)


def _borderline(**change) -> dict:
    """ve-beats-cot-sc's primary McNemar record, 8 better / 2 worse of 60 (p = 0.109: inconclusive), with `change`
    (a value of None drops the field)."""
    rec = {**_record("ve-beats-cot-sc", "hotpotqa, dataset", stats.paired_difference(*_paired(8, 2), scale=100)),
           **change}
    return {k: v for k, v in rec.items() if v is not None or k not in change}


_UPSIDE_DOWN = {"value": 0.3, "low": 0.5, "high": 0.1, "n": 60, "p": None,
                "test": "paired bootstrap (its 95% interval decides)"}


@pytest.mark.parametrize("content, where, field", [
    ({"metrics": {"claims": [_borderline(p=-1)]}}, "claim 've-beats-cot-sc'", "'p' = -1"),
    ({"metrics": {"claims": [_borderline(p=-math.inf)]}}, "claim 've-beats-cot-sc'", "'p' = -Infinity"),
    ({"metrics": {"claims": [_record("ve-beats-cot-sc", "hotpotqa, dataset", _UPSIDE_DOWN)]}},
     "claim 've-beats-cot-sc'", "'low' = 0.5 is above high = 0.1"),
    ({"metrics": {"claims": [_borderline(n=-5, p=0.001)]}}, "claim 've-beats-cot-sc'", "'n' = -5"),
    ({"metrics": {"claims": [_borderline(better=50, worse=20)]}}, "claim 've-beats-cot-sc'",
     "'n' = 60 is below better + worse + both = 80"),
    ({"metrics": {"claims": [_borderline(n=2.5)]}}, "claim 've-beats-cot-sc'", "'n' = 2.5 is not a whole number"),
    ({"metrics": {"claims": [_borderline(better=None)]}}, "claim 've-beats-cot-sc'",
     "'better' is missing: an exact McNemar record"),
    ({"metrics": {"claims": [_borderline(value=-30.0)]}}, "claim 've-beats-cot-sc'",
     "'value' = -30.0 is outside its 95% interval"),
    ([_borderline()], "its root", "is not an object"),
    ({"metrics": {"claims": "ve-beats-cot-sc"}}, "metrics", "'claims' = \"ve-beats-cot-sc\" is not a list"),
    ({"metrics": [_borderline()]}, "its root", "'metrics' = [{"),
    ({"metrics": {"claims": ["ve-beats-cot-sc"]}}, "metrics.claims[0]", "is a JSON str, not an object"),
], ids=["p-1", "p-minus-infinity", "low-above-high", "n-5", "discordant-above-n", "n-2.5", "mcnemar-without-better", "value-outside",
        "root-list",
        "claims-string", "metrics-list", "claim-string"])
def test_a_damaged_results_file_is_refused_naming_the_file_the_record_and_the_field(tmp_path, content, where, field):
    """p = -1, an upside-down interval or n = -5 came out 'supported'; a wrong shape was a bare AttributeError or
    KeyError: 'better'. Each is now refused by file, record and field, with the notebook to re-run."""
    (tmp_path / "03_verify_and_edit_tables.json").write_text(json.dumps(content))
    with pytest.raises(ValueError) as err:
        claims.read_results(tmp_path)
    message = str(err.value)
    assert f"results file {tmp_path / '03_verify_and_edit_tables.json'}: {where}" in message and field in message
    assert message.endswith("edited by hand: re-run the notebook that records it (make reproduce ONLY=03)")


def test_the_runs_own_files_beside_the_results_are_not_read_as_results(tmp_path):
    """run_times keeps a file of another shape aside as run_times.unreadable.json (a list, say): not a notebook's."""
    (tmp_path / "run_times.unreadable.json").write_text(json.dumps([{"notebook": "01"}]))
    (tmp_path / "bench_rates.json").write_text(json.dumps({"cpu": {"shapes": {}}}))
    (tmp_path / "03_verify_and_edit_tables.json").write_text(json.dumps({"metrics": {"claims": [_borderline()]}}))
    assert set(claims.read_results(tmp_path)) == {"03_verify_and_edit_tables"}


def test_a_valid_results_file_still_reads(tmp_path):
    rng = np.random.default_rng(4)
    correct = (rng.random(40) < 0.5).astype(float)
    recs = [[type("R", (), {"id": i, "correct": c, "confidence": x})() for i, (c, x) in enumerate(zip(correct, conf))]
            for conf in (rng.random(40), rng.random(40))]
    records = [_borderline(), _record("ve-raises-auc", "hotpotqa, dataset", ve.auc_difference(*recs, seed=1)),
               ve.untestable("ve-beats-cot-sc", "no dense index", scope="2wikimultihop, dense", model="m")]
    rows = [r for r in _ledger(tmp_path, "03_verify_and_edit_tables", records) if r["id"] == "ve-beats-cot-sc"]
    assert [r["verdict"] for r in rows] == ["inconclusive at this n", "not testable here"]


def test_estimates_need_a_test():
    with pytest.raises(KeyError, match="unknown claim"):
        ve.estimate("ve-beats-cot", "x", stats.paired_difference([1, 0], [0, 0]), "EM points")
    with pytest.raises(KeyError, match="unknown claim"):  # a notebook of one paper cannot record another's claim
        ve.estimate("cred-human-correlation", "x", stats.paired_difference([1, 0], [0, 0]), "EM points")
    with pytest.raises(ValueError, match="lacks"):
        ve.estimate("ve-beats-cot-sc", "x", {"value": 1, "low": 0, "high": 2, "n": 5}, "EM points")


# --------------------------------------------------------------------------- 4. power beside inconclusive


def test_an_inconclusive_primary_says_what_n_the_papers_effect_needs(tmp_path):
    est = stats.paired_difference(*_paired(8, 2), scale=100)
    rows = _ledger(tmp_path, "03_verify_and_edit_tables", [_record("ve-cot-beats-standard", "hotpotqa", est)])
    (row,) = [r for r in rows if r["id"] == "ve-cot-beats-standard"]
    assert row["n_needed"] == power.questions_needed(8.7, est) and row["n_needed"] > 60
    assert row["n_full"] == 250  # notebook 03's default n_hotpotqa, read from the notebook
    assert f"at this run's discordance (10 of 60 questions changed, 17%) n≈{row['n_needed']}" in row["reason"]
    assert "`full` runs n=250 (enough)" in row["reason"] and "would need at least n≈88" in row["reason"]


def test_a_power_note_at_the_least_discordance_is_a_minimum_with_its_range(tmp_path):
    """The least possible discordance (no question worse) gives Connor's smallest n: a floor, not the n. The note
    gives the range and says "enough" only where `full` affords the discordance it states."""
    est = stats.paired_difference(*_paired(3, 0), scale=100)  # 3 of 60 changed: 5%, below the paper's 8.7
    (row,) = [r for r in _ledger(tmp_path, "03_verify_and_edit_tables", [_record("ve-cot-beats-standard", "hotpotqa",
                                                                                  est)])
              if r["id"] == "ve-cot-beats-standard"]
    assert "at least n≈88" in row["reason"] and "206 if 20% of questions change" in row["reason"]
    assert "309 if 30%" in row["reason"] and "(enough)" not in row["reason"]
    assert "`full` runs n=250 (enough only if at most 24% of questions change)" in row["reason"]
    est = stats.paired_difference(*_paired(2, 1, n=800), scale=100)
    rec = covrag_claims.estimate("covrag-col-beats-no-col", "multi-iteration accuracy", est, "accuracy points",
                                 model="m")
    (row,) = [r for r in _ledger(tmp_path, "10_covrag_finetune", [rec]) if r["id"] == "covrag-col-beats-no-col"]
    assert "at least n≈210" in row["reason"] and "571 if 10%" in row["reason"] and "1,145 if 20%" in row["reason"]
    assert "`full` runs n=400 (enough only if at most 7% of questions change)" in row["reason"]
    assert power.mcnemar_sizes(3.7, est, 800)["affordable"] == pytest.approx(0.14, abs=0.005)


def test_questions_needed_matches_the_textbook_formulas():
    # Connor (1987): discordance 1/6, effect 0.10 -> n = (1.96 sqrt(.1667) + 0.8416 sqrt(.1667 - .01))^2 / .01
    est = stats.paired_difference(*_paired(8, 2), scale=100)
    assert power.questions_needed(10, est) == int(np.ceil((1.959964 * np.sqrt(1 / 6)
                                                             + 0.841621 * np.sqrt(1 / 6 - 0.01)) ** 2 / 0.01))
    assert power.questions_needed(0.5, {"test": "Pearson, Fisher-z"}) == int(np.ceil((2.801585 / np.arctanh(0.5)) ** 2 + 3))
    assert power.questions_needed(5, {"test": "sign-flip permutation", "sd": 20.0}) == int(np.ceil((2.801585 * 4) ** 2))


# --------------------------------------------------------------------------- 5. correlations over few models


def test_correlations_use_fisher_z_and_refuse_three_points():
    r = stats.correlation([1, 2, 3, 4, 5], [1.1, 2.3, 2.9, 4.2, 4.8])
    z, half = np.arctanh(r["value"]), 1.959964 / np.sqrt(2)
    assert (r["low"], r["high"]) == pytest.approx((np.tanh(z - half), np.tanh(z + half)), abs=1e-6)
    three = stats.correlation([1, 2, 3], [1, 3, 2])
    assert three["n"] == 3 and np.isnan(three["low"]) and np.isnan(three["high"])
    assert np.isnan(three["p"])  # no interval, so no p either: scipy's t-test p is not the Fisher-z test
    assert claims.verdict(credibility_claims.estimate("cred-human-correlation", "x", three, "Pearson r"))[0] \
        == "not testable here"


def test_a_p_without_its_interval_decides_nothing():
    """A recorded p with no interval (scipy's p for a correlation of 3 models) was read as "supported"."""
    rec = credibility_claims.estimate("cred-human-correlation", "recall", {
        "value": 0.99, "low": float("nan"), "high": float("nan"), "n": 3, "p": 0.01, "test": "Pearson, Fisher-z"},
        "Pearson r")
    verdict, reason = claims.verdict(rec)
    assert verdict == "not testable here" and "a verdict needs the interval its test gives" in reason


@pytest.mark.parametrize("better, worse", [(4, 0), (5, 0), (6, 1), (7, 1), (8, 2), (9, 2), (10, 3), (11, 3), (12, 4),
                                           (14, 5)])
def test_an_interval_that_excludes_zero_beside_an_inconclusive_exact_test_says_the_test_decides(better, worse):
    est = stats.paired_difference(*_paired(better, worse, both=25, n=60), scale=100)
    assert est["low"] > 0 and est["p"] >= 0.05  # Newcombe's interval is not the exact test inverted
    rec = _record("ve-beats-cot-sc", "hotpotqa, dataset", est)
    verdict, reason = claims.verdict(rec)
    assert verdict == "inconclusive at this n" and "the test decides" in reason and "Newcombe" in reason
    assert not claims.interval_agrees(rec)


def test_both_arms_at_the_floor_measured_nothing(tmp_path):
    floor = stats.paired_difference([0] * 10, [0] * 10, scale=100)
    ceiling = stats.paired_difference([1] * 10, [1] * 10, scale=100)
    rows = _ledger(tmp_path, "10_covrag_finetune", [
        covrag_claims.estimate("covrag-col-beats-no-col", "multi-iteration accuracy", floor, "accuracy points",
                               model="m"),
        covrag_claims.estimate("covrag-s-beats-qa-only", "single-iteration accuracy", ceiling, "accuracy points",
                               model="m")])
    got = {r["id"]: r for r in rows if r["id"] in ("covrag-col-beats-no-col", "covrag-s-beats-qa-only")}
    assert got["covrag-col-beats-no-col"]["verdict"] == "not testable here"
    assert "both arms at the floor (0 of 10 right in each)" in got["covrag-col-beats-no-col"]["reason"]
    assert "the ceiling (10 of 10" in got["covrag-s-beats-qa-only"]["reason"]
    assert not any(r["counted"] for r in got.values()) and "enough" not in got["covrag-col-beats-no-col"]["reason"]
    some = stats.paired_difference([1] * 3 + [0] * 7, [1] * 3 + [0] * 7, scale=100)  # 3 right in both: measured
    assert claims.verdict(covrag_claims.estimate("covrag-col-beats-no-col", "x", some, "points"))[0] \
        == "inconclusive at this n"


def test_each_paired_verdict_shows_its_fragility_and_fragility_one_is_not_a_finding(tmp_path):
    assert power.fragility(6, 0, 60) == 1 and power.fragility(7, 1, 60) == 1  # 6/0 -> 5/0; 7/1 -> 8/1 or 7/0
    assert power.fragility(20, 2, 60) == 7 and power.fragility(0, 0, 10) == 6 and power.fragility(0, 0, 3) is None
    for b, w in ((20, 2), (9, 0), (3, 1)):  # flipping it takes exactly that many changes, and no fewer
        k, sig = power.fragility(b, w, 60), stats.mcnemar_exact(b, w) < 0.05
        moves = {(b, w)}
        for _ in range(k):
            moves = {(x + dx, y + dy) for x, y in moves for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1))
                     if x + dx >= 0 and y + dy >= 0}
            flipped = [m for m in moves if (stats.mcnemar_exact(*m) < 0.05) != sig]
            assert bool(flipped) == (_ == k - 1)
    rows = _ledger(tmp_path, "03_verify_and_edit_tables", [
        _record("ve-beats-cot-sc", "hotpotqa, dataset", stats.paired_difference(*_paired(6, 0), scale=100))])
    (row,) = [r for r in rows if r["id"] == "ve-beats-cot-sc"]
    assert row["verdict"] == "supported" and row["fragility"] == 1 and "not a finding" in row["reason"]
    assert claims.summary(rows)["n_fragile"] == 1
    assert any("fragility 1 is not a finding" in line for line in claims.READING)


# --------------------------------------------------------------------------- 6-8, 11: the claims themselves


def _paper_text(name: str) -> str:
    folder = paths.data_dir().parent / "papers"
    files = sorted(folder.glob(f"{name}_*.txt"))
    if not files:
        pytest.skip(f"the papers are not at {folder}")
    return " ".join(files[0].read_text(encoding="utf-8").split())


def test_every_claim_quotes_its_paper_verbatim():
    papers = {"Verify-and-Edit": "003", "Credibility": "001", "CoV-RAG": "000"}
    for c in CLAIMS:
        assert c.quote, c.id
        assert " ".join(c.quote.split()) in _paper_text(papers[c.paper]), c.id


def test_the_claim_no_paper_makes_is_gone():
    ids = {c.id for c in CLAIMS}
    assert "covrag-finetune-raises-judgment" not in ids
    assert {"covrag-col-beats-no-col", "ve-raises-auc", "ve-dataset-largest-gain", "ve-fever-gains-less",
            "ve-human-study", "ve-auc-follows-em"} <= ids
    for c in CLAIMS:
        assert c.notebook or c.untestable, c.id
        assert not c.primary or c.notebook, c.id


def _repeated_comparison(tmp_path) -> list[dict]:
    """The ledger of notebook 03's ve-beats-cot-sc and notebook 02's ⌈n/2⌉ row, the same comparison on the same
    questions (`ve.same_as`)."""
    est = stats.paired_difference(*_paired(9, 0), scale=100)
    (tmp_path / "03_verify_and_edit_tables.json").write_text(json.dumps({"metrics": {"claims": [
        _record("ve-beats-cot-sc", "hotpotqa, dataset", est)]}, "params": {"profile": "cpu"}}))
    (tmp_path / "02_threshold_ablation.json").write_text(json.dumps({"metrics": {"claims": [
        ve.same_as("ve-edit-below-half-helps", "hotpotqa, dataset, wang consistency, n=5 paths", est,
                   "EM points", "ve-beats-cot-sc", "hotpotqa, dataset", model="m")]}, "params": {"profile": "cpu"}}))
    return claims.collect(claims.read_results(tmp_path), CLAIMS)


def test_a_repeated_comparison_is_counted_once(tmp_path):
    rows = _repeated_comparison(tmp_path)
    both = {r["id"]: r for r in rows if r["id"] in ("ve-beats-cot-sc", "ve-edit-below-half-helps")
            and r["role"] == "primary"}
    assert [r["verdict"] for r in both.values()] == ["supported", "supported"]
    assert both["ve-beats-cot-sc"]["counted"] and not both["ve-edit-below-half-helps"]["counted"]
    assert "the same comparison on the same questions as ve-beats-cot-sc" in both["ve-edit-below-half-helps"]["reason"]


def test_the_ledger_figure_marks_the_repeated_comparison_hollow_and_says_which_row_it_repeats(tmp_path):
    """fig-12 drew notebook 02's ⌈n/2⌉ row and notebook 03's HotpotQA row alike: the same comparison, twice."""
    import matplotlib

    matplotlib.use("Agg")
    ax = claims.plot_ledger(_repeated_comparison(tmp_path))
    labels = [t.get_text() for t in ax.get_yticklabels()]
    points = {round(line.get_ydata()[0]): line for line in ax.lines if line.get_marker() == "o"}
    repeats = {y for y, label in enumerate(labels) if "same as ve-beats-cot-sc on hotpotqa, dataset; counted once" in label}
    (original,) = [y for y, label in enumerate(labels)
                   if label.startswith("CoT-SC + Verify-and-Edit beats") and y not in repeats]
    assert len(repeats) == 1
    assert points[min(repeats)].get_markerfacecolor() == "white"  # hollow: drawn again, not a second finding
    assert points[original].get_markerfacecolor() == points[original].get_color()
    assert "same comparison as another row" in [t.get_text() for t in ax.get_legend().get_texts()]
    matplotlib.pyplot.close(ax.figure)


def test_a_near_oracle_row_is_shown_but_not_counted(tmp_path):
    est = stats.paired_difference(*_paired(9, 0), scale=100)
    rows = _ledger(tmp_path, "03_verify_and_edit_tables", [
        _record("ve-beats-cot-sc", "hotpotqa, dataset", est),
        _record("ve-beats-cot-sc", "hotpotqa, bm25", est, near_oracle="the corpus holds the gold paragraphs")])
    (bm25,) = [r for r in rows if r["scope"] == "hotpotqa, bm25"]
    assert not bm25["counted"] and bm25["p_holm"] is None and "near-oracle corpus" in bm25["reason"]


def test_rows_are_grouped_by_model_one_verdict_each(tmp_path):
    good, bad = stats.paired_difference(*_paired(9, 0), scale=100), stats.paired_difference(*_paired(0, 9), scale=100)
    rows = _ledger(tmp_path, "03_verify_and_edit_tables", [
        _record("ve-cot-beats-standard", "hotpotqa", good, model="big"),
        _record("ve-cot-beats-standard", "hotpotqa", bad, model="small")])
    got = {r["model"]: r["verdict"] for r in rows if r["id"] == "ve-cot-beats-standard"}
    assert got == {"big": "supported", "small": "contradicted"}


def test_the_book_front_page_shows_primary_rows_escaped_and_the_test_count(tmp_path):
    from teaching import book

    assert "Not built yet" in book.ledger_section(tmp_path)
    (tmp_path / "tab-12-claims.csv").write_text(
        "paper,claim,role,scope,\"ours [95% CI], n\",n,p,verdict,why,counted\n"
        'CoV-RAG,x,primary,"<script>alert(1)</script>","1.0 [0.5, 2.0]; n=40, 9 better / 0 worse",40,0.0039,supported,'
        'r,True\n'
        'CoV-RAG,x,secondary,"hidden scope","1.0 [0.5, 2.0]",40,0.0039,supported,r,True\n',
        encoding="utf-8")
    page = book.index_page([], tmp_path)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>" not in page
    assert page.index("Contents") < page.index("Claims ledger") < page.index("What each notebook reproduces")
    assert "9 better / 0 worse" in page and "hidden scope" not in page and re.search(r"2 of them are counted tests", page)
    # what every reader must know: fragility 1 is not a finding, which test decides, the oracle-like primary
    assert "<th>why</th>" in page and "A verdict with fragility 1 is not a finding" in page
    assert "the row then says the test decides" in page and "ve-beats-cot-sc&#x27;s primary row is the paper&#x27;s " \
        "Dataset setting" in page


def test_the_full_profile_n_counts_every_pooled_dataset(tmp_path):
    est = stats.paired_difference(*_paired(3, 2), scale=100)
    rec = covrag_claims.estimate("covrag-col-beats-no-col", "multi-iteration accuracy, NQ+WebQ", est,
                                 "accuracy points", model="m", pooled=2)
    rows = _ledger(tmp_path, "10_covrag_finetune", [rec])
    (row,) = [r for r in rows if r["id"] == "covrag-col-beats-no-col"]
    assert row["n_full"] == 2 * COVRAG_PARAMETERS["10"]["n_test"].default == 800  # the declared default, pooled


def test_a_repeat_of_a_near_oracle_row_is_near_oracle_too_and_not_counted(tmp_path):
    est = stats.paired_difference(*_paired(9, 0), scale=100)
    oracle = "the corpus holds the gold paragraphs"
    (tmp_path / "03_verify_and_edit_tables.json").write_text(json.dumps({"metrics": {"claims": [
        _record("ve-beats-cot-sc", "hotpotqa, bm25", est, near_oracle=oracle)]}}))
    (tmp_path / "02_threshold_ablation.json").write_text(json.dumps({"metrics": {"claims": [
        ve.same_as("ve-edit-below-half-helps", "hotpotqa, bm25, wang consistency", est, "EM points", "ve-beats-cot-sc",
                   "hotpotqa, bm25", model="m", near_oracle=oracle)]}}))
    rows = claims.collect(claims.read_results(tmp_path), CLAIMS)
    (row,) = [r for r in rows if r["id"] == "ve-edit-below-half-helps"]
    assert not row["counted"] and row["near_oracle"] and row["verdict"] == claims.NEAR_ORACLE
    assert claims.summary(rows)["n_tests"] == 0  # nothing but near-oracle evidence ran


def test_a_repeat_on_other_questions_stands_on_its_own(tmp_path):
    (tmp_path / "03_verify_and_edit_tables.json").write_text(json.dumps({"metrics": {"claims": [
        _record("ve-beats-cot-sc", "hotpotqa, dataset", stats.paired_difference(*_paired(9, 0, n=250), scale=100))]}}))
    (tmp_path / "02_threshold_ablation.json").write_text(json.dumps({"metrics": {"claims": [
        ve.same_as("ve-edit-below-half-helps", "hotpotqa, dataset", stats.paired_difference(*_paired(3, 2), scale=100),
                   "EM points", "ve-beats-cot-sc", "hotpotqa, dataset", model="m")]}}))
    rows = claims.collect(claims.read_results(tmp_path), CLAIMS)
    (row,) = [r for r in rows if r["id"] == "ve-edit-below-half-helps"]
    assert row["counted"] and row["verdict"] == "inconclusive at this n" and "not the same questions" in row["reason"]
    summary = claims.summary(rows)
    assert summary["n_same_comparison"] == 0 and summary["n_tests"] == 2


def test_the_front_page_tally_counts_a_repeated_comparison_once(tmp_path):
    est = stats.paired_difference(*_paired(9, 0), scale=100)
    (tmp_path / "03_verify_and_edit_tables.json").write_text(json.dumps({"metrics": {"claims": [
        _record("ve-beats-cot-sc", "hotpotqa, dataset", est)]}}))
    (tmp_path / "02_threshold_ablation.json").write_text(json.dumps({"metrics": {"claims": [
        ve.same_as("ve-edit-below-half-helps", "hotpotqa, dataset", est, "EM points", "ve-beats-cot-sc",
                   "hotpotqa, dataset", model="m")]}}))
    summary = claims.summary(claims.collect(claims.read_results(tmp_path), CLAIMS))
    assert summary["primary_verdicts"]["supported"] == 1 and summary["n_same_comparison"] == 1


def test_a_near_oracle_primary_is_not_testable(tmp_path):
    est = stats.independent_difference([1, 1, 1, 0] * 10, [0, 0, 1, 0] * 10, scale=100)
    rows = _ledger(tmp_path, "03_verify_and_edit_tables", [
        _record("ve-fever-gains-less", "bm25, hotpotqa − fever", est, near_oracle="both corpora hold the evidence")])
    (row,) = [r for r in rows if r["id"] == "ve-fever-gains-less"]
    assert est["p"] < 0.05 and row["verdict"] == claims.NEAR_ORACLE and not row["counted"]


def test_a_correlations_p_agrees_with_its_fisher_z_interval():
    for r_target in (0.5, 0.88, 0.95):
        x = np.arange(5.0)
        y = r_target * (x - x.mean()) / x.std() + np.sqrt(1 - r_target ** 2) * np.array([1, -1, 0, 1, -1]) / 0.8944
        est = stats.correlation(x, y)
        assert (est["p"] < 0.05) == (est["low"] > 0 or est["high"] < 0), est


def test_a_p_below_the_level_with_an_interval_holding_zero_decides_nothing():
    """Notebook 01's cpu run: permutation p = 0.031 but the bootstrap interval [-0.02, 2.69] holds 0."""
    rec = ve.estimate("ve-consistency-separates", "hotpotqa", {"value": 1.33, "low": -0.02, "high": 2.69, "n": 60,
                                                             "p": 0.031, "test": "permutation"}, "consistency")
    verdict, reason = claims.verdict(rec)
    assert verdict == "inconclusive at this n" and "holds 0" in reason


def test_an_auc_difference_is_decided_by_its_paired_bootstrap_not_a_swap_permutation():
    """The swap permutation's null is exchangeable arms, not equal AUC: it printed p = 0.147 beside an interval
    [-11.02, -0.11]. Now the p is the bootstrap's own, so the two agree on every table."""
    rng = np.random.default_rng(4)
    disagree = 0
    for _ in range(25):
        correct = (rng.random(40) < 0.5).astype(float)
        conf_a = np.clip(0.5 + 0.3 * (correct - 0.5) + rng.normal(0, 0.25, 40), 0, 1)
        conf_b = np.where(rng.random(40) < 0.3, rng.random(40), conf_a)  # only some questions' confidence moves
        recs = [[type("R", (), {"id": i, "correct": c, "confidence": x})() for i, (c, x) in enumerate(zip(correct, conf))]
                for conf in (conf_a, conf_b)]
        est = ve.auc_difference(*recs, seed=1)
        assert est["test"].startswith("paired bootstrap")
        disagree += (est["p"] < 0.05) != (est["low"] > 0 or est["high"] < 0)
    assert disagree == 0


def test_every_quote_is_a_whole_sentence_and_untestable_claims_say_why():
    """Two quotes were cut mid-sentence ("…may disrupt the", "…assuming we have a"); directional statements that
    need what no offline run has are listed, each with its reason, and CoV-RAG's headline is a claim."""
    for c in CLAIMS:
        assert c.quote.rstrip().endswith((".", "!", "?", '"', ")")), (c.id, c.quote[-30:])
    ids = {c.id: c for c in CLAIMS}
    for claim_id in ("ve-2wiki-gains-more", "ve-beats-calibrator-auc", "ve-gains-more-than-react",
                     "ve-fever-wikipedia-beats-drqa", "cred-strong-models-robust-to-noise", "cred-chatgpt-fills-gaps"):
        assert ids[claim_id].notebook == "" and len(ids[claim_id].untestable) > 40, claim_id
    assert ids["covrag-beats-qa-only"].notebook == "10_covrag_finetune"


def test_a_judge_corrected_difference_is_never_called_enough(tmp_path):
    """Its interval holds the judge's rate uncertainty, which more questions do not shrink: the n from the spread of
    per-question differences is a minimum, and the note never says "enough"."""
    est = {"value": 14.0, "low": -0.7, "high": 42.5, "n": 20, "p": 0.32, "sd": 20.0, "scale": 1.0,
           "test": "paired bootstrap, judge-corrected (its 95% interval decides)"}
    rec = credibility_claims.estimate("cred-partial-beats-closed", "hotpotqa", est, "points", model="m")
    (row,) = [r for r in _ledger(tmp_path, "06_knowledge_recall", [rec]) if r["id"] == "cred-partial-beats-closed"]
    assert "would need at least n≈" in row["reason"] and "enough" not in row["reason"]


def test_review_of_the_ledger_round_two(tmp_path):
    """What a reviewer found: judge-bound secondaries read "supported"; Holm's p blamed on Newcombe; "enough only if
    at most 100%"; a share rounded up to one `full` cannot afford; a bootstrap decided by its p at the boundary."""
    strong = stats.paired_difference(*_paired(9, 0), scale=100)
    recs = [credibility_claims.estimate("cred-instruction-beats-foundation", f"{m}, hotpotqa", strong, "points",
                                        model="m", judge_bound=credibility_claims.JUDGE_BOUND) for m in ("F1", "R")]
    rows = [r for r in _ledger(tmp_path, "04_credibility_models", recs) if r["id"] == "cred-instruction-beats-foundation"]
    assert [r["verdict"] for r in rows] == ["not testable here"] * 2
    rec = _record("ve-beats-cot-sc", "x", stats.paired_difference(*_paired(8, 1), scale=100))
    verdict, reason = claims.verdict(rec, p=0.078)
    assert verdict == "inconclusive at this n" and "Holm-adjusted p = 0.078" in reason and "Newcombe" not in reason
    big = stats.paired_difference(*_paired(3, 0), scale=100)
    (row,) = [r for r in _ledger(tmp_path, "03_verify_and_edit_tables", [_record("ve-beats-cot-sc", "hotpotqa, dataset",
                                                                                   big)]) if r["id"] == "ve-beats-cot-sc"]
    assert "(enough at any discordance)" in row["reason"] and "100%" not in row["reason"]
    est = stats.paired_difference(*_paired(2, 1, n=800), scale=100)
    sizes = power.mcnemar_sizes(3.7, est, 800)
    shown = int(100 * sizes["affordable"])  # what the note prints, rounded down
    assert power.questions_needed(3.7, est, discordance=shown / 100) <= 800
    boundary = {"value": 1.0, "low": 0.0, "high": 2.0, "n": 40, "p": 0.04, "test": "paired bootstrap (its 95% interval "
                "decides)"}
    assert claims.verdict({**boundary, "claim": "ve-raises-auc"})[0] == "inconclusive at this n"


def test_a_constant_reflection_decision_asks_for_no_more_questions(tmp_path):
    est = stats.above_chance([1.0] * 10 + [0.0] * 10, chance=0.5, scale=100)  # refused none: one group right
    rec = credibility_claims.estimate("cred-reflection-above-chance", "hotpotqa", est, "points", model="m",
                                      constant_decision=True)
    (row,) = [r for r in _ledger(tmp_path, "07_reflection_completion", [rec]) if r["id"] == rec["claim"]]
    assert "a constant decision" in row["reason"] and "would need" not in row["reason"]


# --------------------------------------------------------------------------- the simulated model's rows


def test_a_simulated_models_rows_are_apart_untallied_and_say_whether_they_hold_the_planted_effect(tmp_path):
    from teaching import book

    found = stats.paired_difference(*_paired(9, 0), scale=100)  # +15 [+6.9, +24]: holds ve-cot-beats-standard's?
    claim = ve.claim("ve-cot-beats-standard")
    sim, null = "Llama2-13B, simulated (planted effects), paper", "simulated (planted effects), null, world 3"
    rows = _ledger(tmp_path, "03_verify_and_edit_tables", [
        _record("ve-cot-beats-standard", "hotpotqa", found, model=sim),
        _record("ve-cot-beats-standard", "hotpotqa", found, model=null),
        _record("ve-cot-beats-standard", "hotpotqa", found, model="SmolLM2")])
    mine = [r for r in rows if r["id"] == "ve-cot-beats-standard"]
    assert [r["model"] for r in mine] == ["SmolLM2", sim, null]  # the language model's rows first, apart
    by = {r["model"]: r for r in mine}
    assert by["SmolLM2"]["simulated"] is None and "planted" not in by["SmolLM2"]
    planted = claim.planted_effect[0]
    assert by[sim]["planted"] == planted and by[sim]["covers"] == (found["low"] <= planted <= found["high"])
    assert by[null]["planted"] == 0.0 and by[null]["covers"] is False  # sim:null plants nothing: a false positive
    tally = claims.summary(rows)
    assert tally["primary_verdicts"]["supported"] == 1  # the language model's row alone
    assert tally["simulated_verdicts"] == {"null": {**dict.fromkeys(claims.VERDICTS, 0), "supported": 1},
                                           "paper": {**dict.fromkeys(claims.VERDICTS, 0), "supported": 1}}
    (tmp_path / "tab-12-claims.csv").write_text(
        "paper,claim,role,scope,ours [95% CI],n,verdict,reason,counted,model,planted,planted inside 95% CI\n"
        f"V,x,primary,real scope,1.0,40,supported,r,True,SmolLM2,,\n"
        f"V,x,primary,sim scope,1.0,40,supported,r,True,\"{sim}\",4.5,no\n", encoding="utf-8")
    page = book.index_page([], tmp_path)
    ledger, apart = page.split("Simulated (planted effects): a check of the measuring chain")
    assert "real scope" in ledger and "sim scope" not in ledger and "1 of them are counted tests" in ledger
    assert "sim scope" in apart and "inside 0 of 1" in apart and "not evidence about the papers" in apart


def test_a_simulated_row_no_test_decided_has_no_coverage_and_a_claim_may_plant_nothing_in_its_unit():
    from covlib.papers.credibility import claims as cred

    claim = ve.claim("ve-cot-beats-standard")
    row = {"model": "simulated (planted effects), paper", "role": "primary", "low": 0.0, "high": 50.0}
    assert claim.planted_row(row)["covers"] is True
    assert claim.planted_row({**row, "verdict": "not testable here"})["covers"] is None  # no test: nothing to cover
    for claim_id in ("cred-instruction-beats-foundation", "cred-self-completion-helps"):  # planted in another unit
        c = cred.claim(claim_id)
        assert c.planted_effect[0] is None and c.planted_effect[1].startswith("none in this unit")
        assert c.planted_row(row) == {"simulated": "paper", "planted": None, "covers": None}


# --------------------------------------------------------------------------- the ledger as a researcher reads it


def _page_ledger(tmp_path, monkeypatch) -> tuple[list[dict], str, str]:
    """Notebook 04's, 06's and 03's records as they are written (the key facts' whole provenance in each credibility
    scope), through notebook 12's table path: (the rows, tab-12-claims.md, the book's front page)."""
    import pandas as pd

    from covlib.papers.credibility.key_facts import AGENT_KEY_FACTS_PROVENANCE as PROV
    from covlib.report import ledger_page, results
    from teaching import book

    paired = stats.paired_difference(*_paired(8, 2), scale=100)
    ran = "instruction-tuned: SmolLM2-135M-Instruct, Vicuna-7B; foundation: LLaMA-7B"
    cred = [credibility_claims.estimate("cred-instruction-beats-foundation", f"{m}, hotpotqa, 10 references with both "
                                        f"gold, key facts: {PROV}, {ran}", paired, f"{m} points", model="SmolLM2",
                                        judge_bound=credibility_claims.JUDGE_BOUND) for m in ("F1", "R", "P")]
    recall = [credibility_claims.estimate(c, f"hotpotqa, 10 references, key facts: {PROV}", paired, "points",
                                          model="SmolLM2") for c in ("cred-complete-beats-partial", "cred-partial-beats-closed")]
    for name, records in (("04_credibility_models", cred), ("06_knowledge_recall", recall),
                          ("03_verify_and_edit_tables", [_record("ve-beats-cot-sc", "hotpotqa, dataset", paired)])):
        (tmp_path / f"{name}.json").write_text(json.dumps({"metrics": {"claims": records}, "params": {"profile": "cpu"},
                                                           "meta": {"model": "SmolLM2"}}))
    rows = claims.collect(claims.read_results(tmp_path), CLAIMS)
    page, notes = ledger_page.page_rows(rows, {PROV: "agents"})
    monkeypatch.setenv("COVLIB_ROOT", str(tmp_path / "out"))
    frame = pd.DataFrame(page)
    results.save_table(frame, "tab-12-claims", shown=ledger_page.MARKDOWN_COLUMNS, notes=notes)
    tables_dir = tmp_path / "out" / "tables"
    return rows, (tables_dir / "tab-12-claims.md").read_text(), book.index_page([], tables_dir)


def test_the_ledger_page_holds_short_scopes_a_few_columns_and_the_provenance_once(tmp_path, monkeypatch):
    """Each credibility row's scope held the key facts' ~120-word provenance (a 700 px row) and the Markdown table
    had 21 columns; now the provenance is one note the rows point to, the page's columns are few, the CSV keeps all."""
    import csv
    import html

    from covlib.papers.credibility.key_facts import AGENT_KEY_FACTS_PROVENANCE as PROV
    from covlib.report import ledger_page, tables

    rows, markdown, front = _page_ledger(tmp_path, monkeypatch)
    table = tables.read_markdown(markdown)
    assert len(table.columns) <= 8 and "quote" not in table.columns and "model" not in table.columns
    scopes = [row[table.columns.index("scope")] for row in table.rows]
    assert all(len(s.split()) <= ledger_page.SCOPE_WORDS for s in scopes), scopes
    assert "hotpotqa, 10 references, key facts: agents [1]" in scopes
    assert markdown.count(PROV) == 1 and "[1] agents: Drafted by an AI coding agent" in markdown
    with (tmp_path / "out" / "tables" / "tab-12-claims.csv").open(encoding="utf-8") as handle:
        written = list(csv.DictReader(handle))
    assert len(written) == len(rows) and {"quote", "model", "reason", "counted", "p", "scope (recorded)"} <= set(written[0])
    assert sum(PROV in r["scope (recorded)"] for r in written) == 5  # every recorded scope whole in the CSV
    assert front.count(html.escape(PROV)) == 1  # the front page: once, under the table
    cells = re.findall(r"<tr>(?:<td[^>]*>.*?</td>){1}<td[^>]*>(.*?)</td>", front)  # each row's scope cell
    assert cells and all(len(html.unescape(c).split()) <= ledger_page.SCOPE_WORDS for c in cells), cells
    assert all(html.escape(line) in front for line in ledger_page.RULE)  # how a verdict is read, on the page


def test_a_row_where_the_interval_and_the_test_disagree_says_which_rule_decided():
    """The reason repeated the p only; now it says, in words, what decided."""
    est = stats.paired_difference(*_paired(8, 2, both=25, n=60), scale=100)  # Newcombe's excludes 0, p = 0.109
    verdict, reason = claims.verdict(_record("ve-beats-cot-sc", "hotpotqa, dataset", est))
    assert verdict == "inconclusive at this n" and est["low"] > 0
    assert "8 better, 2 worse of 60: exact McNemar p = 0.109: the test decides, and its p is at or above 0.05" in reason
    rec = ve.estimate("ve-consistency-separates", "hotpotqa", {"value": 1.33, "low": -0.02, "high": 2.69, "n": 60,
                                                             "p": 0.031, "test": "permutation"}, "consistency")
    assert "a verdict needs both p < 0.05 and a 95% interval clear of 0" in claims.verdict(rec)[1]
    rec = _record("ve-beats-cot-sc", "x", stats.paired_difference(*_paired(9, 0), scale=100))  # raw p 0.0039
    assert "the Holm-adjusted p decides, and it is at or above 0.05" in claims.verdict(rec, p=0.078)[1]


def test_near_oracle_rows_read_one_label_not_a_verdict(tmp_path):
    """With the same reason ("near-oracle corpus, not independent support") rows read "not testable here",
    "inconclusive at this n" or "supported"; now each reads the label, its reason what the test alone would read."""
    oracle = "the corpus holds the questions' gold paragraphs"
    rows = _ledger(tmp_path, "03_verify_and_edit_tables", [
        _record("ve-beats-cot-sc", "hotpotqa, dataset", stats.paired_difference(*_paired(3, 2), scale=100)),
        _record("ve-beats-cot-sc", "hotpotqa, bm25", stats.paired_difference(*_paired(9, 0), scale=100),
                near_oracle=oracle),
        _record("ve-beats-cot-sc", "hotpotqa, tfidf", stats.paired_difference(*_paired(3, 2), scale=100),
                near_oracle=oracle),
        _record("ve-fever-gains-less", "bm25, hotpotqa − fever",
                stats.independent_difference([1, 1, 1, 0] * 10, [0, 0, 1, 0] * 10, scale=100), near_oracle=oracle)])
    near = [r for r in rows if r["near_oracle"]]
    assert len(near) == 3 and {r["verdict"] for r in near} == {claims.NEAR_ORACLE} == {"near-oracle: shown, not counted"}
    assert not any(r["counted"] for r in near)
    reasons = {r["scope"]: r["reason"] for r in near}
    assert "its test alone would read supported" in reasons["hotpotqa, bm25"]
    assert "its test alone would read inconclusive at this n" in reasons["hotpotqa, tfidf"]
    assert claims.summary(rows)["primary_verdicts"][claims.NEAR_ORACLE] == 1  # ve-fever-gains-less's primary


def test_a_supported_row_over_a_baseline_at_zero_says_so_with_the_edits(tmp_path):
    """Notebook 03's cpu run: CoT-SC + VE beats CoT-SC, +10.00 with 6 better / 0 worse, read "supported" while
    CoT-SC answered 0 of 60 right and 55 of 60 were edited."""
    from covlib.report import ledger_page

    est = stats.paired_difference(*_paired(6, 0, both=0), scale=100)
    rows = _ledger(tmp_path, "03_verify_and_edit_tables", [
        _record("ve-beats-cot-sc", "hotpotqa, dataset", est, edited=55, knowledge="Dataset (the question's paragraphs)")])
    (row,) = [r for r in rows if r["id"] == "ve-beats-cot-sc"]
    assert row["verdict"] == "supported" and row["baseline_right"] == 0 and row["edited"] == 55
    assert "the baseline answered 0 of 60 right, so every right answer is a gain" in row["reason"]
    assert "(55 of 60 were edited)" in row["reason"]
    (shown,), _ = ledger_page.page_rows([row])
    assert shown["ours [95% CI], n"].startswith("10.00 [") and \
        "; n=60, 6 better / 0 worse, baseline 0 of 60 right, 55 of 60 edited; fragility 1" in shown["ours [95% CI], n"]
    working = _ledger(tmp_path, "03_verify_and_edit_tables", [
        _record("ve-beats-cot-sc", "hotpotqa, dataset", stats.paired_difference(*_paired(9, 0), scale=100))])
    assert "baseline answered 0" not in next(r for r in working if r["id"] == "ve-beats-cot-sc")["reason"]


def test_the_summary_defines_primary_secondary_and_counted_before_it_uses_them(tmp_path):
    """"the ledger ran 20 tests (23 primary rows; 28 secondary rows …)" did not say how 20 relates to 23 and 51."""
    from covlib.report import ledger_page

    oracle = "the corpus holds the gold paragraphs"
    est = stats.paired_difference(*_paired(9, 0), scale=100)
    rows = _ledger(tmp_path, "03_verify_and_edit_tables", [
        _record("ve-beats-cot-sc", "hotpotqa, dataset", est), _record("ve-beats-cot-sc", "fever, bm25", est),
        _record("ve-beats-cot-sc", "hotpotqa, bm25", est, near_oracle=oracle)])
    s = claims.summary(rows)
    text = ledger_page.summary_text(s["n_primary"], s["n_secondary"], s["n_tests"])
    assert s["n_tests"] == 2 and s["n_secondary"] == 2
    assert text.startswith(f"{s['n_primary']} primary rows (one per claim and model: each gives its claim's verdict) "
                           f"and 2 secondary rows (the claim's other settings, Holm-adjusted): "
                           f"{s['n_primary'] + 2} rows. 2 of them are counted tests: a row is counted when its test "
                           "ran on independent evidence, not on a near-oracle corpus")
    assert "`counted` column" in text


def test_a_long_why_is_cut_on_the_page_whole_in_the_csv_and_its_rest_folded_in_the_book(tmp_path):
    """The front page's "why" column held reasons of up to 81 words (a power analysis, the judge-bound note): each
    row 200-860 px tall. Now the page cuts a reason at a clause within `WHY_WORDS` words and folds the rest under it."""
    import html

    from covlib.report import ledger_page
    from teaching import results_html

    est = stats.paired_difference(*_paired(6, 0, both=0), scale=100)
    rows = _ledger(tmp_path, "03_verify_and_edit_tables", [
        _record("ve-beats-cot-sc", "hotpotqa, dataset", est, edited=55, knowledge="Dataset (the question's paragraphs)")])
    row = next(r for r in rows if r["id"] == "ve-beats-cot-sc")
    assert len(row["reason"].split()) > ledger_page.WHY_WORDS
    (shown,), _ = ledger_page.page_rows([row])
    assert shown["why"] == "6 better, 0 worse of 60: exact McNemar p = 0.0312 …" and shown["reason"] == row["reason"]
    cell = results_html.ledger_table([shown], link=False)
    assert ("<details class=\"covlib-why\"><summary>6 better, 0 worse of 60: exact McNemar p = 0.0312 …</summary>"
            + html.escape("the baseline answered 0 of 60 right")) in cell
    assert ledger_page.cut("a b c", 3) == "a b c" and ledger_page.cut("one two; three four five", 4) == "one two …"
    assert ledger_page.cut("one two three four five", 3) == "one two …"  # no clause fits: cut at words


def test_the_front_page_ledger_gives_the_reasons_room_and_folds_the_rows_nothing_could_test(tmp_path, monkeypatch):
    """The ledger's column widths were set for 9 columns while it had 6: "why" got 6% of the table, and with 22 of 30
    rows "not testable here" the table ran from y = 711 to 11,218 px. Now each column has its share by name and the
    rows nothing could test are one click away, folded under the table."""
    from chromium import where_results_start

    rows, _, front = _page_ledger(tmp_path, monkeypatch)
    untestable = sum(r["verdict"] == "not testable here" and r["role"] == "primary" for r in rows)
    assert untestable and f"<details class=\"covlib-untestable\"><summary>{untestable} not testable here" in front
    page = tmp_path / "index.html"
    page.write_text(front, encoding="utf-8")
    probe = where_results_start(page, tmp_path, size=(1280, 1600))  # a laptop's window
    assert probe["why_share"] > 0.2 and probe["row_max"] <= 150 and probe["ledger_bottom"] < probe["screen"], probe
