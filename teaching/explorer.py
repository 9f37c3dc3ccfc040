"""The book's trace explorer: per notebook its runs, per run a filterable list of its examples, per example a page.

`write` reads results/traces/<notebook>/*.jsonl (covlib.traces) and writes, beside the book's pages,
`explore-<notebook>.html` (every run: title, examples and damaged lines, complete, interrupted or incomplete (its
end line counts other records than were read), outcome counts linking to the run's page filtered on them),
`explore/<notebook>/<run>.html` (one row per example: number, id, question, prediction, correct, outcome, parse
failures, edited, σ fired, rounds) and `explore/<notebook>/<run>/<n>.html` (example n, counted from 1 as everywhere
on these pages, step by step, `covlib.traces.view.example_html`: markup other than its own goes through the book's
sanitiser; previous / next / back links). A run's page stays light (no step text, one short row per example; a
full-profile notebook 03 has 16 runs of up to 1000 examples, one page each). Its filters (select boxes, only those
the run has, each value with its count) are a small inline script that sets `hidden` on the rows that do not match,
reads a first filter from the address (`explore/03_verify_and_edit_tables/<run>.html#outcome=fixed`) and says in
words why a filter leaves no row; without JavaScript every row shows. Runs with a before and an after come first
on the notebook's page. Trace text is model output: everything is escaped, nothing remote is linked.
"""

from __future__ import annotations

import html
import json
import math
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Collection, Sequence

from covlib import traces
from covlib.traces import schema as trace_schema
from covlib.traces import view as trace_view
from teaching.safe_html import neutral_paths, sanitize

QUESTION_CAP = 140  # characters of a question on the list page (the example's page has all of it)
PREDICTION_CAP = 80
# (filter key, column heading, flag name in the record): the columns the list page can filter on besides outcome
FLAG_FILTERS = (("parse", "parse failures", "parse_failures"), ("edited", "edited", "edited"),
                ("fired", "σ fired", "fired"), ("rounds", "rounds", "rounds"))
FILTERS = ("outcome",) + tuple(key for key, _, _ in FLAG_FILTERS)
HEADS = {"outcome": "outcome", **{key: head for key, head, _ in FLAG_FILTERS}}
# why no example has a filter's value, where the method has words for it ({n}: the run's examples)
NONE_WHY = {("fired", "yes"): "σ never fired (0 of {n})", ("fired", "no"): "σ fired on all {n}",
            ("edited", "yes"): "no example was edited (0 of {n})",
            ("edited", "no"): "every example was edited (all {n})", ("parse", "1+"): "every answer parsed (0 of {n} failed)"}
_KNOWN = frozenset({"b", "br", "code", "dd", "details", "div", "dl", "dt", "em", "h2", "h3", "h4", "i", "li", "ol", "p",
                    "pre", "section", "small", "span", "strong", "summary", "table", "tbody", "td", "th", "thead", "tr",
                    "ul"})  # the elements trace_view.example_html writes, and harmless ones like them (no link, no image)
_MARKUP = re.compile(r"</?([a-z0-9]+)(?:\s+(?:class|title|start|open)(?:='[^'<>]*'|=\"[^\"<>]*\")?)*\s*>", re.I)
NONE = "-"  # a row's value where the record has no such flag (or no `before`: no outcome)

_STYLE = """<style>
.covlib-book table.explore { font-size: .85rem; margin: .5rem 0 2rem; } .covlib-book table.explore td { vertical-align: top; }
.covlib-book table.explore tr[hidden] { display: none; } .covlib-book .explore-bar { position: sticky; top: 2.4rem;
  background: #fff; padding: .4rem 0; border-bottom: 1px solid #ddd; z-index: 5; } .covlib-book .explore-bar label { margin-right: 1rem; }
.covlib-book .interrupted { color: #a33; } .covlib-book table.explore td:nth-child(2) code { white-space: nowrap; }
.covlib-book .trace-step { border-left: 3px solid #ddd; padding-left: .8rem; margin: 1rem 0; }
.covlib-book .explore-why { color: #a33; font-weight: bold; } .covlib-book .trace-stop { color: #555; }
</style>"""

# The filters' script (teaching/explorer.js), written inline into each run's page: it loads nothing, works from file://
_SCRIPT = Path(__file__).with_name("explorer.js").read_text(encoding="utf-8")


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _cap(text: Any, cap: int) -> str:
    text = "" if text is None else str(text)
    return text if len(text) <= cap else text[: cap - 1] + "…"


