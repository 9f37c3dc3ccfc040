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
# # 08 · The CoV-RAG verifier: scores, judgment, revised query, and when σ fires
#
# Is CoV-RAG's verifier informative? Steps 1-3 of Algorithm 1 run on NQ and WebQuestions, and the verifier alone
# is examined: its scores for correct vs wrong answers, its judgment accuracy and format rate, and how often σ
# fires (what is measured, how uncertain it is, and where we deviate: below the parameters).

# %%
import matplotlib.pyplot as plt

from covlib.core import stats
from covlib.papers import covrag as C
from covlib.papers.covrag.notebook import NOTEBOOKS
from covlib.report import plotting, results
from covlib.runs import session

# %% tags=["parameters"]
profile: str = "auto"  # smoke, cpu, full or auto (full on a GPU, cpu otherwise)
model: str = ""  # answering model: hub id or local dir; empty for the embedded SmolLM2-135M-Instruct
adapter: str = ""  # a LoRA adapter folder for `model` (notebook 10 trains one); empty for none
verifier: str = ""  # verifying model; empty: the answering model (the paper's one CoV-augmented model)
device: str = ""  # cpu or cuda; empty picks cuda when available
datasets: str = "NQ,WebQ"  # which of NQ, WebQ, TriviaQA, Mintaka (TriviaQA / Mintaka need a path or hub id below)
n_per_dataset: int = 400  # questions per dataset (paper: NQ 400, WebQ 400; TriviaQA and Mintaka 100)
triviaqa: str = ""  # TriviaQA validation: DPR trivia-dev.qa.csv, HF JSONL or hub id (test answers are not public)
mintaka: str = ""  # Mintaka test: official mintaka_test.json or hub id
corpus: str = ""  # passages to retrieve from: DPR psgs_w100.tsv or {id, contents} JSONL; empty: offline corpus; or a `make index` folder
k: int = 5  # references per question (paper: top-5)
seed: int = 0  # question samples
chat: bool = True  # wrap prompts in the model's chat template (instruction-tuned models)
max_new_tokens: int = 128  # longest answer
verify_tokens: int = 160  # longest verification
reference_correctness_max: float = 0.27  # σ: s_k <= this (footnote 2)
correctness_below: float = 0.26  # σ: correctness < this
bias_above: float = 0.7  # σ: bias > this
truthfulness_max: float = 0.92  # σ: truthfulness <= this
sigma_mode: str = "all"  # all (footnote 2's "and") or any (a revised query and any one other condition)

# %%
S = session.start(NOTEBOOKS["08"], globals())

# %% [markdown]
# ## What this notebook measures
#
# CoV-RAG (§2, Table 1, Table 6) asks one model to check its own retrieval-augmented answer: it
# scores the references (`reference_correctness`) and the answer (correctness, citation accuracy,
# truthfulness, bias, conciseness), judges it true / false / unclear, and proposes a revised
# query. Footnote 2's indicator σ then decides whether to retrieve again.
#
# This notebook runs steps 1-3 of Algorithm 1 (retrieve top-5, answer with `[n]` citations,
# verify) on NQ and WebQuestions and looks at the verifier alone:
#
# * the scores' distributions for correct vs wrong answers (is the verifier informative?);
# * judgment accuracy against the gold answer, and the format rate (Table 4's "Fmt");
# * every parse repair the outputs needed (a failed parse never counts as a passing verification);
# * how often σ fires, condition by condition, in footnote 2's conjunction (`all`) and in `any` mode.
#
# **Deviations.** The paper's verifier is a fine-tuned 6-13B model and its retrieval is a web
# search; offline we use the embedded SmolLM2-135M (untuned: notebook 10 fine-tunes it) and BM25
# over the HotpotQA paragraph corpus, which holds the answer to few of these open-domain questions
# (the tables say how many). Point `corpus` at a Wikipedia passage file (DPR `psgs_w100.tsv`) and
# `model` at a hub model on a GPU for the paper's setting. Our rows name what ran (the model and
# its adapter, or "no adapter"): the paper's numbers beside them come from its fine-tuned CoV-RAG
# verifier (Eqs. 2-4), which an untuned model is not.
#
# **Uncertainty.** Every rate of ours carries its n and a 95% bootstrap interval over questions
# (`stats.mean_interval` of the per-question 0/1 values, `C.question_flags`).
#
# Outputs: `figures/fig-08-verifier-scores.*`, `tables/tab-08-verifier.*`, `tables/tab-08-sigma.*`,
# `results/08_covrag_verifier.json`.

