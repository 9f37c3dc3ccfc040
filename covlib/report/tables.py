"""One way every result table reads, in the notebook, in tables/<name>.md and in the book.

`present(df)` turns the frame a notebook builds (numbers, "X 95% CI" texts, "X low"/"X high", "paper X") into a
`Table` of display texts:

- one cell per measure, "ours [95% CI]": a measure's value column is dropped when its interval text ("X 95% CI",
  which starts with the value) is there; "X low" and "X high" are joined into that text;
- the paper's number right after ours ("paper X" moves to just after "X [95% CI]");
- blank, never NaN, <NA> or None; whole-number columns (n, counts, thresholds) as integers; p values to three
  significant digits ("<0.001" below); other numbers with the table's `floatfmt`;
- no pandas index; a caption holding what is the same on every row (a column with one value on every row, and the
  meta a notebook passes: paper, model, judge, key facts, corpus, profile, n), so the rows keep what differs.

`Table` shows itself as HTML in Jupyter (a <table> with a <caption>, every cell escaped: cells carry model output) and
as Markdown (`to_markdown`, what `results.save_table` writes and the book renders). `problems(table)` lists what would
break these rules; the notebook tests run it over every table a smoke run wrote.
"""

from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

INTERVAL = re.compile(r"^(?P<measure>.+?) (?:95% CI|\[95% CI\])(?P<rest>.*)$")  # "EM 95% CI", "Δ 95% CI (paired)"
INTERVAL_HEADER = "[95% CI]"
PAPER = re.compile(r"^paper (?P<measure>.+)$")  # "paper EM/acc": the paper's number for ours "EM/acc"
CAPTION_META = ("paper", "model", "judge", "key_facts", "corpus", "knowledge", "profile", "n", "note")
BLANKS = ("nan", "NaN", "<NA>", "None", "NaT", "n/a [n/a]")
COUNT = re.compile(r"^(n|k|n[ _(].*|.* n|#.*|edited|parse failures|holds|of parsed|ranked|unparsed|systems|steps|"
                   r"σ fired|unverified|answerable|threshold|noise|n_refs)$")
_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?(?:e[-+]?\d+)?$")


@dataclass(frozen=True)
class Table:
    """A result table as its reader sees it: column names, rows of display texts, a caption."""

    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str = ""
    paths: tuple[Path, ...] = field(default=(), compare=False)  # the files `results.save_table` wrote

    def to_markdown(self) -> str:
        """A GitHub-flavoured Markdown table (numbers right-aligned) with the caption above it."""
        def cell(text: str) -> str:
            return text.replace("|", "\\|").replace("\n", " ")

        right = [all(not r[i] or _NUMBER.match(r[i].lstrip("<")) for r in self.rows) and any(r[i] for r in self.rows)
                 for i in range(len(self.columns))]
        lines = ["| " + " | ".join(cell(c) for c in self.columns) + " |",
                 "|" + "|".join("---:" if r else ":---" for r in right) + "|"]
        lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in self.rows]
        head = f"_{cell(self.caption)}_\n\n" if self.caption else ""
        return head + "\n".join(lines) + "\n"

    def _repr_html_(self) -> str:
        caption = f"<caption>{html.escape(self.caption)}</caption>" if self.caption else ""
        head = "".join(f"<th>{html.escape(c)}</th>" for c in self.columns)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in row) + "</tr>" for row in self.rows)
        return (f'<table class="covlib-table">{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>')

    def __repr__(self) -> str:
        return self.to_markdown()


def _blank(value: Any) -> bool:
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    if isinstance(value, float) and not math.isfinite(value):
        return True
    return isinstance(value, str) and value.strip() in BLANKS + ("",)


def _whole(values: Sequence[Any]) -> bool:
    numbers = [v for v in values if not _blank(v)]
    return bool(numbers) and all(isinstance(v, (int, float)) and not isinstance(v, bool) and float(v).is_integer()
                                 for v in numbers)


def p_text(p: Any) -> str:
    """A p value as a table shows it: three significant digits, "<0.001" below 0.001, blank when missing."""
    if _blank(p) or not isinstance(p, (int, float)):
        return "" if _blank(p) else str(p)
    return "<0.001" if p < 0.001 else f"{p:.3g}"


