"""Issue 10: bad input and faults, tried as an adversarial user would. One test per case of the issue.

BADn are the silent wrong results, Wn the unhelpful errors; each test states the behaviour now
promised (a clear error naming file / line / field / parameter, or a documented behaviour).
"""

from __future__ import annotations

import json
import re
import os
import time
import warnings

import numpy as np
import pytest

from covlib import data as D
from covlib import nli
from covlib.core import paths
from covlib import retrieval as R
from covlib.core.cache import Cache, CacheError, make_key
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


# =========================================================================== data: silent wrong results


def test_bad01_dpr_qa_csv_quoted_answers(w):
    path = w('Q1\t"[\'He said ""hi""\']"\nQ2\t"[""Paris"", ""Paris, France""]"\n', "t.qa.csv")
    for loader in (D.load_triviaqa, D.load_nq_open):
        first, second = loader(path)
        assert first.answers == ['He said "hi"'] and second.answers == ["Paris", "Paris, France"]


def test_bad02_dpr_passage_with_unclosed_quote_is_an_error_at_its_line(w):
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


def test_bad03_fever_duplicate_ids_are_an_error(w):
    path = w(FEVER_ROW.format(id=7, q="A") + FEVER_ROW.format(id='"7"', q="B"), "fever.jsonl")
    with pytest.raises(DataError, match=r"line 2.*duplicate id '7' \(first used at line 1\)"):
        D.load_fever(path, ids=[7])


def test_bad04_fewshot_pool_with_a_duplicated_example_id(tmp_path, monkeypatch):
    monkeypatch.setenv("COVLIB_DATA", str(tmp_path))
    (tmp_path / "fever").mkdir()
    rows = FEVER_ROW.format(id=1, q="first claim") + FEVER_ROW.format(id=1, q="second claim")
    (tmp_path / "fever" / "train_subset.jsonl").write_text(rows, encoding="utf-8")
    (tmp_path / "fever" / "manual_rat.txt").write_text("1\tThe rationale.\n", encoding="utf-8")
    with pytest.raises(DataError, match="train_subset.jsonl.*line 2.*duplicate id '1'"):
        D.load_fewshot("fever")


def test_bad05_bom_is_not_part_of_the_first_question(w):
    path = w("\ufeffWho?\t['x']\n", "t.qa.csv")
    assert D.load_triviaqa(path)[0].question == "Who?"


def test_bad06_empty_question_or_answer_list_is_an_error(w):
    with pytest.raises(DataError, match="empty question"):
        D.load_nq_open(w('{"question": "", "answer": []}\n', "nq.jsonl"))
    with pytest.raises(DataError, match="no answer"):
        D.load_nq_open(w('{"question": "q?", "answer": []}\n', "nq.jsonl"))
    hotpot = {"id": "h", "question": "  ", "answer": "a", "supporting_facts": {"title": [], "sent_id": []},
              "context": {"title": [], "sentences": []}}
    with pytest.raises(DataError, match="field 'question' is empty"):
        D.load_hotpotqa(w(json.dumps(hotpot) + "\n", "h.jsonl"))


def test_bad06_every_loader_refuses_an_empty_answer(w):
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


def test_bad07_adversarial_hotpotqa_needs_exactly_308_records(w):
    for n in (307, 309):
        path = w(json.dumps([_adv_record(i) for i in range(n)]), "sim_dev.json")
        with pytest.raises(DataError, match=f"308-record sim_dev file.*got {n} records"):
            D.load_adv_hotpotqa(path, split="test", alt_answers=None)
        assert len(D.load_adv_hotpotqa(path, split="all", alt_answers=None)) == n
    path = w(json.dumps([_adv_record(i) for i in range(308)]), "sim_dev.json")
    assert len(D.load_adv_hotpotqa(path, split="test", alt_answers=None)) == 250


# =========================================================================== data: unhelpful errors


