"""Reading traces in a notebook: one example step by step, and two runs side by side filtered by outcome.

    from covlib.traces import view as trace_view
    trace_view.show("03_verify_and_edit_tables", "verify-edit-hotpotqa-bm25", example=0)   # one example, step by step
    trace_view.compare("03_verify_and_edit_tables", "verify-edit-hotpotqa-bm25", outcome="fixed")  # CoT-SC vs + VE

Every view is static HTML (it shows in JupyterLab, in the executed notebook and in the book) built from
escaped text only: trace text is model output, never markup. `browse` adds dropdowns where a kernel runs
(ipywidgets), and falls back to the static view elsewhere. Runs are named by their notebook and a part of
their file name (`runs(notebook)` lists them), or given as a path or a `traces.Trace`.
"""

from __future__ import annotations

import html
import json
import math
from pathlib import Path
from typing import Any, Sequence

from covlib import traces

TEXT_CAP = 4000  # characters of one value shown inline (the rest behind "more")
LIST_CAP = 50  # items of one list shown
ROW_CAP = 200  # examples listed per outcome in a comparison
MARK = {True: "\u2713 right", False: "\u2717 wrong", None: "not scored"}


class View(str):
    """HTML that Jupyter shows as HTML (`_repr_html_`) and that is also a plain string (to save or test)."""

    def _repr_html_(self) -> str:
        return str(self)


def runs(notebook: str) -> list[Path]:
    """A notebook's trace files (results/traces/<notebook>/)."""
    return traces.run_files(traces.folder_of(notebook))


def load(run: Any, part: str = "") -> traces.Trace:
    """A trace from a `Trace`, a path, or a notebook name plus a part of the run's file name (one match)."""
    if isinstance(run, traces.Trace):
        return run
    path = Path(run)
    if path.suffix == ".jsonl" or path.is_file():
        return traces.read(path)
    found = [p for p in runs(str(run)) if part in p.stem]
    if len(found) != 1:
        names = ", ".join(p.stem for p in runs(str(run))) or "none: run the notebook first"
        raise ValueError(f"{len(found)} runs of {run!r} match {part!r}; its runs: {names}")
    return traces.read(found[0])


def find(notebook: str, method: str | None = None, model: str | None = None, **params: Any) -> traces.Trace:
    """The one run of a notebook whose header has this method, model and these params (e.g. references="complete")."""
    found = []
    for path in runs(notebook):
        header = traces.read_header(path)
        if ((method is None or header.get("method") == method) and (model is None or header.get("model") == model)
                and all(header.get("params", {}).get(k) == v for k, v in params.items())):
            found.append(path)
    if len(found) != 1:
        wanted = ", ".join(f"{k}={v!r}" for k, v in dict(method=method, model=model, **params).items() if v is not None)
        raise ValueError(f"{len(found)} runs of {notebook!r} have {wanted}: {[p.stem for p in found] or runs(notebook)}")
    return traces.read(found[0])


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _text(value: str, cap: int = TEXT_CAP) -> str:
    if len(value) <= cap:
        return f"<pre class='trace-text'>{_e(value)}</pre>"
    return (f"<pre class='trace-text'>{_e(value[:cap])}</pre><details><summary>{len(value) - cap:,} more characters"
            f"</summary><pre class='trace-text'>{_e(value[cap:])}</pre></details>")


def number_text(value: Any) -> str:
    """A number as a reader reads it: an integer as it is, a float to 3 decimals with trailing zeros dropped
    (3.234498191626014 -> 3.234, 1.0 -> 1), one below 0.001 to 3 significant digits; anything else as text."""
    if not isinstance(value, float) or not math.isfinite(value):
        return str(value)
    if value != 0 and abs(value) < 0.001:
        return f"{value:.3g}"
    text = f"{value:.3f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _number_html(value: float) -> str:
    """A float shortened for reading, its full value in the tooltip."""
    short, full = number_text(value), json.dumps(value)
    return _e(short) if short == full else f"<span title='{_e(full)}'>{_e(short)}</span>"


