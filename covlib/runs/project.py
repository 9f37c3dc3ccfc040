"""What the project's own notebooks (00, 00b, 12) declare to the one notebook door, as plain data.

The data tour, the NLI judges and the claims ledger belong to no paper; the papers' notebooks declare theirs in their
own packages (`covlib.papers.<paper>.notebook`), read by `covlib.runs.session.start`."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from covlib import nli
from covlib.generation.recording import Recorder, Script
from covlib.generation.simulated import is_simulated
from covlib.nli import labelled as L, pairs as P, people
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


DRAWN = "pairs: a draw of the size the notebook draws (its own draw differs: their tokens an estimate)"


def people_pairs(records: Sequence[people.Rationale], rules: Sequence[str]) -> list[tuple[str, str]]:
    """The (premise, hypothesis) pairs judged for people's FACTUAL labels under each of `rules`."""
    return [(unit, claim) for rule in rules for r in records for hyps, units in [people.rule_pairs(r, rule)]
            for claim in hyps for unit in units]


def judges_work(values: dict[str, Any], record: Callable[..., Recorder]) -> list[dict[str, Any]]:
    """00b: the trained judge on every labelled set (its pairs declared); each LLM judge's calls (`lm.score` of its
    three options a pair) recorded on the labelled sets, as many pairs as the notebook draws (`DRAWN`)."""
    fever = P.fever_test_pairs(seed=values["seed"])[: values["n_fever"]]
    fixture, keyfact, test = L.load_credibility_fixture(), L.load_keyfact_pairs(), L.load_keyfact_test_pairs()
    rationales = people.load_factuality() if people.factuality_path().is_file() else []
    work = []
    if any(not j.startswith(("llm", "overlap")) for j in values["judges"]):
        rows = len(fever) + len(fixture) + len(keyfact) + len(test) + len(people_pairs(rationales, list(people.RULES)))
        work.append(dict(step="trained judge, every set", kind="judge", rows=rows))
    slow = values["n_fever_slow"]
    for judge in (j for j in values["judges"] if j.startswith("llm")):
        drawn = [(p.premise, p.hypothesis) for p in [*fever[:slow], *fixture, *keyfact[:3 * slow], *test[:slow]]]
        drawn += people_pairs(people.whole_questions(rationales, max(1, slow // 2)), ["whole"])
        with record(judge.partition(":")[2]).playing(Script(bounds={"score": DRAWN})) as rec:
            nli.LLMJudge(rec).probabilities([p for p, _ in drawn], [h for _, h in drawn])
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
