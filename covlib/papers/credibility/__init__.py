"""How Credible Is an Answer From Retrieval-Augmented LLMs? (Zhou, Liu, Dou): benchmark, metrics, improvements.

The benchmark (§3) pairs each multi-hop HotpotQA question with *key facts*, the reasoning
steps an answer must contain. The metrics (§4) judge a long-form cited answer with an NLI
oracle f(premise, hypothesis) (1 when the premise entails the hypothesis): key-fact recall and
precision (correctness), citation precision / recall and self-consistency (groundedness).
The improvements (§5) are self-reflection (refuse when the references are insufficient) and
self-completion (ask the search engine for what is missing, then answer again).

Steps, each one batched call (`lm.generate` or `nli.probabilities`) over all questions:

1. key facts: the hand-written ones (`DEFAULT_KEY_FACTS = "hand"`), `supporting_key_facts`
   (gold supporting sentences, a labelled option that rewards copying) or `llm_key_facts`
   (the paper's two prompts); `export_review_sheet` / `read_review_sheet` are the human
   filtering step;
2. reference sets (`with_gold`, `partial`, `closed_book`, `bm25_references`), seeded per
   question, gold positions recorded;
3. answers: `answer_prompt` (our completion of the paper's elided "Please write a
   high-quality answer ...", see ANSWER_INSTRUCTION), `generate_answers`;
4. metrics: `score_answers` (three NLI calls: recall, precision, self-consistency) and
   `summarize`;
5. self-reflection (`reflection_sets`, `is_refusal`, `reflection_scores`) and
   self-completion (`self_complete`, rounds while the model refuses, capped);
6. intervals: `intervals` (every mean of `summarize` with its 95% bootstrap interval over
   questions), `paired` / `recall_drop` (differences on the same questions),
   `reflection_intervals`, `gold_recall`, `human_correlation_intervals`, and `interval_columns`
   for tables.

Prompts are the paper's words where it gives them; the parts it elides are ours and say so.
"""

from __future__ import annotations

import csv
import hashlib
import json
import random
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from covlib.core import metrics, paths
from covlib import nli
from covlib.core.text import split_sentences
from covlib.core.metrics import pearson
from covlib.core.records import passage_string
from covlib.data import iter_records, load_hotpotqa
from covlib.generation import Generator
from covlib.core.metrics import accuracy_contains, normalize_answer
from covlib.core.records import DataError, Example, Paragraph, Passage
from covlib.core.references import CitedSentence, cited_ids, cited_sentences, format_references, strip_citations

# --------------------------------------------------------------------------- prompts (§3, §5)

# §3, verbatim; the paper also gives the model demonstrations, which it does not print: ours are zero-shot.
REASONING_INSTRUCTION = "Please figure out the reasoning process towards the answer step-by-step without other content."
KEY_FACTS_INSTRUCTION = (
    "Please identify 2 to 4 non-redundant key-facts within the reasoning steps which are necessary to derive the "
    "final answer."
)
# §5.1 prints "Please write a high-quality answer ..." and elides the rest; the words after "answer" are ours.
ANSWER_INSTRUCTION = (
    "Please write a high-quality answer for the given question using only the provided references, and cite "
    "them properly using [1][2][3]."
)
CLOSED_BOOK_INSTRUCTION = "Please write a high-quality answer for the given question."  # ours: no references to cite
REFUSAL = "I'm sorry, I cannot answer the question based on the provided references"  # §5.1, verbatim
REFLECTION_INSTRUCTION = (  # §5.1: the answer instruction, then the refusal clause verbatim
    ANSWER_INSTRUCTION + f' If the references are insufficient to answer the question, respond with "{REFUSAL}".'
)
QUERY_MARKER = "I further need to ask the search engine:"  # §5.2, verbatim
COMPLETION_INSTRUCTION = (  # §5.2, verbatim
    f'Given the insufficiency of the current references, please start your query with "{QUERY_MARKER}" '
    "to gather more information."
)
KEY_FACTS_VERSION = 1
# Where a notebook's key facts come from. "hand": written for the 100 shared HotpotQA questions following §3
# (atomic, paraphrased, one per reasoning step, reviewed twice), shipped in covlib/resources; the default.
# "supporting": HotpotQA's gold supporting sentences, verbatim sentences of the gold references (copying the
# references scores best on them: a labelled option). "llm": the paper's two prompts with any covlib model.
SOURCES = ("hand", "supporting", "llm")
DEFAULT_KEY_FACTS = "hand"
HAND_KEY_FACTS = "key_facts_hand-v1.jsonl"  # in paths.resources_dir()
HAND_REVIEW_SHEET = "key_facts_hand-review.csv"


def _prompt(question: str, refs: Sequence[Paragraph | Passage] | None, instruction: str, extra: str = "") -> str:
    """The paper's '[Question], [References]. <instruction>' layout; `extra` goes before the instruction."""
    parts = [f"Question: {question}"]
    if refs:
        parts.append("References:\n" + format_references(refs))
    if extra:
        parts.append(extra)
    parts.append(instruction)
    return "\n\n".join(parts)


def answer_prompt(question: str, refs: Sequence[Paragraph | Passage], reflection: bool = False) -> str:
    """The cited-answer prompt over numbered references (closed-book wording when there are none)."""
    if not refs:
        return _prompt(question, None, CLOSED_BOOK_INSTRUCTION)
    return _prompt(question, refs, REFLECTION_INSTRUCTION if reflection else ANSWER_INSTRUCTION)


def reasoning_prompt(question: str, refs: Sequence[Paragraph | Passage], answer: str) -> str:
    """Step reasoning (§3): question, references and validated answer, then the paper's instruction."""
    return _prompt(question, refs, REASONING_INSTRUCTION, extra=f"Answer: {answer}")


def key_facts_prompt(question: str, reasoning: str, answer: str) -> str:
    """Key-fact extraction (§3): question, reasoning steps and answer, then the paper's instruction."""
    return "\n\n".join([f"Question: {question}", f"Reasoning steps:\n{reasoning.strip()}", f"Answer: {answer}",
                        KEY_FACTS_INSTRUCTION])


