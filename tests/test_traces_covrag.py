"""CoV-RAG's traces on a scripted LM: Algorithm 1 (cov_rag) writes one record per question with retrieve, answer,
verify, σ and the re-retrieval steps, the prompts the LM received and its cache keys; the standalone batches
(answers, closed-book answers, verifications) and the LLM-as-judge ranking write one run per call."""

from __future__ import annotations

import re

import pytest

from covlib.core import traces
from covlib.core.records import Example
from covlib.papers import covrag as C
from covlib.papers.covrag import trace as T
from covlib.retrieval import BM25Retriever
from scripted import KeyedGenerator
from test_covrag import BAD, CORPUS, EXAMPLES, _script

NOTEBOOK = "09_covrag_iterations"
ALGORITHM = [name for name, _ in T.COV_RAG_STEPS]
SETTLED = ["retrieve", "answer", "verify", "σ"]
REVISED = SETTLED + ["re-retrieve with the revised query", "re-answer"]


KeyedLM = KeyedGenerator


@pytest.fixture
def folder(tmp_path):
    target = traces.start(NOTEBOOK, folder=tmp_path / "traces")
    yield target
    traces.stop()


def _only(folder) -> traces.Trace:
    found = traces.run_files(folder)
    assert len(found) == 1, [p.name for p in found]
    assert traces.validate(found[0]) == []
    return traces.read(found[0])


def _steps(record, name: str) -> list[dict]:
    return [s for s in record["steps"] if s["name"] == name]


def _received(lm, prefix: str) -> list[str]:
    return [p for desc, ps, _ in lm.calls if desc.startswith(prefix) for p in ps]


def test_cov_rag_writes_algorithm_1_per_question_with_prompts_keys_and_sigma(folder):
    lm = KeyedLM(_script({"Alabama": BAD}), name="org/answerer")
    records = C.cov_rag(lm, EXAMPLES, BM25Retriever(CORPUS), k=2, max_rounds=1)
    tr = _only(folder)
    assert tr.complete and tr.header["paper"] == "CoV-RAG" and tr.header["method"] == "cov_rag"
    assert [s["name"] for s in tr.header["steps"]] == ALGORITHM
    assert tr.header["title"] == "CoV-RAG, questions, 1 round, answerer"
    assert tr.header["compare"] == {"before": "round 1", "after": "final round"}
    assert tr.header["params"]["thresholds"]["mode"] == "all" and tr.header["params"]["k"] == 2
    bear, football = tr.find("q1"), tr.find("q2")
    assert [r["id"] for r in tr.records] == ["q1", "q2"]  # q1 settles at σ, q2 after its re-answer
    assert [s["name"] for s in bear["steps"]] == SETTLED and [s["name"] for s in football["steps"]] == REVISED
    assert bear["prediction"] == records[0].answer and bear["correct"] == 1.0
    assert bear["flags"] == {"fired": False, "rounds": 0, "parse_failures": 0, "judgment": "true",
                             "judgment_right": 1.0, "dataset": ""}
    assert football["before"] == {"prediction": "Alabama [1].", "correct": 0.0}
    assert football["prediction"] == "Princeton [1]." and football["correct"] == 1.0
    assert football["flags"]["fired"] and football["flags"]["rounds"] == 1 and football["flags"]["judgment"] == "false"
    assert football["flags"]["judgment_right"] == 1.0  # judged false, and the first answer was wrong
    assert traces.count_outcomes(traces.pairs(tr)) == {"fixed": 1, "broken": 0, "both right": 1, "both wrong": 0}
    counts = {r["condition"]: r for r in C.sigma_counts(tr)}
    assert counts["judged_false"]["questions meeting it"] == 1 and counts["judged_false"]["of"] == 2
    fired = counts["σ fired (all six)"]
    assert (fired["questions meeting it"], fired["fixed by the revision"], fired["broken by it"]) == (1, 1, 0)

    # retrieval: the query, the retriever, the passages with their scores; the re-retrieval uses x'
    first, again = _steps(football, "retrieve")[0], _steps(football, "re-retrieve with the revised query")[0]
    assert first["inputs"]["query"] == EXAMPLES[1].question and first["inputs"]["retriever"] == "bm25"
    assert first["outputs"]["ids"] == [p.id for p in records[1].rounds[0].references]
    call = first["calls"][0]
    assert call["kind"] == "retrieve" and call["key"] is None and len(call["passages"]) == 2
    assert all(isinstance(p["score"], float) and p["text"] for p in call["passages"])
    assert again["inputs"]["query"] == records[1].rounds[1].query and again["outputs"]["ids"][0] == "princeton"

    # every generate call: the prompt as the LM received it, its completion and its cache key
    received = set(_received(lm, "CoV-RAG"))
    for rec in tr.records:
        for s in rec["steps"]:
            for c in s["calls"]:
                if c["kind"] == "generate":
                    prompt = tr.prompt_text(c["prompt"])
                    assert prompt in received and c["key"] == lm.served[prompt][0], s["name"]
    verify = _steps(football, "verify")[0]
    assert tr.prompt_text(verify["calls"][0]["prompt"]) == C.verification_prompt(
        EXAMPLES[1].question, "Alabama [1].", records[1].rounds[0].references)
    assert verify["outputs"]["raw"] == BAD and verify["outputs"]["status"] == "ok" and verify["outputs"]["repairs"] == []
    assert verify["outputs"]["reference_correctness"] == 0.2 and verify["outputs"]["revised_query"].startswith("Which")
    reanswer = _steps(football, "re-answer")[0]
    assert tr.prompt_text(reanswer["calls"][0]["prompt"]) == _received(lm, "CoV-RAG re-answer")[0]
    assert reanswer["outputs"] == {"answer": "Princeton [1].", "correct": 1.0}
    assert len(tr.prefixes) == 1  # Table 6's verification criteria, stored once

    # σ: footnote 2's six conditions one by one
    sigma = _steps(football, "σ")[0]["outputs"]
    assert sigma["fired"] and sigma["mode"] == "all" and sigma["rule"] == "all six"
    rows = {r["condition"]: r for r in sigma["conditions"]}
    assert list(rows) == list(C.sigma_conditions(records[1].rounds[0].verification))
    assert rows["reference_low"] == {"condition": "reference_low", "field": "reference_correctness", "value": 0.2,
                                     "test": "<=", "threshold": 0.27, "holds": True}
    assert rows["bias_high"]["value"] == 0.9 and rows["bias_high"]["threshold"] == 0.7
    assert all(r["holds"] for r in rows.values())
    calm = _steps(bear, "σ")[0]["outputs"]
    assert not calm["fired"] and not {r["condition"]: r["holds"] for r in calm["conditions"]}["judged_false"]


