# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 04 · How credible is the answer? Correctness and groundedness across models (credibility paper, Tables 1-2)
#
# How correct and how grounded is a model's cited answer to a multi-hop question? Each model answers with 5
# references including both gold ones, scored by key facts, citations and self-consistency through an NLI judge
# (the metrics, deviations, who made the shipped data, and how uncertain the numbers are: below the parameters).

# %%
import pandas as pd

from covlib.core import paths, references, stats
from covlib.nli import evaluation as nli_eval
from covlib.papers import credibility as C
from covlib.papers.credibility.intervals import tuning_claims
from covlib.papers.credibility.notebook import NOTEBOOKS
from covlib.papers.credibility import simulation
from covlib.papers.credibility.ratings import human_correlation_claims
from covlib.report import results, tables
from covlib.runs import session

# %% tags=["parameters"]
profile: str = "auto"  # smoke, cpu, full or auto (full on a GPU, cpu otherwise)
model: str = ""  # hub id or local dir; empty for the embedded SmolLM2-135M-Instruct
models: str = ""  # comma-separated hub ids / dirs to compare; empty: `model` (full profile: the paper's open models)
device: str = ""  # cpu or cuda; empty picks cuda when available
questions: str = ""  # HotpotQA distractor file or hub id; empty for the shared 100-question dev sample
n_questions: int = 500  # questions (paper: 500 sampled from HotpotQA dev)
seed: int = 0  # question sample, reference order, distractor choice and the bootstrap
n_refs: int = 5  # references per question, both gold included (paper: 5)
key_facts: str = "agents"  # agents: the shipped key facts for the 100 shared questions (default; who made them: quoted below); supporting: HotpotQA's gold supporting sentences (verbatim from the references); llm: the paper's two prompts with `model`; llm+reviewed: after the review sheet
judge: str = "minilm-fever-nli"  # the NLI oracle f; "true" is the paper's TRUE (T5-11B, GPU)
max_new_tokens: int = 160  # longest answer
compare_key_facts: str = "supporting"  # a second key-fact source Table 1 is also shown under (same answers); empty: none
n_rating: int = 50  # questions in the human rating sheet (paper: 50)
ratings: str = ""  # CSV of filled ratings (question_id, model, rater, helpful, completeness); empty: none

# %%
S = session.start(NOTEBOOKS["04"], globals())  # ratings: checked before any generation, not in the last cell
facts = S.facts  # the key facts, by the name exercise 4 reads them

