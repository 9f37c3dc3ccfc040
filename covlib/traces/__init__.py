"""Per-example traces: one JSON-lines file per method run, one record per example with every step as the paper names it.

A notebook's entry point (`covlib.runs.session.start`) makes one `Tracer`; a paper's methods never write traces:
they return what they did (prompts, decoding settings, outputs), and the paper's `trace.write(tracer, result)`
turns that into one file per method run, after the run, outside the algorithm (`Tracer.open_run`, then
`TraceWriter.write` per example). The package is the trace format's one home: this module writes and reads files,
`schema` checks them, `view` shows them in a notebook, `export` sends them to Phoenix. The file format (schema
"covlib.trace", `VERSION`), line by line:

| line      | holds                                                                                         |
|-----------|-----------------------------------------------------------------------------------------------|
| `run`     | the first line: paper, method, title, params, model, the paper's steps, what `before` compares |
| `prefix`  | a prompt prefix shared by many calls (a few-shot block), written once before its first use    |
| `example` | one example: id, question, gold, prediction, correct, `before`, flags, its steps              |
| `end`     | the last line, written by `close`: how many examples (absent: the run was interrupted)        |

A step is `{"name", "inputs", "outputs", "calls"}`; a call is `{"kind", "key", ...}` with the cache key that
reproduces it (`covlib.core.cache`) and its prompt as text or `{"prefix": id, "text": rest}`. `SCHEMA`
is the JSON Schema of every line (from `covlib.traces.schema`); `validate` checks a file against it. docs/traces.md
shows how to open one.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Sequence

from covlib.core import paths
from covlib.traces.schema import FORMAT, SCHEMA, VERSION, checkers, kind_of, lines_of, parse, validate

__all__ = ["FORMAT", "MIN_SHARED_PREFIX", "OUTCOMES", "SCHEMA", "Trace", "TraceWriter", "Tracer", "VERSION", "call",
           "correct_of", "count_outcomes", "folder_of", "outcome", "pairs", "plain", "read", "read_header", "run_files",
           "step", "validate"]

MIN_SHARED_PREFIX = 200  # characters a batch's prompts must share before the shared part is stored once
OUTCOMES = ("fixed", "broken", "both right", "both wrong")

def plain(value: Any) -> Any:
    """JSON-ready: NumPy scalars and arrays as Python values, tuples as lists, non-finite floats as None."""
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [plain(v) for v in value]
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return str(value)


def folder_of(notebook: str) -> Path:
    """Where a notebook's traces go: results/traces/<notebook>/."""
    if not re.fullmatch(r"[0-9]{2}[a-z]?_[a-z0-9_]+", notebook):
        raise ValueError(f"a notebook name like '03_verify_and_edit_tables', not {notebook!r}")
    return paths.results_dir() / "traces" / notebook


def _is_trace(path: Path) -> bool:
    with path.open("rb") as fh:
        return f'"format":"{FORMAT}"'.encode() in fh.readline(4096)


def call(kind: str, key: str | None, **fields: Any) -> dict[str, Any]:
    """One model call of a step: its kind, the cache key that reproduces it, and what else describes it."""
    return {"kind": kind, "key": key, **fields}


def step(name: str, inputs: dict | None = None, outputs: dict | None = None,
         calls: Sequence[dict] | None = None) -> dict[str, Any]:
    """One step of one example: the paper's step name, its inputs, outputs and model calls."""
    return {"name": name, "inputs": inputs or {}, "outputs": outputs or {}, "calls": list(calls or [])}


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "run"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _commit() -> str | None:
    head = paths.code_root() / ".git" / "HEAD"
    try:
        ref = head.read_text().strip()
        if ref.startswith("ref: "):
            return (head.parent / ref[5:]).read_text().strip()[:12]
        return ref[:12]
    except OSError:
        return None


