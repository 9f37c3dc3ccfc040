"""Property-based tests (hypothesis) of the readers, the cache key and the retrievers' k rule.

Each property writes data the way its producer does (csv.writer for DPR files, json.dumps for
JSON lines) and reads it back: whatever the text holds (quotes, tabs, U+2028, BOM-like
characters, non-Latin scripts), the loader returns what was written, or a DataError.
"""

from __future__ import annotations

import csv
import io
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from covlib import data as D
from covlib import retrieval as R
from covlib.core.cache import Cache, make_key
from covlib.core.records import DataError, Passage

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

# any text without NUL (no reader in the wild writes one) and without surrogates (not UTF-8 encodable)
TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40)
NONBLANK = TEXT.filter(lambda s: s.strip() != "")


def _kept(items: list[str]) -> list[str]:
    """What the loaders promise for answer lists: stripped, non-empty, first occurrence of each."""
    return list(dict.fromkeys(a.strip() for a in items if a.strip()))


@SETTINGS
@given(rows=st.lists(st.tuples(NONBLANK, st.lists(TEXT, min_size=1, max_size=4).filter(_kept)), min_size=1, max_size=6),
       bom=st.booleans())
def test_dpr_qa_csv_round_trip(tmp_path, rows, bom):
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer, delimiter="\t")  # how DPR's scripts write *.qa.csv
    for question, answers in rows:
        writer.writerow([question, str(answers)])
    path = tmp_path / "x.qa.csv"
    path.write_bytes(("\ufeff" if bom else "").encode() + buffer.getvalue().encode("utf-8"))
    examples = D.load_nq_open(path)
    assert [(e.question, e.answers) for e in examples] == [(q.strip(), _kept(a)) for q, a in rows]


@SETTINGS
@given(rows=st.lists(st.tuples(NONBLANK, st.lists(NONBLANK, min_size=1, max_size=3)), min_size=1, max_size=6),
       ascii_only=st.booleans())
def test_open_qa_jsonl_round_trip(tmp_path, rows, ascii_only):
    path = tmp_path / "x.jsonl"
    lines = [json.dumps({"question": q, "answer": a}, ensure_ascii=ascii_only) for q, a in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    examples = D.load_web_questions(path)
    assert [(e.question, e.answers) for e in examples] == [(q.strip(), _kept(a)) for q, a in rows]
    assert [e.id for e in examples] == [f"webq-{i:04d}" for i in range(len(rows))]


ONE_LINE = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\n\r"), max_size=40)


@SETTINGS
@given(passages=st.lists(st.tuples(ONE_LINE.filter(lambda s: s.strip() != ""), ONE_LINE, ONE_LINE), min_size=1,
                         max_size=6, unique_by=lambda p: p[0].strip()))
def test_dpr_passages_tsv_round_trip(tmp_path, passages):
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer, delimiter="\t")
    writer.writerow(["id", "text", "title"])
    for pid, text, title in passages:
        writer.writerow([pid, text, title])
    path = tmp_path / "psgs.tsv"
    path.write_text(buffer.getvalue(), encoding="utf-8", newline="")
    assert D.read_dpr_tsv(path) == [Passage(pid.strip(), title, text) for pid, text, title in passages]


@SETTINGS
@given(text=st.text(max_size=300))
def test_records_reader_never_fails_with_anything_but_a_data_error(tmp_path, text):
    path = tmp_path / "any.jsonl"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        D.load_nq_open(path)
    except DataError:
        pass


@settings(max_examples=300, deadline=None)
@given(a=st.text(max_size=30), b=st.text(max_size=30), n=st.integers(0, 10))
def test_cache_key_is_stable_and_separates_prompts(a, b, n):
    assert make_key(prompt=a, sample=n, model="m") == make_key(model="m", sample=n, prompt=a)
    assert (make_key(prompt=a, sample=n) == make_key(prompt=b, sample=n)) == (a == b)


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                    max_leaves=8)


@SETTINGS
@given(items=st.dictionaries(st.text(max_size=20), JSON, max_size=5))
def test_cache_round_trips_any_json_value(tmp_path, items):
    cache = Cache(tmp_path / "prop.sqlite")
    keys = {make_key(k=k): v for k, v in items.items()}
    cache.put_many(keys)
    assert cache.get_many(list(keys)) == keys
    cache.close()


WORDS = st.lists(st.sampled_from("alpha beta gamma delta epsilon zeta the of".split()), max_size=6).map(" ".join)


@SETTINGS
@given(texts=st.lists(WORDS, min_size=1, max_size=8), query=WORDS, k=st.integers(0, 10))
def test_sparse_retrievers_k_rule(texts, query, k):
    passages = [Passage(str(i), "", t) for i, t in enumerate(texts)]
    for retriever in (R.BM25Retriever(passages), R.BM25Retriever(passages, backend="rank_bm25"),
                      R.TfidfRetriever(passages, n_features=2**12)):
        hits = retriever.search(query, k=k)
        ids = [h.passage.id for h in hits]
        assert len(ids) <= min(k, len(passages)) and len(set(ids)) == len(ids)
        assert all(h.score > 0 for h in hits)
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


@settings(max_examples=300, deadline=None)
@given(text=st.text(st.characters(blacklist_categories=("Cs",)), max_size=200))
def test_split_sentences_loses_no_character(text):
    sentences = D.split_sentences(text)
    assert "".join("".join(s.split()) for s in sentences) == "".join(text.split())
    assert all(s == s.strip() and s for s in sentences)