# %% [markdown]
# ## 1. Questions, corpus, and what the corpus can answer at all

# %%
hits = C.answerable(S.examples, S.passages)  # one pass over the corpus
reachable = {n: {ex.id: hits[ex.id] for ex in exs} for n, exs in S.sets.items()}
for n, exs in S.sets.items():
    print(f"{n}: {len(exs)} questions, gold answer anywhere in the corpus for {sum(reachable[n].values())}")

# %% [markdown]
# ## 2. Retrieve, answer, verify (Algorithm 1, steps 1-3; `max_rounds=0`: σ is recorded, nothing re-retrieved)

# %%
examples = [ex for exs in S.sets.values() for ex in exs]
records = C.cov_rag(S.base, examples, S.retriever, verifier=S.checker, k=S.k, max_rounds=0, thresholds=S.thresholds,
                    max_new_tokens=S.max_new_tokens, verify_tokens=S.verify_tokens, chat=S.chat)
C.trace.write(S.tracer, records)
by_set = {n: [r for r in records if r.id in {ex.id for ex in exs}] for n, exs in S.sets.items()}
print(records[0].rounds[0].answer, "\n", records[0].rounds[0].verification.raw[:300])

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex08-parser-prompt", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ### Exercise 7 · Reading the verifier's output
# The verifier answers in Table 6's JSON: `{"1": {"reference_correctness": s}, "2": {"correctness": s,
# "citation_accuracy": s, "truthfulness": s, "bias": s, "conciseness": s}, "3": judgment, "4": revised query}`,
# often inside a ```json fence or with a sentence before or after. Write `read_verification(text)`
# returning a dict with the six scores (floats; `None` when missing), `judgment` (`None` when missing)
# and `revised_query` (`""` when missing):
#
# * find the JSON objects in the text: from each `{` that is not inside an object already read, try
#   `json.JSONDecoder().raw_decode(text, i)` (it reads one JSON value starting at index i and says
#   where it ends); read the **last** object found;
# * no object at all: every score and the judgment `None`, the revised query `""`.
#
# `C.parse_verification` does this and much more (single quotes, truncated output, 0-10 scales,
# renamed keys, ...); the checks compare yours with it on well-formed outputs.

# %% nbgrader={"grade": false, "grade_id": "ex08-parser-answer", "locked": false, "schema_version": 3, "solution": true, "task": false}
import json

SCORE_NAMES = ("reference_correctness", "correctness", "citation_accuracy", "truthfulness", "bias", "conciseness")


def read_verification(text: str) -> dict:
    """The six scores, the judgment and the revised query of one verifier output."""
    ### BEGIN SOLUTION
    decoder, found, i = json.JSONDecoder(), None, text.find("{")
    while i != -1:
        try:
            value, end = decoder.raw_decode(text, i)
        except ValueError:
            i = text.find("{", i + 1)
            continue
        if isinstance(value, dict):
            found = value
        i = text.find("{", end)
    found = found or {}
    scores = {**(found.get("1") or {}), **(found.get("2") or {})}
    out = {name: (float(scores[name]) if scores.get(name) is not None else None) for name in SCORE_NAMES}
    out["judgment"] = found.get("3")
    out["revised_query"] = (found.get("4") or "").strip()
    return out
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex08-parser-checks", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from covlib.runs import exercises

