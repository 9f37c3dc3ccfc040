"""Dataset loaders: every dataset becomes a `list[Example]`, every corpus a `list[Passage]`.

Defaults read the shared data folder (`paths.dataset_path`, see ../shared/data/README.md).
Formats accepted, and the decisions a notebook needs to know:

| loader               | formats                                                        | ids                  |
|----------------------|----------------------------------------------------------------|----------------------|
| load_adv_hotpotqa    | Ye & Durrett JSON list (sim_dev.json / sim_train.json)         | qas_id               |
| load_hotpotqa        | HF `hotpot_qa` JSONL rows, official HotpotQA JSON list, hub id | id / _id             |
| load_2wikimultihop   | official 2Wiki JSON, question-only `{test_id, question, answer}` | _id / `2wiki-0007`   |
| load_fever           | Verify-and-Edit processed JSONL, FEVER train JSONL             | str(id)              |
| load_nq_open         | `{question, answer[]}` JSONL (WebGLM 400), HF `nq_open`, DPR `nq-*.qa.csv`, hub id | `nq-0000` (line order) |
| load_web_questions   | `{question, answer[]}` JSONL, HF `web_questions` (`answers`), DPR TSV, hub id | `webq-0000`  |
| load_triviaqa        | HF `trivia_qa` rc.nocontext (JSONL / JSON list), DPR TSV, hub id | question_id / `tqa-0000` |
| load_mintaka         | official Mintaka JSON list, HF `AmazonScience/mintaka` rows, hub id | id               |

* `Example.answers` is gold first, then aliases, without repeats. Every example's
  `metadata["dataset"]` names its loader's dataset.
* Adversarial HotpotQA: split "calibration" = first 58 records, "test" = last 250,
  "all" = every record. Paragraph contexts are split with `split_sentences`; the
  `rationale` is kept in metadata and located sentence by sentence to give
  `supporting_facts` (sentences that cannot be located are listed in
  `metadata["unlocated_rationale"]`). Adversarial paragraphs keep their title "added".
* FEVER: `ids="default"` loads the paper's 1000 sampled claims **in the order of
  sampled_ids.json** (not file order); `ids=None` loads the whole file in file order.
  Evidence sentences (`pars`, kept verbatim, PTB-tokenised) become one supporting
  Paragraph titled by the evidence pages ("Psych (season 2)").
* Mintaka: entity answers use each entity's label in `lang` (fallback "en"), then the
  annotator's `mention`; an answer with several entities has the labels joined by ", "
  as gold (single labels go to `metadata["answer_entities"]`); count questions put
  `answerNum` first; booleans give "Yes"/"No" then "True"/"False"; numbers and dates
  are strings. The HF rows (`id, lang, question, answerText, category,
  complexityType, questionEntity, answerEntity[{name, label}]`) have no answer type:
  gold = entity label(s) as above, then `answerText`.
* Hub ids: a string that is not an existing path and looks like `owner/name` or
  `name` (optionally `:config`) goes through `datasets.load_dataset` with the
  loader's `split`; rows are converted by the same code as local files. The `split`
  argument of the QA loaders applies to hub loading only.
* Corpora: `build_corpus` keeps the first paragraph of each title (ids are the titles);
  adversarial "added" paragraphs are all distinct texts, so they are deduplicated by
  text and get ids "added-<sha1 of text, 10 hex>" while keeping the title "added".
* DPR `*.qa.csv` files (NQ-open, TriviaQA, WebQuestions) are read with the `csv` module as DPR
  wrote them: tab-separated, quoted fields with doubled quotes, the answers column the Python
  repr of a list (a JSON list also reads). Empty questions and empty answer lists are errors.
* `sample(examples, n, seed)` draws a seeded sample kept in file order.
* Bad input raises `DataError` naming the file, the 1-based line (JSONL/TSV/txt) or
  "record N" (0-based index into a JSON list) and the field; nothing is skipped.
"""

from __future__ import annotations

import ast
import csv
import hashlib
import io
import json
import random
import re
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, NamedTuple, Sequence

from covlib.core import paths
from covlib.core.records import DataError, Example, Paragraph, Passage
from covlib.core.text import split_sentences

ADVERSARIAL_TITLE = "added"
FEVER_LABELS = ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")
CALIBRATION_SIZE = 58
TEST_SIZE = 250

_SHARED_FILES = {
    "adv_hotpotqa": ("hotpotqa_adv", "sim_dev.json"),
    "adv_hotpotqa_fewshot": ("hotpotqa_adv", "sim_train.json"),
    "adv_hotpotqa_rationales": ("hotpotqa_adv", "manual_rat_std.txt"),
    "adv_hotpotqa_fewshot_answers": ("hotpotqa_adv", "manual_answer.txt"),
    "adv_hotpotqa_alt_answers": ("hotpotqa_adv", "alt_answers.jsonlines"),
    "hotpotqa": ("hotpotqa", "hotpot_dev_distractor_sample100.jsonl"),
    "2wikimultihop": ("2wikimultihop", "dev_first1000_noctx.json"),
    "2wikimultihop_fewshot": ("2wikimultihop", "train_subset.json"),
    "2wikimultihop_rationales": ("2wikimultihop", "manual_rat.txt"),
    "fever": ("fever", "paper_test_processed.jsonl"),
    "fever_ids": ("fever", "sampled_ids.json"),
    "fever_fewshot": ("fever", "train_subset.jsonl"),
    "fever_rationales": ("fever", "manual_rat.txt"),
    "nq_open": ("nq_open", "webglm_nq_open400.jsonl"),
    "web_questions": ("web_questions", "webglm_web_questions400.jsonl"),
}


