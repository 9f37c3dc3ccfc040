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
# # 07 · Knowing what is missing: self-reflection and self-completion (credibility paper, Table 4)
#
# §5 adds two abilities to a retrieval-augmented model:
#
# - **self-reflection**: told to answer *or* say "I'm sorry, I cannot answer the question based
#   on the provided references", does the model refuse exactly when the references are partial?
#   Half the questions get complete references, half partial ones; refusal is the positive class
#   (accuracy and F1);
# - **self-completion**: when it refuses, the model writes queries starting "I further need to
#   ask the search engine:"; BM25 fetches passages for them, the reference list is filled up to
#   10, and the model answers again. The baseline answers from BM25's top 10 for the original
#   question. The paper finds self-completion helps ChatGPT and ChatGLM, not the weaker models.
#
# Our pipeline, where the paper is silent (`credibility.self_complete`): the model first reflects
# on BM25's top `k_initial` = 5 for the question; only a refusal triggers completion (Fig. 2's
# order); the queries' passages are interleaved, then the question's own ranking fills what is
# left, so both pipelines end with at most 10 references. `max_rounds` > 1 repeats
# ask-and-retrieve while the model keeps refusing (the paper: until it is satisfied; default 1).
# A reply without the marker has its first line searched (counted as `unmarked`).
#
# Corpus: the offline paragraph corpus (Adversarial HotpotQA and the HotpotQA sample, ~10k
# paragraphs) stands in for Wikipedia. Other deviations as in notebook 04.
#
# Outputs: `tables/tab-07-reflection-completion.*`, `results/07_reflection_completion.json`.

# %%
from collections import Counter

import pandas as pd

from covlib import credibility as C
from covlib import data, lm, profiles, results, retrieval

# %% tags=["parameters"]
profile: str = "auto"  # smoke, cpu, full or auto (full on a GPU, cpu otherwise)
model: str = ""  # hub id or local dir; empty for the embedded SmolLM2-135M-Instruct
models: str = ""  # comma-separated hub ids / dirs to compare; empty: `model` (full profile: the paper's open models)
device: str = ""  # cpu or cuda; empty picks cuda when available
questions: str = ""  # HotpotQA distractor file or hub id; empty for the shared 100-question dev sample
n_questions: int = 500  # questions (paper: 500 sampled from HotpotQA dev)
seed: int = 0  # question sample, reference order, complete/partial groups
n_refs: int = 5  # references in the reflection test (complete vs partial)
cap: int = 10  # references after completion, and the baseline's BM25 top-k (paper: 10)
k_initial: int = 5  # BM25 references the model reflects on before asking (ours; the paper does not say)
max_rounds: int = 1  # ask-and-retrieve rounds while the model still refuses (paper: 1)
key_facts: str = "supporting"  # supporting (gold sentences), llm (the paper's prompts) or llm+reviewed
judge: str = "minilm-fever-nli"  # the NLI oracle f; "true" is the paper's TRUE (T5-11B, GPU)
max_new_tokens: int = 160  # longest answer

# %%
profiles.check_parameters(n_questions=n_questions, seed=seed, n_refs=n_refs, cap=cap, k_initial=k_initial,
                          max_rounds=max_rounds, max_new_tokens=max_new_tokens)
profile = profiles.resolve(profile, device or None)
n_questions = profiles.pick(profile, full=n_questions, cpu=min(n_questions, 20), smoke=8)
max_new_tokens = profiles.pick(profile, full=max_new_tokens, cpu=min(max_new_tokens, 96), smoke=32)
cap, k_initial = profiles.pick(profile, full=(cap, k_initial), smoke=(min(cap, 6), min(k_initial, 3)))
model_ids = C.model_list(model, models, profile)
params = dict(profile=profile, models=model_ids, questions=questions or "shared sample", n_questions=n_questions,
              seed=seed, n_refs=n_refs, cap=cap, k_initial=k_initial, max_rounds=max_rounds, key_facts=key_facts,
              judge=judge, max_new_tokens=max_new_tokens)
print(profiles.describe(profile, n_questions=n_questions, cap=cap, k_initial=k_initial, models=model_ids))

# %%
examples = C.load_questions(questions, n_questions, seed)
generators = [lm.load_lm(m or None, device=device or None) for m in model_ids]
facts = C.build_key_facts(key_facts, examples, generators[0])
corpus = data.default_corpus()
bm25 = retrieval.load_or_build("bm25", corpus, "hotpot-corpus")
print(f"{len(examples)} questions; BM25 over {len(corpus)} paragraphs")

