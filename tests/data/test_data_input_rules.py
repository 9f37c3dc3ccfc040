"""Input rules of the dataset readers (covlib.data): malformed, duplicated, empty or oddly encoded files fail with the file, line and field, never a silent wrong result; what a hub id looks like."""

from __future__ import annotations

import bz2
import csv
import gzip
import json
import lzma
import os
import re
import sys
import time

import pytest

from covlib import data as D
from covlib.core import paths
from covlib.core.records import DataError, Passage


@pytest.fixture
def w(tmp_path):
    """w(text, name) writes a temporary file and returns its path."""

    def write(text: str | bytes, name: str = "f.txt"):
        path = tmp_path / name
        path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
        return path

    return write


FEVER_ROW = '{{"id":{id},"question":"{q}","label":"SUPPORTS","evidence":[]}}\n'


def test_dpr_qa_csv_unquotes_doubled_quotes_in_answers(w):
    path = w('Q1\t"[\'He said ""hi""\']"\nQ2\t"[""Paris"", ""Paris, France""]"\n', "t.qa.csv")
    for loader in (D.load_triviaqa, D.load_nq_open):
        first, second = loader(path)
        assert first.answers == ['He said "hi"'] and second.answers == ["Paris", "Paris, France"]


def test_dpr_passage_with_unclosed_quote_is_an_error_at_its_line(w):
    path = w('id\ttext\ttitle\n1\t"Unclosed\tT1\n2\tSecond\tT2\n3\tThird "q" x\tT3\n', "psgs_w100.tsv")
    with pytest.raises(DataError, match="runs on to line 4") as err:
        D.read_dpr_tsv(path)
    assert err.value.line == 2 and "psgs_w100.tsv" in str(err.value)
    # quotes inside a properly quoted field, as csv.writer writes them, stay fine
    path = w('id\ttext\ttitle\n1\t"He said ""hi"""\tT1\n2\tplain\tT2\n', "ok.tsv")
    assert [p.text for p in D.read_dpr_tsv(path)] == ['He said "hi"', "plain"]
    with pytest.raises(DataError, match="line 2.*malformed quoting"):  # a stray quote no longer vanishes silently
        D.read_dpr_tsv(w('id\ttext\ttitle\n1\t"He said" hi\tA\n', "stray.tsv"))
    with pytest.raises(DataError, match=r"line 2.*bare carriage return"):
        D.read_dpr_tsv(w("id\ttext\ttitle\n1\tx\ry\tA\n", "cr.tsv"))


def test_fever_duplicate_ids_are_an_error(w):
    path = w(FEVER_ROW.format(id=7, q="A") + FEVER_ROW.format(id='"7"', q="B"), "fever.jsonl")
    with pytest.raises(DataError, match=r"line 2.*duplicate id '7' \(first used at line 1\)"):
        D.load_fever(path, ids=[7])


def test_fewshot_pool_refuses_a_duplicated_example_id(tmp_path, monkeypatch):
    monkeypatch.setenv("COVLIB_DATA", str(tmp_path))
    (tmp_path / "fever").mkdir()
    rows = FEVER_ROW.format(id=1, q="first claim") + FEVER_ROW.format(id=1, q="second claim")
    (tmp_path / "fever" / "train_subset.jsonl").write_text(rows, encoding="utf-8")
    (tmp_path / "fever" / "manual_rat.txt").write_text("1\tThe rationale.\n", encoding="utf-8")
    with pytest.raises(DataError, match="train_subset.jsonl.*line 2.*duplicate id '1'"):
        D.load_fewshot("fever")


def test_bom_is_not_part_of_the_first_question(w):
    path = w("\ufeffWho?\t['x']\n", "t.qa.csv")
    assert D.load_triviaqa(path)[0].question == "Who?"


def test_empty_question_or_answer_list_is_an_error(w):
    with pytest.raises(DataError, match="empty question"):
        D.load_nq_open(w('{"question": "", "answer": []}\n', "nq.jsonl"))
    with pytest.raises(DataError, match="no answer"):
        D.load_nq_open(w('{"question": "q?", "answer": []}\n', "nq.jsonl"))
    hotpot = {"id": "h", "question": "  ", "answer": "a", "supporting_facts": {"title": [], "sent_id": []},
              "context": {"title": [], "sentences": []}}
    with pytest.raises(DataError, match="field 'question' is empty"):
        D.load_hotpotqa(w(json.dumps(hotpot) + "\n", "h.jsonl"))


