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
# # 10 · Training with the chain of verification: QA + verification multi-task LoRA (§2.2, Table 4)
#
# CoV-RAG trains one generator on two tasks at once (Eqs. 2-4): answering from references
# (L_QA = log p(y | x, k)) and verifying a (question, references, answer) triple by writing its
# scores, judgment and revised query (L_verification = log p(s_k, s_y, n, x' | x, k, y)). Table 4
# compares verification written **with** its chain of scores ("w/ CoL") and without it
# ("w/o CoL": judgment and revised query only) on judgment accuracy (Jdg), format rate (Fmt),
# single- and multi-iteration QA accuracy (Si, Mi) and the gain in reference accuracy (Dlt).
#
# Here, three adapters are trained the same way on the same training questions:
#
# * **QA only**: the WebGLM-like baseline (L_QA alone);
# * **QA + verification w/o CoL** and **QA + verification w/ CoL** (L_QA + L_verification).
#
# **Deviations (labelled).** The paper does not name its fine-tuning method or hyper-parameters;
# we use LoRA (`peft`, `covlib.generation.training.fine_tune_lora`, settings recorded in each adapter's
# card). Its labels came from GPT-4 then a distilled labeller over 24,824 QA and 22,170
# verification samples; offline we derive them from the gold answer (`covrag.gold_verification`)
# or, with `teacher=`, from any model covlib can load. Training questions are Adversarial
# HotpotQA's (their answers are in the offline corpus); the test questions are NQ and WebQ, and
# the data builder refuses any test question in training. With gold labels a wrong answer's revised
# query is only the question rewritten in the form Table 6 advises, so BM25 finds much the same
# references again: Mi and Dlt stay near Si and 0 by construction (a teacher model writes real
# revisions). The "w/o CoL" adapter writes only judgment and revised query: its Fmt is measured
# against that schema, and its σ is judgment false with a revised query (ours: the paper does not
# say). **The predictions the verifier learns to judge are the base model's, not a fine-tuned
# M1's**: the paper first fine-tunes M1 on the RAG QA data ("we employed Supervised Fine-Tuning
# (SFT) on RAG dataset to get M1 ... Then we harness M1 to produce predicted QA pairs for
# verifying", §2.2) and verifies M1's answers; ours come from the untuned base model, which errs
# more often and differently, so our verification pairs hold more wrong answers than the paper's.
# "Dlt" and Table 5's "retrieval accuracy" are read as the share of questions with a gold alias in
# the top-k references: ours, the paper does not define it. Revision win-rate ("Rev") needs GPT-4
# as a judge and is not computed. On a CPU the smoke and cpu profiles train a few steps on the
# embedded 135M model to show the losses fall; the full profile is for a GPU and a 7-13B model.
#
# **Uncertainty.** Every rate of Table 4 carries its n and a 95% bootstrap interval over the test
# questions; Dlt is a paired difference (after minus before revision, same questions). The claim
# `covrag-finetune-raises-judgment` is the judgment accuracy of the verification-trained adapter
# minus that of the **base model** (no adapter) on the same test questions, paired; the smoke profile
# does not run the base model (`evaluate_base`) and compares with the QA-only adapter instead (a
# model not trained to verify); the recorded scope says which.
#
# Outputs: `tables/tab-10-finetune.*`, `figures/fig-10-loss.*`, adapters under `build/adapters/`,
# `results/10_covrag_finetune.json`.

# %%
import matplotlib.pyplot as plt
import pandas as pd

from covlib import generation
from covlib import retrieval
from covlib.core import paths, stats, traces
from covlib.generation import training
from covlib.papers import covrag as C
from covlib.papers.covrag.notebook import setup
from covlib.runs import claims, plotting, profiles, results

