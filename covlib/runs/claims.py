"""The claims ledger: every directional claim of the three papers, the evidence we measured for it, a verdict.

Each experiment notebook records, in its results JSON, `claims`: a list of `estimate` records,
one per claim it tests and scope it tests it in (a dataset, a knowledge source, a model):

    {"claim": "ve-beats-cot-sc", "scope": "hotpotqa, bm25", "value": 2.1, "low": -3.0, "high": 7.5,
     "n": 60, "unit": "EM points", "model": "SmolLM2-135M-Instruct"}

where value / low / high are a difference (or a correlation) oriented so that the paper's claim
says "> 0", with a 95% bootstrap interval (`metrics.paired_difference` and friends). Notebook
12 reads them all (`collect`) and gives each claim a `verdict`:

- `supported`: the whole interval is above 0 (or at or above, for an "at least" claim: see `CLAIMS`);
- `contradicted`: the whole interval is below 0;
- `inconclusive at this n`: the interval holds 0;
- `not testable here`: no notebook recorded it, or what ran cannot test it (the reason says which).

A notebook that cannot test a claim in its run records `untestable(claim, reason)` instead,
so the ledger says why rather than only "missing".
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from covlib.core import paths


@dataclass(frozen=True)
class Claim:
    """One directional claim of a paper, and where this project tests it."""

    id: str
    paper: str  # "Verify-and-Edit", "Credibility", "CoV-RAG"
    text: str  # the claim, in the paper's terms
    evidence: str  # the paper's own evidence (its numbers and where they are)
    notebook: str  # the results file (notebook name) that records our estimate
    measure: str  # what our estimate is, oriented so that the claim says > 0


CLAIMS: tuple[Claim, ...] = (
    Claim("ve-consistency-separates", "Verify-and-Edit",
          "CoT-SC consistency is higher for correct than for incorrect predictions",
          "Fig. 2: incorrect predictions concentrate below ⌈n/2⌉, correct ones above (text-davinci-003, 250 questions)",
          "01_consistency_kde", "mean consistency (correct) − mean consistency (incorrect), on [0, n]"),
    Claim("ve-edit-below-half-helps", "Verify-and-Edit",
          "Editing the predictions below ⌈n/2⌉ raises EM over not editing (the ablation's peak is near ⌈n/2⌉)",
          "Fig. 3: EM rises from threshold 0 to a peak near 3 of 5, then falls",
          "02_threshold_ablation", "EM at threshold ⌈n/2⌉ − EM at threshold 0 (no edit), paired"),
    Claim("ve-half-beats-edit-all", "Verify-and-Edit",
          "Editing only below ⌈n/2⌉ does at least as well as editing (almost) every prediction",
          "Fig. 3: EM at threshold 5 of 5 is below the peak near 3",
          "02_threshold_ablation", "EM at threshold ⌈n/2⌉ − EM at threshold n, paired"),
    Claim("ve-beats-cot-sc", "Verify-and-Edit",
          "CoT-SC + Verify-and-Edit beats CoT-SC",
          "Tables 1-3: +4.5 to +25.6 EM (HotpotQA), +3.4 to +9.5 (2Wiki), +1.3 to +1.9 accuracy (FEVER)",
          "03_verify_and_edit_tables", "EM/accuracy of CoT-SC + VE − CoT-SC, paired over questions"),
    Claim("ve-cot-beats-standard", "Verify-and-Edit",
          "CoT prompting beats Standard few-shot prompting",
          "Tables 1-3: CoT − Standard = +8.7 (HotpotQA), +11.5 (2Wiki), +3.2 (FEVER)",
          "03_verify_and_edit_tables", "EM/accuracy of CoT − Standard, paired over questions"),
    Claim("cred-noise-lowers-recall", "Credibility",
          "More noise references lower key-fact recall",
          "Fig. 3: from 5 to 10 references recall drops by 4.3% (ChatGPT) to about 30% (LLaMA, Vicuna)",
          "05_knowledge_precision", "key-fact recall with the fewest references − with the most, paired"),
    Claim("cred-complete-beats-partial", "Credibility",
          "Complete references give higher key-fact recall than partial ones",
          "Table 3: complete R > partial R for every model (e.g. ChatGPT 56.55 vs 35.34)",
          "06_knowledge_recall", "key-fact recall (complete) − (partial), paired"),
    Claim("cred-partial-beats-closed", "Credibility",
          "Partial references give higher key-fact recall than none (closed book)",
          "Table 3: partial R > closed-book R for 4 of 5 models (ChatGPT 35.34 vs 39.17 is the exception)",
          "06_knowledge_recall", "key-fact recall (partial) − (closed book), paired"),
    Claim("cred-self-completion-helps", "Credibility",
          "Self-completion raises key-fact F1 over BM25's top 10 for strong models",
          "Table 4: ChatGPT F1 42.66 → 48.18, ChatGLM2-6B 25.84 → 30.41; weak models do not gain",
          "07_reflection_completion", "key-fact F1 with self-completion − with BM25 top 10, paired"),
    Claim("cred-reflection-tracks-strength", "Credibility",
          "Self-reflection accuracy grows with model strength",
          "Table 4: reflection accuracy 50.0-51.8 for LLaMA models, 70.2 for ChatGPT",
          "07_reflection_completion", "needs two or more models of known strength"),
    Claim("cred-human-correlation", "Credibility",
          "Key-fact precision and recall correlate with human ratings better than EM-recall",
          "Table 2: Pearson over 5 models, P 0.87, R 0.88, EM-recall 0.54",
          "04_credibility_models", "needs human ratings of the answers"),
    Claim("covrag-multi-round-ge-single", "CoV-RAG",
          "Multi-round CoV-RAG is at least as accurate as a single round",
          "Fig. 3 / Table 4: multi 63.6-67.3 vs single 62.5-65.8",
          "09_covrag_iterations", "accuracy (multi round) − (single round), paired"),
    Claim("covrag-revision-raises-ref-acc", "CoV-RAG",
          "Verifier-guided query revision raises reference accuracy",
          "Table 5: NQ 65.0 → 66.8 (Bing), 69.3 → 71.3 (Chrome); WebQ 69.8 → 71.0, 76.0 → 76.0",
          "09_covrag_iterations", "reference accuracy after revision − before, paired"),
    Claim("covrag-finetune-raises-judgment", "CoV-RAG",
          "Fine-tuning the verifier raises its judgment accuracy",
          "Table 4: the fine-tuned verifier judges 56.0% (no chain of scores) to 60.0% (with it) correctly; "
          "the paper does not report the untuned model",
          "10_covrag_finetune", "judgment accuracy (fine-tuned) − (base model; the QA-only adapter in smoke), paired"),
)
AT_LEAST = {"covrag-multi-round-ge-single", "ve-half-beats-edit-all"}  # "≥" claims: an interval at or above 0 supports
VERDICTS = ("supported", "contradicted", "inconclusive at this n", "not testable here")
_BY_ID = {c.id: c for c in CLAIMS}


def claim(claim_id: str) -> Claim:
    """The claim with this id (a typo is an error naming the ids)."""
    if claim_id not in _BY_ID:
        raise KeyError(f"unknown claim {claim_id!r}; claims are {sorted(_BY_ID)}")
    return _BY_ID[claim_id]


def estimate(claim_id: str, scope: str, est: dict[str, Any], unit: str, **meta: Any) -> dict[str, Any]:
    """One recorded estimate of a claim: the interval dict of `metrics` plus claim id, scope, unit and meta."""
    claim(claim_id)
    missing = {"value", "low", "high", "n"} - set(est)
    if missing:
        raise ValueError(f"estimate of {claim_id!r} lacks {sorted(missing)}")
    return {"claim": claim_id, "scope": scope, "unit": unit, **{k: est[k] for k in ("value", "low", "high", "n")},
            **meta}


def untestable(claim_id: str, reason: str, scope: str = "", **meta: Any) -> dict[str, Any]:
    """A record saying this run cannot test the claim, and why."""
    claim(claim_id)
    return {"claim": claim_id, "scope": scope, "untestable": reason, **meta}


def _number(x: Any) -> float:
    return float(x) if isinstance(x, (int, float)) and x is not None and math.isfinite(x) else float("nan")


def verdict(record: dict[str, Any]) -> tuple[str, str]:
    """(verdict, reason) of one recorded estimate."""
    if record.get("untestable"):
        return "not testable here", str(record["untestable"])
    low, high = _number(record.get("low")), _number(record.get("high"))
    if math.isnan(low) or math.isnan(high):
        return "inconclusive at this n", f"no interval (n={record.get('n')})"
    at_least = record["claim"] in AT_LEAST
    if low > 0 or (at_least and low >= 0 and high > 0):
        return "supported", "the 95% interval lies above 0"
    if high < 0:
        return "contradicted", "the 95% interval lies below 0"
    if low == high == 0:
        return "inconclusive at this n", "no question changed between the two settings (interval [0, 0])"
    return "inconclusive at this n", "the 95% interval holds 0"


def read_results(folder: str | Path | None = None) -> dict[str, dict[str, Any]]:
    """Every results/<name>.json, by name (an unreadable file is reported by name, not skipped silently)."""
    folder = Path(folder) if folder else paths.results_dir()
    out = {}
    for path in sorted(folder.glob("*.json")):
        try:
            out[path.stem] = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ValueError(f"results file {path} is unreadable ({err}); re-run its notebook") from err
    return out


def collect(results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The ledger's rows: one per recorded estimate (or one 'not testable' row per claim nobody recorded)."""
    rows = []
    for c in CLAIMS:
        record = results.get(c.notebook)
        found = [r for r in (record or {}).get("metrics", {}).get("claims", []) if r.get("claim") == c.id]
        if not found:
            why = f"notebook {c.notebook} has not run" if record is None else f"{c.notebook} recorded no estimate"
            found = [untestable(c.id, why)]
        meta = (record or {}).get("meta", {})
        for r in found:
            v, reason = verdict(r)
            rows.append({"paper": c.paper, "claim": c.text, "id": c.id, "paper evidence": c.evidence,
                         "scope": r.get("scope", ""), "measure": c.measure, "unit": r.get("unit", ""),
                         "ours": r.get("value"), "low": r.get("low"), "high": r.get("high"), "n": r.get("n"),
                         "verdict": v, "reason": reason, "model": r.get("model") or meta.get("model"),
                         "profile": (record or {}).get("params", {}).get("profile")})
    return rows


