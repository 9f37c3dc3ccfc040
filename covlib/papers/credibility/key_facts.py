"""Key facts (§3): the shipped ones, drafted and reviewed by AI coding agents (the default), gold supporting sentences, or the paper's two prompts; the review sheet."""

from __future__ import annotations

import csv
import io
import json
import re
import unicodedata
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence


from covlib.core import paths
from covlib.core.records import DataError, Example
from covlib.core.text import FUNCTION_WORDS, overlap_words, split_sentences
from covlib.data import iter_records
from covlib.generation import Generator

from covlib.papers.credibility.prompts import key_facts_prompt, reasoning_prompt


KEY_FACTS_VERSION = 1
# Where a notebook's key facts come from. "agents": the shipped facts for the 100 shared HotpotQA questions, drafted
# and reviewed by AI coding agents (AGENT_KEY_FACTS_PROVENANCE; the key was "hand" before, refused now); the default.
# "supporting": HotpotQA's gold supporting sentences, verbatim sentences of the gold references (copying the
# references scores best on them: a labelled option). "llm": the paper's two prompts with any covlib model.
SOURCES = ("agents", "supporting", "llm")
DEFAULT_KEY_FACTS = "agents"
AGENT_KEY_FACTS = "key_facts_agents-v1.jsonl"  # in paths.resources_dir()
AGENT_REVIEW_SHEET = "key_facts_agents-review.csv"
# What made each shipped file, in the words its header, the notebooks and the docs quote (a test keeps them equal):
# the key facts' header is every record's `author`, the review sheet's its first line ("# provenance: ...").
AGENT_KEY_FACTS_PROVENANCE = (
    "Drafted by an AI coding agent from the HotpotQA gold paragraphs following §3 (atomic, one per reasoning step) "
    "and reviewed twice by AI coding agents, the second review by a separate agent (review sheet: draft, review1, "
    "review2); then 50 facts were rewritten by an AI coding assistant to paraphrase their reasoning step, keeping "
    "their meaning, answer and id (review sheet: v1_key_fact, rewrite), and checked with "
    "covlib.papers.credibility.key_facts.gold_overlap: no fact shares a run of 3 or more words with its gold "
    "supporting sentences beyond names, numbers, function words and the words of its question and answer. "
    "No person wrote, reviewed or rewrote them.")
AGENT_REVIEW_PROVENANCE = (
    "One row per key fact of key_facts_agents-v1.jsonl (and per dropped draft): draft, review1 and review2 are the AI "
    "coding agents' draft and two reviews; v1_key_fact is the wording before an AI coding assistant's rewrite (the "
    "hypotheses of keyfact_nli_pairs-v1.jsonl), key_fact the shipped wording and rewrite what changed; the run "
    "columns and the counts below are computed by covlib.papers.credibility.key_facts.gold_overlap. "
    "No person reviewed them.")
# --------------------------------------------------------------------------- key facts (§3)


@dataclass
class KeyFacts:
    """A question's key facts and who wrote them (`source`: supporting / llm / ...+reviewed; `author`)."""

    question_id: str
    question: str
    answer: str
    key_facts: list[str]
    source: str
    author: str
    reasoning: str = ""
    version: int = KEY_FACTS_VERSION


def gold_sentences(example: Example) -> list[str]:
    """The example's gold supporting sentences (HotpotQA `supporting_facts`), in order, each once."""
    by_title = {p.title: p for p in example.paragraphs}
    facts = []
    for title, idx in example.supporting_facts:
        para = by_title.get(title)
        if para is not None and 0 <= idx < len(para.sentences) and para.sentences[idx].strip():
            facts.append(para.sentences[idx].strip())
    return list(dict.fromkeys(facts))


def supporting_key_facts(examples: Sequence[Example]) -> list[KeyFacts]:
    """The gold supporting sentences as key facts (an option; the default is the shipped facts, `DEFAULT_KEY_FACTS`)."""
    out = []
    for ex in examples:
        facts = gold_sentences(ex)
        if not facts:
            raise DataError(ex.id, "no supporting sentence could be found among the example's paragraphs")
        out.append(KeyFacts(ex.id, ex.question, ex.answer, facts, "supporting",
                            "HotpotQA gold supporting sentences"))
    return out


