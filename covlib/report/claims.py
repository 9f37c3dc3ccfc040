"""The claims ledger: every directional claim of the three papers, the evidence we measured for it, one verdict.

The claims are plain data in each paper's package (`covlib.papers.<paper>.claims.CLAIMS`, with the
record builders its notebooks use; notebook 12 passes the three papers' claims to `collect`), each
with the paper's sentence, its numbers and its headline setting (`Claim.primary`), declared
before any run. Each experiment notebook records, in its results JSON, `claims`: one `estimate`
per claim and scope it tests (a dataset, a knowledge source, a model), oriented so that the claim
says "> 0", with the test that fits the data (`covlib.core.stats`: exact McNemar for paired 0/1
outcomes, with the discordant counts; sign-flip permutation for paired means; Fisher z for
correlations). Notebook 12 reads them all (`collect`):

- per claim and model, the **primary** row (the declared headline scope) gives the claim's verdict,
  at p < 0.05 two-sided;
- every other scope is a **secondary** row, its p Holm-adjusted within the claim's secondary rows;
- a row that repeats another claim's comparison on the same questions (`same_as`) points to it and
  is not counted again; a row on a near-oracle corpus (`near_oracle`), or of a raw judge-counted measure whose bias
  may differ between its arms (`judge_bound`), is shown, not counted as support.

Verdicts: `supported` / `contradicted` (p below the level and the 95% interval clear of 0, the sign
for / against the claim; a p below the level with an interval holding 0 is borderline: inconclusive;
an interval clear of 0 beside a p at or above the level says the test decides), `inconclusive at
this n` (with the n at which the paper's own effect would be detected with 80% power, for paired 0/1
outcomes over a range of discordances, `power_note`, and whether the `full` profile reaches it),
`not testable here` (the reason: nothing ran, the mechanism the claim is about never ran, both arms
at the floor or ceiling, no interval for the test, the model is outside the claim's scope); a row on a near-oracle
corpus reads `near-oracle: shown, not counted` (`NEAR_ORACLE`: a label, not a verdict). Each
paired 0/1 row carries its fragility (`power.fragility`); `READING` is what the front page says of
every ledger.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import Any

from covlib.core import paths, power
from covlib.core.claim import Claim, ClaimSet
from covlib.report.results import NOTEBOOK_FILE, read_record

NEAR_ORACLE = "near-oracle: shown, not counted"  # a label, not a verdict: the corpus held the questions' own evidence
VERDICTS = ("supported", "contradicted", "inconclusive at this n", "not testable here", NEAR_ORACLE)
SHOWN_ONLY = ("not testable here", NEAR_ORACLE)  # a row under these ran no test that counts
# What every reading of the ledger must keep in mind, printed on its front page (the book's index) and in notebook 12.
READING = (
    "Fragility: the fewest outcome changes (one question in one setting each) that would flip a paired 0/1 verdict "
    "(the fragility index of clinical trials). A verdict with fragility 1 is not a finding: one outcome decides it.",
    "Paired 0/1 differences are decided by the exact McNemar test; the interval beside them is Newcombe's, an "
    "approximation with the right coverage that can exclude 0 where the exact p is 0.05 or more: the row then "
    "says the test decides.",
    "ve-beats-cot-sc's primary row is the paper's Dataset setting: the questions' own gold paragraphs as "
    "knowledge, an oracle-like setting, not open retrieval.",
)
ALPHA = 0.05  # two-sided level of every verdict (the primary row's p; a secondary row's Holm-adjusted p)


def _untestable(claim_id: str, reason: str, scope: str = "", **meta: Any) -> dict[str, Any]:
    return {"claim": claim_id, "scope": scope, "untestable": reason, **meta}


def _number(x: Any) -> float:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else float("nan")


def _test_words(record: dict[str, Any]) -> str:
    if record.get("test") == "exact McNemar":
        return f"{record['better']} better, {record['worse']} worse of {record['n']}: exact McNemar"
    return str(record.get("test", "test"))


def _floor(record: dict[str, Any]) -> str:
    """Why a paired 0/1 record measured nothing ('' when it did): no question changed and both arms at 0 or at n."""
    if record.get("test") != "exact McNemar" or record["better"] + record["worse"] or "both" not in record:
        return ""
    n, both = record["n"], record["both"]
    if both in (0, n):
        where = "the floor (0" if both == 0 else f"the ceiling ({n}"
        return f"not measured here: both arms at {where} of {n} right in each), so no question could change"
    return ""


def verdict(record: dict[str, Any], p: float | None = None) -> tuple[str, str]:
    """(verdict, reason) of one recorded estimate at level ALPHA, from its p (or `p`: the Holm-adjusted one) and
    its 95% interval: a verdict needs both, and the test named in the record decides where they disagree."""
    if record.get("untestable"):
        return "not testable here", str(record["untestable"])
    if _floor(record):
        return "not testable here", _floor(record)
    value, p_given = _number(record.get("value")), p
    p = _number(record.get("p") if p is None else p)
    low, high = _number(record.get("low")), _number(record.get("high"))
    if math.isnan(value):
        return "inconclusive at this n", f"no estimate (n={record.get('n')})"
    if math.isnan(low) or math.isnan(high):  # a p alone (a correlation of 3 models) decides nothing
        return "not testable here", (f"no 95% interval ({record.get('test', 'no test')}, n={record.get('n')}): "
                                     "a verdict needs the interval its test gives")
    excludes = low > 0 or high < 0
    if math.isnan(p) or "interval decides" in str(record.get("test", "")):  # the interval decides (two correlations,
        # a bootstrap): its sign, not the point's, gives the direction
        if excludes:
            return ("supported" if low > 0 else "contradicted"), "the 95% interval excludes 0"
        return "inconclusive at this n", "the 95% interval holds 0"
    holm = p_given is not None
    words = f"{_test_words(record)} {'Holm-adjusted ' if holm else ''}p = {p:.3g}"
    if p < ALPHA and value != 0 and excludes:
        return ("supported" if value > 0 else "contradicted"), words
    if p < ALPHA and value != 0:  # the test and its interval disagree: a borderline result decides nothing
        return "inconclusive at this n", (f"{words}, but its 95% interval [{low:.3g}, {high:.3g}] holds 0: a verdict "
                                          "needs both p < 0.05 and a 95% interval clear of 0, so it decides nothing")
    if record.get("test") == "exact McNemar" and record["better"] + record["worse"] == 0:
        return "inconclusive at this n", f"no question changed between the two settings (p = 1, n = {record['n']})"
    if excludes and holm:  # the raw p and the interval may agree: the interval is not adjusted for multiplicity
        return "inconclusive at this n", (f"{words}: the Holm-adjusted p decides, and it is at or above {ALPHA}; the "
                                          f"95% interval [{low:.3g}, {high:.3g}] excludes 0 but is not Holm-adjusted")
    if excludes:  # the interval is not the test's inversion (Newcombe's for McNemar): the test decides
        return "inconclusive at this n", (f"{words}: the test decides, and its p is at or above {ALPHA}; its 95% "
                                          f"interval [{low:.3g}, {high:.3g}] excludes 0 but is "
                                          f"{_interval_words(record)}, not the test inverted")
    return "inconclusive at this n", words


def _interval_words(record: dict[str, Any]) -> str:
    if record.get("test") == "exact McNemar":
        return "Newcombe's approximate interval of the difference"
    return f"the interval beside the {record.get('test', 'test')}"


def interval_agrees(record: dict[str, Any], p: float | None = None) -> bool:
    """Whether the record's 95% interval excludes 0 exactly when its p is below ALPHA (or it has no p or no interval)."""
    p = _number(record.get("p") if p is None else p)
    low, high = _number(record.get("low")), _number(record.get("high"))
    if math.isnan(p) or math.isnan(low) or math.isnan(high):
        return True
    return (low > 0 or high < 0) == (p < ALPHA)


