"""CoV-RAG's traces on a scripted LM (one test runs the embedded model): `trace.write` turns what Algorithm 1
(cov_rag) returns into one record per question with retrieve, answer, verify, σ and the re-retrieval steps, the
prompts the LM received and its cache keys, in the order the answers settled; the standalone batches (answers,
closed-book answers, verifications) and the LLM-as-judge ranking give one run per call. The methods write nothing
themselves."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from covlib import generation, traces
from covlib.core.records import Example, Passage
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
def tracer(tmp_path):
    return traces.Tracer(NOTEBOOK, folder=tmp_path / "traces")


def _only(tracer) -> traces.Trace:
    found = traces.run_files(tracer.folder)
    assert len(found) == 1, [p.name for p in found]
    assert traces.validate(found[0]) == []
    return traces.read(found[0])


def _steps(record, name: str) -> list[dict]:
    return [s for s in record["steps"] if s["name"] == name]


def _received(lm, prefix: str) -> list[str]:
    return [p for desc, ps, _ in lm.calls if desc.startswith(prefix) for p in ps]


def test_cov_rag_writes_algorithm_1_per_question_with_prompts_keys_and_sigma(tracer):
    lm = KeyedLM(_script({"Alabama": BAD}), name="org/answerer")
    records = C.cov_rag(lm, EXAMPLES, BM25Retriever(CORPUS), k=2, max_rounds=1)
    T.write(tracer, records)
    tr = _only(tracer)
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


def test_cov_rag_verify_only_a_failed_parse_and_a_separate_verifier(tracer):
    answerer = KeyedLM(_script({}), name="answerer")
    verifier = KeyedLM(lambda p: "I think the answer is wrong, search for Princeton.", name="local:/m/verifier")
    examples = [Example(e.id, e.question, e.answers, metadata={"dataset": "nq_open"}) for e in EXAMPLES]
    T.write(tracer, C.cov_rag(answerer, examples, BM25Retriever(CORPUS), verifier=verifier, k=2, max_rounds=0,
                              thresholds=C.Thresholds(mode="any")))
    tr = _only(tracer)
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


def test_cov_rag_many_rounds_keep_every_round(tracer):
    always_bad = KeyedLM(lambda p: BAD if p.startswith("#verification-Task#") else "Alabama [1].")
    records = C.cov_rag(always_bad, EXAMPLES[1:], BM25Retriever(CORPUS), k=2, max_rounds=3)
    T.write(tracer, records)
    (rec,) = _only(tracer).records
    assert [s["name"] for s in rec["steps"]] == (SETTLED + ["re-retrieve with the revised query", "re-answer",
                                                            "verify", "σ"] * 2
                                                 + ["re-retrieve with the revised query", "re-answer"])
    assert rec["flags"]["rounds"] == 3 == records[0].settled_round
    assert [s["inputs"]["round"] for s in rec["steps"] if s["name"] == "σ"] == [0, 1, 2]


def test_the_batches_write_one_run_per_call(tracer):
    lm = KeyedLM(_script({"Alabama": BAD}), name="answerer")
    refs = [[p for p in CORPUS[:2]], [CORPUS[4], CORPUS[3]]]
    questions = [e.question for e in EXAMPLES]
    answers = C.answer_batch(lm, questions, refs, golds=[e.answers for e in EXAMPLES], desc="RAG answer",
                             ids=[e.id for e in EXAMPLES])
    closed = C.closed_book_batch(lm, questions)
    checks = C.verify_batch(lm, questions, answers, refs, labels=[e.answers for e in EXAMPLES], desc="teacher")
    for result in (answers, closed, checks, C.answer_batch(lm, [], [])):  # no questions: no run
        T.write(tracer, result)
    runs = {traces.read(p).header["method"]: traces.read(p) for p in traces.run_files(tracer.folder)}
    assert sorted(runs) == ["answer batch", "closed-book answer batch", "verify batch"]
    for path in traces.run_files(tracer.folder):
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


def test_rank_answers_writes_the_judges_raw_output_and_ranks_per_system(tracer):
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
    T.write(tracer, ranked)
    tr = _only(tracer)
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


def test_the_methods_write_nothing_and_a_tracer_of_none_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    lm = KeyedLM(_script({"Alabama": BAD}))
    run = C.cov_rag(lm, EXAMPLES, BM25Retriever(CORPUS), k=2, max_rounds=1)
    book = C.closed_book_batch(lm, ["q?"])
    for result in (run, book):
        T.write(None, result)
    assert not list(tmp_path.rglob("*.jsonl"))
    with pytest.raises(TypeError, match="no CoV-RAG trace"):
        T.write(traces.Tracer(NOTEBOOK, folder=tmp_path / "t"), [r.to_dict() for r in run])


def test_the_method_modules_hold_no_trace_code():
    """Algorithm 1, the batches, the ranking and the training stages return what their traces need: none of them
    imports a trace writer (they did: `cov_rag` fed a `CovRagTrace`, `rank_answers` an `open_ranking`)."""
    import covlib.papers.covrag.method as method
    import covlib.papers.covrag.ranking as ranking
    import covlib.papers.covrag.training as training

    for module in (method, ranking, training):
        tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
        imported = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | {
            a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        assert not {m for m in imported if m.endswith("trace") or m.startswith("covlib.traces")}, module.__name__
        assert "traces" not in names and "trace" not in names, module.__name__
    assert not hasattr(method, "_answers") and not hasattr(method, "_verifications")  # no untraced twins


def test_the_results_carry_their_prompts_and_settings():
    lm = KeyedLM(_script({"Alabama": BAD}), name="answerer")
    run = C.cov_rag(lm, EXAMPLES, BM25Retriever(CORPUS), k=2, max_rounds=1, max_new_tokens=9, verify_tokens=11)
    football = run[1]
    assert football.rounds[0].answer_prompt == _received(lm, "CoV-RAG answer")[1]
    assert football.rounds[0].verify_prompt == _received(lm, "CoV-RAG verify")[1]
    assert football.rounds[1].answer_prompt == _received(lm, "CoV-RAG re-answer")[0]
    assert football.rounds[1].verify_prompt == "" and football.rounds[1].conditions == {}
    assert football.rounds[0].conditions == C.sigma_conditions(football.rounds[0].verification)
    assert all(isinstance(s, float) for r in football.rounds for s in r.scores)
    assert len(football.rounds[1].scores) == len(football.rounds[1].references)
    assert (run.k, run.max_rounds, run.verifier, run.retriever) == (2, 1, lm, "bm25")
    assert run.answer_decoding == {"max_new_tokens": 9, "stop": C.QA_STOP, "chat": False}
    assert run.verify_decoding == {"max_new_tokens": 11, "stop": C.VERIFY_STOP, "chat": False}
    batch = C.answer_batch(lm, ["who?"], [CORPUS[4:5]], 5, True, desc="mine")
    assert batch == ["Alabama [1]."] and batch.prompts == _received(lm, "mine")
    assert batch.decoding == {"max_new_tokens": 5, "stop": C.QA_STOP, "chat": True}


def test_writing_one_result_twice_gives_the_same_file(tmp_path):
    lm = KeyedLM(_script({"Alabama": BAD}), name="answerer")
    run = C.cov_rag(lm, EXAMPLES, BM25Retriever(CORPUS), k=2, max_rounds=1)
    calls = len(lm.calls)
    texts = []
    for name in ("a", "b"):
        tracer = traces.Tracer(NOTEBOOK, folder=tmp_path / name)
        T.write(tracer, run)
        (path,) = traces.run_files(tracer.folder)
        texts.append(re.sub(r'"(started|finished|commit)":("[^"]*"|null)', "", path.read_text()))
    assert texts[0] == texts[1] and len(lm.calls) == calls  # written from the result: no model call


def test_records_follow_the_order_the_answers_settled_and_prefixes_their_first_use(tracer):
    """q1 settles at σ in round 0 and is written first although it comes last; the two re-answers share a long
    reference, so their shared prefix line comes after q1's record, right before its first use."""
    long = Passage("tigers", "Princeton Tigers", "The Tigers of Princeton hold the record number of titles. " * 5)
    corpus = [*CORPUS, long]
    fired = {"Alabama": BAD, "Bilbo": BAD}
    lm = KeyedLM(lambda p: _script(fired)(p) if "Bilbo" not in p or p.startswith("#verification")
                 else "Bilbo [1].", name="answerer")
    examples = [EXAMPLES[1], Example("q3", "who is the hobbit about? Bilbo", ["Bilbo Baggins"]), EXAMPLES[0]]
    run = C.cov_rag(lm, examples, BM25Retriever(corpus), k=1, max_rounds=1)
    assert [r.settled_round for r in run] == [1, 1, 0]
    T.write(tracer, run)
    (path,) = traces.run_files(tracer.folder)
    lines = [traces.parse(line) for line in path.read_text().splitlines()]
    kinds = [(o["type"], o.get("id", "")[:2]) for o in lines[1:-1]]
    assert kinds == [("prefix", "p-"), ("example", "q1"), ("prefix", "p-"), ("example", "q2"), ("example", "q3")]
    tr = traces.read(path)
    assert [r["index"] for r in tr.records] == [0, 1, 2]
    reanswers = [s for r in tr.records for s in r["steps"] if s["name"] == "re-answer"]
    assert [tr.prompt_text(s["calls"][0]["prompt"]) for s in reanswers] == _received(lm, "CoV-RAG re-answer")
    assert all(s["calls"][0]["prompt"]["prefix"] == lines[3]["id"] for s in reanswers)


