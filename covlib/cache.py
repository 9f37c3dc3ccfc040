"""A persistent key-value cache (SQLite) behind every LLM and NLI call.

Each finished batch is committed at once, so a run killed mid-way keeps all
that it generated and the next run resumes from there. Keys are hashes of
everything that changes the output (model, prompt, decoding, sample index).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any, Iterable

from covlib import paths


def make_key(**parts: Any) -> str:
    """A stable hash of keyword parts (JSON with sorted keys)."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


_FINGERPRINTS: dict[tuple, str] = {}
UNFINGERPRINTED = ("card.json",)  # notes beside the weights that do not change the outputs


def fingerprint_dir(model_id_or_dir: str | Path) -> str | None:
    """For a local folder (model, adapter, judge): SHA-256 of its files' names and contents (card.json aside);
    None for anything else (a hub id).

    Retraining or replacing weights under the same name changes it, so cache keys that hold it
    never return the old model's outputs. Hashes are memoised per (file, size, mtime), so a
    folder is read once per process.
    """
    path = Path(model_id_or_dir)
    if not path.is_dir():
        return None
    files = sorted(f for f in path.rglob("*") if f.is_file() and f.name not in UNFINGERPRINTED)
    total = hashlib.sha256()
    for f in files:
        stat = f.stat()
        memo = (str(f.resolve()), stat.st_size, stat.st_mtime_ns)
        if memo not in _FINGERPRINTS:
            h = hashlib.sha256()
            with f.open("rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
            _FINGERPRINTS[memo] = h.hexdigest()
        total.update(f"{f.relative_to(path).as_posix()}\0{_FINGERPRINTS[memo]}\n".encode())
    return total.hexdigest()[:16]


class Cache:
    """A JSON-valued SQLite table; `None` path means the project's default cache file."""

    def __init__(self, path: str | Path | None = None, table: str = "entries"):
        self.path = Path(path) if path is not None else paths.cache_dir() / "calls.sqlite"
        if not table.isidentifier():
            raise ValueError(f"cache table name must be an identifier, got {table!r}")
        self.table = table
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=60, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(f"CREATE TABLE IF NOT EXISTS {self.table} (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            conn.commit()
            self._conn = conn
        return self._conn

    def get_many(self, keys: Iterable[str]) -> dict[str, Any]:
        """Values for those keys that are present."""
        keys = list(dict.fromkeys(keys))
        found: dict[str, Any] = {}
        with self._lock:
            db = self._db()
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = db.execute(f"SELECT key, value FROM {self.table} WHERE key IN ({marks})", chunk)
                found.update((k, json.loads(v)) for k, v in rows)
        return found

    def get(self, key: str, default: Any = None) -> Any:
        """One value, or `default`."""
        return self.get_many([key]).get(key, default)

    def put_many(self, items: dict[str, Any]) -> None:
        """Store and commit several values at once."""
        if not items:
            return
        rows = [(k, json.dumps(v, ensure_ascii=False)) for k, v in items.items()]
        with self._lock:
            db = self._db()
            db.executemany(f"INSERT OR REPLACE INTO {self.table} (key, value) VALUES (?, ?)", rows)
            db.commit()

    def put(self, key: str, value: Any) -> None:
        """Store and commit one value."""
        self.put_many({key: value})

    def __len__(self) -> int:
        with self._lock:
            return self._db().execute(f"SELECT COUNT(*) FROM {self.table}").fetchone()[0]

    def clear(self) -> None:
        """Delete every entry of this table."""
        with self._lock:
            self._db().execute(f"DELETE FROM {self.table}")
            self._db().commit()

    def close(self) -> None:
        """Close the connection (it reopens on next use)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
