"""What every retriever shares: `Hit`, the `Retriever` protocol, `BaseRetriever` (batch search, persistence), input checks.

Every retriever has the same shape:

    r = BM25Retriever(passages)                  # or TfidfRetriever, DenseRetriever
    hits = r.search("who wrote Hamlet?", k=5)    # list[Hit(passage, score)], best first
    r.search_batch(queries, k=5)                 # list[list[Hit]]
    r.save(folder); r = BM25Retriever.load(folder)
    r = load_or_build("bm25", passages, "hotpot")   # persisted under paths.index_dir()

Sparse retrievers never return a passage that shares no term with the query (score 0),
so they may return fewer than k hits; ties are broken by corpus order.

Input rules, the same for every retriever: `k` is a whole number >= 0 (0 gives no hits, a
negative k is an error, never "all but the last"); `search_batch` takes a list of strings (a lone
string is refused, not searched character by character); passage ids must be unique (a hit is
known by its id). A corpus where no passage has a searchable word (all empty or stopwords) gives
no hits, with a warning when it is indexed.
`top_sentences` is Verify-and-Edit's "top-3 sentences most similar to the question".
"""

from __future__ import annotations

import hashlib
import json
import re
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from covlib.core.records import DataError, Passage, text_list


FORMAT_VERSION = 1
WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Hit:
    """One retrieved passage and its score (higher is better)."""

    passage: Passage
    score: float

    @property
    def title(self) -> str:
        """The passage title."""
        return self.passage.title

    @property
    def text(self) -> str:
        """The passage text."""
        return self.passage.text


# ---------------------------------------------------------------------------
# text helpers


@lru_cache(maxsize=1)
def stopwords() -> frozenset[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS)


def tokenize(text: str) -> list[str]:
    """Lowercased regex words without sklearn's English stopwords (shared by BM25 backends)."""
    stop = stopwords()
    return [t for t in WORD.findall(text.lower()) if t not in stop]


def ngrams(text: str, n: int = 2) -> list[str]:
    """DrQA features: 1..n-grams of lowercased words, dropping any n-gram that contains a stopword."""
    stop = stopwords()
    words = WORD.findall(text.lower())
    keep = [w not in stop for w in words]
    out = [w for w, ok in zip(words, keep) if ok]
    for size in range(2, n + 1):
        for i in range(len(words) - size + 1):
            if all(keep[i:i + size]):
                out.append(" ".join(words[i:i + size]))
    return out


def corpus_fingerprint(passages: Sequence[Passage]) -> str:
    """SHA-256 over the ids, titles and texts of the passages, in order."""
    h = hashlib.sha256()
    for p in passages:
        h.update(fingerprint_part(p))
    return h.hexdigest()


def fingerprint_part(p: Passage) -> bytes:
    """One passage's share of `corpus_fingerprint` (the streamed disk index hashes passages one at a time)."""
    return f"{p.id}\x00{p.title}\x00{p.text}\x01".encode()


