"""Notebooks 04-07's parameters, each declared once (`covlib.runs.parameters`): default, doc, rule, and what the cpu
and smoke profiles do to it; read by their specs (`notebook`) and by the claims ledger (the questions `full` runs)."""

from __future__ import annotations

from covlib.runs.parameters import DEVICE, MODEL, PROFILE, Param, count, like

KEY_FACTS_DOC = ("agents: the shipped key facts for the 100 shared questions (default; who made them: quoted below); "
                 "supporting: HotpotQA's gold supporting sentences (verbatim from the references); llm: the paper's two "
                 "prompts with `model`; llm+reviewed: after the review sheet")
SHARED = {
    "profile": PROFILE, "model": MODEL,
    "models": Param("", "comma-separated hub ids / dirs to compare; empty: `model` (full profile: the paper's open "
                    "models)"),
    "device": DEVICE,
    "questions": Param("", "HotpotQA distractor file or hub id; empty for the shared 100-question dev sample"),
    "n_questions": count(500, "questions (paper: 500 sampled from HotpotQA dev)", cpu=("at most", 20), smoke=8),
    "seed": Param(0, "question sample, reference order, distractor choice and the bootstrap"),
    "n_refs": count(5, "references per question, both gold included (paper: 5)"),
}
ANSWERING = {
    "key_facts": Param("agents", KEY_FACTS_DOC),
    "judge": Param("minilm-fever-nli", 'the NLI oracle f; "true" is the paper\'s TRUE (T5-11B, GPU)'),
    "max_new_tokens": count(160, "longest answer", cpu=("at most", 96), smoke=32),
}

PARAMETERS: dict[str, dict[str, Param]] = {
    "04": {**SHARED, **ANSWERING,
           "compare_key_facts": Param("supporting", "a second key-fact source Table 1 is also shown under (same "
                                      "answers); empty: none"),
           "n_rating": Param(50, "questions in the human rating sheet (paper: 50)", low=0),  # 0: no rating sheet
           "ratings": Param("", "CSV of filled ratings (question_id, model, rater, helpful, completeness); empty: none",
                            file=True)},
    "05": {**SHARED, "n_refs": Param("2,3,4,5,6,7,8,9,10", "reference counts, 2 gold + noise (paper: 2 to 10)",
                                     items="int", low=1, cpu=("among", (2, 5, 10)), smoke=[2, 5]),
           **ANSWERING},
    "06": {**SHARED, "n_refs": like(SHARED["n_refs"], doc="references in the partial and complete settings (paper: 5)"),
           **ANSWERING},
    "07": {**SHARED,
           "seed": like(SHARED["seed"], doc="question sample, reference order, complete/partial groups and the "
                        "bootstrap"),
           "n_refs": like(SHARED["n_refs"], doc="references in the reflection test (complete vs partial)"),
           "cap": count(10, "references after completion, and the baseline's BM25 top-k (paper: 10)",
                        smoke=("at most", 6)),
           "k_initial": count(5, "BM25 references the model reflects on before asking (ours; the paper does not say)",
                              smoke=("at most", 3)),
           "max_rounds": count(3, "cap on ask-and-retrieve rounds while the model still refuses (paper: until "
                               "satisfied, no cap given; ours: 3, credibility.COMPLETION_ROUNDS)"),
           "corpus": Param("", "passages BM25 searches: empty for the offline HotpotQA paragraphs; a DPR psgs_w100.tsv "
                           "or {id, contents} JSONL file; or a `make index` folder (Wikipedia scale)"),
           **ANSWERING},
}