def completion_prompt(question: str, refs: Sequence[Paragraph | Passage]) -> str:
    """Self-completion (§5.2): question and references, then the paper's request for a search query."""
    return _prompt(question, refs, COMPLETION_INSTRUCTION)


# --------------------------------------------------------------------------- questions, models, the paper's numbers

# Hub ids of the paper's open models (§6; the paper names no checkpoints: these are our picks). ChatGPT has none.
PAPER_MODELS = {
    "LLaMA-7B": "huggyllama/llama-7b",
    "LLaMA-13B": "huggyllama/llama-13b",
    "Llama2-13B": "meta-llama/Llama-2-13b-hf",
    "ChatGLM2-6B": "THUDM/chatglm2-6b",
    "Vicuna-7B": "lmsys/vicuna-7b-v1.3",
    "Vicuna-13B": "lmsys/vicuna-13b-v1.3",
    "Llama2-chat-13B": "meta-llama/Llama-2-13b-chat-hf",
}
# The paper's tables in % (typed from ../shared/papers/headline-numbers.md, checked against the paper's text).
PAPER_TABLE1 = {  # model: (P, R, F1, SC, CitP, CitR); 5 references incl. both gold, TRUE as f
    "LLaMA-7B": (6.12, 22.96, 9.54, 36.42, 1.94, 3.0), "LLaMA-13B": (5.45, 16.33, 8.17, 51.98, 3.63, 6.2),
    "Llama2-13B": (5.70, 10.12, 7.60, 62.74, 6.17, 7.6), "ChatGLM2-6B": (66.85, 48.06, 55.45, 48.99, 3.36, 2.4),
    "Vicuna-7B": (47.04, 45.96, 46.48, 61.45, 11.99, 11.4), "Vicuna-13B": (53.00, 48.69, 50.78, 68.66, 21.77, 25.7),
    "Llama2-chat-13B": (57.13, 47.97, 52.23, 62.61, 19.79, 15.3), "ChatGPT": (85.40, 56.55, 68.22, 68.68, 90.99, 64.6),
}
PAPER_TABLE2 = {  # model: (P, R, EM-recall, human precision, human recall) on 50 questions
    "ChatGLM2-6B": (66.8, 48.0, 62.2, 60.8, 57.0), "Vicuna-7B": (47.0, 45.9, 67.6, 55.0, 43.5),
    "Vicuna-13B": (53.0, 48.6, 68.4, 64.0, 50.5), "Llama2-chat-13B": (57.1, 47.9, 69.8, 65.1, 41.5),
    "ChatGPT": (85.4, 56.5, 79.4, 78.4, 70.0),
}
PAPER_PEARSON = {"P": 0.87, "R": 0.88, "EM_recall": 0.54}
PAPER_RECALL_DROP_5_TO_10 = {"ChatGPT": 4.3, "ChatGLM2-6B": 14.3, "LLaMA": 30.0, "Vicuna": 30.0}  # relative %, §6.3
PAPER_TABLE3 = {  # model: {setting: (P, R)}
    "ChatGLM2-6B": {"closed-book": (17.59, 13.72), "partial": (39.98, 25.87), "complete": (66.85, 48.06)},
    "Vicuna-7B": {"closed-book": (12.20, 15.51), "partial": (31.57, 34.95), "complete": (47.04, 45.96)},
    "Vicuna-13B": {"closed-book": (19.48, 21.58), "partial": (51.96, 44.80), "complete": (53.00, 48.69)},
    "Llama2-chat-13B": {"closed-book": (18.23, 26.83), "partial": (44.39, 34.37), "complete": (57.13, 47.97)},
    "ChatGPT": {"closed-book": (21.44, 39.17), "partial": (61.37, 35.34), "complete": (85.40, 56.55)},
}
PAPER_TABLE4 = {  # model: (BM25 P, R, F1, self-completion P, R, F1, reflection Acc, reflection F1)
    "LLaMA-7B": (3.81, 10.83, 5.85, 3.51, 10.53, 5.36, 51.2, 11.3),
    "LLaMA-13B": (4.63, 15.00, 7.11, 4.42, 15.73, 6.81, 51.8, 20.7),
    "Llama2-13B": (7.17, 13.83, 9.53, 5.54, 12.17, 7.68, 50.0, 8.9),
    "ChatGLM2-6B": (29.33, 22.93, 25.84, 34.47, 27.07, 30.41, 57.6, 61.2),
    "Vicuna-7B": (10.73, 13.33, 11.92, 13.66, 13.37, 13.51, 51.4, 44.5),
    "Vicuna-13B": (27.89, 19.33, 23.08, 22.52, 20.03, 21.19, 55.2, 61.0),
    "Llama2-chat-13B": (33.86, 24.33, 28.45, 32.67, 21.21, 25.76, 60.2, 67.1),
    "ChatGPT": (50.9, 36.65, 42.66, 57.65, 41.27, 48.18, 70.2, 77.2),
}


def model_list(model: str = "", models: str = "", profile: str = "cpu") -> list[str]:
    """The models a notebook compares: `models` (comma-separated), else `model`; the paper's open models when
    neither is given in the full profile (a GPU box with the hub), else the embedded model ('')."""
    listed = [m.strip() for m in models.split(",") if m.strip()]
    if listed:
        return listed
    if model:
        return [model]
    return list(PAPER_MODELS.values()) if profile == "full" else [""]


def load_questions(source: str = "", n: int = 500, seed: int = 0) -> list[Example]:
    """HotpotQA distractor questions: the shared 100-question sample (source ''), a file, or a hub id
    (then a seeded sample of `n` validation questions, as the paper's 500)."""
    examples = load_hotpotqa(source or None)
    if len(examples) > n:
        examples = random.Random(seed).sample(examples, n)
    return examples


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