def check_k(k: Any) -> int:
    """k as an int: a whole number >= 0 (hits per query)."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
        raise ValueError(f"k must be a whole number >= 0 (hits per query), got {k!r}")
    return int(k)


def check_queries(queries: Any, where: str = "search_batch()") -> list[str]:
    """The queries as a list of strings; a lone string is refused (it would be searched character by character)."""
    return text_list(queries, "query", where, plural="queries")


def check_passages(passages: Iterable[Passage]) -> list[Passage]:
    """The passages as a list; ids must be unique, since a hit is known by its passage id."""
    passages = list(passages)
    first: dict[str, int] = {}
    for i, p in enumerate(passages):
        if not isinstance(p, Passage):
            raise TypeError(f"passage {i} is {type(p).__name__}, not records.Passage")
        if p.id in first:
            raise ValueError(f"duplicate passage id {p.id!r} (passages {first[p.id]} and {i}): ids must be unique")
        first[p.id] = i
    return passages


def warn_unsearchable(n: int) -> None:
    warnings.warn(f"none of the {n} passages has a searchable word (all empty or stopwords only): "
                  "every search returns no hit", stacklevel=3)


def top_k_indices(scores: np.ndarray, k: int, positive_only: bool) -> list[list[tuple[int, float]]]:
    """Row-wise top-k (index, score), best first, ties by index; optionally drop scores <= 0."""
    n = scores.shape[1]
    k = min(k, n)
    if k <= 0:
        return [[] for _ in range(scores.shape[0])]
    if k < n:
        part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    else:
        part = np.broadcast_to(np.arange(n), scores.shape)
    out = []
    for row, idx in zip(scores, part):
        idx = np.sort(idx)
        idx = idx[np.argsort(-row[idx], kind="stable")]
        out.append([(int(i), float(row[i])) for i in idx if not positive_only or row[i] > 0])
    return out


def write_passages(passages: Sequence[Passage], path: Path) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for p in passages:
            f.write(passage_line(p))


def passage_line(p: Passage) -> str:
    """A passage as its stored JSON line (passages.jsonl of every index folder)."""
    return json.dumps({"id": p.id, "title": p.title, "text": p.text}, ensure_ascii=False) + "\n"


def read_passages(path: Path) -> list[Passage]:
    out = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                d = json.loads(line)
                out.append(Passage(str(d["id"]), d["title"], d["text"]))
            except (json.JSONDecodeError, KeyError) as e:
                raise DataError(path, f"bad passage record ({e})", line=i) from e
    return out


def read_meta(folder: Path, kind: str | None = None) -> dict:
    path = Path(folder) / "meta.json"
    if not path.exists():
        raise DataError(path, "no retriever index here (meta.json missing)")
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise DataError(path, f"unreadable index metadata ({err}): delete the folder to rebuild the index") from err
    if not isinstance(meta, dict):
        raise DataError(path, "index metadata is not a JSON object: delete the folder to rebuild the index")
    if kind is not None and meta.get("kind") != kind:
        raise DataError(path, f"index is of kind {meta.get('kind')!r}, expected {kind!r}", field="kind")
    return meta


@runtime_checkable
class Retriever(Protocol):
    """What the methods need of a knowledge source: the top-k passages for each query, best first."""

    passages: Sequence[Passage]

    def search(self, query: str, k: int = 5) -> list[Hit]:
        """The top-k passages for one query."""

    def search_batch(self, queries: Sequence[str], k: int = 5, progress: bool = False) -> list[list[Hit]]:
        """The top-k passages for each query."""


class BaseRetriever:
    """Shared plumbing: passages, batch search by default, meta + passages persistence."""

    name = "base"
    passages: list[Passage]

    def search(self, query: str, k: int = 5) -> list[Hit]:
        """The top-k passages for one query, best first."""
        if not isinstance(query, str):
            raise TypeError(f"search() takes one query string, not {type(query).__name__}; for several use search_batch")
        return self.search_batch([query], k)[0]

    def search_batch(self, queries: Sequence[str], k: int = 5, progress: bool = False) -> list[list[Hit]]:
        """The top-k passages for each query."""
        raise NotImplementedError

    def config(self) -> dict:
        """Constructor settings recorded in meta.json."""
        return {}

    def _save_common(self, folder: str | Path) -> Path:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        write_passages(self.passages, folder / "passages.jsonl")
        meta = {"kind": self.name, "format": FORMAT_VERSION, "n_passages": len(self.passages),
                "fingerprint": corpus_fingerprint(self.passages), "config": self.config()}
        (folder / "meta.json").write_text(json.dumps(meta, indent=1))
        return folder

    def __len__(self) -> int:
        return len(self.passages)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self.passages)} passages, {self.config()})"


def progress_bar(it: Iterable, show: bool, desc: str) -> Iterable:
    if not show:
        return it
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return it
    return tqdm(it, desc=desc)


def search_passages(retriever: Retriever, queries: Sequence[str], k: int) -> list[list[Passage]]:
    """The top-k passages (not hits) for each query, best first: what a prompt's references are made of."""
    return [[hit.passage for hit in hits] for hits in retriever.search_batch(list(queries), k=k)]
