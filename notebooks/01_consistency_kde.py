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
# # 01 · Does self-consistency know when it doesn't know? (Verify-and-Edit, Fig. 2)
#
# Verify-and-Edit edits only predictions whose self-consistency is low, which rests on one hypothesis: incorrect
# predictions have low consistency, correct ones high. Here CoT-SC runs on the Adversarial HotpotQA test split
# and Fig. 2's densities are plotted for both forms of consistency (the method and the two scores: below the
# parameters).

# %%
import math

import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from covlib import data
from covlib.core import stats
from covlib.papers import verify_edit
from covlib.papers.verify_edit import claims, cot
from covlib.papers.verify_edit.notebook import NOTEBOOKS
from covlib.report import plotting, results
from covlib.runs import session
from covlib.traces import view as trace_view

# %% tags=["parameters"]
profile: str = "auto"  # smoke, cpu, full or auto (full on a GPU, cpu otherwise)
model: str = ""  # hub id or local dir; empty for the embedded SmolLM2-135M-Instruct
device: str = ""  # cpu or cuda; empty picks cuda when available
n_questions: int = 250  # Adversarial HotpotQA test questions (paper: all 250)
n_samples: int = 5  # self-consistency paths (paper: 5)
temperature: float = 0.7  # sampling temperature (paper: 0.7)
seed: int = 0  # sampling seed (and the bootstrap's)
max_new_tokens: int = 96  # longest CoT completion

# %%
S = session.start(NOTEBOOKS["01"], globals())

# %% [markdown]
# ## What this notebook measures
#
# Verify-and-Edit (Zhao et al., ACL 2023, §3.1 and §5.1) edits only the predictions whose
# **self-consistency** is low: it samples `n = 5` chain-of-thought (CoT) paths at temperature
# 0.7, takes the most consistent answer, and calls the prediction *uncertain* when its
# consistency is below ⌈n/2⌉ = 3. That rests on one hypothesis, which Fig. 2 of the paper checks
# with kernel density plots on Adversarial HotpotQA: **incorrect predictions have low
# consistency, correct ones high**.
#
# Here we run CoT-SC with the 6-shot prompt of Appendix C on the 250-question test split and
# plot the same densities, for both forms of consistency that `covlib.papers.verify_edit.cot` stores on one
# scale [0, n]:
#
# * **majority**: how many of the n paths give the chosen answer (what ReAct thresholds);
# * **wang**: Wang et al.'s answer probability marginalised over the sampled rationales
#   (path weights from their mean token log-probabilities), rescaled to [0, n] so that the
#   threshold ⌈n/2⌉ means "less than a majority" on both.
#
# Outputs: `figures/fig-01-consistency-kde.*`, `tables/tab-01-consistency.*`, `results/01_consistency_kde.json`.

# %% [markdown]
# ## 1. CoT self-consistency on the test split
# One batched, cached call: re-running this cell (or notebook 02 / 03, which use the same
# predictions) runs no model.

# %%
generator = S.lm
examples = data.load_adv_hotpotqa(split="test")[:S.n_questions]
cot_sc = cot.run_cot_sc(generator, examples, "hotpotqa", n=S.n_samples, temperature=S.temperature,
                              seed=S.seed, max_new_tokens=S.max_new_tokens)
verify_edit.trace.write(S.tracer, cot_sc)
summary = cot.summarize(cot_sc)
print(f"{generator.name}: CoT-SC EM {summary['accuracy']:.1f}% on {len(cot_sc)} questions; "
      f"{summary['parse_failures']} of {summary['paths']} paths had no 'The answer is'")

# %% [markdown]
# One question step by step, from the run's trace (`results/traces/01_consistency_kde/`; how to
# open one: docs/traces.md): the prompt, its five sampled paths with their parsed answers and mean
# log-probabilities, and the vote with its majority and wang scores. `example=7` shows the eighth
# question, `example="<id>"` one by id; the book's explorer page lists them all.

