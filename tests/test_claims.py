"""The claims ledger: verdicts from intervals, one row per recorded estimate, every claim listed."""

from __future__ import annotations

import json

import pytest

from covlib.core import metrics
from covlib.runs import claims


def _est(value, low, high, n=50):
    return {"value": value, "low": low, "high": high, "n": n}


def test_verdict_from_the_interval():
    rec = lambda e, cid="ve-beats-cot-sc": claims.estimate(cid, "hotpotqa", e, "EM points")  # noqa: E731
    assert claims.verdict(rec(_est(5, 1, 9)))[0] == "supported"
    assert claims.verdict(rec(_est(-5, -9, -1)))[0] == "contradicted"
    assert claims.verdict(rec(_est(1, -2, 4)))[0] == "inconclusive at this n"
    assert claims.verdict(rec(_est(0, 0, 0)))[0] == "inconclusive at this n"
    assert claims.verdict(rec(_est(float("nan"), float("nan"), float("nan"), 1)))[0] == "inconclusive at this n"
    # an "at least" claim: an interval at or above 0 that is not all 0 supports it
    assert claims.verdict(rec(_est(2, 0, 4), "covrag-multi-round-ge-single"))[0] == "supported"
    assert claims.verdict(claims.untestable("cred-human-correlation", "no human ratings")) == (
        "not testable here", "no human ratings")


def test_records_refuse_unknown_claims_and_incomplete_estimates():
    with pytest.raises(KeyError, match="unknown claim"):
        claims.estimate("ve-beats-cot", "x", _est(1, 0, 2), "EM points")
    with pytest.raises(ValueError, match="lacks"):
        claims.estimate("ve-beats-cot-sc", "x", {"value": 1}, "EM points")


def test_collect_lists_every_claim_once_at_least(tmp_path):
    diff = metrics.paired_difference([1, 1, 1, 0] * 10, [0, 1, 0, 0] * 10, scale=100)
    record = {"metrics": {"claims": [claims.estimate("ve-beats-cot-sc", "hotpotqa, bm25", diff, "EM points",
                                                     model="m")]},
              "params": {"profile": "smoke"}, "meta": {"model": "m"}}
    (tmp_path / "03_verify_and_edit_tables.json").write_text(json.dumps(record))
    rows = claims.collect(claims.read_results(tmp_path))
    assert {r["id"] for r in rows} == {c.id for c in claims.CLAIMS}
    (row,) = [r for r in rows if r["id"] == "ve-beats-cot-sc"]
    assert row["verdict"] == "supported" and row["n"] == 40 and row["profile"] == "smoke" and row["model"] == "m"
    missing = [r for r in rows if r["id"] == "covrag-finetune-raises-judgment"][0]
    assert missing["verdict"] == "not testable here" and "has not run" in missing["reason"]


def test_unreadable_results_are_named(tmp_path):
    (tmp_path / "01_consistency_kde.json").write_text("{not json")
    with pytest.raises(ValueError, match="01_consistency_kde.json"):
        claims.read_results(tmp_path)


def test_the_book_front_page_shows_the_ledger_escaped(tmp_path):
    from teaching import book

    assert "Not built yet" in book.ledger_section(tmp_path)
    (tmp_path / "tab-12-claims.csv").write_text(
        "paper,claim,scope,ours [95% CI],n,verdict,reason\n"
        'CoV-RAG,x,"<script>alert(1)</script>","1.0 [0.5, 2.0]",40,supported,the 95% interval lies above 0\n',
        encoding="utf-8")
    page = book.index_page([], tmp_path)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>" not in page
    assert page.index("Claims ledger") < page.index("Verify-and-Edit") and "1.0 [0.5, 2.0]" in page
