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
# # 05 · More noise, less recall: the knowledge-precision sweep (credibility paper, Fig. 3)
#
# §6.3 keeps both gold references and adds distractors, from 2 references (all signal) to 10
# (8 of them noise), and plots key-fact recall. The paper finds every model losing recall as
# noise grows; from 5 to 10 references ChatGPT loses 4.3% (relative), ChatGLM 14.3%, LLaMA and
# Vicuna about 30%.
#
# Our reference sets are nested: each question's distractors are drawn once in a seeded order
# and the first k are added, so going from n to n+1 references adds one distractor and changes
# nothing else (`credibility.with_gold`). The 5-reference answers are the same prompts as
# notebook 04's, so they come from the cache.
#
# Deviations as in notebook 04 (question sample, key facts, judge, model).
#
# Outputs: `figures/fig-05-knowledge-precision.*`, `tables/tab-05-knowledge-precision.*`,
# `results/05_knowledge_precision.json`.

# %%
import matplotlib.pyplot as plt
import pandas as pd

from covlib import credibility as C
from covlib import lm, plotting, profiles, results

# %% tags=["parameters"]
profile: str = "auto"  # smoke, cpu, full or auto (full on a GPU, cpu otherwise)
model: str = ""  # hub id or local dir; empty for the embedded SmolLM2-135M-Instruct
models: str = ""  # comma-separated hub ids / dirs to compare; empty: `model` (full profile: the paper's open models)
device: str = ""  # cpu or cuda; empty picks cuda when available
questions: str = ""  # HotpotQA distractor file or hub id; empty for the shared 100-question dev sample
n_questions: int = 500  # questions (paper: 500 sampled from HotpotQA dev)
seed: int = 0  # question sample, reference order and distractor choice
n_refs: str = "2,3,4,5,6,7,8,9,10"  # reference counts, 2 gold + noise (paper: 2 to 10)
key_facts: str = "supporting"  # supporting (gold sentences), llm (the paper's prompts) or llm+reviewed
judge: str = "minilm-fever-nli"  # the NLI oracle f; "true" is the paper's TRUE (T5-11B, GPU)
max_new_tokens: int = 160  # longest answer

# %%
profiles.check_parameters(n_questions=n_questions, seed=seed, max_new_tokens=max_new_tokens)
profile = profiles.resolve(profile, device or None)
n_questions = profiles.pick(profile, full=n_questions, cpu=min(n_questions, 20), smoke=8)
max_new_tokens = profiles.pick(profile, full=max_new_tokens, cpu=min(max_new_tokens, 96), smoke=32)
sizes = sorted(profiles.split_list("n_refs", n_refs, cast=int))
profiles.check_parameters(n_refs=min(sizes))
sizes = profiles.pick(profile, full=sizes, cpu=[n for n in sizes if n in (2, 5, 10)] or sizes, smoke=[2, 5])
model_ids = C.model_list(model, models, profile)
params = dict(profile=profile, models=model_ids, questions=questions or "shared sample", n_questions=n_questions,
              seed=seed, n_refs=sizes, key_facts=key_facts, judge=judge, max_new_tokens=max_new_tokens)
print(profiles.describe(profile, n_questions=n_questions, n_refs=sizes, models=model_ids))
plotting.set_style()

# %% [markdown]
# ## 1. Nested reference sets, 2 gold + k distractors

# %%
examples = C.load_questions(questions, n_questions, seed)
generators = [lm.load_lm(m or None, device=device or None) for m in model_ids]
facts = C.build_key_facts(key_facts, examples, generators[0])
sets = {n: [C.with_gold(ex, n, seed, kind="noise") for ex in examples] for n in sizes}
for n in sizes:
    print(n, "refs:", [p.title for p in sets[n][0].paragraphs], "gold at", sets[n][0].gold)

# %% [markdown]
# ## 2. Answers (one batched call per model over every size) and one NLI call per metric

# %%
runs = C.answer_runs(generators, examples, sets, max_new_tokens=max_new_tokens)
rows = C.score_runs(runs, examples, facts, judge)
names = [g.name for g in generators]
summary = {name: {n: C.summarize(rows[(name, n)]) for n in sizes} for name in names}
judge_name = summary[names[0]][sizes[0]]["judge"]
q = len(examples)

# %%
table = pd.DataFrame([{"model": name, "n_refs": n, "noise": n - 2, "R": s["R"], "P": s["P"], "F1": s["F1_of_means"],
                       "SC (cited sents)": s["SC_cited"], "CitP": s["CitP"], "EM-recall": s["EM_recall"],
                       "n": s["n"]} for name, by_n in summary.items() for n, s in by_n.items()])
results.save_table(table, "tab-05-knowledge-precision", params=params, judge=judge_name, key_facts=facts[0].author,
                   n=q, floatfmt=".2f")
table

# %%
fig, ax = plt.subplots(figsize=(7, 4))
plotting.recall_curve({name: {n: s["R"] for n, s in by_n.items()} for name, by_n in summary.items()}, ax=ax,
                      xlabel="references (2 gold + noise)", ylabel="key-fact recall (%)")
ax.set_title("Key-fact recall as noise grows (cf. the paper's Fig. 3)")
ax.annotate("paper, 5 → 10 refs: ChatGPT −4.3%, ChatGLM −14.3%, LLaMA / Vicuna ≈ −30% (relative)",
            (0.01, 0.02), xycoords="axes fraction", fontsize=7, color="0.3")
plotting.caption(ax, judge=judge_name, key_facts=facts[0].source, n=q)
results.save_figure(fig, "fig-05-knowledge-precision", params=params, judge=judge_name)

# %% [markdown]
# ## 3. The drop from 5 to 10 references, beside the paper's

# %%
drops = {}
for name, by_n in summary.items():
    if 5 in by_n and 10 in by_n and by_n[5]["R"] > 0:
        drops[name] = 100 * (by_n[5]["R"] - by_n[10]["R"]) / by_n[5]["R"]
print("relative recall drop 5 → 10 refs (ours):", {k: round(v, 1) for k, v in drops.items()} or "not measured")
print("paper:", C.PAPER_RECALL_DROP_5_TO_10)
falling = {name: by_n[sizes[0]]["R"] >= by_n[sizes[-1]]["R"] for name, by_n in summary.items()}
print(f"recall at {sizes[-1]} refs ≤ recall at {sizes[0]} refs:", falling)

# %%
headline = {
    "models": names,
    "judge": judge_name,
    "key_facts": facts[0].author,
    "n_questions": q,
    "n_refs": sizes,
    "recall": {name: {n: s["R"] for n, s in by_n.items()} for name, by_n in summary.items()},
    "precision": {name: {n: s["P"] for n, s in by_n.items()} for name, by_n in summary.items()},
    "drop_5_to_10": drops,
    "recall_falls_with_noise": falling,
    "paper": {"drop_5_to_10": C.PAPER_RECALL_DROP_5_TO_10},
}
results.record_metrics("05_knowledge_precision", headline, params=params, judge=judge_name)
headline["recall"]