# %% [markdown]
# ## What this notebook measures
#
# Zhou, Liu & Dou judge a long-form, cited answer to a multi-hop question in two ways (§4):
#
# - **correctness**, through *key facts* (the reasoning steps an answer needs): recall
#   R = (1/|K|) Σ_k f(answer, k) and precision P = (1/|S|) Σ_s [∃k f(s, k)];
# - **groundedness**: citation precision |Cm∩Cg|/|Cm| and recall |Cm∩Cg|/|Cg| against the gold
#   references, and self-consistency SC = (1/n) Σ_i f(concat(refs cited by s_i), s_i).
#
# f(premise, hypothesis) is an NLI oracle (the paper: TRUE, T5-11B). Each model answers with 5
# references including both gold ones (Table 1).
#
# **Deviations** (offline defaults; each is a parameter): the 100 HotpotQA dev questions in
# `../shared/data` instead of a 500-question sample; the shipped key facts for those 100
# questions, written following §3's guideline (atomic, one per reasoning step; `covlib/resources`,
# made as quoted below) instead of GPT-4's human-filtered ones (`key_facts="llm"` runs the paper's two
# prompts with any model, and the review sheet below is the human filtering step). Table 1 is also
# shown under HotpotQA's gold *supporting sentences* (`compare_key_facts`): they are verbatim
# sentences of the gold references in the prompt, so copying the references scores best on them,
# a strategy the paper scores low; the MiniLM judge trained on FEVER
# by `make judge` instead of TRUE (`judge="true"` on a GPU); SmolLM2-135M-Instruct instead of the
# paper's 7-13B models (`models=...` or the full profile on a GPU). The answer prompt's words
# after "Please write a high-quality answer" are elided in the paper: ours are in
# `credibility.ANSWER_INSTRUCTION`.
#
# Who made the shipped data, as the files' headers say (`C.key_facts.AGENT_KEY_FACTS_PROVENANCE`,
# `covlib.nli.labelled.KEYFACT_PAIRS_PROVENANCE`):
#
# > **Key facts** (`covlib/resources/key_facts_agents-v1.jsonl`): Drafted by an AI coding agent from the HotpotQA gold paragraphs following §3 (atomic, one per reasoning step) and reviewed twice by AI coding agents, the second review by a separate agent (review sheet: draft, review1, review2); then 50 facts were rewritten by an AI coding assistant to paraphrase their reasoning step, keeping their meaning, answer and id (review sheet: v1_key_fact, rewrite), and checked with covlib.papers.credibility.key_facts.gold_overlap: no fact shares a run of 3 or more words with its gold supporting sentences beyond names, numbers, function words and the words of its question and answer. No person wrote, reviewed or rewrote them.
#
# > **Key-fact pairs** (`covlib/resources/keyfact_nli_pairs-v1.jsonl`, the judge's agreement printed beside every table): Premises: the embedded model's answers and answer sentences with complete, partial and no references, written unlabelled by scripts/keyfact_pairs.py. Hypotheses: key facts of key_facts_agents-v1.jsonl in their wording before an AI coding assistant rewrote 50 of them (the review sheet's v1_key_fact; 67 of the 359 pairs hold a fact since reworded), kept frozen as a development set. Labelled twice by AI coding agents without any judge's output (both labels in `labels`: they agree on 357 pairs, Cohen's kappa 0.96; the 2 splits adjudicated, the reason in `why`); the project's history names no human labeller.
#
# **Judge-corrected P and R.** Key-fact recall and precision count the judge's "entailed" decisions, so its errors
# move them: false "entailed" inflate them, missed ones deflate them. The columns marked *judge-corrected* measure
# the judge's sensitivity and specificity per stratum (how much of the key fact's wording the premise holds, and
# number conflicts) on the frozen key-fact test set (notebook 00b, `covlib/resources/keyfact_nli_test-v1.jsonl`;
# whole answers for recall, single sentences for precision), estimate from them and the table's own share of
# "entailed" decisions the share truly entailed in each stratum (Rogan-Gladen, kept in [0, 1]), and replace each
# decision by its probability of being right at that share: what carries from the test set to a table is how the
# judge errs, not how many pairs are entailed, which differs between reference conditions. A stratum with fewer
# than `nli.MIN_CELL` test pairs of a class takes that rate pooled over all strata (named in the record). The
# interval draws the rates from their posteriors and resamples questions (`C.judge_corrected`). It assumes the
# judge's sensitivity and specificity within a stratum are the same on these answers as on the test pairs (the
# embedded model's answers with the shipped key facts); for precision, that a sentence's key facts are judged
# independently. They show the range the judge's error allows, not a better judge's number.
# On the simulated model (`sim:`) the test pairs' rates do not carry (its answers state each key fact in the
# fact's own words), so the rates come from its own judged pairs, labelled by what it stated
# (`simulation.correction_rates`).
# It showed the judge erring differently by reference condition within a stratum (answers that copy references
# look entailed more often), which the correction does not see: docs/simulation.md gives the sizes.
#
# Every number of ours carries its 95% interval (the `95% CI` column beside it: Wilson for a
# share of questions, a seeded percentile bootstrap over questions for per-question means) and n;
# a difference between two key-fact sources on the same answers is paired (BCa bootstrap and a
# sign-flip permutation p; the exact McNemar test for 0/1 outcomes).
#
# Outputs: `tables/tab-04-credibility-models.*` (key facts `key_facts`),
# `tables/tab-04-credibility-models-<compare_key_facts>.*`, `tables/tab-04-human-correlation.*` (with
# ratings), `build/ratings/04-rating-sheet.csv`, `results/04_credibility_models.json`.

# %% [markdown]
# ## 1. Questions, key facts and reference sets

# %%
ref_sets = [C.with_gold(ex, S.n_refs, S.seed) for ex in S.examples]
print(f"{len(S.examples)} questions; key facts: {facts[0].author} ({sum(len(f.key_facts) for f in facts)} in all)")
if S.other_facts:
    print(f"compared with: {S.other_facts[0].author} ({sum(len(f.key_facts) for f in S.other_facts)} in all)")
    print("  e.g.", S.other_facts[0].key_facts)