# --------------------------------------------------------------------------- sentences


# --------------------------------------------------------------------------- input checks


class _Loc(NamedTuple):
    """Where a record came from, for error messages (line is 1-based, index 0-based)."""

    path: Any
    line: int | None = None
    index: int | None = None

    def error(self, message: str, field: str | None = None) -> DataError:
        """A DataError naming this file, line or record, and field."""
        if self.index is not None:
            message = f"record {self.index}: {message}"
        return DataError(self.path, message, line=self.line, field=field)


def _type_names(types: type | tuple[type, ...]) -> str:
    types = types if isinstance(types, tuple) else (types,)
    return " or ".join("null" if t is type(None) else t.__name__ for t in types)


def _require(record: Any, field: str, types: type | tuple[type, ...], loc: _Loc, name: str | None = None) -> Any:
    """record[field], checked to exist and to have one of `types` (bool is not an int here)."""
    name = name or field
    if not isinstance(record, dict):
        raise loc.error(f"expected an object holding {name!r}, got {type(record).__name__}", field=name)
    if field not in record:
        raise loc.error(f"missing field {name!r}", field=name)
    value = record[field]
    allowed = types if isinstance(types, tuple) else (types,)
    if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
        raise loc.error(f"field {name!r} should be {_type_names(types)}, got {type(value).__name__}", field=name)
    return value


def _str_list(value: Any, loc: _Loc, name: str) -> list[str]:
    """A list of strings (a lone string counts as a one-element list)."""
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise loc.error(f"field {name!r} should be a list of strings, got {value!r:.80}", field=name)
    return list(value)


def _unique(items: Sequence[str]) -> list[str]:
    """Non-empty stripped strings in order, without repeats."""
    return list(dict.fromkeys(s.strip() for s in items if s and s.strip()))


def _text(record: Any, field: str, loc: _Loc, name: str | None = None) -> str:
    """record[field] as a string that is not empty or whitespace only (kept as written)."""
    value = _require(record, field, str, loc, name)
    if not value.strip():
        raise loc.error(f"field {name or field!r} is empty", field=name or field)
    return value


def _where(loc: _Loc) -> str:
    return f"line {loc.line}" if loc.line is not None else f"record {loc.index}"


def _unique_ids(rows: Iterable[tuple[Example, _Loc]]) -> list[Example]:
    """The examples in order; a DataError at the second use of an id, naming where it was first used."""
    seen: dict[str, _Loc] = {}
    examples = []
    for example, loc in rows:
        if example.id in seen:
            raise loc.error(f"duplicate id {example.id!r} (first used at {_where(seen[example.id])}): ids must be "
                            "unique, or selections by id and few-shot pools pick the wrong record", field="id")
        seen[example.id] = loc
        examples.append(example)
    return examples


def _existing_file(path: str | Path) -> Path:
    path = Path(path)
    if not path.exists():
        raise DataError(path, "file not found")
    if not path.is_file():
        raise DataError(path, "not a file")
    return path


def _read_text(path: str | Path) -> str:
    path = _existing_file(path)
    raw = path.read_bytes()  # bytes, not read_text: no newline translation (a "\r" inside a quoted field stays)
    try:
        return raw.decode("utf-8-sig")  # a byte-order mark is not part of the first record
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        raise DataError(path, f"not UTF-8 text ({err.reason} at byte {err.start}): re-encode the file as UTF-8",
                        line=line) from err


