"""Result writers (provenance, atomic writes, name rules) and plot helpers; unreadable recorded metrics name the file,
empty or mismatched data plot a note or say what is wrong."""

from __future__ import annotations

import json
import os

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from covlib.report import plotting, results  # noqa: E402
from covlib.nli import OverlapJudge  # noqa: E402


@pytest.fixture
def out_root(tmp_path, monkeypatch):
    """Send figures/, tables/ and results/ to a temporary root."""
    monkeypatch.setenv("COVLIB_ROOT", str(tmp_path))
    return tmp_path


def _leftovers(folder):
    return [p.name for p in folder.iterdir() if p.name.startswith(".") or p.name.endswith(".tmp")]


def test_save_figure_with_provenance(out_root):
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    written = results.save_figure(fig, "fig-02-consistency-kde", params={"k": 3}, model="smollm2", judge=OverlapJudge(), n=np.int64(50))
    plt.close(fig)
    names = sorted(p.name for p in written)
    assert names == ["fig-02-consistency-kde.json", "fig-02-consistency-kde.pdf", "fig-02-consistency-kde.png"]
    folder = out_root / "figures"
    assert (folder / "fig-02-consistency-kde.png").read_bytes()[:4] == b"\x89PNG"
    assert (folder / "fig-02-consistency-kde.pdf").read_bytes()[:4] == b"%PDF"
    side = json.loads((folder / "fig-02-consistency-kde.json").read_text())
    assert side["params"] == {"k": 3}
    assert side["meta"]["judge"] == "approx-overlap (not NLI)" and side["meta"]["n"] == 50
    assert side["meta"]["model"] == "smollm2" and "timestamp" in side["meta"] and "git_commit" in side["meta"]
    assert _leftovers(folder) == []


def _stamps(fig) -> list[str]:
    return [t.get_text() for t in fig.texts if t.get_gid() == "covlib-provenance-stamp"]


def test_save_figure_stamps_profile_size_and_model_under_everything(out_root):
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    results.save_figure(fig, "fig-99-stamp", params={"profile": "smoke", "n_questions": 12, "seed": 0}, model="smollm2")
    assert _stamps(fig) == ["profile: smoke · n_questions=12 · model=smollm2"]
    renderer = fig._get_renderer()
    stamp = [t for t in fig.texts if t.get_gid() == "covlib-provenance-stamp"][0].get_window_extent(renderer)
    assert all(stamp.y1 <= label.get_window_extent(renderer).y0 for label in ax.get_xticklabels() if label.get_text())
    results.save_figure(fig, "fig-99-stamp", params={"profile": "cpu"}, n=np.int64(20))  # saved again: one stamp, new
    assert _stamps(fig) == ["profile: cpu · n=20"]
    plt.close(fig)


def test_a_figure_of_the_simulated_model_says_so_in_its_stamp(out_root):
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    results.save_figure(fig, "fig-99-sim", params={"profile": "full", "model": "sim:paper"})
    assert _stamps(fig) == ["profile: full · model=sim:paper (simulated (planted effects))"]
    plt.close(fig)


def test_save_figure_stamp_leaves_out_what_a_caption_says(out_root):
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    plotting.caption(ax, model="smollm2", n=120)
    results.save_figure(fig, "fig-99-captioned", params={"profile": "smoke", "sizes": {"hotpotqa": 2}}, model="smollm2", n=12)
    assert _stamps(fig) == ["profile: smoke · n=12"]  # "n=120" in the caption is another number
    plotting.caption(ax, n=12)
    results.save_figure(fig, "fig-99-captioned", params={"profile": "smoke", "sizes": {"hotpotqa": 2}}, model="smollm2", n=12)
    assert _stamps(fig) == ["profile: smoke"]
    results.save_figure(fig, "fig-99-captioned", params={"profile": "full", "sizes": {"hotpotqa": 2, "fever": 3}})
    assert _stamps(fig) == ["profile: full · n_hotpotqa=2 · n_fever=3"]
    plt.close(fig)


def test_save_figure_without_profile_or_size_adds_no_stamp(out_root):
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    results.save_figure(fig, "fig-99-plain", params={"seed": 0})
    assert _stamps(fig) == [] and fig.texts == []
    plt.close(fig)