def supporting_key_facts(examples: Sequence[Example]) -> list[KeyFacts]:
    """The gold supporting sentences as key facts (an option; the default is the hand-written facts, `DEFAULT_KEY_FACTS`)."""
    out = []
    for ex in examples:
        by_title = {p.title: p for p in ex.paragraphs}
        facts = []
        for title, idx in ex.supporting_facts:
            para = by_title.get(title)
            if para is not None and 0 <= idx < len(para.sentences) and para.sentences[idx].strip():
                facts.append(para.sentences[idx].strip())
        if not facts:
            raise DataError(ex.id, "no supporting sentence could be found among the example's paragraphs")
        out.append(KeyFacts(ex.id, ex.question, ex.answer, list(dict.fromkeys(facts)), "supporting",
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


def llm_key_facts(generator: Generator, examples: Sequence[Example], max_new_tokens: int = 256,
                  progress: bool = True) -> list[KeyFacts]:
    """The paper's two-step construction with any LM: reasoning steps, then 2-4 key facts (greedy, chat)."""
    gold = [[p for p in ex.paragraphs if p.is_supporting] or ex.paragraphs for ex in examples]
    steps = generator.generate([reasoning_prompt(ex.question, refs, ex.answer) for ex, refs in zip(examples, gold)],
                               max_new_tokens=max_new_tokens, chat=True, progress=progress, desc="reasoning steps")
    reasoning = [c[0].text.strip() for c in steps]
    facts = generator.generate([key_facts_prompt(ex.question, r, ex.answer) for ex, r in zip(examples, reasoning)],
                               max_new_tokens=max_new_tokens, chat=True, progress=progress, desc="key facts")
    author = getattr(generator, "name", type(generator).__name__)
    return [KeyFacts(ex.id, ex.question, ex.answer, parse_key_facts(c[0].text), "llm", author, r)
            for ex, r, c in zip(examples, reasoning, facts)]


def key_facts_path(source: str) -> Path:
    """Where a key-fact source is stored: the shipped file for 'hand', else build/key_facts/<source>-v<version>.jsonl."""
    if source == "hand":
        return paths.resources_dir() / HAND_KEY_FACTS
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
                    rebuild: bool = False, **kw: Any) -> list[KeyFacts]:
    """Key facts from `source` for `examples`, read from build/key_facts/ when stored there for the same questions
    (and, for 'llm', by the same generator, which only that source uses)."""
    if source == "llm" and generator is None:
        raise ValueError("key-fact source 'llm' needs a generator")
    if source not in SOURCES and not source.endswith("+reviewed"):
        raise ValueError(f"unknown key-fact source {source!r}; choose one of {SOURCES} (or a reviewed set)")
    path = key_facts_path(source)
    stored = {r.question_id: r for r in load_key_facts(path)} if path.exists() and not rebuild else {}
    missing = [ex for ex in examples if ex.id not in stored
               or (source == "llm" and stored[ex.id].author != generator.name)]
    if missing:
        if source == "hand":
            raise ValueError(f"{len(missing)} question(s) have no hand-written key facts in {path} (e.g. "
                             f"{missing[0].id!r}): they cover the 100 shared HotpotQA questions only; use "
                             f"key_facts='llm' (then review it) for other questions")
        if source.endswith("+reviewed"):
            raise FileNotFoundError(f"{len(missing)} question(s) have no reviewed key facts at {path} "
                                    f"(e.g. {missing[0].id!r}): read a review sheet first")
        new = supporting_key_facts(missing) if source == "supporting" else llm_key_facts(generator, missing, **kw)
        stored.update({r.question_id: r for r in new})
        save_key_facts(list(stored.values()), path)  # kept beside the questions built before
    return [stored[ex.id] for ex in examples]


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


# --------------------------------------------------------------------------- reference sets (§6)


@dataclass(frozen=True)
class ReferenceSet:
    """The numbered references one prompt shows; `gold` are the 1-based positions of gold paragraphs."""

    question_id: str
    kind: str
    paragraphs: tuple[Paragraph | Passage, ...]
    gold: tuple[int, ...]

    def __len__(self) -> int:
        return len(self.paragraphs)


def _rng(seed: int, *parts: Any) -> random.Random:
    digest = hashlib.sha256("\x00".join(map(str, (seed, *parts))).encode("utf-8")).digest()
    return random.Random(int.from_bytes(digest[:8], "little"))


def _gold_and_distractors(ex: Example, seed: int) -> tuple[list[Paragraph], list[Paragraph]]:
    titles = set(ex.supporting_titles)
    gold = [p for p in ex.paragraphs if p.title in titles]
    if len(gold) < 2:
        raise DataError(ex.id, f"needs at least 2 gold paragraphs in its context, found {len(gold)}")
    distractors = [p for p in ex.paragraphs if p.title not in titles]
    _rng(seed, ex.id, "distractors").shuffle(distractors)  # one order per question: noise sets are nested
    return gold, distractors


def _arrange(ex: Example, kind: str, chosen: list[Paragraph], gold_titles: set[str], seed: int) -> ReferenceSet:
    order = list(chosen)
    _rng(seed, ex.id, "order", len(order)).shuffle(order)  # not keyed by kind: with_gold(5) == noise k=3
    return ReferenceSet(ex.id, kind, tuple(order), tuple(i for i, p in enumerate(order, 1) if p.title in gold_titles))


def with_gold(ex: Example, n_refs: int, seed: int = 0, kind: str = "complete") -> ReferenceSet:
    """All gold paragraphs plus distractors up to `n_refs`, in a seeded order (2 gold + k noise when n = 2 + k)."""
    gold, distractors = _gold_and_distractors(ex, seed)
    if not len(gold) <= n_refs <= len(gold) + len(distractors):
        raise ValueError(f"{ex.id}: n_refs={n_refs} must lie in [{len(gold)}, {len(gold) + len(distractors)}]")
    chosen = gold + distractors[: n_refs - len(gold)]
    return _arrange(ex, kind, chosen, {p.title for p in gold}, seed)


def partial(ex: Example, n_refs: int = 5, seed: int = 0) -> ReferenceSet:
    """One gold paragraph (seeded choice) dropped and replaced by a distractor; `n_refs` references in all."""
    gold, distractors = _gold_and_distractors(ex, seed)
    dropped = _rng(seed, ex.id, "dropped").randrange(len(gold))
    kept = [g for i, g in enumerate(gold) if i != dropped]
    if not len(kept) <= n_refs <= len(kept) + len(distractors):
        raise ValueError(f"{ex.id}: n_refs={n_refs} must lie in [{len(kept)}, {len(kept) + len(distractors)}]")
    chosen = kept + distractors[: n_refs - len(kept)]
    return _arrange(ex, "partial", chosen, {p.title for p in gold}, seed)


def closed_book(ex: Example) -> ReferenceSet:
    """No references at all."""
    return ReferenceSet(ex.id, "closed-book", (), ())


def hits_set(ex: Example, kind: str, passages: Sequence[Passage | Paragraph]) -> ReferenceSet:
    """A reference set from retrieved passages; gold positions are those whose title is a supporting title."""
    titles = set(ex.supporting_titles)
    return ReferenceSet(ex.id, kind, tuple(passages), tuple(i for i, p in enumerate(passages, 1) if p.title in titles))


def bm25_references(retriever: Any, examples: Sequence[Example], k: int = 10) -> list[ReferenceSet]:
    """The top-k passages for each original question (Table 4's baseline), one batched search."""
    hits = retriever.search_batch([ex.question for ex in examples], k=k)
    return [hits_set(ex, "bm25", [h.passage for h in hs]) for ex, hs in zip(examples, hits)]


# --------------------------------------------------------------------------- answers


def generate_answers(generator: Generator, examples: Sequence[Example], ref_sets: Sequence[ReferenceSet],
                     reflection: bool = False, max_new_tokens: int = 160, progress: bool = True,
                     desc: str = "answers") -> list[str]:
    """One greedy cited answer per (question, reference set), through the chat template, in one batched call."""
    if len(examples) != len(ref_sets):
        raise ValueError(f"{len(examples)} questions but {len(ref_sets)} reference sets")
    for ex, refs in zip(examples, ref_sets):
        if ex.id != refs.question_id:
            raise ValueError(f"reference set of {refs.question_id!r} given for question {ex.id!r}")
    prompts = [answer_prompt(ex.question, refs.paragraphs, reflection) for ex, refs in zip(examples, ref_sets)]
    out = generator.generate(prompts, max_new_tokens=max_new_tokens, chat=True, progress=progress, desc=desc)
    return [c[0].text.strip() for c in out]


Run = tuple[list[str], list[ReferenceSet]]  # answers and the reference sets they were written from


def answer_runs(generators: Sequence[Generator], examples: Sequence[Example], sets: dict[str, list[ReferenceSet]],
                max_new_tokens: int = 160, progress: bool = True) -> dict[tuple[str, str], Run]:
    """Answers for every (model, setting): one batched generate call per model over all settings."""
    settings = list(sets)
    flat_sets = [r for s in settings for r in sets[s]]
    q = len(examples)
    out = {}
    for g in generators:
        answers = generate_answers(g, list(examples) * len(settings), flat_sets, max_new_tokens=max_new_tokens,
                                   progress=progress, desc=g.name)
        for j, s in enumerate(settings):
            out[(g.name, s)] = (answers[j * q:(j + 1) * q], sets[s])
    return out


def score_runs(runs: dict[tuple[str, str], Run], examples: Sequence[Example], facts: Sequence[KeyFacts],
               judge: nli.Judge | str | None = None, progress: bool = True) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Per-answer metrics for every run at once: three NLI calls in all (see `score_answers`)."""
    keys, q = list(runs), len(examples)
    for key in keys:
        if len(runs[key][0]) != q or len(runs[key][1]) != q:
            raise ValueError(f"run {key} has {len(runs[key][0])} answers for {q} questions")
    rows = score_answers([a for k in keys for a in runs[k][0]], [r for k in keys for r in runs[k][1]],
                         list(facts) * len(keys), [ex.answers for ex in examples] * len(keys), judge, progress)
    return {k: rows[i * q:(i + 1) * q] for i, k in enumerate(keys)}


# --------------------------------------------------------------------------- metrics (§4)


def citation_scores(cited: Sequence[int], gold: Sequence[int], n_refs: int) -> dict[str, float]:
    """Citation precision |Cm∩Cg|/|Cm| (0 when nothing is cited) and recall |Cm∩Cg|/|Cg| (NaN without gold refs).

    Cm is the union of cited ids, invalid ones included (they lower precision); `invalid` counts
    the distinct cited ids outside 1..n_refs.
    """
    cm, cg = set(cited), set(gold)
    hit = len(cm & cg)
    return {
        "cit_precision": hit / len(cm) if cm else 0.0,
        "cit_recall": hit / len(cg) if cg else float("nan"),
        "invalid_citations": float(sum(1 for i in cm if not 1 <= i <= n_refs)),
    }


def f1(p: float, r: float) -> float:
    """Harmonic mean of two rates (0 when both are 0)."""
    return 2 * p * r / (p + r) if p + r > 0 else 0.0


def plain_answer(answer: str) -> str:
    """The answer as key-fact recall reads it: its sentences without citation marks."""
    return " ".join(s.text for s in cited_sentences(answer)) or strip_citations(answer)


def score_answers(answers: Sequence[str], ref_sets: Sequence[ReferenceSet], key_facts: Sequence[KeyFacts],
                  golds: Sequence[Sequence[str]], judge: nli.Judge | str | None = None,
                  progress: bool = True) -> list[dict[str, Any]]:
    """Per-answer metrics of §4 with three batched, cached NLI calls (one per metric).

    - key-fact recall R = (1/|K|) Σ_k f(answer, k): premise the whole answer (citations
      stripped), hypothesis each key fact;
    - key-fact precision P = (1/|S|) Σ_s [∃k f(s, k)]: premise the answer sentence s,
      hypothesis each key fact (0 for an answer with no sentence; R and P are NaN, left out
      of the means, for a question with no key fact);
    - self-consistency SC = (1/n) Σ_i f(concat(refs cited by s_i), s_i): premise the
      concatenated cited references as the model saw them ('Title: text', as ALCE judges),
      hypothesis the sentence; `sc_cited` averages over
      sentences with a citation (NaN when none has one), `sc_all` over all sentences
      (an uncited sentence, or one citing only missing references, scores 0);
    - citation precision / recall (`citation_scores`) and EM-recall (a gold answer string
      contained in the answer as whole words, citation marks stripped first).

    f is the judge's own decision (`nli.entailed`: argmax, P > 0.5 for a two-label judge, or the
    judge's calibrated threshold when it has one).
    """
    n = len(answers)
    if not n == len(ref_sets) == len(key_facts) == len(golds):
        raise ValueError(f"{n} answers, {len(ref_sets)} reference sets, {len(key_facts)} key-fact records, "
                         f"{len(golds)} gold answer lists: they must line up")
    for refs, kf in zip(ref_sets, key_facts):
        if refs.question_id != kf.question_id:
            raise ValueError(f"reference set of {refs.question_id!r} lined up with key facts of {kf.question_id!r}")
    judge = nli.get_judge(judge)
    sentences: list[list[CitedSentence]] = [cited_sentences(a) for a in answers]
    plain = [plain_answer(a) for a in answers]
    # 1. recall: (answer, key fact)
    rec_pairs = [(i, plain[i], k) for i in range(n) if plain[i].strip() for k in key_facts[i].key_facts]
    # 2. precision: (sentence, key fact)
    pre_pairs = [(i, j, s.text, k) for i in range(n) for j, s in enumerate(sentences[i]) for k in key_facts[i].key_facts]
    # 3. self-consistency: (concat cited refs, sentence)
    sc_pairs = []
    for i, (ss, refs) in enumerate(zip(sentences, ref_sets)):
        for j, s in enumerate(ss):
            cited = [refs.paragraphs[c - 1] for c in s.citations if 1 <= c <= len(refs)]
            if cited:
                sc_pairs.append((i, j, " ".join(passage_string(p) for p in cited), s.text))  # 'Title: text', as shown
    rec = nli.entailed(nli.probabilities([p[1] for p in rec_pairs], [p[2] for p in rec_pairs], judge, progress), judge)
    pre = nli.entailed(nli.probabilities([p[2] for p in pre_pairs], [p[3] for p in pre_pairs], judge, progress), judge)
    sc = nli.entailed(nli.probabilities([p[2] for p in sc_pairs], [p[3] for p in sc_pairs], judge, progress), judge)
    rec_by: dict[int, list[float]] = {}
    for (i, *_), v in zip(rec_pairs, rec):
        rec_by.setdefault(i, []).append(v)
    sent_hit: dict[tuple[int, int], float] = {}
    for (i, j, *_), v in zip(pre_pairs, pre):
        sent_hit[(i, j)] = max(sent_hit.get((i, j), 0.0), v)
    sc_hit = {(i, j): v for (i, j, *_), v in zip(sc_pairs, sc)}
    rows = []
    for i in range(n):
        ss, refs = sentences[i], ref_sets[i]
        n_s, cited_n = len(ss), sum(1 for s in ss if s.citations)
        if key_facts[i].key_facts:
            recall = float(np.mean(rec_by.get(i, [0.0])))
            precision = sum(sent_hit.get((i, j), 0.0) for j in range(n_s)) / n_s if n_s else 0.0
        else:  # nothing to recall (an LLM list that parsed to nothing): left out of the means
            recall = precision = float("nan")
        sc_sum = sum(sc_hit.get((i, j), 0.0) for j in range(n_s))
        rows.append({
            "question_id": refs.question_id,
            "recall": recall,
            "precision": precision,
            "f1": f1(precision, recall) if key_facts[i].key_facts else float("nan"),
            "sc_cited": sc_sum / cited_n if cited_n else float("nan"),
            "sc_all": sc_sum / n_s if n_s else 0.0,
            **citation_scores(cited_ids(ss), refs.gold, len(refs)),
            "em_recall": accuracy_contains(strip_citations(answers[i]), golds[i]),
            "n_sentences": n_s,
            "n_cited_sentences": cited_n,
            "n_key_facts": len(key_facts[i].key_facts),
            "judge": judge.name,
        })
    return rows


def _nanmean(values: Sequence[float]) -> float:
    v = np.asarray(values, dtype=float)
    return float(np.nanmean(v)) if np.isfinite(v).any() else float("nan")


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Means in % over questions: P, R, F1 two ways, SC two ways, citation P/R, EM-recall; and counts.

    `f1_mean` is the mean of per-question F1, `f1_of_means` the F1 of mean P and mean R
    (the paper's Table 1 matches neither exactly; both are shown).
    """
    if not rows:
        raise ValueError("nothing to summarize")
    m = {k: 100 * _nanmean([r[k] for r in rows]) for k in
         ("precision", "recall", "f1", "sc_cited", "sc_all", "cit_precision", "cit_recall", "em_recall")}
    return {
        "P": m["precision"], "R": m["recall"], "F1_mean": m["f1"], "F1_of_means": f1(m["precision"], m["recall"]),
        "SC_cited": m["sc_cited"], "SC_all": m["sc_all"], "CitP": m["cit_precision"], "CitR": m["cit_recall"],
        "EM_recall": m["em_recall"], "n": len(rows),
        "invalid_citations": int(sum(r["invalid_citations"] for r in rows)),
        "mean_sentences": float(np.mean([r["n_sentences"] for r in rows])),
        "judge": rows[0]["judge"],
    }


# --------------------------------------------------------------------------- intervals (every number with n and a 95% CI)

# Summary name (`summarize`) -> per-question row key (`score_answers`).
ROW_KEYS = {"P": "precision", "R": "recall", "F1_mean": "f1", "SC_cited": "sc_cited", "SC_all": "sc_all",
            "CitP": "cit_precision", "CitR": "cit_recall", "EM_recall": "em_recall"}


def per_question(rows: Sequence[dict[str, Any]], metric: str) -> np.ndarray:
    """One metric's per-question values (a summary name such as 'R', or a row key such as 'recall'), NaN kept."""
    key = ROW_KEYS.get(metric, metric)
    return np.array([float(r[key]) for r in rows], dtype=float)


def intervals(rows: Sequence[dict[str, Any]], seed: int = 0) -> dict[str, dict[str, float]]:
    """Every mean `summarize` reports, in %, with its 95% bootstrap interval over questions and n.

    Each is `metrics.mean_interval` of the per-question values (NaN left out, as in the means);
    F1_of_means, the F1 of mean P and mean R, resamples questions with `metrics.bootstrap`.
    The values equal `summarize`'s.
    """
    if not rows:
        raise ValueError("no rows to put intervals on")
    out = {name: metrics.mean_interval(per_question(rows, name), scale=100, seed=seed) for name in ROW_KEYS}
    p, r = per_question(rows, "P"), per_question(rows, "R")
    keep = np.isfinite(p) & np.isfinite(r)
    if keep.any():
        out["F1_of_means"] = metrics.bootstrap(lambda a, b: 100 * f1(float(a.mean()), float(b.mean())), p[keep], r[keep],
                                               seed=seed)
    else:
        out["F1_of_means"] = metrics.mean_interval([])
    return out


def _aligned(rows_a: Sequence[dict[str, Any]], rows_b: Sequence[dict[str, Any]]) -> None:
    ids_a, ids_b = [r["question_id"] for r in rows_a], [r["question_id"] for r in rows_b]
    if ids_a != ids_b:
        raise ValueError("a paired difference needs the same questions in the same order "
                         f"({len(ids_a)} vs {len(ids_b)} rows)")


def paired(rows_a: Sequence[dict[str, Any]], rows_b: Sequence[dict[str, Any]], metric: str,
           seed: int = 0) -> dict[str, float]:
    """mean(a − b) of one metric in % over the same questions, with a paired 95% bootstrap interval."""
    _aligned(rows_a, rows_b)
    return metrics.paired_difference(per_question(rows_a, metric), per_question(rows_b, metric), scale=100, seed=seed)


def recall_drop(rows_few: Sequence[dict[str, Any]], rows_many: Sequence[dict[str, Any]],
                seed: int = 0) -> dict[str, dict[str, float]]:
    """Key-fact recall lost from fewer to more references, paired over questions, each with a 95% interval:
    `absolute` R(few) − R(many) in points, `relative` 100·(R(few) − R(many)) / R(few) in % of R(few)."""
    _aligned(rows_few, rows_many)
    a, b = per_question(rows_few, "R"), per_question(rows_many, "R")
    keep = np.isfinite(a) & np.isfinite(b)

    def relative(x: np.ndarray, y: np.ndarray) -> float:
        return 100 * float(x.mean() - y.mean()) / float(x.mean()) if x.mean() > 0 else float("nan")

    rel = (metrics.bootstrap(relative, a[keep], b[keep], seed=seed) if keep.any()
           else metrics.mean_interval([]))
    return {"absolute": metrics.paired_difference(a, b, scale=100, seed=seed), "relative": rel}


def _refusal_f1(refused: np.ndarray, insufficient: np.ndarray) -> float:
    tp = float(np.sum(refused * insufficient))
    denominator = float(refused.sum() + insufficient.sum())
    return 100 * 2 * tp / denominator if denominator else 0.0


def reflection_intervals(refused: Sequence[bool], insufficient: Sequence[bool], seed: int = 0) -> dict[str, dict[str, float]]:
    """Self-reflection accuracy and F1 (%, refusal the positive class), each with its 95% bootstrap interval
    over questions; the values equal `reflection_scores`'."""
    p, y = np.asarray(refused, dtype=float), np.asarray(insufficient, dtype=float)
    if p.size != y.size or not p.size:
        raise ValueError(f"{p.size} decisions against {y.size} labels")
    return {"accuracy": metrics.mean_interval(reflection_correct(refused, insufficient), scale=100, seed=seed),
            "f1": metrics.bootstrap(_refusal_f1, p, y, seed=seed)}


def reflection_correct(refused: Sequence[bool], insufficient: Sequence[bool]) -> list[float]:
    """Per question 1.0 where the model refused exactly when its references were partial, else 0.0."""
    if len(refused) != len(insufficient):
        raise ValueError(f"{len(refused)} decisions against {len(insufficient)} labels")
    return [float(bool(r) == bool(i)) for r, i in zip(refused, insufficient)]


def gold_recall(titles: Sequence[Sequence[str]], gold: Sequence[Sequence[str]], seed: int = 0) -> dict[str, dict[str, float]]:
    """Gold-paragraph recall of reference lists (or top-k rankings), by title, in %, with 95% intervals over questions:
    `recall` the mean share of each question's gold titles found (`metrics.recall_at_k` at k = the list's length),
    `all` the share of questions with every gold title found (`metrics.all_recall_at_k`). Questions without gold
    titles are left out."""
    if len(titles) != len(gold):
        raise ValueError(f"{len(titles)} reference lists for {len(gold)} gold lists")
    pairs = [(set(t), set(g)) for t, g in zip(titles, gold) if g]
    share = [len(t & g) / len(g) for t, g in pairs]
    return {"recall": metrics.mean_interval(share, scale=100, seed=seed),
            "all": metrics.mean_interval([float(g <= t) for t, g in pairs], scale=100, seed=seed)}


def _pearson_or_nan(x: np.ndarray, y: np.ndarray) -> float:
    if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])


