"""Passage corpora: the offline HotpotQA paragraph corpus, DPR `psgs_w100.tsv` and JSONL corpora, and `load_corpus`.

`build_corpus` keeps the first paragraph of each title (ids are the titles); adversarial "added" paragraphs are
deduplicated by text with ids "added-<sha1 of text, 10 hex>". Large files stream line by line; ids must be unique.
"""

from __future__ import annotations

import csv
import hashlib
import re
from contextlib import closing
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from covlib.core import paths
from covlib.core.records import DataError, Example, Passage
from covlib.data.multihop import ADVERSARIAL_TITLE, load_adv_hotpotqa, load_hotpotqa
from covlib.data.readers import (SHARED_FILES, Loc, binary_lines, csv_reader, data_suffix, existing_file, json_line,
                                 require)


# --------------------------------------------------------------------------- corpora

# What retrieval over the offline paragraph corpus (`default_corpus`) is: not open retrieval, since the corpus is the
# questions' own paragraphs; a claim tested on it is shown, not counted (`near_oracle` in the claims ledger).
NEAR_ORACLE_CORPUS = "the offline corpus holds every Adversarial HotpotQA paragraph, the test questions' gold included"


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
        load_adv_hotpotqa(paths.dataset_path(*SHARED_FILES["adv_hotpotqa_fewshot"]), split="all"),
        load_hotpotqa(),
    )


def _decoded_lines(path: Path) -> Iterator[str]:
    """The lines of a file (split at \\n only, gzip decompressed) decoded as UTF-8, a leading BOM dropped; an error
    names the line."""
    for number, raw in enumerate(binary_lines(path), start=1):
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
    path = existing_file(path)
    with closing(_decoded_lines(path)) as lines:  # the file closes when a `limit` stops early
        reader = csv_reader(lines, delimiter="\t", strict=True)  # a stray quote is an error
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


def _jsonl_passage(row: dict, loc: Loc) -> Passage:
    """A FlashRAG `{id, contents: '"title"\\ntext'}` row or an `{id, title, text}` row."""
    pid = str(require(row, "id", (str, int), loc))
    if "contents" in row:
        contents = require(row, "contents", str, loc)
        title, newline, text = contents.partition("\n")
        if not newline:
            return Passage(pid, "", contents.strip())
        return Passage(pid, title.strip().strip('"'), text.strip())
    return Passage(pid, require(row, "title", str, loc), require(row, "text", str, loc))


def _jsonl_rows(path: str | Path, limit: int | None) -> Iterator[tuple[Passage, int]]:
    """(passage, line) from a JSONL corpus, read line by line."""
    path = existing_file(path)
    count = 0
    with closing(_decoded_lines(path)) as lines:
        for number, raw in enumerate(lines, start=1):
            if limit is not None and count >= limit:
                return
            if not raw.strip():
                continue
            loc = Loc(path, line=number)
            yield _jsonl_passage(json_line(raw, loc), loc), number
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
    path = existing_file(path)
    name = re.sub(r"[^\w.-]+", "-", path.name.split(".")[0]) or "corpus"
    if data_suffix(path) in (".tsv", ".csv", ".txt"):
        return read_dpr_tsv(path), name
    return read_jsonl_corpus(path), name