# %% [markdown]
# ## 1. Self-reflection: refuse on partial references, answer on complete ones

# %%
reflect_sets = C.reflection_sets(examples, n_refs, seed)
insufficient = [s.kind == "partial" for s in reflect_sets]
reflection = {}
for g in generators:
    replies = C.generate_answers(g, examples, reflect_sets, reflection=True, max_new_tokens=max_new_tokens,
                                 desc=f"reflect ({g.name})")
    reflection[g.name] = C.reflection_scores([C.is_refusal(a) for a in replies], insufficient)
    print(g.name, {k: round(v, 1) for k, v in reflection[g.name].items()})
    print("  e.g.", replies[0][:200])

# %% [markdown]
# ## 2. BM25 baseline (top 10 for the question) and self-completion

# %%
baseline_sets = C.bm25_references(bm25, examples, k=cap)
runs = C.answer_runs(generators, examples, {"baseline": baseline_sets}, max_new_tokens=max_new_tokens)
completed = {}
for g in generators:
    done = C.self_complete(g, examples, bm25, k_initial=k_initial, cap=cap, max_rounds=max_rounds,
                           max_new_tokens=max_new_tokens)
    completed[g.name] = done
    runs[(g.name, "completion")] = ([d.answer for d in done], [d.references for d in done])
    asked = [d for d in done if d.queries]
    print(f"{g.name}: refused on {sum(d.refused for d in done)}/{len(done)}; asked {len(asked)}; "
          f"rounds {dict(Counter(d.rounds for d in done))}; replies without the marker {sum(d.unmarked for d in done)}")
    for d in asked[:3]:
        print("  queries:", d.queries)

# %% [markdown]
# Both pipelines are scored together: one NLI call per metric.

# %%
names = [g.name for g in generators]
rows = C.score_runs(runs, examples, facts, judge)
summary = {key: C.summarize(r) for key, r in rows.items()}
judge_name = summary[(names[0], "baseline")]["judge"]
q = len(examples)
gold_found = {key: 100 * sum(len(r.gold) for r in refs) / (2 * q) for key, (_, refs) in runs.items()}

# %%
records = []
for n in names:
    b, c = summary[(n, "baseline")], summary[(n, "completion")]
    records.append({"source": "ours", "model": n, "BM25 P": b["P"], "BM25 R": b["R"], "BM25 F1": b["F1_of_means"],
                    "self-compl. P": c["P"], "self-compl. R": c["R"], "self-compl. F1": c["F1_of_means"],
                    "reflection Acc": reflection[n]["accuracy"], "reflection F1": reflection[n]["f1"],
                    "gold refs found (BM25 → compl.) %": f"{gold_found[(n, 'baseline')]:.0f} → "
                                                         f"{gold_found[(n, 'completion')]:.0f}", "n": q})
for m, v in C.PAPER_TABLE4.items():
    records.append({"source": "paper", "model": m, "BM25 P": v[0], "BM25 R": v[1], "BM25 F1": v[2],
                    "self-compl. P": v[3], "self-compl. R": v[4], "self-compl. F1": v[5], "reflection Acc": v[6],
                    "reflection F1": v[7], "gold refs found (BM25 → compl.) %": "", "n": 500})
table = pd.DataFrame(records)
results.save_table(table, "tab-07-reflection-completion", params=params, judge=judge_name,
                   key_facts=facts[0].author, corpus=f"offline paragraphs ({len(corpus)})", n=q, floatfmt=".2f")
table

# %%
headline = {
    "models": names,
    "judge": judge_name,
    "key_facts": facts[0].author,
    "n_questions": q,
    "corpus_size": len(corpus),
    "reflection": reflection,
    "baseline": {n: summary[(n, "baseline")] for n in names},
    "completion": {n: summary[(n, "completion")] for n in names},
    "completion_helps": {n: summary[(n, "completion")]["F1_of_means"] > summary[(n, "baseline")]["F1_of_means"]
                         for n in names},
    "refused": {n: sum(d.refused for d in completed[n]) for n in names},
    "rounds": {n: dict(Counter(d.rounds for d in completed[n])) for n in names},
    "unmarked_replies": {n: sum(d.unmarked for d in completed[n]) for n in names},
    "gold_refs_found": {f"{n} / {p}": v for (n, p), v in gold_found.items()},
    "paper": {"table4": C.PAPER_TABLE4},
}
results.record_metrics("07_reflection_completion", headline, params=params, judge=judge_name)
{k: headline[k] for k in ("reflection", "completion_helps", "refused", "rounds")}