print("Q:", S.examples[0].question, "| gold:", S.examples[0].answer)
print(references.format_references(ref_sets[0].paragraphs)[:600], "...")
print("gold positions:", ref_sets[0].gold, "| key facts:", facts[0].key_facts)

# %% [markdown]
# The paper's key facts passed a human filter. For LLM-written facts, export the review sheet,
# mark `keep` n or write a corrected fact in `edit`, then read it back
# (`C.read_review_sheet(sheet, facts)` and `C.save_key_facts(..., C.key_facts_path("llm+reviewed"))`)
# and re-run with `key_facts="llm+reviewed"`.

# %%
sheet = C.export_review_sheet(facts, paths.build_dir() / "key_facts" / f"review-{S.key_facts}.csv")
print("review sheet:", sheet)

# %% [markdown]
# ## 2. Answers with citations, one batched call per model

# %%
runs = C.answer_runs(S.generators, S.examples, {"complete": ref_sets}, max_new_tokens=S.max_new_tokens)
names = [g.name for g in S.generators]
answers = {n: runs[(n, "complete")][0] for n in names}
for name, ans in answers.items():
    print(f"--- {name}\n{ans[0]}")

# %% [markdown]
# ## 3. Metrics: three NLI calls for all models (recall, precision, self-consistency)

# %%
rows = C.score_runs(runs, S.examples, facts, S.judge)
C.trace.write(S.tracer, rows)  # one trace per (model, reference set): every answer with its metrics
per_model = {n: rows[(n, "complete")] for n in names}
summary = {n: C.summarize(r) for n, r in per_model.items()}
judge_name = S.judge.name
print(S.provenance["judge_agreement"])  # the judge's decision against the key-fact pairs' labels (00b; labelled by AI coding agents)
rates = simulation.correction_rates(rows)  # per run: the judge's error on 00b's test set (a simulation's: on its own answers)
est = {n: C.intervals(r, seed=S.seed, rates=rates[(n, "complete")]) for n, r in per_model.items()}  # each mean with its 95% interval

# One answer sentence by sentence: what f said about it.
first = references.cited_sentences(answers[names[0]][0])
for s in first[:5]:
    print(f"{s.citations} {s.text}")
print({k: round(v, 2) if isinstance(v, float) else v for k, v in per_model[names[0]][0].items()})

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex04-citations-prompt", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ### Exercise 5 · Citation precision and recall
# §4.2 scores an answer's citations against the gold references: with Cm the set of reference ids the
# answer cites (ids that do not exist, like [7] of 5, included: they lower precision) and Cg the
# gold ids, precision is |Cm ∩ Cg| / |Cm| and recall |Cm ∩ Cg| / |Cg|. Write
# `citation_pr(cited, gold)` returning `(precision, recall)`: precision 0.0 for an answer that cites
# nothing, recall NaN for a question without gold references. A repeated citation counts once.

# %% nbgrader={"grade": false, "grade_id": "ex04-citations-answer", "locked": false, "schema_version": 3, "solution": true, "task": false}
def citation_pr(cited: list[int], gold: list[int]) -> tuple[float, float]:
    """(citation precision, citation recall) of one answer."""
    ### BEGIN SOLUTION
    cm, cg = set(cited), set(gold)
    hit = len(cm & cg)
    return (hit / len(cm) if cm else 0.0), (hit / len(cg) if cg else float("nan"))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex04-citations-checks", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
import math

from covlib.runs import exercises

exercises.check_own_work(citation_pr, "citation_scores", "score_answers", "score_details", "score_runs")  # your own code, not covlib's
got = exercises.record(
    "ex04-citations",
    half=citation_pr([1, 3], [1, 2]),
    nothing_cited=citation_pr([], [1, 2]),
    repeated=citation_pr([1, 1, 7], [1]),
    uneven=citation_pr([1, 3, 4], [1, 2]),
    no_gold=citation_pr([2], []),
)
### BEGIN HIDDEN TESTS
citation_cases = [(name, i, references.cited_ids(references.cited_sentences(answers[name][i])), ref_sets[i].gold)
                  for name, rows_ in per_model.items() for i in range(len(rows_))]