def _json_line(raw: str, loc: _Loc) -> Any:
    """One parsed JSONL line; a DataError naming the file and line when it is not JSON."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError as err:
        raise loc.error(f"invalid JSON line: {err.msg} (column {err.colno})") from err


def _lines(text: str) -> Iterator[tuple[int, str]]:
    """(1-based number, line) split at \n only: U+2028 and other Unicode breaks are valid inside a JSON string."""
    for number, raw in enumerate(text.split("\n"), start=1):
        yield number, raw.removesuffix("\r")


def _is_jsonl_start(line: str) -> bool:
    """Whether a first line that starts with "[" is one JSON-lines record (a list, but not a list of objects: that
    is a one-line JSON list followed by stray data, reported as such)."""
    try:
        value = json.loads(line)
    except json.JSONDecodeError:
        return False
    return not (isinstance(value, list) and value and all(isinstance(v, dict) for v in value))


def iter_records(path: str | Path, allow_empty: bool = False) -> Iterator[tuple[dict, _Loc]]:
    """(record, where) for each object of a JSON-list or JSON-lines file (sniffed); `where.error(msg, field)` names file and line.

    An empty file (or `[]`) is an error unless `allow_empty`: a dataset with no record is a wrong path or a
    failed download far more often than intended.
    """
    path = Path(path)
    text = _read_text(path)
    if not text.strip() and not allow_empty:
        raise DataError(path, "empty file: no records (a failed download or the wrong file?)")
    records: Any = None
    if text.lstrip().startswith("["):
        try:
            records = json.loads(text)
        except json.JSONDecodeError as err:
            if not (err.msg == "Extra data" and _is_jsonl_start(text.lstrip().split("\n", 1)[0])):
                raise DataError(path, f"invalid JSON: {err.msg} (column {err.colno})", line=err.lineno) from err
            # JSON lines whose first line is a list: read line by line below, which names that line
    if isinstance(records, list):
        if not records and not allow_empty:
            raise DataError(path, "an empty JSON list: no records")
        for index, record in enumerate(records):
            loc = _Loc(path, index=index)
            if not isinstance(record, dict):
                raise loc.error(f"expected an object, got {type(record).__name__}")
            yield record, loc
        return
    for number, raw in _lines(text):
        if not raw.strip():
            continue
        loc = _Loc(path, line=number)
        record = _json_line(raw, loc)
        if not isinstance(record, dict):
            raise loc.error(f"expected a JSON object, got {type(record).__name__}")
        yield record, loc


def _read_json_value(path: str | Path) -> Any:
    path = Path(path)
    try:
        return json.loads(_read_text(path))
    except json.JSONDecodeError as err:
        raise DataError(path, f"invalid JSON: {err.msg} (column {err.colno})", line=err.lineno) from err


# --------------------------------------------------------------------------- hub

def _hub_rows(source: str, default_config: str | None, split: str, local_hint: str) -> Iterator[tuple[dict, _Loc]]:
    """Rows of a Hugging Face hub dataset (`name[:config]`), as the local readers yield them."""
    name, _, config = source.partition(":")
    config = config or default_config
    advice = f"a local file path works instead ({local_hint})"
    try:
        import datasets  # lazy: heavy, and only needed for hub ids
    except ImportError as err:
        raise DataError(source, f"is not a local file and the `datasets` package is not installed; {advice}") from err
    try:
        rows = datasets.load_dataset(name, config, split=split)
    except Exception as err:  # noqa: BLE001 - any failure here means the hub could not serve it
        raise DataError(
            source,
            f"could not load dataset {name!r} (config {config!r}, split {split!r}) from the Hugging Face hub: "
            f"the hub is unreachable from here or the id is wrong ({type(err).__name__}: {err}); {advice}",
        ) from err
    for index, row in enumerate(rows):
        yield dict(row), _Loc(source, index=index)


def _rows(source: str | Path, default_config: str | None, split: str, local_hint: str) -> Iterator[tuple[dict, _Loc]]:
    """Records from a local JSON/JSONL file, or from the hub when `source` is a hub id."""
    if paths.is_hub_id(source):
        return _hub_rows(str(source), default_config, split, local_hint)
    return iter_records(source)


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


def _adv_hotpot_row(row: dict, loc: _Loc) -> Example:
    qid = _require(row, "qas_id", str, loc)
    question = _text(row, "question", loc)
    answer = _text(row, "answer", loc)
    paragraphs = []
    for i, par in enumerate(_require(row, "paragraphs", list, loc)):
        title = _require(par, "title", str, loc, f"paragraphs[{i}].title")
        context = _require(par, "context", str, loc, f"paragraphs[{i}].context")
        is_supp = _require(par, "is_supp", bool, loc, f"paragraphs[{i}].is_supp")
        paragraphs.append(Paragraph(title, split_sentences(context), is_supp))
    rationale, facts, unlocated = [], [], []
    for i, item in enumerate(_require(row, "rationale", list, loc)):
        title = _require(item, "title", str, loc, f"rationale[{i}].title")
        sentence = _require(item, "sentence", str, loc, f"rationale[{i}].sentence")
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
        qid = _require(record, "qas_id", str, loc)
        aliases.setdefault(qid, []).append(_require(record, "answer", str, loc))
    return aliases


def load_adv_hotpotqa(
    path: str | Path | None = None, split: str = "test", alt_answers: str | Path | None = "default"
) -> list[Example]:
    """Adversarial HotpotQA (Ye & Durrett): split "calibration" (first 58), "test" (last 250) or "all"."""
    path = Path(path) if path is not None else paths.dataset_path(*_SHARED_FILES["adv_hotpotqa"])
    if split not in ("calibration", "test", "all"):
        raise ValueError(f"split must be 'calibration', 'test' or 'all', got {split!r}")
    examples = _unique_ids((_adv_hotpot_row(row, loc), loc) for row, loc in iter_records(path))
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
        default = paths.dataset_path(*_SHARED_FILES["adv_hotpotqa_alt_answers"])
        alt_answers = default if default.exists() else None
    if alt_answers is not None:
        aliases = _alt_answers(alt_answers)
        for example in examples:
            example.answers = _unique(example.answers + aliases.get(example.id, []))
    return examples


# --------------------------------------------------------------------------- HotpotQA


def _hotpot_row(row: dict, loc: _Loc) -> Example:
    """A Hugging Face `hotpot_qa` row, or an official HotpotQA record (`_id`, list-shaped context)."""
    official = "_id" in row
    qid = _require(row, "_id" if official else "id", str, loc)
    question = _text(row, "question", loc)
    answer = _text(row, "answer", loc)
    facts, context = _official_context(row, loc) if official else _hf_hotpot_context(row, loc)
    paragraphs = _paragraphs(context, facts)
    metadata = {"dataset": "hotpotqa", "type": row.get("type"), "level": row.get("level")}
    return Example(qid, question, [answer], paragraphs=paragraphs, supporting_facts=facts, metadata=metadata)


def _hf_hotpot_context(row: dict, loc: _Loc) -> tuple[list[tuple[str, int]], list[tuple[str, list[str]]]]:
    """Supporting facts and (title, sentences) pairs of a HF `hotpot_qa` row (column-shaped dicts)."""
    sf = _require(row, "supporting_facts", dict, loc)
    titles = _str_list(_require(sf, "title", list, loc, "supporting_facts.title"), loc, "supporting_facts.title")
    sent_ids = _require(sf, "sent_id", list, loc, "supporting_facts.sent_id")
    if len(titles) != len(sent_ids) or not all(isinstance(i, int) for i in sent_ids):
        raise loc.error("should hold one integer per title", field="supporting_facts.sent_id")
    ctx = _require(row, "context", dict, loc)
    ctx_titles = _str_list(_require(ctx, "title", list, loc, "context.title"), loc, "context.title")
    ctx_sentences = _require(ctx, "sentences", list, loc, "context.sentences")
    if len(ctx_titles) != len(ctx_sentences):
        raise loc.error("context.title and context.sentences differ in length", field="context.sentences")
    context = [
        (title, _str_list(sents, loc, f"context.sentences[{i}]"))
        for i, (title, sents) in enumerate(zip(ctx_titles, ctx_sentences))
    ]
    return list(zip(titles, sent_ids)), context


def _official_context(row: dict, loc: _Loc) -> tuple[list[tuple[str, int]], list[tuple[str, list[str]]]]:
    """Supporting facts and (title, sentences) pairs of an official HotpotQA / 2WikiMultihopQA record."""
    facts = _require(row, "supporting_facts", list, loc)
    context = _require(row, "context", list, loc)
    return (
        [_fact(item, loc, f"supporting_facts[{i}]") for i, item in enumerate(facts)],
        [_titled_sentences(item, loc, f"context[{i}]") for i, item in enumerate(context)],
    )


def _paragraphs(context: list[tuple[str, list[str]]], facts: list[tuple[str, int]]) -> list[Paragraph]:
    """Paragraphs with stripped sentences (indices kept); supporting when a fact names the title."""
    gold_titles = {title for title, _ in facts}
    return [Paragraph(title, [s.strip() for s in sents], title in gold_titles) for title, sents in context]


def _fact(item: Any, loc: _Loc, name: str) -> tuple[str, int]:
    """An official `[title, sentence index]` supporting fact."""
    if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str) and isinstance(item[1], int)):
        raise loc.error(f"field {name!r} should be [title, sentence index], got {item!r:.80}", field=name)
    return item[0], item[1]


def _titled_sentences(item: Any, loc: _Loc, name: str) -> tuple[str, list[str]]:
    """An official `[title, [sentences]]` context entry."""
    if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)):
        raise loc.error(f"field {name!r} should be [title, [sentences]], got {item!r:.80}", field=name)
    return item[0], _str_list(item[1], loc, f"{name}[1]")


def load_hotpotqa(path_or_hub_id: str | Path | None = None, split: str = "validation") -> list[Example]:
    """HotpotQA distractor: HF `hotpot_qa` JSONL rows, the official JSON list, or a hub id (`split` is for the hub)."""
    source = path_or_hub_id if path_or_hub_id is not None else paths.dataset_path(*_SHARED_FILES["hotpotqa"])
    hint = "e.g. ../shared/data/hotpotqa/hotpot_dev_distractor_sample100.jsonl"
    return _unique_ids((_hotpot_row(row, loc), loc) for row, loc in _rows(source, "distractor", split, hint))


# --------------------------------------------------------------------------- 2WikiMultihopQA


def _2wiki_row(row: dict, loc: _Loc) -> Example:
    """An official 2WikiMultihopQA record, or a question-only `{test_id, question, answer[]}` record."""
    question = _text(row, "question", loc)
    if "_id" not in row and "test_id" in row:
        test_id = _require(row, "test_id", int, loc)
        answers = _str_list(_require(row, "answer", (str, list), loc), loc, "answer")
        metadata = {"dataset": "2wikimultihop", "test_id": test_id}
        return Example(f"2wiki-{test_id:04d}", question, _nonempty_answers(answers, loc, "answer"), metadata=metadata)
    qid = _require(row, "_id", str, loc)
    answer = _text(row, "answer", loc)
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
        path = paths.dataset_path(*_SHARED_FILES[key])
    return _unique_ids((_2wiki_row(row, loc), loc) for row, loc in iter_records(path))


# --------------------------------------------------------------------------- FEVER


def _wiki_title(title: str) -> str:
    """A FEVER page id as a readable title: 'Psych_-LRB-season_2-RRB-' -> 'Psych (season 2)'."""
    for token, char in (("-LRB-", "("), ("-RRB-", ")"), ("-LSB-", "["), ("-RSB-", "]"), ("-COLON-", ":"), ("_", " ")):
        title = title.replace(token, char)
    return title


def _fever_facts(evidence: list, loc: _Loc) -> list[tuple[str, int]]:
    """(readable title, sentence index) pairs of the evidence sets, without repeats."""
    facts: list[tuple[str, int]] = []
    for i, group in enumerate(evidence):
        if not isinstance(group, list):
            raise loc.error(f"field 'evidence[{i}]' should be a list of evidence items", field="evidence")
        for item in group:
            if not (isinstance(item, list) and len(item) == 4):
                message = f"an evidence item should be [annotation, evidence, page, sentence], got {item!r:.80}"
                raise loc.error(message, field="evidence")
            page, sentence = item[2], item[3]
            if isinstance(page, str) and isinstance(sentence, int) and (_wiki_title(page), sentence) not in facts:
                facts.append((_wiki_title(page), sentence))
    return facts


def _fever_row(row: dict, loc: _Loc) -> Example:
    """A processed FEVER record `{id, question, label, evidence, pars}` or a train one `{id, claim, label, ...}`."""
    raw_id = _require(row, "id", (int, str), loc)
    claim = _text(row, "claim" if "claim" in row else "question", loc)
    label = _require(row, "label", str, loc)
    if label not in FEVER_LABELS:
        raise loc.error(f"field 'label' should be one of {FEVER_LABELS}, got {label!r}", field="label")
    evidence = _require(row, "evidence", list, loc)
    facts = _fever_facts(evidence, loc)
    metadata: dict[str, Any] = {"dataset": "fever", "evidence": evidence}
    if "verifiable" in row:
        metadata["verifiable"] = _require(row, "verifiable", str, loc)
    paragraphs = []
    if "pars" in row:
        pars = _str_list(_require(row, "pars", list, loc), loc, "pars")
        if pars:
            title = "; ".join(dict.fromkeys(t for t, _ in facts)) or "evidence"
            paragraphs.append(Paragraph(title, pars, is_supporting=True))
    return Example(
        str(raw_id), claim, [], label=label, paragraphs=paragraphs, supporting_facts=facts, metadata=metadata
    )


def _fever_ids(ids: str | Path | Sequence[int | str]) -> tuple[Any, list[str]]:
    """(where the ids came from, the ids as strings), from a JSON-list file or a sequence."""
    if isinstance(ids, (str, Path)):
        values = _read_json_value(ids)
        if not isinstance(values, list):
            raise DataError(ids, f"expected a JSON list of ids, got {type(values).__name__}")
        source: Any = Path(ids)
    else:
        values, source = list(ids), "ids argument"
    if not values:
        raise DataError(source, "no ids: an empty selection (use ids=None for the whole file)")
    first: dict[str, int] = {}
    for index, value in enumerate(values):
        if not isinstance(value, (int, str)) or isinstance(value, bool):
            raise DataError(source, f"record {index}: an id should be an integer or string, got {value!r:.80}")
        if str(value) in first:
            raise DataError(source, f"record {index}: id {value!r} is already selected at record {first[str(value)]}")
        first[str(value)] = index
    return source, [str(v) for v in values]


def load_fever(
    path: str | Path | None = None,
    ids: str | Path | Sequence[int | str] | None = "default",
    split: str = "paper_test",
) -> list[Example]:
    """FEVER claims: "paper_test" = the paper's 1000 sampled ids (sampled_ids.json order); "train" = few-shot claims."""
    if split not in ("paper_test", "train"):
        raise ValueError(f"split must be 'paper_test' or 'train', got {split!r}")
    if path is None:
        path = paths.dataset_path(*_SHARED_FILES["fever" if split == "paper_test" else "fever_fewshot"])
    if ids == "default":
        ids = paths.dataset_path(*_SHARED_FILES["fever_ids"]) if split == "paper_test" else None
    examples = _unique_ids((_fever_row(row, loc), loc) for row, loc in iter_records(path))  # 7 and "7" collide
    if ids is None:
        return examples
    by_id = {example.id: example for example in examples}
    source, wanted = _fever_ids(ids)
    missing = [(i, x) for i, x in enumerate(wanted) if x not in by_id]
    if missing:
        index, value = missing[0]
        raise DataError(source, f"record {index}: id {value} not found in {path} ({len(missing)} ids missing)")
    return [by_id[x] for x in wanted]


