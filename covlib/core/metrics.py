"""Evaluation metrics: answer matching, FEVER accuracy, calibration AUC, retrieval recall, statistics.

Answer metrics follow the SQuAD / HotpotQA evaluation scripts (normalise: lowercase,
drop punctuation, drop the articles a/an/the, collapse whitespace), taking the maximum
over gold aliases. `accuracy_contains` is the WebGLM / CoV-RAG protocol for open QA.
`accuracy_coverage_auc` reproduces Ye & Durrett's `f1auc_score` that Verify-and-Edit reports.
Intervals, tests and power live in `covlib.core.stats`.
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


# A number written as one: digits with optional comma thousands groups ("1,990") and decimal part ("3.5"),
# neither glued to letters ("1990s", "A320") nor a piece of a longer run of digits and separators ("3.5.1").
_NUMBER = re.compile(r"(?<![^\W_])(?<!\d[.,])(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)(?![^\W_]|[.,]\d)")
_DIGIT_SEPARATOR = re.compile(r"(?<=\d)[.,](?=\d)")  # what is left between digits ("1,5", "3.5.1"): a word break


def _number(written: str) -> str:
    """A number's one spelling: thousands commas and trailing decimal zeros dropped ('1,990' -> '1990', '19.90' -> '19.9')."""
    whole, _, decimals = written.replace(",", "").partition(".")
    decimals = decimals.rstrip("0")
    return f"{whole}.{decimals}" if decimals else whole


def _words_keeping_numbers(text: str, words: Any) -> str:
    """`words` (a normalisation) applied between the numbers; each number kept as one word, spelt by `_number`."""
    parts = _NUMBER.split(unicodedata.normalize("NFC", str(text)))
    return " ".join(" ".join((_number(part) if i % 2 else words(_DIGIT_SEPARATOR.sub(" ", part))) for i, part in enumerate(parts)).split())


def _split_words(text: str) -> str:
    s = "".join(ch if ch.isalnum() else " " for ch in text.lower())
    return " ".join(_ARTICLES.sub(" ", s).split())


def contains_words(text: str) -> str:
    """Containment normalisation: NFC, lowercase, every non-alphanumeric character a word break, articles dropped.

    Unlike `normalize_answer`, punctuation separates words instead of gluing them, so an answer
    next to punctuation stays a whole word ("Obama's" -> "obama s", "1990–91" -> "1990 91"),
    as DPR's `has_answer` tokeniser, ALCE and WebGLM read it. A number stays one word and is read
    as a number: its decimal point and thousands commas are parsed, neither broken nor deleted
    ("3.5" -> "3.5", "$19.90" -> "19.9", "1,990" -> "1990"), so "35" is not "3.5", nor "19.90" "1990".
    """
    return _words_keeping_numbers(text, _split_words)


def _glued_words(text: str) -> str:
    """`normalize_answer` (punctuation deleted) between the numbers, each number kept whole as `contains_words` keeps it."""
    return _words_keeping_numbers(text, normalize_answer)


def accuracy_contains(pred: str, golds: str | Iterable[str]) -> float:
    """1.0 if any gold alias appears in the prediction as whole words (WebGLM / CoV-RAG / DPR `has_answer`).

    Both texts are compared twice: with punctuation as a word break (`contains_words`: "Obama's",
    "Paris-based", "“Help”" hold their gold) and with punctuation deleted (`normalize_answer`:
    "U.S" holds "US"); either match counts. In both, numbers compare as numbers (`contains_words`):
    "It has 35 members." does not hold "3.5", "$19.90" does not hold "1990", "3.5" does not hold "3",
    but "1,990 feet" holds "1990" and "$19.90" holds "19.9" (the same numbers). Deleting punctuation
    inside numbers, as WebGLM's normalisation would, glues "3.5" into "35"; DPR's tokeniser never does.
    A comma between digits is a thousands separator only before groups of three digits ("1,990");
    "1,5" and "1,2,3" are separate numbers, and "1.990" is a decimal.
    """
    split_p, glued_p = f" {contains_words(pred)} ", f" {_glued_words(pred)} "
    for g in _as_list(golds):
        split_g, glued_g = contains_words(g), _glued_words(g)
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
