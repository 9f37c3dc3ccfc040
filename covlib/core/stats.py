"""Statistics: every interval, test and power calculation the tables and the claims ledger report.

Every number a table reports carries its n and a 95% interval, chosen by the data:

| data | interval | test |
|---|---|---|
| a proportion (0/1 values) | Wilson (`mean_interval`), exact Clopper-Pearson against chance (`above_chance`) | exact binomial |
| a mean of other values | seeded percentile bootstrap over questions (`mean_interval`, `bootstrap`) | - |
| a statistic of pairs grouped by question (a judge's F1) | bootstrap resampling whole questions (`cluster_bootstrap`) | - |
| paired 0/1 outcomes (EM, accuracy) | Newcombe's hybrid score interval (`paired_difference`) | exact McNemar, with the discordant counts (fragility: `power.fragility`) |
| paired continuous values | paired BCa bootstrap (`paired_difference`) | sign-flip permutation |
| two independent samples | percentile bootstrap of each (`independent_difference`) | permutation |
| a statistic of paired columns (two AUCs) | paired percentile bootstrap (`paired_statistic_difference`) | the same bootstrap: its interval decides |
| a correlation | Fisher z (`correlation`; not with fewer than 4 points: then no p either) | Fisher z |
| two correlations sharing a variable | Zou (2007) (`correlation_difference`) | - |

Multiplicity, power and fragility (`holm`, `questions_needed`, `fragility`) live in `covlib.core.power`. Each estimate is a dict {"value", "low", "high", "n", ...} of plain
floats (JSON-ready); tests add "p" and "test".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def _pair(x: Sequence[float], y: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(x, dtype=np.float64).ravel(), np.asarray(y, dtype=np.float64).ravel()
    if x.size != y.size:
        raise ValueError(f"{x.size} values against {y.size}")
    if x.size < 3:
        raise ValueError("a correlation needs at least 3 pairs")
    return x, y


def pearson(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Pearson correlation and two-sided p-value."""
    from scipy import stats

    r = stats.pearsonr(*_pair(x, y))
    return float(r.statistic), float(r.pvalue)


