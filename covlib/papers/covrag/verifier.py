"""CoV-RAG's verifier output: `Verification`, `parse_verification` (tolerant, every repair counted), `parse_report`.

A verifier's text is read into Table 1's six scores, the judgment and the revised query; what
had to be repaired to read it is kept in `Verification.repairs`, and an output with nothing usable
is "failed" (it never fires σ). The JSON-level repairs live in `covlib.papers.covrag.repair`;
this module maps what was loaded onto Table 6's schema (renamed keys, scales, judgments in text).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable

from covlib.papers.covrag.prompts import JUDGMENTS, SCORES
from covlib.papers.covrag.repair import close_truncated, json_objects, lenient_loads


@dataclass(frozen=True)
class Verification:
    """One parsed verifier output: Table 1's scores, the judgment, the revised query, and how it was parsed.

    `status` is "ok" (valid JSON of Table 6's exact shape), "repaired" (read after the fixes listed in
    `repairs`) or "failed" (nothing usable: `raw` is kept). Scores missing from the output are None.
    `chain=False` marks a verification written without its chain of scores (Table 4's "w/o CoL").
    """

    reference_correctness: float | None = None
    correctness: float | None = None
    citation_accuracy: float | None = None
    truthfulness: float | None = None
    bias: float | None = None
    conciseness: float | None = None
    judgment: str | None = None  # "true", "false" or "unclear"
    revised_query: str = ""
    status: str = "failed"
    repairs: tuple[str, ...] = ()
    raw: str = ""
    chain: bool = True

    @property
    def parsed(self) -> bool:
        """Whether anything usable was read (status ok or repaired)."""
        return self.status != "failed"

    @property
    def well_formed(self) -> bool:
        """Table 4's "Fmt": valid JSON with every key of Table 6 (of its own schema), nothing repaired."""
        return self.status == "ok"

    @property
    def complete(self) -> bool:
        """Parsed with every field present and valid (no missing, mistyped or cut value): fit to train on."""
        return self.parsed and not any(r.split(":")[0] in ("missing", "bad_type", "bad_value", "cut")
                                       for r in self.repairs)

    def scores(self) -> dict[str, float | None]:
        """The six scores by name."""
        return {name: getattr(self, name) for name in SCORES}


_FENCE = re.compile(r"```[a-zA-Z]*\s*(.*?)\s*(?:```|$)", re.S)
_KEY_ALIASES = {
    "1": "1", "2": "2", "3": "3", "4": "4",
    "reference": "1", "references": "1",
    "judgment": "3", "judgement": "3", "judge": "3",
    "revised_query": "4", "revisedquery": "4", "revised_question": "4", "revision": "4", "revise": "4", "query": "4",
}
NO_REVISION = ("", "none", "n/a", "na", "null", "-", "no revision", "no", "nothing")
TEMPLATE_EXAMPLE = {"1": {"reference_correctness": 0.9},
                    "2": {"correctness": 1, "citation_accuracy": 0.8, "truthfulness": 0.7, "bias": 0.8,
                          "conciseness": 0.9}, "3": "true", "4": ""}  # Table 6's format example


def _canonical(key: Any) -> str:
    return re.sub(r"[\s\-]+", "_", str(key).strip().lower())


_SCORE_BY_SQUASHED = {s.replace("_", ""): s for s in SCORES}


def _flatten(obj: Any, out: dict[str, Any], renamed: list[str], path: str = "") -> None:
    """Known fields found anywhere in the object: scores by name, '3'/'4' (or aliases) at the top level."""
    if not isinstance(obj, dict):
        return
    for key, value in obj.items():
        name = _canonical(key)
        score = _SCORE_BY_SQUASHED.get(name.replace("_", ""))
        if score:
            if str(key) != score or path not in ({"reference_correctness": "1"}.get(score, "2"),):
                renamed.append(score)
            out.setdefault(score, value)
        elif isinstance(value, dict):
            _flatten(value, out, renamed, path=name if not path else f"{path}.{name}")
        elif not path and name in _KEY_ALIASES:
            if str(key) != _KEY_ALIASES[name]:
                renamed.append(_KEY_ALIASES[name])
            out.setdefault(_KEY_ALIASES[name], value)


def _number(value: Any, name: str, repairs: list[str]) -> float | None:
    if value is None:
        repairs.append(f"missing:{name}")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        repairs.append(f"bad_type:{name}")
        return None
    text = str(value).strip()
    try:
        x = float(text.rstrip("%")) / (100 if text.endswith("%") else 1)
    except ValueError:
        repairs.append(f"bad_type:{name}")
        return None
    if x != x:  # NaN
        repairs.append(f"bad_type:{name}")
        return None
    return x


def _scaled(scores: dict[str, float | None], repairs: list[str]) -> dict[str, float | None]:
    """Scores on a 0-10 or 0-100 scale brought to [0, 1] (all of them, so their order holds); what is still out of
    [0, 1] is clipped."""
    top = max((x for x in scores.values() if x is not None), default=0.0)
    scale = 10.0 if 1.0 < top <= 10.0 else 100.0 if 10.0 < top <= 100.0 else 1.0
    if scale != 1.0:
        repairs.append(f"rescaled:{int(scale)}")
    out = {}
    for name, x in scores.items():
        if x is not None:
            x /= scale
            if not 0.0 <= x <= 1.0:
                repairs.append(f"clipped:{name}")
                x = min(1.0, max(0.0, x))
        out[name] = x
    return out


def _judgment(value: Any, repairs: list[str]) -> str | None:
    if value is None:
        repairs.append("missing:judgment")
        return None
    if isinstance(value, bool):
        repairs.append("bad_type:judgment")
        return "true" if value else "false"
    word = str(value).strip().strip(".!").lower()
    if word in JUDGMENTS:
        return word
    named = {label for label in JUDGMENTS if re.search(rf"\b{label}\b", word)}
    if len(named) == 1 and not re.search(r"\bnot\b|n't\b|\bnor\b", word):  # "False." / "the answer is false"
        repairs.append("judgment_in_text")
        return named.pop()
    repairs.append("bad_value:judgment")  # "not true", "true or false", "maybe"
    return None


def _usable(value: Any) -> bool:
    fields: dict[str, Any] = {}
    _flatten(value, fields, [])
    return isinstance(value, dict) and any(k in fields for k in (*SCORES, "3", "4"))


def parse_verification(text: str, chain: bool = True) -> Verification:
    """Read a verifier's output into a `Verification`, tolerating what models emit and recording every repair.

    Handled: code fences; text before or after the JSON; several objects (an echoed Table 6 format
    example or an echoed input is skipped, the last usable object is read); a truncated object (a cut
    revised query is dropped, not searched for); ';' for ':' (Table 13), single quotes, trailing
    commas, bare words, applied outside string literals; scores as strings or percentages, on a
    0-10 or 0-100 scale (rescaled) or outside [0, 1] (clipped); renamed or flat keys; missing keys
    (None). `chain=False` expects only the judgment and revised query (Table 4's "w/o CoL").
    Nothing usable -> status "failed", which never fires σ.
    """
    raw = text or ""
    repairs: list[str] = []
    body = raw.strip()
    fence = _FENCE.search(body)
    if fence and "{" in fence.group(1):
        body = fence.group(1)
        repairs.append("code_fence")
    objects = json_objects(body)
    if not objects:
        return Verification(status="failed", repairs=("no_json",), raw=raw, chain=chain)
    chosen = None
    if len(objects) > 1:
        repairs.append("several_objects")
    for start, obj_text, closed in reversed(objects):  # the last usable object is the verifier's answer
        cut_key = None
        if not closed:
            obj_text, cut_key = close_truncated(obj_text)
        value, fixes = lenient_loads(obj_text)
        if value == TEMPLATE_EXAMPLE and len(objects) > 1:
            repairs.append("echoed_example")
            continue
        if _usable(value):
            chosen = (start, obj_text, closed, value, fixes, cut_key)
            break
    if chosen is None:
        return Verification(status="failed", repairs=tuple(repairs + ["no_known_keys"]), raw=raw, chain=chain)
    start, obj_text, closed, value, fixes, cut_key = chosen
    if body[:start].strip():
        repairs.append("leading_text")
    if not closed:
        repairs.append("truncated")
    elif body[start + len(obj_text):].strip():
        repairs.append("trailing_text")
    repairs += fixes
    fields: dict[str, Any] = {}
    renamed: list[str] = []
    _flatten(value, fields, renamed)
    if renamed:
        repairs.append("renamed_keys")
    if chain:
        scores = _scaled({name: _number(fields.get(name), name, repairs) for name in SCORES}, repairs)
    else:
        scores = _scaled({name: _number(fields[name], name, repairs) if name in fields else None
                          for name in SCORES}, repairs)
    judgment = _judgment(fields.get("3"), repairs)
    query = fields.get("4")
    if cut_key is not None and _KEY_ALIASES.get(_canonical(cut_key)) == "4":
        repairs.append("cut:revised_query")  # half a query would send retrieval astray
        query = ""
    elif query is None:
        repairs.append("missing:revised_query")
        query = ""
    elif not isinstance(query, str):
        repairs.append("bad_type:revised_query")
        query = str(query)
    if query.strip().strip(".").lower() in NO_REVISION and query.strip():
        repairs.append("empty_revision")
        query = ""
    status = "repaired" if repairs else "ok"
    return Verification(**scores, judgment=judgment, revised_query=query.strip(), status=status,
                        repairs=tuple(repairs), raw=raw, chain=chain)


def parse_report(verifications: Iterable[Verification]) -> dict[str, Any]:
    """How the outputs parsed: counts of ok / repaired / failed, the format rate, and each repair's count."""
    vs = list(verifications)
    status = Counter(v.status for v in vs)
    repairs = Counter(r.split(":")[0] for v in vs for r in v.repairs)
    n = len(vs)
    return {"n": n, "ok": status["ok"], "repaired": status["repaired"], "failed": status["failed"],
            "format_rate": status["ok"] / n if n else None, "parse_rate": (n - status["failed"]) / n if n else None,
            "repairs": dict(sorted(repairs.items()))}
