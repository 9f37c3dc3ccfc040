"""Every number with its 95% bootstrap interval over questions, and paired differences on the same questions."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from covlib import nli
from covlib.core import metrics, stats

from covlib.papers.credibility.claims import CONDITIONS_BOUND, JUDGE_BOUND, estimate, model_card, untestable
from covlib.papers.credibility.metrics import f1


# --------------------------------------------------------------------------- intervals (every number with n and a 95% CI)

# Summary name (`summarize`) -> per-question row key (`score_answers`).
ROW_KEYS = {"P": "precision", "R": "recall", "F1_mean": "f1", "SC_cited": "sc_cited", "SC_all": "sc_all",
            "CitP": "cit_precision", "CitR": "cit_recall", "EM_recall": "em_recall"}


def per_question(rows: Sequence[dict[str, Any]], metric: str) -> np.ndarray:
    """One metric's per-question values (a summary name such as 'R', or a row key such as 'recall'), NaN kept."""
    key = ROW_KEYS.get(metric, metric)
    return np.array([float(r[key]) for r in rows], dtype=float)


def intervals(rows: Sequence[dict[str, Any]], seed: int = 0,
              rates: dict[str, nli.JudgeRates] | None = None) -> dict[str, dict[str, float]]:
    """Every mean `summarize` reports, in %, with its 95% bootstrap interval over questions and n.

    Each is `stats.mean_interval` of the per-question values (NaN left out, as in the means);
    F1_of_means, the F1 of mean P and mean R, resamples questions with `stats.bootstrap`.
    The values equal `summarize`'s. With the judge's measured error (`rates`, `nli.judge_rates`), also
    `P_corrected` and `R_corrected` (`judge_corrected`).
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
    return out if rates is None else {**out, **judge_corrected(rows, rates, seed)}


def _cell_counts(pairs: Sequence[Sequence[Any]]) -> np.ndarray:
    """Counts of (stratum, decision) cells, in `nli.STRATA` x (said, not said) order, of [stratum, said] pairs."""
    counts = np.zeros(2 * len(nli.STRATA))
    for name, said in pairs:
        counts[2 * nli.STRATA.index(name) + (0 if said else 1)] += 1
    return counts


def _corrected_rows(rows: Sequence[dict[str, Any]], metric: str) -> tuple[list[np.ndarray], list[float]]:
    """Per row, the (sentences or 1, cells) counts of its judged pairs, and the row's value where nothing was judged."""
    cells, fixed = [], []
    for r in rows:
        if metric == "recall":
            pairs = r.get("recall_pairs", [])
            cells.append(_cell_counts(pairs)[None, :] if pairs else np.zeros((0, 2 * len(nli.STRATA))))
        else:
            by_sentence: dict[int, list] = {}
            for j, name, said in r.get("precision_pairs", []):
                by_sentence.setdefault(j, []).append((name, said))
            cells.append(np.array([_cell_counts(v) for v in by_sentence.values()]).reshape(-1, 2 * len(nli.STRATA)))
        fixed.append(float(r[metric]))
    return cells, fixed


def _corrected_values(cells: list[np.ndarray], fixed: list[float], q: np.ndarray, n_sentences: list[int],
                      metric: str) -> np.ndarray:
    """Per row (and per draw: q is (cells, draws)), the metric with each decision replaced by P(entailed | cell)."""
    out = np.full((len(cells), q.shape[1]), np.nan)
    for i, c in enumerate(cells):
        if not np.isfinite(fixed[i]) or c.shape[0] == 0:
            out[i] = fixed[i]  # no key fact (NaN) or nothing judged (0): as measured
        elif metric == "recall":
            out[i] = (c @ q)[0] / c.sum()
        else:  # a sentence counts when any of its facts is entailed (independence across its facts)
            out[i] = (1 - np.exp(c @ np.log1p(-np.minimum(q, 1 - 1e-12)))).sum(axis=0) / max(n_sentences[i], 1)
    return out