@pytest.mark.parametrize("text", ["", "  \n\n ", "[]", "\ufeff"])
def test_w01_empty_files_are_an_error(w, text):
    with pytest.raises(DataError, match="empty|no records"):
        D.load_nq_open(w(text, "nq.jsonl"))
    with pytest.raises(DataError, match="empty|no records"):
        D.load_hotpotqa(w(text, "h.json"))
    if text.strip("[]\ufeff \n"):
        return
    with pytest.raises(DataError, match="empty file"):
        D.load_nq_open(w(text.replace("[]", ""), "nq.qa.csv"))


def test_w01_empty_corpora_rationales_and_selections(w, tmp_path, monkeypatch):
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


def test_w02_jsonl_whose_first_line_is_a_list(w):
    path = w('["a", "b"]\n{"question": "q?", "answer": ["x"]}\n', "nq.jsonl")
    with pytest.raises(DataError, match="line 1.*expected a JSON object, got list"):
        D.load_nq_open(path)
    with pytest.raises(DataError, match="invalid JSON: Extra data"):  # a JSON list with trailing garbage stays so
        D.load_nq_open(w('[{"question": "q?", "answer": ["x"]}\n]\ngarbage\n', "nq.json"))
    with pytest.raises(DataError, match="line 2: invalid JSON: Extra data"):  # also when the list fits on line 1
        D.load_nq_open(w('[{"question": "q?", "answer": ["x"]}]\ngarbage\n', "nq.json"))


def test_w03_duplicate_ids_hotpotqa_and_corpora(w):
    row = {"id": "h1", "question": "q?", "answer": "a", "supporting_facts": {"title": [], "sent_id": []},
           "context": {"title": [], "sentences": []}}
    with pytest.raises(DataError, match=r"record 1: duplicate id 'h1' \(first used at record 0\)"):
        D.load_hotpotqa(w(json.dumps([row, row]), "h.json"))
    with pytest.raises(DataError, match=r"line 3.*duplicate passage id '1' \(first at line 2\)"):
        D.read_dpr_tsv(w("id\ttext\ttitle\n1\ta\tA\n1\tb\tB\n", "p.tsv"))
    with pytest.raises(DataError, match=r"line 2.*duplicate passage id '1'"):
        D.read_jsonl_corpus(w('{"id": 1, "title": "A", "text": "a"}\n{"id": "1", "title": "B", "text": "b"}\n', "c.jsonl"))
    assert len(list(D.iter_dpr_tsv(w("id\ttext\ttitle\n1\ta\tA\n1\tb\tB\n", "p.tsv")))) == 2  # streams do not check


def test_w04_bom_in_triviaqa_jsonl_stays_json(w):
    row = {"question_id": "t1", "question": "Who?", "answer": {"value": "X", "aliases": ["Y"]}}
    (example,) = D.load_triviaqa(w("\ufeff" + json.dumps(row) + "\n", "tqa.jsonl"))
    assert (example.id, example.question, example.answers) == ("t1", "Who?", ["X", "Y"])


def test_w05_bom_in_dpr_header_and_rationale_file(w, tmp_path, monkeypatch):
    assert D.read_dpr_tsv(w("\ufeffid\ttext\ttitle\n1\tt\tT\n", "p.tsv")) == [Passage("1", "T", "t")]
    monkeypatch.setenv("COVLIB_DATA", str(tmp_path))
    (tmp_path / "fever").mkdir()
    (tmp_path / "fever" / "train_subset.jsonl").write_text(FEVER_ROW.format(id=1, q="c"), encoding="utf-8")
    (tmp_path / "fever" / "manual_rat.txt").write_text("\ufeff1\tThe rationale.\n", encoding="utf-8")
    ((example, rationale),) = D.load_fewshot("fever")
    assert (example.id, rationale) == ("1", "The rationale.")


def test_w06_line_separator_inside_a_json_string(w):
    question = "first part\u2028second part\u0085third\x0cfourth"
    (example,) = D.load_nq_open(w(json.dumps({"question": question, "answer": ["x"]}, ensure_ascii=False) + "\n", "q.jsonl"))
    assert example.question == question


def test_w07_latin1_bytes_name_the_line(w):
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
def test_w08_what_a_hub_id_looks_like(source, hub):
    assert paths.is_hub_id(source) is hub