def safe_name(text: str) -> str:
    """A run's or notebook's name as a file name (letters, digits, '.', '_' and '-' only)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text).lstrip(".") or "run"


def flag_value(flags: Any, name: str) -> str:
    """A flag as a row's filter value: 'yes' / 'no' for a boolean, the number for a count, '-' when absent."""
    value = flags.get(name) if isinstance(flags, dict) else None
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return str(int(value)) if math.isfinite(value) else NONE
    return NONE if value is None else _cap(value, 20)


def outcome_value(outcome: str | None) -> str:
    """An outcome as a filter value ('both right' -> 'both-right'; '-' when the run has no before/after)."""
    return NONE if outcome is None else outcome.replace(" ", "-")


def row_values(record: dict, outcome: str | None) -> dict[str, str]:
    """The filter values of one example's row: outcome, parse failures, edited, σ fired, rounds."""
    values = {"outcome": outcome_value(outcome)}
    for key, _, flag in FLAG_FILTERS:
        values[key] = flag_value(record.get("flags"), flag)
    return values


def _mark(correct: Any) -> str:
    right = traces.correct_of(correct)
    if right is None:
        return "–"
    exact = float(correct) in (0.0, 1.0)
    return ("✓" if right else "✗") + ("" if exact else f" {float(correct):.3g}")


def read_runs(folder: Path, notes: list[str] | None = None) -> list[tuple[Path, traces.Trace | None, str]]:
    """(file, trace or None, why not) for every trace file of a notebook, by name; an unreadable one says why."""
    out = []
    for path in traces.run_files(folder):
        try:
            out.append((path, traces.read(path), ""))
        except (ValueError, OSError, UnicodeDecodeError) as err:
            reason = str(err).splitlines()[0][:200] if str(err) else type(err).__name__
            out.append((path, None, reason))
            if notes is not None:
                notes.append(f"{folder.name}/{path.name}: trace skipped ({reason})")
    return out


def run_state(trace: traces.Trace, long: bool = False) -> str:
    """A run's state as HTML: complete, interrupted (no end line), or incomplete (its end line counts other records
    than were read: records lost or damaged); `long` adds what interrupted means."""
    said = trace_schema.end_records(trace.path) if trace.complete else None
    if not trace.complete:
        why = " (no end line: the records written before it stopped)" if long else ""
        return f"<span class='interrupted'>interrupted{why}</span>"
    if said is not None and said != len(trace.records):
        return (f"<span class='interrupted'>incomplete: end line says {said} records, "
                f"{len(trace.records)} read</span>")
    return "complete"


def examples_text(trace: traces.Trace) -> str:
    """How many examples the run has, and how many of its lines are damaged (fail the trace schema: skipped) if any."""
    damaged = (f", <span class='interrupted' title='lines that fail the trace schema, skipped'>{trace.damaged} "
               "damaged</span>" if trace.damaged else "")
    return f"{len(trace.records)} examples{damaged}"


def _offered(counts: Counter) -> bool:
    """Whether a run has a filter: some row has a value for it."""
    return bool(set(counts) - {NONE})


def _label(value: str) -> str:
    """A filter value as the page names it ('both-right' -> 'both right', '1+' -> '1 or more')."""
    return {NONE: "(none)", "1+": "1 or more"}.get(value, value.replace("-", " "))


def _ordered(key: str, counts: Counter) -> list[str]:
    """A filter's values in reading order: outcomes as `traces.OUTCOMES`, numbers by size, '(none)' last."""
    rank = {outcome_value(o): i for i, o in enumerate(traces.OUTCOMES)} if key == "outcome" else {}
    return sorted(counts, key=lambda v: (v == NONE, rank.get(v, len(rank)), len(v), v))


def has_text(key: str, counts: Counter) -> str:
    """What a run's rows hold for one filter, in words: 'both right on 12, both wrong on 28', '0 on all 40'."""
    values = _ordered(key, counts)
    if len(values) == 1:
        return f"{_label(values[0])} on all {counts[values[0]]}"
    return ", ".join(f"{_label(v)} on {counts[v]}" for v in values)


def absent_reason(key: str, compare: bool) -> str:
    """Why a run has no such filter at all (no before and after, no such flag)."""
    if key != "outcome":
        return f"this run has no {HEADS[key]} filter: no example records it"
    return ("this run has no outcome: no example was scored both before and after" if compare else
            "this run has no outcome: it has no before and after to compare")


