"""Verify-and-Edit's traces on a scripted LM: written by `trace.write` from what the Standard / CoT / CoT-SC runs and
Algorithm 1 (verify_and_edit, compute_edits) return, one record per example with the paper's steps, the prompts the
LM received, and its cache keys."""

from __future__ import annotations

import ast
import inspect
import json

import pytest

from covlib import traces
from covlib.core.records import Passage
from covlib.papers import verify_edit as V
from covlib.papers.verify_edit import cot as P
from covlib.papers.verify_edit import knowledge as K
from covlib.papers.verify_edit import method as M
from covlib.papers.verify_edit import trace as T
from covlib.retrieval import BM25Retriever, top_sentences
from scripted import KeyedGenerator
from test_verify_edit import ENCODER, N, SHOTS, _examples, _reply

NOTEBOOK = "03_verify_and_edit_tables"
PROMPTING = ["Prompt", "Sample reasoning paths", "Vote", "Answer log-prob"]
EDIT = [name for name, _ in T.EDIT_STEPS]


def KeyedLM(**kw) -> KeyedGenerator:
    """The keyed scripted generator on Verify-and-Edit's scripted replies."""
    return KeyedGenerator(_reply, **kw)


@pytest.fixture
def tracer(tmp_path):
    return traces.Tracer(NOTEBOOK, folder=tmp_path / "traces")


@pytest.fixture
def folder(tracer):
    return tracer.folder


def _one(folder, part: str) -> traces.Trace:
    found = [p for p in traces.run_files(folder) if part in p.name]
    assert len(found) == 1, [p.name for p in traces.run_files(folder)]
    assert traces.validate(found[0]) == []
    return traces.read(found[0])


def _steps(record) -> dict:
    return {s["name"]: s for s in record["steps"]}


def _received(lm, desc: str) -> list[str]:
    return [p for d, prompts, _ in lm.calls if d.startswith(desc) for p in prompts]


def test_cot_sc_trace(tracer, folder):
    lm = KeyedLM()
    results = P.run_cot_sc(lm, _examples(), "2wikimultihop", n=N, shots=SHOTS, progress=False)
    T.write(tracer, results)
    trace = _one(folder, "cot-sc-2wikimultihop")
    assert trace.complete and trace.title == "CoT-SC (n=5), 2WikiMultihop"
    assert [s["name"] for s in trace.header["steps"]] == PROMPTING
    assert trace.header["params"]["n"] == N and trace.header["model"] == "scripted"
    assert [r["id"] for r in trace.records] == [r.id for r in results]
    sent = _received(lm, "CoT-SC")
    for rec, res, prompt in zip(trace.records, results, sent):
        assert [s["name"] for s in rec["steps"]] == PROMPTING
        assert rec["prediction"] == (res.prediction or None) and rec["correct"] == res.correct
        assert rec["flags"] == {"parse_failures": res.parse_failures}
        steps = _steps(rec)
        assert trace.prompt_text(steps["Prompt"]["outputs"]["prompt"]) == prompt == res.prompt
        paths = steps["Sample reasoning paths"]["outputs"]["paths"]
        assert [p["text"] for p in paths] == res.texts and [p["answer"] for p in paths] == res.answers
        assert all("rationale" not in p for p in paths), "a path's rationale is the start of its text: not stored twice"
        assert [p["parsed"] for p in paths] == [a is not None for a in res.answers]
        assert [p["key"] for p in paths] == lm.served[prompt] and len(set(lm.served[prompt])) == N
        calls = steps["Sample reasoning paths"]["calls"]
        assert [c["key"] for c in calls] == lm.served[prompt]
        assert all(trace.prompt_text(c["prompt"]) == prompt for c in calls)
        vote = steps["Vote"]["outputs"]
        assert (vote["chosen_path"], vote["majority"], vote["wang"]) == (res.chosen_path, res.majority, res.wang)
        score = steps["Answer log-prob"]
        if res.chosen_path >= 0:
            (call,) = score["calls"]
            pair = (trace.prompt_text(call["prompt"]), call["continuation"])
            assert pair in lm.scored and call["key"] == lm.served_scores[pair]
            assert score["outputs"]["answer_logprob"] == pytest.approx(res.answer_logprob)
        else:
            assert score["calls"] == [] and score["outputs"]["answer_logprob"] is None  # -inf: JSON null
    votes = _steps(trace.records[0])["Vote"]["outputs"]["votes"]
    assert votes == {"bob": 3, "alice smith": 2}


