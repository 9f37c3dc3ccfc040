"""The Wikipedia-scale BM25 index (covlib.retrieval.disk_index): streamed build, memory-mapped shards, same ranking as
BM25Retriever on the real Adversarial-HotpotQA paragraphs."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from covlib import data
from covlib import retrieval as R
from covlib.core.records import Passage
from covlib.retrieval.disk_index import DiskBM25Retriever


@pytest.fixture(scope="module")
def hotpot():
    """(passages, questions) from sim_dev.json, passages deduplicated by (title, text)."""
    from covlib.core import paths

    path = paths.dataset_path("hotpotqa_adv", "sim_dev.json")
    if not path.exists():
        pytest.skip(f"real data not found at {path}")
    records = json.loads(path.read_text())
    unique = list({(p["title"], p["context"]): None for r in records for p in r["paragraphs"]})
    return [Passage(f"p{i}", t, c) for i, (t, c) in enumerate(unique)], [r["question"] for r in records]


def _ranked(hits):
    return [(h.passage.id, h.score) for h in hits]


def _same_ranking(a, b):
    """Equal scores rank by rank; ids equal except among passages tied on score (bm25s breaks ties its own way)."""
    assert [s for _, s in a] == pytest.approx([s for _, s in b], rel=1e-5)  # float32 weights, summed in float64
    cut = a[-1][1] if a else 0.0
    assert {i for i, s in a if s > cut + 1e-4} == {i for i, s in b if s > cut + 1e-4}


def test_same_ranking_as_bm25_retriever_over_several_shards(hotpot, tmp_path):
    passages, questions = hotpot
    disk = DiskBM25Retriever.build(iter(passages), tmp_path / "idx", shard_size=300, progress=False)
    assert len(disk.meta["shards"]) == -(-len(passages) // 300) and len(disk) == len(passages)
    memory = R.BM25Retriever(passages)
    for a, b in zip(memory.search_batch(questions[:150], k=5), disk.search_batch(questions[:150], k=5)):
        _same_ranking(_ranked(a), _ranked(b))
    assert disk.passages[7] == passages[7] and disk.passages[-1] == passages[-1]


def test_shard_size_does_not_change_results(hotpot, tmp_path):
    passages, questions = hotpot
    one = DiskBM25Retriever.build(passages, tmp_path / "one", shard_size=10**6, progress=False)
    many = DiskBM25Retriever.build(passages, tmp_path / "many", shard_size=97, progress=False)
    for a, b in zip(one.search_batch(questions[:60], k=10), many.search_batch(questions[:60], k=10)):
        assert [h.passage.id for h in a] == [h.passage.id for h in b]
        assert [h.score for h in a] == pytest.approx([h.score for h in b], rel=1e-6)


def test_streamed_from_a_dpr_file_and_reopened_by_load_retriever(tmp_path):
    path = tmp_path / "psgs.tsv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, delimiter="\t", lineterminator="\n")
        w.writerow(["id", "text", "title"])
        for i in range(500):
            w.writerow([i + 1, f"passage number {i} about topic{i % 7} and word{i}", f"Title {i}"])
    consumed = []

    def stream():
        for p in data.iter_dpr_tsv(path):
            consumed.append(p.id)
            yield p

    built = DiskBM25Retriever.build(stream(), tmp_path / "idx", shard_size=64, progress=False)
    assert len(consumed) == 500 and len(built.meta["shards"]) == 8
    opened = R.load_retriever(tmp_path / "idx")
    assert isinstance(opened, DiskBM25Retriever)
    hits = opened.search("word123 topic4", k=3)
    assert hits[0].passage.id == "124" and hits[0].passage.title == "Title 123"
    assert all(isinstance(a, np.memmap) for a in opened._shards[0][2:])  # postings are memory-mapped, not read in
    assert opened.search_batch(["topic4"], k=100)[0] and len(opened.search("topic4", k=100)) == 71


def test_bad_input(tmp_path):
    ps = [Passage("a", "", "alpha beta"), Passage("b", "", "gamma"), Passage("a", "", "delta")]
    with pytest.raises(ValueError, match="duplicate passage id 'a' .passages 0 and 2"):
        DiskBM25Retriever.build(ps, tmp_path / "dup", progress=False)
    assert not (tmp_path / "dup").exists() and not (tmp_path / "dup.building").exists()  # nothing half-built left
    with pytest.raises(ValueError, match="empty corpus"):
        DiskBM25Retriever.build([], tmp_path / "empty", progress=False)
    with pytest.raises(TypeError, match="passage 0 is str"):
        DiskBM25Retriever.build(["alpha"], tmp_path / "str", progress=False)
    r = DiskBM25Retriever.build(ps[:2], tmp_path / "ok", progress=False)
    assert r.search("unknownword", k=5) == [] and r.search("alpha", k=0) == []
    with pytest.raises(ValueError, match="k must be a whole number"):
        r.search("alpha", k=-1)
    with pytest.raises(TypeError, match="not str"):
        r.search_batch("alpha")
    with pytest.raises(data.DataError, match="meta.json missing"):
        DiskBM25Retriever.load(tmp_path / "nothing")


def _small(folder, texts=("alpha beta", "gamma delta", "alpha gamma", "epsilon"), shard_size=2):
    return DiskBM25Retriever.build([Passage(f"p{i}", "", t) for i, t in enumerate(texts)], folder,
                                   shard_size=shard_size, progress=False)


def test_mixed_builds_are_refused_at_open(tmp_path):
    _small(tmp_path / "a")
    _small(tmp_path / "b", texts=("one two", "three four", "five six", "seven eight"))  # same count, other passages
    (tmp_path / "a" / "passages.jsonl").write_bytes((tmp_path / "b" / "passages.jsonl").read_bytes())
    with pytest.raises(data.DataError, match=r"passages.jsonl: .*bytes.*damaged or incomplete.*make index"):
        DiskBM25Retriever.load(tmp_path / "a")
    # the same passages file, offsets of another build with as many passages: the fingerprint tells them apart
    _small(tmp_path / "c")
    _small(tmp_path / "d", texts=("alpha", "beta gamma delta", "alpha gamma", "epsilon"))
    (tmp_path / "c" / "offsets.npy").write_bytes((tmp_path / "d" / "offsets.npy").read_bytes())
    with pytest.raises(data.DataError, match=r"offsets.npy: not the passage map"):
        DiskBM25Retriever.load(tmp_path / "c")
    # a map of another passage count
    _small(tmp_path / "e", texts=("x y", "z"))
    (tmp_path / "b" / "offsets.npy").write_bytes((tmp_path / "e" / "offsets.npy").read_bytes())
    with pytest.raises(data.DataError, match=r"offsets.npy: maps 2 passages, meta.json says 4"):
        DiskBM25Retriever.load(tmp_path / "b")
    meta = json.loads((tmp_path / "e" / "meta.json").read_text())
    assert meta["maps"]["passages_bytes"] == (tmp_path / "e" / "passages.jsonl").stat().st_size


def test_an_index_without_the_fingerprint_still_opens(tmp_path):
    _small(tmp_path / "old")
    path = tmp_path / "old" / "meta.json"
    meta = json.loads(path.read_text())
    del meta["maps"]  # as written before the fingerprint was added
    path.write_text(json.dumps(meta))
    assert DiskBM25Retriever.load(tmp_path / "old").search("epsilon", k=1)[0].passage.id == "p3"


def test_truncated_or_missing_files_are_named(tmp_path):
    from covlib.retrieval.disk_index import index_folder

    r = _small(tmp_path / "wiki-bm25-disk")
    docs = tmp_path / "wiki-bm25-disk" / r.meta["shards"][1]["folder"] / "docs.npy"
    del r
    docs.write_bytes(docs.read_bytes()[:-3])
    with pytest.raises(data.DataError, match=r"docs.npy: truncated or unreadable.*damaged or incomplete.*"
                                             r"make index TSV=<corpus> NAME=wiki`"):
        DiskBM25Retriever.load(tmp_path / "wiki-bm25-disk")
    _small(tmp_path / "idx")
    (tmp_path / "idx" / "shard-000" / "terms.npy").unlink()
    with pytest.raises(data.DataError, match=r"shard-000.terms.npy: missing: the index .* is damaged or incomplete"):
        DiskBM25Retriever.load(tmp_path / "idx")
    (tmp_path / "idx" / "offsets.npy").unlink()
    with pytest.raises(data.DataError, match=r"offsets.npy: missing"):
        DiskBM25Retriever.load(tmp_path / "idx")
    assert index_folder("wiki").name == "wiki-bm25-disk"


def test_a_second_build_of_the_same_index_refuses_while_one_runs(tmp_path):
    import fcntl

    _small(tmp_path / "wiki-bm25-disk")
    with open(tmp_path / "wiki-bm25-disk.lock", "a+") as held:  # another fd (another build) holds the lock
        fcntl.flock(held.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(RuntimeError, match="another build of wiki is running"):
            _small(tmp_path / "wiki-bm25-disk", texts=("new",))
        fcntl.flock(held.fileno(), fcntl.LOCK_UN)
    assert len(DiskBM25Retriever.load(tmp_path / "wiki-bm25-disk")) == 4  # the refused build touched nothing
    assert len(_small(tmp_path / "wiki-bm25-disk", texts=("new",))) == 1  # once free, a build goes ahead


def test_concurrent_builds_in_two_processes(tmp_path):
    import subprocess
    import sys
    import time

    script = ("import sys, time, pathlib\n"
              "from covlib.core.records import Passage\n"
              "from covlib.retrieval.disk_index import DiskBM25Retriever\n"
              "def slow():\n"
              "    pathlib.Path(sys.argv[2]).touch()\n"  # the build holds the lock now
              "    while not pathlib.Path(sys.argv[3]).exists():\n"
              "        time.sleep(0.01)\n"
              "    for i in range(40):\n"
              "        yield Passage(f'p{i}', '', f'word{i} common')\n"
              "try:\n"
              "    DiskBM25Retriever.build(slow(), sys.argv[1], progress=False)\n"
              "except RuntimeError as err:\n"
              "    print(err); sys.exit(3)\n")
    folder, started, go = str(tmp_path / "wiki-bm25-disk"), tmp_path / "started", tmp_path / "go"
    first = subprocess.Popen([sys.executable, "-c", script, folder, started, go], stdout=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while not started.exists() and time.time() < deadline and first.poll() is None:
        time.sleep(0.01)
    assert started.exists(), first.communicate()
    try:
        second = subprocess.run([sys.executable, "-c", script, folder, tmp_path / "started2", go], capture_output=True,
                                text=True, timeout=30)  # `go` exists only after it ends: it cannot wait on its build
    finally:
        go.touch()  # let the first build finish whatever happened
        out, _ = first.communicate(timeout=60)
    assert (first.returncode, second.returncode) == (0, 3), (out, second.stdout, second.stderr)
    assert "another build of wiki is running" in second.stdout and not (tmp_path / "started2").exists()
    assert len(DiskBM25Retriever.load(folder)) == 40
