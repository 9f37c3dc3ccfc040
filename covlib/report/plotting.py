"""Plot style and small plot helpers; each takes `ax=None` and returns the Axes.

Call `set_style()` once per notebook; save figures with `covlib.report.results.save_figure`.
Nothing here calls `plt.show()`, so it works under the Agg backend.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np


def set_style() -> None:
    """Seaborn 'whitegrid' theme, 'notebook' context, colour-blind palette."""
    import matplotlib as mpl
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="notebook", palette="colorblind")
    mpl.rcParams.update({"figure.dpi": 100, "savefig.bbox": "tight", "axes.titlesize": "medium"})


def _ax(ax: Any = None, figsize: tuple[float, float] = (6, 4)) -> Any:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=figsize)[1]


def bar_with_reference(
    df: Any,
    x: str,
    y: str,
    hue: str | None = None,
    reference: Any = None,
    ax: Any = None,
    labels: bool = True,
    ci: tuple[str, str] | None = None,
) -> Any:
    """Bars of `df[y]` by `x` (and `hue`); with `reference` (same columns, or {x: value}) ours vs paper side by side.

    `ci=(low column, high column)`: columns of `df` with the bounds of each `y` (e.g. a 95%
    interval), drawn as error bars on our bars (not on the reference's); needs `hue=None`.
    A row with a missing bound gets no error bar.
    """
    import pandas as pd
    import seaborn as sns

    if ci is not None and hue is not None:
        raise ValueError("bar_with_reference: error bars (ci=) need hue=None")
    ax = _ax(ax)
    data = df.copy()
    if reference is not None:
        ref = pd.DataFrame({x: list(reference), y: list(reference.values())}) if isinstance(reference, Mapping) else reference.copy()
        data["source"], ref["source"] = "ours", "paper"
        data = pd.concat([data, ref], ignore_index=True)
        if hue is None:
            hue = "source"
        else:
            data["_hue"] = data[hue].astype(str) + " (" + data["source"] + ")"
            hue = "_hue"
    sns.barplot(data=data, x=x, y=y, hue=hue, errorbar=None, ax=ax)
    if labels:
        for bars in ax.containers:
            ax.bar_label(bars, fmt="%.2f", fontsize=7, padding=1)
    if ci is not None and ax.containers:
        _bar_errors(ax, ax.containers[0], df, x, y, ci)
    if hue is not None and ax.get_legend() is not None:
        ax.legend(title=None if hue in ("source", "_hue") else hue, fontsize=8)
    return ax


def _bar_errors(ax: Any, bars: Any, df: Any, x: str, y: str, ci: tuple[str, str]) -> None:
    """Error bars from df[ci[0]] to df[ci[1]] on the bars of one container, matched to df rows by x category."""
    ticks = {round(float(t), 6): label.get_text() for t, label in zip(ax.get_xticks(), ax.get_xticklabels())}
    bounds = {str(k): (lo, hi) for k, lo, hi in zip(df[x], df[ci[0]], df[ci[1]])}
    xs, ys, err = [], [], [[], []]
    for patch in bars.patches:
        centre = patch.get_x() + patch.get_width() / 2
        label = ticks.get(round(float(np.round(centre)), 6))
        lo, hi = bounds.get(label, (np.nan, np.nan))
        height = patch.get_height()
        if label is None or not (np.isfinite(height) and np.isfinite(lo) and np.isfinite(hi)):
            continue
        xs.append(centre)
        ys.append(height)
        err[0].append(max(height - lo, 0.0))
        err[1].append(max(hi - height, 0.0))
    if xs:
        ax.errorbar(xs, ys, yerr=err, fmt="none", ecolor="0.2", elinewidth=1, capsize=3, zorder=3)


MIN_DENSITY_POINTS = 5  # below this many values (or with no spread) a group is drawn as its points, not a density


def kde_by_group(
    values: Sequence[float],
    groups: Sequence[Any],
    ax: Any = None,
    clip: tuple[float, float] | None = None,
    bw_adjust: float = 1.0,
    fill: bool = True,
) -> Any:
    """Density of `values` per group (e.g. consistency for correct vs incorrect), each normalised on its own.

    A group with fewer than `MIN_DENSITY_POINTS` values, or with identical values, gets no density (two points would
    draw a smooth curve across the whole range): its values are drawn as ticks along the bottom (a rug, each value
    its own tick), labelled "<group> (n=2, points)", so every legend entry has something drawn and nothing is smoothed
    that the data do not support.
    """
    import math

    import pandas as pd
    import seaborn as sns
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    if len(values) != len(groups):
        raise ValueError(f"kde_by_group: {len(values)} values but {len(groups)} groups")
    ax = _ax(ax)
    data = pd.DataFrame({"value": np.asarray(values, dtype=float), "group": [str(g) for g in groups]}).dropna()
    if data.empty:
        ax.text(0.5, 0.5, "no values to plot", ha="center", va="center", transform=ax.transAxes)
        return ax
    levels = list(data["group"].unique())  # seaborn's own hue order: order of appearance
    colours = dict(zip(levels, sns.color_palette(n_colors=len(levels))))
    by_group = {g: data.loc[data["group"] == g, "value"] for g in levels}
    few = {g for g, v in by_group.items() if len(v) < MIN_DENSITY_POINTS or math.isclose(np.nan_to_num(v.var()), 0)}
    labels = {g: f"{g} (n={len(v)}{', points' if g in few else ''})" for g, v in by_group.items()}
    dense = data[~data["group"].isin(few)].assign(group=lambda d: d["group"].map(labels))
    if not dense.empty:
        sns.kdeplot(data=dense, x="value", hue="group", hue_order=[labels[g] for g in levels if g not in few],
                    palette={labels[g]: colours[g] for g in levels if g not in few}, common_norm=False, clip=clip,
                    bw_adjust=bw_adjust, fill=fill, ax=ax, warn_singular=False, legend=False)
    handles = []
    for i, g in enumerate(levels):
        if g in few:  # a rug: one tick per value, each group in its own band along the bottom
            xs = by_group[g].to_numpy()
            band = 0.04 + 0.06 * sum(1 for h in levels[:i] if h in few)
            handles.append(ax.plot(xs, np.full(len(xs), band), ls="none", marker="|", ms=14, mew=2, color=colours[g],
                                   transform=ax.get_xaxis_transform(), label=labels[g])[0])
        elif fill:
            handles.append(Patch(facecolor=colours[g], edgecolor=colours[g], alpha=0.5, label=labels[g]))
        else:
            handles.append(Line2D([], [], color=colours[g], label=labels[g]))
    if dense.empty:  # points only: the x range is theirs, and there is no density to put on y
        ax.set_yticks([])
        pad = max(0.5, 0.05 * float(data["value"].max() - data["value"].min()))
        ax.set_xlim(float(data["value"].min()) - pad, float(data["value"].max()) + pad)
    ax.legend(handles=handles, loc="best", fontsize=8)
    ax.set_ylabel("density" if not dense.empty else "")
    return ax


def scores_by_group(scores: Mapping[str, Sequence[float]], groups: Sequence[Any], ax: Any = None) -> Any:
    """One box per score name and group, points over them (e.g. verifier scores for correct vs wrong answers)."""
    import pandas as pd
    import seaborn as sns

    ax = _ax(ax, figsize=(8, 4))
    rows = [{"score": name, "value": v, "group": str(g)} for name, values in scores.items()
            for v, g in zip(values, groups) if v is not None and np.isfinite(v)]
    data = pd.DataFrame(rows, columns=["score", "value", "group"])
    if data.empty:
        ax.text(0.5, 0.5, "no scores parsed", ha="center", va="center", transform=ax.transAxes)
        return ax
    counts = pd.Series([str(g) for g in groups]).value_counts()
    data["group"] = data["group"].map(lambda g: f"{g} (n={counts.get(g, 0)})")
    sns.boxplot(data=data, x="score", y="value", hue="group", ax=ax, fliersize=0, width=0.6)
    sns.stripplot(data=data, x="score", y="value", hue="group", dodge=True, ax=ax, size=2, alpha=0.5, legend=False)
    ax.set_xlabel("")
    ax.tick_params(axis="x", labelrotation=20, labelsize=8)
    if ax.get_legend() is not None:
        sns.move_legend(ax, "best", title=None, fontsize=8)
    return ax


def line_with_peak(
    x: Sequence[float],
    ys: Mapping[str, Sequence[float]],
    ax: Any = None,
    mark_peak: bool = True,
    fmt: str = "{:.3f}",
    bands: Mapping[str, tuple[Sequence[float], Sequence[float]]] | None = None,
) -> Any:
    """One line per series over `x` (e.g. a threshold ablation), with each maximum marked and labelled.

    `bands={label: (low, high)}` shades each named series' interval (e.g. its 95% bootstrap
    interval) in the line's colour.
    """
    ax = _ax(ax)
    x = np.asarray(x, dtype=float)
    for label, series in ys.items():
        y = np.asarray(series, dtype=float)
        if y.shape != x.shape:
            raise ValueError(f"line_with_peak: series {label!r} has {y.size} values for {x.size} x values")
        (line,) = ax.plot(x, y, marker="o", markersize=3, label=label)
        if bands is not None and label in bands:
            low, high = (np.asarray(b, dtype=float) for b in bands[label])
            if low.shape != x.shape or high.shape != x.shape:
                raise ValueError(f"line_with_peak: band of {label!r} has {low.size}/{high.size} bounds for {x.size} x values")
            ax.fill_between(x, low, high, color=line.get_color(), alpha=0.2, linewidth=0)
        if mark_peak and np.isfinite(y).any():
            i = int(np.nanargmax(y))
            ax.plot([x[i]], [y[i]], marker="*", markersize=12, color=line.get_color(), linestyle="none")
            ax.annotate(fmt.format(y[i]), (x[i], y[i]), xytext=(0, 6), textcoords="offset points", ha="center", fontsize=8)
    if len(ys) > 1:
        ax.legend(fontsize=8)
    return ax


def hist(values: Sequence[float], ax: Any = None, bins: int | Sequence[float] = 30, xlabel: str | None = None, **kwargs: Any) -> Any:
    """Histogram of the finite values (extra kwargs go to `Axes.hist`)."""
    ax = _ax(ax)
    values = np.asarray(values, dtype=float)
    ax.hist(values[np.isfinite(values)], bins=bins, **kwargs)
    ax.set_ylabel("density" if kwargs.get("density") else "count")
    if xlabel:
        ax.set_xlabel(xlabel)
    return ax


def recall_curve(recalls: Mapping[str, Mapping[int, float]], ax: Any = None, xlabel: str = "k",
                 ylabel: str = "recall@k") -> Any:
    """Recall@k against k, one line per retriever or model (log-scaled k when it spans over a decade)."""
    ax = _ax(ax)
    ks: set[int] = set()
    for name, by_k in recalls.items():
        k = sorted(int(v) for v in by_k)
        ks.update(k)
        ax.plot(k, [by_k[v] for v in k], marker="o", label=name)
    if ks and min(ks) > 0 and max(ks) / min(ks) > 10:
        ax.set_xscale("log")
    ax.set_xticks(sorted(ks), [str(k) for k in sorted(ks)])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=8)
    return ax


def caption(ax: Any, text: str = "", **fields: Any) -> Any:
    """A small grey provenance caption under the x-label, e.g. caption(ax, model=..., judge=..., n=...)."""
    parts = [text] if text else []
    parts += [f"{k}={getattr(v, 'name', v)}" for k, v in fields.items() if v is not None]
    ax.annotate(
        "; ".join(parts),
        xy=(0, 0),
        xycoords=("axes fraction", ax.xaxis.label),
        xytext=(0, -4),
        textcoords="offset points",
        ha="left",
        va="top",
        fontsize=7,
        color="0.4",
    )
    return ax


def confusion(matrix: Any, labels: Sequence[str], ax: Any = None, title: str | None = None, normalize: bool = True,
              predicted: Sequence[str] | None = None) -> Any:
    """A confusion-matrix heatmap: rows gold with their n, columns `predicted` (else `labels`), shares with counts."""
    import seaborn as sns

    ax = _ax(ax, figsize=(4, 3.5))
    counts = np.asarray(matrix, dtype=float)
    shares = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1) if normalize else counts
    notes = np.array([[f"{s:.0%}\n({int(c)})" if normalize else f"{int(c)}" for s, c in zip(sr, cr)] for sr, cr in zip(shares, counts)])
    rows = [f"{label}\n(n={int(n)})" for label, n in zip(labels, counts.sum(axis=1))]
    sns.heatmap(shares, annot=notes, fmt="", cmap="Blues", vmin=0, vmax=1 if normalize else None, cbar=False,
                xticklabels=list(predicted or labels), yticklabels=rows, ax=ax, annot_kws={"fontsize": 8})
    ax.set_xlabel("predicted")
    ax.set_ylabel("gold")
    if title:
        ax.set_title(title, fontsize=9)
    return ax
