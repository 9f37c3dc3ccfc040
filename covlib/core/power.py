"""Multiplicity and power: Holm's adjustment of a family of tests, and the n an effect would need.

`questions_needed(effect, est)` reads the test an estimate of `covlib.core.stats` carries
("exact McNemar", "sign-flip ...", "exact binomial", "Pearson ...") and returns the number of
questions (models, for a correlation) at which `effect` would be detected two-sided at 5% with
80% power: Connor (1987) for paired 0/1 outcomes from the observed discordant share, the normal
approximation for paired means (observed sd) and for a proportion against chance, Fisher z for
a correlation.
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


POWER = 0.8  # the power at which `questions_needed` sizes a study


def _z(alpha: float, power: float) -> tuple[float, float]:
    from scipy import stats

    return float(stats.norm.ppf(1 - alpha / 2)), float(stats.norm.ppf(power))


def questions_needed(effect: float, est: dict[str, Any], alpha: float = 0.05, power: float = POWER) -> int | None:
    """Questions (or models) at which `effect` (in the estimate's units) would be detected with `power`, two-sided.

    Paired 0/1 (McNemar, Connor 1987): from the observed discordant share, at least |effect|.
    Paired continuous: from the sd of the differences. A proportion against chance: the normal
    approximation. A correlation: Fisher z. None when the estimate carries too little to say.
    """
    za, zb = _z(alpha, power)
    scale = est.get("scale") or 1.0
    test, d = est.get("test", ""), abs(effect) / scale
    if not d or not np.isfinite(d):
        return None
    if test == "exact McNemar":
        n = est["n"]
        psi = max((est["better"] + est["worse"]) / n if n else 0.0, d)
        if psi >= 1 and d >= 1:
            return 1
        need = (za * np.sqrt(psi) + zb * np.sqrt(max(psi - d * d, 0.0))) ** 2 / (d * d)
    elif test.startswith("sign-flip"):
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
