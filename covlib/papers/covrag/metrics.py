"""CoV-RAG's metrics: answer, judgment and retrieval accuracy, Table 2's averages with intervals, table rows.

Accuracy is containment (§3.3, as WebGLM); `question_flags` gives the per-question 0/1 values
every rate is a mean of (what the bootstrap intervals resample); `table_frame` and `run_label`
write the notebooks' table rows; `answerable` says which questions the corpus can answer at all.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable, Sequence

import numpy as np

from covlib.core.metrics import accuracy_contains, normalize_answer
from covlib.core.stats import bootstrap
from covlib.core.records import Example, Passage
from covlib.papers.covrag.correctness import is_correct
from covlib.papers.covrag.method import CovRagRecord
from covlib.papers.covrag.paper import PAPER_COUNTS
from covlib.papers.covrag.verifier import parse_report


# --------------------------------------------------------------------------- metrics


def references_hold_answer(references: Sequence[Passage], gold: Sequence[str]) -> bool:
    """Table 5's retrieval accuracy for one question: a gold alias occurs in one of the references."""
    return any(accuracy_contains(f"{p.title} {p.text}", list(gold)) for p in references)


def accuracy(records: Sequence[CovRagRecord], first: bool = False) -> float | None:
    """Share of records whose final (or, `first=True`, single-iteration) answer is correct."""
    if not records:
        return None
    return sum(is_correct(r.first_answer if first else r.answer, r.gold) for r in records) / len(records)


def judgment_accuracy(records: Sequence[CovRagRecord]) -> dict[str, Any]:
    """The first verification's judgment against the gold answer: 'true' for a correct answer, 'false' otherwise.

    `accuracy` counts unclear and unparsed judgments as wrong; `accuracy_judged` is over true/false only.
    """
    right = judged = 0
    labels = Counter()
    for r in records:
        v = r.rounds[0].verification
        label = v.judgment if v is not None and v.parsed and v.judgment else "none"
        labels[label] += 1
        if label in ("true", "false"):
            judged += 1
            right += (label == "true") == is_correct(r.first_answer, r.gold)
    n = len(records)
    return {"n": n, "accuracy": right / n if n else None, "accuracy_judged": right / judged if judged else None,
            "judged": judged, "labels": dict(labels)}


def retrieval_accuracy(records: Sequence[CovRagRecord]) -> dict[str, float | None]:
    """Table 5: share of questions with a gold answer in the top-k references, single vs multi iteration, and Δ."""
    if not records:
        return {"single": None, "multi": None, "delta": None}
    single = sum(references_hold_answer(r.rounds[0].references, r.gold) for r in records) / len(records)
    multi = sum(references_hold_answer(r.rounds[-1].references, r.gold) for r in records) / len(records)
    return {"single": single, "multi": multi, "delta": multi - single}


def rounds_histogram(records: Sequence[CovRagRecord]) -> dict[int, int]:
    """How many answers settled at each round (0 = σ did not fire)."""
    return dict(sorted(Counter(r.settled_round for r in records).items()))


def summarize(records: Sequence[CovRagRecord]) -> dict[str, Any]:
    """The headline numbers of one run: accuracy single/multi, retrieval accuracy, judgment, parsing, σ rate."""
    firsts = [r.rounds[0].verification for r in records if r.rounds[0].verification is not None]
    return {
        "n": len(records),
        "accuracy_single": accuracy(records, first=True),
        "accuracy_multi": accuracy(records),
        "retrieval": retrieval_accuracy(records),
        "judgment": judgment_accuracy(records),
        "parse": parse_report(firsts),
        "fired": sum(r.rounds[0].fired for r in records),
        "unverified": sum(r.unverified for r in records),
        "rounds": {str(k): v for k, v in rounds_histogram(records).items()},
    }


def weighted_average(values: dict[str, float | None], counts: dict[str, int]) -> float | None:
    """Table 2's Avg: the datasets' accuracies weighted by their number of questions (400/400/100/100 in the paper)."""
    pairs = [(values[k], counts[k]) for k in values if values[k] is not None and counts.get(k)]
    total = sum(c for _, c in pairs)
    return sum(v * c for v, c in pairs) / total if total else None


def average_over(values: dict[str, float | None], datasets: Sequence[str],
                 weights: dict[str, int] = PAPER_COUNTS) -> float | None:
    """Table 2's Avg restricted to `datasets`, each weighted by `weights` (the paper's 400/400/100/100).

    A paper row's four-dataset Avg is not comparable with ours over the datasets we loaded (NQ and
    WebQ by default): recomputed over the same datasets with the same weights, it is. None when a
    dataset has no value in the row (the GPT-3 row has no Mintaka / TriviaQA): not like with like.
    """
    datasets = list(datasets)
    if not datasets or any(values.get(d) is None for d in datasets):
        return None
    return weighted_average({d: values[d] for d in datasets}, {d: weights[d] for d in datasets})