# --------------------------------------------------------------------------- open-domain QA


def _open_qa_row(row: dict, loc: _Loc, example_id: str, dataset: str) -> Example:
    """A `{question, answer[]}` row (also HF `web_questions` with `answers`, and `url`)."""
    question = _nonempty_question(_require(row, "question", str, loc), loc)
    field = "answer" if "answer" in row or "answers" not in row else "answers"
    answers = _nonempty_answers(_str_list(_require(row, field, (list, str), loc), loc, field), loc, field)
    metadata = {"dataset": dataset}
    if "url" in row:
        metadata["url"] = row["url"]
    return Example(example_id, question, answers, metadata=metadata)


def _nonempty_question(question: str, loc: _Loc) -> str:
    if not question.strip():
        raise loc.error("empty question", field="question")
    return question.strip()


def _nonempty_answers(answers: list[str], loc: _Loc, field: str) -> list[str]:
    kept = _unique(answers)
    if not kept:
        raise loc.error(f"no answer: {field!r} is empty (accuracy against no answer is always 0)", field=field)
    return kept


def _load_open_qa(source: str | Path, prefix: str, dataset: str, split: str, local_name: str) -> list[Example]:
    if _is_qa_tsv(source):
        return [Example(f"{prefix}-{n:04d}", question, answers, metadata={"dataset": dataset})
                for n, (question, answers, _) in enumerate(_iter_qa_tsv(source))]
    hint = f"e.g. ../shared/data/{'/'.join(_SHARED_FILES[local_name])} or a DPR *.qa.csv file"
    return [
        _open_qa_row(row, loc, f"{prefix}-{n:04d}", dataset)
        for n, (row, loc) in enumerate(_rows(source, None, split, hint))
    ]


