"""Knowledge sources: BM25, DrQA-style TF-IDF, dense MiniLM, the dataset's own paragraphs, web search.

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
import inspect
import json
import os
import re
import shutil
import urllib.parse
import urllib.request
import warnings
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from covlib import paths
from covlib.metrics import all_recall_at_k, recall_at_k  # noqa: F401  (re-exported: one place for recall)
from covlib.records import DataError, Paragraph, Passage, text_list

FORMAT_VERSION = 1
_WORD = re.compile(r"\w+")


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
def _stopwords() -> frozenset[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS)


def tokenize(text: str) -> list[str]:
    """Lowercased regex words without sklearn's English stopwords (shared by BM25 backends)."""
    stop = _stopwords()
    return [t for t in _WORD.findall(text.lower()) if t not in stop]


def ngrams(text: str, n: int = 2) -> list[str]:
    """DrQA features: 1..n-grams of lowercased words, dropping any n-gram that contains a stopword."""
    stop = _stopwords()
    words = _WORD.findall(text.lower())
    keep = [w not in stop for w in words]
    out = [w for w, ok in zip(words, keep) if ok]
    for size in range(2, n + 1):
        for i in range(len(words) - size + 1):
            if all(keep[i:i + size]):
                out.append(" ".join(words[i:i + size]))
    return out


def passage_string(p: Passage | Paragraph) -> str:
    """The text a retriever indexes for a passage: 'title: text' (title dropped when empty)."""
    return f"{p.title}: {p.text}" if p.title else p.text


def corpus_fingerprint(passages: Sequence[Passage]) -> str:
    """SHA-256 over the ids, titles and texts of the passages, in order."""
    h = hashlib.sha256()
    for p in passages:
        h.update(_fingerprint_part(p))
    return h.hexdigest()


def _fingerprint_part(p: Passage) -> bytes:
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


def _warn_unsearchable(n: int) -> None:
    warnings.warn(f"none of the {n} passages has a searchable word (all empty or stopwords only): "
                  "every search returns no hit", stacklevel=3)


def _topk(scores: np.ndarray, k: int, positive_only: bool) -> list[list[tuple[int, float]]]:
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


def _write_passages(passages: Sequence[Passage], path: Path) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for p in passages:
            f.write(_passage_line(p))


def _passage_line(p: Passage) -> str:
    """A passage as its stored JSON line (passages.jsonl of every index folder)."""
    return json.dumps({"id": p.id, "title": p.title, "text": p.text}, ensure_ascii=False) + "\n"


def _read_passages(path: Path) -> list[Passage]:
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


def _read_meta(folder: Path, kind: str | None = None) -> dict:
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


class _Retriever:
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
        _write_passages(self.passages, folder / "passages.jsonl")
        meta = {"kind": self.name, "format": FORMAT_VERSION, "n_passages": len(self.passages),
                "fingerprint": corpus_fingerprint(self.passages), "config": self.config()}
        (folder / "meta.json").write_text(json.dumps(meta, indent=1))
        return folder

    def __len__(self) -> int:
        return len(self.passages)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self.passages)} passages, {self.config()})"


# ---------------------------------------------------------------------------
# BM25