def filter_data(values: Sequence[dict[str, str]], compare: bool = False) -> dict[str, dict[str, Any]]:
    """Per filter, what the page's script says when it leaves no row: its heading, why the run has no such filter
    ('' when it has), what the run's rows hold, and the method's words for a value no row has."""
    out = {}
    for key in FILTERS:
        counts = Counter(v[key] for v in values)
        out[key] = {"head": HEADS[key], "absent": "" if _offered(counts) else absent_reason(key, compare),
                    "has": has_text(key, counts) if counts else "",
                    "why": {v: text.format(n=len(values)) for (k, v), text in NONE_WHY.items() if k == key}}
    return out


def _script(values: Sequence[dict[str, str]], compare: bool) -> str:
    """The filters' data as JSON (`<`, `>`, `&` escaped: trace text cannot end the element) and their script."""
    data = json.dumps(filter_data(values, compare), ensure_ascii=True)
    data = data.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f'<script type="application/json" id="explore-data">{data}</script><script>\n{_SCRIPT}</script>'


def _options(key: str, counts: Counter) -> str:
    """The values a filter offers: those some row has, each with its count ('1 or more' for parse failures)."""
    shown = [(v, counts[v]) for v in _ordered(key, counts)]
    failed = sum(n for v, n in counts.items() if v.isdigit() and int(v) >= 1)
    shown += [("1+", failed)] if key == "parse" and failed else []
    return "".join(f'<option value="{_e(v)}">{_e(_label(v))} ({n})</option>' for v, n in shown)


def filter_bar(values: Sequence[dict[str, str]]) -> str:
    """The select boxes of the filters the run has (some row has a value), hidden until the script shows them (no
    JavaScript, no filter); '' when it has none."""
    counts = {k: Counter(v[k] for v in values) for k in FILTERS}
    boxes = "".join(f'<label>{_e(HEADS[k])} <select id="explore-{k}"><option value="">any</option>'
                    f'{_options(k, counts[k])}</select></label>' for k in FILTERS if _offered(counts[k]))
    return f'<div class="explore-bar" id="explore-filters" hidden>Show only: {boxes}<a href="#">all rows</a></div>' \
        if boxes else ""


def _count_cell(href: str, n: int) -> str:
    """An outcome count, linking to the run filtered on it unless it is 0 (a link to an empty table)."""
    return f'<td><a href="{href}">{n}</a></td>' if n else f"<td>{n}</td>"


def _run_section(stem: str, run: str, trace: traces.Trace, rows: list[tuple[dict, str | None]], anchor: str) -> str:
    header = trace.header
    compare = header.get("compare") or {}
    about = [f"{examples_text(trace)}, {run_state(trace, long=True)}",
             f"paper <code>{_e(header.get('paper', ''))}</code>, method <code>{_e(header.get('method', ''))}</code>",
             f"model <code>{_e(header.get('model'))}</code>" if header.get("model") else "",
             f"file <code>{_e(trace.path.name)}</code>"]
    parts = [f'<section id="{_e(anchor)}"><h2>{_e(trace.title)}</h2><p>{"; ".join(a for a in about if a)}.</p>']
    if compare or any(o is not None for _, o in rows):
        counts = traces.count_outcomes((None, None, o) for _, o in rows)
        cells = "".join(_count_cell(f"#outcome={outcome_value(o)}", counts[o]) for o in traces.OUTCOMES)
        parts.append(f"<p>Before: {_e(compare.get('before'))}; after: {_e(compare.get('after'))}.</p>"
                     "<table class='trace-counts'><tr>" + "".join(f"<th>{_e(o)}</th>" for o in traces.OUTCOMES)
                     + f"</tr><tr>{cells}</tr></table>")
    heads = "".join(f"<th>{h}</th>" for h in ("#", "id", "question", "prediction", "correct", "outcome",
                                              *(_e(head) for _, head, _ in FLAG_FILTERS)))
    body = []
    for number, (record, outcome) in enumerate(rows, 1):
        values = row_values(record, outcome)
        data = " ".join(f'data-{k}="{_e(v)}"' for k, v in values.items())
        cells = [f'<a href="{_e(run)}/{number}.html">{number}</a>',
                 f"<code>{_e(_cap(record.get('id'), 40))}</code>", _e(_cap(record.get("question"), QUESTION_CAP)),
                 _e(_cap(record.get("prediction"), PREDICTION_CAP)), _mark(record.get("correct")),
                 _e(outcome or NONE), *(_e(values[k]) for k, _, _ in FLAG_FILTERS)]
        body.append(f"<tr {data}>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    parts.append(f'<p id="{_e(anchor)}-table-shown">{len(rows)} of {len(rows)} shown</p>'
                 f'<p class="explore-why" id="{_e(anchor)}-table-why" hidden></p>'
                 f'<table class="explore" id="{_e(anchor)}-table"><thead><tr>{heads}</tr></thead>'
                 f'<tbody>{"".join(body)}</tbody></table></section>')
    return "".join(parts)