def _text(value: Any, floatfmt: str, whole: bool) -> str:
    if _blank(value):
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return str(int(value)) if whole or isinstance(value, int) else format(value, floatfmt)
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return _text(value.item(), floatfmt, whole)
    return str(value).strip()


def _interval_text(value: Any, low: Any, high: Any, floatfmt: str) -> str:
    if _blank(value):
        return ""
    text = format(float(value), floatfmt)
    if _blank(low) or _blank(high):
        return text
    return f"{text} [{format(float(low), floatfmt)}, {format(float(high), floatfmt)}]"


def _join_low_high(df: pd.DataFrame, floatfmt: str) -> pd.DataFrame:
    """ "X", "X low", "X high" -> one "X 95% CI" text column (the value and its interval), in X's place."""
    for measure in [c for c in df.columns if f"{c} low" in df.columns and f"{c} high" in df.columns]:
        df[f"{measure} 95% CI"] = [_interval_text(v, lo, hi, floatfmt)
                                   for v, lo, hi in zip(df[measure], df[f"{measure} low"], df[f"{measure} high"])]
        df = df.drop(columns=[f"{measure} low", f"{measure} high"])
        cols = [c for c in df.columns if c != f"{measure} 95% CI"]
        cols.insert(cols.index(measure) + 1, f"{measure} 95% CI")
        df = df[cols]
    return df


def _merge_intervals(df: pd.DataFrame, floatfmt: str) -> tuple[pd.DataFrame, dict[str, str]]:
    """Each interval column takes its measure's place as "X [95% CI]" (the value alone where no interval was drawn).

    Returns the frame and {measure: its column}.
    """
    measures: dict[str, str] = {}
    for column in list(df.columns):
        match = INTERVAL.match(column) if isinstance(column, str) else None
        if not match:
            continue
        measure, rest = match.group("measure"), match.group("rest")
        name = f"{measure} {INTERVAL_HEADER}{rest}"
        texts = [("" if _blank(t) else str(t)) for t in df[column]]
        if measure in df.columns:  # the interval text starts with the value: keep the value where no interval is
            texts = [t or _text(v, floatfmt, False) for t, v in zip(texts, df[measure])]
            df = df.drop(columns=[measure])
        df = df.rename(columns={column: name})
        df[name] = texts
        measures[measure] = name
    return df, measures


def _paper_beside_ours(columns: list[str], measures: dict[str, str]) -> list[str]:
    """The paper's column of a measure right after ours ("paper AUC" after "AUC [95% CI]")."""
    papers = [c for c in columns if (m := PAPER.match(c)) and m.group("measure") in measures]
    order = [c for c in columns if c not in papers]
    for paper in papers:
        ours = measures[PAPER.match(paper).group("measure")]
        order.insert(order.index(ours) + 1, paper)
    return order


def _caption_parts(df: pd.DataFrame, measures: dict[str, str], meta: dict[str, Any],
                   params: dict[str, Any]) -> tuple[list[str], list[str]]:
    """What is the same on every row: ("name: value" texts, the columns they came from; measures stay columns)."""
    parts, constant = [], []
    kept = set(measures.values())
    if len(df) >= 2:
        for column in [c for c in list(df.columns)[1:] if c not in kept and not PAPER.match(c)]:
            values = {str(v).strip() for v in df[column] if not _blank(v)}
            if (len(values) == 1 and df[column].map(_blank).sum() == 0 and not pd.api.types.is_numeric_dtype(df[column])
                    and not _NUMBER.match(next(iter(values)))):
                parts.append(f"{column}: {values.pop()}")
                constant.append(column)
    meta = {**{k: v for k, v in params.items() if k == "profile"}, **meta}
    for key in CAPTION_META:
        value = meta.get(key)
        if isinstance(value, dict) and all(isinstance(v, (str, int, float)) for v in value.values()):
            value = ", ".join(f"{k} {v}" for k, v in value.items())  # n per dataset: "NQ 20, WebQ 20"
        if value is None or (isinstance(value, str) and not value) or isinstance(value, (dict, list, tuple)):
            continue
        if any(p.startswith(f"{key.replace('_', ' ')}: ") for p in parts):
            continue
        parts.append(f"{key.replace('_', ' ')}: {value}")
    return parts, constant