class BM25Retriever(_Retriever):
    """Okapi BM25 over 'title: text' with bm25s (default, sparse and fast) or rank-bm25.

    Both backends use k1 = 1.5, b = 0.75 and Robertson's idf log((N - df + .5) / (df + .5));
    bm25s clips a negative idf to 0 where rank-bm25 uses 0.25 x the mean idf, which only
    matters for terms in more than half the passages; otherwise scores are identical
    (bm25s scores are rescaled by the (k1 + 1) factor it omits).
    """

    name = "bm25"

    def __init__(self, passages: Sequence[Passage], backend: str = "bm25s", k1: float = 1.5, b: float = 0.75):
        if backend not in ("bm25s", "rank_bm25"):
            raise ValueError(f"backend must be 'bm25s' or 'rank_bm25', not {backend!r}")
        self.passages = check_passages(passages)
        self.backend, self.k1, self.b = backend, k1, b
        self._index: Any = None
        if self.passages:
            self._build()

    def _build(self) -> None:
        docs = [tokenize(passage_string(p)) for p in self.passages]
        if not any(docs):
            _warn_unsearchable(len(docs))
            self._index = None  # nothing to index (bm25s cannot index an empty vocabulary)
            return
        if self.backend == "bm25s":
            import bm25s

            self._index = bm25s.BM25(k1=self.k1, b=self.b, method="robertson")
            self._index.index(docs, show_progress=False)
        else:
            from rank_bm25 import BM25Okapi

            self._index = BM25Okapi([d or [""] for d in docs], k1=self.k1, b=self.b)

    def config(self) -> dict:
        """Backend and BM25 parameters."""
        return {"backend": self.backend, "k1": self.k1, "b": self.b}

    def search_batch(self, queries: Sequence[str], k: int = 5, progress: bool = False) -> list[list[Hit]]:
        """The top-k passages for each query by BM25 score (zero-score passages left out)."""
        k = check_k(k)
        toks = [tokenize(q) for q in check_queries(queries)]
        if self._index is None or not toks or k == 0:
            return [[] for _ in toks]
        k = min(k, len(self.passages))
        if self.backend == "bm25s":
            docs, scores = self._index.retrieve(toks, k=k, show_progress=progress, n_threads=0)
            scores = scores.astype(np.float64) * (self.k1 + 1)  # bm25s drops Okapi's constant (k1 + 1)
            ranked = []
            for d_row, s_row in zip(docs, scores):
                order = np.lexsort((d_row, -s_row))  # score desc, then corpus order
                ranked.append([(int(d_row[j]), float(s_row[j])) for j in order if s_row[j] > 0])
        else:
            ranked = []
            for t in _progress(toks, progress, "bm25"):
                s = self._index.get_scores(t) if t else np.zeros(len(self.passages))
                ranked.extend(_topk(np.asarray(s, dtype=np.float64)[None, :], k, positive_only=True))
        return [[Hit(self.passages[i], s) for i, s in row] for row in ranked]

    def save(self, folder: str | Path) -> Path:
        """Write passages, settings and (bm25s) the index to a folder."""
        folder = self._save_common(folder)
        if self.backend == "bm25s" and self._index is not None:
            self._index.save(str(folder / "bm25s"), show_progress=False)
        return folder

    @classmethod
    def load(cls, folder: str | Path) -> "BM25Retriever":
        """Read a folder written by save (rank-bm25 indexes are rebuilt from the passages)."""
        folder = Path(folder)
        meta = _read_meta(folder, cls.name)
        cfg = meta["config"]
        self = cls.__new__(cls)
        self.passages = _read_passages(folder / "passages.jsonl")
        self.backend, self.k1, self.b = cfg["backend"], cfg["k1"], cfg["b"]
        self._index = None
        if self.passages:
            if self.backend == "bm25s" and (folder / "bm25s").is_dir():
                import bm25s

                self._index = bm25s.BM25.load(str(folder / "bm25s"), show_progress=False)
            else:
                self._build()  # rank-bm25, or a corpus with no searchable word (nothing was saved)
        return self


# ---------------------------------------------------------------------------
# TF-IDF (DrQA)


