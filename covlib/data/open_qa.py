"""Open-domain QA readers: NQ-open, WebQuestions, TriviaQA and Mintaka, from JSON(L), DPR `*.qa.csv` TSV or hub ids.

Answers are gold first, then aliases, without repeats; an empty question or answer list is an error (TriviaQA's test
split excepted). DPR TSV files are read with the `csv` module as DPR wrote them (answers a Python list literal).
"""

from __future__ import annotations

import ast
import csv
import io
import json
from pathlib import Path
from typing import Any, Iterator

from covlib.core import paths
from covlib.core.records import DataError, Example
from covlib.data.readers import (SHARED_FILES, Loc, csv_reader, data_suffix, nonempty_answers, read_text, require,
                                 require_text, source_rows, str_list, unique, unique_ids)


# --------------------------------------------------------------------------- open-domain QA


def _open_qa_row(row: dict, loc: Loc, example_id: str, dataset: str) -> Example:
    """A `{question, answer[]}` row (also HF `web_questions` with `answers`, and `url`)."""
    question = _nonempty_question(require(row, "question", str, loc), loc)
    field = "answer" if "answer" in row or "answers" not in row else "answers"
    answers = nonempty_answers(str_list(require(row, field, (list, str), loc), loc, field), loc, field)
    metadata = {"dataset": dataset}
    if "url" in row:
        metadata["url"] = row["url"]
    return Example(example_id, question, answers, metadata=metadata)


def _nonempty_question(question: str, loc: Loc) -> str:
    if not question.strip():
        raise loc.error("empty question", field="question")
    return question.strip()



def _load_open_qa(source: str | Path, prefix: str, dataset: str, split: str, local_name: str) -> list[Example]:
    if _is_qa_tsv(source):
        return [Example(f"{prefix}-{n:04d}", question, answers, metadata={"dataset": dataset})
                for n, (question, answers, _) in enumerate(_iter_qa_tsv(source))]
    hint = f"e.g. ../shared/data/{'/'.join(SHARED_FILES[local_name])} or a DPR *.qa.csv file"
    return [
        _open_qa_row(row, loc, f"{prefix}-{n:04d}", dataset)
        for n, (row, loc) in enumerate(source_rows(source, None, split, hint))
    ]


def load_nq_open(path: str | Path | None = None, split: str = "validation") -> list[Example]:
    """NQ-open `{question, answer[]}` JSONL (default: the 400 WebGLM questions), DPR nq-*.qa.csv, or hub id; ids `nq-0000`."""
    source = path if path is not None else paths.dataset_path(*SHARED_FILES["nq_open"])
    return _load_open_qa(source, "nq", "nq_open", split, "nq_open")


def load_web_questions(path: str | Path | None = None, split: str = "test") -> list[Example]:
    """WebQuestions `{question, answer[]}` or HF `{url, question, answers[]}` JSONL (default: WebGLM 400), DPR TSV, hub id."""
    source = path if path is not None else paths.dataset_path(*SHARED_FILES["web_questions"])
    return _load_open_qa(source, "webq", "web_questions", split, "web_questions")


# --------------------------------------------------------------------------- TriviaQA


def _triviaqa_row(row: dict, loc: Loc, split: str) -> Example:
    """A HF `trivia_qa` row `{question_id, question, answer: {value, aliases, ...}}` (test rows have empty answers)."""
    qid = require(row, "question_id", str, loc)
    question = require_text(row, "question", loc)
    answer = require(row, "answer", dict, loc)
    value = require(answer, "value", str, loc, "answer.value")
    aliases = str_list(require(answer, "aliases", list, loc, "answer.aliases"), loc, "answer.aliases")
    metadata = {"dataset": "triviaqa", "normalized_aliases": answer.get("normalized_aliases", [])}
    if "question_source" in row:
        metadata["question_source"] = row["question_source"]
    answers = unique([value, *aliases])
    if split != "test":  # only the test split has no public answers
        answers = nonempty_answers(answers, loc, "answer.value")
    return Example(qid, question, answers, metadata=metadata)


def _parse_answer_list(text: str, loc: Loc) -> list[str]:
    """A DPR answer column: the Python repr of a list (as DPR wrote it) or a JSON list of strings."""
    value: Any = None
    for parse in (ast.literal_eval, json.loads):
        try:
            value = parse(text)
            break
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
    if not isinstance(value, list):
        raise loc.error(f"answer column is not a list literal: {text!r:.80}", field="answers")
    return str_list(value, loc, "answers")


def _is_qa_tsv(source: str | Path) -> bool:
    """A local DPR-style `question<TAB>answers` file: .csv/.tsv/.txt, or a file that is not JSON."""
    if paths.is_hub_id(source) or not Path(source).is_file():
        return False
    if data_suffix(source) in (".tsv", ".csv", ".txt"):
        return True
    return read_text(source).lstrip()[:1] not in ("[", "{", "")