def value_html(value: Any, depth: int = 0) -> str:
    """Any JSON value as escaped HTML: text in <pre>, numbers to 3 decimals, lists numbered, objects as two-column
    tables."""
    if isinstance(value, str):
        return _text(value) if ("\n" in value or len(value) > 120) else _e(value)
    if isinstance(value, float):
        return _number_html(value)
    if value is None or isinstance(value, (bool, int)):
        return _e(json.dumps(value))
    if depth > 4:
        return _text(json.dumps(value, ensure_ascii=False)[:TEXT_CAP])
    if isinstance(value, list):
        if not value:
            return "<i>none</i>"
        items = "".join(f"<li>{value_html(v, depth + 1)}</li>" for v in value[:LIST_CAP])
        more = f"<p>... {len(value) - LIST_CAP} more</p>" if len(value) > LIST_CAP else ""
        return f"<ol start='0'>{items}</ol>{more}"
    if isinstance(value, dict):
        if not value:
            return "<i>none</i>"
        rows = "".join(f"<tr><th>{_e(k)}</th><td>{value_html(v, depth + 1)}</td></tr>" for k, v in value.items())
        return f"<table class='trace-kv'>{rows}</table>"
    return _e(value)


def _retrieved_html(calls: Sequence[dict]) -> str:
    """What retrieval calls found, shown open: it is what the step's answer rests on."""
    parts = []
    for c in calls:
        if c.get("kind") != "retrieve":
            continue
        found = next((c[k] for k in ("passages", "sentences") if isinstance(c.get(k), list)), [])
        items = "".join(f"<li>{value_html(item)}</li>" for item in found[:LIST_CAP])
        parts.append(f"<p><b>retrieved</b> for <i>{_e(c.get('query', ''))}</i> ({_e(c.get('retriever', ''))})</p>"
                     f"<ol start='0'>{items}</ol>")
    return "".join(parts)


def _calls_html(trace: traces.Trace, calls: Sequence[dict]) -> str:
    if not calls:
        return ""
    rows = []
    for c in calls:
        extra = {k: v for k, v in c.items() if k not in ("kind", "key", "prompt")}
        prompt = ""
        if c.get("prompt") is not None:
            p = c["prompt"]
            shared = trace.prefixes.get(p.get("prefix", ""), "") if isinstance(p, dict) else ""
            own = p.get("text", "") if isinstance(p, dict) else str(p)
            prompt = (f"<details><summary>prompt ({len(shared) + len(own):,} characters)</summary>"
                      + (f"<details><summary>shared block ({len(shared):,} characters)</summary>{_text(shared)}</details>"
                         if shared else "") + _text(own) + "</details>")
        key = c.get("key")
        rows.append(f"<li><b>{_e(c.get('kind', '?'))}</b> key <code title='{_e(key)}'>{_e(str(key)[:16])}</code>"
                    f"{value_html(extra) if extra else ''}{prompt}</li>")
    return f"<details><summary>{len(calls)} call(s) and their cache keys</summary><ul>{''.join(rows)}</ul></details>"


def _verdict(record: dict) -> str:
    return MARK[traces.correct_of(record.get("correct"))]


def _not_edited(inputs: dict, outputs: dict, params: dict) -> str:
    """Verify-and-Edit's consistency check left the answer as it is: its score against the threshold."""
    threshold = inputs.get("threshold", params.get("threshold"))
    name = inputs.get("consistency", params.get("consistency"))
    score = f"consistency{f' ({name})' if isinstance(name, str) else ''} {number_text(outputs.get('score'))}"
    limit = f" ≥ threshold {number_text(threshold)}" if threshold is not None else ""
    return f"not edited: {score}{limit} (Algorithm 1 leaves a high-consistency answer as it is)"


def _round(inputs: dict) -> str:
    """' in round 2' for a step of CoV-RAG's second round or later ('' for the first)."""
    at = inputs.get("round")
    return f" in round {at + 1}" if isinstance(at, int) and not isinstance(at, bool) and at > 0 else ""