def present(df: pd.DataFrame, floatfmt: str = ".3f", caption: str = "", params: dict[str, Any] | None = None,
            **meta: Any) -> Table:
    """The frame as its reader sees it (see the module's rules); `caption` first, then what is the same on every row."""
    df = df.reset_index(drop=True).copy()
    df.columns = [str(c) for c in df.columns]
    df = _join_low_high(df, floatfmt)
    df, measures = _merge_intervals(df, floatfmt)
    df = df[_paper_beside_ours(list(df.columns), measures)]
    parts, constant = _caption_parts(df, measures, meta, params or {})
    df = df.drop(columns=constant)
    cells = {}
    for column in df.columns:
        values = list(df[column])
        if column == "p" or column.startswith(("p (", "p ")):
            cells[column] = [p_text(v) for v in values]
            continue
        whole = not PAPER.match(column) and (_whole(values) if COUNT.match(column) else
                                             pd.api.types.is_integer_dtype(df[column]))
        cells[column] = [_text(v, floatfmt, whole) for v in values]
    rows = tuple(tuple(cells[c][i] for c in df.columns) for i in range(len(df)))
    text = " · ".join(([caption] if caption else []) + parts)
    return Table(tuple(df.columns), rows, text)


def estimates(records: Sequence[dict[str, Any]], digits: int = 1, caption: str = "") -> Table:
    """The claim estimates a notebook recorded (`claims.estimate`/`record`), one row each: ours [95% CI] (or why it
    could not be tested), n, the discordant counts, p, the test; a column no row fills is left out."""
    rows = []
    for r in records:
        ours = r.get("untestable") or (_interval_text(r.get("value"), r.get("low"), r.get("high"), f".{digits}f")
                                       if not _blank(r.get("value")) else "no estimate")
        rows.append({"claim": r.get("claim"), "scope": r.get("scope"), "model": r.get("model"), "unit": r.get("unit"),
                     "ours [95% CI]": ours, "n": r.get("n"),
                     "better / worse": f"{r['better']} / {r['worse']}" if r.get("better") is not None else "",
                     "p": r.get("p"), "test": r.get("test"), "near-oracle": "yes" if r.get("near_oracle") else ""})
    frame = pd.DataFrame(rows)
    frame = frame[[c for c in frame.columns if not frame[c].map(_blank).all()]]
    return present(frame, caption=caption)


def problems(table: Table) -> list[str]:
    """What breaks the rules in a presented table: NaN-like text, a count that is not whole, a measure with two
    interval columns, a paper column not right after ours."""
    out = []
    for i, column in enumerate(table.columns):
        values = [row[i] for row in table.rows]
        if any(v.strip() in BLANKS for v in values):
            out.append(f"{column}: a NaN-like text ({sorted({v for v in values if v.strip() in BLANKS})})")
        if column == "n" and any(v and not re.fullmatch(r"\d+", v) for v in values):
            out.append(f"{column}: not a whole number ({[v for v in values if v][:3]})")
        paper = PAPER.match(column)
        if paper and i and not table.columns[i - 1].startswith(paper.group("measure") + " "):
            ours = [c for c in table.columns if c.startswith(paper.group("measure") + f" {INTERVAL_HEADER}")]
            if ours:
                out.append(f"{column}: not right after {ours[0]!r}")
    seen: dict[str, str] = {}
    for column in table.columns:
        match = re.match(r"^(?P<m>.+?) (?:\[95% CI|95% CI|\[Wilson\]|exact CI|\[exact)", column)
        if match:
            measure = match.group("m").rstrip(" %")
            if measure in seen:
                out.append(f"{measure}: two interval columns ({seen[measure]!r}, {column!r})")
            seen[measure] = column
    return out


def read_markdown(text: str) -> Table:
    """A table as `Table.to_markdown` wrote it (caption, header, rows); what the tests read back."""
    lines = [line for line in text.splitlines()]
    caption = next((line.strip("_") for line in lines if line.startswith("_") and not line.startswith("_Provenance")),
                   "")
    body = [line for line in lines if line.startswith("|")]
    if len(body) < 2:
        raise ValueError("no Markdown table found")

    def split(line: str) -> tuple[str, ...]:
        cells = re.split(r"(?<!\\)\|", line.strip()[1:-1])
        return tuple(c.strip().replace("\\|", "|") for c in cells)

    return Table(split(body[0]), tuple(split(line) for line in body[2:]), caption)