class TfidfRetriever(_Retriever):
    """DrQA's document ranker: hashed 1..n-grams, log(1 + tf) x idf weights, sparse dot product.

    idf = max(0, log((N - df + .5) / (df + .5))) as in DrQA; the query gets the same
    weighting. Hashed features are compacted to the columns present in the corpus.
    """

    name = "tfidf"

    def __init__(self, passages: Sequence[Passage], ngram: int = 2, n_features: int = 2**24):
        self.passages = check_passages(passages)
        self.ngram, self.n_features = ngram, n_features
        self.columns = np.zeros(0, dtype=np.int64)  # hashed feature id of each compact column
        self.idf = np.zeros(0, dtype=np.float32)
        self.doc_matrix_t: Any = None  # (n_columns, n_passages) CSR of weights
        if self.passages:
            self._build()

    def _vectorizer(self):
        from sklearn.feature_extraction.text import HashingVectorizer

        ngram = self.ngram
        return HashingVectorizer(analyzer=lambda s: ngrams(s, ngram), n_features=self.n_features,
                                 alternate_sign=False, norm=None, dtype=np.float32)

    def _build(self) -> None:
        import scipy.sparse as sp

        counts = self._vectorizer().transform([passage_string(p) for p in self.passages]).tocsr()
        counts.sum_duplicates()
        n = counts.shape[0]
        self.columns, df = np.unique(counts.indices, return_counts=True)
        self.idf = np.maximum(np.log((n - df + 0.5) / (df + 0.5)), 0).astype(np.float32)
        compact = np.searchsorted(self.columns, counts.indices)
        weights = np.log1p(counts.data) * self.idf[compact]
        mat = sp.csr_matrix((weights.astype(np.float32), compact, counts.indptr), shape=(n, self.columns.size))
        self.doc_matrix_t = mat.T.tocsr()
        self.doc_matrix_t.eliminate_zeros()
        if self.columns.size == 0:
            _warn_unsearchable(n)

    def config(self) -> dict:
        """N-gram order and hash size."""
        return {"ngram": self.ngram, "n_features": self.n_features}

    def _query_matrix(self, queries: Sequence[str]):
        """Queries as (n_queries, n_columns) CSR of log(1 + tf) x idf; unseen features dropped."""
        import scipy.sparse as sp

        q = self._vectorizer().transform(list(queries)).tocsr()
        q.sum_duplicates()
        pos = np.minimum(np.searchsorted(self.columns, q.indices), self.columns.size - 1)
        known = self.columns[pos] == q.indices
        data = np.where(known, np.log1p(q.data) * self.idf[pos], 0).astype(np.float32)
        m = sp.csr_matrix((data, pos, q.indptr), shape=(q.shape[0], self.columns.size))
        m.eliminate_zeros()
        return m

    def search_batch(self, queries: Sequence[str], k: int = 5, progress: bool = False, chunk: int = 128) -> list[list[Hit]]:
        """The top-k passages for each query by TF-IDF dot product (zero-score passages left out)."""
        k, queries = check_k(k), check_queries(queries)
        if not self.passages or self.columns.size == 0:
            return [[] for _ in queries]
        out: list[list[Hit]] = []
        for start in _progress(range(0, len(queries), chunk), progress, "tfidf"):
            q = self._query_matrix(queries[start:start + chunk])
            scores = (q @ self.doc_matrix_t).toarray()
            for row in _topk(scores, k, positive_only=True):
                out.append([Hit(self.passages[i], s) for i, s in row])
        return out

    def save(self, folder: str | Path) -> Path:
        """Write passages, settings, the weight matrix (save_npz) and idf to a folder."""
        import scipy.sparse as sp

        folder = self._save_common(folder)
        if self.doc_matrix_t is not None:
            sp.save_npz(folder / "tfidf.npz", self.doc_matrix_t)
            np.save(folder / "columns.npy", self.columns)
            np.save(folder / "idf.npy", self.idf)
        return folder

    @classmethod
    def load(cls, folder: str | Path) -> "TfidfRetriever":
        """Read a folder written by save."""
        import scipy.sparse as sp

        folder = Path(folder)
        meta = _read_meta(folder, cls.name)
        self = cls.__new__(cls)
        self.passages = _read_passages(folder / "passages.jsonl")
        self.ngram, self.n_features = meta["config"]["ngram"], meta["config"]["n_features"]
        self.columns, self.idf, self.doc_matrix_t = np.zeros(0, np.int64), np.zeros(0, np.float32), None
        if self.passages:
            self.doc_matrix_t = sp.load_npz(folder / "tfidf.npz").tocsr()
            self.columns = np.load(folder / "columns.npy")
            self.idf = np.load(folder / "idf.npy")
        return self


# ---------------------------------------------------------------------------
# dense