_ITEM = re.compile(r"^\s*(?:[-*•]|\(?\d+[.):]|key[- ]?fact\s*\d*\s*[:.)-])\s*", re.IGNORECASE)


_LABEL = re.compile(r"^\s*key[- ]?facts?\s*\d*\s*[:.)-]\s*", re.IGNORECASE)


def parse_key_facts(text: str, limit: int = 4) -> list[str]:
    """Key facts from a model's list: numbered or bulleted lines (else sentences), deduplicated, at most `limit`."""
    lines = [ln for ln in (text or "").splitlines() if ln.strip()]
    items = [_ITEM.sub("", ln).strip() for ln in lines if _ITEM.match(ln)]
    if not items:
        items = split_sentences(" ".join(ln.strip() for ln in lines))
    items = [_LABEL.sub("", s.replace("**", "")).strip() for s in items]
    items = [s for s in items if len(re.findall(r"\w+", s)) >= 3 and not s.rstrip().endswith(":")]
    return list(dict.fromkeys(items))[:limit]


@dataclass
class KeyFactExtraction:
    """The paper's two-step construction (§3) as one run, for its trace: per question the reasoning prompt and reply,
    the key-fact prompt and reply and the key facts parsed from it; the generator and its `decoding`."""

    generator: Generator
    examples: list[Example]
    prompts: list[str]
    reasoning: list[str]
    fact_prompts: list[str]
    replies: list[str]
    key_facts: list[list[str]]
    decoding: dict[str, Any]


class KeyFactList(list):
    """Key-fact records, one per question (a list of `KeyFacts`), and the extraction that wrote some of them just now
    with the paper's prompts (`extraction`; None when none was written by a model here), which
    `credibility.trace.write` traces."""

    def __init__(self, records: Sequence[KeyFacts], extraction: KeyFactExtraction | None = None) -> None:
        super().__init__(records)
        self.extraction = extraction


def llm_key_facts(generator: Generator, examples: Sequence[Example], max_new_tokens: int = 256,
                  progress: bool = True) -> KeyFactList:
    """The paper's two-step construction with any LM: reasoning steps, then 2-4 key facts (greedy, chat); the
    records carry the prompts and replies (`KeyFactList.extraction`)."""
    gold = [[p for p in ex.paragraphs if p.is_supporting] or ex.paragraphs for ex in examples]
    prompts = [reasoning_prompt(ex.question, refs, ex.answer) for ex, refs in zip(examples, gold)]
    decoding = {"max_new_tokens": max_new_tokens, "chat": True}
    steps = generator.generate(prompts, **decoding, progress=progress, desc="reasoning steps")
    reasoning = [c[0].text.strip() for c in steps]
    fact_prompts = [key_facts_prompt(ex.question, r, ex.answer) for ex, r in zip(examples, reasoning)]
    facts = generator.generate(fact_prompts, **decoding, progress=progress, desc="key facts")
    author = getattr(generator, "name", type(generator).__name__)
    out = [KeyFacts(ex.id, ex.question, ex.answer, parse_key_facts(c[0].text), "llm", author, r)
           for ex, r, c in zip(examples, reasoning, facts)]
    return KeyFactList(out, KeyFactExtraction(generator, list(examples), prompts, reasoning, fact_prompts,
                                              [c[0].text for c in facts], [k.key_facts for k in out], decoding))


def key_facts_path(source: str) -> Path:
    """Where a key-fact source is stored: the shipped file for 'agents', else build/key_facts/<source>-v<N>.jsonl."""
    if source == "agents":
        return paths.resources_dir() / AGENT_KEY_FACTS
    return paths.build_dir() / "key_facts" / f"{source}-v{KEY_FACTS_VERSION}.jsonl"