def average_interval(flags_by_dataset: dict[str, Sequence[float]], weights: dict[str, int] = PAPER_COUNTS,
                     scale: float = 100.0, seed: int = 0) -> dict[str, float]:
    """`average_over` of our per-question 0/1 values with a 95% bootstrap interval (resampling questions).

    Each question of dataset d weighs weights[d] / n_d, so the value is the datasets' accuracies
    weighted by `weights`; n is the number of questions.
    """
    values, w = [], []
    for name, flags in flags_by_dataset.items():
        flags = [float(f) for f in flags]
        if flags:
            values += flags
            w += [weights[name] / len(flags)] * len(flags)
    if not values:
        return {"value": float("nan"), "low": float("nan"), "high": float("nan"), "n": 0}

    def weighted_mean(x: Any, wt: Any) -> float:
        return float(np.sum(x * wt) / np.sum(wt))

    est = bootstrap(weighted_mean, values, w, seed=seed)
    return {k: (v * scale if k != "n" else v) for k, v in est.items()}


def question_flags(records: Sequence[CovRagRecord]) -> dict[str, list[float]]:
    """Per question, the 0/1 values behind every CoV-RAG rate (what the intervals resample):

    * `single` / `multi`: the first / final answer is correct (Si, Mi, Table 2);
    * `judgment`: the first judgment matches the answer's correctness (unclear or unparsed: 0, as Jdg);
    * `judgment_judged`: the same over true/false judgments only (others NaN, left out of a mean);
    * `format` / `parsed`: the first verification needed no repair / was usable (NaN when not verified);
    * `reference_single` / `reference_multi`: a gold alias among the first / last round's references (Table 5).
    """
    nan = float("nan")
    out: dict[str, list[float]] = {key: [] for key in ("single", "multi", "judgment", "judgment_judged", "format",
                                                       "parsed", "reference_single", "reference_multi")}
    for r in records:
        first_ok = is_correct(r.first_answer, r.gold)
        v = r.rounds[0].verification
        label = v.judgment if v is not None and v.parsed and v.judgment else "none"
        right = float(label in ("true", "false") and (label == "true") == first_ok)
        out["single"].append(float(first_ok))
        out["multi"].append(float(is_correct(r.answer, r.gold)))
        out["judgment"].append(right)
        out["judgment_judged"].append(right if label in ("true", "false") else nan)
        out["format"].append(nan if v is None else float(v.well_formed))
        out["parsed"].append(nan if v is None else float(v.parsed))
        out["reference_single"].append(float(references_hold_answer(r.rounds[0].references, r.gold)))
        out["reference_multi"].append(float(references_hold_answer(r.rounds[-1].references, r.gold)))
    return out


def table_frame(rows: Sequence[dict[str, Any]]) -> Any:
    """Table rows (ours and the paper's) as a DataFrame for `results.save_table`: a cell a row does not have is
    blank, not "nan" (the paper's rows have no interval), and a column of counts stays integer (not 8.0)."""
    import numbers

    import pandas as pd

    rows = list(rows)
    df = pd.DataFrame(rows)
    out = df.astype(object).where(df.notna(), "")
    for col in df.columns:
        given = [r[col] for r in rows if r.get(col) is not None]
        if given and all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in given):
            out[col] = [int(v) if pd.notna(v) else "" for v in df[col]]
    return out


def run_label(name: str) -> str:
    """What ran, for a table row, from a covlib model name: '<model>, no adapter' or '<model>, adapter <folder>'.

    Rows are named by what ran, never by the paper's method name: the paper's CoV-RAG is a model
    fine-tuned with Eqs. 2-4, and an untuned model running the same pipeline is not it.
    """
    model, sep, adapter = name.partition("+adapter:")
    if model.startswith("local:"):
        model = model[len("local:"):].rstrip("/").split("/")[-1]
    elif model.startswith("openai:"):
        model = model.split("@")[0]
    else:
        model = model.split("/")[-1]
    return f"{model}, adapter {adapter}" if sep else f"{model}, no adapter"


# --------------------------------------------------------------------------- what the corpus can answer


def answerable(examples: Sequence[Example], passages: Iterable[Passage], max_words: int = 12) -> dict[str, bool]:
    """Per example id: does a normalised gold alias occur anywhere in the corpus? One streamed pass over `passages`.

    Only the n-gram sizes that some alias has are built, so one pass over a large corpus stays linear;
    aliases longer than `max_words` words (sentences, not answers) are never found.
    """
    wanted: dict[str, set[str]] = {}
    for ex in examples:
        for alias in ex.answers:
            norm = normalize_answer(alias)
            if norm:
                wanted.setdefault(norm, set()).add(ex.id)
    lengths = sorted({min(len(a.split()), max_words) for a in wanted})  # only the n-gram sizes some alias has
    found: set[str] = set()
    remaining = set(wanted)
    for p in passages:
        if not remaining:
            break
        words = normalize_answer(f"{p.title} {p.text}").split()
        for size in lengths:
            for i in range(len(words) - size + 1):
                gram = " ".join(words[i:i + size])
                if gram in remaining:
                    found.add(gram)
                    remaining.discard(gram)
    hit_ids = {i for alias in found for i in wanted[alias]}
    return {ex.id: ex.id in hit_ids for ex in examples}
