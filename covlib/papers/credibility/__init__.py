"""How Credible Is an Answer From Retrieval-Augmented LLMs? (Zhou, Liu, Dou): benchmark, metrics, improvements.

The benchmark (§3) pairs each multi-hop HotpotQA question with *key facts*, the reasoning
steps an answer must contain. The metrics (§4) judge a long-form cited answer with an NLI
oracle f(premise, hypothesis) (1 when the premise entails the hypothesis): key-fact recall and
precision (correctness), citation precision / recall and self-consistency (groundedness).
The improvements (§5) are self-reflection (refuse when the references are insufficient) and
self-completion (ask the search engine for what is missing, then answer again).

Steps, each one batched call (`lm.generate` or `nli.probabilities`) over all questions:

1. key facts: the shipped ones (`DEFAULT_KEY_FACTS = "agents"`, who made them:
   `key_facts.AGENT_KEY_FACTS_PROVENANCE`), `supporting_key_facts`
   (gold supporting sentences, a labelled option that rewards copying) or `llm_key_facts`
   (the paper's two prompts); `export_review_sheet` / `read_review_sheet` are the human
   filtering step;
2. reference sets (`with_gold`, `partial`, `closed_book`, `bm25_references`), seeded per
   question, gold positions recorded;
3. answers: `answer_prompt` (our completion of the paper's elided "Please write a
   high-quality answer ...", see ANSWER_INSTRUCTION), `generate_answers`;
4. metrics: `score_answers` (three NLI calls: recall, precision, self-consistency) and
   `summarize`;
5. self-reflection (`reflection_sets`, `is_refusal`, `reflection_scores`) and
   self-completion (`self_complete`, rounds while the model refuses, capped);
6. intervals: `intervals` (every mean of `summarize` with its 95% bootstrap interval over
   questions), `paired` / `recall_drop` (differences on the same questions),
   `reflection_intervals`, `gold_recall`, `human_correlation_intervals`, and `interval_columns`
   for tables.

| module | what |
|---|---|
| `prompts` | The paper's prompts (§3, §5), verbatim where it gives them; the parts it elides are ours and say so. |
| `paper` | The paper's models and numbers (Tables 1-4, Table 2's Pearson) and its questions. |
| `key_facts` | Key facts (§3): the shipped ones, drafted and reviewed by AI coding agents (the default), gold supporting sentences, or the paper's two prompts; the review sheet. |
| `references` | Reference sets (§6): complete, partial and closed-book, seeded per question with gold positions recorded; BM25's top k. |
| `answers` | Answers: one batched generation per reference set and model, scored with the §4 metrics. |
| `metrics` | The §4 metrics of one cited answer: key-fact recall and precision, citation precision and recall, self-consistency. |
| `intervals` | Every number with its 95% bootstrap interval over questions, and paired differences on the same questions. |
| `improvements` | The §5 improvements: self-reflection (refuse when the references are insufficient) and self-completion. |
| `ratings` | Human ratings (§6.2, Table 2): the rating sheet, the per-model scores and their correlation with the metrics. |
| `trace` | Per-example traces, written from what the methods return (`trace.write(S.tracer, result)`): cited answers with their §4 metrics, self-reflection, self-completion, key facts. |
| `notebook` | What notebooks 04-07 declare to the one notebook door (recorded settings, derivations) and their `load`. |
| `parameters` | Notebooks 04-07's parameters, each declared once (default, doc, rule, caps per profile). |
| `workload` | Notebooks 04-07's model calls for a run's plan, made by the methods above on recorders (`covlib.runs.plan`). |

Prompts are the paper's words where it gives them; the parts it elides are ours and say so.
"""

from __future__ import annotations

from covlib.papers.credibility.prompts import (ANSWER_INSTRUCTION, CLOSED_BOOK_INSTRUCTION, COMPLETION_INSTRUCTION,
                                               KEY_FACTS_INSTRUCTION, QUERY_MARKER, REASONING_INSTRUCTION,
                                               REFLECTION_INSTRUCTION, REFUSAL, answer_prompt, completion_prompt,
                                               key_facts_prompt, reasoning_prompt)
