"""Tolerant JSON reading for model output: find the {...} objects in text, close a truncated one, load with repairs.

Generic pieces behind `covlib.papers.covrag.verifier.parse_verification`: a scanner that tells
string literals from the rest (`_walk`), every top-level object in a text (`json_objects`), a
cut-off object closed (`close_truncated`), and `json.loads` retried after the fixes real models
need, applied outside string literals only (`lenient_loads`).
"""

from __future__ import annotations

import json
import re
from typing import Any


def _walk(text: str, start: int = 0) -> tuple[list[tuple[int, str]], str, list[tuple[int, int, str]]]:
    """(the (index, char) pairs outside string literals from `start`, the quote left open at the end or '',
    the string literals as (start, end, quote) spans). An apostrophe inside a word does not open a string."""
    outside, spans, quote, opened, escaped = [], [], "", 0, False
    for i in range(start, len(text)):
        ch = text[i]
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                spans.append((opened, i + 1, quote))
                quote = ""
        elif ch == "'" and 0 < i < len(text) - 1 and text[i - 1].isalnum() and text[i + 1].isalnum():
            outside.append((i, ch))
        elif ch in "\"'":
            quote, opened = ch, i
        else:
            outside.append((i, ch))
    return outside, quote, spans


def _outside_strings(text: str, fix) -> str:
    """`text` with `fix` applied to every stretch between string literals (the literals kept as they are)."""
    _, quote, spans = _walk(text)
    out, last = [], 0
    for a, b, _ in spans:
        out += [fix(text[last:a]), text[a:b]]
        last = b
    out.append(text[last:] if quote else fix(text[last:]))
    return "".join(out)


def json_objects(text: str) -> list[tuple[int, str, bool]]:
    """Every top-level {...} object in text as (start, text, closed); the last may be cut off."""
    found, pos = [], text.find("{")
    while pos != -1:
        depth, end = 0, None
        for i, ch in _walk(text, pos)[0]:
            depth += {"{": 1, "}": -1}.get(ch, 0)
            if ch == "}" and depth == 0:
                end = i + 1
                break
        if end is None:
            found.append((pos, text[pos:], False))
            break
        found.append((pos, text[pos:end], True))
        pos = text.find("{", end)
    return found


_DANGLING = [
    re.compile(r"""([{\[,]\s*)["'][^"']*["']\s*[:;]\s*-?\d*\.$"""),  # a key whose number was cut at the point
    re.compile(r"""([{\[,]\s*)["'][^"']*["']\s*[:;]?\s*$"""),  # a key with no value (or a bare string in a list)
    re.compile(r"""(\S)\s*,\s*$"""),  # a trailing comma
]
_CUT_VALUE = re.compile(r"""["']([^"']+)["']\s*[:;]\s*["'][^"']*$""")


def close_truncated(fragment: str) -> tuple[str, str | None]:
    """A truncated object closed (an open string ended, a dangling key or comma dropped, brackets closed), and the
    key whose string value was cut, if any."""
    outside, quote, _ = _walk(fragment)
    stack: list[str] = []
    for _, ch in outside:
        if ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]" and stack:
            stack.pop()
    cut = _CUT_VALUE.search(fragment) if quote else None
    out = fragment.rstrip() + quote  # a cut key (not a value) is then dropped as a dangling key below
    changed = True
    while changed:
        before = out.rstrip()
        for pattern in _DANGLING:
            before = pattern.sub(r"\1", before).rstrip()
        changed, out = before != out, before
    return out + "".join(reversed(stack)), (cut.group(1) if cut else None)


_FIXES = (  # (repair name, fix of a stretch outside string literals)
    ("semicolon", lambda run: re.sub(r"^(\s*);", r"\1:", run)),  # "key"; value (Table 13)
    ("trailing_comma", lambda run: re.sub(r",(\s*[}\]])", r"\1", run)),
    ("bare_word", lambda run: re.sub(r"\bunclear\b", '"unclear"', run)),
    ("python_literals", lambda run: re.sub(r"\b(True|False|None)\b",
                                           lambda m: {"True": "true", "False": "false", "None": "null"}[m.group(1)], run)),
)


def _double_quoted(text: str) -> str:
    """Single-quoted string literals rewritten as JSON strings."""
    _, _, spans = _walk(text)
    out, last = [], 0
    for a, b, quote in spans:
        if quote == "'":
            out += [text[last:a], json.dumps(text[a + 1:b - 1].replace("\\'", "'"))]
            last = b
    return "".join(out) + text[last:]


def lenient_loads(text: str) -> tuple[Any, list[str]]:
    """json.loads, else the repairs real models need, applied outside string literals only: ';' for ':' (Table 13),
    trailing commas, bare `unclear`, Python's True/False/None, then single quotes."""
    try:
        return json.loads(text), []
    except json.JSONDecodeError:
        pass
    repairs, fixed = [], text
    for name, fix in _FIXES:
        changed = _outside_strings(fixed, fix)
        if changed != fixed:
            repairs.append(name)
            fixed = changed
    try:
        return json.loads(fixed), repairs
    except json.JSONDecodeError:
        pass
    try:
        return json.loads(_double_quoted(fixed)), repairs + ["single_quotes"]
    except json.JSONDecodeError:
        return None, repairs
