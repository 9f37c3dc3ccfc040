"""The trace format's JSON Schema, line by line, and reading a trace file's lines as that schema sees them.

`SCHEMA` is one `oneOf` over the four line types of `covlib.traces` (run, prefix, example, end); `checkers`
gives one validator per type, `validate` every problem of a file, one message per bad line. Lines are split on
newlines only and NaN / Infinity read as null, the same way for `validate` and `traces.read`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FORMAT = "covlib.trace"
VERSION = 1
_TEXT = {"type": "string"}
_CALL = {
    "type": "object",
    "required": ["kind", "key"],
    "properties": {
        "kind": {"enum": ["generate", "score", "nli", "retrieve"]},
        "key": {"type": ["string", "null"]},
        "prompt": {"anyOf": [_TEXT, {"type": "null"}, {
            "type": "object", "required": ["prefix", "text"],
            "properties": {"prefix": _TEXT, "text": _TEXT}, "additionalProperties": False}]},
    },
}
_STEP = {
    "type": "object",
    "required": ["name", "inputs", "outputs", "calls"],
    "properties": {"name": _TEXT, "inputs": {"type": "object"}, "outputs": {"type": "object"},
                   "calls": {"type": "array", "items": _CALL}},
    "additionalProperties": False,
}
_CORRECT = {"anyOf": [{"type": "number", "minimum": 0, "maximum": 1}, {"type": "null"}]}
SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "one line of a covlib trace (JSON lines)",
    "oneOf": [
        {"type": "object", "required": ["type", "format", "version", "run", "paper", "method", "title", "params",
                                        "steps", "started"],
         "properties": {"type": {"const": "run"}, "format": {"const": FORMAT}, "version": {"const": VERSION},
                        "run": _TEXT, "paper": _TEXT, "method": _TEXT, "title": _TEXT, "notebook": _TEXT,
                        "model": {"type": ["string", "null"]}, "params": {"type": "object"},
                        "steps": {"type": "array", "minItems": 1, "items": {
                            "type": "object", "required": ["name", "paper"],
                            "properties": {"name": _TEXT, "paper": _TEXT}}},
                        "compare": {"anyOf": [{"type": "null"}, {
                            "type": "object", "required": ["before", "after"],
                            "properties": {"before": _TEXT, "after": _TEXT}}]},
                        "started": _TEXT, "commit": {"type": ["string", "null"]}}},
        {"type": "object", "required": ["type", "id", "text"], "additionalProperties": False,
         "properties": {"type": {"const": "prefix"}, "id": _TEXT, "text": _TEXT}},
        {"type": "object", "required": ["type", "index", "id", "question", "gold", "prediction", "correct", "flags",
                                        "steps"],
         "properties": {"type": {"const": "example"}, "index": {"type": "integer", "minimum": 0}, "id": _TEXT,
                        "question": _TEXT, "gold": {"type": "array", "items": _TEXT},
                        "prediction": {"type": ["string", "null"]}, "correct": _CORRECT,
                        "before": {"type": "object", "required": ["prediction", "correct"],
                                   "properties": {"prediction": {"type": ["string", "null"]}, "correct": _CORRECT}},
                        "flags": {"type": "object"},
                        "steps": {"type": "array", "minItems": 1, "items": _STEP}}},
        {"type": "object", "required": ["type", "records", "finished"],
         "properties": {"type": {"const": "end"}, "records": {"type": "integer", "minimum": 0}, "finished": _TEXT}},
    ],
}

_CHECKERS: dict[str, Any] = {}


def checkers() -> dict[str, Any]:
    """One JSON Schema validator per line type (built once)."""
    if not _CHECKERS:
        import jsonschema

        _CHECKERS.update({part["properties"]["type"]["const"]: jsonschema.Draft202012Validator(part)
                          for part in SCHEMA["oneOf"]})
    return _CHECKERS


def lines_of(path: Path) -> list[str]:
    """The file's lines, split on newlines only (a U+2028 inside a JSON string stays in its line)."""
    text = path.read_text(encoding="utf-8-sig")
    lines = text.split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


def parse(line: str) -> Any:
    """A line as JSON; NaN and Infinity (which JSON has not) become None; a line that is not JSON raises ValueError."""
    return json.loads(line, parse_constant=lambda _: None)


def kind_of(obj: Any) -> str | None:
    """A line's `type` when it is a string, else None."""
    kind = obj.get("type") if isinstance(obj, dict) else None
    return kind if isinstance(kind, str) else None


def validate(path: str | Path) -> list[str]:
    """Every problem of a trace file against `SCHEMA` (one message per bad line); [] when it is valid."""
    checks = checkers()
    problems = []
    kinds: list[str | None] = []
    for number, line in enumerate(lines_of(Path(path)), 1):
        try:
            obj = parse(line)
        except ValueError as err:
            problems.append(f"line {number}: not JSON ({str(err)[:80]})")
            continue
        kinds.append(kind_of(obj))
        if kinds[-1] not in checks:
            shown = obj.get("type") if isinstance(obj, dict) else type(obj).__name__
            problems.append(f"line {number}: not a line of a trace (type {shown!r:.40}; one of {sorted(checks)})")
            continue
        for err in sorted(checks[kinds[-1]].iter_errors(obj), key=lambda e: list(map(str, e.path)))[:1]:
            where = "/".join(map(str, err.absolute_path)) or "the line"
            problems.append(f"line {number}: {where}: {err.message[:200]}")
    if not kinds or kinds[0] != "run":
        problems.append("the first line is not the run header")
    if "end" in kinds and kinds.index("end") != len(kinds) - 1:
        problems.append("lines after the end line")
    return problems


def end_records(path: str | Path) -> int | None:
    """The record count a trace file's `end` line states (its first valid end line, as `traces.read` takes it), or
    None when it has none."""
    check = checkers()["end"]
    for line in lines_of(Path(path))[1:]:
        if "end" not in line and "\\u" not in line:  # cheap: only a line that can spell "end" can be the end line
            continue
        try:
            obj = parse(line)
        except ValueError:
            continue
        if kind_of(obj) == "end" and check.is_valid(obj):
            return obj["records"]
    return None
