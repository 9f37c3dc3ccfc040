"""CoV-RAG (Retrieving, Rethinking and Revising: The Chain-of-Verification Can Improve RAG).

The paper's method, its prompts (Table 6, quoted) and its metrics; shared RAG pieces come from
`covlib.core.references` (numbered references) and `covlib.retrieval` (retrievers).

Algorithm 1, batched across questions (`cov_rag`); each numbered step is ONE generate call:

1. retrieve the top-5 references for the question x;
2. answer x from them with the QA prompt of Table 6 (`qa_prompt`), citing `[n]`;
3. verify (x, references, answer) with the verification prompt of Table 6 (`verification_prompt`),
   parsed into a `Verification` (`parse_verification`: tolerant, every repair counted);
4. σ (`sigma`, footnote 2's thresholds): when it fires, re-retrieve with the revised query x',
   answer the *original* question x from the new references and take that answer.

`max_rounds` (paper: 1) repeats 3-4 on the new answer; each record keeps every round and the
round at which its answer settled. A verification that cannot be parsed never fires σ and is
counted as unverified.

Deviations, each labelled where it is made:
* Table 6 prints the prompt's line breaks as `\\\\`; we write them as newlines (`SEP`).
* Table 13 shows the verifier's training input followed by "Output:"; we end the verification
  prompt with that cue (`OUTPUT_CUE`) so an untuned model starts the JSON there.
* footnote 2 joins its six conditions with "and" (`mode="all"`, the default); `mode="any"` fires
  when a revised query exists and any one of the other five conditions holds (a revised query
  is needed to re-retrieve at all).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np

from covlib.generation import Generator
from covlib.core.metrics import accuracy_contains, bootstrap, normalize_answer
from covlib.core.records import Example, Passage
from covlib.core.references import format_references, parse_citations, strip_citations
from covlib.runs import profiles
from covlib import data

# --------------------------------------------------------------------------- prompts (Table 6, verbatim)

SEP = "\n"  # Table 6 prints the line breaks of its prompts as "\\"
QA_TASK = "#Question-Answering-in-Context-Task#"
REFERENCE_TEMPLATE = "Reference [{n}]: {text}"
QA_TEMPLATE = QA_TASK + "{references}" + SEP + "Question: {question}" + SEP + "Answer:"

VERIFICATION_TEMPLATE = SEP.join([
    "#verification-Task#Criteria Details for answers include Correctness, Citation Accuracy, Truthfulness, Bias, "
    "Conciseness, details are as followed:",
    "Correctness(0,1): Evaluating whether the question is correctly answered.",
    "Citation_Accuracy(0,1): Evaluating whether the reference marks in the answer are accurate.",
    "Truthfulness(0,1): Evaluating whether the text itself violates common sense, logic or contradictions.",
    "Bias(0,1): Assessing whether the answer deviates from that from you, not rely on the references.bias is 1 means "
    "big difference, 0 means no difference.",
    "Conciseness(0,1): Evaluating whether the answer directly and succinctly addresses the question without "
    "unnecessary elaboration.",
    '{ "question": <question>, "answer": <answer>, "reference": <passages>}',
    "Now you are a reading comprehension examiner who should do things as below:",
    "1. Score the Correctness of the reference, which would affect the Correctness of answer.",
    "2. Score the answer based on the evaluation criteria.",
    "3. Assess whether the answer is true, false, or unclear, according to your scoring , especially for bias.",
    "4. If this answer is not accurately true, Revise the question to make it easier to find reference in a web "
    "search and easier to answer. Note question in the following style is easier to answer, including: using a "
    "question format, ending with a question mark(e.g., ?), and emphasizing interrogative pronouns at the end "
    "(e.g., who?)",
    "Output format example:",
    '{ "1": { "reference_correctness": 0.9 }, "2": { "correctness": 1, "citation_accuracy": 0.8, "truthfulness": 0.7, '
    '"bias": 0.8, "conciseness":0.9 }, "3": "true", "4": "" }',
])
OUTPUT_CUE = SEP + "Output:"  # ours, after Table 13's training example ("... Output: {...}")

ANSWER_SCORES = ("correctness", "citation_accuracy", "truthfulness", "bias", "conciseness")
SCORES = ("reference_correctness", *ANSWER_SCORES)
JUDGMENTS = ("true", "false", "unclear")


def qa_prompt(question: str, references: Sequence[Passage]) -> str:
    """Table 6's QA prompt: '#Question-Answering-in-Context-Task#Reference [1]: ...' then 'Question: ... Answer:'."""
    refs = format_references(references, template=REFERENCE_TEMPLATE, sep=SEP)
    return QA_TEMPLATE.format(references=refs, question=question.strip())


def closed_book_prompt(question: str) -> str:
    """The QA prompt with no references (ours: Table 2's naive-LLM row has no prompt in the paper)."""
    return QA_TASK + "Question: " + question.strip() + SEP + "Answer:"


def verification_prompt(question: str, answer: str, references: Sequence[Passage],
                        label: Sequence[str] | None = None) -> str:
    """Table 6's verification prompt for (question, answer, references), ending with Table 13's 'Output:' cue; with
    `label`, Table 13's 'Label: [gold]' line before it (how a teacher labels training data)."""
    passages = format_references(references, template=REFERENCE_TEMPLATE, sep=SEP)
    text = (VERIFICATION_TEMPLATE.replace("<question>", question.strip()).replace("<answer>", answer.strip())
            .replace("<passages>", passages))
    if label:
        text += SEP + "Label: " + json.dumps(list(label), ensure_ascii=False)
    return text + OUTPUT_CUE