def save_key_facts(records: Sequence[KeyFacts], path: str | Path) -> Path:
    """Write the records as JSONL (atomically); return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(json.dumps(asdict(r), ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    tmp.replace(path)
    return path


def load_key_facts(path: str | Path) -> list[KeyFacts]:
    """Read a key-fact JSONL, checking every field and the format version."""
    out = []
    for row, loc in iter_records(path):
        if not isinstance(row, dict):
            raise DataError(loc.path, "expected a JSON object", loc.line)
        if row.get("version") != KEY_FACTS_VERSION:
            raise DataError(loc.path, f"key-fact format version {row.get('version')!r}, expected "
                            f"{KEY_FACTS_VERSION}: rebuild it", loc.line, "version")
        for name in ("question_id", "question", "answer", "source", "author"):
            if not isinstance(row.get(name), str):
                raise DataError(loc.path, "missing or not a string", loc.line, name)
        facts = row.get("key_facts")
        if not isinstance(facts, list) or not all(isinstance(f, str) and f.strip() for f in facts):
            raise DataError(loc.path, "must be a list of non-empty strings", loc.line, "key_facts")
        out.append(KeyFacts(**{k: row[k] for k in KeyFacts.__dataclass_fields__ if k in row}))
    return out


def build_key_facts(source: str, examples: Sequence[Example], generator: Generator | None = None,
                    rebuild: bool = False, **kw: Any) -> KeyFactList:
    """Key facts from `source` for `examples`, read from build/key_facts/ when stored there for the same questions
    (and, for 'llm', by the same generator, which only that source uses); `extraction` holds the prompts and replies
    of the ones the paper's prompts wrote just now (for `credibility.trace.write`), else None."""
    if source == "llm" and generator is None:
        raise ValueError("key-fact source 'llm' needs a generator")
    if source == "hand":
        raise ValueError("key-fact source 'hand' was renamed to 'agents' (the shipped key facts, made by AI coding "
                         "agents): use key_facts='agents'")
    if source not in SOURCES and not source.endswith("+reviewed"):
        raise ValueError(f"unknown key-fact source {source!r}; choose one of {SOURCES} (or a reviewed set)")
    path = key_facts_path(source)
    stored = {r.question_id: r for r in load_key_facts(path)} if path.exists() and not rebuild else {}
    missing = [ex for ex in examples if ex.id not in stored
               or (source == "llm" and stored[ex.id].author != generator.name)]
    extraction = None
    if missing:
        if source == "agents":
            raise ValueError(f"{len(missing)} question(s) have no shipped ('agents') key facts in {path} (e.g. "
                             f"{missing[0].id!r}): they cover the 100 shared HotpotQA questions only; use "
                             f"key_facts='llm' (then review it) for other questions")
        if source.endswith("+reviewed"):
            raise FileNotFoundError(f"{len(missing)} question(s) have no reviewed key facts at {path} "
                                    f"(e.g. {missing[0].id!r}): read a review sheet first")
        new = supporting_key_facts(missing) if source == "supporting" else llm_key_facts(generator, missing, **kw)
        extraction = getattr(new, "extraction", None)
        stored.update({r.question_id: r for r in new})
        save_key_facts(list(stored.values()), path)  # kept beside the questions built before
    return KeyFactList([stored[ex.id] for ex in examples], extraction)


REVIEW_COLUMNS = ("fact_id", "question_id", "question", "answer", "key_fact", "keep", "edit")


