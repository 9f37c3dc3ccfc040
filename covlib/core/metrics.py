"""Evaluation metrics: answer matching, FEVER accuracy, calibration AUC, retrieval recall, statistics.

Answer metrics follow the SQuAD / HotpotQA evaluation scripts (normalise: lowercase,
drop punctuation, drop the articles a/an/the, collapse whitespace), taking the maximum
over gold aliases. `accuracy_contains` is the WebGLM / CoV-RAG protocol for open QA.
`accuracy_coverage_auc` reproduces Ye & Durrett's `f1auc_score` that Verify-and-Edit reports.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

# ---------------------------------------------------------------------------
# answers


_PUNCT = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def _as_list(golds: str | Iterable[str]) -> list[str]:
    return [golds] if isinstance(golds, str) else [g for g in golds if g is not None]


def normalize_answer(s: str) -> str:
    """SQuAD normalisation: lowercase, strip punctuation, articles and extra whitespace."""
    s = str(s).lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def exact_match(pred: str, golds: str | Iterable[str]) -> float:
    """1.0 if the normalised prediction equals any normalised gold alias, else 0.0."""
    p = normalize_answer(pred)
    return float(any(p == normalize_answer(g) for g in _as_list(golds)))


def _f1(pred: str, gold: str) -> float:
    p, g = normalize_answer(pred), normalize_answer(gold)
    # HotpotQA rule: yes / no / noanswer only match themselves
    if (p in ("yes", "no", "noanswer") or g in ("yes", "no", "noanswer")) and p != g:
        return 0.0
    pt, gt = p.split(), g.split()
    if not pt or not gt:
        return 0.0  # as the official script: no common token, so 0 (also for two empty strings)
    common = sum((Counter(pt) & Counter(gt)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pt), common / len(gt)
    return 2 * precision * recall / (precision + recall)


def f1_score(pred: str, golds: str | Iterable[str]) -> float:
    """Token-level F1 of the normalised prediction, maximum over gold aliases (HotpotQA yes/no rule; empty -> 0)."""
    return max((_f1(pred, g) for g in _as_list(golds)), default=0.0)


def contains_words(text: str) -> str:
    """Containment normalisation: NFC, lowercase, every non-alphanumeric character a word break, articles dropped.

    Unlike `normalize_answer`, punctuation separates words instead of gluing them, so an answer
    next to punctuation stays a whole word ("Obama's" -> "obama s", "1990–91" -> "1990 91"),
    as DPR's `has_answer` tokeniser, ALCE and WebGLM read it.
    """
    s = unicodedata.normalize("NFC", str(text)).lower()
    s = "".join(ch if ch.isalnum() else " " for ch in s)
    return " ".join(_ARTICLES.sub(" ", s).split())


def accuracy_contains(pred: str, golds: str | Iterable[str]) -> float:
    """1.0 if any gold alias appears in the prediction as whole words (WebGLM / CoV-RAG / DPR `has_answer`).

    Both texts are compared twice: with punctuation as a word break (`contains_words`: "Obama's",
    "Paris-based", "“Help”" hold their gold) and with punctuation deleted (`normalize_answer`:
    "U.S" holds "US"); either match counts.
    """
    split_p, glued_p = f" {contains_words(pred)} ", f" {normalize_answer(pred)} "
    for g in _as_list(golds):
        split_g, glued_g = contains_words(g), normalize_answer(g)
        if (split_g and f" {split_g} " in split_p) or (glued_g and f" {glued_g} " in glued_p):
            return 1.0
    return 0.0


# ---------------------------------------------------------------------------
# fact verification

FEVER_LABELS = ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")
_FEVER_ALIASES = {
    "supports": "SUPPORTS", "support": "SUPPORTS", "supported": "SUPPORTS", "true": "SUPPORTS", "yes": "SUPPORTS",
    "refutes": "REFUTES", "refute": "REFUTES", "refuted": "REFUTES", "false": "REFUTES", "no": "REFUTES",
    "not enough info": "NOT ENOUGH INFO", "not enough information": "NOT ENOUGH INFO",
    "nei": "NOT ENOUGH INFO", "neither": "NOT ENOUGH INFO", "unknown": "NOT ENOUGH INFO",
}

_FEVER_IN_TEXT = [
    (r"\bsupports?\b|\bsupported\b", "SUPPORTS"),
    (r"\brefutes?\b|\brefuted\b", "REFUTES"),
    (r"\bnot enough info(rmation)?\b", "NOT ENOUGH INFO"),
]


def normalize_fever_label(label: str | None) -> str | None:
    """Map a label spelling (any case, 'not enough information', 'true', 'nei'...) to a FEVER label, else None."""
    if label is None:
        return None
    key = " ".join(re.sub(r"[^a-z ]", " ", str(label).lower()).split())
    if key in _FEVER_ALIASES:
        return _FEVER_ALIASES[key]
    # a sentence naming exactly one canonical label ("The claim SUPPORTS it.")
    found = {lab for pat, lab in _FEVER_IN_TEXT if re.search(pat, key)}
    return found.pop() if len(found) == 1 else None


def fever_accuracy(preds: Sequence[str | None], labels: Sequence[str]) -> float:
    """Fraction of claims whose normalised predicted label equals the gold label (unparseable = wrong)."""
    if len(preds) != len(labels):
        raise ValueError(f"{len(preds)} predictions for {len(labels)} labels")
    if not labels:
        raise ValueError("fever_accuracy of no claims")
    hits = 0
    for p, g in zip(preds, labels):
        gold = normalize_fever_label(g)
        if gold is None:
            raise ValueError(f"unknown FEVER gold label {g!r}")
        hits += normalize_fever_label(p) == gold
    return hits / len(labels)


# ---------------------------------------------------------------------------
# calibration


def accuracy_coverage_auc(confidences: Sequence[float], correct: Sequence[float], ties: str = "stable") -> float:
    """Area under accuracy-vs-coverage (x100), exactly Ye & Durrett's `f1auc_score` as used by Verify-and-Edit.

    Definition (xiye17/TextualExplInContext, RuochenZhao/Verify-and-Edit `utils_dataset.f1auc_score`):
    sort the n examples by confidence, highest first; let S = min(1000, n - 1) and
    coverages c_j = j / S for j = 1..S; accuracy(c) = mean(correct[:int(n * c)]);
    AUC = 100 * mean_j accuracy(c_j), a right-endpoint Riemann sum of the curve on (0, 1].
    `correct` may be 0/1 or graded (F1). n = 1 gives 100 * correct[0].

    Ties in confidence: the reference uses numpy's unstable default argsort, so its tie
    order is arbitrary. ties="stable" (default) keeps tied examples in the given order;
    ties="average" uses the expected prefix accuracy over all orders of each tied group.
    """
    conf = np.asarray(confidences, dtype=np.float64).ravel()
    y = np.asarray(correct, dtype=np.float64).ravel()
    if conf.size != y.size:
        raise ValueError(f"{conf.size} confidences for {y.size} outcomes")
    n = conf.size
    if n == 0:
        raise ValueError("accuracy_coverage_auc of no examples")
    if np.isnan(conf).any():
        raise ValueError("confidences contain NaN")
    if n == 1:
        return float(y[0] * 100)
    order = np.argsort(-conf, kind="stable")
    conf, y = conf[order], y[order]
    segment = min(1000, n - 1)
    coverages = (np.arange(segment) + 1) / segment
    cuts = (n * coverages).astype(int)  # same float arithmetic as the reference
    if ties == "stable":
        prefix = np.concatenate([[0.0], np.cumsum(y)])
        sums = prefix[cuts]
    elif ties == "average":
        # expected sum of the first m outcomes when each tie group is randomly permuted
        # a new group wherever the confidence changes (== , not diff: -inf - -inf is nan, which would split ties)
        starts = np.concatenate([[0], np.flatnonzero(conf[1:] != conf[:-1]) + 1])
        ends = np.concatenate([starts[1:], [n]])
        group_of = np.repeat(np.arange(starts.size), ends - starts)
        group_sum = np.add.reduceat(y, starts)
        before = np.concatenate([[0.0], np.cumsum(group_sum)])  # sum of all groups before g
        g = group_of[cuts - 1]
        frac = (cuts - starts[g]) / (ends[g] - starts[g])
        sums = before[g] + frac * group_sum[g]
    else:
        raise ValueError(f"ties must be 'stable' or 'average', not {ties!r}")
    return float(np.mean(sums / cuts) * 100)


def accuracy_coverage_curve(confidences: Sequence[float], correct: Sequence[float], ticks: int = 20) -> tuple[np.ndarray, np.ndarray]:
    """Coverage points (j / ticks) and the accuracy of the most confident fraction at each (Ye & Durrett's f1auc_curve).

    As in the reference, a coverage that holds no example (int(n * j / ticks) == 0, when n < ticks)
    has accuracy NaN (plots leave a gap there) rather than the first example's.
    """
    conf = np.asarray(confidences, dtype=np.float64).ravel()
    y = np.asarray(correct, dtype=np.float64).ravel()
    if conf.size != y.size:
        raise ValueError(f"{conf.size} confidences for {y.size} outcomes")
    order = np.argsort(-conf, kind="stable")
    y = y[order]
    x = (np.arange(ticks) + 1) / ticks
    cuts = (y.size * x).astype(int)
    return x, np.array([y[:c].mean() if c else np.nan for c in cuts])


# ---------------------------------------------------------------------------
# retrieval


def _ranked_gold_pairs(ranked_titles: Sequence[Sequence[str]], gold_titles: Sequence[Sequence[str]]) -> list[tuple[list[str], set[str]]]:
    """(ranking, gold set) per question that has gold titles; errors on mismatched lengths or no gold."""
    if len(ranked_titles) != len(gold_titles):
        raise ValueError(f"{len(ranked_titles)} rankings for {len(gold_titles)} gold lists")
    pairs = [(list(r), set(g)) for r, g in zip(ranked_titles, gold_titles) if g]
    if not pairs:
        raise ValueError("no question has gold titles")
    return pairs


def recall_at_k(ranked_titles: Sequence[Sequence[str]], gold_titles: Sequence[Sequence[str]],
                ks: Sequence[int] = (1, 2, 5, 10, 20)) -> dict[int, float]:
    """Mean over questions of the fraction of gold titles found among the top k ranked titles."""
    pairs = _ranked_gold_pairs(ranked_titles, gold_titles)
    return {k: float(np.mean([len(g & set(r[:k])) / len(g) for r, g in pairs])) for k in ks}


def all_recall_at_k(ranked_titles: Sequence[Sequence[str]], gold_titles: Sequence[Sequence[str]],
                    ks: Sequence[int] = (1, 2, 5, 10, 20)) -> dict[int, float]:
    """Fraction of questions whose gold titles are all found among the top k ranked titles."""
    pairs = _ranked_gold_pairs(ranked_titles, gold_titles)
    return {k: float(np.mean([g <= set(r[:k]) for r, g in pairs])) for k in ks}


# ---------------------------------------------------------------------------
# statistics


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


def mean_ci(values: Sequence[float], confidence: float = 0.95, seed: int = 0, n_boot: int = 1000) -> tuple[float, float, float]:
    """Mean and percentile-bootstrap confidence interval (mean, low, high) with an explicit seed."""
    v = np.asarray(values, dtype=np.float64).ravel()
    if v.size == 0:
        raise ValueError("mean_ci of no values")
    rng = np.random.default_rng(seed)
    chunk = max(1, 2_000_000 // v.size)  # bound memory for long inputs
    means = np.concatenate([
        v[rng.integers(0, v.size, size=(min(chunk, n_boot - i), v.size))].mean(axis=1)
        for i in range(0, n_boot, chunk)
    ])
    alpha = (1 - confidence) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha])
    return float(v.mean()), float(low), float(high)


# --------------------------------------------------------------------------- intervals
#
# Every number a table reports carries its n and a 95% interval: a seeded percentile bootstrap
# over questions (resampling whole questions, so per-question rows stay together). A difference
# between two methods on the same questions is a *paired* bootstrap of the per-question
# differences. Each returns {"value", "low", "high", "n"} (plain floats, JSON-ready).

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


def _finite(*columns: Sequence[float]) -> list[np.ndarray]:
    cols = [np.asarray(c, dtype=np.float64).ravel() for c in columns]
    if len({c.size for c in cols}) > 1:
        raise ValueError(f"{' vs '.join(str(c.size) for c in cols)} values: they must pair up")
    keep = np.logical_and.reduce([np.isfinite(c) for c in cols])
    return [c[keep] for c in cols]


def mean_interval(values: Sequence[float], scale: float = 1.0, seed: int = 0, n_boot: int = N_BOOT) -> dict[str, float]:
    """Mean of the finite values (x `scale`, e.g. 100 for %) with its 95% bootstrap interval and n (NaNs left out)."""
    (v,) = _finite(values)
    if v.size == 0:
        return {"value": float("nan"), "low": float("nan"), "high": float("nan"), "n": 0}
    rng = np.random.default_rng(seed)
    means = v[rng.integers(0, v.size, size=(n_boot, v.size))].mean(axis=1) if v.size > 1 else np.array([np.nan])
    alpha = (1 - CONFIDENCE) / 2
    low, high = (np.quantile(means, [alpha, 1 - alpha]) if v.size > 1 else (np.nan, np.nan))
    return {"value": float(v.mean() * scale), "low": float(low * scale), "high": float(high * scale), "n": int(v.size)}


def paired_difference(a: Sequence[float], b: Sequence[float], scale: float = 1.0, seed: int = 0,
                      n_boot: int = N_BOOT) -> dict[str, float]:
    """mean(a - b) over the questions where both are finite (x `scale`), with a paired 95% bootstrap interval."""
    x, y = _finite(a, b)
    return mean_interval(x - y, scale=scale, seed=seed, n_boot=n_boot)


def group_difference(values: Sequence[float], in_group: Sequence[bool], scale: float = 1.0, seed: int = 0,
                     n_boot: int = N_BOOT) -> dict[str, float]:
    """mean(values | group) - mean(values | rest), questions resampled together (a stratum may vanish: NaN draw)."""
    v = np.asarray(values, dtype=np.float64).ravel()
    g = np.asarray(in_group, dtype=bool).ravel()
    if v.size != g.size:
        raise ValueError(f"{v.size} values for {g.size} group flags")

    def diff(vals: np.ndarray, flags: np.ndarray) -> float:
        flags = flags.astype(bool)
        return float(vals[flags].mean() - vals[~flags].mean()) if flags.any() and (~flags).any() else float("nan")

    est = bootstrap(diff, v, g.astype(float), seed=seed, n_boot=n_boot)
    return {k: (x * scale if k != "n" else x) for k, x in est.items()}


def format_interval(est: dict[str, float], digits: int = 1) -> str:
    """'41.7 [29.0, 54.3]' (the value, then its 95% interval); 'n/a' for a missing value."""
    value, low, high = est.get("value"), est.get("low"), est.get("high")
    if value is None or not np.isfinite(value):
        return "n/a"
    if low is None or high is None or not (np.isfinite(low) and np.isfinite(high)):
        return f"{value:.{digits}f} [n/a]"
    return f"{value:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


# --------------------------------------------------------------------------- NLI judges