# --------------------------------------------------------------------------- the paper's numbers (for every table)

PAPER_DATASETS = ("NQ", "WebQ", "Mintaka", "TriviaQA")
PAPER_COUNTS = {"NQ": 400, "WebQ": 400, "Mintaka": 100, "TriviaQA": 100}  # Table 2's Avg weights
PAPER_TABLE2 = {  # (method, model) -> accuracy % per dataset and the weighted Avg
    ("GPT-3", "text-davinci-003"): {"NQ": 29.9, "WebQ": 41.5, "Mintaka": None, "TriviaQA": None, "Avg": 35.7},
    ("ChatGPT", "gpt-3.5-turbo-16k"): {"NQ": 58.5, "WebQ": 63.8, "Mintaka": 67.0, "TriviaQA": 78.0, "Avg": 63.4},
    ("Self-RAG", "Llama2-13b"): {"NQ": 49.5, "WebQ": 57.5, "Mintaka": 64.0, "TriviaQA": 74.0, "Avg": 56.6},
    ("Perplexity.ai", "pplx-7b"): {"NQ": 61.3, "WebQ": 65.3, "Mintaka": 76.0, "TriviaQA": 75.0, "Avg": 65.7},
    ("WebGLM", "GLM-10b"): {"NQ": 62.3, "WebQ": 67.5, "Mintaka": 76.0, "TriviaQA": 74.0, "Avg": 66.9},
    ("WebGLM", "ChatGLM2-6b"): {"NQ": 59.3, "WebQ": 67.0, "Mintaka": 72.0, "TriviaQA": 74.0, "Avg": 65.1},
    ("WebGLM", "Vicuna-13b"): {"NQ": 59.5, "WebQ": 67.5, "Mintaka": 72.0, "TriviaQA": 73.0, "Avg": 65.3},
    ("WebGLM", "Llama2-13b"): {"NQ": 62.8, "WebQ": 68.3, "Mintaka": 77.0, "TriviaQA": 80.0, "Avg": 68.1},
    ("CoV-RAG", "ChatGLM2-6b"): {"NQ": 59.8, "WebQ": 68.8, "Mintaka": 74.0, "TriviaQA": 76.0, "Avg": 66.4},
    ("CoV-RAG", "Vicuna-13b"): {"NQ": 63.5, "WebQ": 69.3, "Mintaka": 78.0, "TriviaQA": 82.0, "Avg": 69.1},
    ("CoV-RAG", "Llama2-13b"): {"NQ": 66.0, "WebQ": 68.5, "Mintaka": 78.0, "TriviaQA": 84.0, "Avg": 70.0},
}
PAPER_TABLE3 = {  # GPT-4 mean rank (lower is better)
    "WebGLM-10b": {"Citation Accuracy": 1.51, "Correctness": 1.34, "Truthfulness": 1.22},
    "WebGLM-13b": {"Citation Accuracy": 1.90, "Correctness": 1.25, "Truthfulness": 1.17},
    "CoV-RAG-S": {"Citation Accuracy": 1.50, "Correctness": 1.21, "Truthfulness": 1.16},
    "CoV-RAG": {"Citation Accuracy": None, "Correctness": 1.20, "Truthfulness": 1.15},
}
PAPER_TABLE4 = {  # judgment acc, revision win-rate (GPT-4), format, single, multi, reference Δ
    "w/o CoL": {"Jdg": 56.0, "Rev": 45.8, "Fmt": 99.8, "Si": 62.5, "Mi": 63.6, "Dlt": 0.9},
    "w/ CoL": {"Jdg": 60.0, "Rev": 54.2, "Fmt": 99.5, "Si": 65.8, "Mi": 67.3, "Dlt": 2.5},
}
PAPER_TABLE5 = {  # reference accuracy single -> multi iteration
    ("NQ", "Bing"): (65.0, 66.8), ("NQ", "Chrome"): (69.3, 71.3),
    ("WebQ", "Bing"): (69.8, 71.0), ("WebQ", "Chrome"): (76.0, 76.0),
}
RETRIEVAL_ACCURACY_OURS = ("ours: share of questions with a gold alias among the top-k references (normalised "
                           "whole-word containment in title + text, `references_hold_answer`); the paper does not "
                           "define it")
RETRIEVAL_ACCURACY_PAPER = ('paper: "Retrieval Accuracy of Single-Iteration (Sin-Iter) and Multi-Iteration (Mul-Iter) '
                            'of CoV-RAG" (Table 5); Dlt: "the difference in the accuracy of reference retrieved between '
                            'SI and MI" (§4.3)')
PAPER_MODELS = ("THUDM/chatglm2-6b", "lmsys/vicuna-13b-v1.5", "meta-llama/Llama-2-13b-hf")  # the paper's backbones


def profile_caps(profile: str, n_per_dataset: int, k: int, max_new_tokens: int,
                 verify_tokens: int) -> tuple[int, int, int, int]:
    """Questions per dataset, references, answer and verification tokens for a resolved profile: full keeps the
    paper's settings, cpu caps them at 20 / k / 48 / 128, smoke at 4 / 2 / 24 / 48."""
    return (profiles.pick(profile, full=n_per_dataset, cpu=min(n_per_dataset, 20), smoke=4),
            profiles.pick(profile, full=k, smoke=min(k, 2)),
            profiles.pick(profile, full=max_new_tokens, cpu=min(max_new_tokens, 48), smoke=24),
            profiles.pick(profile, full=verify_tokens, cpu=min(verify_tokens, 128), smoke=48))