def test_a_run_that_raises_returns_nothing_to_write(tracer):
    """A trace is written when the method has returned (a crash leaves no partial file); the real backends cache
    every generate call, so the rerun costs no model call for the steps done before the crash (the embedded model's
    test below checks the keys are in the cache)."""
    lm = KeyedLM(_script({"Alabama": BAD}), fail="re-answer")
    with pytest.raises(RuntimeError, match="re-answer"):
        C.cov_rag(lm, EXAMPLES, BM25Retriever(CORPUS), k=2, max_rounds=1)
    assert not traces.run_files(tracer.folder)


@pytest.mark.slow
def test_the_embedded_model_s_trace_names_the_cached_reply_of_each_step(tracer):
    lm = generation.load_lm("")
    run = C.cov_rag(lm, EXAMPLES, BM25Retriever(CORPUS), k=1, max_rounds=0, max_new_tokens=6, verify_tokens=8)
    T.write(tracer, run)
    tr = _only(tracer)
    for rec, got in zip(run, tr.records):
        (r,) = rec.rounds
        answer, verify = _steps(got, "answer")[0]["calls"][0], _steps(got, "verify")[0]["calls"][0]
        assert answer["key"] == generation.call_keys(lm, [r.answer_prompt], **run.answer_decoding)[0][0]
        assert verify["key"] == generation.call_keys(lm, [r.verify_prompt], **run.verify_decoding)[0][0]
        assert tr.prompt_text(answer["prompt"]) == r.answer_prompt and answer["completion"] == r.answer
        for key in (answer["key"], verify["key"]):
            assert key and lm.cache.get(key) is not None  # a rerun after a crash costs no model call