# %%
r = cot_sc[0]  # the question shown here; exercise 1 checks its vote too
trace_view.show("01_consistency_kde", "cot-sc", example=r.id)

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex01-consistency-prompt", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ### Exercise 1 · Consistency on one [0, n] scale
# Write `consistency(keys, mean_logprobs)` for one question's n sampled paths. `keys[i]` is path
# i's normalised answer (`None` when the path never said "The answer is"); `mean_logprobs[i]` is its
# mean token log-probability (`None` or NaN: weight 0). Return `(majority, wang)` for the chosen answer:
#
# * the chosen answer has the most votes; a tie goes to the larger weight sum, then to the answer
#   that came first;
# * `majority` is how many paths gave it;
# * `wang` is n · (weight sum of its paths) / (weight sum of all n paths), each path weighing
#   w_i = exp(mean_logprobs[i]); 0.0 when every weight is 0;
# * a question where no path has an answer scores `(0, 0.0)`.
#
# The checks compare yours with `r.majority` and `r.wang` (from `cot.self_consistency`).

# %% nbgrader={"grade": false, "grade_id": "ex01-consistency-answer", "locked": false, "schema_version": 3, "solution": true, "task": false}
def consistency(keys: list, mean_logprobs: list) -> tuple[int, float]:
    """(majority, wang) of the chosen answer, both on [0, n]."""
    ### BEGIN SOLUTION
    weights = [0.0 if m is None or math.isnan(m) else math.exp(m) for m in mean_logprobs]
    votes, mass, first = {}, {}, {}
    for i, (key, w) in enumerate(zip(keys, weights)):
        if key is not None:
            votes[key] = votes.get(key, 0) + 1
            mass[key] = mass.get(key, 0.0) + w
            first.setdefault(key, i)
    if not votes:
        return 0, 0.0
    best = max(votes, key=lambda k: (votes[k], mass[k], -first[k]))
    total = sum(weights)
    return votes[best], (len(keys) * mass[best] / total if total > 0 else 0.0)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex01-consistency-checks", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from covlib.runs import exercises

exercises.check_own_work(consistency, "self_consistency")  # your own code, not covlib's
got = exercises.record(
    "ex01-consistency",
    paris=consistency(["paris", "paris", "lyon", None, "paris"], [-0.5] * 5),
    no_answer=consistency([None] * 5, [-1.0] * 5),
    tie_first=consistency(["a", "b", "b", "a", "c"], [-0.1, -2.0, -2.0, -0.1, -0.1]),
    tie_second=consistency(["b", "a", "a", "b", "c"], [-2.0, -0.1, -0.1, -2.0, -0.1]),
    votes_first=consistency(["a", "a", "b", None, None], [-3.0, -3.0, -0.1, -0.1, -0.1]),
    none_most=consistency([None, None, None, "a", "b"], [-0.1, -0.1, -0.1, -1.0, -2.0]),
    no_weights=consistency(["a", "a", "b"], [None, float("nan"), -1.0]),
    nan_weight=consistency(["a", "a", "b"], [-1.0, float("nan"), -1.0]),
    zero_weights=consistency(["a", "b"], [None, None]),
    example=consistency([cot.answer_key(a, "hotpotqa") for a in r.answers], r.mean_logprobs),
)
ref = exercises.reference("ex01-consistency", example=[r.majority, r.wang], example_id=r.id)
### BEGIN HIDDEN TESTS
got = exercises.record("ex01-consistency", full_tie=consistency(["x", "y"], [-1.0, -1.0]),
                       notebook=[consistency([cot.answer_key(a, "hotpotqa") for a in res.answers], res.mean_logprobs)
                                 for res in cot_sc])
ref = exercises.reference("ex01-consistency", notebook=[[res.majority, res.wang] for res in cot_sc],
                          ids=[res.id for res in cot_sc])
### END HIDDEN TESTS
# -- checks: on the recorded values (got: your answers; ref: covlib's), here and again by the grader
m, w = got["paris"]
assert m == 3 and math.isclose(w, 3.0), f"3 of 5 equally weighted paths say 'paris': expected (3, 3.0), got {(m, w)}"
assert got["no_answer"] == [0, 0.0], f"no path has an answer: expected (0, 0.0), got {got['no_answer']}"
tie = 5 * 2 * math.exp(-0.1) / (3 * math.exp(-0.1) + 2 * math.exp(-2.0))
m, w = got["tie_first"]
assert m == 2 and math.isclose(w, tie), f"'a' and 'b' tie on votes; 'a' has the larger weight sum: got {(m, w)}"
m, w = got["tie_second"]
assert m == 2 and math.isclose(w, tie), \
    f"'b' and 'a' tie on votes; 'a' has the larger weight sum, so 'a' wins though 'b' came first: expected (2, {tie:.4f}), " \
    f"got {(m, w)} (most_common and max over the votes alone pick 'b')"