def fragility(record: dict[str, Any]) -> int | None:
    """A paired 0/1 record's fragility (`power.fragility`: the fewest outcomes whose change flips its verdict)."""
    if record.get("test") != "exact McNemar" or record.get("untestable") or _floor(record):
        return None
    return power.fragility(record["better"], record["worse"], record["n"], ALPHA)


def _share(x: float, down: bool = False) -> str:
    return f"{math.floor(100 * x + 1e-9)}%" if down else f"{100 * x:.0f}%"  # down: "at most 13%" must be affordable


def _mcnemar_words(c: Claim, record: dict[str, Any], full: int | None) -> tuple[int | None, str]:
    """(n needed under the stated discordance, words): the floor marked a minimum, the range, what `full` affords."""
    sizes = power.mcnemar_sizes(c.paper_effect, record, full)
    at = ", ".join(f"{n:,} if {_share(psi)} of questions change" for psi, n in sizes["at"].items())
    words = (f"the paper's {c.paper_effect:+g} ({c.effect_source}) would need at least n≈{sizes['floor']:,} (if no "
             f"question got worse: the least possible discordance, {_share(sizes['effect_share'])})"
             + (f"; {at}" if at else ""))
    stated = sizes["observed"]
    if stated is not None:
        words += (f"; at this run's discordance ({record['better'] + record['worse']} of {record['n']} questions "
                  f"changed, {_share(sizes['observed_share'])}) n≈{stated:,}")
    else:
        words += "; this run's discordance is at or below that floor, so it does not say which applies"
    if full is not None:
        words += f"; `full` runs n={full:,}"
        if stated is not None:
            words += " (enough)" if full >= stated else " (not enough)"
        elif sizes["affordable"] == 0.0:
            words += " (not enough)"
        elif sizes["affordable"] >= 1.0 - 1e-9:
            words += " (enough at any discordance)"
        else:
            words += f" (enough only if at most {_share(sizes['affordable'], down=True)} of questions change)"
    return (stated if stated is not None else sizes["floor"]), words


