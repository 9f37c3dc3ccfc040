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
# # 02 · Where to draw the line: the consistency-threshold ablation (Verify-and-Edit, Fig. 3)
#
# Below which consistency should a CoT-SC prediction be edited? The paper sweeps that threshold on Adversarial
# HotpotQA and finds EM and AUC rising up to about ⌈n/2⌉ = 3 and falling after; we run the same sweep (how each
# threshold is read off: below the parameters).

# %%

import matplotlib.pyplot as plt
import pandas as pd

from covlib import data
from covlib.core import stats
from covlib.papers import verify_edit
from covlib.papers.verify_edit import claims, cot
from covlib.papers.verify_edit.knowledge import make_knowledge
from covlib.papers.verify_edit.notebook import NOTEBOOKS
from covlib.report import plotting, results, tables
from covlib.runs import session

# %% tags=["parameters"]
profile: str = "auto"  # smoke, cpu, full or auto (full on a GPU, cpu otherwise)
model: str = ""  # hub id or local dir; empty for the embedded SmolLM2-135M-Instruct
device: str = ""  # cpu or cuda; empty picks cuda when available
n_questions: int = 250  # Adversarial HotpotQA test questions (paper: all 250)
n_samples: int = 5  # self-consistency paths (paper: 5)
temperature: float = 0.7  # sampling temperature (paper: 0.7)
seed: int = 0  # sampling seed (and the bootstrap's)
max_new_tokens: int = 96  # longest CoT completion
knowledge: str = "dataset"  # dataset, bm25, tfidf, dense or web (the paper does not say which Fig. 3 used)
consistency: str = "wang"  # wang or majority: the score thresholded (paper: Wang et al.'s)

# %%
S = session.start(NOTEBOOKS["02"], globals())

# %% [markdown]
# ## What this notebook measures
#
# Verify-and-Edit has one hyperparameter: the consistency threshold below which a CoT-SC
# prediction is edited (§5.6). The paper sweeps it on Adversarial HotpotQA and finds EM and AUC
# rising up to about ⌈n/2⌉ = 3 and falling after: below 3 mostly wrong predictions get edited
# (and fixed), above it mostly right ones (and some broken).
#
# Each example's edit (verifying questions → retrieval → top-3 sentences → verifying answers →
# new answer) does not depend on the threshold, so we edit every example below n once
# (`verify_edit.compute_edits`) and read off each threshold with `apply_threshold`.
#
# Outputs: `figures/fig-02-threshold-ablation.*`, `tables/tab-02-threshold-ablation.*`, `results/02_threshold_ablation.json`.

# %% [markdown]
# ## 1. CoT-SC predictions (cached: the same call as notebook 01)

# %%
generator = S.lm
examples = data.load_adv_hotpotqa(split="test")[:S.n_questions]
cot_sc = cot.run_cot_sc(generator, examples, "hotpotqa", n=S.n_samples, temperature=S.temperature,
                              seed=S.seed, max_new_tokens=S.max_new_tokens)
verify_edit.trace.write(S.tracer, cot_sc)
source = make_knowledge(S.knowledge, corpus=data.default_corpus(), corpus_name="hotpot-corpus")
print(f"{len(cot_sc)} predictions; knowledge: {source.label}")

# %% [markdown]
# ## 2. Edit every example once
# `max_threshold = n + 1` edits all of them, so that both consistency scores can be swept
# over 0..n with the same edits (unanimous examples are edited too, but only used if a
# threshold above n were asked for).

# %%
edits = verify_edit.compute_edits(generator, cot_sc, examples, "hotpotqa", source, max_threshold=S.n_samples + 1,
                                  consistency=S.consistency)
verify_edit.trace.write(S.tracer, edits)
first = next(iter(edits.values()), None)
if first is not None:
    print("original :", first.original_rationale)
    for q, top, a in zip(first.verifying_questions, first.retrieved, first.verifying_answers):
        print(f"  verify : {q}\n  found  : {top[:1]}\n  answer : {a}")
    print("edited   :", first.edited_rationale, "→", first.answer)

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex02-sentences-prompt", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ### Exercise 3 · Verify-and-Edit's sentence selection
# Each verifying question is answered from only the 3 retrieved sentences most similar to it (§3.2:
# the paper ranks them with Sentence-BERT embeddings). Write
# `select_sentences(query, sentences, k, encode)`:
#
# * drop exact duplicate sentences first, keeping the first copy;
# * embed the query and the sentences with `encode` (a list of texts → an array of unit-length rows);
# * rank the sentences by cosine similarity to the query (for unit vectors: the dot product),
#   ties in their original order, and return the top `k` sentences (all of them when fewer).
#
# The checks compare yours with `retrieval.top_sentences`, which `compute_edits` used above.

