# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 04 · How credible is the answer? Correctness and groundedness across models (credibility paper, Tables 1-2)
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
# `../shared/data` instead of a 500-question sample; the gold *supporting sentences* as key facts
# instead of GPT-4's human-filtered ones (`key_facts="llm"` runs the paper's two prompts with any
# model, and the review sheet below is the human filtering step); the MiniLM judge trained on FEVER
# by `make judge` instead of TRUE (`judge="true"` on a GPU); SmolLM2-135M-Instruct instead of the
# paper's 7-13B models (`models=...` or the full profile on a GPU). The answer prompt's words
# after "Please write a high-quality answer" are elided in the paper: ours are in
# `credibility.ANSWER_INSTRUCTION`.
#
# Outputs: `tables/tab-04-credibility-models.*`, `tables/tab-04-human-correlation.*` (with
# ratings), `build/ratings/04-rating-sheet.csv`, `results/04_credibility_models.json`.

# %%
import pandas as pd

from covlib import credibility as C
from covlib import lm, paths, profiles, references, results

# %% tags=["parameters"]
profile: str = "auto"  # smoke, cpu, full or auto (full on a GPU, cpu otherwise)
model: str = ""  # hub id or local dir; empty for the embedded SmolLM2-135M-Instruct
models: str = ""  # comma-separated hub ids / dirs to compare; empty: `model` (full profile: the paper's open models)
device: str = ""  # cpu or cuda; empty picks cuda when available
questions: str = ""  # HotpotQA distractor file or hub id; empty for the shared 100-question dev sample
n_questions: int = 500  # questions (paper: 500 sampled from HotpotQA dev)
seed: int = 0  # question sample, reference order and distractor choice
n_refs: int = 5  # references per question, both gold included (paper: 5)
key_facts: str = "supporting"  # supporting (gold sentences), llm (the paper's prompts) or llm+reviewed
judge: str = "minilm-fever-nli"  # the NLI oracle f; "true" is the paper's TRUE (T5-11B, GPU)
max_new_tokens: int = 160  # longest answer
n_rating: int = 50  # questions in the human rating sheet (paper: 50)
ratings: str = ""  # CSV of filled ratings (question_id, model, rater, helpful, completeness); empty: none

# %%
profiles.check_parameters(n_questions=n_questions, seed=seed, n_refs=n_refs, max_new_tokens=max_new_tokens,
                          n_rating=n_rating)
profile = profiles.resolve(profile, device or None)
n_questions = profiles.pick(profile, full=n_questions, cpu=min(n_questions, 20), smoke=8)
max_new_tokens = profiles.pick(profile, full=max_new_tokens, cpu=min(max_new_tokens, 96), smoke=32)
model_ids = C.model_list(model, models, profile)
params = dict(profile=profile, models=model_ids, questions=questions or "shared sample", n_questions=n_questions,
              seed=seed, n_refs=n_refs, key_facts=key_facts, judge=judge, max_new_tokens=max_new_tokens)
print(profiles.describe(profile, n_questions=n_questions, max_new_tokens=max_new_tokens, models=model_ids))

# %% [markdown]
# ## 1. Questions, key facts and reference sets

# %%
examples = C.load_questions(questions, n_questions, seed)
generators = [lm.load_lm(m or None, device=device or None) for m in model_ids]
facts = C.build_key_facts(key_facts, examples, generators[0])
ref_sets = [C.with_gold(ex, n_refs, seed) for ex in examples]
print(f"{len(examples)} questions; key facts: {facts[0].author} ({sum(len(f.key_facts) for f in facts)} in all)")
print("Q:", examples[0].question, "| gold:", examples[0].answer)
print(references.format_references(ref_sets[0].paragraphs)[:600], "...")
print("gold positions:", ref_sets[0].gold, "| key facts:", facts[0].key_facts)

# %% [markdown]
# The paper's key facts passed a human filter. For LLM-written facts, export the review sheet,
# mark `keep` n or write a corrected fact in `edit`, then read it back
# (`C.read_review_sheet(sheet, facts)` and `C.save_key_facts(..., C.key_facts_path("llm+reviewed"))`)
# and re-run with `key_facts="llm+reviewed"`.