m, w = got["votes_first"]
expected = 5 * 2 * math.exp(-3.0) / (2 * math.exp(-3.0) + 3 * math.exp(-0.1))
assert m == 2 and math.isclose(w, expected), \
    f"'a' has 2 votes, 'b' 1 vote but more weight: votes decide, and the unanswered paths still weigh in the total " \
    f"(n · weight of 'a' / weight of all 5 paths): expected (2, {expected:.4f}), got {(m, w)}"
m, w = got["none_most"]
expected = 5 * math.exp(-1.0) / (3 * math.exp(-0.1) + math.exp(-1.0) + math.exp(-2.0))
assert m == 1 and math.isclose(w, expected), \
    f"None is not an answer: 'a' and 'b' have 1 vote each, 'a' the larger weight: expected (1, {expected:.4f}), got {(m, w)}"
m, w = got["no_weights"]
assert m == 2 and w == 0.0, f"paths without log-probabilities (None or NaN) weigh 0: expected (2, 0.0), got {(m, w)}"
m, w = got["nan_weight"]
assert m == 2 and math.isclose(w, 1.5), \
    f"the NaN path weighs 0, so 'a' has half of the weight (e^-1 of 2·e^-1): expected (2, 1.5), got {(m, w)}"
assert got["zero_weights"] == [1, 0.0], f"every weight is 0: wang is 0.0, expected (1, 0.0), got {got['zero_weights']}"
assert exercises.close(got["example"], ref["example"]), \
    f"the question printed above ({ref['example_id']}): expected (r.majority, r.wang) = {ref['example']}, got {got['example']}"
### BEGIN HIDDEN TESTS
assert got["full_tie"] == [1, 1.0], "a full tie goes to the answer that came first"
assert len(got["notebook"]) == len(ref["notebook"]), "one answer per question"
for i, (mine, want) in enumerate(zip(got["notebook"], ref["notebook"])):
    assert exercises.close(mine, want), f"question {ref['ids'][i]}: got {mine}, expected {want}"
### END HIDDEN TESTS

# %% [markdown]
# ## 2. Consistency of correct vs incorrect predictions (Fig. 2)
# Each panel also gives the paper's claim as one number: mean consistency of the correct
# predictions minus that of the incorrect ones, with its 95% bootstrap interval (each group
# resampled) and a permutation p (`stats.group_difference`).

# %%
frame = pd.DataFrame(
    {"correct": ["correct" if x.correct else "incorrect" for x in cot_sc],
     "majority": [x.majority for x in cot_sc], "wang": [x.wang for x in cot_sc]}
)
correct_mask = np.array([x.correct == 1 for x in cot_sc])
separation = {kind: stats.group_difference(frame[kind], correct_mask, seed=S.seed) for kind in ("wang", "majority")}
fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=False)
for ax, kind in zip(axes, ("wang", "majority")):
    plotting.kde_by_group(frame[kind], frame["correct"], ax=ax)
    ax.axvline(S.threshold, color="0.3", ls="--", lw=1)
    ax.annotate(f"threshold ⌈n/2⌉ = {S.threshold}", (S.threshold, 0.97), xycoords=("data", "axes fraction"),
                ha="left", va="top", fontsize=8, xytext=(3, 0), textcoords="offset points")
    ax.set_xlabel(f"consistency ({kind}, 0..{S.n_samples})")
    ax.set_title({"wang": "Wang et al. score (path-probability weighted)", "majority": "majority count"}[kind])
    for offset, (label, group) in enumerate(frame.groupby("correct")):  # the points themselves, as a rug
        ax.plot(group[kind], [-0.02 - 0.03 * offset] * len(group), "|", ms=10, transform=ax.get_xaxis_transform(),
                color=f"C{0 if label == 'incorrect' else 1}", clip_on=False)
    ax.set_xlim(-0.5, S.n_samples + 0.5)  # the kernel spreads past 0..n, as in the paper's figure
    ax.text(0.02, 0.97, f"mean(correct) − mean(incorrect):\n{stats.format_interval(separation[kind], 2)} "
            f"(95% CI, n={separation[kind]['n']})", transform=ax.transAxes, ha="left", va="top", fontsize=8)