# %% nbgrader={"grade": false, "grade_id": "ex02-sentences-answer", "locked": false, "schema_version": 3, "solution": true, "task": false}
from covlib.retrieval.embedding import load_encoder

encode = load_encoder().encode


def select_sentences(query: str, sentences: list[str], k: int, encode) -> list[str]:
    """The k distinct sentences closest to the query by embedding cosine, ties in original order."""
    ### BEGIN SOLUTION
    import numpy as np

    distinct = list(dict.fromkeys(sentences))
    if not distinct or k <= 0:
        return []
    vectors = encode([query, *distinct])
    sims = vectors[1:] @ vectors[0]
    order = np.argsort(-sims, kind="stable")[:k]
    return [distinct[i] for i in order]
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex02-sentences-checks", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
import numpy as np

from covlib.runs import exercises

exercises.check_own_work(select_sentences, "top_sentences", "top_sentences_batch")  # your own code, not covlib's
pool = ["Paris is the capital of France.", "Bananas are yellow.", "Paris is the capital of France.",
        "France borders Spain and Italy."]
TOY = {"query": [1.0, 0.0], "near": [0.8, 0.6], "tied with near": [0.8, -0.6], "middle": [0.6, 0.8], "far": [0.0, 1.0]}


def toy_encode(texts):
    """A toy encoder for the checks: fixed unit vectors, so the similarities to "query" are plain to see
    ("near" 0.8, "tied with near" 0.8, "middle" 0.6, "far" 0.0)."""
    texts = [texts] if isinstance(texts, str) else list(texts)
    return np.array([TOY[t] for t in texts]).reshape(len(texts), 2)


toy_pool = ["far", "near", "middle", "near", "tied with near"]
got = exercises.record(
    "ex02-sentences",
    paris=select_sentences("What is the capital of France?", pool, 2, encode),
    empty=select_sentences("anything", [], 3, encode),
    large_k=select_sentences("Paris", pool, 10, encode),
    toy_top2=select_sentences("query", toy_pool, 2, toy_encode),
    toy_top3=select_sentences("query", toy_pool, 3, toy_encode),
    toy_all=select_sentences("query", toy_pool, 10, toy_encode),
    toy_none=select_sentences("query", toy_pool, 0, toy_encode),
)
### BEGIN HIDDEN TESTS
from covlib import retrieval

sentence_cases = []
for ex in examples[:6]:
    candidates = [s for p in ex.paragraphs for s in p.sentences if s.strip()]
    for query in [ex.question] + [q for e in edits.values() if e.id == ex.id for q in e.verifying_questions][:2]:
        sentence_cases.append((query, candidates))
got = exercises.record("ex02-sentences", notebook=[select_sentences(q, c, 3, encode) for q, c in sentence_cases])
ref = exercises.reference("ex02-sentences", n_examples=len(examples[:6]), notebook=[
    {"query": q, "score": {s: float(v) for s, v in ranked}, "top": [float(v) for _, v in ranked[:3]],
     "expected": [s for s, _ in ranked[:3]]}
    for q, c in sentence_cases for ranked in [retrieval.top_sentences(q, c, k=len(c))]])
### END HIDDEN TESTS
# -- checks: on the recorded values (got: your answers; ref: covlib's), here and again by the grader
assert got["paris"] == ["Paris is the capital of France.", "France borders Spain and Italy."], \
    f"expected the Paris sentence once, then the France one; got {got['paris']}"
assert got["empty"] == [], "no sentences, nothing selected"
assert len(got["large_k"]) == 3, "k larger than the pool: every distinct sentence"
assert got["toy_top2"] == ["near", "tied with near"], \
    f"toy encoder: 'near' and 'tied with near' tie at 0.8, and a tie keeps the original order; got {got['toy_top2']}"
assert got["toy_top3"] == ["near", "tied with near", "middle"], \
    f"toy encoder: the second 'near' is a duplicate, dropped before ranking; got {got['toy_top3']}"
