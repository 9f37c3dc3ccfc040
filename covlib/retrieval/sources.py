"""Knowledge sources that are not indexes: the dataset's own paragraphs (oracle) and web search."""

from __future__ import annotations

import json
import os
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from covlib.core.records import DataError, Paragraph, Passage, passage_string

from covlib.retrieval.base import FORMAT_VERSION, Hit, tokenize, check_k, check_queries, read_meta, progress_bar


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
        return cls(**read_meta(Path(folder), cls.name)["config"])




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
        return [self.search(q, k) for q in progress_bar(check_queries(queries), progress, "web")]

    def save(self, folder: str | Path) -> Path:
        """Write the kind only (the endpoint may hold credentials and is read from the environment on load)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "meta.json").write_text(json.dumps({"kind": self.name, "format": FORMAT_VERSION, "config": {}}))
        return folder

    @classmethod
    def load(cls, folder: str | Path) -> "WebSearch":
        """Read a folder written by save; the endpoint comes from COVLIB_SEARCH_ENDPOINT."""
        read_meta(Path(folder), cls.name)
        return cls()