exercises.check_own_work(read_verification, "parse_verification")  # your own code, not covlib's
sample = ('Here is my verification:\n```json\n{"1": {"reference_correctness": 0.2}, "2": {"correctness": 0.1, '
          '"citation_accuracy": 0.5, "truthfulness": 0.9, "bias": 0.8, "conciseness": 0.6}, "3": "false", '
          '"4": "Who wrote Hamlet?"}\n```')
got = exercises.record(
    "ex08-parser",
    sample=read_verification(sample),
    none=read_verification("I cannot verify this answer."),
    partial=read_verification('{"2": {"correctness": 1}, "3": "true"}'),
    two=read_verification('Format: {"3": "unclear", "4": ""} My answer: {"3": "true", "4": "x"}'),
    not_json=read_verification('Scores go in {braces like these}: {"3": "false", "4": "Who wrote it?"}'),
)
### BEGIN HIDDEN TESTS
verification_texts = [text for v in (r.rounds[0].verification for r in records) if v.parsed
                      for body in [C.verification_json(v)]
                      for text in (body, f"```json\n{body}\n```", f"My verification: {body} That is all.")]
gold = C.gold_verification("Who wrote Hamlet?", "Marlowe", [], ["William Shakespeare"])
got = exercises.record("ex08-parser", notebook=[read_verification(text) for text in verification_texts],
                       gold=read_verification(C.verification_json(gold))["judgment"])
ref = exercises.reference("ex08-parser", texts=verification_texts, gold=gold.judgment, notebook=[
    {**{name: getattr(p, name) for name in SCORE_NAMES}, "judgment": p.judgment, "revised_query": p.revised_query}
    for p in map(C.parse_verification, verification_texts)])
### END HIDDEN TESTS
# -- checks: on the recorded values (got: your answers; ref: covlib's), here and again by the grader
score_keys = ("reference_correctness", "correctness", "citation_accuracy", "truthfulness", "bias", "conciseness")
assert got["sample"] == {"reference_correctness": 0.2, "correctness": 0.1, "citation_accuracy": 0.5,
                         "truthfulness": 0.9, "bias": 0.8, "conciseness": 0.6, "judgment": "false",
                         "revised_query": "Who wrote Hamlet?"}, got["sample"]
none = got["none"]
assert none["judgment"] is None and none["revised_query"] == "" and all(none[s] is None for s in score_keys), none
partial = got["partial"]
assert partial["correctness"] == 1.0 and partial["bias"] is None and partial["revised_query"] == "", partial
assert isinstance(partial["correctness"], float), f"scores are floats: 1 is read as 1.0, got {partial['correctness']!r}"
assert all(partial[s] is None for s in score_keys if s != "correctness") and partial["judgment"] == "true", \
    f"the score_keys missing from the object are None: {partial}"
two = got["two"]
assert two["judgment"] == "true" and two["revised_query"] == "x", f"the last object is the verifier's answer: {two}"
assert got["not_json"]["judgment"] == "false" and got["not_json"]["revised_query"] == "Who wrote it?", \
    f"a '{{' that starts no JSON object is skipped, and the search goes on: {got['not_json']}"
### BEGIN HIDDEN TESTS
assert len(got["notebook"]) == len(ref["notebook"])
for text, mine, want in zip(ref["texts"], got["notebook"], ref["notebook"]):
    for name in score_keys:
        assert mine[name] == want[name], f"{name} of {text!r}: {mine[name]} vs {want[name]}"
    assert mine["judgment"] == want["judgment"] and mine["revised_query"] == want["revised_query"], text
assert got["gold"] == ref["gold"]
### END HIDDEN TESTS

# %% [markdown]
# ## 3. Do the scores separate correct from wrong answers?

# %%
verifs = [r.rounds[0].verification for r in records]
outcome = ["correct" if C.is_correct(r.first_answer, r.gold) else "wrong" for r in records]
fig, ax = plt.subplots(figsize=(9, 4))
plotting.scores_by_group({name: [getattr(v, name) for v in verifs] for name in C.SCORES}, outcome, ax=ax)
ax.set_ylabel("verifier score")
ax.set_title(f"Verifier scores for correct vs wrong answers ({S.base.name})")
plotting.caption(ax, model=S.checker.name, corpus=S.corpus_name, n=len(records))
results.save_figure(fig, "fig-08-verifier-scores", run=S, model=S.checker.name, corpus=S.corpus_name);  # ";": the plot shows, not the paths