def run_page(stem: str, run: str, trace: traces.Trace, page: Callable[[str, str], str], banner: str = "",
             notebook_page: bool = False) -> str:
    """One run's page: its outcome counts and a filterable table of its examples, each linking to its own page."""
    up = "../../"
    nav = [f'<a href="{up}index.html">↑ index</a>', f'<a href="{up}explore-{_e(safe_name(stem))}.html">every run of '
           f'<code>{_e(stem)}</code></a>']
    if notebook_page:
        nav.append(f'<a href="{up}{_e(safe_name(stem))}.html">the notebook</a>')
    rows = [(after, o) for _, after, o in traces.pairs(trace)]  # outcome None without a before
    values = [row_values(r, o) for r, o in rows]
    parts = [banner, f'<nav class="covlib-nav">{"".join(nav)}</nav>', _STYLE,
             f"<p><code>{_e(stem)}</code>: one row per example; its number opens the example's own page (each step "
             "under the paper's name, the prompts and the cache keys that reproduce them).</p>",
             filter_bar(values) if values else "", _run_section(safe_name(stem), run, trace, rows, "run"),
             _script(values, bool(trace.header.get("compare"))) if values else ""]
    return page(f"Traces: {stem}: {trace.title}", "".join(parts))


def interest(trace: traces.Trace | None) -> int:
    """Where a run goes on its notebook's page: 0 for one with a before and an after (what the method changed), 1
    for a baseline, 2 for one that cannot be shown."""
    if trace is None:
        return 2
    return 0 if trace.header.get("compare") or any(r.get("before") for r in trace.records) else 1


def list_page(stem: str, runs: Sequence[tuple[Path, traces.Trace | None, str]], page: Callable[[str, str], str],
              banner: str = "", notebook_page: bool = False, names: dict[Path, str] | None = None) -> str:
    """The explorer page of one notebook: every run, its size and outcome counts, each linking to its run page."""
    nav = ['<a href="index.html">↑ index</a>']
    if notebook_page:
        nav.append(f'<a href="{_e(safe_name(stem))}.html">the notebook <code>{_e(stem)}</code></a>')
    parts = [banner, f'<nav class="covlib-nav">{"".join(nav)}</nav>', _STYLE,
             f"<h1>Traces of <code>{_e(stem)}</code>: every example, step by step</h1>",
             "<p>Each run the notebook made, those with a before and an after first (what the method changed), then "
             "the baselines. A run's page lists its examples, filterable by what the run has of outcome, parse "
             "failures, edited, σ fired and rounds; an outcome compares the run's before and after (fixed: wrong "
             "before, right after). A count opens the run's page filtered on it.</p>"]
    heads = "".join(f"<th>{_e(h)}</th>" for h in ("run", "examples", "state", "before → after", *traces.OUTCOMES))
    lines = []
    for path, trace, reason in sorted(runs, key=lambda run: interest(run[1])):
        if trace is None:
            lines.append(f"<tr><td><code>{_e(path.name)}</code></td><td colspan='{3 + len(traces.OUTCOMES)}' "
                         f"class='interrupted'>Skipped: {_e(reason)}.</td></tr>")
            continue
        href = f"explore/{_e(safe_name(stem))}/{_e((names or run_names([path]))[path])}.html"
        outcomes = [o for _, _, o in traces.pairs(trace)]
        compare = trace.header.get("compare") or {}
        counts = traces.count_outcomes((None, None, o) for o in outcomes)
        cells = ("".join(_count_cell(f"{href}#outcome={outcome_value(o)}", counts[o]) for o in traces.OUTCOMES)
                 if any(o is not None for o in outcomes) else "<td>-</td>" * len(traces.OUTCOMES))
        change = f"{_e(compare.get('before'))} → {_e(compare.get('after'))}" if compare else "-"
        size = examples_text(trace) if trace.damaged else str(len(trace.records))
        lines.append(f'<tr><td><a href="{href}">{_e(trace.title)}</a></td><td>{size}</td>'
                     f"<td>{run_state(trace)}</td><td>{change}</td>{cells}</tr>")
    parts.append(f"<table class='explore-runs'><thead><tr>{heads}</tr></thead><tbody>{''.join(lines)}</tbody></table>")
    return page(f"Traces: {stem}", "".join(parts))