plotting.caption(axes[0], model=generator.name, n=len(cot_sc))
plotting.caption(axes[1], "paper (Fig. 2, GPT-3): incorrect skewed low, correct high")
fig.suptitle("Consistency of CoT-SC predictions on Adversarial HotpotQA, correct vs incorrect (cf. Fig. 2)")
results.save_figure(fig, "fig-01-consistency-kde", run=S, n=len(cot_sc));  # ";": the plot shows, not the paths

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex01-threshold-prompt", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ### Exercise 2 · Which predictions get edited?
# Verify-and-Edit edits a prediction when its consistency is below the threshold ⌈n/2⌉ (for
# n = 5: 3, "less than a majority"). Write `uncertain(scores, n)`: for each consistency score on
# [0, n], whether it is edited. Use whole-number arithmetic for ⌈n/2⌉, not floats.

# %% nbgrader={"grade": false, "grade_id": "ex01-threshold-answer", "locked": false, "schema_version": 3, "solution": true, "task": false}
def uncertain(scores: list[float], n: int) -> list[bool]:
    """For each consistency score on [0, n]: is it below ceil(n / 2)?"""
    ### BEGIN SOLUTION
    cut = (n + 1) // 2
    return [s < cut for s in scores]
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex01-threshold-checks", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
from covlib.runs import exercises

exercises.check_own_work(uncertain, "default_threshold")  # your own code, not covlib's
got = exercises.record(
    "ex01-threshold",
    n5=uncertain([0, 2, 2.9, 3, 5], 5),
    n4=uncertain([1, 2], 4),
    n1=uncertain([0, 0.5, 1], 1),
    huge_n=uncertain([2**53, 2**53 + 1], 2**54 + 1),
    empty=uncertain([], 5),
)
### BEGIN HIDDEN TESTS
from covlib.papers import verify_edit

grids = [[i / 4 for i in range(0, 4 * n + 1)] for n in range(1, 12)]
got = exercises.record("ex01-threshold", grids=[uncertain(grid, n) for n, grid in enumerate(grids, 1)],
                       notebook=uncertain([float(s) for s in frame["wang"]], S.n_samples))
ref = exercises.reference("ex01-threshold", notebook=[bool(s < S.threshold) for s in frame["wang"]],
                          grids=[[s < verify_edit.default_threshold(n) for s in grid] for n, grid in enumerate(grids, 1)])
### END HIDDEN TESTS
# -- checks: on the recorded values (got: your answers; ref: covlib's), here and again by the grader
assert got["n5"] == [True, True, True, False, False], f"n = 5: edit below 3 (3 itself is kept), got {got['n5']}"
assert got["n4"] == [True, False], f"n = 4: ceil(4/2) = 2, got {got['n4']}"
assert got["n1"] == [True, True, False], f"n = 1: ceil(1/2) = 1, got {got['n1']}"
assert got["huge_n"] == [True, False], \
    f"n = 2**54 + 1: ceil(n/2) = 2**53 + 1, so 2**53 is below it; n / 2 in floats rounds the + 1 away " \
    f"(use whole-number arithmetic), got {got['huge_n']}"
assert got["empty"] == [], "no scores, no decisions"
### BEGIN HIDDEN TESTS
for n, (mine, want) in enumerate(zip(got["grids"], ref["grids"]), 1):
    assert mine == want, f"n = {n}"
assert len(got["grids"]) == len(ref["grids"]) == 11
assert got["notebook"] == ref["notebook"], "this notebook's scores"
### END HIDDEN TESTS

