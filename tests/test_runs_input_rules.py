"""Recorded results and plots (covlib.runs): unreadable metrics name the file; empty or mismatched data plot a note, not an error."""

from __future__ import annotations


import pytest


def test_unreadable_recorded_metrics_name_the_file(tmp_path, monkeypatch):
    from covlib.runs import results

    monkeypatch.setenv("COVLIB_ROOT", str(tmp_path))
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "01_x.json").write_text('{"metrics": ', encoding="utf-8")
    with pytest.raises(ValueError, match=r"01_x.json are unreadable.*re-run the notebook"):
        results.load_metrics("01_x")


def test_plots_of_empty_or_mismatched_data():
    import matplotlib

    matplotlib.use("Agg")
    from covlib.runs import plotting

    ax = plotting.kde_by_group([], [])
    assert [t.get_text() for t in ax.texts] == ["no values to plot"]
    ax = plotting.kde_by_group([float("nan")], ["a"])  # nothing finite left: the same note, no seaborn error
    assert [t.get_text() for t in ax.texts] == ["no values to plot"]
    with pytest.raises(ValueError, match="3 values but 2 groups"):
        plotting.kde_by_group([1.0, 2.0, 3.0], [True, False])
    with pytest.raises(ValueError, match="series 'a' has 2 values for 3 x values"):
        plotting.line_with_peak([1, 2, 3], {"a": [1, 2]})
