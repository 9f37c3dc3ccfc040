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
# What do our runs say about each directional claim of the three papers? One ledger sets every claim, with the
# paper's sentence and evidence, beside our estimate as notebooks 01-11 recorded it (the tests, and what a
# verdict is about: below the parameters).

# %%
import pandas as pd

from covlib.core import stats
from covlib.papers.covrag import claims as covrag_claims
from covlib.papers.credibility import claims as credibility_claims
from covlib.papers.credibility.key_facts import AGENT_KEY_FACTS_PROVENANCE
from covlib.papers.verify_edit import claims as verify_edit_claims
from covlib.report import claims, ledger_page, results, tables
from covlib.runs import session
from covlib.runs.project import NOTEBOOKS

# %% tags=["parameters"]
profile: str = "auto"  # smoke, cpu, full or auto: recorded with the ledger (this notebook runs no model)
model: str = ""  # unused: the ledger reads what notebooks 01-11 recorded, with their models
device: str = ""  # unused
results_folder: str = ""  # folder of the results JSON of notebooks 01-11; empty: this project's results/

# %%
S = session.start(NOTEBOOKS["12"], globals())
CLAIMS = verify_edit_claims.CLAIMS + credibility_claims.CLAIMS + covrag_claims.CLAIMS  # the three papers', in order
recorded = claims.read_results(S.results_folder or None)
rows = claims.collect(recorded, CLAIMS)
ran = {name: (r.get("params", {}).get("profile"), r.get("meta", {}).get("model")) for name, r in recorded.items()
       if any(name == c.notebook for c in CLAIMS)}
print(f"{len(CLAIMS)} claims; results of {len(ran)} notebooks found: "
      + ", ".join(f"{n} ({p}, {m or 'no model'})" for n, (p, m) in sorted(ran.items())))
if len({p for p, _ in ran.values()}) > 1:
    print("note: the notebooks ran in different profiles; each row names its own")

# %% [markdown]
# ## What this notebook measures
#
# Every directional claim of the three papers (`CLAIMS` of `covlib.papers.<paper>.claims`: data in
# each paper's package, with the paper's own sentence), the paper's evidence, and our estimate as
# notebooks 01-11 recorded it: a difference (or a correlation) between two settings on the same
# questions, oriented so that the paper's claim says "> 0", with the test that fits the data:
# paired 0/1 outcomes (EM, accuracy) get the exact McNemar test (discordant counts, fragility,
# Newcombe's interval); paired means a sign-flip permutation p; two AUCs a paired bootstrap;
# correlations a Fisher-z interval. How a verdict is read: section "The ledger" below.
#
# A verdict is about **what ran** (model, judge, corpus, profile: all shown): on the embedded 135M
# model and a few dozen questions most claims are `inconclusive at this n`, and that is the
# honest answer, not a failure. The same notebook, run after `make reproduce` with a 7B-13B model
# on a GPU, gives that model's ledger without edits.
#
# Outputs: `tables/tab-12-claims.*`, `figures/fig-12-claims.*`, `results/12_claims.json`.

# %% [markdown]
# ## The ledger
# First the primary rows (one verdict per claim and model), then every row with its test.
#
# **One verdict per claim (and model).** Each claim declares, before any run, its primary setting
# (the paper's headline one); the verdict comes from that row alone, at p < 0.05 two-sided. Every
# other setting is a secondary row, its p Holm-adjusted over the claim's secondary rows. A row
# that repeats another claim's comparison on the same questions points to it and is counted once;
# a row on a near-oracle corpus (the questions' own gold paragraphs) reads `near-oracle: shown, not
# counted`: a label, not a verdict (its reason says what its test alone would read).
#
# | verdict | when |
# |---|---|
# | `supported` | p < 0.05, the 95% interval clear of 0, the difference with the paper's sign |
# | `contradicted` | the same, with the other sign |
# | `inconclusive at this n` | p ≥ 0.05 (or p and interval disagree: the row says which test decides): with the n at which the paper's own effect would be detected with 80% power (for paired 0/1 outcomes a range over how many questions change, the least of them a minimum), and whether `full` runs that many |
# | `not testable here` | what ran cannot test it: nothing ran, the step the claim is about never ran, both arms at the floor (nothing measured), the model is outside the claim's scope, no human ratings, no interval (a correlation of fewer than 4 models) |
#
# Each paired 0/1 row also gives its **fragility**: the fewest questions whose outcome, changed in
# one setting, would flip its verdict. A verdict with fragility 1 is not a finding.