class DenseRetriever(_Retriever):
    """Exact inner-product search over unit-normalised sentence embeddings (embedded MiniLM by default)."""

    name = "dense"

    def __init__(self, passages: Sequence[Passage], encoder: Any = None, batch_size: int = 64, progress: bool = False):
        from covlib.embedding import Encoder, load_encoder

        self.passages = check_passages(passages)
        self.encoder = encoder if isinstance(encoder, Encoder) else load_encoder(encoder)
        self.batch_size = batch_size
        self.embeddings = self.encoder.encode([passage_string(p) for p in self.passages],
                                              batch_size=batch_size, progress=progress)

    def config(self) -> dict:
        """The encoder name."""
        return {"encoder": self.encoder.name}

    def search_batch(self, queries: Sequence[str], k: int = 5, progress: bool = False, chunk: int = 1024) -> list[list[Hit]]:
        """The top-k passages for each query by cosine similarity."""
        k, queries = check_k(k), check_queries(queries)
        if not self.passages:
            return [[] for _ in queries]
        q = self.encoder.encode(list(queries), batch_size=self.batch_size, progress=progress)
        out: list[list[Hit]] = []
        for start in range(0, len(q), chunk):
            scores = q[start:start + chunk] @ self.embeddings.T
            for row in _topk(scores, k, positive_only=False):
                out.append([Hit(self.passages[i], s) for i, s in row])
        return out

    def save(self, folder: str | Path) -> Path:
        """Write passages, the encoder name and the embedding matrix (.npy) to a folder."""
        folder = self._save_common(folder)
        np.save(folder / "embeddings.npy", self.embeddings)
        return folder

    @classmethod
    def load(cls, folder: str | Path, encoder: Any = None, batch_size: int = 64) -> "DenseRetriever":
        """Read a folder written by save; the query encoder is the recorded one unless given."""
        from covlib.embedding import Encoder, load_encoder

        folder = Path(folder)
        meta = _read_meta(folder, cls.name)
        self = cls.__new__(cls)
        self.passages = _read_passages(folder / "passages.jsonl")
        self.encoder = encoder if isinstance(encoder, Encoder) else load_encoder(encoder or meta["config"]["encoder"])
        if self.encoder.name != meta["config"]["encoder"]:
            raise DataError(folder / "meta.json", f"index was built with {meta['config']['encoder']!r}, "
                            f"not {self.encoder.name!r}", field="config.encoder")
        self.batch_size = batch_size
        self.embeddings = np.load(folder / "embeddings.npy")
        if self.embeddings.shape[0] != len(self.passages):
            raise DataError(folder / "embeddings.npy", f"{self.embeddings.shape[0]} rows for {len(self.passages)} passages")
        return self


# ---------------------------------------------------------------------------
# the dataset's own paragraphs (the paper's oracle "Dataset" source)