# %% [markdown]
# ## 4. Judgment accuracy, format rate and parsing, per dataset (paper, Table 4 "w/ CoL": Jdg 60.0, Fmt 99.5)

# %%
ok_ids = {i for d in reachable.values() for i, ok in d.items() if ok}
ran = f"verifier: {C.run_label(S.checker.name)}"
if S.checker is not S.base:
    ran += f"; answers: {C.run_label(S.base.name)}"
paper_label = "CoV-RAG w/ CoL (fine-tuned)"
rows, intervals = [], {}
for n, recs in {**by_set, "all": records}.items():
    s = C.summarize(recs)
    f = C.question_flags(recs)
    on_answerable = [x for x, r in zip(f["single"], recs) if r.id in ok_ids]
    est = intervals[n] = {
        "accuracy": stats.mean_interval(f["single"], scale=100, seed=S.seed),
        "accuracy (answerable)": stats.mean_interval(on_answerable, scale=100, seed=S.seed),
        "Jdg": stats.mean_interval(f["judgment"], scale=100, seed=S.seed),
        "Jdg (true/false only)": stats.mean_interval(f["judgment_judged"], scale=100, seed=S.seed),
        "Fmt": stats.mean_interval(f["format"], scale=100, seed=S.seed),
        "parsed": stats.mean_interval(f["parsed"], scale=100, seed=S.seed),
    }
    row = {"dataset": n, "run": ran, "n": s["n"], "answerable": sum(r.id in ok_ids for r in recs)}
    for name, e in est.items():
        row[name] = None if e["n"] == 0 else e["value"]
        row[f"{name} 95% CI"] = stats.format_interval(e)
    row["n judged (true/false)"] = est["Jdg (true/false only)"]["n"]
    row.update({"σ fired": s["fired"], "unverified": s["unverified"],
                "paper Jdg": C.PAPER_TABLE4["w/ CoL"]["Jdg"], "paper Fmt": C.PAPER_TABLE4["w/ CoL"]["Fmt"]})
    rows.append(row)
table = C.table_frame(rows)
shown = results.save_table(table, "tab-08-verifier", run=S, model=S.checker.name, corpus=S.corpus_name,
                   note="answerable = a gold answer occurs somewhere in the corpus; ours: 95% bootstrap intervals over "
                        f"questions; paper Jdg / Fmt: {paper_label}, Table 4, "
                        f"ours ran {ran}", floatfmt=".1f")
report = C.parse_report(verifs)
print("repairs needed:", report["repairs"])
shown

# %% [markdown]
# ## 5. How often σ fires, condition by condition and in both modes

# %%
conditions = [C.sigma_conditions(v, S.thresholds) if v.parsed else None for v in verifs]
parsed = [c for c in conditions if c is not None]
sigma_flags = {name: [float(c[name]) for c in parsed]
               for name in (parsed[0] if parsed else C.sigma_conditions(C.Verification()))}
for mode in ("all", "any"):
    t = C.Thresholds(S.reference_correctness_max, S.correctness_below, S.bias_above, S.truthfulness_max, mode)
    sigma_flags[f"σ ({mode})"] = [float(C.sigma(v, t)) for v in verifs if v.parsed]  # unparsed never fire
sigma_rows = []
for name, flags in sigma_flags.items():
    est = stats.mean_interval(flags, scale=100, seed=S.seed)
    sigma_rows.append({"condition": name, "holds": int(sum(flags)), "of parsed": len(parsed),
                       "share %": est["value"] if flags else None, "share % 95% CI": stats.format_interval(est),
                       "_interval": est})