def test_cov_rag_verify_only_a_failed_parse_and_a_separate_verifier(folder):
    answerer = KeyedLM(_script({}), name="answerer")
    verifier = KeyedLM(lambda p: "I think the answer is wrong, search for Princeton.", name="local:/m/verifier")
    examples = [Example(e.id, e.question, e.answers, metadata={"dataset": "nq_open"}) for e in EXAMPLES]
    C.cov_rag(answerer, examples, BM25Retriever(CORPUS), verifier=verifier, k=2, max_rounds=0,
              thresholds=C.Thresholds(mode="any"))
    tr = _only(folder)
    assert tr.header["title"] == "CoV-RAG, NQ, 0 rounds (verify only), answerer, verifier verifier"
    assert tr.header["params"]["thresholds"]["mode"] == "any"
    for rec in tr.records:
        assert [s["name"] for s in rec["steps"]] == SETTLED
        assert rec["flags"]["parse_failures"] == 1 and not rec["flags"]["fired"] and rec["flags"]["dataset"] == "NQ"
        assert rec["flags"]["judgment"] == "none" and rec["flags"]["judgment_right"] == 0.0
        verify = _steps(rec, "verify")[0]
        assert verify["outputs"]["status"] == "failed" and verify["outputs"]["repairs"] == ["no_json"]
        assert verify["calls"][0]["model"] == "local:/m/verifier"
        assert verify["calls"][0]["key"] == verifier.served[tr.prompt_text(verify["calls"][0]["prompt"])][0]
        assert _steps(rec, "σ")[0]["outputs"]["rule"] == "unparsed: never fires"


def test_cov_rag_many_rounds_keep_every_round(folder):
    always_bad = KeyedLM(lambda p: BAD if p.startswith("#verification-Task#") else "Alabama [1].")
    records = C.cov_rag(always_bad, EXAMPLES[1:], BM25Retriever(CORPUS), k=2, max_rounds=3)
    (rec,) = _only(folder).records
    assert [s["name"] for s in rec["steps"]] == (SETTLED + ["re-retrieve with the revised query", "re-answer",
                                                            "verify", "σ"] * 2
                                                 + ["re-retrieve with the revised query", "re-answer"])
    assert rec["flags"]["rounds"] == 3 == records[0].settled_round
    assert [s["inputs"]["round"] for s in rec["steps"] if s["name"] == "σ"] == [0, 1, 2]


