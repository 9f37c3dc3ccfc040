"""What notebooks 01-03 declare to the one notebook door, as plain data.

Their parameters, each declared once (`covlib.runs.parameters`: default, doc, rule, what the cpu and smoke profiles do
to it), and what their tables record, read by `covlib.runs.session.start`."""

from __future__ import annotations

from typing import Any

from covlib.papers.verify_edit import default_threshold, simulation, workload
from covlib.papers.verify_edit.parameters import DATASETS, PARAMETERS

COT_SC = ("n_samples", "temperature", "seed", "max_new_tokens")  # the CoT-SC sampling every notebook here records


def threshold(values: dict[str, Any]) -> dict[str, Any]:
    """Algorithm 1's default consistency threshold, ceil(n/2) (§3.1), from `n_samples`."""
    return {"threshold": default_threshold(values["n_samples"])}


def sizes(values: dict[str, Any]) -> dict[str, Any]:
    """Notebook 03: the questions per table (as the profile runs them) and the threshold."""
    return {"sizes": {d: values[f"n_{d}"] for d in DATASETS}, **threshold(values)}


NOTEBOOKS: dict[str, dict[str, Any]] = {
    "01": {
        "name": "01_consistency_kde", "models": ("model",), "traces": True, "derive": threshold, "work": workload.work_01,
        "simulate": simulation.teach,
        "parameters": PARAMETERS["01"],
        "recorded": ("profile", "n_questions", *COT_SC, "threshold"),
    },
    "02": {
        "name": "02_threshold_ablation", "models": ("model",), "traces": True, "derive": threshold, "work": workload.work_02,
        "simulate": simulation.teach,
        "parameters": PARAMETERS["02"],
        "recorded": ("profile", "n_questions", *COT_SC, "knowledge", "consistency"),
    },
    "03": {
        "name": "03_verify_and_edit_tables", "models": ("model",), "traces": True, "derive": sizes, "work": workload.work_03,
        "simulate": simulation.teach,
        "parameters": PARAMETERS["03"],
        "recorded": ("profile", "sizes", "datasets", "knowledge", *COT_SC, "threshold"),
    },
}