class OracleRetriever:
    """The paper's "Dataset" knowledge source: ranks only the paragraphs given with the question.

        OracleRetriever().search(query, k=3, paragraphs=example.paragraphs)

    Paragraphs (records.Paragraph or Passage) are ranked by BM25 with Lucene's idf
    log(1 + (N - df + .5) / (df + .5)) computed within them, ties in given order;
    rank=False returns them in given order (score 0). Every paragraph is returned,
    even with no term in common, up to k.
    """

    name = "dataset"

    def __init__(self, rank: bool = True, k1: float = 1.5, b: float = 0.75):
        self.rank, self.k1, self.b = rank, k1, b

    @staticmethod
    def _as_passage(p: Paragraph | Passage, i: int) -> Passage:
        if isinstance(p, Passage):
            return p
        return Passage(f"{p.title}#{i}", p.title, p.text)

    def search(self, query: str, k: int = 5, paragraphs: Sequence[Paragraph | Passage] = ()) -> list[Hit]:
        """The top-k of the given paragraphs for the query."""
        k = check_k(k)
        if not isinstance(query, str):
            raise TypeError(f"search() takes one query string, not {type(query).__name__}")
        ps = [self._as_passage(p, i) for i, p in enumerate(paragraphs)]
        if not self.rank or not ps:
            return [Hit(p, 0.0) for p in ps[:k]]
        docs = [Counter(tokenize(passage_string(p))) for p in ps]
        lens = np.array([sum(d.values()) for d in docs], dtype=np.float64)
        avg = max(lens.mean(), 1e-9)
        scores = np.zeros(len(ps))
        for t in set(tokenize(query)):
            df = sum(t in d for d in docs)
            if df == 0:
                continue
            idf = np.log(1 + (len(ps) - df + 0.5) / (df + 0.5))
            tf = np.array([d[t] for d in docs], dtype=np.float64)
            scores += idf * tf * (self.k1 + 1) / (tf + self.k1 * (1 - self.b + self.b * lens / avg))
        order = np.argsort(-scores, kind="stable")[:k]
        return [Hit(ps[i], float(scores[i])) for i in order]

    def search_batch(self, queries: Sequence[str], k: int = 5, progress: bool = False,
                     paragraphs: Sequence[Sequence[Paragraph | Passage]] = ()) -> list[list[Hit]]:
        """search for each query with its own paragraph list."""
        queries = check_queries(queries)
        if len(paragraphs) != len(queries):
            raise ValueError(f"{len(queries)} queries but {len(paragraphs)} paragraph lists")
        return [self.search(q, k, paragraphs=ps) for q, ps in zip(queries, paragraphs)]

    def save(self, folder: str | Path) -> Path:
        """Write the settings (there is no index) to a folder."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        cfg = {"rank": self.rank, "k1": self.k1, "b": self.b}
        (folder / "meta.json").write_text(json.dumps({"kind": self.name, "format": FORMAT_VERSION, "config": cfg}))
        return folder

    @classmethod
    def load(cls, folder: str | Path) -> "OracleRetriever":
        """Read a folder written by save."""
        return cls(**_read_meta(Path(folder), cls.name)["config"])


DatasetParagraphs = OracleRetriever


# ---------------------------------------------------------------------------
# web search


class WebSearch:
    """A pluggable web-search knowledge source behind a small HTTP endpoint.

    The endpoint (argument, else env COVLIB_SEARCH_ENDPOINT) is called as
    GET {endpoint}?q=<query>&k=<k> and must answer a JSON list of {"title", "text"}
    objects (optional "url", "score"), best first. Without an endpoint, search raises
    RuntimeError: offline runs use BM25Retriever / TfidfRetriever / DenseRetriever over
    the paragraph corpus as stand-ins for the papers' Google / Bing search.
    """

    name = "web"

    def __init__(self, endpoint: str | None = None, timeout: float = 30.0):
        self.endpoint = endpoint or os.environ.get("COVLIB_SEARCH_ENDPOINT") or None
        self.timeout = timeout

    def search(self, query: str, k: int = 5) -> list[Hit]:
        """The top-k web results for a query (RuntimeError when no endpoint is configured)."""
        k = check_k(k)
        if not self.endpoint:
            raise RuntimeError(
                "WebSearch has no endpoint: pass WebSearch(endpoint=...) or set COVLIB_SEARCH_ENDPOINT "
                "to a URL answering GET ?q=...&k=... with JSON [{title, text}]. Offline stand-ins exist: "
                "covlib.retrieval.BM25Retriever (or TfidfRetriever / DenseRetriever) over the paragraph corpus, "
                "e.g. load_or_build('bm25', passages, name)."
            )
        sep = "&" if "?" in self.endpoint else "?"
        url = f"{self.endpoint}{sep}{urllib.parse.urlencode({'q': query, 'k': k})}"
        with urllib.request.urlopen(url, timeout=self.timeout) as resp:  # noqa: S310 - user-configured URL
            items = json.loads(resp.read().decode("utf-8"))
        if not isinstance(items, list):
            raise DataError(self.endpoint, f"expected a JSON list of results, got {type(items).__name__}")
        hits = []
        for rank, it in enumerate(items[:k]):
            if not isinstance(it, dict) or "text" not in it:
                raise DataError(self.endpoint, f"result {rank} has no 'text'", field="text")
            pid = str(it.get("url") or f"web:{rank}")
            hits.append(Hit(Passage(pid, str(it.get("title", "")), str(it["text"])),
                            float(it.get("score", 1.0 / (rank + 1)))))
        return hits

    def search_batch(self, queries: Sequence[str], k: int = 5, progress: bool = False) -> list[list[Hit]]:
        """search for each query, one request each."""
        return [self.search(q, k) for q in _progress(check_queries(queries), progress, "web")]

    def save(self, folder: str | Path) -> Path:
        """Write the kind only (the endpoint may hold credentials and is read from the environment on load)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "meta.json").write_text(json.dumps({"kind": self.name, "format": FORMAT_VERSION, "config": {}}))
        return folder

    @classmethod
    def load(cls, folder: str | Path) -> "WebSearch":
        """Read a folder written by save; the endpoint comes from COVLIB_SEARCH_ENDPOINT."""
        _read_meta(Path(folder), cls.name)
        return cls()


