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
# Verify-and-Edit (Zhao et al., ACL 2023, §3.1 and §5.1) edits only the predictions whose
# **self-consistency** is low: it samples `n = 5` chain-of-thought (CoT) paths at temperature
# 0.7, takes the most consistent answer, and calls the prediction *uncertain* when its
# consistency is below ⌈n/2⌉ = 3. That rests on one hypothesis, which Fig. 2 of the paper checks
# with kernel density plots on Adversarial HotpotQA: **incorrect predictions have low
# consistency, correct ones high**.
#
# Here we run CoT-SC with the 6-shot prompt of Appendix C on the 250-question test split and
# plot the same densities, for both forms of consistency that `covlib.prompting` stores on one
# scale [0, n]:
#
# * **majority**: how many of the n paths give the chosen answer (what ReAct thresholds);
# * **wang**: Wang et al.'s answer probability marginalised over the sampled rationales
#   (path weights from their mean token log-probabilities), rescaled to [0, n] so that the
#   threshold ⌈n/2⌉ means "less than a majority" on both.
#
# Outputs: `figures/fig-01-consistency-kde.*`, `tables/tab-01-consistency.*`, `results/01_consistency_kde.json`.

# %%
import math

import matplotlib.pyplot as plt
import pandas as pd

from covlib import data, lm, metrics, plotting, profiles, prompting, results

# %% tags=["parameters"]
profile: str = "auto"  # smoke, cpu, full or auto (full on a GPU, cpu otherwise)
model: str = ""  # hub id or local dir; empty for the embedded SmolLM2-135M-Instruct
device: str = ""  # cpu or cuda; empty picks cuda when available
n_questions: int = 250  # Adversarial HotpotQA test questions (paper: all 250)
n_samples: int = 5  # self-consistency paths (paper: 5)
temperature: float = 0.7  # sampling temperature (paper: 0.7)
seed: int = 0  # sampling seed
max_new_tokens: int = 96  # longest CoT completion

# %%
profiles.check_parameters(n_questions=n_questions, n_samples=n_samples, temperature=temperature, seed=seed,
                          max_new_tokens=max_new_tokens)
profile = profiles.resolve(profile, device or None)
n_questions = profiles.pick(profile, full=n_questions, cpu=min(n_questions, 60), smoke=12)
max_new_tokens = profiles.pick(profile, full=max_new_tokens, smoke=64)
threshold = math.ceil(n_samples / 2)
params = dict(profile=profile, n_questions=n_questions, n_samples=n_samples, temperature=temperature,
              seed=seed, max_new_tokens=max_new_tokens, threshold=threshold)
print(profiles.describe(profile, n_questions=n_questions, max_new_tokens=max_new_tokens))
plotting.set_style()

# %% [markdown]
# ## 1. CoT self-consistency on the test split
# One batched, cached call: re-running this cell (or notebook 02 / 03, which use the same
# predictions) runs no model.

# %%
generator = lm.load_lm(model or None, device=device or None)
examples = data.load_adv_hotpotqa(split="test")[:n_questions]
cot_sc = prompting.run_cot_sc(generator, examples, "hotpotqa", n=n_samples, temperature=temperature,
                              seed=seed, max_new_tokens=max_new_tokens)
summary = prompting.summarize(cot_sc)
print(f"{generator.name}: CoT-SC EM {summary['accuracy']:.1f}% on {len(cot_sc)} questions; "
      f"{summary['parse_failures']} of {summary['paths']} paths had no 'The answer is'")

# %% [markdown]
# One question, its five paths and the vote:

# %%
r = cot_sc[0]
print("Q:", r.question, "| gold:", r.gold[0])
for text, answer in zip(r.texts, r.answers):
    print(f"  [{answer!s:>20}] {text.strip()[:150]}")
print(f"prediction: {r.prediction!r}; majority {r.majority}/{r.n}; wang {r.wang:.2f}/{r.n}")