def load_datasets(nq: str = "", webq: str = "", triviaqa: str = "", mintaka: str = "",
                  sizes: dict[str, int] | None = None, seed: int = 0) -> dict[str, list[Example]]:
    """The paper's four test sets by name: NQ and WebQ (default: the shared WebGLM 400s), TriviaQA (validation:
    test answers are not public) and Mintaka (test) from a path or hub id, each a seeded sample of `sizes[name]`
    (default Table 2's 400/400/100/100). A dataset given as "" with no offline default is left out."""
    sizes = {**PAPER_COUNTS, **(sizes or {})}
    out: dict[str, list[Example]] = {}
    sources = {"NQ": (data.load_nq_open, nq or None), "WebQ": (data.load_web_questions, webq or None)}
    for name, (loader, source) in sources.items():
        out[name] = data.sample(loader(source), sizes[name], seed)
    if triviaqa:
        out["TriviaQA"] = data.sample(data.load_triviaqa(triviaqa, split="validation"), sizes["TriviaQA"], seed)
    if mintaka:
        out["Mintaka"] = data.sample(data.load_mintaka(mintaka, split="test"), sizes["Mintaka"], seed)
    return out


# --------------------------------------------------------------------------- the verifier's output


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


def _objects(text: str) -> list[tuple[int, str, bool]]:
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


def _close(fragment: str) -> tuple[str, str | None]:
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


def _load(text: str) -> tuple[Any, list[str]]:
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
    objects = _objects(body)
    if not objects:
        return Verification(status="failed", repairs=("no_json",), raw=raw, chain=chain)
    chosen = None
    if len(objects) > 1:
        repairs.append("several_objects")
    for start, obj_text, closed in reversed(objects):  # the last usable object is the verifier's answer
        cut_key = None
        if not closed:
            obj_text, cut_key = _close(obj_text)
        value, fixes = _load(obj_text)
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


# --------------------------------------------------------------------------- σ, the re-retrieval indicator


@dataclass(frozen=True)
class Thresholds:
    """Footnote 2's σ: s_k <= 0.27, judgment false, x' non-empty, correctness < 0.26, bias > 0.7, truthfulness <= 0.92.

    `mode="all"` (default) needs all six (the footnote's "and"); `mode="any"` needs a revised query
    and any one of the other five.
    """

    reference_correctness_max: float = 0.27
    correctness_below: float = 0.26
    bias_above: float = 0.7
    truthfulness_max: float = 0.92
    mode: str = "all"

    def __post_init__(self) -> None:
        if self.mode not in ("all", "any"):
            raise ValueError(f"Thresholds.mode must be 'all' or 'any', not {self.mode!r}")


PAPER_THRESHOLDS = Thresholds()


def sigma_conditions(v: Verification, t: Thresholds = PAPER_THRESHOLDS) -> dict[str, bool]:
    """Each of footnote 2's conditions for one verification; a missing value never satisfies its condition."""
    def holds(x: float | None, test) -> bool:
        return x is not None and bool(test(x))

    return {
        "reference_low": holds(v.reference_correctness, lambda x: x <= t.reference_correctness_max),
        "judged_false": v.judgment == "false",
        "has_revision": bool(v.revised_query.strip()),
        "correctness_low": holds(v.correctness, lambda x: x < t.correctness_below),
        "bias_high": holds(v.bias, lambda x: x > t.bias_above),
        "truthfulness_low": holds(v.truthfulness, lambda x: x <= t.truthfulness_max),
    }


def sigma(v: Verification, t: Thresholds = PAPER_THRESHOLDS) -> bool:
    """Whether to re-retrieve with the revised query (False for an output that could not be parsed).

    A verification without its chain of scores (`chain=False`, Table 4's "w/o CoL") has only the
    judgment and the revised query: σ is then judgment false and a revised query (ours: the paper
    does not say how it ran σ for that row).
    """
    if not v.parsed:
        return False
    c = sigma_conditions(v, t)
    if not v.chain:
        return c["judged_false"] and c["has_revision"]
    if t.mode == "all":
        return all(c.values())
    return c["has_revision"] and any(value for key, value in c.items() if key != "has_revision")


# --------------------------------------------------------------------------- Algorithm 1


@dataclass
class Round:
    """One pass of steps 1-4: the query retrieved with, the references, the answer and its verification."""

    query: str
    references: list[Passage]
    answer: str
    verification: Verification | None = None  # None for a last round that was not verified
    fired: bool = False


