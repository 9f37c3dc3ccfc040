"""The results of a run as HTML fragments for the book: ours beside the paper, the claims ledger, a notebook's tables
and figures, and the summary a notebook's page opens on. Every cell is escaped or sanitised (cells carry model output).
"""

from __future__ import annotations

import base64
import html
import json
import re
from pathlib import Path
from typing import Any, Sequence

from covlib.core import paths
from covlib.core.claim import SIM_LABEL, simulated_behaviour
from covlib.report import claims, ledger_page, tables
from teaching.safe_html import is_png, sanitize

_OLDER = {"ours [95% CI], n": "ours [95% CI]", "why": "reason"}  # a ledger CSV written before these columns
# Each ledger column's share of the table's width (a table's columns are scaled to fill it): the reasons get room
WIDTHS = {"model": 10, "claim": 19, "scope": 12, "ours [95% CI], n": 16, "paper evidence": 19, "verdict": 8, "why": 26,
          "planted": 6, "planted inside 95% CI": 6}
UNTESTABLE_COLUMNS = ("claim", "scope", "paper evidence", "why")  # the front page's folded "not testable here" rows
# What the front page says of every ledger, whatever ran (notebook 12 says it too: `covlib.report.claims.READING`).

_NUMERIC_CELL = re.compile(r"<td([^>]*)>(&lt;)?(-?[\d.]+%?(?: \[-?[\d.]+, -?[\d.]+\])?)</td>")


def markdown_html(text: str) -> str:
    """Markdown as HTML, sanitised (a table's cells or a docs page can carry raw HTML); a cell that is a number, or a
    number and its interval, is kept on one line."""
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    return _NUMERIC_CELL.sub(lambda m: f"<td class=\"covlib-num\"{m.group(1)}>{m.group(2) or ''}{m.group(3)}</td>",
                             sanitize(markdown2html_mistune(text)))


def _figures_and_tables(stem: str, figures: Path, tables: Path) -> list[str]:
    """The tables (Markdown, as `covlib.report.tables` wrote them) and figures (inline PNG) a notebook wrote, each
    with an anchor; a figure that is not a PNG image is skipped with a note. The ledger's own table is the ledger."""
    number = stem.split("_", 1)[0]
    parts = []
    for md in sorted(tables.glob(f"tab-{number}-*.md")):
        if md.stem == "tab-12-claims":
            continue
        text = re.sub(r"^\*\*[^*\n]+\*\*\n", "", md.read_text(encoding="utf-8", errors="replace"))  # the name: our h3
        parts.append(f"<h3 id=\"{html.escape(md.stem)}\">{html.escape(md.stem)}</h3>" + markdown_html(text))
    for png in sorted(figures.glob(f"fig-{number}-*.png")):
        raw = png.read_bytes()
        if not is_png(raw):
            parts.append(f"<h3>{html.escape(png.stem)}</h3><p class=\"missing\">Skipped: <code>{html.escape(png.name)}</code> "
                         f"is not a PNG image (damaged or half-written); <code>make reproduce ONLY={html.escape(number)}</code> "
                         "writes it again.</p>")
            continue
        data = base64.b64encode(raw).decode()
        parts.append(f"<h3 id=\"{html.escape(png.stem)}\">{html.escape(png.stem)}</h3>"
                     f"<img alt=\"{html.escape(png.stem)}\" src=\"data:image/png;base64,{data}\">")
    return parts


def summary_section(stem: str, figures: Path, tables: Path, results: Path | None = None) -> str:
    """What a notebook's page opens on: ours beside the paper, the notebook's rows of the claims ledger (notebook 12:
    the whole ledger), then its tables and figures; "" when it wrote none of these."""
    ledger = read_ledger(tables)
    mine = [r for r in ledger or [] if r.get("notebook") == stem and r.get("role", "primary") == "primary"]
    parts = [paper_section(stem, results)] if results is not None else []
    if stem == "12_claims":
        parts.append(ledger_section(tables, results))
    elif mine:
        real = [r for r in mine if not simulated_behaviour(r.get("model"))]
        if real:
            parts.append("<h3>Claims this notebook tests</h3><p>The primary rows of the <a href=\"index.html#ledger\">"
                         "claims ledger</a> whose evidence this notebook recorded (one verdict per claim and model; every "
                         "row in <a href=\"12_claims.html\">notebook 12</a>).</p>" + ledger_table(real, link=False))
        parts.append(simulated_section([r for r in mine if simulated_behaviour(r.get("model"))]))  # apart
    parts += _figures_and_tables(stem, figures, tables)
    parts = [p for p in parts if p]
    if not parts:
        return ""
    return ("<section class=\"covlib-outputs covlib-summary\" id=\"results\"><h2>Results of this run</h2>"
            + "".join(parts) + "</section>")