# %% [markdown]
# ## 2. Consistency of correct vs incorrect predictions (Fig. 2)

# %%
frame = pd.DataFrame(
    {"correct": ["correct" if x.correct else "incorrect" for x in cot_sc],
     "majority": [x.majority for x in cot_sc], "wang": [x.wang for x in cot_sc]}
)
fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=False)
for ax, kind in zip(axes, ("wang", "majority")):
    plotting.kde_by_group(frame[kind], frame["correct"], ax=ax)
    ax.axvline(threshold, color="0.3", ls="--", lw=1)
    ax.annotate(f"threshold ⌈n/2⌉ = {threshold}", (threshold, 0.97), xycoords=("data", "axes fraction"),
                ha="left", va="top", fontsize=8, xytext=(3, 0), textcoords="offset points")
    ax.set_xlabel(f"consistency ({kind}, 0..{n_samples})")
    ax.set_title({"wang": "Wang et al. score (path-probability weighted)", "majority": "majority count"}[kind])
    for offset, (label, group) in enumerate(frame.groupby("correct")):  # the points themselves, as a rug
        ax.plot(group[kind], [-0.02 - 0.03 * offset] * len(group), "|", ms=10, transform=ax.get_xaxis_transform(),
                color=f"C{0 if label == 'incorrect' else 1}", clip_on=False)
    ax.set_xlim(-0.5, n_samples + 0.5)  # the kernel spreads past 0..n, as in the paper's figure
plotting.caption(axes[0], model=generator.name, n=len(cot_sc))
plotting.caption(axes[1], "paper (Fig. 2, GPT-3): incorrect skewed low, correct high")
fig.suptitle("Consistency of CoT-SC predictions on Adversarial HotpotQA, correct vs incorrect (cf. Fig. 2)")
results.save_figure(fig, "fig-01-consistency-kde", params=params, model=generator.name, n=len(cot_sc))

# %% [markdown]
# ## 3. How well does the threshold separate them?
# The paper's claim: most incorrect predictions fall below ⌈n/2⌉, most correct ones at or above.

# %%
rows = []
for kind in ("wang", "majority"):
    wrong = frame[frame.correct == "incorrect"][kind]
    right = frame[frame.correct == "correct"][kind]
    r_pb, p_pb = metrics.point_biserial([x.correct for x in cot_sc], frame[kind])
    rows.append({
        "consistency": kind,
        "incorrect below threshold": (wrong < threshold).mean() if len(wrong) else float("nan"),
        "correct at/above threshold": (right >= threshold).mean() if len(right) else float("nan"),
        "mean (incorrect)": wrong.mean(), "mean (correct)": right.mean(),
        "point-biserial r": r_pb, "p": p_pb,
        "n correct": len(right), "n incorrect": len(wrong),
    })
table = pd.DataFrame(rows)
results.save_table(table, "tab-01-consistency", params=params, model=generator.name, n=len(cot_sc))
table

# %% [markdown]
# Paper, for reference (GPT-3 text-davinci-003, Table 1): CoT-SC EM 31.2% on this split; Fig. 2
# shows incorrect predictions concentrated below 3 and correct ones above. A 135M model is
# mostly wrong, so the "correct" density rests on few points: read its shape with care.

# %%
headline = {
    "model": generator.name,
    "n_examples": len(cot_sc),
    "cot_sc_em": summary["accuracy"],
    "parse_failures": summary["parse_failures"],
    "paths": summary["paths"],
    "threshold": threshold,
    "consistency": {row["consistency"]: {k: row[k] for k in ("incorrect below threshold", "correct at/above threshold",
                                                             "mean (incorrect)", "mean (correct)", "point-biserial r")}
                    for row in rows},
    "paper": {"cot_sc_em": 31.2, "source": "Verify-and-Edit Table 1 (text-davinci-003)"},
}
results.record_metrics("01_consistency_kde", headline, params=params, model=generator.name)
headline