def test_every_loader_refuses_an_empty_answer(w):
    with pytest.raises(DataError, match="no answer"):
        D.load_2wikimultihop(w('[{"test_id": 1, "question": "q?", "answer": []}]', "2w.json"))
    with pytest.raises(DataError, match="no answer"):
        D.load_mintaka(w('[{"id": "m1", "question": "q?", "answerText": "", "answerEntity": []}]', "m.json"))
    official = {"id": "m2", "question": "q?", "answer": {"answerType": "entity", "answer": None}}
    with pytest.raises(DataError, match="no answer"):
        D.load_mintaka(w(json.dumps([official]), "m.json"))
    row = {"question_id": "t1", "question": "q?", "answer": {"value": "", "aliases": []}}
    path = w(json.dumps(row) + "\n", "tqa.jsonl")
    with pytest.raises(DataError, match="no answer"):
        D.load_triviaqa(path)
    assert D.load_triviaqa(path, split="test")[0].answers == []  # the test split has no public answers


def _adv_record(i: int) -> dict:
    return {"qas_id": f"q{i}", "question": "q?", "answer": "a", "paragraphs": [], "rationale": []}


def test_adversarial_hotpotqa_needs_exactly_308_records(w):
    for n in (307, 309):
        path = w(json.dumps([_adv_record(i) for i in range(n)]), "sim_dev.json")
        with pytest.raises(DataError, match=f"308-record sim_dev file.*got {n} records"):
            D.load_adv_hotpotqa(path, split="test", alt_answers=None)
        assert len(D.load_adv_hotpotqa(path, split="all", alt_answers=None)) == n
    path = w(json.dumps([_adv_record(i) for i in range(308)]), "sim_dev.json")
    assert len(D.load_adv_hotpotqa(path, split="test", alt_answers=None)) == 250


@pytest.mark.parametrize("text", ["", "  \n\n ", "[]", "\ufeff"])
def test_empty_files_are_an_error(w, text):
    with pytest.raises(DataError, match="empty|no records"):
        D.load_nq_open(w(text, "nq.jsonl"))
    with pytest.raises(DataError, match="empty|no records"):
        D.load_hotpotqa(w(text, "h.json"))
    if text.strip("[]\ufeff \n"):
        return
    with pytest.raises(DataError, match="empty file"):
        D.load_nq_open(w(text.replace("[]", ""), "nq.qa.csv"))


def test_empty_corpora_rationales_and_selections_are_errors(w, tmp_path, monkeypatch):
    with pytest.raises(DataError, match="no passages after the header"):
        D.read_dpr_tsv(w("id\ttext\ttitle\n", "p.tsv"))
    with pytest.raises(DataError, match="empty file: no passages"):
        D.read_jsonl_corpus(w("\n \n", "c.jsonl"))
    with pytest.raises(DataError, match="empty file: no 'id<TAB>answer' lines"):
        D.load_fewshot_answers(w("", "manual_answer.txt"))
    fever = w(FEVER_ROW.format(id=1, q="c"), "fever.jsonl")
    with pytest.raises(DataError, match="no ids"):
        D.load_fever(fever, ids=[])
    with pytest.raises(DataError, match=r"record 1: id 1 is already selected at record 0"):
        D.load_fever(fever, ids=[1, 1])


def test_jsonl_line_that_is_not_an_object_is_an_error_at_its_line(w):
    path = w('["a", "b"]\n{"question": "q?", "answer": ["x"]}\n', "nq.jsonl")
    with pytest.raises(DataError, match="line 1.*expected a JSON object, got list"):
        D.load_nq_open(path)
    with pytest.raises(DataError, match="invalid JSON: Extra data"):  # a JSON list with trailing garbage stays so
        D.load_nq_open(w('[{"question": "q?", "answer": ["x"]}\n]\ngarbage\n', "nq.json"))
    with pytest.raises(DataError, match="line 2: invalid JSON: Extra data"):  # also when the list fits on line 1
        D.load_nq_open(w('[{"question": "q?", "answer": ["x"]}]\ngarbage\n', "nq.json"))