def test_save_table_markdown_has_provenance(out_root):
    df = pd.DataFrame({"method": ["CoT", "Verify-and-Edit"], "EM": [np.float64(0.351), 0.402]})
    shown = results.save_table(df, "tab-01-hotpotqa", judge="overlap", n=100)
    assert [p.suffix for p in shown.paths] == [".csv", ".md", ".json"]
    md = (out_root / "tables" / "tab-01-hotpotqa.md").read_text()
    assert "| method" in md and "0.351" in md
    assert md.strip().splitlines()[-1].startswith("_Provenance:") and "judge: overlap" in md and "n: 100" in md
    assert "judge: overlap" in shown._repr_html_() and "<td>0.351</td>" in shown._repr_html_()  # what the notebook shows
    assert pd.read_csv(out_root / "tables" / "tab-01-hotpotqa.csv").shape == (2, 2)
    assert _leftovers(out_root / "tables") == []


def test_record_and_load_metrics_converts_numpy(out_root):
    metrics = {"accuracy": np.float32(0.5), "n": np.int64(3), "per_k": {1: np.float64(0.2)}, "arr": np.arange(3), "bad": float("nan"), "ok": np.bool_(True)}
    path = results.record_metrics("03_fever_verify", metrics, params={"threshold": 0.5}, judge=OverlapJudge())
    assert path == out_root / "results" / "03_fever_verify.json"
    record = results.load_metrics("03_fever_verify")
    assert record["metrics"] == {"accuracy": 0.5, "n": 3, "per_k": {"1": 0.2}, "arr": [0, 1, 2], "bad": None, "ok": True}
    assert record["params"] == {"threshold": 0.5} and record["meta"]["judge"] == "approx-overlap (not NLI)"
    with pytest.raises(FileNotFoundError):
        results.load_metrics("missing")


@pytest.mark.parametrize("name", ["figure-02", "fig-2-x", "tab-01-x", "fig-02-x.png", "../fig-02", "fig-02/x"])
def test_figure_name_validation(out_root, name):
    fig = plt.figure()
    with pytest.raises(ValueError):
        results.save_figure(fig, name)
    plt.close(fig)


def test_table_and_metric_name_validation(out_root):
    with pytest.raises(ValueError):
        results.save_table(pd.DataFrame({"a": [1]}), "fig-01-x")
    with pytest.raises(ValueError):
        results.record_metrics("../escape", {})
    assert not (out_root / "tables").exists()


def test_atomic_write_keeps_old_file_on_crash(out_root, monkeypatch):
    results.record_metrics("m", {"v": 1})

    def boom(src, dst):
        raise OSError("disk full")
    with monkeypatch.context() as patch:
        patch.setattr(os, "replace", boom)
        with pytest.raises(OSError):
            results.record_metrics("m", {"v": 2})
    assert results.load_metrics("m")["metrics"] == {"v": 1}
    assert sorted(p.name for p in (out_root / "results").iterdir()) == ["m.json"]


# --------------------------------------------------------------------------- plotting


def test_plot_helpers_draw(out_root):
    plotting.set_style()
    fig, axes = plt.subplots(2, 3, figsize=(12, 7))
    ours = pd.DataFrame({"method": ["CoT", "VE"], "EM": [0.30, 0.35]})
    ax = plotting.bar_with_reference(ours, "method", "EM", reference={"CoT": 0.33, "VE": 0.37}, ax=axes[0, 0])
    assert ax is axes[0, 0] and len(ax.patches) >= 4
    rng = np.random.default_rng(0)
    values = np.r_[rng.normal(0.7, 0.1, 50), rng.normal(0.4, 0.1, 50)]
    groups = ["correct"] * 50 + ["incorrect"] * 50
    ax = plotting.kde_by_group(values, groups, ax=axes[0, 1], clip=(0, 1))
    assert ax is axes[0, 1] and (len(ax.collections) + len(ax.lines)) >= 2
    ax = plotting.line_with_peak([0.1, 0.2, 0.3], {"EM": [0.2, 0.5, 0.4], "F1": [0.3, 0.35, 0.6]}, ax=axes[0, 2])
    assert len(ax.lines) == 4 and len(ax.texts) == 2
    ax = plotting.hist(np.r_[values, np.nan], ax=axes[1, 0], bins=10)
    assert len(ax.patches) == 10
    ax = plotting.recall_curve({"bm25": {1: 0.2, 5: 0.5, 20: 0.7}, "dense": {1: 0.3, 5: 0.6, 20: 0.8}}, ax=axes[1, 1])
    assert len(ax.lines) == 2 and ax.get_xscale() == "log"
    ax = plotting.caption(ax, "demo", model="smollm2", judge=OverlapJudge(), n=100)
    assert "judge=approx-overlap (not NLI)" in ax.texts[-1].get_text()
    ax2 = plotting.bar_with_reference(
        pd.DataFrame({"d": ["a", "b"], "m": ["x", "x"], "v": [1.0, 2.0]}), "d", "v", hue="m",
        reference=pd.DataFrame({"d": ["a", "b"], "m": ["x", "x"], "v": [1.5, 2.5]}), ax=axes[1, 2],
    )
    assert len(ax2.patches) >= 4
    assert plotting.hist([1, 2, 3]) is not None  # ax=None makes its own figure
    results.save_figure(fig, "fig-99-helpers")
    plt.close("all")
    assert (out_root / "figures" / "fig-99-helpers.png").stat().st_size > 1000