def _flat(tree: Any, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    if isinstance(tree, dict):
        out: dict[tuple[str, ...], Any] = {}
        for key, value in tree.items():
            out.update(_flat(value, (*prefix, str(key))))
        return out
    return {prefix: tree}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def _fmt(value: float, *alike: float) -> str:
    """A number as the page shows it: one decimal, three where it and the numbers shown with it are all below 1."""
    if isinstance(value, int) and not alike:
        return str(value)
    return f"{value:.3f}" if all(abs(v) < 1 for v in (value, *alike)) else f"{value:.1f}"


def paper_section(stem: str, results: Path) -> str:
    """Ours beside the paper: each number the notebook's results JSON records under metrics["paper"] whose key the
    run's own metrics also have (with our 95% interval where recorded), and the paper's source. "" when there is
    none (the notebooks whose tables carry the paper's columns themselves)."""
    path = results / f"{stem}.json"
    try:
        metrics = json.loads(path.read_text(encoding="utf-8")).get("metrics", {})
    except (OSError, ValueError, AttributeError):
        return ""
    paper = metrics.get("paper") if isinstance(metrics, dict) else None
    if not isinstance(paper, dict):
        return ""
    ours = _flat({k: v for k, v in metrics.items() if k != "paper"})
    rows = []
    for key, theirs in _flat(paper).items():
        mine = ours.get(key)
        if not (_number(theirs) and _number(mine)):
            continue
        low, high = (ours.get((*key[:-1], f"{key[-1]}_interval", end)) for end in ("low", "high"))
        band = (low, high) if _number(low) and _number(high) else ()
        shown = _fmt(mine, *band) + (f" [{_fmt(low, mine, high)}, {_fmt(high, mine, low)}]" if band else "")
        rows.append(f"<tr><td><code>{html.escape('.'.join(key))}</code></td><td>{html.escape(shown)}</td>"
                    f"<td>{html.escape(_fmt(theirs))}</td></tr>")
    if not rows:
        return ""
    source = paper.get("source")
    caption = f"<p>Paper: {html.escape(str(source))}. Ours: this run (<code>results/{html.escape(stem)}.json</code>).</p>" \
        if isinstance(source, str) else ""
    return ("<h3>Ours beside the paper</h3>" + caption + "<table class=\"covlib-vs-paper\"><thead><tr><th>metric</th>"
            "<th>ours [95% CI]</th><th>paper</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def read_ledger(tables: Path) -> list[dict[str, str]] | None:
    """The rows of tables/tab-12-claims.csv (what notebook 12 wrote), or None before it ran."""
    import csv

    path = tables / "tab-12-claims.csv"
    if not path.is_file():
        return None
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def _p(text: str) -> str:
    """A p value from the ledger's CSV as every table shows it (`tables.p_text`); a text that is no number as it is."""
    try:
        return tables.p_text(float(text))
    except ValueError:
        return text


def ledger_table(rows: Sequence[dict[str, str]], link: bool = True,
                 columns: Sequence[str] = ledger_page.PAGE_COLUMNS) -> str:
    """Ledger rows as an HTML table, every cell escaped; with `link`, each claim links to the notebook page whose run
    gave its evidence (its results, then its tables and figures)."""
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = []
    for r in rows:
        cells = []
        for c in columns:
            value = r.get(c) or r.get(_OLDER.get(c, c)) or ""
            text = html.escape(_p(value) if c == "p" else value)
            if c == "claim" and link:  # a claim no notebook can test: notebook 12 says why
                where = r.get("notebook") if re.fullmatch(r"\d{2}[a-z]?_\w+", r.get("notebook") or "") else "12_claims"
                text = (f"<a href=\"{where}.html#results\">{text}</a> "
                        f"<small>(notebook {where.split('_', 1)[0]})</small>")
            if c == "why":
                text = _why(value, r.get("reason") or "")
            verdict = f" class=\"verdict-{r.get('verdict', '').split()[0].rstrip(':')}\"" if c == "verdict" and r.get("verdict") else ""
            cells.append(f"<td{verdict}>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    total = sum(WIDTHS.get(c, 8) for c in columns)
    cols = "".join(f"<col style=\"width: {100 * WIDTHS.get(c, 8) / total:.1f}%\">" for c in columns)
    return (f"<table class=\"ledger\"><colgroup>{cols}</colgroup><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>")


def _why(short: str, reason: str) -> str:
    """A "why" cell: the short reason, and where the page cut it ("…"), the rest of the reason folded under it."""
    head = short.removesuffix(" …")
    if head == short or not reason.startswith(head) or len(reason) <= len(head):
        return html.escape(short)
    return (f"<details class=\"covlib-why\"><summary>{html.escape(short)}</summary>"
            f"{html.escape(reason[len(head):].lstrip('; ,'))}</details>")


REPEATS = "repeat another claim's comparison (counted there)"


def verdict_counts(rows: Sequence[dict[str, str]], results: Path | None = None) -> dict[str, int]:
    """Primary verdicts as notebook 12 counted them (results/12_claims.json: a row repeating another claim's
    comparison counted there), else counted from the ledger's primary rows."""
    try:
        recorded = json.loads(((results or paths.results_dir()) / "12_claims.json").read_text(encoding="utf-8"))
        counts, same = recorded["metrics"]["primary_verdicts"], recorded["metrics"].get("n_same_comparison", 0)
        if isinstance(counts, dict) and all(isinstance(v, int) for v in counts.values()):
            return {**{str(k): v for k, v in counts.items()},
                    **({REPEATS: same} if isinstance(same, int) and same else {})}
    except (OSError, ValueError, KeyError, TypeError):
        pass
    counts: dict[str, int] = {}
    for r in rows:
        if r.get("role", "primary") == "primary":
            counts[r.get("verdict", "")] = counts.get(r.get("verdict", ""), 0) + 1
    return counts


def ledger_section(tables: Path, results: Path | None = None) -> str:
    """The claims ledger (tables/tab-12-claims.csv): the counts per verdict, then each claim's primary row with the
    paper's evidence beside ours and a link to the notebook it came from (a note before notebook 12 ran)."""
    rows = read_ledger(tables)
    if rows is None:
        return ("<h2 id=\"ledger\">Claims ledger</h2><p class=\"missing\">Not built yet: <code>make reproduce</code> "
                "(or <code>make reproduce ONLY=12</code> after 01-11), then <code>make book</code>.</p>")
    simulated = [r for r in rows if simulated_behaviour(r.get("model")) and r.get("role", "primary") == "primary"]
    rows = [r for r in rows if not simulated_behaviour(r.get("model"))]
    primary = [r for r in rows if r.get("role", "primary") == "primary"]
    untestable = [r for r in primary if r.get("verdict") == "not testable here"]
    tests = sum(r.get("counted") in ("True", "yes") for r in rows)
    counts = verdict_counts(rows, results)
    notes = list(dict.fromkeys(r["scope note"] for r in primary if r.get("scope note")))  # once: "[1] agents: ..."
    rule = "".join(f"<li>{html.escape(line)}</li>" for line in ledger_page.RULE)
    shown = "".join(f"<span><strong>{n}</strong> {html.escape(v)}</span>" for v, n in counts.items())
    return ("<h2 id=\"ledger\">Claims ledger</h2>"
            f"<p class=\"covlib-verdicts\">{len({r.get('claim') for r in primary})} claims, one verdict each per model "
            f"that ran: {shown}</p>"
            "<p>Each claim against our run, from its pre-declared primary setting, the paper's evidence beside ours "
            "(how a verdict is read, and what the counts are: under the table).</p>"
            + ledger_table([r for r in primary if r.get("verdict") != "not testable here"])
            + (f"<details class=\"covlib-untestable\"><summary>{len(untestable)} not testable here: what each would "
               f"need</summary>{ledger_table(untestable, columns=UNTESTABLE_COLUMNS)}</details>" if untestable else "")
            + f"<p>How a verdict is read:</p><ul class=\"covlib-rule\">{rule}</ul><p>"
            + html.escape(ledger_page.summary_text(len(primary), len(rows) - len(primary), tests))
            + " Every row and column: <code>tables/tab-12-claims.csv</code>; more in "
            "<a href=\"12_claims.html\">notebook 12</a>.</p>"
            + "".join(f"<p class=\"covlib-note\"><small>{html.escape(n)}</small></p>" for n in notes)
            + "<ul class=\"covlib-reading\">" + "".join(f"<li>{html.escape(line)}</li>" for line in claims.READING)
            + "</ul>" + simulated_section(simulated))  # the reading notes under the table, which opens the page


def simulated_section(rows: Sequence[dict[str, str]]) -> str:
    """A simulated model's primary rows, apart and untallied with the real ones: what was planted beside what came
    back ('' when no simulated model ran)."""
    if not rows:
        return ""
    covered = [r for r in rows if r.get("planted inside 95% CI") in ("yes", "no")]
    held = sum(r["planted inside 95% CI"] == "yes" for r in covered)
    return (f"<h3 id=\"simulated\">{html.escape(SIM_LABEL.capitalize())}: a check of the measuring chain, not "
            "evidence about the papers</h3><p>A simulated model answered from the examples' gold data with the "
            f"papers' effects planted (docs/simulation.md). Its {len(rows)} primary rows are not counted above; the "
            f"planted effect lies inside {held} of {len(covered)} of their 95% intervals.</p>"
            + ledger_table(rows, columns=("model",) + ledger_page.PAGE_COLUMNS + ("planted", "planted inside 95% CI")))