def human_correlation_intervals(auto: dict[str, dict[str, float]], human: dict[str, dict[str, float]],
                                seed: int = 0) -> dict[str, dict[str, float]]:
    """Table 2's Pearson correlations across models with 95% bootstrap intervals over models (`metrics.bootstrap`;
    resamples whose correlation is undefined are left out): P vs human precision, R and EM-recall vs human
    recall, and `P_minus_EM_recall` = r(P, HPrec) − r(EM-recall, HRec), the claim that key-fact precision
    tracks people better than EM-recall. Needs at least 3 rated models (ValueError otherwise)."""
    models = sorted(set(auto) & set(human))
    if len(models) < 3:
        raise ValueError(f"a correlation across models needs at least 3 rated models, got {models}")
    cols = {k: np.array([auto[m][k] for m in models], dtype=float) for k in ("P", "R", "EM_recall")}
    cols.update({k: np.array([human[m][k] for m in models], dtype=float) for k in ("HPrec", "HRec")})
    pairs = {"P": ("P", "HPrec"), "R": ("R", "HRec"), "EM_recall": ("EM_recall", "HRec")}
    out = {name: metrics.bootstrap(_pearson_or_nan, cols[a], cols[b], seed=seed) for name, (a, b) in pairs.items()}
    out["P_minus_EM_recall"] = metrics.bootstrap(
        lambda p, hp, em, hr: _pearson_or_nan(p, hp) - _pearson_or_nan(em, hr),
        cols["P"], cols["HPrec"], cols["EM_recall"], cols["HRec"], seed=seed)
    return out


