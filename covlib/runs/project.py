"""What the project's own notebooks (00, 00b, 12) declare to the one notebook door, as plain data.

The data tour, the NLI judges and the claims ledger belong to no paper; the papers' notebooks declare theirs in their
own packages (`covlib.papers.<paper>.notebook`), read by `covlib.runs.session.start`."""

from __future__ import annotations

from typing import Any

from covlib.generation.simulated import is_simulated
from covlib.runs import profiles


def judge_specs(values: dict[str, Any]) -> dict[str, Any]:
    """00b: the judges as specs, `llm` running the notebook's `model` (spec "llm:<model>"); none on a simulated model,
    which has no judgment of its own to measure."""
    model = values.get("model", "")
    if is_simulated(model):
        print(f"model {model} is simulated: the LLM judge is left out (it would measure the simulation, not a model)")
    return {"judges": list(dict.fromkeys(f"llm:{model}" if model and s.lower() == "llm" else s
                                         for s in values["judges"] if not (is_simulated(model) and s.lower() == "llm")))}


def sorted_cutoffs(values: dict[str, Any]) -> dict[str, Any]:
    """00: the recall cut-offs in order, every one a valid k."""
    profiles.check_parameters(k=min(values["ks"]))
    return {"ks": sorted(values["ks"])}


# Notebook 00b's labelled pairs (FEVER's test pairs are the rest), and the LLM judge's prompt in SmolLM2's tokens: one
# prefill a pair reads its three one-token options.
FIXTURE_PAIRS, KEY_FACT_PAIRS, KEY_FACT_TEST_PAIRS, FEVER_PAIRS, LLM_JUDGE_PROMPT = 90, 356, 581, 1000, 125
# People's FACTUAL labels (covlib.nli.people): the pairs the three rules judge (252 whole + 520 claims + 4 x 520 aligned)
PEOPLE_PAIRS, PEOPLE_RATIONALE_PROMPT, PEOPLE_QUESTIONS = 2852, 280, 126


def judges_work(values: dict[str, Any]) -> list[dict[str, Any]]:
    """00b: the trained judge on every labelled set; the LLM judge (`lm.score`) on its smaller draws."""
    fever, slow = min(values["n_fever"], FEVER_PAIRS), values["n_fever_slow"]
    work = []
    if any(not j.startswith(("llm", "overlap")) for j in values["judges"]):
        work.append(dict(step="trained judge, every set", kind="judge", prompt=0,
                         rows=fever + FIXTURE_PAIRS + KEY_FACT_PAIRS + KEY_FACT_TEST_PAIRS + PEOPLE_PAIRS))
    for judge in (j for j in values["judges"] if j.startswith("llm")):
        rows = min(slow, fever) + FIXTURE_PAIRS + min(3 * min(slow, KEY_FACT_PAIRS), KEY_FACT_PAIRS)
        work.append(dict(step=f"{judge} judge (three options, one prefill a pair)", kind="score", prompt=LLM_JUDGE_PROMPT,
                         rows=rows + min(slow, KEY_FACT_TEST_PAIRS), model=judge.partition(":")[2]))
        work.append(dict(step=f"{judge} judge, people's rationales (whole, first questions)", kind="score",
                         prompt=PEOPLE_RATIONALE_PROMPT, rows=2 * min(slow // 2, PEOPLE_QUESTIONS),
                         model=judge.partition(":")[2]))
    return work


NOTEBOOKS: dict[str, dict[str, Any]] = {
    "00": {
        "name": "00_data_tour", "derive": sorted_cutoffs,
        "lists": {"retrievers": ("bm25", "tfidf", "dense"), "ks": "int"},
        "caps": {"smoke": {"n_questions": 12}},
        "recorded": ("profile", "n_questions", "retrievers", "ks"),
    },
    "00b": {
        "name": "00b_nli_judges", "derive": judge_specs, "lists": {"judges": None}, "work": judges_work,
        "caps": {"cpu": {"n_fever_slow": ("at most", 300)}, "smoke": {"n_fever": 60, "n_fever_slow": 30}},
        "recorded": ("profile", "model", "device", "judges", "n_fever", "n_fever_slow", "seed"),
    },
    "12": {
        "name": "12_claims",
        "recorded": ("profile", ("results_folder", "results/")),
    },
}