def entailed_given(said: np.ndarray, total: np.ndarray, sens: np.ndarray, spec: np.ndarray) -> np.ndarray:
    """P(truly entailed | stratum, decision) in a table: (2 x strata, columns) in `_cell_counts`' order.

    `said` and `total` are the table's "entailed" decisions and pairs per stratum (strata, columns); its share
    truly entailed there is Rogan-Gladen's (said/total + spec - 1) / (sens + spec - 1), kept in [0, 1]; Bayes'
    rule with that share gives each decision's probability. Where the judge is no better than chance
    (sens + spec <= 1) every decision reads the observed share.
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = np.where(total > 0, said / np.maximum(total, 1), 0.0)
        informative = sens + spec > 1
        share = np.where(informative, np.clip((observed + spec - 1) / (sens + spec - 1), 0.0, 1.0), observed)
        yes = np.where(informative, sens * share / (sens * share + (1 - spec) * (1 - share)), share)
        no = np.where(informative, (1 - sens) * share / ((1 - sens) * share + spec * (1 - share)), share)
    q = np.empty((2 * said.shape[0], said.shape[1]))
    q[0::2], q[1::2] = np.nan_to_num(yes, nan=0.0), np.nan_to_num(no, nan=0.0)  # 0/0: no pair entailed there
    return q


def _corrected(cells: list[np.ndarray], fixed: list[float], n_sentences: list[int], metric: str,
               weights: np.ndarray, sens: np.ndarray, spec: np.ndarray) -> np.ndarray:
    """The metric per row (rows x columns) with each decision replaced by its probability of being right in the
    table that `weights` (columns x rows: each row's multiplicity; one column per resample) makes of the rows."""
    totals = np.array([c.sum(axis=0) for c in cells]).reshape(len(cells), -1)
    counts = weights @ totals  # (columns, cells): the table's decisions by stratum
    said, total = counts[:, 0::2].T, (counts[:, 0::2] + counts[:, 1::2]).T
    return _corrected_values(cells, fixed, entailed_given(said, total, sens, spec), n_sentences, metric)


_CORRECTED = (("R_corrected", "recall", "answer"), ("P_corrected", "precision", "sentence"))
_KIND = {metric: kind for _, metric, kind in _CORRECTED}  # which premise kind's rates correct a metric


def _resampled(rows: Sequence[dict[str, Any]], rates: dict[str, nli.JudgeRates], metric: str, keep: np.ndarray,
               seed: int, n_boot: int) -> tuple[np.ndarray, np.ndarray]:
    """(point value per row, the mean per bootstrap draw): questions resampled among `keep`, rates drawn."""
    sens, spec = rates[_KIND[metric]].error_draws(n_boot, seed=seed)
    cells, fixed = _corrected_rows(rows, metric)
    n_sentences = [int(r.get("n_sentences", 1)) for r in rows]
    idx = np.flatnonzero(keep)
    weights = np.zeros((n_boot, len(rows)))
    picks = idx[np.random.default_rng([seed, 1]).integers(0, idx.size, (n_boot, idx.size))]
    np.add.at(weights, (np.arange(n_boot)[:, None], picks), 1.0)
    point = _corrected(cells, fixed, n_sentences, metric, keep[None, :].astype(float), sens[:, :1], spec[:, :1])
    values = _corrected(cells, fixed, n_sentences, metric, weights, sens[:, 1:], spec[:, 1:])
    return point[:, 0], (weights * np.nan_to_num(values.T)).sum(axis=1) / idx.size


def judge_corrected(rows: Sequence[dict[str, Any]], rates: dict[str, nli.JudgeRates], seed: int = 0,
                    n_boot: int = stats.N_BOOT) -> dict[str, dict[str, Any]]:
    """Key-fact recall and precision in %, corrected for the judge's measured error (`nli.JudgeRates`).

    In each stratum the table's own share truly entailed is estimated from its share of "entailed" decisions and
    the judge's sensitivity and specificity there (measured on the frozen test set: whole answers for recall,
    sentences for precision; `entailed_given`), and each decision is replaced by its probability of being right
    at that share. The interval resamples questions (the shares re-estimated on each resample) and draws the
    rates from their posteriors. Rows the judge never saw (an empty answer) keep their value; `pooled` names the
    strata whose rate is pooled over all strata (`nli.MIN_CELL`)."""
    out = {}
    for key, metric, kind in _CORRECTED:
        fixed = per_question(rows, metric)
        keep = np.isfinite(fixed)
        pooled = {name: p["pooled"] for name, p in rates[kind].error_posteriors().items() if p["pooled"]}
        if not keep.any():
            out[key] = {**stats.mean_interval([]), "judge": rates[kind].judge, "pooled": pooled}
            continue
        point, boot = _resampled(rows, rates, metric, keep, seed, n_boot)
        low, high = np.quantile(boot, [0.025, 0.975])
        out[key] = {"value": 100 * float(point[keep].mean()), "low": 100 * float(low), "high": 100 * float(high),
                    "n": int(keep.sum()), "observed": 100 * float(np.mean(fixed[keep])),
                    "test_pairs": rates[kind].n_pairs, "judge": rates[kind].judge, "pooled": pooled}
    return out


def corrected_difference(rows_a: Sequence[dict[str, Any]], rows_b: Sequence[dict[str, Any]],
                         rates_a: dict[str, nli.JudgeRates], rates_b: dict[str, nli.JudgeRates],
                         metric: str = "recall", seed: int = 0, n_boot: int = stats.N_BOOT) -> dict[str, Any]:
    """Judge-corrected `metric` ('recall' or 'precision') of a − b in points, paired over the same questions.

    Each arm is corrected at its own share truly entailed with its own rates (`judge_corrected`), so a judge whose
    errors inflate one reference condition more than another does not decide the difference, as far as each arm's
    rates were measured on answers like its own. Rates measured once for both arms (the test set's) cannot show
    that: the record is then `judge_bound` (`CONDITIONS_BOUND`; shown, not counted). The same questions enter both
    arms; the percentile interval decides, and the p is the bootstrap's (below 0.05 exactly when the interval
    excludes 0). `raw` is the uncorrected paired difference (`stats.paired_difference`), shown beside it.
    """
    _aligned(rows_a, rows_b)
    key = ROW_KEYS.get(metric, metric)
    kind = _KIND[key]
    fa, fb = per_question(rows_a, key), per_question(rows_b, key)
    keep = np.isfinite(fa) & np.isfinite(fb)
    raw = stats.paired_difference(fa, fb, scale=100, seed=seed)
    out = {"value": float("nan"), "low": float("nan"), "high": float("nan"), "n": int(keep.sum()),
           "p": float("nan"), "test": "paired bootstrap, judge-corrected (its 95% interval decides)",
           "judge": rates_a[kind].judge, "raw": {k: raw.get(k) for k in ("value", "low", "high", "p", "test")}}
    if rates_a[kind].measured_on == rates_b[kind].measured_on:
        out["judge_bound"] = CONDITIONS_BOUND.format(rates_a[kind].measured_on)
    if keep.sum() < 2:
        return out
    (pa, da), (pb, db) = (_resampled(rs, rates, key, keep, seed, n_boot)
                          for rs, rates in ((rows_a, rates_a), (rows_b, rates_b)))
    diff, draws = 100 * (pa - pb)[keep], 100 * (da - db)
    value = float(diff.mean())
    return {**out, "value": value, **stats.percentile_test(value, draws), "sd": float(diff.std(ddof=1)), "scale": 1.0}


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


def nonoverlapping_difference(x1: Sequence[float], y1: Sequence[float], x2: Sequence[float],
                              y2: Sequence[float]) -> dict[str, Any]:
    """r(x1, y1) − r(x2, y2), two correlations over the same units sharing no variable, with Zou's (2007) interval.

    Each r has its Fisher-z interval (`stats.correlation`); their dependence is estimated from the
    six correlations among the four columns (Pearson-Filon). With y1 = y2 it equals the overlapping
    case (`stats.correlation_difference`). NaN interval with fewer than 4 units.
    """
    a, b, c, d = (np.asarray(v, dtype=float) for v in (x1, y1, x2, y2))
    r1, r2 = stats.correlation(a, b), stats.correlation(c, d)
    out = {"value": float(r1["value"] - r2["value"]), "low": float("nan"), "high": float("nan"), "n": int(a.size),
           "p": float("nan"), "test": "Zou (2007), non-overlapping correlations", "r_first": r1, "r_second": r2}
    if not np.all(np.isfinite([r1["low"], r2["low"]])):
        return out
    with np.errstate(invalid="ignore", divide="ignore"):
        m = np.corrcoef(np.vstack([a, b, c, d]))
    r12, r34, r13, r14, r23, r24 = r1["value"], r2["value"], m[0, 2], m[0, 3], m[1, 2], m[1, 3]
    if not np.all(np.isfinite([r13, r14, r23, r24])):
        return out
    cov = ((0.5 * r12 * r34 * (r13 ** 2 + r14 ** 2 + r23 ** 2 + r24 ** 2) + r13 * r24 + r14 * r23
            - (r12 * r13 * r14 + r12 * r23 * r24 + r13 * r23 * r34 + r14 * r24 * r34))
           / ((1 - r12 ** 2) * (1 - r34 ** 2)))
    l1, u1, l2, u2 = r1["low"], r1["high"], r2["low"], r2["high"]
    low = out["value"] - np.sqrt(max(0.0, (r12 - l1) ** 2 + (u2 - r34) ** 2 - 2 * cov * (r12 - l1) * (u2 - r34)))
    high = out["value"] + np.sqrt(max(0.0, (u1 - r12) ** 2 + (r34 - l2) ** 2 - 2 * cov * (u1 - r12) * (r34 - l2)))
    return {**out, "low": float(low), "high": float(high)}


def human_correlation_intervals(auto: dict[str, dict[str, float]], human: dict[str, dict[str, float]],
                                seed: int = 0) -> dict[str, dict[str, Any]]:
    """Table 2's Pearson correlations across models, each with its Fisher-z 95% interval and n (the models).

    `P` (vs human precision), `R` and `EM_recall` (vs human recall); `R_minus_EM_recall` =
    r(R, HRec) − r(EM-recall, HRec) (Zou's interval for two correlations sharing human recall) and
    `P_minus_EM_recall` = r(P, HPrec) − r(EM-recall, HRec) (Zou's, sharing no variable). The
    intervals need 4 rated models (`stats.MIN_CORRELATION_N`; NaN below); fewer than 3 is a
    ValueError. `seed` is unused (kept for callers): nothing is resampled.
    """
    models = sorted(set(auto) & set(human))
    if len(models) < 3:
        raise ValueError(f"a correlation across models needs at least 3 rated models, got {models}")
    cols = {k: np.array([auto[m][k] for m in models], dtype=float) for k in ("P", "R", "EM_recall")}
    cols.update({k: np.array([human[m][k] for m in models], dtype=float) for k in ("HPrec", "HRec")})
    pairs = {"P": ("P", "HPrec"), "R": ("R", "HRec"), "EM_recall": ("EM_recall", "HRec")}
    out = {name: stats.correlation(cols[a], cols[b]) for name, (a, b) in pairs.items()}
    out["R_minus_EM_recall"] = stats.correlation_difference(cols["R"], cols["EM_recall"], cols["HRec"])
    out["P_minus_EM_recall"] = nonoverlapping_difference(cols["P"], cols["HPrec"], cols["EM_recall"], cols["HRec"])
    return out


def interval_columns(est: dict[str, dict[str, float]], labels: dict[str, str], digits: int = 1) -> dict[str, Any]:
    """Table columns for interval dicts: per `labels` entry {name: label}, `label` (the value) and
    `label 95% CI` ('41.7 [29.0, 54.3]', `stats.format_interval`)."""
    out: dict[str, Any] = {}
    for name, label in labels.items():
        out[label] = est[name]["value"]
        out[f"{label} 95% CI"] = stats.format_interval(est[name], digits)
    return out


# --------------------------------------------------------------------------- Table 1: instruction-tuned vs foundation

KIND_METRICS = {"F1": "F1_mean", "R": "R", "P": "P", "SC": "SC_cited", "CitP": "CitP", "CitR": "CitR"}  # F1 first


def kind_difference(rows: dict[str, Sequence[dict[str, Any]]], first: Sequence[str], second: Sequence[str],
                    metric: str, seed: int = 0) -> dict[str, Any]:
    """Per question, the mean of one metric over the `first` models − over the `second` models, in %, paired."""
    names = list(first) + list(second)
    for name in names[1:]:
        _aligned(rows[names[0]], rows[name])
    a = np.mean([per_question(rows[n], metric) for n in first], axis=0)
    b = np.mean([per_question(rows[n], metric) for n in second], axis=0)
    return stats.paired_difference(a, b, scale=100, seed=seed)


def tuning_claims(generators: Sequence[Any], rows: dict[str, Sequence[dict[str, Any]]], scope: str, seed: int = 0,
                  **meta: Any) -> list[dict[str, Any]]:
    """`cred-instruction-beats-foundation` records: instruction-tuned − foundation models, key-fact F1 first.

    Kinds come from each model's declared card (`model_card`); then R, P, SC, CitP and CitR as
    secondary rows. Not testable without a model of each kind with a card (the models are named).
    """
    names = [g.name for g in generators]
    cards = {g.name: model_card(g) for g in generators}
    tuned = [n for n in names if cards[n] is not None and cards[n].instruction_tuned]
    base = [n for n in names if cards[n] is not None and not cards[n].instruction_tuned]
    unknown = [n for n in names if cards[n] is None]
    ran = (f"instruction-tuned: {', '.join(tuned) or 'none'}; foundation: {', '.join(base) or 'none'}"
           + (f"; no model card (kind unknown): {', '.join(unknown)}" if unknown else ""))
    meta = {"model": ", ".join(names), **meta}
    if not tuned or not base:
        return [untestable("cred-instruction-beats-foundation", "needs at least one instruction-tuned and one "
                                  f"foundation model with a declared card (ran {ran})", scope=f"F1, {scope}", **meta)]
    return [estimate("cred-instruction-beats-foundation", f"{label}, {scope}, {ran}",
                            kind_difference(rows, tuned, base, metric, seed=seed), f"{label} points (per-question mean)",
                            judge_bound=JUDGE_BOUND, **meta)
            for label, metric in KIND_METRICS.items()]