# ---------------------------------------------------------------------------
# building and persisting

RETRIEVERS: dict[str, type] = {"bm25": BM25Retriever, "tfidf": TfidfRetriever, "dense": DenseRetriever}
_NOT_CONFIG = {"self", "passages", "batch_size", "progress"}


def build_retriever(kind: str, passages: Sequence[Passage], **kw: Any) -> _Retriever:
    """A retriever of kind 'bm25', 'tfidf' or 'dense' over the passages (kw go to its constructor)."""
    if kind not in RETRIEVERS:
        raise ValueError(f"unknown retriever kind {kind!r}; choose from {sorted(RETRIEVERS)}")
    return RETRIEVERS[kind](passages, **kw)


def load_retriever(folder: str | Path, **kw: Any) -> _Retriever:
    """Load whichever retriever kind a folder holds."""
    kind = _read_meta(Path(folder))["kind"]
    if kind == "bm25-disk":  # a Wikipedia-scale index (covlib.disk_index), opened memory-mapped
        from covlib.disk_index import DiskBM25Retriever

        return DiskBM25Retriever.load(folder)
    if kind not in RETRIEVERS:
        raise DataError(Path(folder) / "meta.json", f"unknown retriever kind {kind!r}", field="kind")
    return RETRIEVERS[kind].load(folder, **kw)


def open_corpus(corpus: str | Path = "") -> tuple[Sequence[Passage], _Retriever, str]:
    """(passages, BM25 retriever, name) for a notebook's `corpus` parameter: "" (the offline paragraphs), a corpus
    file (read into memory, index persisted by name), or a folder that `make index` wrote (Wikipedia scale:
    passages read from disk on demand, postings memory-mapped)."""
    from covlib.data import load_corpus

    folder = Path(corpus)
    if str(corpus) and folder.is_dir():
        kind = _read_meta(folder)["kind"]
        if kind != "bm25-disk":
            raise DataError(folder / "meta.json", f"corpus folder holds a {kind!r} index; give a folder that "
                            "`make index` wrote (kind 'bm25-disk') or a corpus file", field="kind")
        retriever = load_retriever(folder)
        return retriever.passages, retriever, folder.name
    passages, name = load_corpus(corpus)
    return passages, load_or_build("bm25", passages, name), name


def _wanted_config(kind: str, kw: dict) -> dict:
    """The config a retriever built with these kw would record (defaults filled in)."""
    sig = inspect.signature(RETRIEVERS[kind].__init__)
    bound = sig.bind_partial(None, [], **kw)
    bound.apply_defaults()
    cfg = {k: v for k, v in bound.arguments.items() if k not in _NOT_CONFIG}
    if kind == "dense":
        from covlib.embedding import Encoder, canonical_name

        enc = cfg.get("encoder")
        cfg["encoder"] = enc.name if isinstance(enc, Encoder) else canonical_name(enc)
    return cfg


def index_path(kind: str, name: str) -> Path:
    """Where load_or_build keeps the index: paths.index_dir() / f'{name}-{kind}'."""
    return paths.index_dir() / f"{name}-{kind}"