def interval_columns(est: dict[str, dict[str, float]], labels: dict[str, str], digits: int = 1) -> dict[str, Any]:
    """Table columns for interval dicts: per `labels` entry {name: label}, `label` (the value) and
    `label 95% CI` ('41.7 [29.0, 54.3]', `metrics.format_interval`)."""
    out: dict[str, Any] = {}
    for name, label in labels.items():
        out[label] = est[name]["value"]
        out[f"{label} 95% CI"] = metrics.format_interval(est[name], digits)
    return out


# --------------------------------------------------------------------------- self-reflection (§5.1)

_REFUSAL_MARKERS = (normalize_answer("cannot answer the question"), normalize_answer("can't answer the question"),
                    normalize_answer("unable to answer the question"), normalize_answer("references are insufficient"))


def is_refusal(answer: str) -> bool:
    """Whether the answer declines as the reflection prompt asks ("I'm sorry, I cannot answer the question ...")."""
    text = normalize_answer(answer or "")
    return any(m in text for m in _REFUSAL_MARKERS)


def reflection_sets(examples: Sequence[Example], n_refs: int = 5, seed: int = 0) -> list[ReferenceSet]:
    """Half the questions (seeded) get complete references, half partial ones: equal groups, as §6.4 says."""
    order = list(range(len(examples)))
    _rng(seed, "reflection-groups").shuffle(order)
    partial_ids = set(order[: len(examples) // 2])
    return [partial(ex, n_refs, seed) if i in partial_ids else with_gold(ex, n_refs, seed)
            for i, ex in enumerate(examples)]


def reflection_scores(refused: Sequence[bool], insufficient: Sequence[bool]) -> dict[str, float]:
    """Accuracy and F1 (%) of refusing exactly when the references are partial; refusal is the positive class."""
    from sklearn.metrics import accuracy_score, f1_score, precision_score, recall_score

    y, p = [bool(x) for x in insufficient], [bool(x) for x in refused]
    if len(y) != len(p) or not y:
        raise ValueError(f"{len(p)} decisions against {len(y)} labels")
    return {"accuracy": 100 * accuracy_score(y, p), "f1": 100 * f1_score(y, p, zero_division=0),
            "precision": 100 * precision_score(y, p, zero_division=0),
            "recall": 100 * recall_score(y, p, zero_division=0), "refusal_rate": 100 * float(np.mean(p)), "n": len(y)}


# --------------------------------------------------------------------------- self-completion (§5.2)


def _clean_query(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line.strip().strip("\"'“”*").strip()


def parse_queries(text: str, limit: int = 3) -> tuple[list[str], bool]:
    """(queries, whether the marker was used): the text after each "I further need to ask the search engine:",
    or, when the model left the marker out, its first line (a model that ignores the format still gets a search)."""
    parts = re.split(re.escape(QUERY_MARKER), text or "", flags=re.IGNORECASE)
    marked = len(parts) > 1
    found = [_clean_query(p) for p in (parts[1:] if marked else parts[:1])]
    return list(dict.fromkeys(q for q in found if re.search(r"\w", q)))[:limit], marked


@dataclass
class Completed:
    """One question through the improved pipeline: the references it ended with, the queries asked, per round."""

    question_id: str
    references: ReferenceSet
    answer: str
    queries: list[list[str]] = field(default_factory=list)
    reflected_answer: str = ""
    refused: bool = False
    rounds: int = 0  # completion rounds used: 0 answered at once, max_rounds reached the cap
    unmarked: int = 0  # rounds whose reply lacked the query marker (its first line was searched instead)


COMPLETION_ROUNDS = 3  # default cap on self-completion rounds (ours: §5.2 iterates until the model is satisfied, no cap given)


def self_complete(generator: Generator, examples: Sequence[Example], retriever: Any, k_initial: int = 5,
                  cap: int = 10, max_rounds: int = COMPLETION_ROUNDS, max_new_tokens: int = 160,
                  progress: bool = True) -> list[Completed]:
    """Self-completion (§5.2), iterated "until the LLM believes that it possesses a comprehensive set of knowledge".

    The model reflects on BM25's top `k_initial` references for the question. Where it refuses,
    a round asks it for search queries (prompt-completion), adds their passages and asks again,
    still free to refuse; rounds repeat while it refuses, at most `max_rounds` (>= 1). The last
    allowed round's answer is asked without the refusal clause: at the cap the model must answer.
    `Completed.rounds` is the number of rounds a question used (0: it answered at once).

    References (ours where the paper is silent; it caps every pipeline at 10): each round adds at
    most ceil((cap - k_initial) / max_rounds) new passages from its queries (their rankings
    interleaved), so that later rounds have room; after every round the question's own BM25
    ranking fills the list up to `cap`, and a later round's finds take that filler's place.
    With `max_rounds=1` one round adds up to cap - k_initial passages. One batched generate
    call per step and round over the questions still refusing.
    """
    if not 1 <= k_initial <= cap or max_rounds < 1:
        raise ValueError(f"need 1 <= k_initial <= cap and max_rounds >= 1, got k_initial={k_initial}, cap={cap}, "
                         f"max_rounds={max_rounds}")
    ranked = retriever.search_batch([ex.question for ex in examples], k=cap)
    refs = [hits_set(ex, "self-completion", [h.passage for h in hs[:k_initial]]) for ex, hs in zip(examples, ranked)]
    records = [Completed(ex.id, r, "") for ex, r in zip(examples, refs)]
    answers = generate_answers(generator, examples, refs, reflection=True, max_new_tokens=max_new_tokens,
                               progress=progress, desc="reflect")
    for rec, a in zip(records, answers):
        rec.answer = rec.reflected_answer = a
        rec.refused = is_refusal(a)
    todo = [i for i, rec in enumerate(records) if rec.refused]
    budget = -(-(cap - k_initial) // max_rounds)  # new passages a round may add
    found_by: dict[int, list[Any]] = {i: [] for i in todo}  # what the queries brought, in round order
    for round_ in range(1, max_rounds + 1):
        if not todo:
            break
        asked = generator.generate([completion_prompt(examples[i].question, records[i].references.paragraphs)
                                    for i in todo], max_new_tokens=64, chat=True, progress=progress,
                                   desc=f"queries (round {round_})")
        parsed = {i: parse_queries(c[0].text) for i, c in zip(todo, asked)}
        queries = {i: q for i, (q, _) in parsed.items()}
        flat = [(i, q) for i in todo for q in queries[i]]
        found = retriever.search_batch([q for _, q in flat], k=cap) if flat else []
        by_question: dict[int, list[list[Any]]] = {}
        for (i, _), hs in zip(flat, found):
            by_question.setdefault(i, []).append([h.passage for h in hs])
        for i in todo:
            rec = records[i]
            rec.queries.append(queries[i])
            rec.unmarked += not parsed[i][1]
            rec.rounds = round_
            initial, mine = list(refs[i].paragraphs), found_by[i]
            seen = {getattr(p, "id", None) or p.title for p in initial + mine}
            room = min(budget, cap - len(initial) - len(mine))
            lists = by_question.get(i, [])
            for rank in range(cap):  # interleave the queries' rankings
                for hits in lists:
                    if room > 0 and rank < len(hits) and hits[rank].id not in seen:
                        mine.append(hits[rank]); seen.add(hits[rank].id); room -= 1
            have = initial + mine
            for h in ranked[i]:  # the question's own ranking fills what is left
                if len(have) >= cap:
                    break
                if h.passage.id not in seen:
                    have.append(h.passage); seen.add(h.passage.id)
            rec.references = hits_set(examples[i], "self-completion", have)
        last = round_ == max_rounds
        final = generate_answers(generator, [examples[i] for i in todo], [records[i].references for i in todo],
                                 reflection=not last, max_new_tokens=max_new_tokens, progress=progress,
                                 desc=f"answer (round {round_})")
        for i, a in zip(todo, final):
            records[i].answer = a
        todo = [] if last else [i for i in todo if is_refusal(records[i].answer)]
    return records


# --------------------------------------------------------------------------- human ratings (§6.2, Table 2)

RATING_COLUMNS = ("question_id", "model", "rater", "helpful", "completeness")
COMPLETENESS_LEVELS = (0.0, 0.25, 0.5, 0.75, 1.0)


def export_rating_sheet(rows: Sequence[dict[str, Any]], path: str | Path) -> Path:
    """A rating sheet: per (question, model) the question, the numbered answer sentences and empty rating columns.

    `rows` carry question_id, model, question and answer. Raters fill `rater`, `helpful` (one
    0/1 per numbered sentence, space-separated: is the sentence helpful for answering?) and
    `completeness` (0, 0.25, 0.5, 0.75 or 1: is the answer complete?).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["question_id", "model", "question", "sentences", *RATING_COLUMNS[2:]])
        for r in rows:
            numbered = " ".join(f"({j}) {s.text}" for j, s in enumerate(cited_sentences(r["answer"]), 1))
            w.writerow([r["question_id"], r["model"], r["question"], numbered, "", "", ""])
    return path


def read_ratings(path: str | Path) -> list[dict[str, Any]]:
    """Ratings rows (question_id, model, rater, helpful as a 0-1 share, completeness), every field checked."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no ratings file at {path}")
    out = []
    with path.open(newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        missing = [c for c in RATING_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise DataError(path, f"missing column(s) {missing}; expected {list(RATING_COLUMNS)}", 1)
        for line, row in enumerate(reader, 2):
            if not any((row.get(c) or "").strip() for c in ("helpful", "completeness")):
                continue  # not rated yet
            for c in ("question_id", "model", "rater"):
                if not (row[c] or "").strip():
                    raise DataError(path, "empty", line, c)
            flags = (row["helpful"] or "").replace(",", " ").split()
            if not flags or any(x not in ("0", "1") for x in flags):
                raise DataError(path, f"helpful must be 0/1 flags, one per sentence, not {row['helpful']!r}", line,
                                "helpful")
            try:
                completeness = float(row["completeness"])
            except (TypeError, ValueError):
                completeness = float("nan")
            if completeness not in COMPLETENESS_LEVELS:
                raise DataError(path, f"completeness must be one of {COMPLETENESS_LEVELS}, not {row['completeness']!r}",
                                line, "completeness")
            out.append({"question_id": row["question_id"].strip(), "model": row["model"].strip(),
                        "rater": row["rater"].strip(), "helpful": float(np.mean([int(x) for x in flags])),
                        "completeness": completeness})
    if not out:
        raise DataError(path, "no rated rows")
    return out


def human_scores(ratings: Sequence[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per model: human precision (share of helpful sentences) and recall (completeness) in %, raters then questions averaged."""
    per_q: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in ratings:
        per_q.setdefault((r["model"], r["question_id"]), []).append(r)
    by_model: dict[str, list[tuple[float, float]]] = {}
    for (model, _), rs in per_q.items():
        by_model.setdefault(model, []).append((np.mean([r["helpful"] for r in rs]), np.mean([r["completeness"] for r in rs])))
    return {m: {"HPrec": 100 * float(np.mean([v[0] for v in vs])), "HRec": 100 * float(np.mean([v[1] for v in vs])),
                "n_questions": len(vs)} for m, vs in by_model.items()}


def human_correlation(auto: dict[str, dict[str, float]], human: dict[str, dict[str, float]]) -> dict[str, float]:
    """Pearson r across models (Table 2): P vs human precision, R and EM-recall vs human recall (needs >= 3 models)."""
    models = sorted(set(auto) & set(human))
    if len(models) < 3:
        raise ValueError(f"a correlation across models needs at least 3 rated models, got {models}")
    return {"P": pearson([auto[m]["P"] for m in models], [human[m]["HPrec"] for m in models])[0],
            "R": pearson([auto[m]["R"] for m in models], [human[m]["HRec"] for m in models])[0],
            "EM_recall": pearson([auto[m]["EM_recall"] for m in models], [human[m]["HRec"] for m in models])[0],
            "n_models": len(models)}