def power_note(c: Claim, record: dict[str, Any]) -> dict[str, Any]:
    """The n at which the paper's own effect would be detected (80% power) and what `full` runs, in words too.

    For paired 0/1 outcomes Connor's n depends on the share of questions that change: at the least
    possible share it is a minimum, so the note gives the range (`power.mcnemar_sizes`), the n at
    this run's own discordance when that is above the floor, and says "enough" only under it.
    """
    full = c.full_n
    if full is not None and isinstance(record.get("pooled"), int):  # questions pooled over datasets, n each
        full *= record["pooled"]
    if full is not None and isinstance(record.get("available"), int):
        full = min(full, record["available"])
    need = power.questions_needed(c.paper_effect, record) if c.paper_effect is not None else None
    if c.paper_effect is None:
        words = "the paper gives no effect size in our unit to size a study by"
    elif need is None:
        why = ("no spread observed" if record.get("test", "").startswith(("sign-flip", "exact McNemar"))
               else f"no sample-size formula for {record.get('test', 'this test')}")
        words = f"the paper's {c.paper_effect:+g} cannot be sized from this run ({why})"
    elif record.get("test") == "exact McNemar":
        need, words = _mcnemar_words(c, record, full)
    elif "judge-corrected" in record.get("test", ""):  # the judge's rate uncertainty does not shrink with n
        words = (f"the paper's {c.paper_effect:+g} ({c.effect_source}) would need at least n≈{need} from the spread "
                 "of per-question differences alone; the judge's measured error adds an uncertainty more questions "
                 "do not remove" + ("" if full is None else f"; `full` runs n={full}"))
    else:
        reach = "" if full is None else f"; `full` runs n={full}" + (" (enough)" if full >= need else " (not enough)")
        words = f"the paper's {c.paper_effect:+g} ({c.effect_source}) would need n≈{need}{reach}"
    return {"n_needed": need, "n_full": full, "power": words}


