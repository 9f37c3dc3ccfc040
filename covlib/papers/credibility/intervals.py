"""Every number with its 95% bootstrap interval over questions, and paired differences on the same questions."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from covlib.core import metrics, stats

from covlib.papers.credibility.metrics import f1


# --------------------------------------------------------------------------- intervals (every number with n and a 95% CI)

# Summary name (`summarize`) -> per-question row key (`score_answers`).
ROW_KEYS = {"P": "precision", "R": "recall", "F1_mean": "f1", "SC_cited": "sc_cited", "SC_all": "sc_all",
            "CitP": "cit_precision", "CitR": "cit_recall", "EM_recall": "em_recall"}


def per_question(rows: Sequence[dict[str, Any]], metric: str) -> np.ndarray:
    """One metric's per-question values (a summary name such as 'R', or a row key such as 'recall'), NaN kept."""
    key = ROW_KEYS.get(metric, metric)
    return np.array([float(r[key]) for r in rows], dtype=float)


def intervals(rows: Sequence[dict[str, Any]], seed: int = 0) -> dict[str, dict[str, float]]:
    """Every mean `summarize` reports, in %, with its 95% bootstrap interval over questions and n.

    Each is `stats.mean_interval` of the per-question values (NaN left out, as in the means);
    F1_of_means, the F1 of mean P and mean R, resamples questions with `stats.bootstrap`.
    The values equal `summarize`'s.
    """
    if not rows:
        raise ValueError("no rows to put intervals on")
    out = {name: stats.mean_interval(per_question(rows, name), scale=100, seed=seed) for name in ROW_KEYS}
    p, r = per_question(rows, "P"), per_question(rows, "R")
    keep = np.isfinite(p) & np.isfinite(r)
    if keep.any():
        out["F1_of_means"] = stats.bootstrap(lambda a, b: 100 * f1(float(a.mean()), float(b.mean())), p[keep], r[keep],
                                               seed=seed)
    else:
        out["F1_of_means"] = stats.mean_interval([])
    return out


def _aligned(rows_a: Sequence[dict[str, Any]], rows_b: Sequence[dict[str, Any]]) -> None:
    ids_a, ids_b = [r["question_id"] for r in rows_a], [r["question_id"] for r in rows_b]
    if ids_a != ids_b:
        raise ValueError("a paired difference needs the same questions in the same order "
                         f"({len(ids_a)} vs {len(ids_b)} rows)")


def paired(rows_a: Sequence[dict[str, Any]], rows_b: Sequence[dict[str, Any]], metric: str,
           seed: int = 0) -> dict[str, float]:
    """mean(a − b) of one metric in % over the same questions, with a paired 95% bootstrap interval."""
    _aligned(rows_a, rows_b)
    return stats.paired_difference(per_question(rows_a, metric), per_question(rows_b, metric), scale=100, seed=seed)


def recall_drop(rows_few: Sequence[dict[str, Any]], rows_many: Sequence[dict[str, Any]],
                seed: int = 0) -> dict[str, dict[str, float]]:
    """Key-fact recall lost from fewer to more references, paired over questions, each with a 95% interval:
    `absolute` R(few) − R(many) in points, `relative` 100·(R(few) − R(many)) / R(few) in % of R(few)."""
    _aligned(rows_few, rows_many)
    a, b = per_question(rows_few, "R"), per_question(rows_many, "R")
    keep = np.isfinite(a) & np.isfinite(b)

    def relative(x: np.ndarray, y: np.ndarray) -> float:
        return 100 * float(x.mean() - y.mean()) / float(x.mean()) if x.mean() > 0 else float("nan")

    rel = (stats.bootstrap(relative, a[keep], b[keep], seed=seed) if keep.any()
           else stats.mean_interval([]))
    return {"absolute": stats.paired_difference(a, b, scale=100, seed=seed), "relative": rel}


def _refusal_f1(refused: np.ndarray, insufficient: np.ndarray) -> float:
    tp = float(np.sum(refused * insufficient))
    denominator = float(refused.sum() + insufficient.sum())
    return 100 * 2 * tp / denominator if denominator else 0.0