# %% tags=["parameters"]
profile: str = "auto"  # smoke, cpu, full or auto (full on a GPU, cpu otherwise)
model: str = ""  # base model to fine-tune: hub id or local dir; empty for the embedded SmolLM2-135M-Instruct
device: str = ""  # cpu or cuda; empty picks cuda when available
teacher: str = ""  # verification labels from this model (hub id / dir); empty: from the gold answers
n_train: int = 308  # training questions (Adversarial HotpotQA; the paper: 24,824 QA + 22,170 verification samples)
test_datasets: str = "NQ,WebQ"  # evaluation sets (Table 4's QA columns)
n_test: int = 400  # test questions per dataset
corpus: str = ""  # DPR psgs_w100.tsv or {id, contents} JSONL; empty: the offline HotpotQA paragraphs; or a `make index` folder
k: int = 5  # references per question
seed: int = 0  # samples, LoRA initialisation, shuffling
chat: bool = False  # train and infer on raw prompts (a fine-tuned model learns the format itself)
lora_rank: int = 16  # LoRA r (ours: the paper names no method)
lora_alpha: int = 32  # LoRA alpha
learning_rate: float = 2e-4  # AdamW learning rate
epochs: float = 2.0  # passes over the training pairs
max_steps: int = -1  # stop after this many steps (-1: by epochs)
batch_size: int = 8  # pairs per step
max_length: int = 1024  # tokens per training pair (the prompt loses its start first)
max_new_tokens: int = 128  # longest answer at test time
verify_tokens: int = 160  # longest verification at test time
evaluate_base: bool = True  # also run the untuned base model on the test questions (the judgment claim's baseline)

# %%
S = setup("covrag-finetune", profile=profile, model=model, device=device, teacher=teacher, n_train=n_train,
          test_datasets=test_datasets, n_test=n_test, corpus=corpus, k=k, seed=seed, chat=chat, lora_rank=lora_rank,
          lora_alpha=lora_alpha, learning_rate=learning_rate, epochs=epochs, max_steps=max_steps,
          batch_size=batch_size, max_length=max_length, max_new_tokens=max_new_tokens, verify_tokens=verify_tokens,
          evaluate_base=evaluate_base)  # smoke: evaluate_base off, no model calls beyond the adapters'
traces.start("10_covrag_finetune")
profile, names, k, max_new_tokens, verify_tokens = S.profile, S.names, S.k, S.max_new_tokens, S.verify_tokens
max_steps, batch_size, learning_rate, max_length = S.max_steps, S.batch_size, S.learning_rate, S.max_length
evaluate_base, retriever, corpus_name, base, labeller = S.evaluate_base, S.retriever, S.corpus_name, S.base, S.labeller
params = dict(profile=profile, model=model or "embedded", teacher=teacher or "gold labels", n_train=S.n_train,
              test_datasets=names, n_test=S.n_test, corpus=corpus or "offline HotpotQA paragraphs", k=k, seed=seed,
              chat=chat, lora_rank=lora_rank, lora_alpha=lora_alpha, learning_rate=learning_rate, epochs=epochs,
              max_steps=max_steps, batch_size=batch_size, max_length=max_length, evaluate_base=evaluate_base)

# %% [markdown]
# ## 1. Training data from training questions only (QA pairs and verification pairs, with the leak check)
#
# The verification pairs judge **base-model predictions, not a fine-tuned M1's** (the paper's M1 is
# first fine-tuned on the RAG QA data; see the deviations above).

# %%
test_examples, train = S.examples, S.train
train_refs = retrieval.search_passages(retriever, [ex.question for ex in train], k)
predictions = C.answer_batch(base, [ex.question for ex in train], train_refs, max_new_tokens, chat,
                             desc="training predictions (base model, not a fine-tuned M1)",
                             golds=[ex.answers for ex in train], ids=[ex.id for ex in train])
all_test_questions = [ex.question for ex in test_examples]
with_chain = C.training_set(train, train_refs, predictions, test_questions=all_test_questions, teacher=labeller)
without_chain = C.training_set(train, train_refs, predictions, test_questions=all_test_questions, chain=False,
                               teacher=labeller)