@pytest.mark.parametrize("run, part", [(P.run_standard, "standard-hotpotqa"), (P.run_cot, "cot-hotpotqa")])
def test_greedy_runs_have_one_path(tracer, folder, run, part):
    lm = KeyedLM(score=-0.5)
    results = run(lm, _examples(), "hotpotqa", shots=SHOTS, progress=False)
    T.write(tracer, results)
    trace = _one(folder, part)
    assert trace.complete and len(trace.records) == len(results)
    for rec, res in zip(trace.records, results):
        assert [s["name"] for s in rec["steps"]] == PROMPTING
        (path,) = _steps(rec)["Sample reasoning paths"]["outputs"]["paths"]
        (call,) = _steps(rec)["Sample reasoning paths"]["calls"]
        assert path["text"] == res.texts[0] and call["key"] == path["key"] == lm.served[res.prompt][0]
        assert trace.prompt_text(call["prompt"]) == res.prompt
        assert rec["prediction"] == (res.prediction or None) and rec["correct"] == res.correct


def _cot_sc():
    return P.run_cot_sc(KeyedLM(), _examples(), "2wikimultihop", n=N, shots=SHOTS, progress=False)


def test_verify_and_edit_trace(tracer, folder):
    results = _cot_sc()
    lm = KeyedLM()
    records = V.verify_and_edit(lm, results, _examples(), "2wikimultihop", K.DatasetKnowledge(), n=N, shots=SHOTS,
                                encoder=ENCODER, progress=False)
    T.write(tracer, records)
    trace = _one(folder, "verify-edit-2wikimultihop-dataset")
    assert trace.complete and trace.title == "CoT-SC + Verify-and-Edit, 2WikiMultihop, Dataset"
    assert trace.header["compare"] == {"before": "CoT-SC", "after": "CoT-SC + VE"}
    assert [s["name"] for s in trace.header["steps"]] == EDIT and trace.header["params"]["threshold"] == 3
    assert sorted(r["id"] for r in trace.records) == sorted(r.id for r in records)
    by_id = {r["id"]: r for r in trace.records}
    assert [r["id"] for r in trace.records[:2]] == ["q2", "q3"]  # left as-is: written before the edited ones
    vq, va, again = _received(lm, "verifying questions"), _received(lm, "verifying answers"), _received(lm, "answering")
    for ve, res in zip(records, results):
        rec = by_id[ve.id]
        assert rec["before"] == {"prediction": res.prediction or None, "correct": res.correct}
        assert rec["prediction"] == (ve.prediction or None) and rec["correct"] == ve.correct
        assert rec["flags"]["edited"] is ve.edited
        check = _steps(rec)["Consistency check"]
        assert check["outputs"]["score"] == pytest.approx(ve.consistency) and check["outputs"]["uncertain"] is ve.edited
        if not ve.edited:
            assert [s["name"] for s in rec["steps"]] == ["Consistency check"]
            continue
        assert [s["name"] for s in rec["steps"]] == EDIT
        steps = _steps(rec)
        assert steps["Verifying questions"]["outputs"]["verifying_questions"] == ve.verifying_questions
        assert steps["Verifying answers"]["outputs"]["verifying_answers"] == ve.verifying_answers
        assert steps["Edit the rationale"]["outputs"]["edited_rationale"] == ve.edited_rationale
        for call in steps["Verifying questions"]["calls"]:
            text = trace.prompt_text(call["prompt"])
            assert text in vq and call["key"] == lm.served[text][0]
        for call in steps["Verifying answers"]["calls"]:
            text = trace.prompt_text(call["prompt"])
            assert text in va and call["key"] == lm.served[text][0]
        ex = next(e for e in _examples() if e.id == ve.id)
        candidates = [s for p in ex.paragraphs for s in p.sentences]
        for call, question, top in zip(steps["Retrieve"]["calls"], ve.verifying_questions, ve.retrieved):
            assert call["kind"] == "retrieve" and call["key"] is None and call["query"] == question
            assert [s["text"] for s in call["sentences"]] == top
            want = top_sentences(question, candidates, k=3, encoder=ENCODER)
            assert [s["score"] for s in call["sentences"]] == pytest.approx([v for _, v in want], abs=1e-4)
        generate, score = steps["Answer again"]["calls"]
        assert trace.prompt_text(generate["prompt"]) in again and generate["key"] == lm.served[trace.prompt_text(generate["prompt"])][0]
        pair = (trace.prompt_text(score["prompt"]), score["continuation"])
        assert score["kind"] == "score" and score["key"] == lm.served_scores[pair]
    assert len(trace.prefixes) == 2  # the verifying-question and verifying-answer shots, stored once each
    assert traces.count_outcomes(traces.pairs(trace)) == {"fixed": 2, "broken": 0, "both right": 2, "both wrong": 0}


