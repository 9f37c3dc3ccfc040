"""The dataset readers' shared plumbing: JSON / JSON-lines records, hub rows, where a record came from, field checks.

`iter_records` sniffs a JSON list or JSON lines and yields each object with its `Loc` (file, 1-based line or 0-based
record index), whose `error(message, field)` is the `DataError` every reader raises; `source_rows` reads a local file
or, for a hub id, a Hugging Face dataset's rows the same way. The validators (`require`, `require_text`, `str_list`,
`nonempty_answers`, `unique_ids`, ...) are what the family modules (multihop, fever, open_qa, fewshot, corpora) check
fields with; `SHARED_FILES` names the files of the shared data folder by short name. Every loader opens files
here (`read_text` / `read_bytes` / `binary_lines`), which read gzip transparently (told by the magic bytes), and
builds its CSV/TSV reader with `csv_reader`, which lifts csv's field size limit when it runs. A read stops at
`MAX_DECOMPRESSED_BYTES` (a gzip line: `MAX_LINE_BYTES`) naming the file, never a bare MemoryError; bzip2, zip, xz,
zstd or a second gzip is named as such, not "not UTF-8".
"""

from __future__ import annotations

import csv
import gzip
import json
import re
import sys
import zlib
from pathlib import Path
from typing import Any, Iterable, Iterator, NamedTuple, Sequence

from covlib.core import paths
from covlib.core.records import DataError, Example

