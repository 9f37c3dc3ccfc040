"""What the project's own notebooks (00, 00b, 12) declare to the one notebook door, as plain data.

The data tour, the NLI judges and the claims ledger belong to no paper; the papers' notebooks declare theirs in their
own packages (`covlib.papers.<paper>.notebook`), read by `covlib.runs.session.start`."""

from __future__ import annotations

from typing import Any

from covlib.generation.simulated import is_simulated
from covlib.runs.parameters import DEVICE, MODEL, PROFILE, Param, count, like


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
        "parameters": {
            "profile": PROFILE,
            "model": like(MODEL, doc="generator (unused here: no LLM calls in the data tour)"),
            "device": like(DEVICE, doc="cpu | cuda (unused here)"),
            "n_questions": count(250, "Adversarial HotpotQA test questions scored for retrieval recall (paper's test "
                                 "split)", smoke=12),
            "retrievers": Param("bm25,tfidf,dense", "retrievers compared, comma-separated",
                                items=("bm25", "tfidf", "dense")),
            "ks": Param("1,2,5,10,20", "cut-offs k for recall@k", items="int", low=1)},
        "recorded": ("profile", "n_questions", "retrievers", "ks"),
    },
    "00b": {
        "name": "00b_nli_judges", "derive": judge_specs, "work": judges_work,
        "parameters": {
            "profile": PROFILE,
            "model": like(MODEL, doc="LM behind the LLM-as-judge; empty for the embedded SmolLM2-135M-Instruct"),
            "device": DEVICE,
            "judges": Param("minilm-fever-nli,overlap,llm", "comma-separated judge specs; add an HF NLI model id, or "
                            "'true' on a GPU", items="any"),
            "n_fever": count(1000, "held-out FEVER pairs per judge (all the paper's sampled claims)", smoke=60),
            "n_fever_slow": count(1000, "cap for LLM / TRUE judges on FEVER and the key-fact pairs (100x slower on a "
                                  "CPU)", cpu=("at most", 300), smoke=30),
            "seed": Param(0, "pair building and subsampling seed (must match `make judge`'s, 0, for a clean held-out "
                          "set)")},
        "recorded": ("profile", "model", "device", "judges", "n_fever", "n_fever_slow", "seed"),
    },
    "12": {
        "name": "12_claims",
        "parameters": {
            "profile": like(PROFILE, doc="smoke, cpu, full or auto: recorded with the ledger (this notebook runs no "
                            "model)"),
            "model": like(MODEL, doc="unused: the ledger reads what notebooks 01-11 recorded, with their models"),
            "device": like(DEVICE, doc="unused"),
            "results_folder": Param("", "folder of the results JSON of notebooks 01-11; empty: this project's "
                                    "results/")},
        "recorded": ("profile", ("results_folder", "results/")),
    },
}