def test_duplicate_ids_in_hotpotqa_and_corpora_are_errors(w):
    row = {"id": "h1", "question": "q?", "answer": "a", "supporting_facts": {"title": [], "sent_id": []},
           "context": {"title": [], "sentences": []}}
    with pytest.raises(DataError, match=r"record 1: duplicate id 'h1' \(first used at record 0\)"):
        D.load_hotpotqa(w(json.dumps([row, row]), "h.json"))
    with pytest.raises(DataError, match=r"line 3.*duplicate passage id '1' \(first at line 2\)"):
        D.read_dpr_tsv(w("id\ttext\ttitle\n1\ta\tA\n1\tb\tB\n", "p.tsv"))
    with pytest.raises(DataError, match=r"line 2.*duplicate passage id '1'"):
        D.read_jsonl_corpus(w('{"id": 1, "title": "A", "text": "a"}\n{"id": "1", "title": "B", "text": "b"}\n', "c.jsonl"))
    assert len(list(D.iter_dpr_tsv(w("id\ttext\ttitle\n1\ta\tA\n1\tb\tB\n", "p.tsv")))) == 2  # streams do not check


def test_bom_in_triviaqa_jsonl_stays_json(w):
    row = {"question_id": "t1", "question": "Who?", "answer": {"value": "X", "aliases": ["Y"]}}
    (example,) = D.load_triviaqa(w("\ufeff" + json.dumps(row) + "\n", "tqa.jsonl"))
    assert (example.id, example.question, example.answers) == ("t1", "Who?", ["X", "Y"])


def test_bom_in_dpr_header_and_rationale_file_is_ignored(w, tmp_path, monkeypatch):
    assert D.read_dpr_tsv(w("\ufeffid\ttext\ttitle\n1\tt\tT\n", "p.tsv")) == [Passage("1", "T", "t")]
    monkeypatch.setenv("COVLIB_DATA", str(tmp_path))
    (tmp_path / "fever").mkdir()
    (tmp_path / "fever" / "train_subset.jsonl").write_text(FEVER_ROW.format(id=1, q="c"), encoding="utf-8")
    (tmp_path / "fever" / "manual_rat.txt").write_text("\ufeff1\tThe rationale.\n", encoding="utf-8")
    ((example, rationale),) = D.load_fewshot("fever")
    assert (example.id, rationale) == ("1", "The rationale.")


def test_line_separators_inside_a_json_string_stay_in_the_text(w):
    question = "first part\u2028second part\u0085third\x0cfourth"
    (example,) = D.load_nq_open(w(json.dumps({"question": question, "answer": ["x"]}, ensure_ascii=False) + "\n", "q.jsonl"))
    assert example.question == question


def test_latin1_bytes_name_the_line(w):
    bad = "caf\u00e9".encode("latin-1")
    with pytest.raises(DataError, match="line 3.*not UTF-8"):
        D.read_dpr_tsv(w(b"id\ttext\ttitle\n1\tok\tA\n2\t" + bad + b"\tB\n", "p.tsv"))
    with pytest.raises(DataError, match="line 2.*not UTF-8"):
        D.read_jsonl_corpus(w(b'{"id": 1, "title": "A", "text": "a"}\n{"id": 2, "title": "B", "text": "' + bad + b'"}\n',
                              "c.jsonl"))
    with pytest.raises(DataError, match="not UTF-8"):
        D.load_nq_open(w(b'{"question": "' + bad + b'", "answer": ["x"]}\n', "q.jsonl"))


@pytest.mark.parametrize("source, hub", [
    ("google-research-datasets/nq_open", True), ("hotpot_qa:fullwiki", True), ("nq_open", True),
    ("Qwen/Qwen2.5-7B", True), ("facebook/opt-1.3b", True),
    ("nq/x.jsnl", False), ("nq/x.jsonl", False), ("x.json", False), ("./nq_open", False), ("a/b/c", False),
    ("../shared/data", False), ("", False),
])
def test_is_hub_id_tells_hub_ids_from_local_paths(source, hub):
    assert paths.is_hub_id(source) is hub


def test_mistyped_local_path_fails_at_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "nq").mkdir()
    start = time.perf_counter()
    for source in ("nq/x.jsnl", "nq/x"):  # an extension, or an owner that is a local folder: a path
        with pytest.raises(DataError, match="file not found"):
            D.load_nq_open(source)
    assert time.perf_counter() - start < 5, "no hub lookup"


# --------------------------------------------------------------------------- gzip and long fields (issue 22)