def _iter_qa_tsv(path: str | Path) -> Iterator[tuple[str, list[str], Loc]]:
    """DPR `*.qa.csv` rows: question, then the answers' list, tab-separated, quoted as Python's csv module writes them.

    Fields may be quoted (a quote inside doubled, tabs and newlines allowed inside quotes); no header.
    Each row's error names the line it starts on.
    """
    path = Path(path)
    text = io.StringIO(read_text(path), newline="")  # only \n and \r\n end a row (not U+2028 inside a question)
    reader = csv_reader(text, delimiter="\t", quotechar='"', doublequote=True, strict=True)
    start, count = 1, 0
    while True:
        loc = Loc(path, line=start)
        try:
            row = next(reader)
        except StopIteration:
            if not count:
                raise DataError(path, "empty file: no questions (a failed download or the wrong file?)") from None
            return
        except csv.Error as err:
            raise loc.error(f"malformed quoting: {err}") from err
        start = reader.line_num + 1
        if not row or not any(cell.strip() for cell in row):
            continue
        if len(row) != 2:
            raise loc.error(f"expected 2 tab-separated columns (question, answers), got {len(row)}"
                            + (" (an unclosed quote swallows the tabs after it)" if any("\t" in c for c in row) else ""))
        question = _nonempty_question(row[0], loc)
        answers = nonempty_answers(_parse_answer_list(row[1].strip(), loc), loc, "answers")
        count += 1
        yield question, answers, loc


def load_triviaqa(path: str | Path, split: str = "validation") -> list[Example]:
    """TriviaQA: HF `trivia_qa` rc.nocontext rows (JSONL / JSON list), DPR TSV (ids `tqa-0000`), or a hub id.

    Rows without an answer are an error except with `split="test"` (local files too): the test split has none."""
    hint = "a JSONL dump of trivia_qa rc.nocontext or a DPR trivia-*.qa.csv TSV"
    if _is_qa_tsv(path):
        return [
            Example(f"tqa-{n:04d}", question, answers, metadata={"dataset": "triviaqa"})
            for n, (question, answers, _) in enumerate(_iter_qa_tsv(path))
        ]
    return unique_ids((_triviaqa_row(row, loc, split), loc)
                      for row, loc in source_rows(path, "rc.nocontext", split, hint))


# --------------------------------------------------------------------------- Mintaka


def _mintaka_value(value: Any) -> list[str]:
    """A non-entity Mintaka answer as strings: booleans -> Yes/No then True/False; 6.0 -> '6'."""
    if isinstance(value, bool):
        return ["Yes", "True"] if value else ["No", "False"]
    if isinstance(value, float) and value.is_integer():
        return [str(int(value))]
    return [str(value)]


def _entity_label(entity: Any, lang: str, loc: Loc, name: str) -> str:
    """An answer entity's label in `lang` (fallback English); labels are strings or {lang: label} maps."""
    label = require(entity, "label", (str, dict), loc, f"{name}.label")
    if isinstance(label, dict):
        label = label.get(lang) or label.get("en")
    if not isinstance(label, str) or not label:
        raise loc.error(f"field '{name}.label' has no label for {lang!r} or 'en'", field=f"{name}.label")
    return label


def _gold_from_labels(labels: list[str]) -> list[str]:
    """One entity: its label; several (a list answer): the labels joined by ', '."""
    if not labels:
        return []
    return [labels[0]] if len(labels) == 1 else [", ".join(labels)]


def _mintaka_row(row: dict, loc: Loc, lang: str) -> Example:
    """An official Mintaka record or a HF `AmazonScience/mintaka` row (detected by `answerText`)."""
    qid = require(row, "id", str, loc)
    metadata: dict[str, Any] = {
        "dataset": "mintaka",
        "lang": lang,
        "category": row.get("category"),
        "complexityType": row.get("complexityType"),
    }
    if "answerText" in row:  # HF rows: question already in the config's language
        question = require_text(row, "question", loc)
        answer_text = require(row, "answerText", (str, type(None)), loc) or ""
        entities = require(row, "answerEntity", (list, type(None)), loc) or []
        labels = [_entity_label(e, lang, loc, f"answerEntity[{i}]") for i, e in enumerate(entities)]
        metadata["answer_entities"] = labels
        return Example(qid, question, nonempty_answers([*_gold_from_labels(labels), answer_text], loc, "answerText"),
                       metadata=metadata)
    if lang == "en":
        question = require_text(row, "question", loc)
    else:
        translations = require(row, "translations", dict, loc)
        question = require_text(translations, lang, loc, f"translations.{lang}")
    answer = require(row, "answer", dict, loc)
    answer_type = require(answer, "answerType", str, loc, "answer.answerType")
    values = require(answer, "answer", (list, type(None)), loc, "answer.answer") or []
    mention = require(answer, "mention", (str, type(None)), loc, "answer.mention") if "mention" in answer else None
    answers: list[str] = []
    if answer_type == "entity":
        labels = [_entity_label(e, lang, loc, f"answer.answer[{i}]") for i, e in enumerate(values)]
        metadata["answer_entities"] = labels
        answers += _gold_from_labels(labels)
    else:
        for value in values:
            answers += _mintaka_value(value)
    if row.get("complexityType") == "count" and isinstance(answer.get("answerNum"), (int, float)):
        answers = _mintaka_value(answer["answerNum"]) + answers
    if mention:
        answers.append(mention)
    metadata["answerType"] = answer_type
    return Example(qid, question, nonempty_answers(answers, loc, "answer.answer"), metadata=metadata)


def load_mintaka(path: str | Path, lang: str = "en", split: str = "test") -> list[Example]:
    """Mintaka: the official JSON list (question in `lang`) or HF `AmazonScience/mintaka` rows, or a hub id."""
    hint = "e.g. mintaka_test.json from github.com/amazon-science/mintaka"
    return unique_ids((_mintaka_row(row, loc, lang), loc) for row, loc in source_rows(path, lang, split, hint))
