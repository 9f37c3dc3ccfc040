"""Sparse retrievers: BM25 (bm25s or rank-bm25) and DrQA-style hashed TF-IDF over unigrams and bigrams."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from covlib.core.records import Passage, passage_string

from covlib.retrieval.base import Hit, tokenize, ngrams, check_k, check_queries, check_passages, warn_unsearchable, top_k_indices, read_passages, read_meta, BaseRetriever, progress_bar


# ---------------------------------------------------------------------------
# BM25


class BM25Retriever(BaseRetriever):
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
            warn_unsearchable(len(docs))
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
            for t in progress_bar(toks, progress, "bm25"):
                s = self._index.get_scores(t) if t else np.zeros(len(self.passages))
                ranked.extend(top_k_indices(np.asarray(s, dtype=np.float64)[None, :], k, positive_only=True))
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
        meta = read_meta(folder, cls.name)
        cfg = meta["config"]
        self = cls.__new__(cls)
        self.passages = read_passages(folder / "passages.jsonl")
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


class TfidfRetriever(BaseRetriever):
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
            warn_unsearchable(n)

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
        for start in progress_bar(range(0, len(queries), chunk), progress, "tfidf"):
            q = self._query_matrix(queries[start:start + chunk])
            scores = (q @ self.doc_matrix_t).toarray()
            for row in top_k_indices(scores, k, positive_only=True):
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
        meta = read_meta(folder, cls.name)
        self = cls.__new__(cls)
        self.passages = read_passages(folder / "passages.jsonl")
        self.ngram, self.n_features = meta["config"]["ngram"], meta["config"]["n_features"]
        self.columns, self.idf, self.doc_matrix_t = np.zeros(0, np.int64), np.zeros(0, np.float32), None
        if self.passages:
            self.doc_matrix_t = sp.load_npz(folder / "tfidf.npz").tocsr()
            self.columns = np.load(folder / "columns.npy")
            self.idf = np.load(folder / "idf.npy")
        return self


