"""Notebooks 01-03's parameters, each declared once (`covlib.runs.parameters`): default, doc, rule, and what the cpu
and smoke profiles do to it; read by their specs (`notebook`) and by the claims ledger (the questions `full` runs)."""

from __future__ import annotations

from covlib.papers.verify_edit.knowledge import KNOWLEDGE_KINDS
from covlib.runs.parameters import DEVICE, MODEL, PROFILE, Param, count

DATASETS = ("hotpotqa", "2wikimultihop", "fever")
N_QUESTIONS = count(250, "Adversarial HotpotQA test questions (paper: all 250)", cpu=("at most", 60), smoke=12)
COT_SC_PARAMETERS = {  # CoT-SC's sampling, the same in all three
    "n_samples": count(5, "self-consistency paths (paper: 5)"),
    "temperature": Param(0.7, "sampling temperature (paper: 0.7)", low=0.0),
    "seed": Param(0, "sampling seed (and the bootstrap's)"),
    "max_new_tokens": count(96, "longest CoT completion", smoke=64),
}
BASE = {"profile": PROFILE, "model": MODEL, "device": DEVICE}

PARAMETERS: dict[str, dict[str, Param]] = {
    "01": {**BASE, "n_questions": N_QUESTIONS, **COT_SC_PARAMETERS},
    "02": {**BASE, "n_questions": N_QUESTIONS, **COT_SC_PARAMETERS,
           "knowledge": Param("dataset", "dataset, bm25, tfidf, dense or web (the paper does not say which Fig. 3 used)",
                              choices=KNOWLEDGE_KINDS),
           "consistency": Param("wang", "wang or majority: the score thresholded (paper: Wang et al.'s)",
                                choices=("wang", "majority"))},
    "03": {**BASE,
           "datasets": Param(",".join(DATASETS), "which tables, comma-separated", items=DATASETS),
           "knowledge": Param("dataset,bm25,tfidf,web", "knowledge sources for CoT-SC + VE, comma-separated",
                              items=KNOWLEDGE_KINDS, smoke=("without", "tfidf")),  # smoke: one retriever
           "n_hotpotqa": count(250, "Adversarial HotpotQA test questions (paper: 250)", cpu=("at most", 60), smoke=8),
           "n_2wikimultihop": count(1000, "2WikiMultihop dev questions (paper: 1000 sampled)", cpu=("at most", 30),
                                    smoke=4),
           "n_fever": count(1000, "FEVER claims from sampled_ids.json (paper: 1000)", cpu=("at most", 30), smoke=4),
           **COT_SC_PARAMETERS, "max_new_tokens": count(96, "longest CoT completion", smoke=48)},
}