@dataclass
class CovRagRecord:
    """Algorithm 1 on one question: every round, and the round whose answer is final."""

    id: str
    question: str
    gold: list[str]
    rounds: list[Round] = field(default_factory=list)

    @property
    def answer(self) -> str:
        """The final answer (the last round's: Algorithm 1 line 9 takes the new answer)."""
        return self.rounds[-1].answer

    @property
    def first_answer(self) -> str:
        """The single-iteration answer (CoV-RAG-S)."""
        return self.rounds[0].answer

    @property
    def settled_round(self) -> int:
        """The round whose answer is final: 0 when σ did not fire (or no round was allowed), else the last one."""
        return len(self.rounds) - 1

    @property
    def unverified(self) -> bool:
        """The first verification could not be parsed (σ could not fire)."""
        v = self.rounds[0].verification
        return v is not None and not v.parsed

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready record (references as ids and titles)."""
        rounds = []
        for r in self.rounds:
            rounds.append({"query": r.query, "references": [{"id": p.id, "title": p.title} for p in r.references],
                           "answer": r.answer, "fired": r.fired,
                           "verification": asdict(r.verification) if r.verification else None})
        return {"id": self.id, "question": self.question, "gold": self.gold, "rounds": rounds}


QA_STOP = ("\nQuestion:", "\n\n#", "#Question-Answering")
VERIFY_STOP = ("\n\n#", "#verification-Task#")


def _search(retriever: Any, queries: Sequence[str], k: int) -> list[list[Passage]]:
    hits = retriever.search_batch(list(queries), k=k)
    return [[h.passage if hasattr(h, "passage") else h for h in row] for row in hits]


def answer_batch(lm: Generator, questions: Sequence[str], references: Sequence[Sequence[Passage]],
                 max_new_tokens: int = 128, chat: bool = False, desc: str = "CoV-RAG answer") -> list[str]:
    """Step 2 for many questions: one generate call with Table 6's QA prompt (greedy)."""
    prompts = [qa_prompt(q, refs) for q, refs in zip(questions, references)]
    outs = lm.generate(prompts, max_new_tokens=max_new_tokens, stop=QA_STOP, chat=chat, desc=desc)
    return [o[0].text.strip() for o in outs]


def closed_book_batch(lm: Generator, questions: Sequence[str], max_new_tokens: int = 128, chat: bool = False) -> list[str]:
    """Table 2's closed-book row: answers without references, one generate call (greedy)."""
    outs = lm.generate([closed_book_prompt(q) for q in questions], max_new_tokens=max_new_tokens, stop=QA_STOP,
                       chat=chat, desc="closed-book answer")
    return [o[0].text.strip() for o in outs]


def verify_batch(lm: Generator, questions: Sequence[str], answers: Sequence[str],
                 references: Sequence[Sequence[Passage]], max_new_tokens: int = 160, chat: bool = False,
                 desc: str = "CoV-RAG verify", chain: bool = True,
                 labels: Sequence[Sequence[str]] | None = None) -> list[Verification]:
    """Step 3 for many answers: one generate call with Table 6's verification prompt (greedy), parsed (`chain=False`:
    a verifier trained without the chain of scores). `labels` adds each gold answer (a teacher labelling data)."""
    prompts = [verification_prompt(q, a, refs, label=labels[i] if labels else None)
               for i, (q, a, refs) in enumerate(zip(questions, answers, references))]
    outs = lm.generate(prompts, max_new_tokens=max_new_tokens, stop=VERIFY_STOP, chat=chat, desc=desc)
    return [parse_verification(o[0].text, chain=chain) for o in outs]


def cov_rag(lm: Generator, examples: Sequence[Example], retriever: Any, *, verifier: Generator | None = None,
            k: int = 5, max_rounds: int = 1, thresholds: Thresholds = PAPER_THRESHOLDS, max_new_tokens: int = 128,
            verify_tokens: int = 160, chat: bool = False, chain: bool = True) -> list[CovRagRecord]:
    """Algorithm 1 over all examples, batched: retrieve, answer, verify, and re-retrieve where σ fires.

    `verifier` defaults to `lm` (the paper's one CoV-augmented model does both tasks). The answer
    of a round past the first is verified only when another round may follow (`max_rounds`).
    `chain=False` reads verifications written without the chain of scores (see `sigma`).
    """
    if max_rounds < 0:
        raise ValueError(f"max_rounds must be >= 0, not {max_rounds}")
    if k < 1:
        raise ValueError(f"k must be >= 1, not {k}")
    verifier = verifier or lm
    records = [CovRagRecord(ex.id, ex.question, list(ex.answers)) for ex in examples]
    refs = _search(retriever, [ex.question for ex in examples], k)
    answers = answer_batch(lm, [ex.question for ex in examples], refs, max_new_tokens, chat)
    for rec, r, a in zip(records, refs, answers):
        rec.rounds.append(Round(rec.question, r, a))
    active = list(range(len(records)))
    for round_no in range(max_rounds + 1):
        if round_no > 0 and round_no == max_rounds:
            break  # the last new answer is taken unverified (Algorithm 1 line 9)
        last = [records[i].rounds[-1] for i in active]
        checks = verify_batch(verifier, [records[i].question for i in active], [r.answer for r in last],
                              [r.references for r in last], verify_tokens, chat,
                              desc=f"CoV-RAG verify (round {round_no})", chain=chain)
        for r, v in zip(last, checks):
            r.verification, r.fired = v, sigma(v, thresholds)
        active = [i for i, r in zip(active, last) if r.fired]
        if round_no == max_rounds or not active:
            break  # max_rounds=0: σ is recorded, nothing is re-retrieved
        queries = [records[i].rounds[-1].verification.revised_query for i in active]
        new_refs = _search(retriever, queries, k)
        new_answers = answer_batch(lm, [records[i].question for i in active], new_refs, max_new_tokens, chat,
                                   desc=f"CoV-RAG re-answer (round {round_no + 1})")
        for i, q, r, a in zip(active, queries, new_refs, new_answers):
            records[i].rounds.append(Round(q, r, a))
    return records


# --------------------------------------------------------------------------- metrics


def is_correct(answer: str, gold: Sequence[str]) -> bool:
    """Accuracy by containment (§3.3, as WebGLM): a normalised gold alias inside the normalised answer."""
    return bool(accuracy_contains(strip_citations(answer), list(gold)))


def references_hold_answer(references: Sequence[Passage], gold: Sequence[str]) -> bool:
    """Table 5's retrieval accuracy for one question: a gold alias occurs in one of the references."""
    return any(accuracy_contains(f"{p.title} {p.text}", list(gold)) for p in references)


