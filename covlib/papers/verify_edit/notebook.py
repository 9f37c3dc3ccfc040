"""What notebooks 01-03 declare to the one notebook door, as plain data.

Their parameters' lists and choices, what the cpu and smoke profiles cap, and what their tables record, read by
`covlib.runs.session.start`."""

from __future__ import annotations

from typing import Any

from covlib.papers.verify_edit import default_threshold
from covlib.papers.verify_edit.knowledge import KNOWLEDGE_KINDS

DATASETS = ("hotpotqa", "2wikimultihop", "fever")
COT_SC = ("n_samples", "temperature", "seed", "max_new_tokens")  # the CoT-SC sampling every notebook here records


def threshold(values: dict[str, Any]) -> dict[str, Any]:
    """Algorithm 1's default consistency threshold, ceil(n/2) (§3.1), from `n_samples`."""
    return {"threshold": default_threshold(values["n_samples"])}


def sizes(values: dict[str, Any]) -> dict[str, Any]:
    """Notebook 03: the questions per table (as the profile runs them) and the threshold."""
    return {"sizes": {d: values[f"n_{d}"] for d in DATASETS}, **threshold(values)}


NOTEBOOKS: dict[str, dict[str, Any]] = {
    "01": {
        "name": "01_consistency_kde", "models": ("model",), "traces": True, "derive": threshold,
        "caps": {"cpu": {"n_questions": ("at most", 60)}, "smoke": {"n_questions": 12, "max_new_tokens": 64}},
        "recorded": ("profile", "n_questions", *COT_SC, "threshold"),
    },
    "02": {
        "name": "02_threshold_ablation", "models": ("model",), "traces": True, "derive": threshold,
        "choices": {"knowledge": KNOWLEDGE_KINDS, "consistency": ("wang", "majority")},
        "caps": {"cpu": {"n_questions": ("at most", 60)}, "smoke": {"n_questions": 12, "max_new_tokens": 64}},
        "recorded": ("profile", "n_questions", *COT_SC, "knowledge", "consistency"),
    },
    "03": {
        "name": "03_verify_and_edit_tables", "models": ("model",), "traces": True, "derive": sizes,
        "lists": {"datasets": DATASETS, "knowledge": KNOWLEDGE_KINDS},
        "caps": {"cpu": {"n_hotpotqa": ("at most", 60), "n_2wikimultihop": ("at most", 30), "n_fever": ("at most", 30)},
                 "smoke": {"n_hotpotqa": 8, "n_2wikimultihop": 4, "n_fever": 4, "max_new_tokens": 48,
                           "knowledge": ("without", "tfidf")}},  # smoke: one retriever
        "recorded": ("profile", "sizes", "datasets", "knowledge", *COT_SC, "threshold"),
    },
}