def safe_body(fragment: str) -> str:
    """`fragment` as it is when its markup is only trace_view's (allowlisted tags; class, title, start, open
    attributes with escaped values), else through the book's sanitiser (bleach: ~10 ms a page, minutes for a
    full-profile book, so only where something else is there)."""
    tags = _MARKUP.findall(fragment)
    if fragment.count("<") == len(tags) and all(name.lower() in _KNOWN for name in tags):
        return fragment
    return sanitize(fragment)


def example_page(stem: str, run: str, trace: traces.Trace, position: int, page: Callable[[str, str], str],
                 banner: str = "") -> str:
    """Example `position` + 1 (counted from 1, as its file name and the run's list count it): its steps
    (`trace_view.example_html`, sanitised) with previous / next / back links."""
    up = "../../../"
    back = f'../{_e(run)}.html'
    number = position + 1
    links = [f'<a href="{up}index.html">↑ index</a>', f'<a href="{back}">back to the list</a>']
    if number > 1:
        links.append(f'<a href="{number - 1}.html">← example {number - 1}</a>')
    if number < len(trace.records):
        links.append(f'<a href="{number + 1}.html">example {number + 1} →</a>')
    nav = f'<nav class="covlib-nav">{"".join(links)}</nav>'
    body = safe_body(trace_view.example_html(trace, trace.records[position], "h2", number=number))
    title = f"{stem}: {trace.title}, example {number}"
    return page(title, f"{banner}{nav}{_STYLE}<p><code>{_e(stem)}</code> / {_e(trace.title)} "
                       f"(<code>{_e(run)}</code>), example {number} of {len(trace.records)}</p>{body}")


def run_names(files: Sequence[Path]) -> dict[Path, str]:
    """Each trace file's page name: its stem in letters, digits, '_' and '-' (no dot: a page `<run>.html` never meets
    a folder `<run>/`), made unique with -2, -3, ... when two stems come out the same."""
    names: dict[Path, str] = {}
    used: set[str] = set()
    for path in files:
        base = re.sub(r"[^A-Za-z0-9_-]", "_", path.stem) or "run"
        name, n = base, 1
        while name.lower() in used:
            n += 1
            name = f"{base}-{n}"
        used.add(name.lower())
        names[path] = name
    return names


def _write_run(out: Path, stem: str, run: str, trace: traces.Trace, page: Callable[[str, str], str], banner: str,
               notebook_page: bool) -> None:
    target = out / "explore" / safe_name(stem) / run
    target.mkdir(parents=True, exist_ok=True)
    for i in range(len(trace.records)):
        text = example_page(stem, run, trace, i, page, banner)
        (target / f"{i + 1}.html").write_text(neutral_paths(text), encoding="utf-8")
    text = run_page(stem, run, trace, page, banner, notebook_page)
    (target.parent / f"{run}.html").write_text(neutral_paths(text), encoding="utf-8")


def write(out: Path, folder: Path, stems: Sequence[str], page: Callable[[str, str], str], banner: str = "",
          notebook_pages: Collection[str] = (), notes: list[str] | None = None) -> dict[str, Path]:
    """Write the explorer of every notebook in `stems` with traces under `folder` into `out`; {notebook: list page}.

    Explorer pages of an earlier build are removed first (a run that shrank leaves no stale example page). A run
    that cannot be shown (a record the views cannot read) is named on the notebook's page and in `notes`; the rest
    of the book is built."""
    out, folder = Path(out), Path(folder)
    notes = notes if notes is not None else []
    out.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(out / "explore", ignore_errors=True)
    for old in out.glob("explore-*.html"):
        old.unlink()
    written: dict[str, Path] = {}
    for stem in stems:
        runs = read_runs(folder / stem, notes) if (folder / stem).is_dir() else []
        if not runs:
            continue
        names = run_names([path for path, _, _ in runs])
        shown = []
        for path, trace, reason in runs:
            if trace is not None:
                try:
                    _write_run(out, stem, names[path], trace, page, banner, stem in notebook_pages)
                except Exception as err:  # noqa: BLE001 - one unreadable run must not stop the book
                    reason = f"could not be shown ({type(err).__name__}: {str(err)[:120]})"
                    notes.append(f"{stem}/{path.name}: trace {reason}")
                    shutil.rmtree(out / "explore" / safe_name(stem) / names[path], ignore_errors=True)
                    trace = None
            shown.append((path, trace, reason))
        written[stem] = out / f"explore-{safe_name(stem)}.html"
        text = list_page(stem, shown, page, banner, stem in notebook_pages, names)
        written[stem].write_text(neutral_paths(text), encoding="utf-8")
    return written