got = exercises.record("ex04-citations", notebook=[citation_pr(cited, gold) for _, _, cited, gold in citation_cases])
ref = exercises.reference("ex04-citations", labels=[f"{name}, answer {i}" for name, i, _, _ in citation_cases],
                          notebook=[[per_model[name][i]["cit_precision"], per_model[name][i]["cit_recall"]]
                                    for name, i, _, _ in citation_cases])
### END HIDDEN TESTS
# -- checks: on the recorded values (got: your answers; ref: covlib's), here and again by the grader
assert got["half"] == [0.5, 0.5], f"cites [1] and [3], gold [1] and [2]: got {got['half']}"
assert got["nothing_cited"] == [0.0, 0.0], f"nothing cited: precision 0, recall 0; got {got['nothing_cited']}"
assert got["repeated"] == [0.5, 1.0], \
    f"[1] twice counts once; [7] does not exist and still counts: expected (0.5, 1.0), got {got['repeated']}"
assert exercises.close(got["uneven"], [1 / 3, 1 / 2]), \
    f"cites [1], [3] and [4], gold [1] and [2]: precision 1/3 (of the cited), recall 1/2 (of the gold); got {got['uneven']}"
p, r = got["no_gold"]
assert p == 0.0 and math.isnan(r), f"no gold references: recall is NaN (precision 0.0); got {(p, r)}"
### BEGIN HIDDEN TESTS
assert len(got["notebook"]) == len(ref["notebook"])
for label, (p, r), (want_p, want_r) in zip(ref["labels"], got["notebook"], ref["notebook"]):
    assert p == want_p, f"{label}: precision {p} vs {want_p}"
    assert r == want_r or (math.isnan(r) and math.isnan(want_r)), f"{label}: recall"
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex04-recall-prompt", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ### Exercise 6 · Key-fact recall
# Knowledge recall asks how many of the question's key facts the answer states (§4.1):
# R = (1/|K|) Σ_k f(answer, k), where f(premise, hypothesis) is 1 when the NLI judge decides
# entailment by its own rule (the most probable label for a three-way judge; P(entailment) > 0.5
# for a two-label judge such as the paper's TRUE). Write `key_fact_recall(answer, key_facts, judge)`:
#
# * the premise is the answer without its citation marks, `C.plain_answer(answer)`;
# * one batched call judges every (answer, key fact) pair: `nli.probabilities(premises, hypotheses,
#   judge, progress=False)` gives rows of P(entailment, neutral, contradiction), and
#   `nli.entailed(probs, judge)` turns them into the judge's 0/1 decisions;
# * NaN when there are no key facts; 0.0 when the answer has no text.
#
# `judge` is a judge's name or a judge object (the checks also use a toy one): pass it on as it is.

# %% nbgrader={"grade": false, "grade_id": "ex04-recall-answer", "locked": false, "schema_version": 3, "solution": true, "task": false}
from covlib import nli


def key_fact_recall(answer: str, key_facts: list[str], judge: str) -> float:
    """Share of the key facts that the answer entails."""
    ### BEGIN SOLUTION
    if not key_facts:
        return float("nan")
    premise = C.plain_answer(answer)
    if not premise.strip():
        return 0.0
    probs = nli.probabilities([premise] * len(key_facts), list(key_facts), judge, progress=False)
    return float(nli.entailed(probs, judge).mean())
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex04-recall-checks", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
import numpy as np

from covlib.runs import exercises

exercises.check_own_work(key_fact_recall, "score_answers", "score_details", "score_runs")  # your own code, not covlib's


class ToyJudge:
    """A toy NLI judge for the checks. P(entailment) is 0.9 when the hypothesis appears word for word in the premise,
    0.7 when it does not but its first word does, 0.1 otherwise; like the trained judge it has a calibrated threshold,
    0.8: it decides "entailed" only above it (so 0.7 is not entailed, though it is the most probable label)."""

    name = "toy-verbatim (exercise checks)"
    config = {"version": 1}
    threshold = 0.8

    def probabilities(self, premises, hypotheses):
        rows = [[0.9, 0.1, 0.0] if h in p else [0.7, 0.2, 0.1] if h.split()[0] in p.split() else [0.1, 0.6, 0.3]
                for p, h in zip(premises, hypotheses)]
        return np.array(rows, dtype=float).reshape(len(rows), 3)