def load_nq_open(path: str | Path | None = None, split: str = "validation") -> list[Example]:
    """NQ-open `{question, answer[]}` JSONL (default: the 400 WebGLM questions), DPR nq-*.qa.csv, or hub id; ids `nq-0000`."""
    source = path if path is not None else paths.dataset_path(*_SHARED_FILES["nq_open"])
    return _load_open_qa(source, "nq", "nq_open", split, "nq_open")


def load_web_questions(path: str | Path | None = None, split: str = "test") -> list[Example]:
    """WebQuestions `{question, answer[]}` or HF `{url, question, answers[]}` JSONL (default: WebGLM 400), DPR TSV, hub id."""
    source = path if path is not None else paths.dataset_path(*_SHARED_FILES["web_questions"])
    return _load_open_qa(source, "webq", "web_questions", split, "web_questions")


# --------------------------------------------------------------------------- TriviaQA


def _triviaqa_row(row: dict, loc: _Loc, split: str) -> Example:
    """A HF `trivia_qa` row `{question_id, question, answer: {value, aliases, ...}}` (test rows have empty answers)."""
    qid = _require(row, "question_id", str, loc)
    question = _text(row, "question", loc)
    answer = _require(row, "answer", dict, loc)
    value = _require(answer, "value", str, loc, "answer.value")
    aliases = _str_list(_require(answer, "aliases", list, loc, "answer.aliases"), loc, "answer.aliases")
    metadata = {"dataset": "triviaqa", "normalized_aliases": answer.get("normalized_aliases", [])}
    if "question_source" in row:
        metadata["question_source"] = row["question_source"]
    answers = _unique([value, *aliases])
    if split != "test":  # only the test split has no public answers
        answers = _nonempty_answers(answers, loc, "answer.value")
    return Example(qid, question, answers, metadata=metadata)