def export_review_sheet(records: Sequence[KeyFacts], path: str | Path) -> Path:
    """A CSV with one row per key fact: set `keep` to n to drop it, or write a corrected fact in `edit`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(REVIEW_COLUMNS)
        for r in records:
            for i, fact in enumerate(r.key_facts):
                w.writerow([f"{r.question_id}#{i}", r.question_id, r.question, r.answer, fact, "y", ""])
    return path


_YES, _NO = {"y", "yes", "1", "true", "keep", ""}, {"n", "no", "0", "false", "drop"}


def read_review_sheet(path: str | Path, records: Sequence[KeyFacts], reviewer: str = "human") -> list[KeyFacts]:
    """The accepted key facts from an edited review sheet; unknown ids, empty facts or a question left bare raise DataError."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no review sheet at {path}")
    by_id = {r.question_id: r for r in records}
    kept: dict[str, list[str]] = {q: [] for q in by_id}
    seen: set[str] = set()
    with path.open(newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        missing = [c for c in ("fact_id", "question_id", "key_fact", "keep", "edit") if c not in (reader.fieldnames or [])]
        if missing:
            raise DataError(path, f"missing column(s) {missing}; the sheet needs {list(REVIEW_COLUMNS)}", 1)
        for line, row in enumerate(reader, 2):
            qid, fid = (row["question_id"] or "").strip(), (row["fact_id"] or "").strip()
            if qid not in by_id:
                raise DataError(path, f"unknown question id {qid!r}", line, "question_id")
            if not fid.startswith(qid + "#") or fid in seen:
                raise DataError(path, f"fact id {fid!r} is not a fresh id of question {qid!r}", line, "fact_id")
            seen.add(fid)
            keep = (row["keep"] or "").strip().lower()
            if keep not in _YES | _NO:
                raise DataError(path, f"keep must be y or n, not {row['keep']!r}", line, "keep")
            fact = (row["edit"] or "").strip() or (row["key_fact"] or "").strip()
            if keep in _YES:
                if not fact:
                    raise DataError(path, "a kept key fact is empty: write it in `edit` or set keep to n", line,
                                    "key_fact")
                kept[qid].append(fact)
    bare = [q for q, facts in kept.items() if not facts]
    if bare:
        raise DataError(path, f"{len(bare)} question(s) left with no key fact (e.g. {bare[0]!r}): keep or write one")
    return [KeyFacts(r.question_id, r.question, r.answer, list(dict.fromkeys(kept[r.question_id])),
                     r.source.split("+")[0] + "+reviewed", f"{r.author}; reviewed by {reviewer}", r.reasoning)
            for r in records]


# --------------------------------------------------------------------------- overlap with the gold sentences

OVERLAP_BINS = ("0", "1", "2", "3", "4", "5+")  # longest shared run, in words
# FUNCTION_WORDS (covlib.core.text): words any paraphrase may share with its source
_WORD = re.compile(r"\w+")
_QUOTED = re.compile(r'"([^"]+)"|“([^”]+)”')


def _runs(fact: list[str], sentence: list[str]) -> list[tuple[int, int]]:
    """Every maximal run of consecutive words the two share, as (start in fact, length)."""
    out, prev = [], [0] * (len(sentence) + 1)
    for i, word in enumerate(fact + [None]):
        cur = [0] * (len(sentence) + 1)
        for j in range(len(sentence) + 1):
            same = j < len(sentence) and word == sentence[j]
            if same:
                cur[j + 1] = prev[j] + 1
            elif prev[j]:  # the run ending at (i-1, j-1) stops here
                out.append((i - prev[j], prev[j]))
        prev = cur
    return out


def shared_runs(fact: str, sentences: Sequence[str], min_words: int = 1) -> list[str]:
    """Every maximal run of at least `min_words` consecutive words the fact shares with one of the sentences (each
    sentence on its own), in the fact's spelling, longest first."""
    cased = _WORD.findall(unicodedata.normalize("NFC", fact))
    words = [w.lower() for w in cased]
    found = {(i, n) for s in sentences for i, n in _runs(words, overlap_words(s)) if n >= min_words}
    return [" ".join(cased[i:i + n]) for i, n in sorted(found, key=lambda r: (-r[1], r[0]))]


def longest_shared_run(fact: str, sentences: Sequence[str]) -> int:
    """The longest run of consecutive words the fact shares with any one of the sentences (0: no word shared)."""
    runs = shared_runs(fact, sentences)
    return len(runs[0].split()) if runs else 0


def _names(text: str) -> set[str]:
    """Lowercased words a text spells as names: capitalised after its first word (the first too when the second
    is), and every word of a "quoted" title."""
    words = _WORD.findall(unicodedata.normalize("NFC", text))
    out = {w.lower() for w in words[1:] if w[:1].isupper()}
    if len(words) > 1 and words[0][:1].isupper() and words[1][:1].isupper():
        out.add(words[0].lower())
    return out | {w for m in _QUOTED.finditer(text) for w in overlap_words(m.group(1) or m.group(2))}


def copied_runs(fact: str, sentences: Sequence[str], keep: Sequence[str] = (), min_words: int = 3) -> list[str]:
    """The shared runs of at least `min_words` words that copy the sentences' wording: some word of theirs is not a
    function word (`FUNCTION_WORDS`), a number, a name (`_names` of the fact or a sentence) or a word of `keep`
    (the question and the answer, which a fact may repeat)."""
    free = FUNCTION_WORDS.union(*(_names(t) for t in (fact, *sentences)), *(overlap_words(k) for k in keep))
    return [r for r in shared_runs(fact, sentences, min_words)
            if any(w.lower() not in free and not any(ch.isdigit() for ch in w) for w in r.split())]


def overlap_distribution(runs: Sequence[int]) -> dict[str, int]:
    """How many facts have each longest shared run, binned 0, 1, 2, 3, 4, 5+ (every bin present)."""
    counts = dict.fromkeys(OVERLAP_BINS, 0)
    for n in runs:
        counts[OVERLAP_BINS[min(n, len(OVERLAP_BINS) - 1)]] += 1
    return counts


def format_distribution(counts: dict[str, int]) -> str:
    """'0: 0, 1: 10, ..., 5+: 29', the form the review sheet's header and the docs print."""
    return ", ".join(f"{k}: {v}" for k, v in counts.items())


def gold_overlap(records: Sequence[KeyFacts], examples: Sequence[Example]) -> list[dict[str, Any]]:
    """Per key fact, the wording it shares with its question's gold supporting sentences: fact_id
    (`<question_id>#<n>`, n from 1), key_fact, run (the longest shared run of words) and shared_run (its words),
    wording_run and wording_shared (the same for the runs holding a word `copied_runs` counts as copied wording:
    not a name, number, function word or word of the question or answer)."""
    by_id = {ex.id: ex for ex in examples}
    out = []
    for r in records:
        if r.question_id not in by_id:
            raise ValueError(f"no example for the key facts of question {r.question_id!r}")
        ex = by_id[r.question_id]
        gold = gold_sentences(ex)
        for i, fact in enumerate(r.key_facts, 1):
            runs, wording = shared_runs(fact, gold), copied_runs(fact, gold, (ex.question, *ex.answers), 1)
            out.append({"fact_id": f"{r.question_id}#{i}", "key_fact": fact,
                        "run": len(runs[0].split()) if runs else 0, "shared_run": runs[0] if runs else "",
                        "wording_run": len(wording[0].split()) if wording else 0,
                        "wording_shared": wording[0] if wording else ""})
    return out


# --------------------------------------------------------------------------- the shipped review sheet

AGENT_REVIEW_COLUMNS = ("fact_id", "question_id", "question", "answer", "key_fact", "draft", "review1", "review2",
                        "v1_key_fact", "rewrite", "run_v1", "wording_run_v1", "run", "shared_run", "wording_run",
                        "wording_shared")


def read_agent_review(path: str | Path | None = None) -> tuple[dict[str, str], list[dict[str, str]]]:
    """The shipped review sheet: its header (the '# name: value' lines above the CSV) and its rows."""
    text = Path(path or paths.resources_dir() / AGENT_REVIEW_SHEET).read_text(encoding="utf-8")
    header = {}
    while text.startswith("#"):
        line, _, text = text.partition("\n")
        name, _, value = line[1:].strip().partition(": ")
        header[name] = value
    return header, list(csv.DictReader(io.StringIO(text, newline="")))


def write_agent_review(header: dict[str, str], rows: Sequence[dict[str, Any]], path: str | Path | None = None) -> Path:
    """Write the review sheet: '# name: value' header lines, then the CSV with `AGENT_REVIEW_COLUMNS`."""
    path = Path(path or paths.resources_dir() / AGENT_REVIEW_SHEET)
    out = io.StringIO(newline="")
    out.write("".join(f"# {k}: {v}\r\n" for k, v in header.items()))  # CRLF, as csv writes its rows
    w = csv.DictWriter(out, AGENT_REVIEW_COLUMNS)
    w.writeheader()
    w.writerows(rows)
    path.write_text(out.getvalue(), encoding="utf-8", newline="")
    return path