sigma_table = C.table_frame([{k: v for k, v in r.items() if k != "_interval"} for r in sigma_rows])
results.save_table(sigma_table, "tab-08-sigma", run=S, model=S.checker.name, floatfmt=".1f",
                   note=f"shares of the parsed verifications, 95% bootstrap intervals; {ran}")

# %% [markdown] nbgrader={"grade": false, "grade_id": "ex08-sigma-prompt", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ### Exercise 8 · The σ indicator
# Algorithm 1 retrieves again only when σ fires. Footnote 2's σ for a `C.Verification` `v` and
# thresholds `t` (`C.Thresholds`) has six conditions: `v.reference_correctness <= t.reference_correctness_max`,
# `v.judgment == "false"`, a non-blank `v.revised_query`, `v.correctness < t.correctness_below`,
# `v.bias > t.bias_above` and `v.truthfulness <= t.truthfulness_max`; a missing score (`None`) never
# satisfies its condition. Write `fires(v, t)`:
#
# * `False` for an output that could not be parsed (`not v.parsed`);
# * without the chain of scores (`v.chain` is False): judged false and a revised query;
# * `t.mode == "all"`: all six conditions; `t.mode == "any"`: a revised query and any one of the other five.

# %% nbgrader={"grade": false, "grade_id": "ex08-sigma-answer", "locked": false, "schema_version": 3, "solution": true, "task": false}
def fires(v, t) -> bool:
    """Whether σ sends the revised query back to retrieval."""
    ### BEGIN SOLUTION
    if not v.parsed:
        return False
    revised = bool(v.revised_query.strip())
    judged_false = v.judgment == "false"
    if not v.chain:
        return judged_false and revised

    def holds(x, test):
        return x is not None and test(x)

    others = [
        holds(v.reference_correctness, lambda x: x <= t.reference_correctness_max),
        judged_false,
        holds(v.correctness, lambda x: x < t.correctness_below),
        holds(v.bias, lambda x: x > t.bias_above),
        holds(v.truthfulness, lambda x: x <= t.truthfulness_max),
    ]
    return revised and (all(others) if t.mode == "all" else any(others))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex08-sigma-checks", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
import dataclasses

from covlib.runs import exercises

exercises.check_own_work(fires, "sigma", "sigma_conditions")  # your own code, not covlib's
low = C.Verification(reference_correctness=0.1, correctness=0.1, truthfulness=0.5, bias=0.9, judgment="false",
                     revised_query="a better query", status="ok")
any_mode = C.Thresholds(mode="any")
one = dataclasses.replace(low, correctness=0.9, bias=0.1, truthfulness=0.99, reference_correctness=0.9, judgment="true")
bare = C.Verification(judgment="false", revised_query="q", status="ok", chain=False)
strict = C.Thresholds(reference_correctness_max=0.05, correctness_below=0.05, bias_above=0.95, truthfulness_max=0.05)
got = exercises.record(
    "ex08-sigma",
    low=fires(low, C.PAPER_THRESHOLDS),
    unparsed=fires(C.Verification(status="failed"), C.PAPER_THRESHOLDS),
    unparsed_scores=fires(dataclasses.replace(low, status="failed"), C.PAPER_THRESHOLDS),
    blank_query=fires(dataclasses.replace(low, revised_query="  "), C.PAPER_THRESHOLDS),
    any_only_query=fires(one, any_mode),
    any_bias=fires(dataclasses.replace(one, bias=0.71), any_mode),
    any_judgment=fires(dataclasses.replace(one, judgment="false"), any_mode),
    any_no_query=fires(dataclasses.replace(low, revised_query=""), any_mode),
    missing_score=fires(dataclasses.replace(low, bias=None), C.PAPER_THRESHOLDS),
    at_the_edge=fires(dataclasses.replace(low, reference_correctness=0.27, truthfulness=0.92), C.PAPER_THRESHOLDS),
    correctness_edge=fires(dataclasses.replace(low, correctness=0.26), C.PAPER_THRESHOLDS),
    bias_edge=fires(dataclasses.replace(low, bias=0.7), C.PAPER_THRESHOLDS),
    bare=fires(bare, C.PAPER_THRESHOLDS),
    bare_true=fires(dataclasses.replace(bare, judgment="true"), any_mode),
    other_thresholds=fires(low, strict),
)
### BEGIN HIDDEN TESTS
sigma_modes = {mode: C.Thresholds(S.reference_correctness_max, S.correctness_below, S.bias_above, S.truthfulness_max, mode)
               for mode in ("all", "any")}