toy_answer = "Paris is the capital of France [1]. The Seine flows through it [2]."
toy_facts = ["Paris is the capital of France.", "The Seine flows through it.", "Paris has ten bridges.",
             "Lyon is in France."]
got = exercises.record(
    "ex04-recall",
    no_facts=key_fact_recall("Paris [1].", [], S.run.judge),
    empty_answer=key_fact_recall("", ["Paris is in France."], S.run.judge),
    only_citations=key_fact_recall("[1][2]", ["Paris is in France."], ToyJudge()),
    toy=key_fact_recall(toy_answer, toy_facts, ToyJudge()),
    first=key_fact_recall(answers[names[0]][0], facts[0].key_facts, S.run.judge),
)
ref = exercises.reference("ex04-recall", first=per_model[names[0]][0]["recall"])
### BEGIN HIDDEN TESTS
recall_cases = [(name, i) for name, rows_ in per_model.items() for i in range(len(rows_))]
got = exercises.record(
    "ex04-recall", notebook=[key_fact_recall(answers[name][i], facts[i].key_facts, S.run.judge) for name, i in recall_cases],
    citations=[key_fact_recall("Paris is the capital of France [1][2].", ["Paris is the capital of France."], S.run.judge),
               key_fact_recall("Paris is the capital of France.", ["Paris is the capital of France."], S.run.judge)])
ref = exercises.reference("ex04-recall", labels=[f"{name}, answer {i}" for name, i in recall_cases],
                          notebook=[per_model[name][i]["recall"] for name, i in recall_cases])
### END HIDDEN TESTS
# -- checks: on the recorded values (got: your answers; ref: covlib's), here and again by the grader
assert math.isnan(got["no_facts"]), f"no key facts: NaN, got {got['no_facts']}"
assert got["empty_answer"] == 0.0, "an empty answer recalls nothing"
assert got["only_citations"] == 0.0, f"an answer of citation marks only has no text: 0.0, got {got['only_citations']}"
assert got["toy"] == 0.5, \
    f"toy judge: the answer without its citation marks states the first two key facts word for word (0.9, entailed); " \
    f"'Paris has ten bridges.' gets 0.7, which the judge's own rule (nli.entailed: its threshold 0.8) does not call " \
    f"entailed; 'Lyon is in France.' 0.1: expected 2 of 4 = 0.5, got {got['toy']}"
assert got["first"] == ref["first"] or (math.isnan(got["first"]) and math.isnan(ref["first"])), \
    f"the first answer: {got['first']} vs the notebook's {ref['first']}"
### BEGIN HIDDEN TESTS
assert len(got["notebook"]) == len(ref["notebook"])
for label, mine, want in zip(ref["labels"], got["notebook"], ref["notebook"]):
    assert mine == want or (math.isnan(mine) and math.isnan(want)), label
assert got["citations"][0] == got["citations"][1], "citations are not text"
### END HIDDEN TESTS

# %% [markdown]
# ## 4. Table 1, ours (with 95% intervals) beside the paper's
# Every number of ours has its 95% interval (Wilson or bootstrap, as above) in the `95% CI` column next
# to it; the paper's rows (GPT-4 key facts filtered by people, TRUE as f, 500 questions) have none.

# %%
LABELS = {"P": "P", "R": "R", "P_corrected": "P (judge-corrected)", "R_corrected": "R (judge-corrected)", "F1_mean": "F1 (mean of F1)", "F1_of_means": "F1 (of means)",
          "SC_cited": "SC (cited sents)", "SC_all": "SC (all sents)", "CitP": "CitP", "CitR": "CitR",
          "EM_recall": "EM-recall"}
PAPER_FACTS = "GPT-4, filtered by people (paper)"


