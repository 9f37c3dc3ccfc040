"""Multiplicity, power and fragility: Holm's adjustment, the n an effect would need, how few questions flip a verdict.

`questions_needed(effect, est)` reads the test an estimate of `covlib.core.stats` carries
("exact McNemar", "sign-flip ...", "exact binomial", "Pearson ...") and returns the number of
questions (models, for a correlation) at which `effect` would be detected two-sided at 5% with
80% power: Connor (1987) for paired 0/1 outcomes at a discordant share (the share of questions
whose outcome differs between the two settings), the normal approximation for paired means
(observed sd) and for a proportion against chance, Fisher z for a correlation.

Connor's n grows with the discordance, which a paper rarely gives: at the least possible one (the
effect itself, no question made worse) the n is a minimum. `mcnemar_sizes` gives the n over a
stated range of discordances (`DISCORDANCES`) and the largest discordance a given n can afford.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from covlib.core import stats


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of a family of p-values (NaN stays NaN), in the given order."""
    p = np.asarray(p_values, dtype=np.float64)
    finite = np.flatnonzero(np.isfinite(p))
    out = np.full(p.size, np.nan)
    order = finite[np.argsort(p[finite], kind="stable")]
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(order) - rank) * p[i]))
        out[i] = running
    return [float(x) for x in out]


def fragility(better: int, worse: int, n: int, alpha: float = 0.05) -> int | None:
    """The fewest single outcomes (one arm, one question) whose change flips the exact McNemar verdict at `alpha`.

    A change moves one discordant count by one (right -> wrong in one arm: better - 1 or worse + 1;
    wrong -> right: the reverse), as the fragility index of clinical trials counts events. A
    significant result is flipped when p rises to `alpha` or above; a non-significant one when p
    falls below it in either direction. None when no change within the n questions flips it.
    """
    significant = stats.mcnemar_exact(better, worse) < alpha
    lead, trail = (better, worse) if better >= worse else (worse, better)
    for k in range(1, n + 1):
        for i in range(k + 1):
            if significant:  # weaken the leading side: i fewer on it, k - i more on the other
                options = [(lead - i, trail + k - i)]
            else:  # strengthen either side: i more on it, k - i fewer on the other
                options = [(better + i, worse - (k - i)), (better - (k - i), worse + i)]
            for b, w in options:
                if min(b, w) >= 0 and b + w <= n and (stats.mcnemar_exact(b, w) < alpha) != significant:
                    return k
    return None


POWER = 0.8  # the power at which `questions_needed` sizes a study


def _z(alpha: float, power: float) -> tuple[float, float]:
    from scipy import stats

    return float(stats.norm.ppf(1 - alpha / 2)), float(stats.norm.ppf(power))


def questions_needed(effect: float, est: dict[str, Any], alpha: float = 0.05, power: float = POWER,
                     discordance: float | None = None) -> int | None:
    """Questions (or models) at which `effect` (in the estimate's units) would be detected with `power`, two-sided.

    Paired 0/1 (McNemar, Connor 1987): at `discordance` (default: the observed discordant share), at least |effect|.
    Paired continuous: from the sd of the differences. A proportion against chance: the normal
    approximation. A correlation: Fisher z. None when the estimate carries too little to say.
    """
    za, zb = _z(alpha, power)
    scale = est.get("scale") or 1.0
    test, d = est.get("test", ""), abs(effect) / scale
    if not d or not np.isfinite(d) or (test == "exact McNemar" and d > 1):  # no share of questions exceeds 1
        return None
    if test == "exact McNemar":
        n = est["n"]
        observed = (est["better"] + est["worse"]) / n if n else 0.0
        psi = max(observed if discordance is None else discordance, d)
        if psi >= 1 and d >= 1:
            return 1
        need = (za * np.sqrt(psi) + zb * np.sqrt(max(psi - d * d, 0.0))) ** 2 / (d * d)
    elif test.startswith("sign-flip") or (test.startswith("paired bootstrap") and "sd" in est):
        sd = est.get("sd", float("nan")) / scale
        if not np.isfinite(sd) or sd == 0:
            return None
        need = ((za + zb) * sd / d) ** 2
    elif test == "exact binomial":
        p0 = est["chance"]
        p1 = min(max(p0 + np.sign(effect) * d, 1e-6), 1 - 1e-6)
        need = ((za * np.sqrt(p0 * (1 - p0)) + zb * np.sqrt(p1 * (1 - p1))) / (p1 - p0)) ** 2
    elif test.startswith("Pearson"):
        if d >= 1:
            return stats.MIN_CORRELATION_N
        need = ((za + zb) / np.arctanh(d)) ** 2 + 3
    else:
        return None
    return int(np.ceil(need))


DISCORDANCES = (0.1, 0.2, 0.3)  # shares of questions changing between two settings at which the ledger sizes a study


def mcnemar_sizes(effect: float, est: dict[str, Any], n_full: int | None = None) -> dict[str, Any]:
    """Connor's n for a paired 0/1 `effect` over a range of discordances, and what `n_full` questions can afford.

    `floor`: the n at the least possible discordance (|effect|: no question made worse), a minimum;
    `at`: {discordance: n} for each of `DISCORDANCES` above it; `observed`: the n at this run's own
    discordance when it is above the floor (None when the run's discordance is the floor: then it
    says nothing); `affordable`: the largest discordance at which `n_full` questions reach the power
    (None without `n_full`, 0.0 when even the floor needs more).
    """
    d = abs(effect) / (est.get("scale") or 1.0)
    share = (est["better"] + est["worse"]) / est["n"] if est.get("n") else 0.0
    out = {"effect_share": d, "floor": questions_needed(effect, est, discordance=d),
           "at": {psi: questions_needed(effect, est, discordance=psi) for psi in DISCORDANCES if psi > d},
           "observed_share": share, "observed": questions_needed(effect, est) if share > d else None,
           "affordable": None}
    if n_full is not None and out["floor"] is not None:
        low, high = d, 1.0
        if questions_needed(effect, est, discordance=d) > n_full:
            out["affordable"] = 0.0
            return out
        for _ in range(40):  # n grows with the discordance: bisect for the largest one n_full affords
            mid = (low + high) / 2
            low, high = (mid, high) if questions_needed(effect, est, discordance=mid) <= n_full else (low, mid)
        out["affordable"] = low
    return out