class TraceWriter:
    """One run's trace file, written line by line (each line flushed as written)."""

    def __init__(self, path: Path, header: dict[str, Any]) -> None:
        self.path = path
        self.records = 0
        self._prefixes: set[str] = set()
        self._fh = path.open("w", encoding="utf-8")
        self._line(header)

    def __bool__(self) -> bool:
        return True

    def _line(self, obj: dict[str, Any]) -> None:
        self._fh.write(json.dumps(plain(obj), ensure_ascii=True, separators=(",", ":")) + "\n")
        self._fh.flush()

    def prompts(self, texts: Sequence[str]) -> list[Any]:
        """The prompts as they enter the trace: a prefix all of them share (a few-shot block) is stored once."""
        texts = list(texts)
        shared = os.path.commonprefix(texts) if len(texts) > 1 else ""
        shared = shared[: shared.rfind("\n") + 1]  # whole lines: the prompt-specific part starts on its own line
        if len(shared) < MIN_SHARED_PREFIX:
            return texts
        pid = "p-" + hashlib.sha256(shared.encode("utf-8", "surrogatepass")).hexdigest()[:12]
        if pid not in self._prefixes:
            self._prefixes.add(pid)
            self._line({"type": "prefix", "id": pid, "text": shared})
        return [{"prefix": pid, "text": t[len(shared):]} for t in texts]

    def write(self, record: dict[str, Any]) -> None:
        """Append one example's record (`type` and `index` are filled in)."""
        self._line({"type": "example", "index": self.records, **record})
        self.records += 1

    def close(self) -> None:
        """Write the `end` line: the run finished."""
        if not self._fh.closed:
            self._line({"type": "end", "records": self.records, "finished": _now()})
            self._fh.close()

    def __enter__(self) -> "TraceWriter":
        return self

    def __exit__(self, kind: Any, *rest: Any) -> None:
        if kind is None:
            self.close()
        else:
            self._fh.close()  # no end line: a reader sees an interrupted run


class Tracer:
    """Where one notebook's traces go (results/traces/<notebook>/, or `folder`): made once by the notebook's entry
    point, which empties the folder of its last run's traces (other files are left alone), and handed to the papers'
    trace writers. There is no tracing state anywhere else: code without a `Tracer` writes no trace."""

    def __init__(self, notebook: str, folder: str | Path | None = None) -> None:
        default = folder_of(notebook)  # checks the name, also when a folder is given
        self.notebook = notebook
        self.folder = Path(folder) if folder is not None else default
        self.folder.mkdir(parents=True, exist_ok=True)
        for old in self.folder.glob("*.jsonl"):
            if _is_trace(old):
                old.unlink()

    def open_run(self, paper: str, method: str, title: str, steps: Sequence[tuple[str, str]], params: dict[str, Any],
                 model: str | None = None, label: str = "", compare: tuple[str, str] | None = None) -> TraceWriter:
        """A writer for one method run; `steps` are (name, the paper's words). The file is
        `<method>[-<label>]-<hash of params and model>.jsonl`: the same run repeated replaces its file."""
        params = plain(params)
        digest = hashlib.sha256(json.dumps([params, model, title], sort_keys=True).encode()).hexdigest()[:8]
        name = "-".join(x for x in (_slug(method), _slug(label) if label else "", digest) if x)
        header = {"type": "run", "format": FORMAT, "version": VERSION, "run": name, "paper": paper, "method": method,
                  "title": title, "notebook": self.notebook, "model": model, "params": params,
                  "steps": [{"name": n, "paper": p} for n, p in steps],
                  "compare": {"before": compare[0], "after": compare[1]} if compare else None,
                  "started": _now(), "commit": _commit()}
        return TraceWriter(self.folder / f"{name}.jsonl", header)


# --------------------------------------------------------------------------- reading