def test_the_batches_write_one_run_per_call(folder):
    lm = KeyedLM(_script({"Alabama": BAD}), name="answerer")
    refs = [[p for p in CORPUS[:2]], [CORPUS[4], CORPUS[3]]]
    questions = [e.question for e in EXAMPLES]
    answers = C.answer_batch(lm, questions, refs, golds=[e.answers for e in EXAMPLES], desc="RAG answer",
                             ids=[e.id for e in EXAMPLES])
    closed = C.closed_book_batch(lm, questions)
    checks = C.verify_batch(lm, questions, answers, refs, labels=[e.answers for e in EXAMPLES], desc="teacher")
    runs = {traces.read(p).header["method"]: traces.read(p) for p in traces.run_files(folder)}
    assert sorted(runs) == ["answer batch", "closed-book answer batch", "verify batch"]
    for path in traces.run_files(folder):
        assert traces.validate(path) == [] and traces.read(path).complete
    rag = runs["answer batch"]
    assert [r["prediction"] for r in rag.records] == answers and [r["correct"] for r in rag.records] == [1.0, 0.0]
    assert rag.records[1]["steps"][0]["inputs"]["references"][0] == {"id": "alabama", "title": "Alabama Crimson Tide"}
    book = runs["closed-book answer batch"]
    assert [r["id"] for r in rag.records] == [e.id for e in EXAMPLES], "ids given: the examples' (joins other runs)"
    assert [r["id"] for r in book.records] == ["0", "1"], "no ids: positions"
    assert [r["prediction"] for r in book.records] == closed and book.records[0]["gold"] == []
    assert book.records[0]["correct"] is None  # no golds given: no correctness
    ver = runs["verify batch"]
    assert [r["prediction"] for r in ver.records] == [v.judgment for v in checks] == ["true", "false"]
    assert [r["correct"] for r in ver.records] == [1.0, 1.0]  # both judgments match the answers' correctness
    assert ver.records[1]["flags"] == {"parse_failures": 0, "answer_correct": 0.0}
    for run, prefix in ((rag, "RAG answer"), (book, "closed-book"), (ver, "teacher")):
        got = [run.prompt_text(r["steps"][0]["calls"][0]["prompt"]) for r in run.records]
        assert got == _received(lm, prefix)
        assert [r["steps"][0]["calls"][0]["key"] for r in run.records] == [lm.served[p][0] for p in got]
    assert ver.prompt_text(ver.records[0]["steps"][0]["calls"][0]["prompt"]).endswith('Label: ["Beorn"]\nOutput:')


def test_rank_answers_writes_the_judges_raw_output_and_ranks_per_system(folder):
    answers = {"rag": ["Bilbo [1].", "Alabama."], "cov": ["Beorn [1].", "Princeton [2]."]}

    def judge(prompt: str) -> str:
        inputs = next(line for line in prompt.splitlines() if line.startswith('{ "question"'))
        shown = re.findall(r'"answer\d": (.*?)(?=, "answer\d"| }$)', inputs)
        good = [j for j, a in enumerate(shown) if "Beorn" in a or "Princeton" in a][0]
        return ('{"rank_result": {"Correctness": [' + f'("answer{good + 1}", 0.9), ("answer{2 - good}", 0.1)'
                + ']}, "rank_reason": "gold"}')

    lm = KeyedLM(judge, name="judge")
    ranked = C.rank_answers(lm, "others", ["who is a bear?", "who won most?"], answers,
                            ["Correctness", "Truthfulness"], golds=[["Beorn"], ["Princeton"]], seed=1)
    tr = _only(folder)
    assert tr.complete and tr.header["method"] == "rank_answers"
    assert [s["name"] for s in tr.header["steps"]] == ["rank", "parse ranks"]
    assert len(tr.prefixes) == 1  # Table 16's criteria, stored once
    for rec, want in zip(tr.records, ranked):
        rank, parsed = rec["steps"]
        assert parsed["outputs"]["ranks"]["Correctness"] == {"rag": 2, "cov": 1} == dict(zip(answers, want["Correctness"]))
        assert parsed["outputs"]["unparsed"] == ["Truthfulness"] and rec["flags"]["parse_failures"] == 1
        prompt = tr.prompt_text(rank["calls"][0]["prompt"])
        assert prompt in _received(lm, "judge") and rank["calls"][0]["key"] == lm.served[prompt][0]
        assert rank["outputs"]["raw"] == judge(prompt)
        assert sorted(s["system"] for s in rank["inputs"]["shown"]) == ["cov", "rag"]
        assert rec["prediction"] == "Correctness: rag 2, cov 1; Truthfulness: unparsed"


def test_nothing_is_written_when_tracing_is_off(tmp_path):
    traces.stop()
    lm = KeyedLM(_script({"Alabama": BAD}))
    plain = C.cov_rag(lm, EXAMPLES, BM25Retriever(CORPUS), k=2, max_rounds=1)
    C.closed_book_batch(lm, ["q?"])
    assert not list(tmp_path.rglob("*.jsonl"))
    target = traces.start(NOTEBOOK, folder=tmp_path / "on")
    try:
        traced = C.cov_rag(KeyedLM(_script({"Alabama": BAD})), EXAMPLES, BM25Retriever(CORPUS), k=2, max_rounds=1)
    finally:
        traces.stop()
    assert [r.to_dict() for r in traced] == [r.to_dict() for r in plain]  # tracing changes nothing returned
    assert len(traces.run_files(target)) == 1


def test_an_interrupted_run_keeps_the_questions_settled_before(folder):
    lm = KeyedLM(_script({"Alabama": BAD}), fail="re-answer")
    with pytest.raises(RuntimeError, match="re-answer"):
        C.cov_rag(lm, EXAMPLES, BM25Retriever(CORPUS), k=2, max_rounds=1)
    path = traces.run_files(folder)[0]
    assert traces.validate(path) == []
    tr = traces.read(path)
    assert not tr.complete and [r["id"] for r in tr.records] == ["q1"]
