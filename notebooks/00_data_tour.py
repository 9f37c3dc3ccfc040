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
# # 00 · A tour of the data
#
# Every later notebook stands on the datasets and the retrieval corpus shown here.
# This notebook counts the records of each dataset in `../shared/data`, shows one
# example of each, plots paragraph lengths and question types, and measures how well
# three retrievers (BM25, DrQA-style TF-IDF, dense MiniLM) find the **supporting
# paragraphs** of Adversarial HotpotQA questions in the paragraph corpus (the union of
# every HotpotQA paragraph we have, deduplicated by title).
#
# Outputs: `figures/fig-00-*`, `tables/tab-00-*`, `results/00_data_tour.json`.

# %%
import collections

import matplotlib.pyplot as plt
import pandas as pd

from covlib import data, retrieval
from covlib.core import metrics
from covlib.report import plotting, results, tables
from covlib.runs import session
from covlib.runs.project import NOTEBOOKS

# %% tags=["parameters"]
profile: str = "auto"  # smoke, cpu, full or auto (full on a GPU, cpu otherwise)
model: str = ""  # generator (unused here: no LLM calls in the data tour)
device: str = ""  # cpu | cuda (unused here)
n_questions: int = 250  # Adversarial HotpotQA test questions scored for retrieval recall (paper's test split)
retrievers: str = "bm25,tfidf,dense"  # retrievers compared, comma-separated
ks: str = "1,2,5,10,20"  # cut-offs k for recall@k

# %%
S = session.start(NOTEBOOKS["00"], globals())

# %% [markdown]
# ## 1. What is there
# `data.available_datasets()` lists the shared files found on this machine; each
# dataset goes through its own loader into the one `Example` record type.

# %%
loaders = {
    "Adversarial HotpotQA (dev)": lambda: data.load_adv_hotpotqa(split="all"),
    "Adversarial HotpotQA (few-shot pool)": lambda: data.load_adv_hotpotqa(data.available_datasets()["adv_hotpotqa_fewshot"], split="all"),
    "HotpotQA distractor (sample)": data.load_hotpotqa,
    "2WikiMultihopQA (dev, questions only)": data.load_2wikimultihop,
    "FEVER (paper sample)": data.load_fever,
    "NQ-open (WebGLM 400)": data.load_nq_open,
    "WebQuestions (WebGLM 400)": data.load_web_questions,
}
datasets = {name: load() for name, load in loaders.items()}
counts = pd.DataFrame(
    [
        {
            "dataset": name,
            "records": len(exs),
            "with paragraphs": sum(bool(e.paragraphs) for e in exs),
            "paragraphs / record": round(sum(len(e.paragraphs) for e in exs) / len(exs), 2),
            "answers / record": round(sum(len(e.answers) for e in exs) / len(exs), 2),
            "labels": ", ".join(f"{k}: {v}" for k, v in sorted(collections.Counter(e.label for e in exs if e.label).items())),
        }
        for name, exs in datasets.items()
    ]
)
results.save_table(counts, "tab-00-datasets", run=S, floatfmt=".2f")

# %% [markdown]
# One example of each, as the loaders see it:

# %%
for name, exs in datasets.items():
    e = exs[0]
    print(f"--- {name}  [{e.id}]")
    print("Q:", e.question)
    print("gold:", e.answers[:3] or e.label)
    if e.paragraphs:
        p = e.paragraphs[0]
        print(f"paragraph 1/{len(e.paragraphs)}: {p.title!r} (supporting={p.is_supporting}): {p.text[:160]}...")
    print()

# %% [markdown]
# ## 2. Paragraph lengths and question types

# %%
rows = [
    {"dataset": name.split(" (")[0], "words": len(p.text.split())}
    for name, exs in datasets.items()
    if "few-shot" not in name
    for e in exs
    for p in e.paragraphs
]
lengths = pd.DataFrame(rows)
fig, ax = plt.subplots(figsize=(7, 4))
for name, group in lengths.groupby("dataset"):
    plotting.hist(group["words"], ax=ax, bins=range(0, 400, 10), alpha=0.5, label=f"{name} (n={len(group)})", density=True)