def load_or_build(kind: str, passages: Sequence[Passage], name: str, rebuild: bool = False, **kw: Any) -> _Retriever:
    """Reload the index under paths.index_dir()/name-kind if its corpus fingerprint and settings match, else build and save it."""
    folder = index_path(kind, name)
    passages = list(passages)
    if not rebuild and (folder / "meta.json").exists():
        try:
            meta = _read_meta(folder, kind)
            if meta.get("format") == FORMAT_VERSION and meta.get("fingerprint") == corpus_fingerprint(passages) \
                    and meta.get("config") == _wanted_config(kind, kw):
                load_kw = {k: v for k, v in kw.items() if k in ("encoder", "batch_size")} if kind == "dense" else {}
                return RETRIEVERS[kind].load(folder, **load_kw)
        except (DataError, json.JSONDecodeError, OSError, KeyError):
            pass  # unreadable or stale: rebuild below
    retriever = build_retriever(kind, passages, **kw)
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    retriever.save(tmp)
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)
    return retriever


# ---------------------------------------------------------------------------
# sentences


_SENT_SPLIT = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"')\]]))\s+(?=[\"'(\[]?[A-Z0-9])")


def _split_sentences(text: str) -> list[str]:
    try:  # prefer the project's splitter when covlib.data provides one
        from covlib.data import split_sentences
    except Exception:  # noqa: BLE001 - covlib.data absent or broken: fall back to the regex
        split_sentences = None
    if split_sentences is not None:
        return [s.strip() for s in split_sentences(text) if s.strip()]
    return [s.strip() for s in _SENT_SPLIT.split(text) if s and s.strip()]


def passages_to_sentences(hits: Iterable[Hit | Passage | Paragraph], dedupe: bool = True) -> list[str]:
    """The sentences of the hits' texts in rank order (Paragraph sentences kept as given), duplicates dropped."""
    out: list[str] = []
    for h in hits:
        item = h.passage if isinstance(h, Hit) else h
        if isinstance(item, Paragraph):
            out.extend(s.strip() for s in item.sentences if s.strip())
        else:
            out.extend(_split_sentences(item.text))
    return list(dict.fromkeys(out)) if dedupe else out


def top_sentences_batch(queries: Sequence[str], sentence_lists: Sequence[Sequence[str]], k: int = 3,
                        encoder: Any = None, dedupe: bool = True) -> list[list[tuple[str, float]]]:
    """top_sentences for many (query, sentences) pairs, embedding each distinct text once."""
    from covlib.embedding import Encoder, load_encoder

    k, queries = check_k(k), check_queries(queries, "top_sentences_batch()")
    if len(queries) != len(sentence_lists):
        raise ValueError(f"{len(queries)} queries but {len(sentence_lists)} sentence lists")
    enc = encoder if isinstance(encoder, Encoder) else load_encoder(encoder)
    lists = [list(dict.fromkeys(s)) if dedupe else list(s) for s in sentence_lists]
    texts = list(dict.fromkeys([*queries, *(s for ss in lists for s in ss)]))
    row = {t: i for i, t in enumerate(texts)}
    vecs = enc.encode(texts)
    out = []
    for q, sents in zip(queries, lists):
        if not sents:
            out.append([])
            continue
        sims = vecs[[row[s] for s in sents]] @ vecs[row[q]]
        order = np.argsort(-sims, kind="stable")[:k]
        out.append([(sents[i], float(sims[i])) for i in order])
    return out


def top_sentences(query: str, sentences: Sequence[str], k: int = 3, encoder: Any = None,
                  dedupe: bool = True) -> list[tuple[str, float]]:
    """The k sentences most similar to the query by embedding cosine, ties in original order.

    Verify-and-Edit ranks retrieved sentences by Euclidean distance of paraphrase-MiniLM-L6-v2
    embeddings; with the unit-normalised all-MiniLM-L6-v2 used here, cosine and Euclidean
    orders coincide. Exact duplicate sentences are dropped first, as in the paper's code.
    """
    return top_sentences_batch([query], [sentences], k=k, encoder=encoder, dedupe=dedupe)[0]


def _progress(it: Iterable, show: bool, desc: str) -> Iterable:
    if not show:
        return it
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return it
    return tqdm(it, desc=desc)