SHARED_FILES = {
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


# --------------------------------------------------------------------------- input checks


class Loc(NamedTuple):
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


def require(record: Any, field: str, types: type | tuple[type, ...], loc: Loc, name: str | None = None) -> Any:
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


def str_list(value: Any, loc: Loc, name: str) -> list[str]:
    """A list of strings (a lone string counts as a one-element list)."""
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise loc.error(f"field {name!r} should be a list of strings, got {value!r:.80}", field=name)
    return list(value)


def unique(items: Sequence[str]) -> list[str]:
    """Non-empty stripped strings in order, without repeats."""
    return list(dict.fromkeys(s.strip() for s in items if s and s.strip()))


def require_text(record: Any, field: str, loc: Loc, name: str | None = None) -> str:
    """record[field] as a string that is not empty or whitespace only (kept as written)."""
    value = require(record, field, str, loc, name)
    if not value.strip():
        raise loc.error(f"field {name or field!r} is empty", field=name or field)
    return value


def nonempty_answers(answers: list[str], loc: Loc, field: str) -> list[str]:
    """The answers without blanks or repeats; a DataError naming `field` when none is left."""
    kept = unique(answers)
    if not kept:
        raise loc.error(f"no answer: {field!r} is empty (accuracy against no answer is always 0)", field=field)
    return kept


def _where(loc: Loc) -> str:
    return f"line {loc.line}" if loc.line is not None else f"record {loc.index}"


def unique_ids(rows: Iterable[tuple[Example, Loc]]) -> list[Example]:
    """The examples in order; a DataError at the second use of an id, naming where it was first used."""
    seen: dict[str, Loc] = {}
    examples = []
    for example, loc in rows:
        if example.id in seen:
            raise loc.error(f"duplicate id {example.id!r} (first used at {_where(seen[example.id])}): ids must be "
                            "unique, or selections by id and few-shot pools pick the wrong record", field="id")
        seen[example.id] = loc
        examples.append(example)
    return examples


def _data_hint(path: Path) -> str:
    """For a missing file inside the data folder: where that folder came from and how to set it ("" elsewhere)."""
    try:
        inside = path.resolve().is_relative_to(paths.data_dir())
    except (OSError, ValueError):
        return ""
    return f"; {paths.describe_data_dir()}" if inside else ""


def existing_file(path: str | Path) -> Path:
    """`path` as a Path; a DataError when it does not exist or is not a file."""
    path = Path(path)
    if not path.exists():
        raise DataError(path, "file not found" + _data_hint(path))
    if not path.is_file():
        raise DataError(path, "not a file")
    return path


GZIP_MAGIC = b"\x1f\x8b"
CSV_FIELD_LIMIT = min(sys.maxsize, 2**31 - 1)  # csv's default is 131072 characters; a C long on every platform


def is_gzip(path: str | Path) -> bool:
    """Whether a file starts with the gzip magic bytes (whatever its name: `psgs_w100.tsv.gz`, or no `.gz`)."""
    with Path(path).open("rb") as handle:
        return handle.read(2) == GZIP_MAGIC


def data_suffix(path: str | Path) -> str:
    """The lower-cased format suffix, a trailing `.gz` ignored: ".tsv" for `psgs_w100.tsv.gz`."""
    path = Path(path)
    if path.suffix.lower() == ".gz":
        path = path.with_suffix("")
    return path.suffix.lower()


def _gzip_error(path: Path, err: Exception, after_line: int | None = None) -> DataError:
    where = f" after line {after_line}" if after_line else ""
    return DataError(path, f"truncated or corrupt gzip file ({type(err).__name__}: {err}){where}: download or "
                     "compress it again")


_GZIP_ERRORS = (EOFError, OSError, zlib.error)  # truncated stream, bad header / CRC (BadGzipFile), bad deflate data

MAX_DECOMPRESSED_BYTES = 2 * 2**30  # a whole-file read (JSON, JSON lines, CSV) stops here: a gzip bomb, or a wrong file
MAX_LINE_BYTES = 2**30  # one decompressed line of a streamed file (a corpus passage); the file may be any size
_COMPRESSIONS = {  # magic bytes, and the command that decompresses to stdout (gzip: read transparently, once)
    "gzip": (rb"\x1f\x8b", "gunzip -c"), "zip": (rb"PK(\x03\x04|\x05\x06)", "unzip -p"),
    "bzip2": (rb"BZh[1-9](1AY&SY|\x17rE8P\x90)", "bunzip2 -c"), "xz": (rb"\xfd7zXZ\x00", "unxz -c"),
    "zstd": (rb"\(\xb5/\xfd", "zstd -dc")}


def compressed_kind(head: bytes) -> str | None:
    """The compression whose magic bytes start `head` ("gzip", "bzip2", "zip", "xz", "zstd"), else None."""
    return next((kind for kind, (magic, _) in _COMPRESSIONS.items() if re.match(magic, head)), None)


def _refuse_compressed(path: Path, head: bytes, inside_gzip: bool) -> None:
    """A DataError when `head` (the first bytes after any gzip layer) starts a compressed stream, not text."""
    if (kind := compressed_kind(head)) is None:
        return
    name = re.sub(r"(\.(gz|gzip|bz2|zip|xz|zst|zstd))+$", "", path.name, flags=re.I)
    out = name if name != path.name else f"plain-{name}"
    if inside_gzip:
        tool = "funzip" if kind == "zip" else _COMPRESSIONS[kind][1]  # funzip: unzip from a pipe
        twice = " (compressed twice)" if kind == "gzip" else ""
        raise DataError(path, f"is {kind}-compressed inside its gzip{twice}: decompress it (gunzip -c {path.name} | "
                        f"{tool} > {out}) and give the result")
    raise DataError(path, f"is {kind}-compressed, not text: decompress it ({_COMPRESSIONS[kind][1]} {path.name} > "
                    f"{out}) and give the decompressed file; only gzip is read transparently")


def _too_big(path: Path, read: int, cap: int, line: int | None = None) -> DataError:
    zipped, limit = is_gzip(path), "MAX_LINE_BYTES" if line else "MAX_DECOMPRESSED_BYTES"
    what = f"line {line} is over" if line else "expands to over" if zipped else "is over"
    return DataError(path, f"{what} {cap:,} bytes (stopped after {'decompressing' if zipped else 'reading'} {read:,} "
                     "bytes): a gzip bomb, a wrong file, or one too large to hold in memory here; check the file, "
                     f"and only if it is meant to be this large raise covlib.data.readers.{limit}")


def _out_of_memory(path: Path, read: int) -> DataError:
    return DataError(path, f"ran out of memory after reading {read:,} bytes{' (decompressed)' if is_gzip(path) else ''}"
                     ": too large to hold in memory here (a gzip bomb or a wrong file?); check it, or use a machine "
                     "with more memory")


def binary_lines(path: str | Path) -> Iterator[bytes]:
    """The lines of a file as bytes (split at \n only, no newline translation), gzip decompressed transparently
    (told by the magic bytes) and streamed; a truncated or corrupt gzip file, a decompressed line over
    MAX_LINE_BYTES, or content compressed another way (bzip2, zip, xz, zstd, gzip twice) is a DataError naming
    the file."""
    path = existing_file(path)
    if not is_gzip(path):
        with path.open("rb") as handle:
            _refuse_compressed(path, handle.peek(16)[:16], inside_gzip=False)
            yield from handle  # a line can be no longer than the file on disk
        return
    cap = MAX_LINE_BYTES
    count = 0
    with gzip.open(path, "rb") as handle:
        while True:
            try:
                raw = handle.readline(cap + 1)  # at most cap + 1 bytes: a bomb's endless line stops there
            except _GZIP_ERRORS as err:
                raise _gzip_error(path, err, count) from err
            except MemoryError:
                raise _out_of_memory(path, count) from None
            if not raw:
                return
            if len(raw) > cap:
                raise _too_big(path, len(raw), cap, line=count + 1)
            if count == 0:
                _refuse_compressed(path, raw[:16], inside_gzip=True)
            count += 1
            yield raw


def read_bytes(path: str | Path) -> bytes:
    """A file's bytes, gzip decompressed transparently (by the magic bytes) in chunks up to MAX_DECOMPRESSED_BYTES;
    a DataError naming the file for a truncated .gz, a larger expansion, or a MemoryError."""
    path = existing_file(path)
    cap = MAX_DECOMPRESSED_BYTES
    chunks: list[bytes] = []
    read = 0
    try:
        with (gzip.open(path, "rb") if is_gzip(path) else path.open("rb")) as handle:
            while chunk := handle.read(min(1 << 20, cap + 1 - read)):
                chunks.append(chunk)
                read += len(chunk)
                if read > cap:
                    raise _too_big(path, read, cap)
        return b"".join(chunks)
    except _GZIP_ERRORS as err:
        if not is_gzip(path):
            raise
        raise _gzip_error(path, err) from err
    except MemoryError:
        chunks.clear()
        raise _out_of_memory(path, read) from None


def csv_reader(lines: Iterable[str], **options: Any) -> Any:
    """`csv.reader(lines, **options)` with the field size limit raised (set here, where a reader runs, not at
    import): a long passage (30 MB) is one field, not "field larger than field limit (131072)"."""
    if csv.field_size_limit() < CSV_FIELD_LIMIT:
        csv.field_size_limit(CSV_FIELD_LIMIT)
    return csv.reader(lines, **options)


def read_text(path: str | Path) -> str:
    """A file's text decoded as UTF-8 (a leading BOM dropped, newlines kept as written, gzip decompressed
    transparently); a DataError names the line."""
    path = existing_file(path)
    raw = read_bytes(path)  # bytes, not read_text: no newline translation (a "\r" inside a quoted field stays)
    _refuse_compressed(path, raw[:16], is_gzip(path))  # bzip2, zip, xz, zstd or gzip twice: not "not UTF-8"
    try:
        return raw.decode("utf-8-sig")  # a byte-order mark is not part of the first record
    except MemoryError:
        size = len(raw)
        del raw
        raise _out_of_memory(path, size) from None
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        raise DataError(path, f"not UTF-8 text ({err.reason} at byte {err.start}): re-encode the file as UTF-8",
                        line=line) from err


def json_line(raw: str, loc: Loc) -> Any:
    """One parsed JSONL line; a DataError naming the file and line when it is not JSON."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError as err:
        raise loc.error(f"invalid JSON line: {err.msg} (column {err.colno})") from err


def numbered_lines(text: str) -> Iterator[tuple[int, str]]:
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


def iter_records(path: str | Path, allow_empty: bool = False) -> Iterator[tuple[dict, Loc]]:
    """(record, where) for each object of a JSON-list or JSON-lines file (sniffed); `where.error(msg, field)` names file and line.

    An empty file (or `[]`) is an error unless `allow_empty`: a dataset with no record is a wrong path or a
    failed download far more often than intended.
    """
    path = Path(path)
    text = read_text(path)
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
            loc = Loc(path, index=index)
            if not isinstance(record, dict):
                raise loc.error(f"expected an object, got {type(record).__name__}")
            yield record, loc
        return
    for number, raw in numbered_lines(text):
        if not raw.strip():
            continue
        loc = Loc(path, line=number)
        record = json_line(raw, loc)
        if not isinstance(record, dict):
            raise loc.error(f"expected a JSON object, got {type(record).__name__}")
        yield record, loc


def read_json_value(path: str | Path) -> Any:
    """The one JSON value a file holds; a DataError naming the file and line when it is not JSON."""
    path = Path(path)
    try:
        return json.loads(read_text(path))
    except json.JSONDecodeError as err:
        raise DataError(path, f"invalid JSON: {err.msg} (column {err.colno})", line=err.lineno) from err


# --------------------------------------------------------------------------- hub


def _hub_rows(source: str, default_config: str | None, split: str, local_hint: str) -> Iterator[tuple[dict, Loc]]:
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
        yield dict(row), Loc(source, index=index)


def source_rows(source: str | Path, default_config: str | None, split: str,
                local_hint: str) -> Iterator[tuple[dict, Loc]]:
    """Records from a local JSON/JSONL file, or from the hub when `source` is a hub id."""
    if paths.is_hub_id(source):
        return _hub_rows(str(source), default_config, split, local_hint)
    return iter_records(source)