def accuracy(records: Sequence[CovRagRecord], first: bool = False) -> float | None:
    """Share of records whose final (or, `first=True`, single-iteration) answer is correct."""
    if not records:
        return None
    return sum(is_correct(r.first_answer if first else r.answer, r.gold) for r in records) / len(records)


def judgment_accuracy(records: Sequence[CovRagRecord]) -> dict[str, Any]:
    """The first verification's judgment against the gold answer: 'true' for a correct answer, 'false' otherwise.

    `accuracy` counts unclear and unparsed judgments as wrong; `accuracy_judged` is over true/false only.
    """
    right = judged = 0
    labels = Counter()
    for r in records:
        v = r.rounds[0].verification
        label = v.judgment if v is not None and v.parsed and v.judgment else "none"
        labels[label] += 1
        if label in ("true", "false"):
            judged += 1
            right += (label == "true") == is_correct(r.first_answer, r.gold)
    n = len(records)
    return {"n": n, "accuracy": right / n if n else None, "accuracy_judged": right / judged if judged else None,
            "judged": judged, "labels": dict(labels)}


def retrieval_accuracy(records: Sequence[CovRagRecord]) -> dict[str, float | None]:
    """Table 5: share of questions with a gold answer in the top-k references, single vs multi iteration, and Δ."""
    if not records:
        return {"single": None, "multi": None, "delta": None}
    single = sum(references_hold_answer(r.rounds[0].references, r.gold) for r in records) / len(records)
    multi = sum(references_hold_answer(r.rounds[-1].references, r.gold) for r in records) / len(records)
    return {"single": single, "multi": multi, "delta": multi - single}


def rounds_histogram(records: Sequence[CovRagRecord]) -> dict[int, int]:
    """How many answers settled at each round (0 = σ did not fire)."""
    return dict(sorted(Counter(r.settled_round for r in records).items()))


def summarize(records: Sequence[CovRagRecord]) -> dict[str, Any]:
    """The headline numbers of one run: accuracy single/multi, retrieval accuracy, judgment, parsing, σ rate."""
    firsts = [r.rounds[0].verification for r in records if r.rounds[0].verification is not None]
    return {
        "n": len(records),
        "accuracy_single": accuracy(records, first=True),
        "accuracy_multi": accuracy(records),
        "retrieval": retrieval_accuracy(records),
        "judgment": judgment_accuracy(records),
        "parse": parse_report(firsts),
        "fired": sum(r.rounds[0].fired for r in records),
        "unverified": sum(r.unverified for r in records),
        "rounds": {str(k): v for k, v in rounds_histogram(records).items()},
    }


def weighted_average(values: dict[str, float | None], counts: dict[str, int]) -> float | None:
    """Table 2's Avg: the datasets' accuracies weighted by their number of questions (400/400/100/100 in the paper)."""
    pairs = [(values[k], counts[k]) for k in values if values[k] is not None and counts.get(k)]
    total = sum(c for _, c in pairs)
    return sum(v * c for v, c in pairs) / total if total else None


def average_over(values: dict[str, float | None], datasets: Sequence[str],
                 weights: dict[str, int] = PAPER_COUNTS) -> float | None:
    """Table 2's Avg restricted to `datasets`, each weighted by `weights` (the paper's 400/400/100/100).

    A paper row's four-dataset Avg is not comparable with ours over the datasets we loaded (NQ and
    WebQ by default): recomputed over the same datasets with the same weights, it is. None when a
    dataset has no value in the row (the GPT-3 row has no Mintaka / TriviaQA): not like with like.
    """
    datasets = list(datasets)
    if not datasets or any(values.get(d) is None for d in datasets):
        return None
    return weighted_average({d: values[d] for d in datasets}, {d: weights[d] for d in datasets})


def average_interval(flags_by_dataset: dict[str, Sequence[float]], weights: dict[str, int] = PAPER_COUNTS,
                     scale: float = 100.0, seed: int = 0) -> dict[str, float]:
    """`average_over` of our per-question 0/1 values with a 95% bootstrap interval (resampling questions).

    Each question of dataset d weighs weights[d] / n_d, so the value is the datasets' accuracies
    weighted by `weights`; n is the number of questions.
    """
    values, w = [], []
    for name, flags in flags_by_dataset.items():
        flags = [float(f) for f in flags]
        if flags:
            values += flags
            w += [weights[name] / len(flags)] * len(flags)
    if not values:
        return {"value": float("nan"), "low": float("nan"), "high": float("nan"), "n": 0}

    def weighted_mean(x: Any, wt: Any) -> float:
        return float(np.sum(x * wt) / np.sum(wt))

    est = bootstrap(weighted_mean, values, w, seed=seed)
    return {k: (v * scale if k != "n" else v) for k, v in est.items()}