def _row(c: Claim, r: dict[str, Any], role: str, meta: dict[str, Any], profile: Any) -> dict[str, Any]:
    return {"paper": c.paper, "claim": c.text, "id": c.id, "quote": c.quote, "paper evidence": c.evidence,
            "scope": r.get("scope", ""), "role": role, "measure": c.measure, "unit": r.get("unit", ""),
            "ours": r.get("value"), "low": r.get("low"), "high": r.get("high"), "n": r.get("n"),
            "p": r.get("p"), "p_holm": None, "better": r.get("better"), "worse": r.get("worse"),
            "test": r.get("test"), "note": r.get("note", ""), "counted": False,
            "fragility": fragility(r) if role == "primary" else None,  # at the level the primary is read at
            "interval_agrees": interval_agrees(r), "edited": r.get("edited"),
            "baseline_right": r["worse"] + r["both"] if r.get("test") == "exact McNemar" and "both" in r else None,
            "model": r.get("model") or meta.get("model"), "profile": profile, "notebook": c.notebook}


def _independent(r: dict[str, Any]) -> bool:
    return not (r.get("untestable") or r.get("same_as") or r.get("near_oracle") or r.get("judge_bound"))


def _family(c: Claim, found: list[dict[str, Any]], meta: dict[str, Any], profile: Any) -> list[dict[str, Any]]:
    """The rows of one claim for one model: the primary (its verdict is the claim's), the secondaries (Holm)."""
    rows, family = [], []
    primary = next((r for r in found if c.is_primary(r.get("scope", ""))), None)
    if primary is None:
        scope = c.primary or "the first recorded scope"
        primary = _untestable(c.id, f"the primary setting ({scope}) did not run", scope=c.primary,
                             model=found[0].get("model") if found else None)
    for r in [primary] + [r for r in found if r is not primary]:
        row = _row(c, r, "primary" if r is primary else "secondary", meta, profile)
        row["same_as"], row["near_oracle"] = r.get("same_as"), bool(r.get("near_oracle"))
        row["verdict"], row["reason"] = verdict(r)
        if r is not primary and _independent(r) and row["verdict"] != "not testable here":  # a test that ran
            family.append((row, r))
        if r.get("near_oracle") and row["verdict"] != "not testable here":  # shown, not counted: a label, no verdict
            row["reason"] = (f"near-oracle corpus, not independent support ({r['near_oracle']}); its test alone would "
                             f"read {row['verdict']}: " + row["reason"])
            row["verdict"] = NEAR_ORACLE
        if r.get("judge_bound"):  # a raw judge-counted measure whose bias may differ between the arms: shown only
            row["verdict"] = "not testable here"
            row["reason"] = f"judge-bound, not counted ({r['judge_bound']}); " + row["reason"]
        if r.get("constant_decision"):  # the same decision on every question: at chance at any n
            row["reason"] += "; a constant decision: no discrimination, which more questions cannot change"
        elif r is primary and row["verdict"] == "inconclusive at this n":
            row.update(power_note(c, r))
            row["reason"] += f"; {row['power']}"
        if row["verdict"] in ("supported", "contradicted") and row["baseline_right"] == 0:
            row["reason"] += _floor_baseline(r)
        if row["fragility"] == 1 and row["verdict"] in ("supported", "contradicted"):
            row["reason"] += "; fragility 1: one question's outcome changed would flip it, so it is not a finding"
        row["counted"] = (_independent(r) and math.isfinite(_number(r.get("p")))
                          and row["verdict"] not in SHOWN_ONLY)
        row.update(c.planted_row(row))
        rows.append(row)
    adjusted = power.holm([_number(r.get("p")) for _, r in family])
    for (row, r), p in zip(family, adjusted):
        if not math.isnan(p):
            row["p_holm"] = p
            row["verdict"], row["reason"] = verdict(r, p=p)
            row["reason"] += f" (Holm-adjusted over {len(family)} secondary rows)"
    return rows