print(f"{len(with_chain.qa)} QA pairs, {len(with_chain.verification)} verification pairs ({with_chain.labels}); "
      f"predictions judged: {C.run_label(base.name)} (base-model predictions, not a fine-tuned M1)")
print(with_chain.verification[0][1])

# %% [markdown]
# ## 2. Three adapters, trained the same way

# %%
base_dir = model or generation.embedded_model_dir()
adapters_dir = paths.build_dir() / "adapters"
variants = {  # name -> (folder slug, training pairs)
    "QA only (WebGLM-like)": ("qa-only", with_chain.qa),
    "QA + verification w/o CoL": ("qa-verify-no-chain", without_chain.multitask()),
    "QA + verification w/ CoL": ("qa-verify-chain", with_chain.multitask()),
}
cards, probes, probe_loss = {}, {}, {}
for name, (slug, pairs) in variants.items():
    rendered = [(base.render(p, chat), t) for p, t in pairs]
    probes[name] = rendered[:8]  # a fixed probe of this variant's own training pairs, scored before and after
    probe_loss[name] = {"before": training.target_loss(base.model, base.tokenizer, probes[name], max_length=max_length)}
    cards[name] = training.fine_tune_lora(
        rendered, base_dir, adapters_dir / f"10-{profile}-{slug}", rank=lora_rank, alpha=lora_alpha, epochs=epochs,
        max_steps=max_steps, batch_size=batch_size, learning_rate=learning_rate, max_length=max_length, seed=seed,
        card={"name": name, "labels": with_chain.labels})
    cards[name]["folder"] = str(adapters_dir / f"10-{profile}-{slug}")
    curve = cards[name]["loss_curve"]
    print(f"{name}: {cards[name]['steps']} steps, logged loss {curve[0][1]:.3f} -> {curve[-1][1]:.3f}")

# %%
fig, ax = plt.subplots(figsize=(6, 3.5))
for name, card in cards.items():
    steps, losses = zip(*card["loss_curve"])
    ax.plot(steps, losses, marker="o", markersize=3, label=name)
ax.set_xlabel("step")
ax.set_ylabel("training loss (target tokens)")
ax.set_title("LoRA fine-tuning of the verifier: training loss per step (§2.2)", fontsize=9)
ax.legend(fontsize=8)
plotting.caption(ax, model=base.name, labels=with_chain.labels, n=len(train))
results.save_figure(fig, "fig-10-loss", params=params, model=base.name)

# %% [markdown]
# ## 3. Table 4: each adapter on the test questions (Jdg, Fmt, Si, Mi, Dlt) with 95% intervals, the paper's rows beside ours
#
# Beside the table, the difference from the paper: its verifier learned to judge a QA-fine-tuned
# M1's answers; ours learned to judge the **base model's predictions, not a fine-tuned M1's**.
# Dlt is ours: the gain in the share of questions with a gold alias in the top-k references (the
# paper: "the difference in the accuracy of reference retrieved between SI and MI", undefined).

# %%
def fmt_row(name, what_ran, flags, s, extra):
    est = {"Jdg": stats.mean_interval(flags["judgment"], scale=100, seed=seed),
           "Fmt": stats.mean_interval(flags["format"], scale=100, seed=seed),
           "Si": stats.mean_interval(flags["single"], scale=100, seed=seed),
           "Mi": stats.mean_interval(flags["multi"], scale=100, seed=seed),
           "Dlt": stats.paired_difference(flags["reference_multi"], flags["reference_single"], scale=100, seed=seed)}
    row = {"method": name, "model": what_ran, "Rev": None}
    for key, e in est.items():
        row[key], row[f"{key} 95% CI"] = e["value"], stats.format_interval(e)
    return {**row, "σ fired": s["fired"], "n": s["n"], **extra}, est


