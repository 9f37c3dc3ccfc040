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
# # 12 · The claims ledger: what the three papers claim, and what our runs say
#
# Every directional claim of the three papers (`covlib.runs.claims.CLAIMS`), the paper's own evidence,
# and our estimate of it as notebooks 01-11 recorded it: a difference (or a correlation) between
# two settings on the same questions, oriented so that the paper's claim says "> 0", with its
# 95% paired bootstrap interval and n. The verdict is read off the interval:
#
# | verdict | when |
# |---|---|
# | `supported` | the whole interval lies above 0 (at or above, for an "at least" claim) |
# | `contradicted` | the whole interval lies below 0 |
# | `inconclusive at this n` | the interval holds 0: at this many questions, our run cannot tell |
# | `not testable here` | what ran cannot test it (one model, no human ratings, the notebook has not run) |
#
# A verdict is about **what ran** (model, judge, corpus, profile: all shown): on the embedded 135M
# model and a few dozen questions most claims are `inconclusive at this n`, and that is the
# honest answer, not a failure. The same notebook, run after `make reproduce` with a 7B-13B model
# on a GPU, gives that model's ledger without edits.
#
# Outputs: `tables/tab-12-claims.*`, `figures/fig-12-claims.*`, `results/12_claims.json`.

# %%
import collections

import matplotlib.pyplot as plt
import pandas as pd

from covlib.core import metrics
from covlib.runs import claims, plotting, profiles, results

# %% tags=["parameters"]
profile: str = "auto"  # smoke, cpu, full or auto: recorded with the ledger (this notebook runs no model)
model: str = ""  # unused: the ledger reads what notebooks 01-11 recorded, with their models
device: str = ""  # unused
results_folder: str = ""  # folder of the results JSON of notebooks 01-11; empty: this project's results/

# %%
profiles.check_parameters()  # no numeric parameter: nothing to check but the profile
profile = profiles.resolve(profile, device or None)
params = dict(profile=profile, results_folder=results_folder or "results/")
recorded = claims.read_results(results_folder or None)
rows = claims.collect(recorded)
ran = {name: (r.get("params", {}).get("profile"), r.get("meta", {}).get("model")) for name, r in recorded.items()
       if any(name == c.notebook for c in claims.CLAIMS)}
print(f"{len(claims.CLAIMS)} claims; results of {len(ran)} notebooks found: "
      + ", ".join(f"{n} ({p}, {m or 'no model'})" for n, (p, m) in sorted(ran.items())))
if len({p for p, _ in ran.values()}) > 1:
    print("note: the notebooks ran in different profiles; each row names its own")
plotting.set_style()

# %% [markdown]
# ## The ledger

# %%
ledger = pd.DataFrame(rows)
ledger["ours [95% CI]"] = [metrics.format_interval({"value": r["ours"], "low": r["low"], "high": r["high"]}, 2)
                           if isinstance(r["ours"], (int, float)) else "—" for r in rows]
table = ledger[["paper", "claim", "paper evidence", "scope", "measure", "unit", "ours [95% CI]", "n", "verdict",
                "reason", "model", "profile"]]
results.save_table(table, "tab-12-claims", params=params, profile=profile)
pd.set_option("display.max_colwidth", 80)
table

# %% [markdown]
# The same estimates as a picture: each row one estimate with its interval; the vertical line is
# "no difference". Rows without an estimate (not testable here) are left out of the plot.

# %%
ax = claims.plot_ledger(rows)
ax.set_title(f"Claims of the three papers: our estimates ({profile} profile)")
results.save_figure(ax.figure, "fig-12-claims", params=params, profile=profile)

# %%
counts = collections.Counter(r["verdict"] for r in rows)
by_claim = collections.Counter()
for c in claims.CLAIMS:
    verdicts = {r["verdict"] for r in rows if r["id"] == c.id}
    by_claim[verdicts.pop() if len(verdicts) == 1 else "mixed"] += 1
headline = {
    "n_claims": len(claims.CLAIMS),
    "n_estimates": len(rows),
    "verdicts": dict(counts),
    "claims_by_verdict": dict(by_claim),
    "ledger": [{k: r[k] for k in ("id", "scope", "ours", "low", "high", "n", "unit", "verdict", "reason", "model",
                                  "profile")} for r in rows],
    "notebooks": {n: {"profile": p, "model": m} for n, (p, m) in ran.items()},
}
results.record_metrics("12_claims", headline, params=params, profile=profile)
headline["verdicts"]