def reflection_intervals(refused: Sequence[bool], insufficient: Sequence[bool], seed: int = 0) -> dict[str, dict[str, float]]:
    """Self-reflection accuracy and F1 (%, refusal the positive class), each with its 95% bootstrap interval
    over questions; the values equal `reflection_scores`'."""
    p, y = np.asarray(refused, dtype=float), np.asarray(insufficient, dtype=float)
    if p.size != y.size or not p.size:
        raise ValueError(f"{p.size} decisions against {y.size} labels")
    return {"accuracy": stats.mean_interval(reflection_correct(refused, insufficient), scale=100, seed=seed),
            "f1": stats.bootstrap(_refusal_f1, p, y, seed=seed)}


def reflection_correct(refused: Sequence[bool], insufficient: Sequence[bool]) -> list[float]:
    """Per question 1.0 where the model refused exactly when its references were partial, else 0.0."""
    if len(refused) != len(insufficient):
        raise ValueError(f"{len(refused)} decisions against {len(insufficient)} labels")
    return [float(bool(r) == bool(i)) for r, i in zip(refused, insufficient)]


def gold_recall(titles: Sequence[Sequence[str]], gold: Sequence[Sequence[str]], seed: int = 0) -> dict[str, dict[str, float]]:
    """Gold-paragraph recall of reference lists (or top-k rankings), by title, in %, with 95% intervals over questions:
    `recall` the mean share of each question's gold titles found (`metrics.recall_at_k` at k = the list's length),
    `all` the share of questions with every gold title found (`metrics.all_recall_at_k`). Questions without gold
    titles are left out."""
    if len(titles) != len(gold):
        raise ValueError(f"{len(titles)} reference lists for {len(gold)} gold lists")
    pairs = [(set(t), set(g)) for t, g in zip(titles, gold) if g]
    share = [len(t & g) / len(g) for t, g in pairs]
    return {"recall": stats.mean_interval(share, scale=100, seed=seed),
            "all": stats.mean_interval([float(g <= t) for t, g in pairs], scale=100, seed=seed)}


def _pearson_or_nan(x: np.ndarray, y: np.ndarray) -> float:
    if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])


def human_correlation_intervals(auto: dict[str, dict[str, float]], human: dict[str, dict[str, float]],
                                seed: int = 0) -> dict[str, dict[str, float]]:
    """Table 2's Pearson correlations across models with 95% bootstrap intervals over models (`stats.bootstrap`;
    resamples whose correlation is undefined are left out): P vs human precision, R and EM-recall vs human
    recall, and `P_minus_EM_recall` = r(P, HPrec) − r(EM-recall, HRec), the claim that key-fact precision
    tracks people better than EM-recall. Needs at least 3 rated models (ValueError otherwise)."""
    models = sorted(set(auto) & set(human))
    if len(models) < 3:
        raise ValueError(f"a correlation across models needs at least 3 rated models, got {models}")
    cols = {k: np.array([auto[m][k] for m in models], dtype=float) for k in ("P", "R", "EM_recall")}
    cols.update({k: np.array([human[m][k] for m in models], dtype=float) for k in ("HPrec", "HRec")})
    pairs = {"P": ("P", "HPrec"), "R": ("R", "HRec"), "EM_recall": ("EM_recall", "HRec")}
    out = {name: stats.bootstrap(_pearson_or_nan, cols[a], cols[b], seed=seed) for name, (a, b) in pairs.items()}
    out["P_minus_EM_recall"] = stats.bootstrap(
        lambda p, hp, em, hr: _pearson_or_nan(p, hp) - _pearson_or_nan(em, hr),
        cols["P"], cols["HPrec"], cols["EM_recall"], cols["HRec"], seed=seed)
    return out


def interval_columns(est: dict[str, dict[str, float]], labels: dict[str, str], digits: int = 1) -> dict[str, Any]:
    """Table columns for interval dicts: per `labels` entry {name: label}, `label` (the value) and
    `label 95% CI` ('41.7 [29.0, 54.3]', `stats.format_interval`)."""
    out: dict[str, Any] = {}
    for name, label in labels.items():
        out[label] = est[name]["value"]
        out[f"{label} 95% CI"] = stats.format_interval(est[name], digits)
    return out
