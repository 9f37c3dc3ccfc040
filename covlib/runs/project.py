"""What the project's own notebooks (00, 00b, 12) declare to the one notebook door, as plain data.

The data tour, the NLI judges and the claims ledger belong to no paper; the papers' notebooks declare theirs in their
own packages (`covlib.papers.<paper>.notebook`), read by `covlib.runs.session.start`."""

from __future__ import annotations

from typing import Any

from covlib.runs import profiles


def judge_specs(values: dict[str, Any]) -> dict[str, Any]:
    """00b: the judges as specs, `llm` running the notebook's `model` (spec "llm:<model>")."""
    model = values.get("model", "")
    return {"judges": list(dict.fromkeys(f"llm:{model}" if model and s.lower() == "llm" else s
                                         for s in values["judges"]))}


def sorted_cutoffs(values: dict[str, Any]) -> dict[str, Any]:
    """00: the recall cut-offs in order, every one a valid k."""
    profiles.check_parameters(k=min(values["ks"]))
    return {"ks": sorted(values["ks"])}


NOTEBOOKS: dict[str, dict[str, Any]] = {
    "00": {
        "name": "00_data_tour", "derive": sorted_cutoffs,
        "lists": {"retrievers": ("bm25", "tfidf", "dense"), "ks": "int"},
        "caps": {"smoke": {"n_questions": 12}},
        "recorded": ("profile", "n_questions", "retrievers", "ks"),
    },
    "00b": {
        "name": "00b_nli_judges", "derive": judge_specs, "lists": {"judges": None},
        "caps": {"cpu": {"n_fever_slow": ("at most", 300)}, "smoke": {"n_fever": 60, "n_fever_slow": 30}},
        "recorded": ("profile", "model", "device", "judges", "n_fever", "n_fever_slow", "seed"),
    },
    "12": {
        "name": "12_claims",
        "recorded": ("profile", ("results_folder", "results/")),
    },
}