from covlib.papers.credibility.paper import (PAPER_MODELS, PAPER_PEARSON, PAPER_RECALL_DROP_5_TO_10, PAPER_TABLE1,
                                             PAPER_TABLE2, PAPER_TABLE3, PAPER_TABLE4, load_questions)
from covlib.papers.credibility.key_facts import (AGENT_KEY_FACTS, AGENT_REVIEW_SHEET, DEFAULT_KEY_FACTS,
                                                 KEY_FACTS_VERSION, KeyFactExtraction, KeyFactList, KeyFacts,
                                                 REVIEW_COLUMNS, SOURCES,
                                                 build_key_facts, export_review_sheet, key_facts_path, llm_key_facts,
                                                 load_key_facts, parse_key_facts, read_review_sheet, save_key_facts,
                                                 supporting_key_facts)
from covlib.papers.credibility.references import (ReferenceSet, bm25_references, closed_book, hits_set, partial,
                                                  with_gold)
from covlib.papers.credibility.answers import (Answers, Reflection, Run, Scores, answer_runs, generate_answers,
                                               score_runs)
from covlib.papers.credibility.metrics import (citation_scores, f1, plain_answer, score_answers, summarize)
from covlib.papers.credibility.intervals import (ROW_KEYS, corrected_difference, gold_recall, human_correlation_intervals, interval_columns,
                                                 intervals, judge_corrected, paired, per_question, recall_drop, reflection_correct,
                                                 reflection_intervals)
from covlib.papers.credibility.improvements import (COMPLETION_ROUNDS, Completed, CompletionRound, SelfCompletion,
                                                    is_refusal, parse_queries, reflection_scores, reflection_sets,
                                                    self_complete)
from covlib.papers.credibility.ratings import (COMPLETENESS_LEVELS, RATING_COLUMNS, export_rating_sheet,
                                               human_correlation, human_scores, read_ratings)
from covlib.papers.credibility import trace

__all__ = ["AGENT_KEY_FACTS", "AGENT_REVIEW_SHEET", "ANSWER_INSTRUCTION", "Answers", "CLOSED_BOOK_INSTRUCTION",
           "COMPLETENESS_LEVELS", "COMPLETION_INSTRUCTION", "COMPLETION_ROUNDS", "Completed", "CompletionRound",
           "DEFAULT_KEY_FACTS",
           "KEY_FACTS_INSTRUCTION", "KEY_FACTS_VERSION", "KeyFactExtraction", "KeyFactList", "KeyFacts", "PAPER_MODELS", "PAPER_PEARSON",
           "PAPER_RECALL_DROP_5_TO_10", "PAPER_TABLE1", "PAPER_TABLE2", "PAPER_TABLE3", "PAPER_TABLE4",
           "QUERY_MARKER", "RATING_COLUMNS", "REASONING_INSTRUCTION", "REFLECTION_INSTRUCTION", "REFUSAL",
           "REVIEW_COLUMNS", "ROW_KEYS", "ReferenceSet", "Reflection", "Run", "SOURCES", "Scores", "SelfCompletion", "answer_prompt", "answer_runs",
           "bm25_references", "build_key_facts", "citation_scores", "closed_book", "completion_prompt",
           "export_rating_sheet", "export_review_sheet", "f1", "generate_answers", "gold_recall", "hits_set",
           "human_correlation", "human_correlation_intervals", "human_scores", "interval_columns", "intervals",
           "judge_corrected", "corrected_difference",
           "is_refusal", "key_facts_path", "key_facts_prompt", "llm_key_facts", "load_key_facts", "load_questions",
           "paired", "parse_key_facts", "parse_queries", "partial", "per_question", "plain_answer", "read_ratings",
           "read_review_sheet", "reasoning_prompt", "recall_drop", "reflection_correct", "reflection_intervals",
           "reflection_scores", "reflection_sets", "save_key_facts", "score_answers", "score_runs", "self_complete",
           "summarize", "supporting_key_facts", "trace", "with_gold"]