NQ_ROWS = [{"question": "Who wrote it?", "answer": ["Ann"]}, {"question": "Where is it?", "answer": ["Paris"]}]
GZIP_CASES = [  # (plain name, text, loader): every format the readers take
    ("q.jsonl", "".join(json.dumps(r) + "\n" for r in NQ_ROWS), D.load_nq_open),
    ("q.json", json.dumps(NQ_ROWS), D.load_nq_open),
    ("nq-dev.qa.csv", 'Who wrote it?\t"[\'Ann\']"\nWhere is it?\t"[\'Paris\', ""Paris, France""]"\n', D.load_nq_open),
    ("psgs_w100.tsv", 'id\ttext\ttitle\n1\tFirst "passage"\tA\n2\tSecond\tB\n', D.read_dpr_tsv),
    ("psgs_w100.tsv", "id\ttext\ttitle\n1\tFirst\tA\n2\tSecond\tB\n", lambda p: list(D.iter_dpr_tsv(p))),
    ("psgs_w100.tsv", "id\ttext\ttitle\n1\tFirst\tA\n2\tSecond\tB\n", D.load_corpus),
    ("c.jsonl", '{"id": 1, "contents": "\\"A\\"\\nFirst"}\n{"id": 2, "title": "B", "text": "b"}\n',
     D.read_jsonl_corpus),
    ("c.jsonl", '{"id": 1, "title": "A", "text": "a"}\n', D.load_corpus),
    ("manual_answer.txt", "\ufeffq1\tThe answer is Ann.\nq2\tIt is in Paris.\n", D.load_fewshot_answers),
]


@pytest.mark.parametrize("name, text, loader", GZIP_CASES)
def test_gzipped_input_loads_the_same_records_as_plain(w, tmp_path, name, text, loader):
    plain = loader(w(text, name))
    assert plain
    packed = gzip.compress(text.encode("utf-8"))
    assert loader(w(packed, name + ".gz")) == plain  # as DPR ships psgs_w100.tsv.gz
    (tmp_path / "packed").mkdir()
    assert loader(w(packed, f"packed/{name}")) == plain  # told by the magic bytes, not only the suffix