grid = [dataclasses.replace(low, reference_correctness=a, correctness=b, bias=c, truthfulness=d, judgment=j)
        for a in (None, 0.2, 0.5) for b in (None, 0.1, 0.5) for c in (None, 0.5, 0.9) for d in (None, 0.5, 0.95)
        for j in ("true", "false", None)]
got = exercises.record("ex08-sigma", notebook={mode: [fires(v, t) for v in verifs] for mode, t in sigma_modes.items()},
                       grid={mode: [fires(v, t) for v in grid] for mode, t in sigma_modes.items()})
ref = exercises.reference("ex08-sigma", verifs=[str(v) for v in verifs],
                          notebook={mode: [C.sigma(v, t) for v in verifs] for mode, t in sigma_modes.items()},
                          grid={mode: [C.sigma(v, t) for v in grid] for mode, t in sigma_modes.items()})
### END HIDDEN TESTS
# -- checks: on the recorded values (got: your answers; ref: covlib's), here and again by the grader
assert got["low"], "every condition holds"
assert not got["unparsed"], "an unparsed output never fires"
assert not got["unparsed_scores"], "an unparsed output never fires, whatever its fields say"
assert not got["blank_query"], "no revised query, nothing to retrieve"
assert not got["any_only_query"] and got["any_bias"], \
    "any: one condition is enough (bias 0.71 > 0.7), but the revised query alone is not one"
assert got["any_judgment"], "any: judged false is one of the five other conditions"
assert not got["any_no_query"], "any: without a revised query there is nothing to retrieve, whatever else holds"
assert not got["missing_score"], "a missing score never satisfies its condition"
assert got["at_the_edge"], "<= at the edge: reference_correctness 0.27 and truthfulness 0.92 satisfy theirs"
assert not got["correctness_edge"], "correctness must be below 0.26"
assert not got["bias_edge"], "bias must be above 0.7: 0.7 itself is not"
assert got["bare"] and not got["bare_true"], "w/o CoL"
assert not got["other_thresholds"], \
    "the thresholds come from t, not from footnote 2: with reference_correctness_max 0.05, 0.1 does not satisfy it"
### BEGIN HIDDEN TESTS
for mode in ("all", "any"):
    assert len(got["notebook"][mode]) == len(ref["notebook"][mode])
    for v, mine, want in zip(ref["verifs"], got["notebook"][mode], ref["notebook"][mode]):
        assert mine == want, f"{mode}: {v}"
    assert got["grid"][mode] == ref["grid"][mode], f"{mode}: the grid of conditions"
### END HIDDEN TESTS

# %%
headline = {
    "model": S.base.name,
    "verifier": S.checker.name,
    "corpus": S.corpus_name,
    "n": len(records),
    "datasets": {n: len(r) for n, r in by_set.items()},
    "answerable": {n: sum(v.values()) for n, v in reachable.items()},
    "run": ran,
    "accuracy_single": C.accuracy(records, first=True),
    "judgment": C.judgment_accuracy(records),
    "parse": report,
    "intervals": intervals,  # per dataset and "all": {"value", "low", "high", "n"} in % for every rate of the table
    "sigma": {row["condition"]: row["holds"] for row in sigma_rows},
    "sigma_share": {row["condition"]: row["_interval"] for row in sigma_rows},
    "paper": C.PAPER_TABLE4["w/ CoL"],
}
results.record_metrics("08_covrag_verifier", headline, run=S, model=S.base.name)
headline["parse"]