assert got["toy_all"] == ["near", "tied with near", "middle", "far"], \
    f"toy encoder, k larger than the pool: every distinct sentence, most similar first; got {got['toy_all']}"
assert got["toy_none"] == [], f"k = 0: nothing selected, got {got['toy_none']}"
### BEGIN HIDDEN TESTS
assert len(got["notebook"]) == len(ref["notebook"]) >= ref["n_examples"]
for mine, want in zip(got["notebook"], ref["notebook"]):
    query, score = want["query"], want["score"]
    assert len(mine) == min(3, len(score)) and len(set(mine)) == len(mine), f"{query!r}: {mine}"
    assert all(s in score for s in mine), f"{query!r}: a selected sentence is not among the candidates"
    assert all(abs(score[s] - want["top"][i]) < 1e-5 for i, s in enumerate(mine)), \
        f"{query!r}: expected {want['expected']}, got {mine}"
### END HIDDEN TESTS

# %% [markdown]
# ## 3. EM and AUC at every threshold 0..n
# Each number with the bounds of its 95% interval (`low` / `high`: Wilson for EM, a seeded
# percentile bootstrap over the same n questions for AUC) and n; the figure shades the same intervals. Neighbouring
# thresholds share most of their predictions, so compare two of them with the paired
# differences below, not by whether their intervals overlap.

# %%
sweeps = {kind: pd.DataFrame(verify_edit.sweep_thresholds(cot_sc, edits, consistency=kind, intervals=True, seed=S.seed))
          .assign(consistency=kind) for kind in ("wang", "majority")}
sweep = pd.concat(sweeps.values(), ignore_index=True)
results.save_table(sweep, "tab-02-threshold-ablation", run=S, knowledge=source.label,
                   n=len(cot_sc), floatfmt=".1f")

# %%
main = sweeps[S.consistency]
fig, axes = plt.subplots(1, 2, figsize=(11, 4))
for ax, metric, name in ((axes[0], "accuracy", "EM"), (axes[1], "auc", "AUC")):
    plotting.line_with_peak(main["threshold"], {f"{name} ({k})": sweeps[k][metric] for k in sweeps}, ax=ax, fmt="{:.1f}",
                            bands={f"{name} ({k})": (sweeps[k][f"{metric} low"], sweeps[k][f"{metric} high"])
                                   for k in sweeps})
    ax.set_title(f"{name}, shaded: 95% {'Wilson' if name == 'EM' else 'bootstrap'} interval (n={len(cot_sc)})", fontsize=9)
for ax, what in zip(axes, ("EM (%)", "accuracy-coverage AUC")):
    ax.axvline(S.threshold, color="0.3", ls="--", lw=1)
    ax.annotate("paper: peak near ⌈n/2⌉ = 3", (S.threshold, 0.02), xycoords=("data", "axes fraction"),
                fontsize=8, xytext=(3, 0), textcoords="offset points")
    ax.set_xlabel("threshold t (edit when consistency < t)")
    ax.set_ylabel(what)
plotting.caption(axes[0], model=generator.name, knowledge=source.label, n=len(cot_sc))
fig.suptitle("CoT-SC + Verify-and-Edit on Adversarial HotpotQA as the threshold moves (cf. Fig. 3)")
results.save_figure(fig, "fig-02-threshold-ablation", run=S, knowledge=source.label);  # ";": the plot shows, not the paths

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex02-predictions-prompt", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ### Exercise 4 · The prediction at a threshold
# Every example was edited once above, so the prediction at any threshold t can be read off
# without running a model. Write `predictions_at(t, results, edits, kind)`: for each CoT-SC result
# `r` (in order), its consistency `cot.consistency_of(r, kind)`; below t it is edited, and the
# prediction is the edit's answer `edits[r.id].answer` (the original `r.prediction` when the
# re-answer failed, i.e. the answer is `None`); at or above t it is `r.prediction`.
# The checks compare yours with `verify_edit.apply_threshold` at every threshold.

