"""Verify-and-Edit (Zhao et al., ACL 2023): a chain-of-thought framework that edits its low-consistency answers.

The paper's method (Algorithm 1), its prompting baselines and prompts (Appendix C, verbatim from the official
code), its knowledge sources and its reported numbers. Every public name is re-exported here
(`from covlib.papers import verify_edit; verify_edit.verify_and_edit(...)`); each deviation from the paper is
labelled in the module that makes it (and listed in docs/deviations.md).

| module | what it holds |
|---|---|
| `answers` | reading an answer after "The answer is", scoring it against the gold aliases (`rescore`: first alias only) |
| `cot` | Standard, CoT and CoT-SC prompting (Appendix C.x.1-2), self-consistency on [0, n] (`PromptResult`, `PromptRun`) |
| `prompts` | the verifying-question and verifying-answer prompts (Appendix C.x.3-4), rationale splitting and joining |
| `knowledge` | where verifying questions find evidence: the dataset's paragraphs, BM25 / TF-IDF / dense, web search |
| `method` | Algorithm 1 (`compute_edits`, `verify_and_edit`, `Edit`, `EditSteps`, `VERecord`) and the threshold sweep |
| `paper` | the paper's numbers (Tables 1-3, Fig. 3's peak), its names for our knowledge sources, our rows' figure names |
| `claims` | the paper's claims (read by the ledger) and the comparisons that test them (`auc_difference`, ...) |
| `trace` | per-example traces written from what the methods return (`trace.write(tracer, result)`) |
| `notebook` | what notebooks 01-03 declare to the one notebook door: recorded settings, derivations (plain data) |
| `parameters` | notebooks 01-03's parameters, each declared once (default, doc, rule, caps per profile) |
| `workload` | notebooks 01-03's model calls for a run's plan, made by the methods above on a recorder (`covlib.runs.plan`) |
"""

from __future__ import annotations

from covlib.papers.verify_edit import trace
from covlib.papers.verify_edit.answers import (
    ALIAS_MODES, ANSWER_MARKER, DATASETS, answer_key, answer_score, check_dataset, clean_answer, gold_answers,
    parse_answer, rescore,
)
from covlib.papers.verify_edit.cot import (
    CONSISTENCY_KINDS, NUM_SHOTS, PromptResult, PromptRun, Shot, consistency_of, cot_prompt, fewshot_examples,
    run_cot, run_cot_sc, run_standard, self_consistency, standard_prompt, summarize,
)
from covlib.papers.verify_edit.prompts import (
    REANSWER_STOP, VA_STOP, VQ_STOP, join_rationale, split_rationale, verifying_answer_header,
    verifying_answer_prompt, verifying_question_prompt,
)
from covlib.papers.verify_edit.knowledge import (
    KNOWLEDGE_KINDS, NEAR_ORACLE, RETRIEVER_KINDS, DatasetKnowledge, Knowledge, RetrieverKnowledge, WebKnowledge,
    make_knowledge,
)
from covlib.papers.verify_edit.method import (
    Edit, Edits, EditSteps, VERecord, VERecords, apply_threshold, compute_edits, correctness_by_threshold,
    default_threshold, sweep_thresholds, verify_and_edit,
)
from covlib.papers.verify_edit.paper import (
    PAPER_FIG3_PEAK_THRESHOLD, PAPER_KNOWLEDGE, PAPER_MODEL, PAPER_TABLES, TABLE_OF, paper_rows, row_label,
)
from covlib.papers.verify_edit.claims import auc_difference, cross_table_comparisons

__all__ = [
    # answers
    "ALIAS_MODES", "ANSWER_MARKER", "DATASETS", "answer_key", "answer_score", "check_dataset", "clean_answer",
    "gold_answers", "parse_answer", "rescore",
    # cot
    "CONSISTENCY_KINDS", "NUM_SHOTS", "PromptResult", "PromptRun", "Shot", "consistency_of", "cot_prompt",
    "fewshot_examples", "run_cot", "run_cot_sc", "run_standard", "self_consistency", "standard_prompt", "summarize",
    # prompts
    "REANSWER_STOP", "VA_STOP", "VQ_STOP", "join_rationale", "split_rationale", "verifying_answer_header",
    "verifying_answer_prompt", "verifying_question_prompt",
    # knowledge
    "KNOWLEDGE_KINDS", "NEAR_ORACLE", "RETRIEVER_KINDS", "DatasetKnowledge", "Knowledge", "RetrieverKnowledge",
    "WebKnowledge", "make_knowledge",
    # method
    "Edit", "Edits", "EditSteps", "VERecord", "VERecords", "apply_threshold", "compute_edits",
    "correctness_by_threshold", "default_threshold", "sweep_thresholds", "verify_and_edit",
    # paper
    "PAPER_FIG3_PEAK_THRESHOLD", "PAPER_KNOWLEDGE", "PAPER_MODEL", "PAPER_TABLES", "TABLE_OF", "paper_rows",
    "row_label",
    # claims
    "auc_difference", "cross_table_comparisons",
    # trace
    "trace",
]