def spearman(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Spearman rank correlation and two-sided p-value."""
    from scipy import stats

    r = stats.spearmanr(*_pair(x, y))
    return float(r.statistic), float(r.pvalue)


def point_biserial(binary: Sequence[float], values: Sequence[float]) -> tuple[float, float]:
    """Point-biserial correlation between a 0/1 variable and a continuous one, and its p-value."""
    from scipy import stats

    b, v = _pair(binary, values)
    if not np.isin(b, (0.0, 1.0)).all():
        raise ValueError("point_biserial needs a 0/1 first argument")
    r = stats.pointbiserialr(b, v)
    return float(r.statistic), float(r.pvalue)


N_BOOT = 2000  # bootstrap resamples for every interval
CONFIDENCE = 0.95


def bootstrap(statistic: Any, *columns: Sequence[float], seed: int = 0, n_boot: int = N_BOOT,
              confidence: float = CONFIDENCE) -> dict[str, float]:
    """statistic(*columns) and its percentile-bootstrap interval, resampling rows (questions) with a seed.

    Resamples on which the statistic is undefined (NaN: an AUC of one class, a correlation of a
    constant) are left out of the percentiles; an interval needs at least 2 rows.
    """
    cols = [np.asarray(c, dtype=np.float64).ravel() for c in columns]
    n = cols[0].size if cols else 0
    if any(c.size != n for c in cols):
        raise ValueError(f"columns of different lengths {[c.size for c in cols]}")
    if n == 0:
        raise ValueError("an interval of no values")
    value = float(statistic(*cols))
    if n < 2:
        return {"value": value, "low": float("nan"), "high": float("nan"), "n": n}
    rng = np.random.default_rng(seed)
    draws = np.array([statistic(*(c[idx] for c in cols)) for idx in rng.integers(0, n, size=(n_boot, n))], dtype=float)
    draws = draws[np.isfinite(draws)]
    if draws.size < n_boot // 2:
        return {"value": value, "low": float("nan"), "high": float("nan"), "n": n}
    alpha = (1 - confidence) / 2
    low, high = np.quantile(draws, [alpha, 1 - alpha])
    return {"value": value, "low": float(low), "high": float(high), "n": n}


def cluster_bootstrap(statistic: Any, clusters: Sequence[Any], *columns: Sequence[float], seed: int = 0,
                      n_boot: int = N_BOOT, confidence: float = CONFIDENCE) -> dict[str, float]:
    """statistic(*columns) and its percentile interval, resampling whole clusters (the rows of one question) with a seed."""
    cols = [np.asarray(c, dtype=np.float64).ravel() for c in columns]
    keys = np.asarray(list(clusters), dtype=object)
    if any(c.size != keys.size for c in cols) or keys.size == 0:
        raise ValueError(f"{keys.size} cluster ids for columns of lengths {[c.size for c in cols]} (and none empty)")
    groups = [np.flatnonzero(keys == k) for k in dict.fromkeys(keys.tolist())]
    value = float(statistic(*cols))
    out = {"value": value, "low": float("nan"), "high": float("nan"), "n": int(keys.size), "clusters": len(groups)}
    if len(groups) < 2:
        return out
    rng = np.random.default_rng(seed)
    draws = np.array([statistic(*(c[idx] for c in cols)) for idx in
                      (np.concatenate([groups[g] for g in pick]) for pick in rng.integers(0, len(groups), (n_boot, len(groups))))])
    draws = draws[np.isfinite(draws)]
    if draws.size >= n_boot // 2:
        alpha = (1 - confidence) / 2
        out["low"], out["high"] = (float(x) for x in np.quantile(draws, [alpha, 1 - alpha]))
    return out


def _finite(*columns: Sequence[float]) -> list[np.ndarray]:
    cols = [np.asarray(c, dtype=np.float64).ravel() for c in columns]
    if len({c.size for c in cols}) > 1:
        raise ValueError(f"{' vs '.join(str(c.size) for c in cols)} values: they must pair up")
    keep = np.logical_and.reduce([np.isfinite(c) for c in cols])
    return [c[keep] for c in cols]


def _is_binary(*columns: np.ndarray) -> bool:
    return all(c.size and np.isin(c, (0.0, 1.0)).all() for c in columns)


def wilson_interval(successes: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Wilson score interval of a proportion successes / n (NaN, NaN for n = 0)."""
    if n <= 0:
        return float("nan"), float("nan")
    from scipy import stats

    z = float(stats.norm.ppf(1 - (1 - confidence) / 2))
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # at 0 or n successes the bound is exactly 0 or 1 (centre - half cancels to a few ulps above 0, which would put
    # the interval's low end above the estimate itself)
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return float(low), float(high)


def clopper_pearson(successes: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Exact (Clopper-Pearson) interval of a proportion successes / n (NaN, NaN for n = 0)."""
    if n <= 0:
        return float("nan"), float("nan")
    from scipy import stats

    alpha = 1 - confidence
    low = float(stats.beta.ppf(alpha / 2, successes, n - successes + 1)) if successes > 0 else 0.0
    high = float(stats.beta.ppf(1 - alpha / 2, successes + 1, n - successes)) if successes < n else 1.0
    return low, high


def mean_interval(values: Sequence[float], scale: float = 1.0, seed: int = 0, n_boot: int = N_BOOT) -> dict[str, float]:
    """Mean of the finite values (x `scale`) with its 95% interval and n: Wilson for 0/1 values, else a bootstrap."""
    (v,) = _finite(values)
    if v.size == 0:
        return {"value": float("nan"), "low": float("nan"), "high": float("nan"), "n": 0}
    if _is_binary(v):
        low, high = wilson_interval(int(v.sum()), int(v.size))
        return {"value": float(v.mean() * scale), "low": low * scale, "high": high * scale, "n": int(v.size)}
    rng = np.random.default_rng(seed)
    means = v[rng.integers(0, v.size, size=(n_boot, v.size))].mean(axis=1) if v.size > 1 else np.array([np.nan])
    alpha = (1 - CONFIDENCE) / 2
    low, high = (np.quantile(means, [alpha, 1 - alpha]) if v.size > 1 else (np.nan, np.nan))
    return {"value": float(v.mean() * scale), "low": float(low * scale), "high": float(high * scale), "n": int(v.size)}


def mcnemar_exact(better: int, worse: int) -> float:
    """Exact two-sided McNemar p: the binomial test of `better` of the better + worse discordant pairs at 1/2."""
    m = better + worse
    if m == 0:
        return 1.0
    from scipy import stats

    return float(min(1.0, 2 * stats.binom.cdf(min(better, worse), m, 0.5)))


def newcombe_interval(both: int, better: int, worse: int, neither: int,
                      confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Newcombe's (1998, method 10) interval of a paired difference of proportions (better - worse) / n.

    The hybrid score interval: Wilson intervals of the two marginal proportions, combined with the
    phi correlation of the 2x2 table; about 95% coverage at the sizes this project runs (the
    interval that conditions on the discordant count, inverting the exact test, does not cover the
    difference: with no question worse its upper end is the estimate itself).
    """
    n = both + better + worse + neither
    if n == 0:
        return float("nan"), float("nan")
    p1, p2 = (both + better) / n, (both + worse) / n
    (l1, u1), (l2, u2) = wilson_interval(both + better, n, confidence), wilson_interval(both + worse, n, confidence)
    product = (both + better) * (worse + neither) * (both + worse) * (better + neither)
    phi = (both * neither - better * worse) / np.sqrt(product) if product else 0.0
    d = p1 - p2
    down = (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2
    up = (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2
    return float(d - np.sqrt(max(down, 0.0))), float(d + np.sqrt(max(up, 0.0)))


def _bca(d: np.ndarray, seed: int, n_boot: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """BCa bootstrap interval of mean(d) (bias-corrected and accelerated; jackknife acceleration)."""
    from scipy import stats

    theta = d.mean()
    if d.size < 2:
        return float("nan"), float("nan")
    if np.all(d == d[0]):
        return float(theta), float(theta)
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, d.size, size=(n_boot, d.size))].mean(axis=1)
    share = (np.sum(means < theta) + 0.5 * np.sum(means == theta)) / n_boot
    z0 = stats.norm.ppf(min(max(share, 1 / n_boot), 1 - 1 / n_boot))
    jack = (d.sum() - d) / (d.size - 1)
    dev = jack.mean() - jack
    denominator = 6 * np.sum(dev ** 2) ** 1.5
    a = np.sum(dev ** 3) / denominator if denominator > 0 else 0.0
    z = stats.norm.ppf([(1 - confidence) / 2, 1 - (1 - confidence) / 2])
    levels = stats.norm.cdf(z0 + (z0 + z) / (1 - a * (z0 + z)))
    low, high = np.quantile(means, levels)
    return float(low), float(high)


def sign_flip_p(d: Sequence[float], seed: int = 0, n_perm: int = 9999) -> float:
    """Two-sided paired permutation p of mean(d) = 0: signs flipped at random (exactly, for n <= 16), seeded."""
    d = np.asarray(d, dtype=np.float64).ravel()
    observed = abs(d.sum())
    if d.size == 0 or observed == 0:
        return 1.0
    tol = 1e-9 * max(1.0, observed)
    if d.size <= 16:
        signs = 1 - 2 * ((np.arange(2 ** d.size)[:, None] >> np.arange(d.size)) & 1)
        return float(np.mean(np.abs(signs @ d) >= observed - tol))
    rng = np.random.default_rng(seed)
    signs = rng.choice((-1.0, 1.0), size=(n_perm, d.size))
    return float((1 + np.sum(np.abs(signs @ d) >= observed - tol)) / (n_perm + 1))


def paired_difference(a: Sequence[float], b: Sequence[float], scale: float = 1.0, seed: int = 0,
                      n_boot: int = N_BOOT) -> dict[str, Any]:
    """mean(a - b) over the questions where both are finite (x `scale`), with its 95% interval and a two-sided p.

    Both columns 0/1 (EM, accuracy, correctness): the discordant counts `better` (a right, b wrong)
    and `worse`, `both` (right in both), the exact McNemar p (what a verdict reads) and Newcombe's interval of the
    difference (`newcombe_interval`; at a borderline table such as 7 better / 1 worse of 60 it can
    exclude 0 while the exact p is above 0.05: the verdict follows the exact test). Otherwise: a
    paired BCa bootstrap interval, the sign-flip permutation p and the sd of the differences (for
    power). Every caller gets the test that fits its data.
    """
    x, y = _finite(a, b)
    n = int(x.size)
    if n == 0:
        return {"value": float("nan"), "low": float("nan"), "high": float("nan"), "n": 0, "p": float("nan"),
                "test": "none (no pair)"}
    if _is_binary(x, y):
        better, worse = int(np.sum((x == 1) & (y == 0))), int(np.sum((x == 0) & (y == 1)))
        both = int(np.sum((x == 1) & (y == 1)))
        low, high = newcombe_interval(both, better, worse, n - both - better - worse)
        return {"value": (better - worse) / n * scale, "low": low * scale, "high": high * scale, "n": n,
                "p": mcnemar_exact(better, worse), "test": "exact McNemar", "better": better, "worse": worse,
                "both": both, "scale": scale}
    d = x - y
    low, high = _bca(d, seed, n_boot)
    return {"value": float(d.mean() * scale), "low": low * scale, "high": high * scale, "n": n,
            "p": sign_flip_p(d, seed=seed), "test": "sign-flip permutation (BCa interval)",
            "sd": float(d.std(ddof=1) * abs(scale)) if n > 1 else float("nan"), "scale": scale}


def paired_statistic_difference(statistic: Any, a: Sequence[Sequence[float]], b: Sequence[Sequence[float]],
                                seed: int = 0, n_boot: int = N_BOOT) -> dict[str, Any]:
    """statistic(*a) - statistic(*b) on the same questions (e.g. two AUCs): a paired percentile bootstrap decides.

    `a`, `b`: per-question columns, resampled together; the p (`percentile_test`) tests equal statistics, not a swap's.
    """
    cols_a = [np.asarray(c, dtype=np.float64).ravel() for c in a]
    cols_b = [np.asarray(c, dtype=np.float64).ravel() for c in b]
    n = cols_a[0].size
    if any(c.size != n for c in cols_a + cols_b) or len(cols_a) != len(cols_b):
        raise ValueError("paired_statistic_difference needs columns of one length, as many for a as for b")
    k = len(cols_a)
    difference = lambda *c: statistic(*c[:k]) - statistic(*c[k:])  # noqa: E731
    value = float(difference(*cols_a, *cols_b))
    out = {"value": value, "low": float("nan"), "high": float("nan"), "n": int(n), "p": float("nan"),
           "test": "paired bootstrap (its 95% interval decides)"}
    if n < 2:
        return out
    rng = np.random.default_rng(seed)
    draws = np.array([difference(*(c[idx] for c in cols_a + cols_b)) for idx in rng.integers(0, n, (n_boot, n))])
    draws = draws[np.isfinite(draws)]
    return out if draws.size < n_boot // 2 else {**out, **percentile_test(value, draws)}


def percentile_test(value: float, draws: np.ndarray) -> dict[str, float]:
    """A bootstrap's 95% percentile interval of a difference and its p: twice the smaller share of draws past 0."""
    low, high = np.quantile(draws, [(1 - CONFIDENCE) / 2, 1 - (1 - CONFIDENCE) / 2])
    p = min(1.0, 2 * min(np.mean(draws <= 0), np.mean(draws >= 0))) if value != 0 else 1.0
    return {"low": float(low), "high": float(high), "p": float(p)}


def independent_difference(a: Sequence[float], b: Sequence[float], scale: float = 1.0, seed: int = 0,
                           n_boot: int = N_BOOT, n_perm: int = 9999) -> dict[str, Any]:
    """mean(a) - mean(b) of two independent samples (x `scale`): percentile bootstrap of each, permutation p."""
    (x,), (y,) = _finite(a), _finite(b)
    if x.size < 1 or y.size < 1 or x.size + y.size < 3:
        return {"value": float("nan"), "low": float("nan"), "high": float("nan"), "n": int(x.size + y.size),
                "p": float("nan"), "test": "none (an empty group, or fewer than 3 values)"}
    rng = np.random.default_rng(seed)
    draws = (x[rng.integers(0, x.size, size=(n_boot, x.size))].mean(axis=1)
             - y[rng.integers(0, y.size, size=(n_boot, y.size))].mean(axis=1))
    low, high = np.quantile(draws, [(1 - CONFIDENCE) / 2, 1 - (1 - CONFIDENCE) / 2])
    pooled, observed = np.concatenate([x, y]), abs(x.mean() - y.mean())
    hits = 0
    for _ in range(n_perm):
        rng.shuffle(pooled)
        hits += abs(pooled[:x.size].mean() - pooled[x.size:].mean()) >= observed - 1e-12
    return {"value": float((x.mean() - y.mean()) * scale), "low": float(low * scale), "high": float(high * scale),
            "n": int(x.size + y.size), "n_a": int(x.size), "n_b": int(y.size),
            "p": float((1 + hits) / (n_perm + 1)), "test": "permutation (independent samples)"}


def above_chance(correct: Sequence[float], chance: float = 0.5, scale: float = 1.0) -> dict[str, Any]:
    """Accuracy minus `chance` (x `scale`) of 0/1 outcomes: Clopper-Pearson interval, the equal-tailed exact p it inverts."""
    (v,) = _finite(correct)
    if not _is_binary(v):
        raise ValueError("above_chance needs 0/1 outcomes")
    from scipy import stats

    k, n = int(v.sum()), int(v.size)
    low, high = clopper_pearson(k, n)
    return {"value": (k / n - chance) * scale, "low": (low - chance) * scale, "high": (high - chance) * scale,
            "n": n, "p": float(min(1.0, 2 * min(stats.binom.cdf(k, n, chance), stats.binom.sf(k - 1, n, chance)))),
            "test": "exact binomial",
            "successes": k, "chance": chance, "scale": scale}


MIN_CORRELATION_N = 4  # a Fisher-z interval needs n - 3 >= 1


def correlation(x: Sequence[float], y: Sequence[float]) -> dict[str, Any]:
    """Pearson r with its Fisher-z 95% interval and the Fisher-z p; NaN interval and p with fewer than 4 points."""
    a, b = _finite(x, y)
    n = int(a.size)
    nan = {"value": float("nan"), "low": float("nan"), "high": float("nan"), "n": n, "p": float("nan"),
           "test": "Pearson, Fisher-z"}
    if n < 3 or np.std(a) == 0 or np.std(b) == 0:
        return nan
    from scipy import stats

    r, p = stats.pearsonr(a, b)
    r = float(np.clip(r, -1.0, 1.0))
    if n < MIN_CORRELATION_N:  # no interval, so no p: a verdict needs both (`report.claims.verdict`)
        return {**nan, "value": r}
    if abs(r) == 1.0:
        return {**nan, "value": r, "p": float(p)}
    z, half = np.arctanh(r), stats.norm.ppf(1 - (1 - CONFIDENCE) / 2) / np.sqrt(n - 3)
    p = 2 * stats.norm.sf(abs(z) * np.sqrt(n - 3))  # the Fisher-z test, so p and interval agree
    return {**nan, "value": r, "low": float(np.tanh(z - half)), "high": float(np.tanh(z + half)), "p": float(p)}


def correlation_difference(x1: Sequence[float], x2: Sequence[float], y: Sequence[float]) -> dict[str, Any]:
    """r(x1, y) - r(x2, y), two correlations sharing y, with Zou's (2007) 95% interval (each r Fisher-z)."""
    a, b, c = _finite(x1, x2, y)
    r1, r2 = correlation(a, c), correlation(b, c)
    value = r1["value"] - r2["value"]
    out = {"value": float(value), "low": float("nan"), "high": float("nan"), "n": int(a.size), "p": float("nan"),
           "test": "Zou (2007), overlapping correlations", "r_first": r1, "r_second": r2}
    if not all(np.isfinite([r1["low"], r2["low"]])):
        return out
    r12 = float(np.corrcoef(a, b)[0, 1]) if np.std(a) and np.std(b) else 0.0
    v1, v2 = r1["value"], r2["value"]
    cov = ((r12 - v1 * v2 / 2) * (1 - v1 ** 2 - v2 ** 2 - r12 ** 2) + r12 ** 3) / ((1 - v1 ** 2) * (1 - v2 ** 2))
    lo = value - np.sqrt(max(0.0, (v1 - r1["low"]) ** 2 + (r2["high"] - v2) ** 2
                             - 2 * cov * (v1 - r1["low"]) * (r2["high"] - v2)))
    hi = value + np.sqrt(max(0.0, (r1["high"] - v1) ** 2 + (v2 - r2["low"]) ** 2
                             - 2 * cov * (r1["high"] - v1) * (v2 - r2["low"])))
    return {**out, "low": float(lo), "high": float(hi)}


def group_difference(values: Sequence[float], in_group: Sequence[bool], scale: float = 1.0, seed: int = 0,
                     n_boot: int = N_BOOT) -> dict[str, Any]:
    """mean(values | group) - mean(values | rest): `independent_difference` of the two groups (interval and p)."""
    v = np.asarray(values, dtype=np.float64).ravel()
    g = np.asarray(in_group, dtype=bool).ravel()
    if v.size != g.size:
        raise ValueError(f"{v.size} values for {g.size} group flags")
    return independent_difference(v[g], v[~g], scale=scale, seed=seed, n_boot=n_boot)


def format_interval(est: dict[str, float], digits: int = 1) -> str:
    """'41.7 [29.0, 54.3]' (the value, then its 95% interval); 'n/a' for a missing value."""
    value, low, high = est.get("value"), est.get("low"), est.get("high")
    if value is None or not np.isfinite(value):
        return "n/a"
    if low is None or high is None or not (np.isfinite(low) and np.isfinite(high)):
        return f"{value:.{digits}f} [n/a]"
    return f"{value:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"