ax.set_xlabel("words per paragraph")
ax.set_title("Paragraph length per dataset (words, each dataset normalised)")
ax.legend()
plotting.caption(ax, n=len(lengths))
results.save_figure(fig, "fig-00-paragraph-lengths", run=S);  # ";": the plot shows, not the paths


# %%
def question_type(question: str) -> str:
    """The wh-word (or first word) of a question; claims are 'claim'."""
    words = question.lower().replace("?", "").split()
    for w in words[:3]:
        if w in ("what", "which", "who", "whom", "whose", "where", "when", "how", "why", "is", "are", "was", "were", "did", "do", "does"):
            return "yes/no" if w in ("is", "are", "was", "were", "did", "do", "does") else w
    return "other"


types = pd.DataFrame(
    [
        {"dataset": name.split(" (")[0], "type": "claim" if e.label else question_type(e.question)}
        for name, exs in datasets.items()
        if "few-shot" not in name
        for e in exs
    ]
)
share = types.groupby("dataset")["type"].value_counts(normalize=True).rename("share").reset_index()
fig, ax = plt.subplots(figsize=(8, 4))
pivot = share.pivot(index="dataset", columns="type", values="share").fillna(0)
pivot.plot.barh(stacked=True, ax=ax, width=0.8)
ax.set_xlabel("share of questions")
ax.set_title("Question types per dataset (wh-word, yes/no or claim)")
ax.legend(bbox_to_anchor=(1.01, 1), loc="upper left", fontsize="small")
plotting.caption(ax, n=len(types))
results.save_figure(fig, "fig-00-question-types", run=S);  # ";": the plot shows, not the paths

# %% [markdown]
# ## 3. Retrieval recall of the supporting paragraphs
# The corpus is the union of the HotpotQA paragraphs (`data.default_corpus()`); the
# adversarial paragraphs of Ye & Durrett are in it too (title `added`), so they compete
# with the gold ones. Recall@k = share of a question's supporting paragraphs found in the top k.
# Indexes are built once and persisted under `.cache/indexes`.

# %%
corpus = data.default_corpus()
questions = data.load_adv_hotpotqa(split="test")[:S.n_questions]
gold = [e.supporting_titles for e in questions]
print(f"corpus: {len(corpus)} passages; questions: {len(questions)}")

recalls, both = {}, {}
for kind in S.retrievers:
    index = retrieval.load_or_build(kind, corpus, name="hotpot-corpus")
    hits = index.search_batch([e.question for e in questions], k=max(S.ks), progress=True)
    ranked = [[h.passage.title for h in hs] for hs in hits]
    recalls[index.name] = metrics.recall_at_k(ranked, gold, ks=S.ks)
    both[index.name] = metrics.all_recall_at_k(ranked, gold, ks=S.ks)

table = pd.DataFrame(
    [{"retriever": name, "k": k, "recall@k": r[k], "all gold in top k": both[name][k]} for name, r in recalls.items() for k in S.ks]
)
results.save_table(table, "tab-00-retrieval-recall", run=S, corpus_size=len(corpus), n=len(questions))
tables.present(table.pivot(index="retriever", columns="k", values="recall@k").reset_index(),
               caption=f"recall@k by k, {len(questions)} questions, {len(corpus)} passages")

# %%
ax = plotting.recall_curve(recalls)
ax.set_title("Supporting-paragraph recall on Adversarial HotpotQA (test split)")
plotting.caption(ax, corpus=f"{len(corpus)} HotpotQA paragraphs", n=len(questions))
results.save_figure(ax.figure, "fig-00-retrieval-recall", run=S);  # ";": the plot shows, not the paths

# %% [markdown]
# ## 4. Headline numbers (read by the tests)

# %%
headline = {
    "n_records": {name: len(exs) for name, exs in datasets.items()},
    "corpus_size": len(corpus),
    "n_questions": len(questions),
    "recall_at_k": {name: {str(k): v for k, v in r.items()} for name, r in recalls.items()},
}
results.record_metrics("00_data_tour", headline, run=S)
headline
