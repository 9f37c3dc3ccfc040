"""A persistent key-value cache (SQLite) behind every LLM and NLI call.

Each finished batch is committed at once, so a run killed mid-way keeps all
that it generated and the next run resumes from there. Keys are hashes of
everything that changes the output (model, prompt, decoding, sample index).

A cache that cannot be used raises `CacheError` naming the file and what to do; a full disk, a file-size limit
(`ulimit -f`) or a quota says so and keeps the cache (every committed entry stays): deleting is advised only for a
file that SQLite or `PRAGMA quick_check` finds damaged. A table or entry of the wrong shape (written by another
version) is named, with the remedy; an entry that is not JSON is a miss, with a warning. A finished cache in a folder
this process cannot write to (a shared, read-only copy) is opened read-only: reading
works, storing a new result raises. `COVLIB_CACHE_READONLY=1` asks for read-only explicitly.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import threading
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from covlib.core import paths


def make_key(**parts: Any) -> str:
    """A stable hash of keyword parts (JSON with sorted keys)."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()  # a lone surrogate still gets its own key


_FINGERPRINTS: dict[tuple, str] = {}
UNFINGERPRINTED = ("card.json",)  # notes beside the weights that do not change the outputs


def fingerprint_file(path: str | Path) -> str:
    """SHA-256 of one file's contents (memoised per file, size and mtime, as `fingerprint_dir`)."""
    f = Path(path)
    stat = f.stat()
    memo = (str(f.resolve()), stat.st_size, stat.st_mtime_ns)
    if memo not in _FINGERPRINTS:
        h = hashlib.sha256()
        with f.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        _FINGERPRINTS[memo] = h.hexdigest()
    return _FINGERPRINTS[memo]


def fingerprint_dir(model_id_or_dir: str | Path, exclude: tuple[str, ...] = ()) -> str | None:
    """For a local folder (model, adapter, judge): SHA-256 of its files' names and contents (card.json aside, and
    the top-level subfolders named in `exclude`); None for anything else (a hub id).

    Retraining or replacing weights under the same name changes it, so cache keys that hold it
    never return the old model's outputs. Hashes are memoised per (file, size, mtime), so a
    folder is read once per process.
    """
    path = Path(model_id_or_dir)
    if not path.is_dir():
        return None
    files = sorted(f for f in path.rglob("*") if f.is_file() and f.name not in UNFINGERPRINTED
                   and f.relative_to(path).parts[0] not in exclude)
    total = hashlib.sha256()
    for f in files:
        total.update(f"{f.relative_to(path).as_posix()}\0{fingerprint_file(f)}\n".encode())
    return total.hexdigest()[:16]


class CacheError(RuntimeError):
    """The cache file cannot be used; the message names the file and the remedy."""


_REMEDY = "delete the file (its entries are recomputed on the next run) or point COVLIB_CACHE at another folder"
_SQLITE_IOERR, _SQLITE_CORRUPT, _SQLITE_FULL, _SQLITE_NOTADB = 10, 11, 13, 26  # primary result codes
_LOW_SPACE = 64 * 2**20  # bytes free below which a failed write is put down to a full disk


def _quick_check(path: Path) -> str | None:
    """PRAGMA quick_check of a cache file on a fresh read-only connection: "ok", what it found wrong (a file that is
    not a database included), or None when the check itself could not run (no file, no permission)."""
    if not path.is_file():
        return None
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error:
        return None
    try:
        rows = conn.execute("PRAGMA quick_check(5)").fetchall()
        return "; ".join(str(row[0]) for row in rows) or "no answer"
    except sqlite3.DatabaseError as err:
        code = getattr(err, "sqlite_errorcode", 0) & 0xFF
        damaged = code in (_SQLITE_CORRUPT, _SQLITE_NOTADB) or "malformed" in str(err) or "not a database" in str(err)
        return str(err) if damaged else None
    finally:
        conn.close()


def _file_size_limit() -> int | None:
    """This process's file-size limit in bytes (`ulimit -f`, RLIMIT_FSIZE), or None when there is none."""
    try:
        import resource  # not on Windows
        limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        return None if limit == resource.RLIM_INFINITY else limit
    except (ImportError, OSError, ValueError):
        return None