def test_unreadable_recorded_metrics_name_the_file(tmp_path, monkeypatch):
    from covlib.report import results

    monkeypatch.setenv("COVLIB_ROOT", str(tmp_path))
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "01_x.json").write_text('{"metrics": ', encoding="utf-8")
    with pytest.raises(ValueError, match=r"01_x.json is unreadable.*re-run the notebook .*make reproduce ONLY=01"):
        results.load_metrics("01_x")


def test_recorded_metrics_with_an_impossible_estimate_are_refused_by_file_metric_and_field(out_root):
    """A metric's interval, p or n no test gives (a file damaged or edited by hand) was read as it stood."""
    good = {"value": 40.0, "low": 31.2, "high": 49.3, "n": 100}
    for damage, field in (({"low": 55.0}, "'low' = 55.0 is above high = 49.3"), ({"p": 1.5}, "'p' = 1.5"),
                          ({"n": -3}, "'n' = -3 is not a whole number >= 0")):
        results.record_metrics("07_reflection_completion", {"intervals": {"bm25 / F1": {**good, **damage}}})
        with pytest.raises(ValueError) as err:
            results.load_metrics("07_reflection_completion")
        assert "07_reflection_completion.json: metric metrics.intervals.bm25 / F1, field " + field in str(err.value)
        assert "make reproduce ONLY=07" in str(err.value)
    results.record_metrics("07_reflection_completion", {"intervals": {"bm25 / F1": good}})
    assert results.load_metrics("07_reflection_completion")["metrics"]["intervals"]["bm25 / F1"] == good


def test_plot_of_empty_data_is_a_note_and_mismatched_lengths_an_error():
    import matplotlib

    matplotlib.use("Agg")
    from covlib.report import plotting

    ax = plotting.kde_by_group([], [])
    assert [t.get_text() for t in ax.texts] == ["no values to plot"]
    ax = plotting.kde_by_group([float("nan")], ["a"])  # nothing finite left: the same note, no seaborn error
    assert [t.get_text() for t in ax.texts] == ["no values to plot"]
    with pytest.raises(ValueError, match="3 values but 2 groups"):
        plotting.kde_by_group([1.0, 2.0, 3.0], [True, False])
    with pytest.raises(ValueError, match="series 'a' has 2 values for 3 x values"):
        plotting.line_with_peak([1, 2, 3], {"a": [1, 2]})


def test_a_figure_with_a_long_provenance_caption_is_saved_at_the_size_it_was_drawn(out_root):
    """A 1000-character caption (a judge's whole provenance) once widened fig-05 to 6,272 px: it is wrapped now."""
    fig, axes = plt.subplots(1, 2, figsize=(7, 4))
    for ax in axes:
        ax.plot([0, 1], [0, 1])
    agreement = " ".join(f"stratum{i}: sensitivity 0.{i % 10}4, specificity 0.9{i % 10} (n={40 + i})" for i in range(20))
    assert len(agreement) > 1000
    plotting.caption(axes[0], judge="minilm-fever-nli (onnx-int8)", judge_agreement=agreement, n=60)
    fig.suptitle("Key-fact recall as noise grows, " * 12)
    results.save_figure(fig, "fig-99-long-caption", params={"profile": "cpu"}, model="smollm2")
    width, height = plt.imread(out_root / "figures" / "fig-99-long-caption.png").shape[1::-1]
    assert width <= 1.1 * 7 * 150 and height <= 2 * 4 * 150  # dpi 150: 1050 px drawn, not thousands
    shown = " ".join(_figure_text_words(fig))
    assert all(word in shown for word in agreement.split()) and "model=smollm2" in shown  # wrapped, nothing cut
    title = fig.get_suptitle()
    assert title.count("\n") >= 1 and fig._suptitle.get_window_extent().y0 >= max(a.bbox.y1 for a in axes)  # above
    plt.close(fig)


def _figure_text_words(fig) -> list[str]:
    texts = [t.get_text() for t in fig.texts] + [t.get_text() for ax in fig.axes for t in ax.texts]
    return " ".join(texts).split()
