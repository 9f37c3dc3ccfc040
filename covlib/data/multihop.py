"""Multi-hop QA readers: adversarial HotpotQA (Ye & Durrett), HotpotQA distractor and 2WikiMultihopQA.

Adversarial HotpotQA splits "calibration" (first `CALIBRATION_SIZE`) and "test" (last `TEST_SIZE`) of sim_dev; its
rationale sentences are located in the paragraphs to give supporting facts, and adversarial paragraphs keep the title
`ADVERSARIAL_TITLE`. HotpotQA reads HF `hotpot_qa` rows, the official JSON list or a hub id; 2Wiki the official JSON
or question-only records (the package docstring has the full table).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from covlib.core import paths
from covlib.core.records import DataError, Example, Paragraph
from covlib.core.text import split_sentences
from covlib.data.readers import (SHARED_FILES, Loc, iter_records, nonempty_answers, require, require_text, source_rows,
                                 str_list, unique, unique_ids)

ADVERSARIAL_TITLE = "added"
CALIBRATION_SIZE = 58
TEST_SIZE = 250


# --------------------------------------------------------------------------- adversarial HotpotQA


def _locate(sentence: str, sentences: list[str]) -> int | None:
    """Index of `sentence` among `sentences`: exact match first, then containment either way."""
    target = " ".join(sentence.split())
    normalised = [" ".join(s.split()) for s in sentences]
    if target in normalised:
        return normalised.index(target)
    for index, candidate in enumerate(normalised):
        if candidate and (target in candidate or candidate in target):
            return index
    return None


def _adv_hotpot_row(row: dict, loc: Loc) -> Example:
    qid = require(row, "qas_id", str, loc)
    question = require_text(row, "question", loc)
    answer = require_text(row, "answer", loc)
    paragraphs = []
    for i, par in enumerate(require(row, "paragraphs", list, loc)):
        title = require(par, "title", str, loc, f"paragraphs[{i}].title")
        context = require(par, "context", str, loc, f"paragraphs[{i}].context")
        is_supp = require(par, "is_supp", bool, loc, f"paragraphs[{i}].is_supp")
        paragraphs.append(Paragraph(title, split_sentences(context), is_supp))
    rationale, facts, unlocated = [], [], []
    for i, item in enumerate(require(row, "rationale", list, loc)):
        title = require(item, "title", str, loc, f"rationale[{i}].title")
        sentence = require(item, "sentence", str, loc, f"rationale[{i}].sentence")
        rationale.append({"title": title, "sentence": sentence})
        match = next((p for p in paragraphs if p.title == title and p.title != ADVERSARIAL_TITLE), None)
        index = _locate(sentence, match.sentences) if match else None
        if index is None:
            unlocated.append({"title": title, "sentence": sentence})
        elif (title, index) not in facts:
            facts.append((title, index))
    metadata = {"dataset": "adv_hotpotqa", "rationale": rationale, "unlocated_rationale": unlocated}
    return Example(qid, question, [answer], paragraphs=paragraphs, supporting_facts=facts, metadata=metadata)


def _alt_answers(path: str | Path) -> dict[str, list[str]]:
    """qas_id -> alternative answers, from a `{qas_id, answer}` JSON-lines file."""
    aliases: dict[str, list[str]] = {}
    for record, loc in iter_records(path):
        qid = require(record, "qas_id", str, loc)
        aliases.setdefault(qid, []).append(require(record, "answer", str, loc))
    return aliases


def load_adv_hotpotqa(
    path: str | Path | None = None, split: str = "test", alt_answers: str | Path | None = "default"
) -> list[Example]:
    """Adversarial HotpotQA (Ye & Durrett): split "calibration" (first 58), "test" (last 250) or "all"."""
    path = Path(path) if path is not None else paths.dataset_path(*SHARED_FILES["adv_hotpotqa"])
    if split not in ("calibration", "test", "all"):
        raise ValueError(f"split must be 'calibration', 'test' or 'all', got {split!r}")
    examples = unique_ids((_adv_hotpot_row(row, loc), loc) for row, loc in iter_records(path))
    if split != "all" and len(examples) != CALIBRATION_SIZE + TEST_SIZE:
        raise DataError(
            path,
            f"split {split!r} needs the {CALIBRATION_SIZE + TEST_SIZE}-record sim_dev file (first {CALIBRATION_SIZE} "
            f"calibration, last {TEST_SIZE} test), got {len(examples)} records; use split='all' for other files "
            "(e.g. the sim_train few-shot pool)",
        )
    if split == "calibration":
        examples = examples[:CALIBRATION_SIZE]
    elif split == "test":
        examples = examples[-TEST_SIZE:]
    for example in examples:
        example.metadata["split"] = split
    if alt_answers == "default":
        default = paths.dataset_path(*SHARED_FILES["adv_hotpotqa_alt_answers"])
        alt_answers = default if default.exists() else None
    if alt_answers is not None:
        aliases = _alt_answers(alt_answers)
        for example in examples:
            example.answers = unique(example.answers + aliases.get(example.id, []))
    return examples


# --------------------------------------------------------------------------- HotpotQA


def _hotpot_row(row: dict, loc: Loc) -> Example:
    """A Hugging Face `hotpot_qa` row, or an official HotpotQA record (`_id`, list-shaped context)."""
    official = "_id" in row
    qid = require(row, "_id" if official else "id", str, loc)
    question = require_text(row, "question", loc)
    answer = require_text(row, "answer", loc)
    facts, context = _official_context(row, loc) if official else _hf_hotpot_context(row, loc)
    paragraphs = _paragraphs(context, facts)
    metadata = {"dataset": "hotpotqa", "type": row.get("type"), "level": row.get("level")}
    return Example(qid, question, [answer], paragraphs=paragraphs, supporting_facts=facts, metadata=metadata)


def _hf_hotpot_context(row: dict, loc: Loc) -> tuple[list[tuple[str, int]], list[tuple[str, list[str]]]]:
    """Supporting facts and (title, sentences) pairs of a HF `hotpot_qa` row (column-shaped dicts)."""
    sf = require(row, "supporting_facts", dict, loc)
    titles = str_list(require(sf, "title", list, loc, "supporting_facts.title"), loc, "supporting_facts.title")
    sent_ids = require(sf, "sent_id", list, loc, "supporting_facts.sent_id")
    if len(titles) != len(sent_ids) or not all(isinstance(i, int) for i in sent_ids):
        raise loc.error("should hold one integer per title", field="supporting_facts.sent_id")
    ctx = require(row, "context", dict, loc)
    ctx_titles = str_list(require(ctx, "title", list, loc, "context.title"), loc, "context.title")
    ctx_sentences = require(ctx, "sentences", list, loc, "context.sentences")
    if len(ctx_titles) != len(ctx_sentences):
        raise loc.error("context.title and context.sentences differ in length", field="context.sentences")
    context = [
        (title, str_list(sents, loc, f"context.sentences[{i}]"))
        for i, (title, sents) in enumerate(zip(ctx_titles, ctx_sentences))
    ]
    return list(zip(titles, sent_ids)), context


def _official_context(row: dict, loc: Loc) -> tuple[list[tuple[str, int]], list[tuple[str, list[str]]]]:
    """Supporting facts and (title, sentences) pairs of an official HotpotQA / 2WikiMultihopQA record."""
    facts = require(row, "supporting_facts", list, loc)
    context = require(row, "context", list, loc)
    return (
        [_fact(item, loc, f"supporting_facts[{i}]") for i, item in enumerate(facts)],
        [_titled_sentences(item, loc, f"context[{i}]") for i, item in enumerate(context)],
    )


def _paragraphs(context: list[tuple[str, list[str]]], facts: list[tuple[str, int]]) -> list[Paragraph]:
    """Paragraphs with stripped sentences (indices kept); supporting when a fact names the title."""
    gold_titles = {title for title, _ in facts}
    return [Paragraph(title, [s.strip() for s in sents], title in gold_titles) for title, sents in context]


def _fact(item: Any, loc: Loc, name: str) -> tuple[str, int]:
    """An official `[title, sentence index]` supporting fact."""
    if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str) and isinstance(item[1], int)):
        raise loc.error(f"field {name!r} should be [title, sentence index], got {item!r:.80}", field=name)
    return item[0], item[1]


def _titled_sentences(item: Any, loc: Loc, name: str) -> tuple[str, list[str]]:
    """An official `[title, [sentences]]` context entry."""
    if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)):
        raise loc.error(f"field {name!r} should be [title, [sentences]], got {item!r:.80}", field=name)
    return item[0], str_list(item[1], loc, f"{name}[1]")


def load_hotpotqa(path_or_hub_id: str | Path | None = None, split: str = "validation") -> list[Example]:
    """HotpotQA distractor: HF `hotpot_qa` JSONL rows, the official JSON list, or a hub id (`split` is for the hub)."""
    source = path_or_hub_id if path_or_hub_id is not None else paths.dataset_path(*SHARED_FILES["hotpotqa"])
    hint = "e.g. ../shared/data/hotpotqa/hotpot_dev_distractor_sample100.jsonl"
    return unique_ids((_hotpot_row(row, loc), loc) for row, loc in source_rows(source, "distractor", split, hint))


# --------------------------------------------------------------------------- 2WikiMultihopQA


def _2wiki_row(row: dict, loc: Loc) -> Example:
    """An official 2WikiMultihopQA record, or a question-only `{test_id, question, answer[]}` record."""
    question = require_text(row, "question", loc)
    if "_id" not in row and "test_id" in row:
        test_id = require(row, "test_id", int, loc)
        answers = str_list(require(row, "answer", (str, list), loc), loc, "answer")
        metadata = {"dataset": "2wikimultihop", "test_id": test_id}
        return Example(f"2wiki-{test_id:04d}", question, nonempty_answers(answers, loc, "answer"), metadata=metadata)
    qid = require(row, "_id", str, loc)
    answer = require_text(row, "answer", loc)
    facts, context = _official_context(row, loc)
    paragraphs = _paragraphs(context, facts)
    metadata = {"dataset": "2wikimultihop", "type": row.get("type"), "evidences": row.get("evidences", [])}
    return Example(qid, question, [answer], paragraphs=paragraphs, supporting_facts=facts, metadata=metadata)


def load_2wikimultihop(path: str | Path | None = None, split: str = "dev") -> list[Example]:
    """2WikiMultihopQA, official or question-only JSON; default "dev" = 1000 dev questions, "train" = few-shot pool."""
    if path is None:
        if split not in ("dev", "train"):
            raise ValueError(f"split must be 'dev' or 'train', got {split!r}")
        key = "2wikimultihop" if split == "dev" else "2wikimultihop_fewshot"
        path = paths.dataset_path(*SHARED_FILES[key])
    return unique_ids((_2wiki_row(row, loc), loc) for row, loc in iter_records(path))