def table1(kf_name: str, estimates: dict, extra: dict | None = None) -> pd.DataFrame:
    """Table 1 under one key-fact source (its name; who made them goes in the caption): our models with intervals
    (and `extra` {model: {column: value}}), then the paper's rows (no interval: the CI cells stay empty)."""
    ours = [{"source": "ours", "model": n, "key facts": f"{kf_name} (the caption says who made them)",
             **C.interval_columns(e, {k: v for k, v in LABELS.items() if k in e}),
             **(extra or {}).get(n, {}), "n": len(S.examples)} for n, e in estimates.items()]
    paper = [{"source": "paper", "model": m, "key facts": PAPER_FACTS, "P": v[0], "R": v[1], "F1 (of means)": v[2],
              "SC (cited sents)": v[3], "CitP": v[4], "CitR": v[5], "n": 500} for m, v in C.PAPER_TABLE1.items()]
    out = pd.DataFrame(ours + paper, columns=list(pd.DataFrame(ours).columns))
    ci = [c for c in out.columns if c.endswith("95% CI")]
    out[ci] = out[ci].fillna("")
    return out


table = table1(S.key_facts, est)
results.save_table(table, "tab-04-credibility-models", run=S, key_facts=facts[0].author,
                   key_fact_source=S.key_facts, n=len(S.examples), floatfmt=".2f")

# %% [markdown]
# The paper's F1 column matches neither the mean of per-question F1 nor the F1 of mean P and R
# exactly (e.g. ChatGPT: 2·85.40·56.55/(85.40+56.55) = 68.04 against 68.22), so both are shown;
# its SC divides by "the total number of such statements", which we read both ways: over cited
# sentences and over all sentences (an uncited sentence scoring 0).
#
# ### The same answers under a second key-fact source
# The answers and the judge stay; only the key facts change (`compare_key_facts`). The last
# columns are the paired difference (this source − the first) over the same questions: a
# positive R or P difference under the supporting sentences means that copying the references
# is rewarded there.

# %%
est_other, other_table, other_summary = {}, None, {}
if S.other_facts:
    rows_other = C.score_runs(runs, S.examples, S.other_facts, S.judge)
    C.trace.write(S.tracer, rows_other)
    other_rows = {n: rows_other[(n, "complete")] for n in names}
    other_summary = {n: C.summarize(r) for n, r in other_rows.items()}
    est_other = {n: C.intervals(r, seed=S.seed) for n, r in other_rows.items()}  # no correction: the test set's key facts are the shipped (`agents`) ones
    differences = {n: {f"{m} ({S.compare} − {S.key_facts}, paired)": C.paired(other_rows[n], per_model[n], m, seed=S.seed)
                       for m in ("P", "R")} for n in names}
    other_table = table1(S.compare, est_other,
                         {n: C.interval_columns(d, {k: k for k in d}) for n, d in differences.items()})
    for n in names:
        est_other[n].update({f"{m}_minus_{S.key_facts}": differences[n][f"{m} ({S.compare} − {S.key_facts}, paired)"]
                             for m in ("P", "R")})
    slug = "".join(ch if ch.isalnum() else "-" for ch in S.compare)
    display(results.save_table(other_table, f"tab-04-credibility-models-{slug}", run=S,  # noqa: F821
                               key_facts=S.other_facts[0].author,
                               key_fact_source=S.compare, n=len(S.examples), floatfmt=".2f"))
else:
    print("no second key-fact source (compare_key_facts is empty or equals key_facts)")

# %% [markdown]
# ## 5. Agreement with people (Table 2)
# The paper's 10 experts rated 50 answers per model: each sentence helpful or not (human
# precision) and the answer's completeness in {0, .25, .5, .75, 1} (human recall), then
# correlated them with P, R and EM-recall across 5 models (Pearson 0.87, 0.88, 0.54). Fill the
# sheet below (one row per rater, `helpful` as space-separated 0/1 flags in sentence order) and
# pass it as `ratings`; the correlation needs at least 3 models and its Fisher-z interval at least 4
# (with 5 of them, a wide one). On the simulated model (`sim:...`, 4 or more models) with no `ratings`, the
# simulation's raters fill the sheet (`build/ratings/04-ratings-SIMULATED.csv`): planted ratings with Table 2's
# Pearson, which check the chain from sheet to ledger and say nothing about people.

# %%
to_rate = [{"question_id": ex.id, "model": n, "question": ex.question, "answer": answers[n][i]}
           for n in names for i, ex in enumerate(S.examples[:S.n_rating])]