def _what(inputs: dict) -> str:
    """'not revised' at CoV-RAG's first σ, 'no further revision' at a later one."""
    return "no further revision" if _round(inputs) else "not revised"


def _not_revised(inputs: dict, outputs: dict) -> str:
    """CoV-RAG's σ did not fire: its rule and which of its conditions held."""
    conditions = [c for c in outputs.get("conditions") or [] if isinstance(c, dict)]
    held = [str(c.get("condition")) for c in conditions if c.get("holds") is True]
    rule = outputs.get("rule")
    counted = f"{len(held)} of {len(conditions)} conditions held" + (f": {', '.join(held)}" if held else "")
    return f"{_what(inputs)}: σ did not fire{_round(inputs)} ({f'{rule}; ' if isinstance(rule, str) else ''}{counted})"


def stop_reason(trace: traces.Trace, record: dict) -> str:
    """Why an example's steps end before the run's last step, from what its last step records (Verify-and-Edit's
    consistency check, CoV-RAG's σ, self-completion's reflection); '' when they run to the end or the trace does
    not say."""
    order = [s.get("name") for s in trace.header.get("steps", [])]
    steps = [s for s in record.get("steps") or [] if isinstance(s, dict)]
    if not steps or not order or steps[-1].get("name") == order[-1]:
        return ""
    last, params = steps[-1], trace.header.get("params") or {}
    inputs = last.get("inputs") if isinstance(last.get("inputs"), dict) else {}
    outputs = last.get("outputs") if isinstance(last.get("outputs"), dict) else {}
    if outputs.get("edited") is False and "score" in outputs:
        return _not_edited(inputs, outputs, params)
    if outputs.get("fired") is False:
        return _not_revised(inputs, outputs)
    if outputs.get("fired") is True and "max_rounds" in params:
        rounds = params["max_rounds"]
        return (f"{_what(inputs)}: σ fired{_round(inputs)}, but the run allows {number_text(rounds)} "
                f"round{'' if rounds == 1 else 's'} of revision")
    if outputs.get("refused") is False:
        return "no search round: the self-reflection answered instead of refusing"
    return ""


def _stop_html(why: str, record: dict, order: Sequence[str]) -> str:
    """The line under an example's last step that says which steps did not run, and `why` ('' when it is '')."""
    if not why:
        return ""
    ran = [s.get("name") for s in record.get("steps", []) if isinstance(s, dict)]
    first = order.index(ran[-1]) + 2 if ran[-1] in order else len(ran) + 1
    skipped = f"step {first}" if first == len(order) else f"steps {first}-{len(order)}"
    return f"<p class='trace-stop'><b>Stops here</b> ({_e(skipped)} not run): {_e(why)}.</p>"