# %%
sheet = C.export_review_sheet(facts, paths.build_dir() / "key_facts" / f"review-{key_facts}.csv")
print("review sheet:", sheet)

# %% [markdown]
# ## 2. Answers with citations, one batched call per model

# %%
runs = C.answer_runs(generators, examples, {"complete": ref_sets}, max_new_tokens=max_new_tokens)
names = [g.name for g in generators]
answers = {n: runs[(n, "complete")][0] for n in names}
for name, ans in answers.items():
    print(f"--- {name}\n{ans[0]}")

# %% [markdown]
# ## 3. Metrics: three NLI calls for all models (recall, precision, self-consistency)

# %%
rows = C.score_runs(runs, examples, facts, judge)
per_model = {n: rows[(n, "complete")] for n in names}
summary = {n: C.summarize(r) for n, r in per_model.items()}
judge_name = summary[names[0]]["judge"]

# One answer sentence by sentence: what f said about it.
first = C.cited_sentences(answers[names[0]][0])
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
from covlib import course

course.check_own_work(citation_pr, "citation_scores", "score_answers", "score_runs")  # your own code, not covlib's
import math

assert citation_pr([1, 3], [1, 2]) == (0.5, 0.5), "cites [1] and [3], gold [1] and [2]"
assert citation_pr([], [1, 2]) == (0.0, 0.0), "nothing cited: precision 0, recall 0"
assert citation_pr([1, 1, 7], [1]) == (0.5, 1.0), "[1] twice counts once; [7] does not exist and still counts"
### BEGIN HIDDEN TESTS
p, r = citation_pr([2], [])
assert p == 0.0 and math.isnan(r), "no gold references: recall is NaN"
for name, rows_ in per_model.items():
    for i, row in enumerate(rows_):
        cited = C.cited_ids(C.cited_sentences(answers[name][i]))
        p, r = citation_pr(cited, ref_sets[i].gold)
        assert p == row["cit_precision"], f"{name}, answer {i}: precision {p} vs {row['cit_precision']}"
        assert r == row["cit_recall"] or (math.isnan(r) and math.isnan(row["cit_recall"])), f"{name}, answer {i}: recall"
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex04-recall-prompt", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ### Exercise 6 · Key-fact recall
# Knowledge recall asks how many of the question's key facts the answer states (§4.1):
# R = (1/|K|) Σ_k f(answer, k), where f(premise, hypothesis) is 1 when the NLI judge's most probable
# label is entailment. Write `key_fact_recall(answer, key_facts, judge)`:
#
# * the premise is the answer without its citation marks, `C.plain_answer(answer)`;
# * one batched call judges every (answer, key fact) pair: `nli.probabilities(premises, hypotheses,
#   judge, progress=False)` gives rows of P(entailment, neutral, contradiction);
# * NaN when there are no key facts; 0.0 when the answer has no text.

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
    return float((probs.argmax(axis=1) == 0).mean())
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex04-recall-checks", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from covlib import course

course.check_own_work(key_fact_recall, "score_answers", "score_runs")  # your own code, not covlib's
assert math.isnan(key_fact_recall("Paris [1].", [], judge)), "no key facts: NaN"
assert key_fact_recall("", ["Paris is in France."], judge) == 0.0, "an empty answer recalls nothing"
first_row = per_model[names[0]][0]
got = key_fact_recall(answers[names[0]][0], facts[0].key_facts, judge)
assert got == first_row["recall"] or (math.isnan(got) and math.isnan(first_row["recall"])), \
    f"the first answer: {got} vs the notebook's {first_row['recall']}"
### BEGIN HIDDEN TESTS
for name, rows_ in per_model.items():
    for i, row in enumerate(rows_):
        got = key_fact_recall(answers[name][i], facts[i].key_facts, judge)
        assert got == row["recall"] or (math.isnan(got) and math.isnan(row["recall"])), f"{name}, answer {i}"