def test_compute_edits_trace_says_which_thresholds_edit(tracer, folder):
    results = _cot_sc()
    edits = V.compute_edits(KeyedLM(), results, _examples(), "2wikimultihop", K.DatasetKnowledge(), max_threshold=N + 1,
                            consistency="majority", shots=SHOTS, encoder=ENCODER, progress=False)
    T.write(tracer, edits)
    trace = _one(folder, "compute-edits-2wikimultihop-dataset")
    assert trace.complete and "threshold sweep" in trace.title and len(edits) == 4
    assert trace.header["params"] == {
        "dataset": "2wikimultihop", "knowledge": "Dataset (own paragraphs)", "source": "dataset",
        "consistency": "majority", "top_k": 3, "vq_max_new_tokens": 40, "va_max_new_tokens": 64,
        "answer_max_new_tokens": 24, "n": N, "threshold": N + 1, "shots": len(SHOTS)}
    by_id = {r["id"]: r for r in trace.records}
    assert {i: by_id[i]["flags"]["lowest_edit_threshold"] for i in by_id} == {"q1": 4, "q2": 3, "q3": 6, "q4": 1}
    assert _steps(by_id["q2"])["Consistency check"]["outputs"]["edited at thresholds"] == [3, 4, 5, 6]
    assert all([s["name"] for s in r["steps"]] == EDIT and r["flags"]["edited"] for r in trace.records)
    assert by_id["q4"]["prediction"] == edits["q4"].answer == "Dan" and by_id["q4"]["before"]["prediction"] is None


def test_nothing_is_written_without_a_tracer(tmp_path):
    results = _cot_sc()
    standard = P.run_standard(KeyedLM(), _examples(), "hotpotqa", shots=SHOTS, progress=False)
    records = V.verify_and_edit(KeyedLM(), results, _examples(), "2wikimultihop", K.DatasetKnowledge(), n=N,
                                shots=SHOTS, encoder=ENCODER, progress=False)
    for result in (results, standard, records, records.edits):
        T.write(None, result)
    assert not list(tmp_path.rglob("*.jsonl"))
    with pytest.raises(TypeError, match="no Verify-and-Edit trace"):
        T.write(traces.Tracer(NOTEBOOK, folder=tmp_path / "traces"), list(records))  # a plain list says nothing


def test_a_failed_run_leaves_no_file_and_the_methods_write_none(tracer, folder):
    """The methods write no trace (the file is written from what they return), so a run that fails leaves no
    half-written file: the rerun (its model calls cached) writes the whole one."""
    results = _cot_sc()
    with pytest.raises(RuntimeError, match="verifying answers"):
        V.verify_and_edit(KeyedLM(fail="verifying answers"), results, _examples(), "2wikimultihop",
                          K.DatasetKnowledge(), n=N, shots=SHOTS, encoder=ENCODER, progress=False)
    with pytest.raises(RuntimeError, match="answer log-probs"):
        P.run_cot_sc(KeyedLM(fail="answer log-probs"), _examples(), "2wikimultihop", n=N, shots=SHOTS, progress=False)
    records = V.verify_and_edit(KeyedLM(), results, _examples(), "2wikimultihop", K.DatasetKnowledge(), n=N,
                                shots=SHOTS, encoder=ENCODER, progress=False)
    assert traces.run_files(folder) == []  # called with no tracer: nothing anywhere
    T.write(tracer, records)
    trace = _one(folder, "verify-edit")
    assert trace.complete and len(trace.records) == len(records)