def _floor_baseline(record: dict[str, Any]) -> str:
    """What a verdict over a baseline at the floor says: the baseline's rate, and how many answers were edited."""
    edited = record.get("edited")
    return (f"; the baseline answered 0 of {record['n']} right, so every right answer is a gain: this shows that some "
            "answers became right, not a gain over a working baseline"
            + (f" ({edited} of {record['n']} were edited)" if isinstance(edited, int) else ""))


def _same_questions(row: dict[str, Any], other: dict[str, Any]) -> bool:
    keys = ("n", "better", "worse") if row.get("test") == "exact McNemar" else ("n",)
    return all(row.get(k) == other.get(k) for k in keys)


def _point_same_comparisons(rows: list[dict[str, Any]]) -> None:
    """A row that repeats another claim's comparison on the same questions takes that row's verdict, counted there."""
    for row in rows:
        if not row.get("same_as"):
            continue
        other_id, other_scope = row["same_as"]
        other = next((o for o in rows if o["id"] == other_id and o["scope"] == other_scope
                      and o["model"] == row["model"] and not o.get("same_as")), None)
        if other is None or not _same_questions(row, other):  # not run there, or not on the same questions
            row["counted"] = math.isfinite(_number(row.get("p")))
            if other is not None:
                row["reason"] += (f" ({other_id} ({other_scope}) ran n={other.get('n')}: not the same questions, "
                                  "so this row stands on its own)")
            continue
        row["counted"], row["verdict"], row["near_oracle"] = False, other["verdict"], other["near_oracle"]
        row["repeats"] = not (row["near_oracle"] and row["role"] == "primary")  # tallied apart on the front page
        row["reason"] = (f"the same comparison on the same questions as {other_id} ({other_scope}): "
                         f"{other['verdict']} there, counted once")
        if row["near_oracle"]:
            row["verdict"] = NEAR_ORACLE
            row["reason"] = "near-oracle corpus, not independent support; " + row["reason"]


def read_results(folder: str | Path | None = None) -> dict[str, dict[str, Any]]:
    """Every notebook's results/<NN_name>.json, by name, each checked (`read_record`: a damaged file is refused by
    name); the run's own files beside them (run_times, bench_rates, a file kept aside) are not results."""
    folder = Path(folder) if folder else paths.results_dir()
    return {path.stem: read_record(path) for path in sorted(folder.glob("*.json")) if NOTEBOOK_FILE.match(path.name)}