# %% nbgrader={"grade": false, "grade_id": "ex02-predictions-answer", "locked": false, "schema_version": 3, "solution": true, "task": false}
def predictions_at(t: float, results: list, edits: dict, kind: str = "wang") -> list[str]:
    """The prediction of every example at threshold t (edit when consistency < t)."""
    ### BEGIN SOLUTION
    out = []
    for r in results:
        edited = cot.consistency_of(r, kind) < t
        answer = edits[r.id].answer if edited else None
        out.append(answer if answer is not None else r.prediction)
    return out
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex02-predictions-checks", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from types import SimpleNamespace

from covlib.runs import exercises

exercises.check_own_work(predictions_at, "apply_threshold", "sweep_thresholds", "verify_and_edit")  # your own code, not covlib's
# four toy CoT-SC results and their edits (in another order: look them up by id); q3's re-answer failed
toy_results = [SimpleNamespace(id="q1", prediction="paris", majority=3, wang=2.4),
               SimpleNamespace(id="q2", prediction="lyon", majority=2, wang=3.0),
               SimpleNamespace(id="q3", prediction="nice", majority=1, wang=1.0),
               SimpleNamespace(id="q4", prediction="oslo", majority=5, wang=5.0)]
toy_edits = {"q4": SimpleNamespace(answer="rome"), "q3": SimpleNamespace(answer=None),
             "q2": SimpleNamespace(answer="madrid"), "q1": SimpleNamespace(answer="berlin")}
got = exercises.record(
    "ex02-predictions",
    nothing=predictions_at(0, cot_sc, edits),
    everything=predictions_at(S.n_samples + 1, cot_sc, edits),
    toy_wang=predictions_at(3, toy_results, toy_edits),
    toy_majority=predictions_at(3, toy_results, toy_edits, "majority"),
    toy_all=predictions_at(6, toy_results, toy_edits, "majority"),
    empty=predictions_at(3, [], edits),
)
ref = exercises.reference("ex02-predictions", nothing=[r.prediction for r in cot_sc],
                          everything=[edits[r.id].answer if edits[r.id].answer is not None else r.prediction
                                      for r in cot_sc])
### BEGIN HIDDEN TESTS
sweep_ts = [0, 0.5, 1, 2, 2.5, 3, 4, 5, 6][: S.n_samples + 4]
got = exercises.record("ex02-predictions", sweep={kind: [predictions_at(t, cot_sc, edits, kind) for t in sweep_ts]
                                                  for kind in ("wang", "majority")})
ref = exercises.reference("ex02-predictions", thresholds=sweep_ts, sweep={
    kind: [[v.prediction for v in verify_edit.apply_threshold(cot_sc, edits, t, consistency=kind)] for t in sweep_ts]
    for kind in ("wang", "majority")})
### END HIDDEN TESTS
# -- checks: on the recorded values (got: your answers; ref: covlib's), here and again by the grader
assert got["nothing"] == ref["nothing"], "threshold 0 edits nothing"
assert got["everything"] == ref["everything"], "threshold n + 1 edits every example"
assert got["toy_wang"] == ["berlin", "lyon", "nice", "oslo"], \
    f"toy results, wang (the default) at threshold 3: q1 (2.4) and q3 (1.0) are edited, q2 (3.0, not below 3) and " \
    f"q4 are not; q3's re-answer failed, so it keeps its prediction; got {got['toy_wang']}"
assert got["toy_majority"] == ["paris", "madrid", "nice", "oslo"], \
    f"toy results, majority at threshold 3: q2 (2) and q3 (1) are edited, q1 (3) and q4 (5) are not; " \
    f"got {got['toy_majority']}"
assert got["toy_all"] == ["berlin", "madrid", "nice", "rome"], \
    f"toy results at threshold 6: every one edited, each with its own edit (by id); got {got['toy_all']}"
assert got["empty"] == [], "no results, no predictions"
### BEGIN HIDDEN TESTS
for kind in ("wang", "majority"):
    for t, mine, expected in zip(ref["thresholds"], got["sweep"][kind], ref["sweep"][kind]):
        assert mine == expected, f"{kind} consistency, threshold {t}"
    assert len(got["sweep"][kind]) == len(ref["sweep"][kind])
### END HIDDEN TESTS