def test_the_two_stages_give_m1_s_predictions_and_the_teacher_s_labels(tracer):
    m1, teacher = KeyedLM(_script({}), name="m1"), KeyedLM(_script({"Alabama": BAD}), name="teacher")
    refs = [CORPUS[:2], [CORPUS[4], CORPUS[3]]]
    predictions = C.answer_batch(m1, [e.question for e in EXAMPLES], refs, desc="training predictions",
                                 golds=[e.answers for e in EXAMPLES], ids=[e.id for e in EXAMPLES])
    sets = {chain: C.training_set(EXAMPLES, refs, predictions, test_questions=["q?"], chain=chain, teacher=teacher)
            for chain in (False, True)}
    assert isinstance(sets[True].teacher_checks, C.VerifyBatch) and sets[True].teacher_checks.labels
    assert C.training_set(EXAMPLES, refs, predictions, test_questions=["q?"]).teacher_checks is None  # gold labels
    T.write(tracer, C.TwoStages(m1, predictions, sets[True], sets[False], {}, {}))
    runs = {traces.read(p).header["method"]: traces.read(p) for p in traces.run_files(tracer.folder)}
    assert sorted(runs) == ["answer batch", "verify batch"]
    assert [r["id"] for r in runs["answer batch"].records] == [e.id for e in EXAMPLES]
    verify = runs["verify batch"]
    assert verify.header["params"]["labels"] is True and verify.header["params"]["desc"] == "teacher verification"
    assert [r["prediction"] for r in verify.records] == ["true", "false"]
