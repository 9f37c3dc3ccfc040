"""The caching front end every judge is called through, and the judge's own decision.

`probabilities` returns (N, 3) P(entailment, neutral, contradiction), batched and cached by judge
name + judge config + premise + hypothesis, so all backends are cached the same way; a pair with an
empty premise or hypothesis is judged `EMPTY_PAIR` (neutral) without asking the judge. `entailed` is the
decision f in {0, 1}: the argmax, P(entailment) > 0.5 for a two-label judge, or the judge's threshold.
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence

import numpy as np

from covlib.core.cache import Cache, cached_batch, make_key, probabilities_shape
from covlib.core.records import text_list
from covlib.nli.base import EMPTY_PAIR, LABELS, Judge, two_label
from covlib.nli.registry import get_judge

CACHE_TABLE = "nli"
CHUNK = 64  # pairs judged (and committed to the cache) per step


def _judge_config(judge: Judge) -> dict[str, Any]:
    return dict(getattr(judge, "config", {}) or {})


def _check_probs(probs: Any, n: int, judge: Judge) -> np.ndarray:
    probs = np.asarray(probs, dtype=float)
    if probs.shape != (n, 3) or not np.all(np.isfinite(probs)) or np.any(probs < -1e-6):
        raise ValueError(f"judge {judge.name!r} returned invalid probabilities of shape {probs.shape}")
    probs = np.clip(probs, 0.0, None)
    return probs / probs.sum(axis=1, keepdims=True)


def pair_keys(premises: Sequence[str], hypotheses: Sequence[str], judge: Judge | str | None = None) -> list[str]:
    """The cache keys `probabilities` reads for these pairs (judge name and config, premise, hypothesis)."""
    judge = get_judge(judge)
    config = _judge_config(judge)
    return [make_key(kind="nli", judge=judge.name, config=config, premise=p, hypothesis=h)
            for p, h in zip(premises, hypotheses)]


def _judge_missing(judge: Judge, todo: dict[str, tuple[str, str]], progress: bool) -> Iterator[dict[str, list[float]]]:
    """The judge's probabilities for the pairs of `todo` (by cache key), `CHUNK` at a time, as {key: [3 floats]}."""
    pending = list(todo.items())
    starts = range(0, len(pending), CHUNK)
    if progress and len(pending) > CHUNK:
        try:
            from tqdm.auto import tqdm

            starts = tqdm(starts, desc=f"NLI ({judge.name})", unit="batch")
        except ImportError:
            pass
    for start in starts:
        chunk = pending[start : start + CHUNK]
        probs = _check_probs(judge.probabilities([p for _, (p, _) in chunk], [h for _, (_, h) in chunk]), len(chunk), judge)
        yield {key: [float(x) for x in row] for (key, _), row in zip(chunk, probs)}


def probabilities(
    premises: Sequence[str],
    hypotheses: Sequence[str],
    judge: Judge | str | None = None,
    progress: bool = True,
) -> np.ndarray:
    """(N, 3) array of P(entailment, neutral, contradiction), cached per (judge, pair)."""
    premises, hypotheses = text_list(premises, "premise", "probabilities()"), text_list(hypotheses, "hypothesis", "probabilities()")
    if len(premises) != len(hypotheses):
        raise ValueError(f"{len(premises)} premises but {len(hypotheses)} hypotheses")
    judge = get_judge(judge)
    keys = pair_keys(premises, hypotheses, judge)
    cache = Cache(table=CACHE_TABLE)
    empty = {key for key, p, h in zip(keys, premises, hypotheses) if not p.strip() or not h.strip()}
    jobs = ((key, (p, h)) for key, p, h in zip(keys, premises, hypotheses) if key not in empty)
    found = cached_batch(cache, jobs, lambda todo: _judge_missing(judge, todo, progress), probabilities_shape)
    found.update((key, list(EMPTY_PAIR)) for key in empty)  # nothing entails or is entailed by an empty text
    cache.close()
    return np.array([found[k] for k in keys], dtype=float).reshape(len(keys), 3)


def entailment(
    premises: Sequence[str],
    hypotheses: Sequence[str],
    judge: Judge | str | None = None,
    progress: bool = True,
) -> np.ndarray:
    """P(entailment) in [0, 1] for each (premise, hypothesis) pair, batched and cached."""
    return probabilities(premises, hypotheses, judge=judge, progress=progress)[:, 0]


def entailed(probs: Any, judge: Judge | str | None = None) -> np.ndarray:
    """The judge's own entailment decision f in {0, 1} per row of `probabilities`' output.

    A three-way judge decides by its argmax label. A two-label judge (TRUE, the credibility
    paper's f) decides entailed when P(entailment) > 0.5, its own threshold: its
    not-entailment mass is spread over two columns, so an argmax would call p in (1/3, 0.5]
    entailed. A judge with a calibrated `threshold` (the trained judge's card.json, set by
    `make judge` on held-out pairs) decides entailed when P(entailment) > threshold.
    """
    probs = np.asarray(probs, dtype=float).reshape(-1, 3)
    if not len(probs):
        return np.zeros(0)
    judge = get_judge(judge)
    threshold = getattr(judge, "threshold", None)
    if threshold is not None:
        return (probs[:, 0] > threshold).astype(float)
    if two_label(judge):
        return (probs[:, 0] > 0.5).astype(float)
    return (probs.argmax(axis=1) == 0).astype(float)


def decision_rule(judge: Judge | str | None = None) -> str:
    """How `entailed` decides for this judge, for tables: 'P > 0.37' (a threshold), 'P > 0.50' (two-label) or 'argmax'."""
    judge = get_judge(judge)
    threshold = getattr(judge, "threshold", None)
    if threshold is not None:
        return f"P > {threshold:.2f}"
    return "P > 0.50" if two_label(judge) else "argmax"


def decided_labels(probs: Any, judge: Judge | str | None = None) -> list[str]:
    """The judge's label per row of `probabilities`' output: 'entailment' where `entailed` decides so, else the
    larger of neutral and contradiction ('neutral' on a tie, as for a two-label judge, which cannot tell them apart)."""
    probs = np.asarray(probs, dtype=float).reshape(-1, 3)
    decided = entailed(probs, judge)
    return ["entailment" if d else LABELS[1 + int(p[2] > p[1])] for d, p in zip(decided, probs)]


def entailment_labels(
    premises: Sequence[str],
    hypotheses: Sequence[str],
    judge: Judge | str | None = None,
    progress: bool = True,
) -> list[str]:
    """Label ('entailment' / 'neutral' / 'contradiction') per pair: the argmax, or for a two-label judge
    'entailment' when P(entailment) > 0.5 and otherwise the larger of the other two."""
    judge = get_judge(judge)
    return decided_labels(probabilities(premises, hypotheses, judge=judge, progress=progress), judge)