def test_w08_mistyped_local_path_fails_at_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "nq").mkdir()
    start = time.perf_counter()
    for source in ("nq/x.jsnl", "nq/x"):  # an extension, or an owner that is a local folder: a path
        with pytest.raises(DataError, match="file not found"):
            D.load_nq_open(source)
    assert time.perf_counter() - start < 5, "no hub lookup"


# =========================================================================== cache


def test_w09_garbage_or_a_folder_at_the_cache_path(tmp_path):
    garbage = tmp_path / "calls.sqlite"
    garbage.write_bytes(b"not a database " * 100)
    with pytest.raises(CacheError, match=r"calls.sqlite.*not a usable SQLite cache.*delete the file"):
        Cache(garbage).get("k")
    with pytest.raises(CacheError, match="is a folder, not a SQLite file"):
        Cache(tmp_path).get("k")


def test_w10_truncated_cache_names_the_file_and_remedy(tmp_path):
    good = Cache(tmp_path / "good.sqlite")
    good.put_many({str(i): "value " * 200 for i in range(500)})
    good.close()
    blob = (tmp_path / "good.sqlite").read_bytes()
    (tmp_path / "cut.sqlite").write_bytes(blob[: len(blob) // 3])
    with pytest.raises(CacheError, match=r"cut.sqlite.*malformed.*delete the file"):
        cut = Cache(tmp_path / "cut.sqlite")
        [cut.get(str(i)) for i in range(500)]


def test_w11_finished_cache_reads_in_a_read_only_setting(tmp_path, monkeypatch):
    cache = Cache(tmp_path / "calls.sqlite", table="lm")
    cache.put_many({"a": 1, "b": [1.5, "x"]})
    cache.close()
    monkeypatch.setenv("COVLIB_CACHE_READONLY", "1")
    shared = Cache(tmp_path / "calls.sqlite", table="lm")
    assert shared.readonly and shared.get_many(["a", "b", "c"]) == {"a": 1, "b": [1.5, "x"]} and len(shared) == 2
    with pytest.raises(CacheError, match="read-only.*1 new results are not in it"):
        shared.put("c", 3)
    assert Cache(tmp_path / "other.sqlite").get("a") is None  # no file yet: nothing cached, nothing created
    assert not (tmp_path / "other.sqlite").exists()


def test_w11_notebook_rerun_from_a_read_only_cache(lm, monkeypatch):
    from covlib.generation import LM

    done = lm.generate(["Question: Who wrote Hamlet?\nAnswer:"], max_new_tokens=6, progress=False)
    monkeypatch.setenv("COVLIB_CACHE_READONLY", "1")
    shared = LM(cache=Cache(lm.cache.path, table="lm"))
    assert shared.generate(["Question: Who wrote Hamlet?\nAnswer:"], max_new_tokens=6, progress=False) == done
    with pytest.raises(CacheError, match="read-only.*1 new results are not in it"):
        shared.generate(["Question: Who wrote Macbeth?\nAnswer:"], max_new_tokens=6, progress=False)
    assert shared.forward_calls == 0  # refused before any model work


def test_w11_read_only_folder_for_real(tmp_path):
    """A folder this process cannot write to. As root (this machine, CI), permissions are enforced by dropping
    root's override capabilities with setpriv for the child process."""
    import shutil
    import subprocess
    import sys

    folder = tmp_path / "shared"
    folder.mkdir()
    cache = Cache(folder / "calls.sqlite")
    cache.put("a", 1)
    cache.close()
    prefix: list[str] = []
    if os.geteuid() == 0:
        if not shutil.which("setpriv"):
            pytest.skip("running as root without setpriv: permissions cannot be enforced")
        prefix = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"]
    script = f"""
from covlib.core.cache import Cache, CacheError
done = Cache({str(folder / "calls.sqlite")!r})
missing = Cache({str(folder / "missing.sqlite")!r})
print(done.readonly, done.get("a"), missing.readonly, missing.get("a"))
try:
    missing.put("b", 2)
except CacheError as err:
    print("refused:", err)
"""
    folder.chmod(0o555)
    try:
        out = subprocess.run([*prefix, sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                             cwd=paths.code_root())
    finally:
        folder.chmod(0o755)
    assert out.returncode == 0, out.stderr
    first, refused = out.stdout.strip().splitlines()
    assert first == "True 1 True None" and "is read-only" in refused and "1 new results" in refused
    assert not (folder / "missing.sqlite").exists()


def test_cache_folder_that_cannot_be_created(tmp_path):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(CacheError, match="cannot create its folder"):
        Cache(tmp_path / "afile" / "sub" / "calls.sqlite").get("a")


# =========================================================================== generation


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    from covlib.generation import LM

    return LM(cache=Cache(tmp_path_factory.mktemp("lm") / "calls.sqlite", table="lm"), batch_size=4)


def test_bad08_local_model_overwritten_gets_fresh_completions(tmp_path):
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from covlib.generation import LM, embedded_model_dir

    tok = AutoTokenizer.from_pretrained(embedded_model_dir())
    folder = tmp_path / "tiny-llama"

    def write_weights(seed: int) -> None:
        torch.manual_seed(seed)
        config = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                             num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=128)
        LlamaForCausalLM(config).save_pretrained(folder)
        tok.save_pretrained(folder)

    cache = Cache(tmp_path / "calls.sqlite", table="lm")
    write_weights(0)
    first = LM(str(folder), cache=cache, device="cpu").generate(["Hello there"], max_new_tokens=8, progress=False)
    write_weights(1)
    retrained = LM(str(folder), cache=cache, device="cpu")
    again = retrained.generate(["Hello there"], max_new_tokens=8, progress=False)
    assert retrained.forward_calls > 0, "new weights under the same folder were served the old cached text"
    assert again[0][0].tokens != first[0][0].tokens
    same = LM(str(folder), cache=cache, device="cpu")
    assert same.generate(["Hello there"], max_new_tokens=8, progress=False) == again and same.forward_calls == 0


def test_bad09_w12_empty_prompt_is_refused_and_nothing_cached(lm):
    before = len(lm.cache)
    for prompts in (["", "The capital of Italy is"], [""]):
        with pytest.raises(ValueError, match="prompt 0 is empty"):
            lm.generate(prompts, max_new_tokens=8, progress=False)
    assert len(lm.cache) == before
    assert lm.generate(["\n"], max_new_tokens=4, progress=False)[0][0].tokens  # whitespace is a token: fine


def test_bad10_one_stop_string(lm):
    prompt = ["Question: What is the capital of France?\nAnswer: Paris.\nQuestion: What is the capital of Italy?\nAnswer:"]
    as_string = lm.generate(prompt, max_new_tokens=24, stop="Question:", progress=False)[0][0]
    as_list = lm.generate(prompt, max_new_tokens=24, stop=["Question:"], progress=False)[0][0]
    assert as_string == as_list and len(as_string.text) > 3


def test_w13_w14_w15_bad_decoding_values_and_prompts(lm):
    from covlib.generation import check_prompts
    from tests.scripted import ScriptedGenerator

    for kwargs in ({"temperature": float("nan")}, {"temperature": float("inf")}, {"top_p": float("nan")}):
        with pytest.raises(ValueError, match="finite temperature"):
            lm.generate(["Hi"], progress=False, **kwargs)
    with pytest.raises(ValueError, match=r"prompt 1 is not valid Unicode text \(surrogates not allowed"):
        lm.generate(["fine", "lone \ud800 surrogate"], progress=False)
    with pytest.raises(TypeError, match="prompt 0 is NoneType, not str"):
        lm.generate([None], progress=False)
    with pytest.raises(TypeError, match="continuation 0 is int"):
        lm.score(["a"], [3], progress=False)
    with pytest.raises(TypeError, match="stop must be a string or a list of strings"):
        lm.generate(["Hi"], stop=[None], progress=False)
    with pytest.raises(ValueError, match="prompt 0 is empty"):  # the tests' scripted generator keeps the same rules
        ScriptedGenerator({}).generate([""])
    assert check_prompts(np.array(["a", "b"]), "generate") == ["a", "b"]  # any iterable of strings
    assert make_key(prompt="\ud800") != make_key(prompt="\ud801")  # the cache key itself never crashes
    with pytest.raises(ValueError, match=r"probabilities\(\): hypothesis 0 is not valid Unicode"):
        nli.probabilities(["a"], ["\ud800"], judge="overlap")
    with pytest.raises(TypeError, match=r"top_sentences_batch\(\) takes a list of queries"):
        R.top_sentences_batch("q", [["a."]])


def test_missing_local_model_folder_is_not_a_hub_lookup(tmp_path):
    from covlib.generation import LM

    with pytest.raises(FileNotFoundError, match="does not exist, and it is not a hub id"):
        LM(str(tmp_path / "models" / "mine"))


# =========================================================================== NLI


def test_bad11_empty_hypothesis_or_premise_is_neutral(isolated_cache):
    assert nli.entailment_labels(["Paris is in France."], [""], progress=False) == ["neutral"]
    probs = nli.probabilities(["", "  "], ["Paris is in France.", "x"], progress=False)
    assert probs.tolist() == [[0.0, 1.0, 0.0], [0.0, 1.0, 0.0]]
    # the overlap heuristic's rule (judge=None is the trained judge once `make judge` built it)
    assert nli.entailment_labels(["Paris is in France."], ["It is."], judge="overlap", progress=False) == ["neutral"]


def test_bad12_w18_lone_strings_and_non_strings_are_refused(isolated_cache):
    with pytest.raises(TypeError, match=r"probabilities\(\) takes a list of premises, not str"):
        nli.probabilities("Paris", "Paris")
    with pytest.raises(TypeError, match="premise 0 is NoneType"):
        nli.entailment([None], ["x"])
    assert nli.probabilities(("Paris is big.",), iter(["Paris is big."]), progress=False).shape == (1, 3)


def test_w16_w17_judge_specs_fail_at_once(tmp_path):
    start = time.perf_counter()
    for spec in ("foo", "", "   "):
        with pytest.raises(ValueError, match="choose 'minilm-fever-nli'"):
            nli.load_judge(spec)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        nli.load_judge(str(tmp_path / "no-such-judge"))
    assert time.perf_counter() - start < 5
    empty = tmp_path / "not-a-model"
    empty.mkdir()
    with pytest.raises(RuntimeError, match="could not load NLI model.*holds no loadable model.*Offline choices"):
        nli.probabilities(["a"], ["b"], judge=nli.load_judge(str(empty)), progress=False)


# =========================================================================== retrieval


PASSAGES = [Passage("1", "Alpha", "alpha beta gamma"), Passage("2", "Beta", "beta delta"),
            Passage("3", "Gamma", "gamma epsilon")]


@pytest.fixture(scope="module")
def retrievers():
    return [R.BM25Retriever(PASSAGES), R.BM25Retriever(PASSAGES, backend="rank_bm25"), R.TfidfRetriever(PASSAGES),
            R.DenseRetriever(PASSAGES)]


def test_bad13_one_rule_for_k(retrievers):
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


def test_bad14_search_batch_refuses_a_lone_string(retrievers):
    for r in retrievers:
        with pytest.raises(TypeError, match="takes a list of queries, not str"):
            r.search_batch("alpha beta", k=2)
        assert [[h.passage.id for h in hits][:1] for hits in r.search_batch(("alpha", "delta"), k=1)] == [["1"], ["2"]]


def test_w19_duplicate_passage_ids(retrievers):
    twice = [*PASSAGES, Passage("2", "Other", "other text")]
    for kind in ("bm25", "tfidf"):
        with pytest.raises(ValueError, match=r"duplicate passage id '2' \(passages 1 and 3\)"):
            R.build_retriever(kind, twice)


def test_w20_corpus_without_a_searchable_word():
    empty = [Passage("1", "", ""), Passage("2", "", "the of and")]
    for r in (lambda: R.BM25Retriever(empty), lambda: R.BM25Retriever(empty, backend="rank_bm25"),
              lambda: R.TfidfRetriever(empty)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            built = r()
        assert built.search("the alpha", k=3) == []
        assert any("none of the 2 passages has a searchable word" in str(c.message) for c in caught), built


def test_w20_unsearchable_index_saves_and_loads(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        R.BM25Retriever([Passage("1", "", "the of")]).save(tmp_path / "idx")
        assert R.load_retriever(tmp_path / "idx").search("the", k=1) == []


# =========================================================================== beyond the list: notebook parameters


def test_parameters_are_checked_by_name():
    from covlib.runs import profiles

    with pytest.raises(ValueError) as err:
        profiles.check_parameters(n_questions=-5, k="abc", temperature=float("nan"), epochs=0.0, seed=3,
                                  bias_above=1.5, max_steps=-1, n_rating=0)
    message = str(err.value)
    for part in ("n_questions must be >= 1, got -5", "k must be a whole number, got 'abc'",
                 "temperature must be a finite number, got nan", "epochs must be > 0.0", "bias_above must be between"):
        assert part in message
    assert "seed" not in message and "max_steps" not in message and "n_rating" not in message
    with pytest.raises(KeyError, match="PARAMETER_RULES"):
        profiles.check_parameters(n_typo=3)
    assert profiles.split_list("datasets", "nq, WebQ,nq", ["NQ", "WebQ", "TriviaQA"]) == ["NQ", "WebQ"]
    for args, match in [(("datasets", "NQ,Foo", ["NQ", "WebQ"]), "unknown 'Foo'; choose from NQ, WebQ"),
                        (("judges", " , "), "parameter judges is empty"), (("ks", 5), "comma-separated string")]:
        with pytest.raises(ValueError, match=match):
            profiles.split_list(*args)
    with pytest.raises(ValueError, match="not a valid int"):
        profiles.split_list("ks", "1,x", cast=int)
    with pytest.raises(ValueError, match="takes one value"):
        profiles.choice("knowledge", "bm25,tfidf", ["bm25", "tfidf"])


def _parameters_cell(source: str) -> tuple[dict[str, str], str]:
    """(name -> annotated type of each parameter, the source of the cell after the parameters cell)."""
    cells = source.split("\n# %%")
    index = next(i for i, c in enumerate(cells) if 'tags=["parameters"]' in c.split("\n", 1)[0])
    names = dict(re.findall(r"^(\w+): (int|float|str|bool) =", cells[index], flags=re.M))
    return names, cells[index + 1]


@pytest.mark.parametrize("notebook", sorted(paths.code_root().glob("notebooks/[0-9]*_*.py")), ids=lambda p: p.stem)
def test_every_numeric_notebook_parameter_is_checked(notebook):
    names, derived = _parameters_cell(notebook.read_text(encoding="utf-8"))
    numeric = {n for n, t in names.items() if t in ("int", "float")}
    door = re.match(r"\s*S = setup\((.*?)\)(?:  #[^\n]*)?\n", derived, flags=re.S)
    if door:  # a paper's set-up door (covlib/papers/<paper>/notebook.py) checks what it is given before any work
        assert numeric - set(re.findall(r"\w+=(\w+)", door.group(1))) == set(), f"{notebook.name}: not passed to setup"
        return
    calls = re.findall(r"profiles\.check_parameters\((.*?)\)\n", derived, flags=re.S)
    checked = set(re.findall(r"(\w+)=", " ".join(calls))) | set(re.findall(r'"(\w+)":', " ".join(calls)))
    listed = set(re.findall(r'profiles\.(?:split_list|choice)\("(\w+)"', derived))
    assert numeric - checked - listed == set(), f"{notebook.name}: unchecked numeric parameters"
    assert derived.lstrip().startswith("profiles.check_parameters("), "check before anything else runs"


@pytest.mark.notebook
def test_a_bad_parameter_stops_the_notebook_at_once(tmp_path):
    import papermill as pm

    start = time.perf_counter()
    notebook = paths.code_root() / "notebooks" / "01_consistency_kde.ipynb"
    with pytest.raises(pm.PapermillExecutionError, match="n_questions must be >= 1, got -5"):
        pm.execute_notebook(str(notebook), str(tmp_path / "out.ipynb"), cwd=str(notebook.parent), progress_bar=False,
                            parameters={"profile": "smoke", "n_questions": -5, "n_samples": 0}, kernel_name="python3")
    assert time.perf_counter() - start < 120, "stopped before loading any model"


# =========================================================================== beyond the list: scripts and results


@pytest.mark.parametrize("args, message", [
    (["--only", "00,99"], "no notebook numbered 99; choose from 00, 00b"),
    (["--model", "nq/x.jsnl"], "is not a model folder here and not a hub id"),
    (["--device", "gpu"], "DEVICE='gpu': use cpu, cuda"),
    (["--profile", "bogus"], "unknown profile 'bogus'"),
])
def test_reproduce_refuses_bad_arguments_before_any_notebook(args, message):
    import subprocess
    import sys

    script = paths.code_root() / "scripts" / "reproduce.py"
    done = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and message in done.stderr and "===" not in done.stdout


def test_build_judge_refuses_bad_arguments_before_training():
    import subprocess
    import sys

    script = paths.code_root() / "scripts" / "build_judge.py"
    done = subprocess.run([sys.executable, str(script), "--name", "../x", "--batch-size", "0", "--val-fraction", "1.5"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    for part in ("--name '../x': a plain folder name", "--batch-size 0: must be >= 1", "--val-fraction 1.5"):
        assert part in done.stderr


@pytest.mark.notebook
def test_reproduce_names_the_failing_notebook_and_cell(tmp_path, monkeypatch):
    import subprocess
    import sys

    empty_model = tmp_path / "not-a-model"
    empty_model.mkdir()
    env = {**os.environ, "COVLIB_ROOT": str(tmp_path), "COVLIB_DATA": str(paths.data_dir()),
           "COVLIB_MODELS": str(paths.models_dir()), "COVLIB_CACHE": str(tmp_path / "cache"), "MPLBACKEND": "Agg"}
    if not paths.dataset_path("hotpotqa_adv", "sim_dev.json").exists():
        pytest.skip(f"real data not found under {paths.data_dir()}")
    script = paths.code_root() / "scripts" / "reproduce.py"
    done = subprocess.run([sys.executable, str(script), "--only", "01", "--profile", "smoke", "--model", str(empty_model)],
                          capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode != 0
    assert "01_consistency_kde.ipynb failed in cell" in done.stderr and "Could not load model" in done.stderr
    assert "run the same command again to resume" in done.stderr


def test_unreadable_recorded_metrics_name_the_file(tmp_path, monkeypatch):
    from covlib.runs import results

    monkeypatch.setenv("COVLIB_ROOT", str(tmp_path))
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "01_x.json").write_text('{"metrics": ', encoding="utf-8")
    with pytest.raises(ValueError, match=r"01_x.json are unreadable.*re-run the notebook"):
        results.load_metrics("01_x")


def test_plots_of_empty_or_mismatched_data():
    import matplotlib

    matplotlib.use("Agg")
    from covlib.runs import plotting

    ax = plotting.kde_by_group([], [])
    assert [t.get_text() for t in ax.texts] == ["no values to plot"]
    ax = plotting.kde_by_group([float("nan")], ["a"])  # nothing finite left: the same note, no seaborn error
    assert [t.get_text() for t in ax.texts] == ["no values to plot"]
    with pytest.raises(ValueError, match="3 values but 2 groups"):
        plotting.kde_by_group([1.0, 2.0, 3.0], [True, False])
    with pytest.raises(ValueError, match="series 'a' has 2 values for 3 x values"):
        plotting.line_with_peak([1, 2, 3], {"a": [1, 2]})


def test_unreadable_index_metadata_names_the_folder(tmp_path):
    R.BM25Retriever(PASSAGES).save(tmp_path / "idx")
    (tmp_path / "idx" / "meta.json").write_text("{broken", encoding="utf-8")
    with pytest.raises(DataError, match="meta.json.*unreadable index metadata.*delete the folder"):
        R.load_retriever(tmp_path / "idx")
