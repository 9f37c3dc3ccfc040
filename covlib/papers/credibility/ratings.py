"""Human ratings (§6.2, Table 2): the rating sheet, the per-model scores and their correlation with the metrics."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from covlib.core import stats
from covlib.core.stats import pearson
from covlib.core.records import DataError
from covlib.core.references import cited_sentences
from covlib.papers.credibility.claims import estimate, untestable

from covlib.papers.credibility.intervals import human_correlation_intervals


# --------------------------------------------------------------------------- human ratings (§6.2, Table 2)

RATING_COLUMNS = ("question_id", "model", "rater", "helpful", "completeness")
COMPLETENESS_LEVELS = (0.0, 0.25, 0.5, 0.75, 1.0)


def export_rating_sheet(rows: Sequence[dict[str, Any]], path: str | Path) -> Path:
    """A rating sheet: per (question, model) the question, the numbered answer sentences and empty rating columns.

    `rows` carry question_id, model, question and answer. Raters fill `rater`, `helpful` (one
    0/1 per numbered sentence, space-separated: is the sentence helpful for answering?) and
    `completeness` (0, 0.25, 0.5, 0.75 or 1: is the answer complete?).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["question_id", "model", "question", "sentences", *RATING_COLUMNS[2:]])
        for r in rows:
            numbered = " ".join(f"({j}) {s.text}" for j, s in enumerate(cited_sentences(r["answer"]), 1))
            w.writerow([r["question_id"], r["model"], r["question"], numbered, "", "", ""])
    return path


def read_ratings(path: str | Path) -> list[dict[str, Any]]:
    """Ratings rows (question_id, model, rater, helpful as a 0-1 share, completeness), every field checked."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no ratings file at {path}")
    out = []
    with path.open(newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        missing = [c for c in RATING_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise DataError(path, f"missing column(s) {missing}; expected {list(RATING_COLUMNS)}", 1)
        for line, row in enumerate(reader, 2):
            if not any((row.get(c) or "").strip() for c in ("helpful", "completeness")):
                continue  # not rated yet
            for c in ("question_id", "model", "rater"):
                if not (row[c] or "").strip():
                    raise DataError(path, "empty", line, c)
            flags = (row["helpful"] or "").replace(",", " ").split()
            if not flags or any(x not in ("0", "1") for x in flags):
                raise DataError(path, f"helpful must be 0/1 flags, one per sentence, not {row['helpful']!r}", line,
                                "helpful")
            try:
                completeness = float(row["completeness"])
            except (TypeError, ValueError):
                completeness = float("nan")
            if completeness not in COMPLETENESS_LEVELS:
                raise DataError(path, f"completeness must be one of {COMPLETENESS_LEVELS}, not {row['completeness']!r}",
                                line, "completeness")
            out.append({"question_id": row["question_id"].strip(), "model": row["model"].strip(),
                        "rater": row["rater"].strip(), "helpful": float(np.mean([int(x) for x in flags])),
                        "completeness": completeness})
    if not out:
        raise DataError(path, "no rated rows")
    return out


def human_scores(ratings: Sequence[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per model: human precision (share of helpful sentences) and recall (completeness) in %, raters then questions averaged."""
    per_q: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in ratings:
        per_q.setdefault((r["model"], r["question_id"]), []).append(r)
    by_model: dict[str, list[tuple[float, float]]] = {}
    for (model, _), rs in per_q.items():
        by_model.setdefault(model, []).append((np.mean([r["helpful"] for r in rs]), np.mean([r["completeness"] for r in rs])))
    return {m: {"HPrec": 100 * float(np.mean([v[0] for v in vs])), "HRec": 100 * float(np.mean([v[1] for v in vs])),
                "n_questions": len(vs)} for m, vs in by_model.items()}


def human_correlation(auto: dict[str, dict[str, float]], human: dict[str, dict[str, float]]) -> dict[str, float]:
    """Pearson r across models (Table 2): P vs human precision, R and EM-recall vs human recall (needs >= 3 models)."""
    models = sorted(set(auto) & set(human))
    if len(models) < 3:
        raise ValueError(f"a correlation across models needs at least 3 rated models, got {models}")
    return {"P": pearson([auto[m]["P"] for m in models], [human[m]["HPrec"] for m in models])[0],
            "R": pearson([auto[m]["R"] for m in models], [human[m]["HRec"] for m in models])[0],
            "EM_recall": pearson([auto[m]["EM_recall"] for m in models], [human[m]["HRec"] for m in models])[0],
            "n_models": len(models)}


def human_correlation_claims(auto: dict[str, dict[str, float]], human: dict[str, dict[str, float]] | None,
                             scope: str, **meta: Any) -> list[dict[str, Any]]:
    """`cred-human-correlation` records: r(R, HRec) − r(EM-recall, HRec), then precision's, with both correlations.

    Each row carries both correlations (`r_key_facts`, `r_em_recall`: Fisher-z intervals, n models)
    and says them in `note`. Not testable without ratings, or with fewer than 4 rated models.
    """
    rated = sorted(set(auto) & set(human or {}))
    meta = {"model": ", ".join(rated or auto), **meta}
    if not human:
        return [untestable("cred-human-correlation", "no human ratings given (the `ratings` parameter is empty)",
                                  scope=f"recall, {scope}", **meta)]
    if len(rated) < stats.MIN_CORRELATION_N:
        return [untestable("cred-human-correlation", f"not testable with fewer than {stats.MIN_CORRELATION_N} "
                                  f"rated models ({len(rated)} rated: {', '.join(rated) or 'none'}): a Fisher-z "
                                  "interval over models needs 4", scope=f"recall, {scope}", **meta)]
    est = human_correlation_intervals(auto, human)
    judge_line = meta.pop("note", "")  # a note the caller gives (the judge's) goes after each row's own
    out = []
    for field, key, metric, people in (("recall", "R", "key-fact R", "human recall"),
                                       ("precision", "P", "key-fact P", "human precision")):
        note = (f"r({metric}, {people}) = {stats.format_interval(est[key], 2)}; r(EM-recall, human recall) = "
                f"{stats.format_interval(est['EM_recall'], 2)}; {len(rated)} models, Fisher-z intervals"
                + (f"; {judge_line}" if judge_line else ""))
        out.append(estimate("cred-human-correlation", f"{field}, {scope}, {len(rated)} rated models",
                                   est[f"{key}_minus_EM_recall"], "Pearson r difference (Zou 2007)", note=note,
                                   r_key_facts=est[key], r_em_recall=est["EM_recall"], **meta))
    return out
