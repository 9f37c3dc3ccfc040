"""The claims ledger as a page shows it: a few columns, a scope a few words long, long texts once as notes.

`page_rows(rows, notes)` gives each ledger row (`covlib.report.claims.collect`) its page cells: the scope with every
long text `notes` names (the key facts' provenance) replaced by its short name and a note marker ("agents [1]"), cut
at `SCOPE_WORDS` words; "ours [95% CI], n" with the discordant counts, the baseline's rate and what was edited; "why"
(the verdict's reason, cut at `WHY_WORDS` words: the CSV's "reason" and the book keep it whole). The notes are
returned once each ("[1] agents: Drafted by ..."). `RULE` is how a verdict is
read, in three lines; `summary_text` says what the counts are before it uses them.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from covlib.core import stats

SCOPE_WORDS = 12  # the most words a page's scope cell holds (a cut scope ends in "…"; the CSV keeps it whole)
WHY_WORDS = 30  # the most words a page's "why" cell shows (a cut reason ends in "…"; the book opens the rest in place)
PAGE_COLUMNS = ("claim", "scope", "ours [95% CI], n", "paper evidence", "verdict", "why")  # the front page's
MARKDOWN_COLUMNS = ("paper",) + PAGE_COLUMNS  # tables/tab-12-claims.md; the CSV holds every column
# How a verdict is read: on the front page above the ledger, and in notebook 12.
RULE = (
    "supported / contradicted: p < 0.05 (a secondary row's p Holm-adjusted) and the 95% interval clear of 0, the "
    "difference on the paper's side / against it.",
    "inconclusive at this n: p at or above 0.05, or p and interval disagree: the row's \"why\" names what decided "
    "(for paired 0/1 outcomes the exact McNemar p, not its approximate interval), then the n the paper's effect needs.",
    "not testable here: what ran cannot test the claim (the row says why). near-oracle: shown, not counted: the "
    "corpus held the questions' own evidence, so the row is no independent support.",
)


def short_scope(scope: str, notes: dict[str, str], numbers: dict[str, int]) -> str:
    """`scope` with each text of `notes` ({long text: short name}) as "name [k]" (k from `numbers`, given the next
    free number when new), cut after whole ", " fields at `SCOPE_WORDS` words ("…" marks the cut)."""
    for long, name in notes.items():
        if long and long in scope:
            numbers.setdefault(long, len(numbers) + 1)
            scope = scope.replace(long, f"{name} [{numbers[long]}]")
    return cut(scope, SCOPE_WORDS, (", ",))


def cut(text: str, words: int, seps: tuple[str, ...] = ("; ", " (", ", ")) -> str:
    """`text` whole when it holds at most `words` words; else its first whole parts (split at the first of `seps` that
    leaves some, else at words) within `words` - 1 words, then " …"."""
    if len(text.split()) <= words:
        return text
    for sep in seps:
        kept: list[str] = []
        for part in text.split(sep):
            if len(sep.join(kept + [part]).split()) > words - 1:
                break
            kept.append(part)
        if kept:
            return sep.join(kept) + " …"
    return " ".join(text.split()[:words - 1]) + " …"


def _whole(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def ours_text(row: dict[str, Any]) -> str:
    """Ours with its interval, n, the discordant counts, the baseline's right answers and the edits (where recorded),
    the fragility: one cell."""
    value = row.get("ours")
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        return "—"
    text = stats.format_interval({"value": value, "low": row.get("low"), "high": row.get("high")}, 2)
    text += f"; n={row.get('n')}"
    if _whole(row.get("better")) and _whole(row.get("worse")):
        text += f", {row['better']} better / {row['worse']} worse"
    if _whole(row.get("baseline_right")):
        text += f", baseline {row['baseline_right']} of {row.get('n')} right"
    if _whole(row.get("edited")):
        text += f", {row['edited']} of {row.get('n')} edited"
    if row.get("fragility") is not None and not (isinstance(row["fragility"], float) and math.isnan(row["fragility"])):
        text += f"; fragility {int(row['fragility'])}"
    return text


def page_rows(rows: Sequence[dict[str, Any]], notes: dict[str, str] | None = None) -> tuple[list[dict[str, Any]],
                                                                                                 list[str]]:
    """Each row with its page cells ("scope" short, "scope (recorded)", "scope note", "ours [95% CI], n", "why"), and
    the notes' lines, each once, in the order the rows first point to them."""
    numbers: dict[str, int] = {}
    out = []
    for r in rows:
        scope = str(r.get("scope") or "")
        short = short_scope(scope, notes or {}, numbers)
        mine = [_note(long, k, notes or {}) for long, k in numbers.items() if f"[{k}]" in short]
        out.append({**r, "scope": short, "scope (recorded)": scope, "scope note": " ".join(mine),
                    "ours [95% CI], n": ours_text(r), "why": cut(str(r.get("reason") or ""), WHY_WORDS)})
    return out, [_note(long, k, notes or {}) for long, k in numbers.items()]


def _note(long: str, k: int, notes: dict[str, str]) -> str:
    """A note's line: "[k] name: the long text"."""
    return f"[{k}] {notes[long]}: {long}"


def summary_text(n_primary: int, n_secondary: int, n_tests: int) -> str:
    """What the counts are, said before they are used: primary and secondary rows, then the counted tests among them."""
    return (f"{n_primary} primary rows (one per claim and model: each gives its claim's verdict) and {n_secondary} "
            f"secondary rows (the claim's other settings, Holm-adjusted): {n_primary + n_secondary} rows. "
            f"{n_tests} of them are counted tests: a row is counted when its test ran on independent evidence, not on "
            "a near-oracle corpus, not a judge-bound measure, not a repeat of another claim's comparison (counted "
            "there) and not a row nothing could test; the CSV's `counted` column marks them.")