def question_flags(records: Sequence[CovRagRecord]) -> dict[str, list[float]]:
    """Per question, the 0/1 values behind every CoV-RAG rate (what the intervals resample):

    * `single` / `multi`: the first / final answer is correct (Si, Mi, Table 2);
    * `judgment`: the first judgment matches the answer's correctness (unclear or unparsed: 0, as Jdg);
    * `judgment_judged`: the same over true/false judgments only (others NaN, left out of a mean);
    * `format` / `parsed`: the first verification needed no repair / was usable (NaN when not verified);
    * `reference_single` / `reference_multi`: a gold alias among the first / last round's references (Table 5).
    """
    nan = float("nan")
    out: dict[str, list[float]] = {key: [] for key in ("single", "multi", "judgment", "judgment_judged", "format",
                                                       "parsed", "reference_single", "reference_multi")}
    for r in records:
        first_ok = is_correct(r.first_answer, r.gold)
        v = r.rounds[0].verification
        label = v.judgment if v is not None and v.parsed and v.judgment else "none"
        right = float(label in ("true", "false") and (label == "true") == first_ok)
        out["single"].append(float(first_ok))
        out["multi"].append(float(is_correct(r.answer, r.gold)))
        out["judgment"].append(right)
        out["judgment_judged"].append(right if label in ("true", "false") else nan)
        out["format"].append(nan if v is None else float(v.well_formed))
        out["parsed"].append(nan if v is None else float(v.parsed))
        out["reference_single"].append(float(references_hold_answer(r.rounds[0].references, r.gold)))
        out["reference_multi"].append(float(references_hold_answer(r.rounds[-1].references, r.gold)))
    return out


def rank_values(rankings: Sequence[dict[str, list[int] | None]],
                systems: Sequence[str]) -> dict[str, dict[str, list[int]]]:
    """Per criterion and system, its rank on each question the judge ranked completely (their mean is `mean_ranks`)."""
    criteria = sorted({c for r in rankings for c in r})
    return {c: {s: [r[c][j] for r in rankings if r.get(c)] for j, s in enumerate(systems)} for c in criteria}


def table_frame(rows: Sequence[dict[str, Any]]) -> Any:
    """Table rows (ours and the paper's) as a DataFrame for `results.save_table`: a cell a row does not have is
    blank, not "nan" (the paper's rows have no interval), and a column of counts stays integer (not 8.0)."""
    import numbers

    import pandas as pd

    rows = list(rows)
    df = pd.DataFrame(rows)
    out = df.astype(object).where(df.notna(), "")
    for col in df.columns:
        given = [r[col] for r in rows if r.get(col) is not None]
        if given and all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in given):
            out[col] = [int(v) if pd.notna(v) else "" for v in df[col]]
    return out


def run_label(name: str) -> str:
    """What ran, for a table row, from a covlib model name: '<model>, no adapter' or '<model>, adapter <folder>'.

    Rows are named by what ran, never by the paper's method name: the paper's CoV-RAG is a model
    fine-tuned with Eqs. 2-4, and an untuned model running the same pipeline is not it.
    """
    model, sep, adapter = name.partition("+adapter:")
    if model.startswith("local:"):
        model = model[len("local:"):].rstrip("/").split("/")[-1]
    elif model.startswith("openai:"):
        model = model.split("@")[0]
    else:
        model = model.split("/")[-1]
    return f"{model}, adapter {adapter}" if sep else f"{model}, no adapter"


# --------------------------------------------------------------------------- what the corpus can answer


def answerable(examples: Sequence[Example], passages: Iterable[Passage], max_words: int = 12) -> dict[str, bool]:
    """Per example id: does a normalised gold alias occur anywhere in the corpus? One streamed pass over `passages`.

    Only the n-gram sizes that some alias has are built, so one pass over a large corpus stays linear;
    aliases longer than `max_words` words (sentences, not answers) are never found.
    """
    wanted: dict[str, set[str]] = {}
    for ex in examples:
        for alias in ex.answers:
            norm = normalize_answer(alias)
            if norm:
                wanted.setdefault(norm, set()).add(ex.id)
    lengths = sorted({min(len(a.split()), max_words) for a in wanted})  # only the n-gram sizes some alias has
    found: set[str] = set()
    remaining = set(wanted)
    for p in passages:
        if not remaining:
            break
        words = normalize_answer(f"{p.title} {p.text}").split()
        for size in lengths:
            for i in range(len(words) - size + 1):
                gram = " ".join(words[i:i + size])
                if gram in remaining:
                    found.add(gram)
                    remaining.discard(gram)
    hit_ids = {i for alias in found for i in wanted[alias]}
    return {ex.id: ex.id in hit_ids for ex in examples}


# --------------------------------------------------------------------------- training data (§2.2)

def verification_json(v: Verification, chain: bool = True) -> str:
    """A verification as the target the verifier is trained to write: Table 6's JSON ("w/ CoL"), or with
    `chain=False` only the judgment and revised query ("w/o CoL", Table 4)."""
    def num(x: float | None) -> float:
        return round(float(x if x is not None else 0.0), 2)

    out: dict[str, Any] = {}
    if chain:
        out["1"] = {"reference_correctness": num(v.reference_correctness)}
        out["2"] = {name: num(getattr(v, name)) for name in ANSWER_SCORES}
    out["3"] = v.judgment or "unclear"
    out["4"] = v.revised_query
    return json.dumps(out, ensure_ascii=False)


def well_formed_question(question: str) -> str:
    """The paper's advice for a revised query (Table 6 step 4), applied by rule: capitalised, ending with '?'."""
    q = " ".join(question.split()).rstrip(" .?!")
    return (q[:1].upper() + q[1:] + "?") if q else ""