def _parse_answer_list(text: str, loc: _Loc) -> list[str]:
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
    return _str_list(value, loc, "answers")


def _is_qa_tsv(source: str | Path) -> bool:
    """A local DPR-style `question<TAB>answers` file: .csv/.tsv/.txt, or a file that is not JSON."""
    if paths.is_hub_id(source) or not Path(source).is_file():
        return False
    if Path(source).suffix.lower() in (".tsv", ".csv", ".txt"):
        return True
    return _read_text(source).lstrip()[:1] not in ("[", "{", "")


def _iter_qa_tsv(path: str | Path) -> Iterator[tuple[str, list[str], _Loc]]:
    """DPR `*.qa.csv` rows: question, then the answers' list, tab-separated, quoted as Python's csv module writes them.

    Fields may be quoted (a quote inside doubled, tabs and newlines allowed inside quotes); no header.
    Each row's error names the line it starts on.
    """
    path = Path(path)
    text = io.StringIO(_read_text(path), newline="")  # only \n and \r\n end a row (not U+2028 inside a question)
    reader = csv.reader(text, delimiter="\t", quotechar='"', doublequote=True, strict=True)
    start, count = 1, 0
    while True:
        loc = _Loc(path, line=start)
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
        answers = _nonempty_answers(_parse_answer_list(row[1].strip(), loc), loc, "answers")
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
    return _unique_ids((_triviaqa_row(row, loc, split), loc) for row, loc in _rows(path, "rc.nocontext", split, hint))


# --------------------------------------------------------------------------- Mintaka


def _mintaka_value(value: Any) -> list[str]:
    """A non-entity Mintaka answer as strings: booleans -> Yes/No then True/False; 6.0 -> '6'."""
    if isinstance(value, bool):
        return ["Yes", "True"] if value else ["No", "False"]
    if isinstance(value, float) and value.is_integer():
        return [str(int(value))]
    return [str(value)]


def _entity_label(entity: Any, lang: str, loc: _Loc, name: str) -> str:
    """An answer entity's label in `lang` (fallback English); labels are strings or {lang: label} maps."""
    label = _require(entity, "label", (str, dict), loc, f"{name}.label")
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


def _mintaka_row(row: dict, loc: _Loc, lang: str) -> Example:
    """An official Mintaka record or a HF `AmazonScience/mintaka` row (detected by `answerText`)."""
    qid = _require(row, "id", str, loc)
    metadata: dict[str, Any] = {
        "dataset": "mintaka",
        "lang": lang,
        "category": row.get("category"),
        "complexityType": row.get("complexityType"),
    }
    if "answerText" in row:  # HF rows: question already in the config's language
        question = _text(row, "question", loc)
        answer_text = _require(row, "answerText", (str, type(None)), loc) or ""
        entities = _require(row, "answerEntity", (list, type(None)), loc) or []
        labels = [_entity_label(e, lang, loc, f"answerEntity[{i}]") for i, e in enumerate(entities)]
        metadata["answer_entities"] = labels
        return Example(qid, question, _nonempty_answers([*_gold_from_labels(labels), answer_text], loc, "answerText"),
                       metadata=metadata)
    if lang == "en":
        question = _text(row, "question", loc)
    else:
        translations = _require(row, "translations", dict, loc)
        question = _text(translations, lang, loc, f"translations.{lang}")
    answer = _require(row, "answer", dict, loc)
    answer_type = _require(answer, "answerType", str, loc, "answer.answerType")
    values = _require(answer, "answer", (list, type(None)), loc, "answer.answer") or []
    mention = _require(answer, "mention", (str, type(None)), loc, "answer.mention") if "mention" in answer else None
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
    return Example(qid, question, _nonempty_answers(answers, loc, "answer.answer"), metadata=metadata)


def load_mintaka(path: str | Path, lang: str = "en", split: str = "test") -> list[Example]:
    """Mintaka: the official JSON list (question in `lang`) or HF `AmazonScience/mintaka` rows, or a hub id."""
    hint = "e.g. mintaka_test.json from github.com/amazon-science/mintaka"
    return _unique_ids((_mintaka_row(row, loc, lang), loc) for row, loc in _rows(path, lang, split, hint))


# --------------------------------------------------------------------------- few-shot pools


def _rationale_lines(path: str | Path, what: str = "rationale") -> Iterator[tuple[str, str, int]]:
    """(id, text, line) from `id<TAB>text` lines (hand-written rationales or answers)."""
    path = Path(path)
    count = 0
    for number, raw in _lines(_read_text(path)):
        if not raw.strip():
            continue
        qid, tab, text = raw.partition("\t")
        if not tab or not qid.strip() or not text.strip():
            raise DataError(path, f"expected 'id<TAB>{what}'", line=number)
        count += 1
        yield qid.strip(), text.strip(), number
    if not count:
        raise DataError(path, f"empty file: no 'id<TAB>{what}' lines")