VERDICT_COLORS = {"supported": "#1b9e77", "contradicted": "#d95f02", "inconclusive at this n": "#7570b3",
                  "not testable here": "#999999"}


def plot_ledger(rows: list[dict[str, Any]], ax: Any = None) -> Any:
    """A forest plot of the ledger: each estimate with its 95% interval, coloured by verdict, 0 marked."""
    import matplotlib.pyplot as plt

    shown = [r for r in rows if isinstance(r.get("ours"), (int, float)) and math.isfinite(r["ours"])]
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 0.35 * max(len(shown), 3) + 1))
    for y, r in enumerate(reversed(shown)):
        low, high = _number(r.get("low")), _number(r.get("high"))
        color = VERDICT_COLORS[r["verdict"]]
        if math.isfinite(low) and math.isfinite(high):
            ax.plot([low, high], [y, y], color=color, lw=2)
        ax.plot([r["ours"]], [y], "o", color=color)
    ax.axvline(0, color="black", lw=0.8)
    ax.set_yticks(range(len(shown)))
    ax.set_yticklabels([f"{r['id']} ({r['scope']}, n={r['n']}; {r['unit']})" for r in reversed(shown)], fontsize=7)
    ax.set_xlabel("ours: the claim's measure, oriented so that the paper says > 0 (95% interval)")
    handles = [plt.Line2D([], [], color=c, marker="o", lw=2, label=v) for v, c in VERDICT_COLORS.items()]
    ax.legend(handles=handles, fontsize=7, loc="best")
    return ax