assert key_fact_recall("Paris is the capital of France [1][2].", ["Paris is the capital of France."], judge) == \
    key_fact_recall("Paris is the capital of France.", ["Paris is the capital of France."], judge), "citations are not text"
### END HIDDEN TESTS

# %%
paper_name = {v: k for k, v in C.PAPER_MODELS.items()}
table = pd.DataFrame(
    [{"source": "ours", "model": n, "P": s["P"], "R": s["R"], "F1 (mean of F1)": s["F1_mean"],
      "F1 (of means)": s["F1_of_means"], "SC (cited sents)": s["SC_cited"], "SC (all sents)": s["SC_all"],
      "CitP": s["CitP"], "CitR": s["CitR"], "EM-recall": s["EM_recall"], "n": s["n"]} for n, s in summary.items()]
    + [{"source": "paper", "model": m, "P": v[0], "R": v[1], "F1 (mean of F1)": None, "F1 (of means)": v[2],
        "SC (cited sents)": v[3], "SC (all sents)": None, "CitP": v[4], "CitR": v[5], "EM-recall": None, "n": 500}
       for m, v in C.PAPER_TABLE1.items()])
results.save_table(table, "tab-04-credibility-models", params=params, judge=judge_name, key_facts=facts[0].author,
                   n=len(examples), floatfmt=".2f")
table

# %% [markdown]
# The paper's F1 column matches neither the mean of per-question F1 nor the F1 of mean P and R
# exactly (e.g. ChatGPT: 2·85.40·56.55/(85.40+56.55) = 68.04 against 68.22), so both are shown;
# its SC divides by "the total number of such statements", which we read both ways: over cited
# sentences and over all sentences (an uncited sentence scoring 0).
#
# ## 4. Agreement with people (Table 2)
# The paper's 10 experts rated 50 answers per model: each sentence helpful or not (human
# precision) and the answer's completeness in {0, .25, .5, .75, 1} (human recall), then
# correlated them with P, R and EM-recall across 5 models (Pearson 0.87, 0.88, 0.54). Fill the
# sheet below (one row per rater, `helpful` as space-separated 0/1 flags in sentence order) and
# pass it as `ratings`; the correlation needs at least 3 models.

# %%
to_rate = [{"question_id": ex.id, "model": n, "question": ex.question, "answer": answers[n][i]}
           for n in names for i, ex in enumerate(examples[:n_rating])]
rating_sheet = C.export_rating_sheet(to_rate, paths.build_dir() / "ratings" / "04-rating-sheet.csv")
print("rating sheet:", rating_sheet, f"({len(to_rate)} answers)")
correlation = None
if ratings:
    human = C.human_scores(C.read_ratings(ratings))
    auto = {n: summary[n] for n in names}
    correlation = C.human_correlation(auto, human)
    corr = pd.DataFrame([{"metric": k, "pearson (ours)": correlation[k], "pearson (paper)": C.PAPER_PEARSON[k]}
                         for k in ("P", "R", "EM_recall")])
    results.save_table(corr, "tab-04-human-correlation", params=params, judge=judge_name, ratings=ratings)
    display(corr)  # noqa: F821
else:
    print("No ratings given; the paper's Table 2:")
    display(pd.DataFrame(C.PAPER_TABLE2, index=["P", "R", "EM-recall", "HPrec", "HRec"]).T)  # noqa: F821
    print("Pearson across models (paper):", C.PAPER_PEARSON)

# %%
headline = {
    "models": names,
    "judge": judge_name,
    "key_facts": facts[0].author,
    "n_questions": len(examples),
    "n_refs": n_refs,
    "summary": summary,
    "human_correlation": correlation,
    "paper": {"table1": C.PAPER_TABLE1, "pearson": C.PAPER_PEARSON},
}
results.record_metrics("04_credibility_models", headline, params=params, judge=judge_name)
{n: {k: round(v, 1) for k, v in s.items() if isinstance(v, float)} for n, s in summary.items()}