# %%
summary = claims.summary(rows)
print(ledger_page.summary_text(summary["n_primary"], summary["n_secondary"], summary["n_tests"]) + " Primary verdicts: "
      + ", ".join(f"{v} {k}" for k, v in summary["primary_verdicts"].items())
      + f"; {summary['n_same_comparison']} primary rows repeat another claim's comparison (counted there); "
      f"{summary['n_fragile']} supported or contradicted primary verdicts have fragility 1 (not findings)")
for behaviour, counts in summary["simulated_verdicts"].items():
    print(f"simulated model ({behaviour}), not counted above: it checks the measuring chain, not the papers: "
          + ", ".join(f"{v} {k}" for k, v in counts.items()))
print("\n".join(claims.READING))  # how a verdict is read: the table above; the scopes' notes: under the ledger
page, notes = ledger_page.page_rows(rows, {AGENT_KEY_FACTS_PROVENANCE: "agents"})  # the provenance once, as a note
ledger = pd.DataFrame(page)
ledger["ours [95% CI]"] = [stats.format_interval({"value": r["ours"], "low": r["low"], "high": r["high"]}, 2)
                           + ("" if r["interval_agrees"] else " (approximate: the test decides)")
                           if isinstance(r["ours"], (int, float)) else "—" for r in rows]
ledger["fragility"] = ledger["fragility"].astype("Int64")
ledger["better / worse"] = [f"{r['better']} / {r['worse']}" if r.get("better") is not None else "" for r in rows]
ledger["p (Holm)"] = ledger["p_holm"]  # p and p (Holm) stay numbers: the table path formats them (tables.p_text)
for column in ("n", "baseline_right", "edited"):  # counts, blank where not recorded
    ledger[column] = ledger[column].astype("Int64")
for column in ("planted", "covers"):  # a simulated primary row: the effect planted, and whether the interval holds it
    ledger[column] = ledger[column] if column in ledger else None
ledger["planted inside 95% CI"] = ledger["covers"].map({True: "yes", False: "no"})
table = ledger[["paper", "claim", "role", "scope", "unit", "ours [95% CI], n", "why", "ours [95% CI]", "n",
                "better / worse", "baseline_right", "edited", "p", "p (Holm)", "test", "fragility", "verdict", "reason",
                "planted", "planted inside 95% CI", "note", "counted", "quote", "paper evidence", "scope (recorded)",
                "scope note", "model", "profile", "id", "notebook"]]
ledger_table = results.save_table(table, "tab-12-claims", run=S, profile=S.profile, tests=summary["n_tests"],
                                  shown=ledger_page.MARKDOWN_COLUMNS, notes=notes,
                                  caption="every column, the secondary rows' too: tab-12-claims.csv")
simulated = ledger["simulated"].notna() if "simulated" in ledger else pd.Series(False, index=ledger.index)
shown = list(ledger_page.MARKDOWN_COLUMNS)
tables.present(table[(table.role == "primary") & ~simulated][shown],
               caption="the primary rows: one verdict per claim and model", profile=S.profile)
if simulated.any():  # apart: a simulated model's verdicts check the chain from prompts to verdicts, not the papers
    tables.present(table[(table.role == "primary") & simulated][["model"] + shown + ["planted", "planted inside 95% CI"]],
                   caption="simulated (planted effects): does the chain give back what was planted? Not evidence "
                           "about the papers", profile=S.profile)

# %%
ledger_table

# %%
print("\n".join(["Notes the scopes point to:", *notes]) if notes else "The scopes point to no notes.")

# %% [markdown]
# The primary estimates as a picture: each claim's primary row with its interval; the vertical
# line is "no difference". Rows without an estimate (not testable here) are left out of the plot.
# A hollow marker is a row repeating another's comparison on the same questions (its label names
# which): drawn twice, counted once.

# %%
ax = claims.plot_ledger(rows)
ax.set_title(f"Claims of the three papers: our estimates ({S.profile} profile)")
results.save_figure(ax.figure, "fig-12-claims", run=S, profile=S.profile);  # ";": the plot shows, not the paths

# %%
headline = {
    "n_claims": len(CLAIMS),
    "n_estimates": len(rows),
    **summary,
    "ledger": [{k: r.get(k) for k in ("id", "role", "scope", "ours", "low", "high", "n", "better", "worse", "p",
                                      "p_holm", "test", "unit", "verdict", "reason", "note", "counted", "n_needed", "baseline_right", "edited",
                                      "n_full", "fragility", "interval_agrees", "model", "profile", "simulated", "planted",
                                      "covers")} for r in rows],
    "notebooks": {n: {"profile": p, "model": m} for n, (p, m) in ran.items()},
}
results.record_metrics("12_claims", headline, run=S, profile=S.profile)
headline["primary_verdicts"]