evaluated = ({"base model, no adapter": None} if evaluate_base else {})
evaluated.update({name: card["folder"] for name, card in cards.items()})
rows, summaries, flags, intervals, ran = [], {}, {}, {}, {}
for name, folder in evaluated.items():
    tuned = base if folder is None else profiles.load_model(model, device, adapter=folder)
    extra = {"steps": 0}
    if folder is not None:
        probe_loss[name]["after"] = training.target_loss(tuned.model, tuned.tokenizer, probes[name],
                                                         max_length=max_length)
        extra = {"steps": cards[name]["steps"], "probe loss before": probe_loss[name]["before"],
                 "probe loss after": probe_loss[name]["after"]}
    records = C.cov_rag(tuned, test_examples, retriever, k=k, max_rounds=1, max_new_tokens=max_new_tokens,
                        verify_tokens=verify_tokens, chat=chat, chain="w/o CoL" not in name)
    summaries[name], flags[name], ran[name] = C.summarize(records), C.question_flags(records), C.run_label(tuned.name)
    row, intervals[name] = fmt_row(name, ran[name], flags[name], summaries[name], extra)
    rows.append(row)
for name, values in C.PAPER_TABLE4.items():
    rows.append({"method": f"paper: {name}", "model": "paper's fine-tuned CoV-RAG", **values})
table = C.table_frame(rows)
results.save_table(table, "tab-10-finetune", params=params, model=base.name, corpus=corpus_name,
                   labels=with_chain.labels,
                   note="Rev (GPT-4 win-rate) is not computed offline; the verification pairs judge base-model "
                        "predictions, not a fine-tuned M1's (the paper fine-tunes M1 on RAG QA first); Dlt: "
                        "ours, the gain in questions with a gold alias in the top-k (the paper: 'the difference in "
                        "the accuracy of reference retrieved between SI and MI'); ours: 95% bootstrap intervals "
                        "over test questions, Dlt paired", floatfmt=".1f")
table

# %% [markdown]
# ## 4. The claim: does verification training raise judgment accuracy? (paired over the test questions)

# %%
baseline = "base model, no adapter" if evaluate_base else "QA only (WebGLM-like)"
baseline_label = "the base model (no adapter)" if evaluate_base else "the QA-only adapter (not trained to verify)"
claim_records = []
for name in ("QA + verification w/ CoL", "QA + verification w/o CoL"):
    est = stats.paired_difference(flags[name]["judgment"], flags[baseline]["judgment"], scale=100, seed=seed)
    claim_records.append(claims.estimate(
        "covrag-finetune-raises-judgment", f"{name} adapter − {baseline_label}, {'+'.join(names)} test questions, "
        f"{with_chain.labels} labels", est, "judgment-accuracy points", model=ran[name], baseline=ran[baseline]))
pd.DataFrame([{"scope": r["scope"], "n": r["n"], "ours [95% CI]": stats.format_interval(r)} for r in claim_records])

# %%
headline = {
    "model": base.name,
    "labels": with_chain.labels,
    "predictions_judged_in_training": "base model (not a fine-tuned M1)",
    "n_train": len(train),
    "n_qa_pairs": len(with_chain.qa),
    "n_verification_pairs": len(with_chain.verification),
    "n_test": len(test_examples),
    "loss": {name: {"first": card["loss_curve"][0][1], "last": card["loss_curve"][-1][1], "steps": card["steps"]}
             for name, card in cards.items()},
    "probe_loss": probe_loss,  # mean target-token loss on 8 of each variant's training pairs, before and after
    "adapters": {name: card["folder"] for name, card in cards.items()},
    "table4": {row["method"]: {k: row.get(k) for k in ("Jdg", "Fmt", "Si", "Mi", "Dlt")} for row in rows},
    "intervals": intervals,  # per evaluated model: Jdg, Fmt, Si, Mi (%) and Dlt (paired), {"value", "low", "high", "n"}
    "claims": claim_records,
}
results.record_metrics("10_covrag_finetune", headline, params=params, model=base.name)
headline["probe_loss"]