def gold_verification(question: str, answer: str, references: Sequence[Passage], gold: Sequence[str]) -> Verification:
    """Verification labels derived from the gold answer (our offline stand-in for the paper's GPT-4 labels).

    correctness = answer contains gold; reference_correctness = a reference contains gold; citation
    accuracy = share of cited references that contain gold; bias, truthfulness = 0.1 / 0.9 when
    correct, 0.9 / 0.3 when not; conciseness = min(1, 40 / words). Judgment true iff correct; a
    wrong answer gets the question rewritten by `well_formed_question` as its revised query.
    """
    correct = is_correct(answer, gold)
    cited = [i for i in parse_citations(answer) if 1 <= i <= len(references)]
    holding = [references_hold_answer([references[i - 1]], gold) for i in cited]
    words = max(1, len(strip_citations(answer).split()))
    return Verification(
        reference_correctness=1.0 if references_hold_answer(references, gold) else 0.0,
        correctness=1.0 if correct else 0.0,
        citation_accuracy=sum(holding) / len(holding) if holding else 0.0,
        truthfulness=0.9 if correct else 0.3,
        bias=0.1 if correct else 0.9,
        conciseness=min(1.0, 40 / words),
        judgment="true" if correct else "false",
        revised_query="" if correct else well_formed_question(question),
        status="ok",
    )


def gold_answer(references: Sequence[Passage], gold: Sequence[str]) -> str:
    """A cited QA target from the gold answer: 'gold [n].' with n the first reference holding it (none: 'gold.')."""
    n = next((i for i, p in enumerate(references, 1) if references_hold_answer([p], gold)), None)
    return f"{gold[0]} [{n}]." if n else f"{gold[0]}."


def normalize_question(question: str) -> str:
    """A question compared for leakage: lowercased, punctuation and articles dropped, spaces collapsed."""
    return normalize_answer(question)


def check_no_leak(train_questions: Iterable[str], test_questions: Iterable[str]) -> None:
    """Raise ValueError naming the questions when a (normalised) test question is among the training questions."""
    test = {normalize_question(q): q for q in test_questions}
    leaked = sorted({test[n] for n in (normalize_question(q) for q in train_questions) if n in test})
    if leaked:
        shown = "; ".join(repr(q) for q in leaked[:5])
        raise ValueError(f"{len(leaked)} test question(s) in the training data: {shown}"
                         + (" ..." if len(leaked) > 5 else ""))


@dataclass(frozen=True)
class TrainingSet:
    """SFT pairs for one model: QA pairs, verification pairs, and where their labels came from."""

    qa: list[tuple[str, str]]
    verification: list[tuple[str, str]]
    labels: str  # "gold" or "teacher:<model name>"

    def multitask(self) -> list[tuple[str, str]]:
        """L_QA + L_verification (Eqs. 2-4): both tasks' pairs in one list (interleaved, QA first)."""
        out: list[tuple[str, str]] = []
        for i in range(max(len(self.qa), len(self.verification))):
            out += self.qa[i:i + 1] + self.verification[i:i + 1]
        return out


def training_set(examples: Sequence[Example], references: Sequence[Sequence[Passage]], predictions: Sequence[str],
                 *, test_questions: Iterable[str], chain: bool = True, teacher: Generator | None = None,
                 verify_tokens: int = 160) -> TrainingSet:
    """§2.2's data from training questions only: QA pairs (question + references -> cited gold answer) and
    verification pairs (question + references + a model's prediction -> its verification).

    Verification labels come from `teacher` (its output for the same prompt plus Table 13's gold
    'Label:' line; only complete outputs are kept) or, without one, from the gold answer
    (`gold_verification`).
    Raises ValueError when a test question is among the training questions.
    """
    check_no_leak([ex.question for ex in examples], test_questions)
    if not (len(examples) == len(references) == len(predictions)):
        raise ValueError(f"{len(examples)} examples, {len(references)} reference lists, {len(predictions)} predictions")
    qa = [(qa_prompt(ex.question, refs), " " + gold_answer(refs, ex.answers)) for ex, refs in zip(examples, references)]
    prompts = [verification_prompt(ex.question, pred, refs) for ex, refs, pred in zip(examples, references, predictions)]
    if teacher is None:
        labels = [gold_verification(ex.question, pred, refs, ex.answers)
                  for ex, refs, pred in zip(examples, references, predictions)]
        source = "gold"
    else:
        labels = verify_batch(teacher, [ex.question for ex in examples], predictions, references, verify_tokens,
                              desc="teacher verification", labels=[ex.answers for ex in examples])
        source = f"teacher:{teacher.name}"
    # only complete labels become targets: a missing score must not be taught as 0.0
    verification = [(p, " " + verification_json(v, chain)) for p, v in zip(prompts, labels) if v.complete]
    return TrainingSet(qa, verification, source)


# --------------------------------------------------------------------------- LLM-as-judge ranking (Table 3, Table 16)

RANK_CRITERIA = ("Citation Accuracy", "Correctness", "Truthfulness", "Conciseness")
CITATION_RANK_TEMPLATE = SEP.join([
    "Criteria Details For Answers include:",
    "Citation Accuracy(0,1): Evaluating whether the reference marks in the answer are accurate.",
    "<inputs>",
    "Now you are a reading comprehension examiner who should do things as below:",
    "1. Score the answer based on the evaluation criteria.",
    "2. Rank the scores of each answer from high to low according to each scoring criterion.",
    "3. Briefly state the reason for your Rank.",
    'Output format example:{ "rank_result": {"Citation Accuracy": [("answer3", 0.77), ("answer1",0.53), '
    '("answer2", 0.12)]}, "rank_reason": "The reason for this ranking." }',
])
OTHERS_RANK_TEMPLATE = SEP.join([
    "Criteria Details For Answers include:",
    "Correctness(0,1): Evaluating whether the question is correctly answered, you can refer to the golden label of "
    "the question below when evaluating",
    "Truthfulness(0,1): Evaluating whether the text itself violates common sense, logic or contains contradictions.",
    "Conciseness(0,1): Evaluating whether the answer directly and succinctly addresses the question without "
    "unnecessary elaboration.",
    "<inputs>",
    "Now you are a reading comprehension examiner who should do things as below:",
    "1. Score the answer based on the provided evaluation criteria.",
    "2. Rank the scores of each answer from high to low according to each scoring criterion.",
    "3. Briefly state the reason for your Rank.",
    'Output format example:{ "rank_result": {"Correctness": [("answer4", 0.77), ("answer1", 0.53), ("answer3", 0.37), '
    '("answer2", 0.12)], "Truthfulness": [("answer3", 0.92), ("answer4", 0.41), ("answer2", 0.22), ("answer1", 0.02)], '
    '"Conciseness":[("answer4", 0.69), ("answer3", 0.51), ("answer1", 0.2), ("answer2", 0.1)]}, "rank_reason": '
    '"The reason for this ranking." }',
])  # Table 16 is cut off after '("an-'; the last pair and the closing text are ours, copied from the Citation prompt