def collect(results: dict[str, dict[str, Any]], claims: tuple[Claim, ...]) -> list[dict[str, Any]]:
    """The ledger's rows for `claims` (the papers' CLAIMS): per claim and model a primary row and its secondaries."""
    ClaimSet(claims)  # one id per claim
    rows = []
    for c in claims:
        record = results.get(c.notebook) if c.notebook else None
        found = [r for r in (record or {}).get("metrics", {}).get("claims", []) if r.get("claim") == c.id]
        meta, profile = (record or {}).get("meta", {}), (record or {}).get("params", {}).get("profile")
        if not found:
            why = c.untestable or (f"notebook {c.notebook} has not run" if record is None
                                   else f"{c.notebook} recorded no estimate")
            found = [_untestable(c.id, why, scope=c.primary)]
        by_model: dict[Any, list[dict[str, Any]]] = {}
        for r in found:
            by_model.setdefault(r.get("model"), []).append(r)
        for group in by_model.values():
            rows.extend(_family(c, group, meta, profile))
    _point_same_comparisons(rows)
    return sorted(rows, key=lambda r: r["simulated"] is not None)  # simulated rows apart, after the real ones


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What the front page says: tests run, primary verdicts (a claim pointing to another's row counted apart), of
    language models only; a simulated model's verdicts check the measuring chain (`simulated_verdicts`)."""
    sim = [r for r in rows if r.get("simulated") and r["role"] == "primary"]
    by = {b: [r["verdict"] for r in sim if r["simulated"] == b] for b in sorted({r["simulated"] for r in sim})}
    return {**_tally([r for r in rows if not r.get("simulated")]),
            "simulated_verdicts": {b: {v: got.count(v) for v in VERDICTS} for b, got in by.items()}}


def _tally(rows: list[dict[str, Any]]) -> dict[str, Any]:
    primaries = [r for r in rows if r["role"] == "primary"]
    repeated = [r for r in primaries if r.get("repeats")]
    counts: dict[str, int] = {v: 0 for v in VERDICTS}
    for r in primaries:
        if r not in repeated:
            counts[r["verdict"]] += 1
    fragile = [r for r in primaries if r not in repeated and r.get("fragility") == 1
               and r["verdict"] in ("supported", "contradicted")]
    return {"n_claims": len({r["id"] for r in rows}), "n_primary": len(primaries), "n_fragile": len(fragile),
            "n_tests": sum(1 for r in rows if r["counted"]),
            "n_secondary": sum(1 for r in rows if r["role"] == "secondary"),
            "primary_verdicts": counts, "n_same_comparison": len(repeated)}


VERDICT_COLORS = {"supported": "#1b9e77", "contradicted": "#d95f02", "inconclusive at this n": "#7570b3",
                  "not testable here": "#999999", NEAR_ORACLE: "#c7c7c7"}


def _repeat_of(row: dict[str, Any]) -> str:
    """"claim id on scope" of the row whose comparison `row` repeats on the same questions, else ""."""
    return f"{row['same_as'][0]} on {row['same_as'][1]}" if row.get("same_as") and "repeats" in row else ""


def ledger_label(row: dict[str, Any], width: int = 48) -> str:
    """A ledger row as the figure names it: the claim's text (wrapped), then its first scope words, n and unit, and
    the row it repeats (the same comparison on the same questions), if any."""
    scope = str(row.get("scope") or "").split(",")[0]
    text = textwrap.shorten("[simulated] " * bool(row.get("simulated")) + str(row["claim"]), 2 * width, placeholder=" …")
    repeat = f"\n(same as {_repeat_of(row)}; counted once)" if _repeat_of(row) else ""
    return "\n".join(textwrap.wrap(text, width)) + f"\n({scope}, n={row['n']}; {row['unit']})" + repeat


def plot_ledger(rows: list[dict[str, Any]], ax: Any = None) -> Any:
    """A forest plot of the primary rows: each estimate with its 95% interval (dashed where the test, not the
    interval, decides), coloured by verdict, 0 marked; a row repeating another's comparison hollow, labelled so."""
    import matplotlib.pyplot as plt

    shown = [r for r in rows if r["role"] == "primary" and math.isfinite(_number(r.get("ours")))]
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 0.55 * max(len(shown), 3) + 1))
    for y, r in enumerate(reversed(shown)):
        low, high = _number(r.get("low")), _number(r.get("high"))
        color = VERDICT_COLORS[r["verdict"]]
        if math.isfinite(low) and math.isfinite(high):  # dashed: an approximate interval the test overrules
            ax.plot([low, high], [y, y], color=color, lw=2, ls="-" if r.get("interval_agrees", True) else "--")
        ax.plot([r["ours"]], [y], "o", color=color, mfc="white" if _repeat_of(r) else color)
        if r.get("planted") is not None:  # a simulated row: the effect planted
            ax.plot([r["planted"]], [y], "x", color="black")
    ax.axvline(0, color="black", lw=0.8)
    ax.set_yticks(range(len(shown)))
    ax.set_yticklabels([ledger_label(r) for r in reversed(shown)], fontsize=7)
    ax.set_xlabel("ours: the claim's measure, oriented so that the paper says > 0 (95% interval; primary rows)")
    handles = [plt.Line2D([], [], color=c, marker="o", lw=2, label=v) for v, c in VERDICT_COLORS.items()] + \
        [plt.Line2D([], [], color="black", marker="x", lw=0, label="planted (simulated rows)")] * \
        any(r.get("planted") is not None for r in shown) + \
        [plt.Line2D([], [], color="black", marker="o", mfc="white", lw=0, label="same comparison as another row")] * \
        any(_repeat_of(r) for r in shown)
    ax.legend(handles=handles, fontsize=7, loc="best")
    return ax
