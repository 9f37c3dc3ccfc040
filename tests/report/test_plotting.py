"""Plot helpers draw something for every legend entry; every notebook figure is titled."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from covlib.report import plotting  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _legend(ax) -> list[str]:
    return [t.get_text() for t in ax.get_legend().get_texts()]


def test_kde_of_a_group_below_a_handful_of_points_draws_its_points_not_a_density():
    values = [1.0, 2.0, 3.0, 2.5, 1.5, 4.0, 0.5]
    ax = plotting.kde_by_group(values, ["incorrect"] * 5 + ["correct"] * 2)
    assert _legend(ax) == ["incorrect (n=5)", "correct (n=2, points)"]
    (rug,) = [ln for ln in ax.lines if ln.get_label() == "correct (n=2, points)"]
    assert list(rug.get_xdata()) == [4.0, 0.5] and rug.get_marker() == "|" and rug.get_visible()
    assert len(ax.collections) == 1  # the other group's density, filled; none for the two points
    assert ax.get_ylabel() == "density"
    plt.close("all")


def test_kde_of_identical_values_or_only_few_points_draws_points_each_in_its_own_colour():
    ax = plotting.kde_by_group([3.0, 3.0, 3.0, 3.0, 3.0, 5.0], ["a"] * 5 + ["b"], fill=False)
    assert _legend(ax) == ["a (n=5, points)", "b (n=1, points)"]
    lines = {ln.get_label(): ln for ln in ax.lines}
    assert list(lines["a (n=5, points)"].get_xdata()) == [3.0] * 5 and list(lines["b (n=1, points)"].get_xdata()) == [5.0]
    assert lines["a (n=5, points)"].get_color() != lines["b (n=1, points)"].get_color()
    assert lines["a (n=5, points)"].get_ydata()[0] != lines["b (n=1, points)"].get_ydata()[0]  # bands apart
    assert not ax.collections and ax.get_ylabel() == "" and not list(ax.get_yticks())  # no density axis to read
    plt.close("all")


def test_kde_legend_colours_match_the_curves():
    ax = plotting.kde_by_group([0.1, 0.2, 0.3, 0.25, 0.15, 0.7, 0.8, 0.9, 0.85, 0.75], ["x"] * 5 + ["y"] * 5, fill=False)
    assert _legend(ax) == ["x (n=5)", "y (n=5)"]
    curves = sorted(ax.lines, key=lambda ln: ln.get_xdata().mean())
    handles = ax.get_legend().legend_handles
    rgb = matplotlib.colors.to_rgb
    assert [rgb(h.get_color()) for h in handles] == [rgb(c.get_color()) for c in curves]
    plt.close("all")


def _figure_cells() -> list[tuple[str, str]]:
    """(figure name, source of the cell that saves it) for every notebook's save_figure call."""
    import jupytext

    out = []
    for twin in sorted((ROOT / "notebooks").glob("[0-9][0-9]*_*.py")):
        for cell in jupytext.read(twin).cells:
            if cell.cell_type == "code":
                out += [(name, cell.source) for name in re.findall(r"save_figure\([^,]+,\s*[\"']([^\"']+)", cell.source)]
    return out


@pytest.mark.parametrize(
    "name,source",
    [pytest.param(n, s, id=n) for n, s in _figure_cells()],
)
def test_every_notebook_figure_has_a_title(name, source):
    assert re.search(r"\.set_title\(|\.suptitle\(|\btitle=", source), f"{name}: give it ax.set_title or fig.suptitle"


def test_notebook_00_figures_are_all_found():
    assert {n for n, _ in _figure_cells() if n.startswith("fig-00-")} == {
        "fig-00-paragraph-lengths", "fig-00-question-types", "fig-00-retrieval-recall"}