def _no_room_cause(folder: Path) -> tuple[str, str]:
    """(the likely reason a write found no room, what to do about it): a file-size limit of this process and/or a
    disk with little space left; when neither shows, each possibility (a disk quota among them)."""
    causes, fixes = [], []
    limit = _file_size_limit()
    if limit is not None:
        causes.append(f"a file-size limit (`ulimit -f`: {limit:,} bytes for this process) stops the cache file "
                      "from growing")
        fixes.append("raise the limit (`ulimit -f unlimited` in the shell that starts the run)")
    try:
        free: int | None = shutil.disk_usage(folder).free
    except OSError:
        free = None
    if free is not None and free < _LOW_SPACE:
        causes.append(f"the disk holding {folder} is full ({free:,} bytes free)")
        fixes.append(f"free space on the disk holding {folder}")
    if not causes:
        causes.append("the disk is full, a disk quota is reached, or a file-size limit (`ulimit -f`) stops the file "
                      "from growing")
        fixes.append(f"free space on the disk holding {folder}, or raise the quota or the file-size limit")
    fix = " and ".join(fixes)
    return " and ".join(causes), fix[:1].upper() + fix[1:]


Shape = Callable[[Any], "str | None"]  # a cached value -> None when it has the expected shape, else what is wrong


def _real(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def number_shape(value: Any) -> str | None:
    """A number (a log-probability)."""
    return None if _real(value) else "not a number"


def probabilities_shape(value: Any) -> str | None:
    """Three numbers: P(entailment, neutral, contradiction)."""
    if isinstance(value, list) and len(value) == 3 and all(_real(x) for x in value):
        return None
    return "not a list of 3 numbers"


_COMPLETION_FIELDS = {"text": str, "tokens": list, "token_logprobs": list, "finish_reason": str}


def completion_shape(value: Any) -> str | None:
    """A Completion's fields: text (str), tokens (list of str), token_logprobs (list of numbers), finish_reason."""
    if not isinstance(value, dict) or "text" not in value:
        return "not a completion record (a mapping with a text)"
    for name, kind in _COMPLETION_FIELDS.items():
        if name in value and not isinstance(value[name], kind):
            return f"its {name} is not a {kind.__name__}"
    if set(value) - set(_COMPLETION_FIELDS):
        return f"unknown fields {sorted(set(value) - set(_COMPLETION_FIELDS))}"
    if not all(isinstance(t, str) for t in value.get("tokens", [])):
        return "its tokens are not all strings"
    if not all(_real(x) for x in value.get("token_logprobs", [])):
        return "its token_logprobs are not all numbers"
    return None


class Cache:
    """A JSON-valued SQLite table; `None` path means the project's default cache file."""

    def __init__(self, path: str | Path | None = None, table: str = "entries"):
        self.path = Path(path) if path is not None else paths.cache_dir() / "calls.sqlite"
        if not table.isidentifier():
            raise ValueError(f"cache table name must be an identifier, got {table!r}")
        self.table = table
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._opened_readonly = False  # the mode `_db` chose when it opened the connection

    @property
    def readonly(self) -> bool:
        """Whether this cache is opened read-only (COVLIB_CACHE_READONLY=1, or an existing file in a folder we cannot write)."""
        if os.environ.get("COVLIB_CACHE_READONLY") == "1":
            return True
        if self.path.is_file():
            return not (os.access(self.path.parent, os.W_OK) and os.access(self.path, os.W_OK))
        folder = next((p for p in (self.path.parent, *self.path.parent.parents) if p.exists()), None)
        return folder is not None and folder.is_dir() and not os.access(folder, os.W_OK)  # could not create it

    @contextmanager
    def _guard(self, action: str) -> Iterator[None]:
        """SQLite errors re-raised as CacheError naming the file and the remedy."""
        try:
            yield
        except sqlite3.DatabaseError as err:
            text = str(err)
            if self._conn is not None and self._conn.in_transaction:
                try:  # a failed write's transaction is undone: what was committed before stays as it was
                    self._conn.rollback()
                except sqlite3.Error:
                    pass
            code = getattr(err, "sqlite_errorcode", 0) & 0xFF  # the primary code (SQLITE_IOERR_WRITE -> SQLITE_IOERR)
            if "readonly" in text or "read-only" in text:
                remedy = "the cache is read-only here: make the folder writable or point COVLIB_CACHE at a writable one"
            elif "locked" in text:
                remedy = "another process held a write lock for over 60 s; retry when it has finished"
            elif code in (_SQLITE_CORRUPT, _SQLITE_NOTADB):  # SQLite itself found the file damaged or not a database
                remedy = f"it is not a usable SQLite cache: {_REMEDY}"
            else:  # a full disk, a file-size limit, a quota, an I/O error: delete only what is really damaged
                remedy = self._checked_remedy(text, code)
            raise CacheError(f"cache {self.path}: {action} failed ({text}); {remedy}") from None

    def _checked_remedy(self, text: str, code: int) -> str:
        """The remedy for an error that is not itself corruption: PRAGMA quick_check on a fresh read-only
        connection decides between "delete it" (damaged) and "it is intact: make room" (everything else)."""
        verdict = _quick_check(self.path)
        if verdict is not None and verdict != "ok":
            return f"it is not a usable SQLite cache (PRAGMA quick_check: {verdict}): {_REMEDY}"
        state = ("The cache is intact (PRAGMA quick_check: ok)" if verdict == "ok"
                 else "Nothing shows the cache is damaged")
        state += ": every entry finished so far is kept and the next run resumes from it, so do not delete it. "
        no_room = code in (_SQLITE_FULL, _SQLITE_IOERR) or "disk is full" in text or "disk I/O error" in text
        if not no_room:
            return (f"{state}Check the file's permissions and the disk holding {self.path.parent}, and rerun, or "
                    "point COVLIB_CACHE at another folder")
        cause, fix = _no_room_cause(self.path.parent)
        return f"{cause}. {state}{fix}, or point COVLIB_CACHE at a folder on a disk with room, and rerun"

    def _db(self) -> sqlite3.Connection | None:
        """The connection (None for a read-only cache whose file does not exist: nothing is cached)."""
        if self._conn is not None:
            return self._conn
        if self.path.is_dir():
            raise CacheError(f"cache path {self.path} is a folder, not a SQLite file: rename it, or point "
                             "COVLIB_CACHE at another folder")
        with self._guard("opening"):
            self._opened_readonly = self.readonly
            if self._opened_readonly:
                if not self.path.is_file():
                    return None
                conn = self._open_readonly()
            else:
                try:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                except OSError as err:
                    raise CacheError(f"cache {self.path}: cannot create its folder ({err}); point COVLIB_CACHE "
                                     "at a folder you can write to") from None
                conn = sqlite3.connect(self.path, timeout=60, check_same_thread=False)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute(f"CREATE TABLE IF NOT EXISTS {self.table} (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
                conn.commit()
            columns = [row[1] for row in conn.execute(f"PRAGMA table_info({self.table})")]
            if columns not in ([], ["key", "value"]):  # [] : a read-only file without the table
                conn.close()
                raise CacheError(f"cache {self.path}: its table {self.table!r} has the columns ({', '.join(columns)}),"
                                 " not (key, value): the file was written by another version of covlib. Start a new "
                                 f"cache: delete {self.path} (`make clean-cache` deletes the project's "
                                 ".cache/calls.sqlite; every call is recomputed) or point COVLIB_CACHE at another folder")
            self._conn = conn
        return self._conn

    def _open_readonly(self) -> sqlite3.Connection:
        """mode=ro sees a live writer's WAL; where it cannot (no -shm and a folder we cannot write to), immutable."""
        uri = self.path.resolve().as_uri()
        try:
            conn = sqlite3.connect(f"{uri}?mode=ro", uri=True, check_same_thread=False)
            conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
            return conn
        except sqlite3.OperationalError:
            conn = sqlite3.connect(f"{uri}?mode=ro&immutable=1", uri=True, check_same_thread=False)
            conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()  # garbage fails here, not later
            return conn

    def _reader(self) -> sqlite3.Connection | None:
        """The connection to read from; None when there is nothing to read (read-only, and no file or no table)."""
        db = self._db()
        if db is None or not self._opened_readonly:
            return db
        query = "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?"
        return db if db.execute(query, (self.table,)).fetchall() else None

    def get_many(self, keys: Iterable[str], shape: Shape | None = None) -> dict[str, Any]:
        """Values for those keys that are present. With `shape` (e.g. `completion_shape`), a value of another
        shape (an entry written by another version) raises CacheError naming the file, table and entry."""
        keys = list(dict.fromkeys(keys))
        found: dict[str, Any] = {}
        with self._lock, self._guard("reading"):
            db = self._reader()
            if db is None:
                return found
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                for key, text in db.execute(f"SELECT key, value FROM {self.table} WHERE key IN ({marks})", chunk):
                    try:
                        found[key] = json.loads(text)
                    except (ValueError, TypeError) as err:  # not JSON: a miss, recomputed and stored over it
                        warnings.warn(f"cache {self.path}, table {self.table!r}: entry {key} is not JSON ({err}); "
                                      "it is treated as missing: recomputed and stored again"
                                      + (" (not here: the cache is read-only)" if self.readonly else ""),
                                      stacklevel=2)
        if shape is not None:
            for key, value in found.items():
                wrong = shape(value)
                if wrong is not None:
                    self._wrong_shape(key, value, wrong)
        return found

    def _wrong_shape(self, key: str, value: Any, wrong: str) -> None:
        raise CacheError(
            f"cache {self.path}, table {self.table!r}: entry {key} has the wrong shape ({wrong}: "
            f"{json.dumps(value)[:80]}); it was probably written by another version of covlib. Run "
            "`make clean-cache` (clears the project's .cache: every cached call is recomputed), or delete this entry "
            f"(sqlite3 {self.path} \"DELETE FROM {self.table} WHERE key='{key}'\"), or point COVLIB_CACHE at "
            "another folder")

    def get(self, key: str, default: Any = None) -> Any:
        """One value, or `default`."""
        return self.get_many([key]).get(key, default)

    def require_writable(self, missing: int) -> None:
        """Raise CacheError before computing `missing` new results that a read-only cache could not keep."""
        if missing and self.readonly:
            raise CacheError(f"cache {self.path} is read-only (a folder this process cannot write to, or "
                             f"COVLIB_CACHE_READONLY=1): {missing} new results are not in it and could not be "
                             "stored; point COVLIB_CACHE at a writable folder to compute what is missing")

    def put_many(self, items: dict[str, Any]) -> None:
        """Store and commit several values at once."""
        if not items:
            return
        self.require_writable(len(items))
        rows = [(k, json.dumps(v)) for k, v in items.items()]  # ASCII escapes: any str, a lone surrogate too, stores
        with self._lock, self._guard("writing"):
            db = self._db()
            db.executemany(f"INSERT OR REPLACE INTO {self.table} (key, value) VALUES (?, ?)", rows)
            db.commit()

    def put(self, key: str, value: Any) -> None:
        """Store and commit one value."""
        self.put_many({key: value})

    def __len__(self) -> int:
        with self._lock, self._guard("counting"):
            db = self._reader()
            if db is None:
                return 0
            # fetchall, not fetchone: a statement left unfinished can keep its read snapshot open
            return db.execute(f"SELECT COUNT(*) FROM {self.table}").fetchall()[0][0]

    def clear(self) -> None:
        """Delete every entry of this table."""
        with self._lock, self._guard("clearing"):
            db = self._db()
            if db is not None:
                db.execute(f"DELETE FROM {self.table}")
                db.commit()

    def close(self) -> None:
        """Close the connection (it reopens on next use)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


def cached_batch(cache: Cache, jobs: Iterable[tuple[str, Any]],
                 compute: Callable[[dict[str, Any]], Iterable[dict[str, Any]]], shape: Shape | None = None) -> dict[str, Any]:
    """Every job's value by its key: those `cache` holds are read, and the misses go to one call of `compute`.

    `jobs` are (key, job) pairs; `compute` gets the missing ones as {key: job} (each key once, with its first job,
    in order) and yields {key: value} batches, each stored and committed as it comes: a killed run keeps them and
    the next one computes only the rest. A read-only cache refuses before `compute` runs. `shape` checks what is read.
    """
    jobs = list(jobs)
    found = cache.get_many((key for key, _ in jobs), shape=shape)
    todo: dict[str, Any] = {}
    for key, job in jobs:
        if key not in found:
            todo.setdefault(key, job)
    if todo:
        cache.require_writable(len(todo))
        batches = compute(todo)
        try:
            for new in batches:
                cache.put_many(new)
                found.update(new)
        finally:  # a generator left part-way (an error while storing) stops now, not when it is collected
            close = getattr(batches, "close", None)
            if close is not None:
                close()
    return found