# %% [markdown]
# ## 3. How well does the threshold separate them?
# The paper's claim: most incorrect predictions fall below ⌈n/2⌉, most correct ones at or above.
# Every number comes with its 95% interval in the `95% CI` column beside it (Wilson for the
# shares, a seeded percentile bootstrap over questions for means and r); shares are fractions of their group, consistencies on [0, n].

# %%
def point_biserial_r(binary, values) -> float:
    """The point-biserial r alone (NaN, silently, when a resample holds one class only)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return stats.point_biserial(binary, values)[0]


rows, intervals = [], {}
for kind in ("wang", "majority"):
    wrong = frame[frame.correct == "incorrect"][kind]
    right = frame[frame.correct == "correct"][kind]
    r_pb, p_pb = stats.point_biserial(correct_mask.astype(float), frame[kind]) if 0 < correct_mask.sum() < len(correct_mask) \
        else (float("nan"), float("nan"))
    est = {
        "incorrect below threshold": stats.mean_interval((wrong < S.threshold).astype(float), seed=S.seed),
        "correct at/above threshold": stats.mean_interval((right >= S.threshold).astype(float), seed=S.seed),
        "mean (incorrect)": stats.mean_interval(wrong, seed=S.seed),
        "mean (correct)": stats.mean_interval(right, seed=S.seed),
        "mean difference (correct − incorrect)": separation[kind],
        "point-biserial r": {**stats.bootstrap(point_biserial_r, correct_mask.astype(float), frame[kind], seed=S.seed),
                             "value": r_pb},
    }
    intervals[kind] = est
    row = {"consistency": kind}
    for name, e in est.items():
        row[name] = e["value"]
        row[f"{name} 95% CI"] = stats.format_interval(e, digits=2)
    rows.append({**row, "p": p_pb, "n correct": len(right), "n incorrect": len(wrong), "n": len(frame)})
table = pd.DataFrame(rows)
results.save_table(table, "tab-01-consistency", run=S, n=len(cot_sc))

# %% [markdown]
# Paper, for reference (GPT-3 text-davinci-003, Table 1): CoT-SC EM 31.2% on this split; Fig. 2
# shows incorrect predictions concentrated below 3 and correct ones above. A 135M model is
# mostly wrong, so the "correct" density rests on few points: read its shape with care.

# %% [markdown]
# The claim, recorded for the ledger (notebook 12): Wang et al.'s consistency (the score
# Verify-and-Edit thresholds) is higher for correct predictions than for incorrect ones. With
# no correct (or no incorrect) prediction there is nothing to compare, and the ledger says so.

# %%
scope = f"hotpotqa, CoT-SC wang consistency, n={S.n_samples} paths"
n_right = int(correct_mask.sum())
if 0 < n_right < len(correct_mask):
    claim_records = [claims.estimate("ve-consistency-separates", scope, separation["wang"], "consistency on [0, n]",
                                     model=generator.name)]
else:
    claim_records = [claims.untestable("ve-consistency-separates", f"{n_right} of {len(correct_mask)} CoT-SC predictions "
                                       "are correct: one of the two groups is empty", scope=scope, model=generator.name)]
claim_records

# %%
headline = {
    "model": generator.name,
    "n_examples": len(cot_sc),
    "cot_sc_em": summary["accuracy"],
    "parse_failures": summary["parse_failures"],
    "paths": summary["paths"],
    "threshold": S.threshold,
    "cot_sc_em_interval": stats.mean_interval([x.correct for x in cot_sc], scale=100, seed=S.seed),
    "consistency": {row["consistency"]: {k: row[k] for k in ("incorrect below threshold", "correct at/above threshold",
                                                             "mean (incorrect)", "mean (correct)", "point-biserial r")}
                    for row in rows},
    "intervals": intervals,  # {kind: {statistic: {value, low, high, n}}}, 95%: Wilson for shares, bootstrap otherwise
    "claims": claim_records,
    "paper": {"cot_sc_em": verify_edit.PAPER_TABLES["hotpotqa"][("CoT-SC", "-")][0],
              "source": f"Verify-and-Edit Table 1 ({verify_edit.PAPER_MODEL})"},
}
results.record_metrics("01_consistency_kde", headline, run=S)
headline