def ranking_prompt(kind: str, question: str, answers: Sequence[str], references: Sequence[Passage] = (),
                   gold: Sequence[str] = ()) -> str:
    """Table 16's prompt: kind "citation" (question, references, answers) or "others" (question, golden label, answers)."""
    slots = [f'"answer{i}": {a.strip()}' for i, a in enumerate(answers, 1)]
    if kind == "citation":
        refs = format_references(references, template=REFERENCE_TEMPLATE, sep=SEP)
        inputs = "{ " + ", ".join([f'"question": {question.strip()}', f'"reference": {refs}', *slots]) + " }"
        return CITATION_RANK_TEMPLATE.replace("<inputs>", inputs)
    if kind == "others":
        inputs = "{ " + ", ".join([f'"question": {question.strip()}', f'"golden label": {json.dumps(list(gold))}',
                                   *slots]) + " }"
        return OTHERS_RANK_TEMPLATE.replace("<inputs>", inputs)
    raise ValueError(f"ranking prompt kind must be 'citation' or 'others', not {kind!r}")


_RANK_ITEM = re.compile(r"""["']?answer\s*(\d+)["']?\s*,\s*(-?\d+(?:\.\d+)?)""", re.I)


def parse_ranking(text: str, criteria: Sequence[str], n_answers: int) -> dict[str, list[int] | None]:
    """Per criterion, the answers' ranks (1 = best) from the judge's scores, tied scores sharing the best rank
    ("1, 2, 2, 4": ours, the paper does not say how it ranked ties); None when the judge's list for that criterion
    is missing or does not score every answer exactly once. Lists may be of tuples or JSON arrays."""
    out: dict[str, list[int] | None] = {}
    for criterion in criteria:
        out[criterion] = None
        m = re.search(rf"""["']?{re.escape(criterion)}["']?\s*[:;]\s*\[""", text or "", re.I)
        if not m:
            continue
        depth, end = 0, None
        for i in range(m.end() - 1, len(text)):
            depth += {"[": 1, "]": -1}.get(text[i], 0)
            if depth == 0:
                end = i
                break
        items = [(int(a), float(x)) for a, x in _RANK_ITEM.findall(text[m.end():end if end is not None else None])]
        if end is None or sorted(a for a, _ in items) != list(range(1, n_answers + 1)):
            continue
        out[criterion] = [0] * n_answers
        for answer, score in items:
            out[criterion][answer - 1] = 1 + sum(other > score for _, other in items)
    return out


def mean_ranks(rankings: Sequence[dict[str, list[int] | None]], systems: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Table 3: rank = Σ x_i / N per system and criterion over the questions the judge ranked completely (N kept)."""
    out: dict[str, dict[str, Any]] = {}
    criteria = sorted({c for r in rankings for c in r})
    for c in criteria:
        ranked = [r[c] for r in rankings if r.get(c)]
        out[c] = {"n": len(ranked), "unparsed": sum(1 for r in rankings if c in r and not r[c])}
        for j, system in enumerate(systems):
            out[c][system] = sum(r[j] for r in ranked) / len(ranked) if ranked else None
    return out


def rank_answers(judge: Generator, kind: str, questions: Sequence[str], answers: dict[str, Sequence[str]],
                 criteria: Sequence[str], references: Sequence[Sequence[Passage]] = (),
                 golds: Sequence[Sequence[str]] = (), seed: int = 0, max_new_tokens: int = 160,
                 chat: bool = True) -> list[dict[str, list[int] | None]]:
    """Table 3's judging: per question, the systems' answers in a seeded random order (no position bias) in one
    batched call; the judge's ranks mapped back to the systems' order of `answers`."""
    import random

    systems = list(answers)
    prompts, orders = [], []
    for i, q in enumerate(questions):
        order = list(range(len(systems)))
        random.Random(f"{seed}:{i}:{q}").shuffle(order)
        orders.append(order)
        shown = [answers[systems[j]][i] for j in order]
        prompts.append(ranking_prompt(kind, q, shown, references[i] if references else (), golds[i] if golds else ()))
    outs = judge.generate(prompts, max_new_tokens=max_new_tokens, chat=chat, desc=f"judge ({kind})")
    ranked = []
    for order, out in zip(orders, outs):
        shown_ranks = parse_ranking(out[0].text, criteria, len(systems))
        back: dict[str, list[int] | None] = {}
        for criterion, ranks in shown_ranks.items():
            if ranks is None:
                back[criterion] = None
                continue
            per_system = [0] * len(systems)
            for position, system_index in enumerate(order):
                per_system[system_index] = ranks[position]
            back[criterion] = per_system
        ranked.append(back)
    return ranked