rating_sheet = C.export_rating_sheet(to_rate, paths.build_dir() / "ratings" / "04-rating-sheet.csv")
print("rating sheet:", rating_sheet, f"({len(to_rate)} answers)")
rating_file = S.ratings  # people's ratings, else (simulated models only) planted ones
if not rating_file:  # simulated models only (4 or more): the simulation's planted ratings, not people's (docs/simulation.md)
    planted_sheet = simulation.planted_ratings(S, to_rate, paths.build_dir() / "ratings" / "04-ratings-SIMULATED.csv")
    rating_file = str(planted_sheet or "")
    if planted_sheet:
        print("no people rated these answers: ratings planted by the simulated model's raters,", planted_sheet)
correlation, corr_est, human_note = None, None, "no human ratings given (the `ratings` parameter is empty)"
if rating_file:
    human = C.human_scores(C.read_ratings(rating_file))
    auto = {n: summary[n] for n in names}
    try:
        correlation = C.human_correlation(auto, human)
        corr_est = C.human_correlation_intervals(auto, human, seed=S.seed)
    except ValueError:
        human_note = f"fewer than 3 rated models ({sorted(set(auto) & set(human))})"
    if corr_est:
        corr = pd.DataFrame([{"metric": k, "pearson": corr_est[k]["value"],
                              "pearson 95% CI": stats.format_interval(corr_est[k], 2),
                              "paper pearson": C.PAPER_PEARSON[k], "models": corr_est[k]["n"]}
                             for k in ("P", "R", "EM_recall")])
        display(results.save_table(corr, "tab-04-human-correlation", run=S,  # noqa: F821
                                   ratings=rating_file, key_facts=facts[0].author,
                                   floatfmt=".2f"))
    else:
        print(human_note)
if corr_est is None:
    print("No correlation computed; the paper's Table 2:")
    display(tables.present(pd.DataFrame(C.PAPER_TABLE2, index=["P", "R", "EM-recall", "HPrec", "HRec"]).T  # noqa: F821
                           .rename_axis("model").reset_index(), floatfmt=".2f", caption="the paper's Table 2"))
    print("Pearson across models (paper):", C.PAPER_PEARSON)

# %% [markdown]
# The claims, for the ledger (notebook 12):
#
# - instruction-tuned models beat foundation models (Table 1): per question, key-fact F1 averaged
#   over the instruction-tuned models minus over the foundation ones, paired (then R, P, SC and
#   citation P / R as secondary rows). Each model's kind is declared by its card
#   (`credibility.claims.MODEL_CARDS`); without a model of each kind it cannot be tested here;
# - key-fact recall tracks people's recall ratings more closely than EM-recall does (Table 2):
#   r(R, human recall) − r(EM-recall, human recall) with Zou's interval, each correlation recorded
#   with its Fisher-z interval and the number of models (then precision's row). Without ratings of
#   at least 4 models it cannot be tested here.

# %%
scope = f"hotpotqa, {S.n_refs} references with both gold, key facts: {facts[0].author}"
available = len(C.load_questions(S.questions, 10 ** 9, S.seed))  # questions the source holds: what `full` can run
judge_line = nli_eval.ledger_note(S.judge, S.seed)  # the judge's test-set rates and its agreement with people
claim_records = (tuning_claims(S.generators, per_model, scope, seed=S.seed, available=available, note=judge_line)
                 + human_correlation_claims(summary, human if rating_file else None, scope, note=judge_line))
claim_records

# %%
headline = {
    "models": names,
    "judge": judge_name,
    "judge_agreement": S.provenance["judge_agreement"],
    "key_facts": facts[0].author,
    "key_fact_source": key_facts,
    "n_questions": len(S.examples),
    "n_refs": S.n_refs,
    "summary": summary,
    "intervals": est,  # {model: {metric: {value, low, high, n}}}, % with 95% intervals (Wilson for 0/1, bootstrap over questions otherwise)
    "compare": {"key_fact_source": S.compare, "key_facts": S.other_facts[0].author if S.other_facts else None,
                "summary": other_summary, "intervals": est_other},
    "human_correlation": correlation,
    "human_correlation_intervals": corr_est,
    "claims": claim_records,
    "paper": {"table1": C.PAPER_TABLE1, "pearson": C.PAPER_PEARSON},
}
results.record_metrics("04_credibility_models", headline, run=S)
{n: {k: stats.format_interval(e[k]) for k in ("P", "R", "F1_mean", "SC_cited", "CitP", "EM_recall")}
 for n, e in est.items()}
