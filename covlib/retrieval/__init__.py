"""Retrieval: one registry over every engine, each engine a module, all sharing `covlib.retrieval.base`.

Every retriever has the same shape (the `Retriever` protocol):

    r = BM25Retriever(passages)                  # or TfidfRetriever, DenseRetriever
    hits = r.search("who wrote Hamlet?", k=5)    # list[Hit(passage, score)], best first
    r.search_batch(queries, k=5)                 # list[list[Hit]]
    r.save(folder); r = BM25Retriever.load(folder)
    r = load_or_build("bm25", passages, "hotpot")   # persisted under paths.index_dir()

| module       | what                                                                 |
|--------------|----------------------------------------------------------------------|
| `base`       | `Hit`, `Retriever`, `BaseRetriever`, input checks, index persistence |
| `sparse`     | `BM25Retriever`, `TfidfRetriever`                                    |
| `dense`      | `DenseRetriever` (sentence encoder from `embedding`)                 |
| `disk_index` | `DiskBM25Retriever`: Wikipedia-scale, streamed and memory-mapped     |
| `sources`    | `OracleRetriever` (the dataset's paragraphs), `WebSearch`            |
| `sentences`  | sentences of hits, Verify-and-Edit's top-k similar sentences         |

Sparse retrievers never return a passage that shares no term with the query (score 0), so they may return fewer
than k hits; ties are broken by corpus order. Input rules, the same for every retriever: `k` is a whole number
>= 0; `search_batch` takes a list of strings (a lone string is refused); passage ids must be unique.
"""

from __future__ import annotations

import inspect
import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from covlib.core import paths
from covlib.core.records import DataError, Passage
from covlib.data import load_corpus
from covlib.retrieval.base import (FORMAT_VERSION, BaseRetriever, Hit, Retriever, check_k, check_passages, check_queries,
                                   corpus_fingerprint, ngrams, read_meta, search_passages, tokenize)
from covlib.retrieval.dense import DenseRetriever
from covlib.retrieval.disk_index import DiskBM25Retriever
from covlib.retrieval.embedding import Encoder, canonical_name
from covlib.retrieval.sentences import passages_to_sentences, top_sentences, top_sentences_batch
from covlib.retrieval.sources import OracleRetriever, WebSearch
from covlib.retrieval.sparse import BM25Retriever, TfidfRetriever

__all__ = ["BM25Retriever", "BaseRetriever", "DenseRetriever", "DiskBM25Retriever", "Hit", "OracleRetriever",
           "RETRIEVERS", "Retriever", "TfidfRetriever", "WebSearch", "build_retriever", "check_k", "check_passages",
           "check_queries", "corpus_fingerprint", "index_path", "ngrams", "load_or_build", "load_retriever", "open_corpus",
           "passages_to_sentences", "search_passages", "tokenize", "top_sentences", "top_sentences_batch"]


# ---------------------------------------------------------------------------
# building and persisting

RETRIEVERS: dict[str, type] = {"bm25": BM25Retriever, "tfidf": TfidfRetriever, "dense": DenseRetriever}
_NOT_CONFIG = {"self", "passages", "batch_size", "progress"}


def build_retriever(kind: str, passages: Sequence[Passage], **kw: Any) -> BaseRetriever:
    """A retriever of kind 'bm25', 'tfidf' or 'dense' over the passages (kw go to its constructor)."""
    if kind not in RETRIEVERS:
        raise ValueError(f"unknown retriever kind {kind!r}; choose from {sorted(RETRIEVERS)}")
    return RETRIEVERS[kind](passages, **kw)


def load_retriever(folder: str | Path, **kw: Any) -> BaseRetriever:
    """Load whichever retriever kind a folder holds."""
    kind = read_meta(Path(folder))["kind"]
    if kind == "bm25-disk":  # a Wikipedia-scale index (covlib.retrieval.disk_index), opened memory-mapped
        return DiskBM25Retriever.load(folder)
    if kind not in RETRIEVERS:
        raise DataError(Path(folder) / "meta.json", f"unknown retriever kind {kind!r}", field="kind")
    return RETRIEVERS[kind].load(folder, **kw)


def open_corpus(corpus: str | Path = "") -> tuple[Sequence[Passage], BaseRetriever, str]:
    """(passages, BM25 retriever, name) for a notebook's `corpus` parameter: "" (the offline paragraphs), a corpus
    file (read into memory, index persisted by name), or a folder that `make index` wrote (Wikipedia scale:
    passages read from disk on demand, postings memory-mapped)."""
    folder = Path(corpus)
    if str(corpus) and folder.is_dir():
        kind = read_meta(folder)["kind"]
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
        enc = cfg.get("encoder")
        cfg["encoder"] = enc.name if isinstance(enc, Encoder) else canonical_name(enc)
    return cfg


def index_path(kind: str, name: str) -> Path:
    """Where load_or_build keeps the index: paths.index_dir() / f'{name}-{kind}'."""
    return paths.index_dir() / f"{name}-{kind}"


def load_or_build(kind: str, passages: Sequence[Passage], name: str, rebuild: bool = False, **kw: Any) -> BaseRetriever:
    """Reload the index under paths.index_dir()/name-kind if its corpus fingerprint and settings match, else build and save it."""
    folder = index_path(kind, name)
    passages = list(passages)
    if not rebuild and (folder / "meta.json").exists():
        try:
            meta = read_meta(folder, kind)
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