def test_truncated_gzip_is_an_error_naming_the_file(w):
    rows = "id\ttext\ttitle\n" + "".join(f"{i}\tpassage number {i} {'x' * (i % 7)}\tT{i}\n" for i in range(2000))
    packed = gzip.compress(rows.encode("utf-8"))
    path = w(packed[: len(packed) // 2], "psgs_w100.tsv.gz")
    for read in (D.read_dpr_tsv, D.load_corpus, lambda p: list(D.iter_dpr_tsv(p))):
        with pytest.raises(DataError, match=r"psgs_w100\.tsv\.gz.*truncated or corrupt gzip file"):
            read(path)
    nq = gzip.compress("".join(json.dumps({"question": f"q{i}", "answer": ["a"]}) + "\n" for i in range(500)).encode())
    for name in ("q.jsonl.gz", "nq-dev.qa.csv.gz"):
        with pytest.raises(DataError, match=re.escape(name) + ".*truncated or corrupt gzip file"):
            D.load_nq_open(w(nq[:-10], name))
    with pytest.raises(DataError, match=r"c\.jsonl\.gz.*truncated or corrupt gzip file"):
        D.read_jsonl_corpus(w(b"\x1f\x8b\x08\x00garbage", "c.jsonl.gz"))


@pytest.fixture
def default_csv_limit():
    """csv's default field size limit (131072) while the test runs: the readers must raise it themselves."""
    before = csv.field_size_limit(131072)
    yield
    csv.field_size_limit(before)


def test_a_field_over_the_csv_default_limit_loads(w, default_csv_limit):
    long = "word " * 40_000  # 200,000 characters > 131,072
    (passage,) = D.read_dpr_tsv(w(f"id\ttext\ttitle\n1\t{long}\tT\n", "psgs_w100.tsv"))
    assert passage.text == long
    (example,) = D.load_nq_open(w(f"{long}\t\"['x']\"\n", "nq-dev.qa.csv"))
    assert example.question.strip() == long.strip()
    (passage,) = D.read_dpr_tsv(w(gzip.compress(f"id\ttext\ttitle\n1\t{long}\tT\n".encode()), "psgs_w100.tsv.gz"))
    assert passage.text == long


# --------------------------------------------------------------------------- gzip bombs, other compressions (32)


def _expanding_gzip(line: bytes, total: int) -> bytes:
    """A real multi-member gzip of `line` repeated to about `total` bytes (a valid gzip, as `cat a.gz b.gz` makes)."""
    member = gzip.compress(line * (2**20 // len(line)))  # 1 MiB of text per member
    return member * (total // 2**20)


def _peak_while(read) -> tuple[BaseException | None, float, int]:
    """(the exception `read()` raised, seconds, peak bytes allocated by Python meanwhile)."""
    import tracemalloc

    tracemalloc.start()
    start = time.perf_counter()
    try:
        read()
        raised = None
    except BaseException as err:  # noqa: BLE001 - returned to the test, which checks what it is
        raised = err
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return raised, seconds, peak


def test_a_gzip_bomb_stops_at_the_cap_naming_the_file_in_little_time_and_memory(w, monkeypatch):
    from covlib.data import readers

    cap = 8 * 2**20
    monkeypatch.setattr(readers, "MAX_DECOMPRESSED_BYTES", cap, raising=False)
    row = FEVER_ROW.format(id=1, q="Paris is in France.").encode()
    path = w(_expanding_gzip(row, 50 * 2**20), "fever.jsonl.gz")  # ~50 KB that expands to 50 MiB
    assert path.stat().st_size < 500_000
    raised, seconds, peak = _peak_while(lambda: D.load_fever(path))
    assert isinstance(raised, DataError), repr(raised)
    message = str(raised)
    assert message.startswith(f"{path}: expands to over 8,388,608 bytes (stopped after decompressing 8,388,609 bytes)")
    assert "gzip bomb" in message and "covlib.data.readers.MAX_DECOMPRESSED_BYTES" in message
    assert peak < 4 * cap and seconds < 10  # it stopped at the cap: the 50 MiB were never held


def test_a_streamed_corpus_reads_past_the_whole_file_cap_but_not_a_bomb_line(w, monkeypatch):
    from covlib.data import readers

    monkeypatch.setattr(readers, "MAX_DECOMPRESSED_BYTES", 2**20, raising=False)
    monkeypatch.setattr(readers, "MAX_LINE_BYTES", 2**20, raising=False)
    passage = json.dumps({"id": "p", "title": "T", "text": "a passage " * 5}).encode() + b"\n"
    streamed = w(_expanding_gzip(passage, 4 * 2**20), "c.jsonl.gz")  # 4 MiB of passages: a stream has no total cap
    assert sum(1 for _ in D.iter_jsonl_corpus(streamed)) == (2**20 // len(passage)) * 4
    first = b'{"id": "p", "title": "T", "text": "a short passage"}\n'
    huge = b'{"id": "q", "title": "T", "text": "' + b"a" * (40 * 2**20) + b'"}\n'  # one 40 MiB line
    bomb = w(gzip.compress(first + huge), "bomb.jsonl.gz")
    with pytest.raises(DataError, match=re.escape(f"{bomb}: line 2 is over 1,048,576 bytes (stopped after "
                                                  "decompressing 1,048,577 bytes)")) as err:
        list(D.iter_jsonl_corpus(bomb))
    assert "MAX_LINE_BYTES" in str(err.value)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc/self/status are Linux's")
def test_running_out_of_memory_on_a_gzip_names_the_file(tmp_path):
    """A real MemoryError (the address space capped below what the expansion needs) names the file, not only
    "MemoryError: Unable to allocate output buffer."."""
    import subprocess
    from pathlib import Path

    path = tmp_path / "q.jsonl.gz"
    path.write_bytes(_expanding_gzip(b"\0" * 4096, 2**30))  # 1 MB that expands to 1 GiB, under the 2 GiB cap
    child = """
import re, resource, sys
from covlib import data as D
from covlib.core.records import DataError
size = int(re.search(r"VmSize:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1)) * 1024
resource.setrlimit(resource.RLIMIT_AS, (size + 256 * 2**20, resource.getrlimit(resource.RLIMIT_AS)[1]))
try:
    D.load_nq_open(sys.argv[1])
except DataError as err:
    print("DataError:", err)
"""
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", child, str(path)], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.stdout.startswith(f"DataError: {path}: ran out of memory after reading "), done.stderr[-2000:]
    assert "(decompressed)" in done.stdout and "gzip bomb" in done.stdout


def _zip(path, inner: str, text: str):
    path.write_bytes(_zip_bytes(inner, text.encode()))
    return path


def _zip_bytes(inner: str, data: bytes) -> bytes:
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(inner, data)
    return buffer.getvalue()


NQ_TEXT = "".join(json.dumps(r) + "\n" for r in NQ_ROWS)
CORPUS_TEXT = "id\ttext\ttitle\n1\tFirst\tA\n2\tSecond\tB\n"


@pytest.mark.parametrize("name, pack, kind, command", [
    ("q.jsonl.gz", lambda b: gzip.compress(gzip.compress(b)), "gzip-compressed inside its gzip (compressed twice)",
     "gunzip -c q.jsonl.gz | gunzip -c > q.jsonl"),
    ("q.jsonl", lambda b: bz2.compress(b), "bzip2-compressed, not text", "bunzip2 -c q.jsonl > plain-q.jsonl"),
    ("q.jsonl.bz2", lambda b: bz2.compress(b), "bzip2-compressed, not text", "bunzip2 -c q.jsonl.bz2 > q.jsonl"),
    ("q.jsonl.xz", lambda b: lzma.compress(b), "xz-compressed, not text", "unxz -c q.jsonl.xz > q.jsonl"),
    ("q.jsonl.gz", lambda b: gzip.compress(bz2.compress(b)), "bzip2-compressed inside its gzip",
     "gunzip -c q.jsonl.gz | bunzip2 -c > q.jsonl"),
    ("q.jsonl.gz", lambda b: gzip.compress(_zip_bytes("q.jsonl", b)), "zip-compressed inside its gzip",
     "gunzip -c q.jsonl.gz | funzip > q.jsonl"),
])
def test_a_file_compressed_another_way_says_to_decompress_it(w, name, pack, kind, command):
    for text, loaders in ((NQ_TEXT, (D.load_nq_open, D.load_web_questions)),
                          (CORPUS_TEXT, (D.read_dpr_tsv, D.load_corpus, lambda p: list(D.iter_dpr_tsv(p))))):
        path = w(pack(text.encode()), name)
        for loader in loaders:
            with pytest.raises(DataError) as err:
                loader(path)
            message = str(err.value)
            assert message.startswith(f"{path}: is {kind}"), message
            assert command in message and "UTF-8" not in message and "re-encode" not in message


def test_a_zip_archive_says_to_unzip_it(w, tmp_path):
    for path in (_zip(tmp_path / "q.zip", "q.jsonl", NQ_TEXT), _zip(tmp_path / "q.jsonl", "q.jsonl", NQ_TEXT)):
        with pytest.raises(DataError, match=re.escape(f"{path}: is zip-compressed, not text: decompress it "
                                                      f"(unzip -p {path.name} > ")):
            D.load_nq_open(path)
    corpus = _zip(tmp_path / "c.jsonl", "c.jsonl", '{"id": 1, "title": "A", "text": "a"}\n')
    for read in (D.read_jsonl_corpus, D.load_corpus, lambda p: list(D.iter_jsonl_corpus(p))):
        with pytest.raises(DataError, match=re.escape(f"{corpus}: is zip-compressed, not text")):
            read(corpus)


def test_zstd_compressed_input_says_to_decompress_it(w, tmp_path):
    import shutil
    import subprocess

    if shutil.which("zstd") is None:
        pytest.skip("the zstd command is not installed")
    plain = w(NQ_TEXT, "q.jsonl")
    subprocess.run(["zstd", "-q", "-f", str(plain), "-o", str(tmp_path / "q.jsonl.zst")], check=True)
    with pytest.raises(DataError, match=re.escape(f"q.jsonl.zst: is zstd-compressed, not text: decompress it "
                                                  "(zstd -dc q.jsonl.zst > q.jsonl)")):
        D.load_nq_open(tmp_path / "q.jsonl.zst")


def test_text_that_starts_like_a_magic_number_is_still_text(w):
    (example,) = D.load_nq_open(w("BZh9 is a question?\t\"['yes']\"\n", "nq-dev.qa.csv"))
    assert example.question == "BZh9 is a question?"
    (passage,) = D.read_dpr_tsv(w("id\ttext\ttitle\nPK1\tPK\x03 text\tT\n", "psgs_w100.tsv"))
    assert passage.id == "PK1"