def example_html(trace: traces.Trace, record: dict, heading: str = "h3", number: int | None = None) -> str:
    """One example's record as HTML: question, gold, prediction, then each step under the paper's name, and why
    its steps end early when they do; `number` is the example's number as the page shows it (default: "k of n",
    counted from 1 as the explorer counts)."""
    words = {s["name"]: s.get("paper", "") for s in trace.header.get("steps", [])}
    order = [s["name"] for s in trace.header.get("steps", [])]
    shown = f"{int(record.get('index') or 0) + 1} of {len(trace.records)}" if number is None else number
    parts = [f"<div class='trace-example'><{heading}>{_e(trace.title)}: example {_e(shown)} "
             f"<code>{_e(record.get('id'))}</code></{heading}>",
             "<table class='trace-summary'>",
             f"<tr><th>question</th><td>{value_html(record.get('question', ''))}</td></tr>",
             f"<tr><th>gold</th><td>{_e(' | '.join(map(str, record.get('gold', []))))}</td></tr>"]
    compare = trace.header.get("compare") or {}
    before = record.get("before")
    if before is not None:
        parts.append(f"<tr><th>{_e(compare.get('before', 'before'))}</th><td>{_e(before.get('prediction'))} "
                     f"({MARK[traces.correct_of(before.get('correct'))]})</td></tr>")
    parts.append(f"<tr><th>{_e(compare.get('after', 'prediction'))}</th><td>{_e(record.get('prediction'))} "
                 f"({_verdict(record)})</td></tr>")
    if before is not None:
        parts.append(f"<tr><th>outcome</th><td><b>{_e(traces.outcome(before.get('correct'), record.get('correct')))}"
                     "</b></td></tr>")
    if record.get("flags"):
        parts.append(f"<tr><th>flags</th><td>{value_html(record['flags'])}</td></tr>")
    why = stop_reason(trace, record)
    if why:
        parts.append(f"<tr><th>steps</th><td>{len(record.get('steps', []))} of {len(order)}: {_e(why)}</td></tr>")
    parts.append("</table>")
    sub = "h4" if heading == "h3" else "h3"
    for i, s in enumerate(record.get("steps", []), 1):
        number = order.index(s["name"]) + 1 if s["name"] in order else i
        parts.append(f"<section class='trace-step'><{sub}>Step {number}. {_e(s['name'])}</{sub}>")
        if words.get(s["name"]):
            parts.append(f"<p class='trace-paper'><i>The paper: {_e(words[s['name']])}</i></p>")
        if s.get("inputs"):
            parts.append(f"<p><b>in</b></p>{value_html(s['inputs'])}")
        if s.get("outputs"):
            parts.append(f"<p><b>out</b></p>{value_html(s['outputs'])}")
        parts.append(_retrieved_html(s.get("calls", [])) + _calls_html(trace, s.get("calls", [])) + "</section>")
    parts.append(_stop_html(why, record, order) + "</div>")
    return "".join(parts)


def show(run: Any, part: str = "", example: str | int = 0) -> View:
    """One example of one run, step by step (by example id or position)."""
    trace = load(run, part)
    return View(example_html(trace, trace.find(example)))


def outcome_rows(a: Any, b: Any = None, part_a: str = "", part_b: str = "") -> list[tuple[dict, dict, str | None]]:
    """(before, after, outcome) per example: one run with its `before`, or two runs joined on example id."""
    first = load(a, part_a)
    return traces.pairs(first, None if b is None else load(b, part_b))


def _names(first: traces.Trace, second: traces.Trace | None) -> tuple[str, str]:
    if second is not None:
        return first.title, second.title
    compare = first.header.get("compare") or {}
    return compare.get("before", "before"), compare.get("after", first.title)


def _coverage(first: traces.Trace, second: traces.Trace | None, rows: Sequence[tuple]) -> str:
    """How many examples the comparison covers, and what it leaves out (not scored, or in one run only)."""
    unscored = sum(o is None for _, _, o in rows)
    text = f"{len(rows) - unscored} examples compared" + (f", {unscored} not scored" if unscored else "")
    if second is not None:
        ids_a, ids_b = {r["id"] for r in first.records}, {r["id"] for r in second.records}
        if ids_a != ids_b:
            text += f"; only in the first run: {len(ids_a - ids_b)}, only in the second: {len(ids_b - ids_a)}"
    return text


