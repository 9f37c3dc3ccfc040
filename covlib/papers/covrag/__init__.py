"""CoV-RAG (Retrieving, Rethinking and Revising: The Chain-of-Verification Can Improve RAG).

The paper's method, its prompts (Table 6, quoted) and its metrics; shared RAG pieces come from
`covlib.core.references` (numbered references) and `covlib.retrieval` (retrievers). Every public
name is re-exported here (`from covlib.papers import covrag as C; C.sigma(...)`); each deviation
from the paper is labelled in the module that makes it.

| module | what it holds |
|---|---|
| `prompts` | Table 6's QA and verification prompts (verbatim), `SEP`, the score names |
| `paper` | the paper's numbers (`PAPER_*`), its datasets (`load_datasets`) |
| `repair` | tolerant JSON reading: objects found, a truncated one closed, loads with repairs |
| `verifier` | `Verification`, `parse_verification`, `parse_report` |
| `method` | σ (`Thresholds`, `sigma`) and Algorithm 1 (`cov_rag` -> `CovRagRun`, `Round`, `CovRagRecord`, the batches -> `AnswerBatch`, `VerifyBatch`) |
| `metrics` | accuracy, judgment and retrieval accuracy, averages, intervals' flags, table rows, `answerable` |
| `training` | §2.2's training data and stages: SFT pairs, gold or teacher labels, the leakage check, M1 then the verifiers |
| `claims` | the paper's claims (read by the ledger) and when a run can test them |
| `ranking` | LLM-as-judge ranking (Table 3, Table 16; `rank_answers` -> `Ranking`) |
| `trace` | per-example traces from what the methods return: `C.trace.write(tracer, result)` |
| `notebook` | what notebooks 08-11 declare to the one notebook door (recorded settings, derivations) and their `load` |
| `parameters` | notebooks 08-11's parameters, each declared once (default, doc, rule, caps per profile) |
| `workload` | notebooks 08-11's model calls for a run's plan, made by the methods above on a recorder (`covlib.runs.plan`) |
"""

from __future__ import annotations

from covlib.papers.covrag.prompts import (
    ANSWER_SCORES, JUDGMENTS, OUTPUT_CUE, QA_TASK, QA_TEMPLATE, REFERENCE_TEMPLATE, SCORES, SEP, VERIFICATION_TEMPLATE,
    closed_book_prompt, qa_prompt, verification_prompt,
)
from covlib.papers.covrag.paper import (
    PAPER_COUNTS, PAPER_DATASETS, PAPER_MODELS, PAPER_TABLE2, PAPER_TABLE3, PAPER_TABLE4, PAPER_TABLE5,
    RETRIEVAL_ACCURACY_OURS, RETRIEVAL_ACCURACY_PAPER, load_datasets,
)
from covlib.papers.covrag.repair import close_truncated, json_objects, lenient_loads
from covlib.papers.covrag.verifier import (
    NO_REVISION, TEMPLATE_EXAMPLE, Verification, parse_report, parse_verification,
)
from covlib.papers.covrag.method import (
    PAPER_THRESHOLDS, QA_STOP, VERIFY_STOP, AnswerBatch, CovRagRecord, CovRagRun, Round, Thresholds, VerifyBatch,
    answer_batch, closed_book_batch, cov_rag, sigma, sigma_conditions, verify_batch,
)
from covlib.papers.covrag.metrics import (
    accuracy, answerable, average_interval, average_over, is_correct, judgment_accuracy, question_flags,
    references_hold_answer, retrieval_accuracy, rounds_histogram, run_label, summarize, table_frame,
    weighted_average,
)
from covlib.papers.covrag.training import (
    M1, VARIANTS, WITH_COL, WITHOUT_COL, TrainingSet, TwoStages, check_no_leak, gold_answer, gold_verification,
    normalize_question, qa_pairs, train_two_stages, training_set, verification_json, well_formed_question,
)
from covlib.papers.covrag.claims import (
    TABLE3_COMPARISONS, finetune_comparisons, judged_by_both, no_revision, ranking_untestable, revision_comparison,
    table3_comparisons,
)
from covlib.papers.covrag.trace import sigma_counts
from covlib.papers.covrag.ranking import (
    CITATION_RANK_TEMPLATE, OTHERS_RANK_TEMPLATE, RANK_CRITERIA, Ranking, mean_ranks, parse_ranking, rank_answers,
    rank_values, ranking_prompt,
)
from covlib.papers.covrag import trace

__all__ = [
    # prompts
    "ANSWER_SCORES", "JUDGMENTS", "OUTPUT_CUE", "QA_TASK", "QA_TEMPLATE", "REFERENCE_TEMPLATE", "SCORES", "SEP",
    "VERIFICATION_TEMPLATE", "closed_book_prompt", "qa_prompt", "verification_prompt",
    # paper
    "PAPER_COUNTS", "PAPER_DATASETS", "PAPER_MODELS", "PAPER_TABLE2", "PAPER_TABLE3", "PAPER_TABLE4", "PAPER_TABLE5",
    "RETRIEVAL_ACCURACY_OURS", "RETRIEVAL_ACCURACY_PAPER", "load_datasets",
    # repair
    "close_truncated", "json_objects", "lenient_loads",
    # verifier
    "NO_REVISION", "TEMPLATE_EXAMPLE", "Verification", "parse_report", "parse_verification",
    # method
    "PAPER_THRESHOLDS", "QA_STOP", "VERIFY_STOP", "AnswerBatch", "CovRagRecord", "CovRagRun", "Round", "Thresholds",
    "VerifyBatch", "answer_batch", "closed_book_batch", "cov_rag", "sigma", "sigma_conditions", "verify_batch",
    # metrics
    "accuracy", "answerable", "average_interval", "average_over", "is_correct", "judgment_accuracy", "question_flags",
    "references_hold_answer", "retrieval_accuracy", "rounds_histogram", "run_label", "summarize", "table_frame",
    "weighted_average",
    # training
    "M1", "VARIANTS", "WITH_COL", "WITHOUT_COL", "TrainingSet", "TwoStages", "check_no_leak", "gold_answer",
    "gold_verification", "normalize_question", "qa_pairs", "train_two_stages", "training_set", "verification_json",
    "well_formed_question",
    # claims
    "TABLE3_COMPARISONS", "finetune_comparisons", "judged_by_both", "no_revision", "ranking_untestable",
    "revision_comparison", "table3_comparisons",
    # ranking
    "CITATION_RANK_TEMPLATE", "OTHERS_RANK_TEMPLATE", "RANK_CRITERIA", "Ranking", "mean_ranks", "parse_ranking",
    "rank_answers", "rank_values", "ranking_prompt",
    # trace
    "sigma_counts", "trace",
]
