"""Whether a disk index is whole: its arrays and passage maps checked, and one build of an index at a time.

Its arrays are opened with the damage named, its passage maps checked against meta.json, and a lock lets one build
of an index run at a time.
"""

from __future__ import annotations

import fcntl
import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from covlib.core.records import DataError

KIND = "bm25-disk"


def damaged(folder: Path) -> str:
    """The advice for a damaged index folder: which make command rebuilds it."""
    name = folder.name[: -len(f"-{KIND}")] if folder.name.endswith(f"-{KIND}") else "<name>"
    return (f"the index {folder} is damaged or incomplete (an interrupted copy, a disk filled up, files from two "
            f"builds mixed): rebuild it with `make index TSV=<corpus> NAME={name}`")


def open_array(path: Path, folder: Path) -> np.ndarray:
    """One of the index's arrays, memory-mapped; a missing or truncated file is named, with how to rebuild."""
    if not path.is_file():
        raise DataError(path, f"missing: {damaged(folder)}")
    try:
        return np.load(path, mmap_mode="r")
    except (ValueError, OSError, EOFError) as err:  # numpy: "mmap length is greater than file size", a bad header
        raise DataError(path, f"truncated or unreadable ({err}): {damaged(folder)}") from err


def offsets_hash(offsets: np.ndarray) -> str:
    """The fingerprint of the passage map written to meta.json: sha256 of the offsets (8 bytes a passage)."""
    h = hashlib.sha256()
    for i in range(0, len(offsets), 1 << 22):  # in 32 MB pieces: the map of 21M passages is 168 MB
        h.update(np.ascontiguousarray(offsets[i: i + (1 << 22)], dtype="<i8").tobytes())
    return h.hexdigest()


def check_maps(folder: Path, meta: dict, passages: Any) -> None:
    """Check passages.jsonl and offsets.npy against meta.json once, at open: a folder mixing files of two builds
    would otherwise return wrong passages. Indexes built before meta.json had "maps" get the count check only."""
    n = meta.get("n_passages")
    if len(passages) != n:
        raise DataError(folder / "offsets.npy", f"maps {len(passages):,} passages, meta.json says {n:,}: "
                        f"{damaged(folder)}")
    if sum(s["size"] for s in meta["shards"]) != n:
        raise DataError(folder / "meta.json", f"its shards hold {sum(s['size'] for s in meta['shards']):,} passages, "
                        f"not {n:,}: {damaged(folder)}")
    maps = meta.get("maps")
    if not isinstance(maps, dict):
        return
    size = (folder / "passages.jsonl").stat().st_size
    if size != maps.get("passages_bytes"):
        raise DataError(folder / "passages.jsonl", f"{size:,} bytes, meta.json says {maps.get('passages_bytes'):,}: "
                        f"{damaged(folder)}")
    if offsets_hash(passages.offsets) != maps.get("offsets_sha256"):
        raise DataError(folder / "offsets.npy", f"not the passage map this index was built with: {damaged(folder)}")


class BuildLock:
    """An exclusive lock on `<index>.lock` beside the index for the length of a build (fcntl.flock, so it goes with
    the process: a killed build leaves no stale lock). A second build of the same index refuses at once."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.path = folder.with_name(folder.name + ".lock")

    def __enter__(self) -> "BuildLock":
        self._file = open(self.path, "a+")
        try:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._file.close()
            name = self.folder.name[: -len(f"-{KIND}")] if self.folder.name.endswith(f"-{KIND}") else self.folder.name
            raise RuntimeError(f"another build of {name} is running (it holds {self.path}): wait for it to finish, "
                               "or stop it, then run this again") from None
        return self

    def __exit__(self, *exc) -> None:
        fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
        self._file.close()
