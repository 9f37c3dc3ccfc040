"""Verify-and-Edit's knowledge sources: where its verifying questions find their evidence (sentences, not passages).

| kind      | class                | what it returns                                                   |
|-----------|----------------------|-------------------------------------------------------------------|
| "dataset" | `DatasetKnowledge`   | the example's own paragraphs (Verify-and-Edit's "Dataset" oracle) |
| "bm25"    | `RetrieverKnowledge` | BM25 over a passage corpus (offline stand-in for Wikipedia search)|
| "tfidf"   | `RetrieverKnowledge` | DrQA-style TF-IDF bigrams over the corpus                         |
| "dense"   | `RetrieverKnowledge` | dense MiniLM over the corpus                                      |
| "web"     | `WebKnowledge`       | a search endpoint (`retrieval.WebSearch`)                         |

`make_knowledge(kind, corpus=..., corpus_name=...)` builds one (indexes persisted by name).
"""

from __future__ import annotations

from typing import Any, Sequence

from covlib.core.records import Example, Passage
from covlib.data import default_corpus
from covlib.data.corpora import NEAR_ORACLE_CORPUS
from covlib.retrieval import OracleRetriever, WebSearch, load_or_build, passages_to_sentences


class Knowledge:
    """A knowledge source: sentences for a verifying question about an example; `label` names it in tables."""

    label = "knowledge"
    kind = "knowledge"  # its short name in trace file names: "dataset", "bm25", "tfidf", "dense", "web"

    def retrieve(self, question: str, example: Example) -> list[str]:
        """Sentences retrieved for one verifying question."""
        return self.retrieve_batch([question], [example])[0]

    def retrieve_batch(self, questions: Sequence[str], examples: Sequence[Example]) -> list[list[str]]:
        """Sentences for each (verifying question, example) pair."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.label!r})"


class DatasetKnowledge(Knowledge):
    """The paper's "Dataset" oracle: the example's own paragraphs, as sentences (unit="paragraph": whole
    paragraphs, as the official code ranked them)."""

    kind = "dataset"

    def __init__(self, unit: str = "sentence", label: str = "Dataset (own paragraphs)"):
        if unit not in ("sentence", "paragraph"):
            raise ValueError(f"unit must be 'sentence' or 'paragraph', not {unit!r}")
        self.unit, self.label = unit, label

    def retrieve_batch(self, questions: Sequence[str], examples: Sequence[Example]) -> list[list[str]]:
        """The example's paragraphs split into sentences (or whole), whatever the question."""
        out = []
        for ex in examples:
            if not ex.paragraphs:
                raise ValueError(f"example {ex.id!r} has no paragraphs: DatasetKnowledge needs the dataset's own "
                                 "context; use RetrieverKnowledge over a corpus instead")
            if self.unit == "paragraph":
                out.append([p.text for p in ex.paragraphs if p.text])
            else:
                out.append(passages_to_sentences(ex.paragraphs))
        return out


class RetrieverKnowledge(Knowledge):
    """Any covlib.retrieval retriever (BM25, TF-IDF, dense, web) over a corpus: the top-k passages' sentences.

    `with_question=True` also retrieves for the original question and appends those sentences
    (the official DrQA setting).
    """

    def __init__(self, retriever: Any, k: int = 5, label: str = "BM25 (offline stand-in for Wikipedia)",
                 with_question: bool = False):
        self.retriever, self.k, self.label, self.with_question = retriever, k, label, with_question

    @property
    def kind(self) -> str:
        """The retriever's name ("bm25", "tfidf", "dense", "web")."""
        return str(getattr(self.retriever, "name", "retriever"))

    def _search(self, queries: list[str], examples: Sequence[Example]) -> list[list]:
        if isinstance(self.retriever, OracleRetriever):
            return self.retriever.search_batch(queries, k=self.k, paragraphs=[ex.paragraphs for ex in examples])
        return self.retriever.search_batch(queries, k=self.k)

    def retrieve_batch(self, questions: Sequence[str], examples: Sequence[Example]) -> list[list[str]]:
        """One batched search for all questions (and, optionally, the original questions)."""
        queries = list(questions)
        if self.with_question:
            queries += [ex.question for ex in examples]
        hits = self._search(queries, list(examples) * (2 if self.with_question else 1))
        out = [passages_to_sentences(h) for h in hits[: len(questions)]]
        if self.with_question:
            out = [list(dict.fromkeys(a + passages_to_sentences(h))) for a, h in zip(out, hits[len(questions):])]
        return out


class WebKnowledge(RetrieverKnowledge):
    """Web search through `retrieval.WebSearch` (endpoint argument or COVLIB_SEARCH_ENDPOINT)."""

    def __init__(self, endpoint: str | None = None, k: int = 5, label: str = "Web search"):
        search = WebSearch(endpoint)
        if not search.endpoint:
            search.search("", k)  # raises the RuntimeError that explains how to configure it
        super().__init__(search, k=k, label=label)


KNOWLEDGE_KINDS = ("dataset", "bm25", "tfidf", "dense", "web")
RETRIEVER_KINDS = ("bm25", "tfidf", "dense")  # the offline retrievers, over a paragraph corpus
# Datasets whose offline corpus holds the questions' own gold paragraphs: retrieval there is near-oracle
NEAR_ORACLE = {
    "hotpotqa": NEAR_ORACLE_CORPUS,
    "fever": "the FEVER corpus is built from the claims' own evidence pages",
}
_RETRIEVER_LABELS = {
    "bm25": "BM25 over the paragraph corpus (offline stand-in for Wikipedia search)",
    "tfidf": "TF-IDF bigrams, DrQA-style, over the paragraph corpus",
    "dense": "dense MiniLM over the paragraph corpus",
}


def make_knowledge(kind: str, corpus: Sequence[Passage] | None = None, corpus_name: str = "hotpot-corpus",
                   k: int = 5, endpoint: str | None = None, with_question: bool = False) -> Knowledge:
    """A knowledge source by name: "dataset", "bm25", "tfidf" (DrQA-style), "dense" (indexes persisted with
    `retrieval.load_or_build` under `corpus_name`; default corpus `data.default_corpus()`) or "web"
    (RuntimeError without an endpoint)."""
    if kind == "dataset":
        return DatasetKnowledge()
    if kind == "web":
        return WebKnowledge(endpoint, k=k)
    if kind not in _RETRIEVER_LABELS:
        raise ValueError(f"unknown knowledge source {kind!r}; choose one of {KNOWLEDGE_KINDS}")
    passages = list(corpus) if corpus is not None else default_corpus()
    retriever = load_or_build(kind, passages, corpus_name)
    return RetrieverKnowledge(retriever, k=k, label=_RETRIEVER_LABELS[kind], with_question=with_question)