# %% [markdown]
# Paper, for reference (GPT-3, Table 1): CoT-SC 31.2% EM; CoT-SC + VE 35.7% (Wiki.), 36.0%
# (DrQA), 37.7% (Google), 56.8% (Dataset); Fig. 3 peaks at threshold 3.
#
# ## 4. The paper's claims about the threshold, as paired comparisons
# Fig. 3 says that editing below ⌈n/2⌉ beats not editing (threshold 0), beats editing
# (almost) everything (threshold n), and that AUC follows EM. Each is a comparison on the same
# questions: EM differences get the exact McNemar test (with the discordant counts: questions
# right at one threshold and wrong at the other), the AUC difference a paired bootstrap whose 95%
# interval decides (a test of equal AUC). Threshold ⌈n/2⌉ against 0 is exactly notebook 03's "CoT-SC + VE against
# CoT-SC" on HotpotQA with the same knowledge: the ledger (notebook 12) counts it there, once.

# %%
by_threshold = verify_edit.correctness_by_threshold(cot_sc, edits, consistency=S.consistency)
differences = {
    "ve-edit-below-half-helps": stats.paired_difference(by_threshold[S.threshold], by_threshold[0], scale=100,
                                                        seed=S.seed),
    "ve-half-beats-edit-all": stats.paired_difference(by_threshold[S.threshold], by_threshold[S.n_samples],
                                                      scale=100, seed=S.seed),
}
auc_difference = verify_edit.auc_difference(verify_edit.apply_threshold(cot_sc, edits, S.threshold, S.consistency),
                                            verify_edit.apply_threshold(cot_sc, edits, S.n_samples, S.consistency),
                                            seed=S.seed)
scope = f"hotpotqa, {S.knowledge}, {S.consistency} consistency, n={S.n_samples} paths"
oracle = verify_edit.NEAR_ORACLE["hotpotqa"] if S.knowledge in verify_edit.RETRIEVER_KINDS else None
meta = dict(model=generator.name, knowledge=source.label, **({"near_oracle": oracle} if oracle else {}))
claim_records = [
    # notebook 03 runs the same comparison (its edits use Wang consistency at ⌈n/2⌉) on the same questions
    claims.same_as("ve-edit-below-half-helps", scope, differences["ve-edit-below-half-helps"], "EM points",
                   "ve-beats-cot-sc", f"hotpotqa, {S.knowledge}", **meta) if S.consistency == "wang" else
    claims.estimate("ve-edit-below-half-helps", scope, differences["ve-edit-below-half-helps"], "EM points", **meta),
    claims.estimate("ve-half-beats-edit-all", scope, differences["ve-half-beats-edit-all"], "EM points", **meta),
    claims.estimate("ve-auc-follows-em", scope, auc_difference, "AUC points (x100)", **meta),
]
tables.estimates(claim_records)

# %%
peak = main.loc[main["accuracy"].idxmax()]
headline = {
    "model": generator.name,
    "knowledge": source.label,
    "n_examples": len(cot_sc),
    "consistency": S.consistency,
    "em_by_threshold": {int(t): float(a) for t, a in zip(main["threshold"], main["accuracy"])},
    "auc_by_threshold": {int(t): float(a) for t, a in zip(main["threshold"], main["auc"])},
    "edited_by_threshold": {int(t): int(e) for t, e in zip(main["threshold"], main["edited"])},
    "peak_threshold": int(peak["threshold"]),
    "peak_em": float(peak["accuracy"]),
    "em_at_default_threshold": float(main.loc[main["threshold"] == S.threshold, "accuracy"].iloc[0]),
    # 95% intervals over the same questions (EM: Wilson; AUC: bootstrap), per threshold: {value, low, high, n}
    "em_interval_by_threshold": {int(r["threshold"]): {"value": r["accuracy"], "low": r["accuracy low"],
                                                       "high": r["accuracy high"], "n": int(r["n"])}
                                 for _, r in main.iterrows()},
    "auc_interval_by_threshold": {int(r["threshold"]): {"value": r["auc"], "low": r["auc low"], "high": r["auc high"],
                                                        "n": int(r["n"])} for _, r in main.iterrows()},
    "em_difference": {"half_minus_none": differences["ve-edit-below-half-helps"],
                      "half_minus_all": differences["ve-half-beats-edit-all"]},
    "auc_difference": {"half_minus_all": auc_difference},
    "claims": claim_records,
    "paper": {"peak_threshold": verify_edit.PAPER_FIG3_PEAK_THRESHOLD, "source": "Verify-and-Edit Fig. 3 / §5.6"},
}
results.record_metrics("02_threshold_ablation", headline, run=S, knowledge=source.label)
headline