@dataclass
class Trace:
    """A trace file read back: its header, shared prefixes, example records, and whether it finished."""

    path: Path
    header: dict[str, Any]
    records: list[dict[str, Any]] = field(default_factory=list)
    prefixes: dict[str, str] = field(default_factory=dict)
    complete: bool = False
    damaged: int = 0  # lines that are not JSON (the last line of a run killed mid-write)

    @property
    def title(self) -> str:
        """The run's title ("CoT-SC + Verify-and-Edit, HotpotQA, BM25")."""
        return self.header.get("title", self.path.stem)

    def find(self, example: str | int) -> dict[str, Any]:
        """One record, by example id or by position."""
        if isinstance(example, int) and not isinstance(example, bool):
            return self.records[example]
        for r in self.records:
            if r["id"] == example:
                return r
        raise KeyError(f"no example {example!r} in {self.path.name} ({len(self.records)} examples)")

    def prompt_text(self, prompt: Any) -> str:
        """A call's full prompt, its shared prefix put back."""
        if isinstance(prompt, dict):
            pid = str(prompt.get("prefix", ""))
            shared = self.prefixes.get(pid, f"[shared block {pid} missing from the file]\n")
            return shared + str(prompt.get("text", ""))
        return "" if prompt is None else str(prompt)


def read_header(path: str | Path) -> dict[str, Any]:
    """A trace file's run line alone (what `find`-like lookups need), checked as `read` checks it."""
    path = Path(path)
    with path.open(encoding="utf-8-sig") as fh:
        first = fh.readline()
    try:
        header = parse(first)
    except ValueError:
        header = None
    if kind_of(header) != "run" or header.get("format") != FORMAT:
        raise ValueError(f"{path}: not a covlib trace (no '{FORMAT}' run line first)")
    if header.get("version") != VERSION:
        raise ValueError(f"{path}: trace version {header.get('version')!r}; this covlib reads version {VERSION}")
    if not checkers()["run"].is_valid(header):
        raise ValueError(f"{path}: its run line does not match the trace schema: {validate(path)[:1]}")
    return header


def read(path: str | Path) -> Trace:
    """Read a trace file; a run without its `end` line (interrupted) keeps every record written before. Every line is
    checked against `SCHEMA` first: a line that fails (damaged, or written by something else) is counted in
    `damaged` and skipped, so what a reader shows has the shape it expects (trace files are untrusted input)."""
    path = Path(path)
    checks = checkers()
    trace = Trace(path, read_header(path))
    lines = lines_of(path)
    for line in lines[1:]:
        try:
            obj = parse(line)
        except ValueError:
            obj = None
        kind = kind_of(obj)
        if trace.complete or kind not in ("prefix", "example", "end") or not checks[kind].is_valid(obj):
            trace.damaged += 1  # not JSON, not a trace line, or a line after the end line
        elif kind == "prefix":
            trace.prefixes[obj["id"]] = obj["text"]
        elif kind == "example":
            trace.records.append(obj)
        else:
            trace.complete = True
    return trace


def run_files(folder: str | Path) -> list[Path]:
    """The trace files in a folder, by name."""
    return sorted(Path(folder).glob("*.jsonl"))


def correct_of(value: Any) -> bool | None:
    """Right (>= 0.5), wrong, or unknown (None: no number, or not a finite one)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return value >= 0.5


def outcome(before: Any, after: Any) -> str | None:
    """"fixed", "broken", "both right" or "both wrong" from two correctness values (None when one is unknown)."""
    a, b = correct_of(before), correct_of(after)
    if a is None or b is None:
        return None
    return {(False, True): "fixed", (True, False): "broken", (True, True): "both right"}.get((a, b), "both wrong")


def pairs(a: Trace, b: Trace | None = None) -> list[tuple[dict, dict, str | None]]:
    """(before, after, outcome) per example: two runs joined on example id, or one run's `before` and its result."""
    out = []
    if b is None:
        for r in a.records:
            before = r.get("before")
            out.append((before or {}, r, outcome(before["correct"], r["correct"]) if before else None))
        return out
    index: dict[str, dict] = {}
    for r in a.records:
        index.setdefault(r["id"], r)  # the first of a repeated id, as `Trace.find` returns
    for r in b.records:
        if r["id"] in index:
            out.append((index[r["id"]], r, outcome(index[r["id"]]["correct"], r["correct"])))
    return out


def count_outcomes(rows: Iterable[tuple[dict, dict, str | None]]) -> dict[str, int]:
    """How many examples each outcome has."""
    counts = {o: 0 for o in OUTCOMES}
    for _, _, o in rows:
        if o is not None:
            counts[o] += 1
    return counts
