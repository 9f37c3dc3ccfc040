"""Input rules shared by every retriever (covlib.retrieval): one rule for k, lists of queries, unique ids, unsearchable corpora, unreadable index metadata."""

from __future__ import annotations

import warnings

import pytest

from covlib import retrieval as R
from covlib.core.records import DataError, Passage


PASSAGES = [Passage("1", "Alpha", "alpha beta gamma"), Passage("2", "Beta", "beta delta"),
            Passage("3", "Gamma", "gamma epsilon")]


@pytest.fixture(scope="module")
def retrievers():
    return [R.BM25Retriever(PASSAGES), R.BM25Retriever(PASSAGES, backend="rank_bm25"), R.TfidfRetriever(PASSAGES),
            R.DenseRetriever(PASSAGES)]


def test_one_rule_for_k(retrievers):
    from covlib.core.records import Paragraph

    for r in retrievers:
        for k in (-1, 1.5, True):
            with pytest.raises(ValueError, match="k must be a whole number >= 0"):
                r.search("alpha", k=k)
        assert r.search("alpha", k=0) == []
    paragraphs = [Paragraph("A", ["alpha beta."]), Paragraph("B", ["gamma."])]
    with pytest.raises(ValueError, match="k must be a whole number"):
        R.OracleRetriever().search("alpha", k=-1, paragraphs=paragraphs)
    assert R.OracleRetriever().search("alpha", k=0, paragraphs=paragraphs) == []
    with pytest.raises(ValueError, match="k must be a whole number"):
        R.top_sentences("alpha", ["alpha beta.", "gamma."], k=-1)


def test_search_batch_refuses_a_lone_string(retrievers):
    for r in retrievers:
        with pytest.raises(TypeError, match="takes a list of queries, not str"):
            r.search_batch("alpha beta", k=2)
        assert [[h.passage.id for h in hits][:1] for hits in r.search_batch(("alpha", "delta"), k=1)] == [["1"], ["2"]]


def test_duplicate_passage_ids(retrievers):
    twice = [*PASSAGES, Passage("2", "Other", "other text")]
    for kind in ("bm25", "tfidf"):
        with pytest.raises(ValueError, match=r"duplicate passage id '2' \(passages 1 and 3\)"):
            R.build_retriever(kind, twice)


def test_corpus_without_a_searchable_word():
    empty = [Passage("1", "", ""), Passage("2", "", "the of and")]
    for r in (lambda: R.BM25Retriever(empty), lambda: R.BM25Retriever(empty, backend="rank_bm25"),
              lambda: R.TfidfRetriever(empty)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            built = r()
        assert built.search("the alpha", k=3) == []
        assert any("none of the 2 passages has a searchable word" in str(c.message) for c in caught), built


def test_unsearchable_index_saves_and_loads(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        R.BM25Retriever([Passage("1", "", "the of")]).save(tmp_path / "idx")
        assert R.load_retriever(tmp_path / "idx").search("the", k=1) == []


def test_unreadable_index_metadata_names_the_folder(tmp_path):
    R.BM25Retriever(PASSAGES).save(tmp_path / "idx")
    (tmp_path / "idx" / "meta.json").write_text("{broken", encoding="utf-8")
    with pytest.raises(DataError, match="meta.json.*unreadable index metadata.*delete the folder"):
        R.load_retriever(tmp_path / "idx")