def compare(a: Any, part_a: str = "", b: Any = None, part_b: str = "", outcome: str | None = None) -> View:
    """Two runs of the same examples side by side, counted and listed by outcome (fixed, broken, both right,
    both wrong); `outcome` opens one group. With one run, its records' `before` is the first run."""
    if outcome is not None and outcome not in traces.OUTCOMES:
        raise ValueError(f"outcome must be one of {traces.OUTCOMES}, not {outcome!r}")
    first = load(a, part_a)
    second = None if b is None else load(b, part_b)
    rows = traces.pairs(first, second)
    left, right = _names(first, second)
    counts = traces.count_outcomes(rows)
    head = "".join(f"<th>{_e(o)}</th>" for o in traces.OUTCOMES)
    cells = "".join(f"<td>{counts[o]}</td>" for o in traces.OUTCOMES)
    parts = [f"<div class='trace-compare'><h3>{_e(left)} vs {_e(right)}</h3>",
             f"<p>{_coverage(first, second, rows)}; right means correct &ge; 0.5.</p>",
             f"<table class='trace-counts'><tr>{head}</tr><tr>{cells}</tr></table>"]
    for o in (traces.OUTCOMES if outcome is None else (outcome,)):
        group = [r for r in rows if r[2] == o]
        lines = "".join(
            f"<tr><td><code>{_e(after.get('id'))}</code></td><td>{_e(str(after.get('question', ''))[:200])}</td>"
            f"<td>{_e(' | '.join(map(str, after.get('gold', [])))[:120])}</td><td>{_e(before.get('prediction'))}</td>"
            f"<td>{_e(after.get('prediction'))}</td></tr>" for before, after, _ in group[:ROW_CAP])
        more = f"<p>... {len(group) - ROW_CAP} more</p>" if len(group) > ROW_CAP else ""
        parts.append(f"<details{' open' if outcome else ''}><summary><b>{_e(o)}</b> ({len(group)})</summary>"
                     f"<table class='trace-list'><tr><th>id</th><th>question</th><th>gold</th><th>{_e(left)}</th>"
                     f"<th>{_e(right)}</th></tr>{lines}</table>{more}</details>")
    parts.append("</div>")
    return View("".join(parts))


def pick(run: Any, outcomes: Sequence[str] = ("fixed", "broken"), flag: str | None = None, part: str = "",
         b: Any = None, part_b: str = "") -> str | None:
    """The id of a telling example: the first with the first outcome found in `outcomes` (within `run`, or from `run`
    to `b`), else the first whose flag `flag` is set, else the first example (None for an empty run)."""
    trace = load(run, part)
    rows = traces.pairs(trace, None if b is None else load(b, part_b))
    for wanted in outcomes:
        for _, after, o in rows:
            if o == wanted:
                return after["id"]
    flagged = [r for r in trace.records if flag and r.get("flags", {}).get(flag)]
    chosen = flagged or trace.records
    return chosen[0]["id"] if chosen else None


def side_by_side(a: Any, b: Any, example: str, part_a: str = "", part_b: str = "") -> View:
    """One example in two runs, step by step, in two columns."""
    first, second = load(a, part_a), load(b, part_b)
    cols = "".join(f"<td style='vertical-align:top;width:50%'>{example_html(t, t.find(example), 'h4')}</td>"
                   for t in (first, second))
    return View(f"<table class='trace-side'><tr>{cols}</tr></table>")


def browse(a: Any, part_a: str = "", b: Any = None, part_b: str = "") -> Any:
    """Dropdowns (outcome, then example) over a comparison where a kernel runs; the static `compare` elsewhere."""
    try:
        import ipywidgets as widgets
        from IPython import get_ipython
    except ImportError:
        return compare(a, part_a, b, part_b)
    if get_ipython() is None or getattr(get_ipython(), "kernel", None) is None:
        return compare(a, part_a, b, part_b)
    first = load(a, part_a)
    second = None if b is None else load(b, part_b)
    rows = traces.pairs(first, second)
    pick = widgets.Dropdown(options=list(traces.OUTCOMES), description="outcome")
    which = widgets.Dropdown(description="example")
    page = widgets.HTML()

    def _fill(_: Any = None) -> None:
        which.options = [(f"{after['id']}: {str(after.get('question', ''))[:60]}", after["id"])
                         for _, after, o in rows if o == pick.value] or [("none", "")]

    def _show(_: Any = None) -> None:
        if not which.value:
            page.value = "<p>no example with this outcome</p>"
        elif second is None:
            page.value = example_html(first, first.find(which.value))
        else:
            page.value = side_by_side(first, second, which.value)

    pick.observe(_fill, "value")
    which.observe(_show, "value")
    _fill()
    _show()
    return widgets.VBox([widgets.HBox([pick, which]), page])