def test_the_methods_import_no_trace_code():
    """Algorithm 1 and the prompting runs know nothing of traces: no import of `covlib.traces` or of the paper's
    `trace` module in `method` or `cot`."""
    for module in (M, P):
        tree = ast.parse(inspect.getsource(module))
        names = [a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names]
        names += [f"{node.module}.{a.name}" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                  for a in node.names]
        assert not [n for n in names if "trace" in n], (module.__name__, names)


def test_the_results_carry_what_the_lm_received():
    """What a trace is written from is in the result: the prompts and decoding settings of every batched call."""
    lm = KeyedLM()
    results = P.run_cot_sc(lm, _examples(), "2wikimultihop", n=N, shots=SHOTS, progress=False)
    assert isinstance(results, P.PromptRun) and results.lm is lm and results.method == "cot_sc"
    ((_, sent, _),) = [c for c in lm.calls if c[0].startswith("CoT-SC")]
    assert [r.prompt for r in results] == list(sent)
    assert results.decoding == {"n": N, "temperature": 0.7, "max_new_tokens": 96, "stop": list(P.COT_STOP), "seed": 0}
    assert [(p, c) for _, p, c in results.scored] == [pair for pair in lm.scored]
    assert all(len(r.finish_reasons) == N for r in results)
    lm = KeyedLM()
    records = V.verify_and_edit(lm, results, _examples(), "2wikimultihop", K.DatasetKnowledge(), n=N, shots=SHOTS,
                                encoder=ENCODER, progress=False)
    steps = records.edits.steps
    assert isinstance(records, M.VERecords) and isinstance(records.edits, M.Edits) and steps.method == "verify_edit"
    assert steps.vq_prompts == _received(lm, "verifying questions")
    assert steps.va_prompts == _received(lm, "verifying answers")
    assert steps.reanswer_prompts == _received(lm, "answering again")
    assert list(zip([steps.reanswer_prompts[i] for i in steps.scored], steps.score_continuations)) == lm.scored
    assert steps.vq_decoding == {"n": 1, "temperature": 0.0, "max_new_tokens": 40, "stop": ["\n"]}
    assert [[s for s, _ in row] for row in steps.ranked] == [t for e in records.edits.values() for t in e.retrieved]
    assert list(records.edits) == [r.id for r in records if r.edited]


def _lines(path) -> list[dict]:
    out = []
    for line in path.read_text().splitlines():
        obj = json.loads(line)
        for moving in ("started", "finished", "commit"):
            obj.pop(moving, None)
        out.append(obj)
    return out


def test_writing_one_result_twice_gives_the_same_file(tmp_path):
    results = _cot_sc()
    edits = V.compute_edits(KeyedLM(), results, _examples(), "2wikimultihop", K.DatasetKnowledge(), shots=SHOTS,
                            encoder=ENCODER, progress=False)
    files = []
    for name in ("a", "b"):
        tracer = traces.Tracer(NOTEBOOK, folder=tmp_path / name)
        T.write(tracer, results)
        T.write(tracer, edits)
        files.append(sorted(traces.run_files(tracer.folder)))
    assert [p.name for p in files[0]] == [p.name for p in files[1]] and len(files[0]) == 2
    for a, b in zip(*files):
        assert _lines(a) == _lines(b)


def test_knowledge_kinds_name_the_files():
    bm25 = K.RetrieverKnowledge(BM25Retriever([Passage("p1", "T", "Some text here.")]))
    assert (K.DatasetKnowledge().kind, bm25.kind) == ("dataset", "bm25")
    assert T.source_name(bm25) == "BM25" and T.source_name(K.DatasetKnowledge()) == "Dataset"