def load_fewshot_answers(path: str | Path | None = None) -> dict[str, str]:
    """id -> hand-written full-sentence answer of the HotpotQA few-shot pool (manual_answer.txt); ids unique."""
    path = Path(path) if path is not None else paths.dataset_path(*_SHARED_FILES["adv_hotpotqa_fewshot_answers"])
    answers: dict[str, str] = {}
    for qid, answer, line in _rationale_lines(path, "answer"):
        if qid in answers:
            raise DataError(path, f"id {qid!r} has a second answer", line=line)
        answers[qid] = answer
    return answers


def load_fewshot(dataset: str) -> list[tuple[Example, str]]:
    """Few-shot pool with hand-written rationales, in rationale-file order: "hotpotqa", "2wikimultihop" or "fever"."""
    if dataset == "hotpotqa":
        examples_path = paths.dataset_path(*_SHARED_FILES["adv_hotpotqa_fewshot"])
        rationale_path = paths.dataset_path(*_SHARED_FILES["adv_hotpotqa_rationales"])
        examples = load_adv_hotpotqa(examples_path, split="all")
    elif dataset == "2wikimultihop":
        examples_path = paths.dataset_path(*_SHARED_FILES["2wikimultihop_fewshot"])
        rationale_path = paths.dataset_path(*_SHARED_FILES["2wikimultihop_rationales"])
        examples = load_2wikimultihop(examples_path)
    elif dataset == "fever":
        examples_path = paths.dataset_path(*_SHARED_FILES["fever_fewshot"])
        rationale_path = paths.dataset_path(*_SHARED_FILES["fever_rationales"])
        examples = load_fever(examples_path, ids=None, split="train")
    else:
        raise ValueError(f"no few-shot pool for {dataset!r}; choose 'hotpotqa', '2wikimultihop' or 'fever'")
    by_id = {example.id: example for example in examples}
    pool, seen = [], set()
    for qid, rationale, line in _rationale_lines(rationale_path):
        if qid not in by_id:
            raise DataError(rationale_path, f"id {qid!r} has no example in {examples_path}", line=line)
        if qid in seen:
            raise DataError(rationale_path, f"id {qid!r} has a second rationale", line=line)
        seen.add(qid)
        pool.append((by_id[qid], rationale))
    return pool


# --------------------------------------------------------------------------- corpora


def _added_id(text: str) -> str:
    return "added-" + hashlib.sha1(text.encode("utf-8")).hexdigest()[:10]


def build_corpus(*example_lists: Sequence[Example]) -> list[Passage]:
    """Union of the examples' paragraphs: first per title wins (id = title); "added" ones are deduplicated by text."""
    passages: list[Passage] = []
    seen: set[str] = set()
    for examples in example_lists:
        for example in examples:
            for paragraph in example.paragraphs:
                text = paragraph.text
                if not text:
                    continue
                pid = _added_id(text) if paragraph.title == ADVERSARIAL_TITLE else paragraph.title
                if pid in seen:
                    continue
                seen.add(pid)
                passages.append(Passage(pid, paragraph.title, text))
    return passages


def default_corpus(*extra: Sequence[Example]) -> list[Passage]:
    """The offline corpus: paragraphs of adversarial HotpotQA sim_dev + sim_train and the HotpotQA distractor sample.

    `extra` example lists (e.g. FEVER's evidence pages) come first: their paragraph wins a title both have, so
    passage ids stay unique (retrievers refuse duplicates; concatenating two corpora does not dedupe)."""
    return build_corpus(
        *extra,
        load_adv_hotpotqa(split="all"),
        load_adv_hotpotqa(paths.dataset_path(*_SHARED_FILES["adv_hotpotqa_fewshot"]), split="all"),
        load_hotpotqa(),
    )


def _decoded_lines(path: Path, handle: Any) -> Iterator[str]:
    """The lines of a binary file (split at \\n only) decoded as UTF-8, a leading BOM dropped; an error names the line."""
    for number, raw in enumerate(handle, start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise DataError(path, f"not UTF-8 text ({err.reason} at byte {err.start} of the line): re-encode the "
                            "file as UTF-8", line=number) from err
        yield line.removeprefix("\ufeff") if number == 1 else line


def _runs_on(last_line: int, count: int) -> str:
    return (f"this row runs on to line {last_line} ({count} passages read before it): an unclosed quote? "
            "DPR passages are one line each")


def _dpr_rows(path: str | Path, limit: int | None) -> Iterator[tuple[Passage, int]]:
    """(passage, line) from a DPR `psgs_w100.tsv`; every passage is one line, so a row that runs on is an error."""
    path = _existing_file(path)
    csv.field_size_limit(1 << 24)
    with path.open("rb") as handle:
        reader = csv.reader(_decoded_lines(path, handle), delimiter="\t", strict=True)  # a stray quote is an error
        try:
            header = [h.strip().lower() for h in next(reader, [])]
        except csv.Error as err:
            raise DataError(path, f"unreadable TSV header: {err}", line=1) from err
        if sorted(header) != ["id", "text", "title"]:
            raise DataError(path, f"expected the header 'id<TAB>text<TAB>title', got {header!r:.80}", line=1)
        columns = {name: header.index(name) for name in header}
        count = 0
        while limit is None or count < limit:
            line = reader.line_num + 1
            try:
                fields = next(reader, None)
            except csv.Error as err:
                if reader.line_num > line:
                    reason = f"{_runs_on(reader.line_num, count)} ({err})"
                elif "new-line character" in str(err):
                    reason = "a bare carriage return (\\r) inside an unquoted field: quote the field or remove the \\r"
                else:
                    reason = f"malformed quoting ({err})"
                raise DataError(path, f"unreadable TSV row: {reason}", line=line) from err
            if fields is None:
                if not count and limit != 0:
                    raise DataError(path, "no passages after the header (an empty corpus)")
                return
            if reader.line_num != line:
                raise DataError(path, _runs_on(reader.line_num, count), line=line)
            if not fields:
                continue
            if len(fields) != 3:
                raise DataError(path, f"expected 3 tab-separated columns, got {len(fields)}", line=line)
            pid = fields[columns["id"]].strip()
            if not pid:
                raise DataError(path, "empty passage id", line=line, field="id")
            yield Passage(pid, fields[columns["title"]], fields[columns["text"]]), line
            count += 1


def _unique_passages(rows: Iterable[tuple[Passage, int]], path: str | Path) -> list[Passage]:
    """The passages in order; a DataError at the second use of an id, naming the first line."""
    seen: dict[str, int] = {}
    passages = []
    for passage, line in rows:
        if passage.id in seen:
            raise DataError(path, f"duplicate passage id {passage.id!r} (first at line {seen[passage.id]})",
                            line=line, field="id")
        seen[passage.id] = line
        passages.append(passage)
    return passages


def iter_dpr_tsv(path: str | Path, limit: int | None = None) -> Iterator[Passage]:
    """Stream passages from a DPR `psgs_w100.tsv` (`id<TAB>text<TAB>title` with that header); ids are not checked."""
    return (passage for passage, _ in _dpr_rows(path, limit))


def read_dpr_tsv(path: str | Path, limit: int | None = None) -> list[Passage]:
    """Passages of a DPR `psgs_w100.tsv` file (the first `limit` only, read lazily, when given); ids must be unique."""
    return _unique_passages(_dpr_rows(path, limit), path)


def _jsonl_passage(row: dict, loc: _Loc) -> Passage:
    """A FlashRAG `{id, contents: '"title"\\ntext'}` row or an `{id, title, text}` row."""
    pid = str(_require(row, "id", (str, int), loc))
    if "contents" in row:
        contents = _require(row, "contents", str, loc)
        title, newline, text = contents.partition("\n")
        if not newline:
            return Passage(pid, "", contents.strip())
        return Passage(pid, title.strip().strip('"'), text.strip())
    return Passage(pid, _require(row, "title", str, loc), _require(row, "text", str, loc))


def _jsonl_rows(path: str | Path, limit: int | None) -> Iterator[tuple[Passage, int]]:
    """(passage, line) from a JSONL corpus, read line by line."""
    path = _existing_file(path)
    count = 0
    with path.open("rb") as handle:
        for number, raw in enumerate(_decoded_lines(path, handle), start=1):
            if limit is not None and count >= limit:
                return
            if not raw.strip():
                continue
            loc = _Loc(path, line=number)
            yield _jsonl_passage(_json_line(raw, loc), loc), number
            count += 1
    if not count and limit != 0:
        raise DataError(path, "empty file: no passages (an empty corpus)")


def iter_jsonl_corpus(path: str | Path, limit: int | None = None) -> Iterator[Passage]:
    """Stream passages from a JSONL corpus (FlashRAG `{id, contents}` or `{id, title, text}`); ids are not checked."""
    return (passage for passage, _ in _jsonl_rows(path, limit))


def read_jsonl_corpus(path: str | Path, limit: int | None = None) -> list[Passage]:
    """Passages of a JSONL corpus (the first `limit` only, read lazily, when given); ids must be unique."""
    return _unique_passages(_jsonl_rows(path, limit), path)


def load_corpus(path: str | Path = "") -> tuple[list[Passage], str]:
    """(passages, index name): "" for the offline HotpotQA paragraph corpus, a DPR `psgs_w100.tsv`, or an
    `{id, contents}` / `{id, title, text}` JSONL corpus (read in one streamed pass; indexes persist by name)."""
    if not str(path):
        return default_corpus(), "hotpot-corpus"
    path = _existing_file(path)
    name = re.sub(r"[^\w.-]+", "-", path.name.split(".")[0]) or "corpus"
    if path.suffix.lower() in (".tsv", ".csv", ".txt"):
        return read_dpr_tsv(path), name
    return read_jsonl_corpus(path), name


# --------------------------------------------------------------------------- samples


def sample(examples: Sequence[Example], n: int | None, seed: int = 0) -> list[Example]:
    """A seeded sample of n examples, kept in their original order (all of them when n is None or >= len)."""
    if n is None or n >= len(examples):
        return list(examples)
    if n < 0:
        raise ValueError(f"sample size must be >= 0, not {n}")
    keep = sorted(random.Random(seed).sample(range(len(examples)), n))
    return [examples[i] for i in keep]


# --------------------------------------------------------------------------- catalogue


def available_datasets() -> dict[str, Path]:
    """The shared data files that exist here, by short name (for the data tour)."""
    found = {name: paths.dataset_path(*parts) for name, parts in _SHARED_FILES.items()}
    return {name: path for name, path in found.items() if path.is_file()}


def load(name: str, **kwargs: Any) -> list[Example]:
    """Load a dataset by short name ("adv_hotpotqa", "hotpotqa", "2wikimultihop", "fever", "nq_open", ...)."""
    loaders: dict[str, Callable[..., list[Example]]] = {
        "adv_hotpotqa": load_adv_hotpotqa,
        "hotpotqa": load_hotpotqa,
        "2wikimultihop": load_2wikimultihop,
        "fever": load_fever,
        "nq_open": load_nq_open,
        "web_questions": load_web_questions,
        "triviaqa": load_triviaqa,
        "mintaka": load_mintaka,
    }
    if name not in loaders:
        raise ValueError(f"unknown dataset {name!r}; known: {', '.join(loaders)}")
    return loaders[name](**kwargs)
