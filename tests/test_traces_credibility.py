"""Per-example traces of the credibility paper's runs: cited answers with §4 metrics, self-reflection, self-completion,
key-fact extraction (scripted generators, the overlap judge: no model)."""

from __future__ import annotations

import math

import pytest
from scripted import KeyedGenerator, ScriptedGenerator

from covlib import nli
from covlib.core import traces
from covlib.core.records import Example, Paragraph, Passage
from covlib.nli.scoring import pair_keys
from covlib.papers import credibility as C
from covlib.papers.credibility import trace as T
from covlib.retrieval import BM25Retriever

FACTS = C.KeyFacts("q1", "What is the capital of France?", "Paris",
                   ["Paris is the capital of France.", "The Eiffel Tower stands in Paris."], "supporting", "test")
GOLD = (Paragraph("Paris", ["Paris is the capital of France."]),
        Paragraph("Tower", ["The Eiffel Tower stands in Paris."]))
REFS = C.ReferenceSet("q1", "complete", GOLD + (Paragraph("Fruit", ["Bananas are yellow."]),), gold=(1, 2))
PARTIAL = C.ReferenceSet("q2", "partial", (GOLD[0], Paragraph("Fruit", ["Bananas are yellow."])), gold=(1,))
EX = Example("q1", "What is the capital of France?", ["Paris"], supporting_facts=[("Paris", 0), ("Tower", 0)])
EX2 = Example("q2", "What is the capital of France?", ["Paris"], supporting_facts=[("Paris", 0), ("Tower", 0)])


@pytest.fixture
def folder(tmp_path, isolated_cache):
    target = traces.start("04_credibility_models", folder=tmp_path / "traces")
    yield target
    traces.stop()


def _files(folder, method: str) -> list[traces.Trace]:
    out = [traces.read(p) for p in traces.run_files(folder)]
    for t in out:
        assert traces.validate(t.path) == []
        names = [n for n, _ in {"cited answer": T.ANSWER_STEPS, "self-reflection": T.REFLECTION_STEPS,
                                "self-completion": T.COMPLETION_STEPS,
                                "key-fact extraction": T.KEY_FACT_STEPS}[t.header["method"]]]
        assert [s["name"] for s in t.header["steps"]] == names
        assert all(s["name"] in names for r in t.records for s in r["steps"])
    return [t for t in out if t.header["method"] == method]


def test_cited_answers_trace_one_file_per_model_and_reference_set(folder):
    gens = [KeyedGenerator({}, default="Paris is the capital of France [1]. Bananas are yellow [3][7].", name="a"),
            ScriptedGenerator({}, default="I do not know.", name="b")]
    sets = {"complete": [REFS], "closed-book": [C.ReferenceSet("q1", "closed-book", (), ())]}
    runs = C.answer_runs(gens, [EX], sets, progress=False)
    rows = C.score_runs(runs, [EX], [FACTS], judge="overlap", progress=False)
    got = {(t.header["model"], t.header["params"]["references"]): t for t in _files(folder, "cited answer")}
    assert set(got) == {("a", "complete"), ("a", "closed-book"), ("b", "complete"), ("b", "closed-book")}
    t = got[("a", "complete")]
    assert t.complete and len(t.records) == 1 and t.header["params"]["key_facts"] == "supporting"
    (r,) = t.records
    assert [s["name"] for s in r["steps"]] == [n for n, _ in T.ANSWER_STEPS]
    assert r["id"] == "q1" and r["gold"] == ["Paris"] and r["prediction"] == runs[("a", "complete")][0][0]
    assert r["correct"] == rows[("a", "complete")][0]["recall"] == 0.5
    shown, answer, cites, facts, metrics = r["steps"]
    assert [x["gold"] for x in shown["outputs"]["references"]] == [True, True, False]
    assert [x["title"] for x in shown["outputs"]["references"]] == ["Paris", "Tower", "Fruit"]
    (call,) = answer["calls"]
    assert t.prompt_text(call["prompt"]) == gens[0].calls[0][1][0] == C.answer_prompt(EX.question, REFS.paragraphs)
    assert call["key"] == gens[0].served[gens[0].calls[0][1][0]][0]
    assert cites["outputs"]["cited (Cm)"] == [1, 3, 7] and cites["outputs"]["invalid"] == [7]
    assert cites["outputs"]["sentences"][1]["points_to"][0] == {"n": 3, "title": "Fruit", "gold": False}
    verdicts = facts["outputs"]["key_facts"]
    assert [f["entailed"] for f in verdicts] == [True, False] and facts["outputs"]["recalled"] == 1
    premise = facts["inputs"]["premise (answer without citation marks)"]
    assert [f["key"] for f in verdicts] == pair_keys([premise] * 2, FACTS.key_facts, "overlap")
    assert [c["key"] for c in facts["calls"]] == [f["key"] for f in verdicts] and facts["calls"][0]["kind"] == "nli"
    assert all(0 <= f["p_entailment"] <= 1 for f in verdicts)
    m = metrics["outputs"]
    assert m["recall"] == 0.5 and m["cit_precision"] == pytest.approx(1 / 3) and m["cit_recall"] == 0.5
    assert m["sentences"][0]["entails key facts"] == [0] and m["sentences"][0]["self_consistent"] is True
    assert r["flags"]["invalid_citations"] == 1
    closed = got[("b", "closed-book")].records[0]
    assert closed["steps"][0]["outputs"]["references"] == [] and closed["correct"] == 0.0
    assert closed["steps"][1]["calls"][0]["key"] is None, "a generator that does not say its keys"
    assert closed["steps"][1]["calls"][0]["prompt"] == C.answer_prompt(EX.question, ())
    assert not math.isnan(rows[("b", "complete")][0]["recall"])


def test_the_same_questions_line_up_by_id_across_reference_sets(folder):
    gen = ScriptedGenerator(lambda p: "Paris is the capital of France [1]." if "References" in p else "No idea.")
    sets = {"closed-book": [C.closed_book(EX)], "complete": [REFS]}
    C.score_runs(C.answer_runs([gen], [EX], sets, progress=False), [EX], [FACTS], judge="overlap", progress=False)
    got = {t.header["params"]["references"]: t for t in _files(folder, "cited answer")}
    rows = traces.pairs(got["closed-book"], got["complete"])
    assert [(a["id"], b["id"], o) for a, b, o in rows] == [("q1", "q1", "fixed")]


def test_nothing_is_written_when_tracing_is_off(tmp_path, isolated_cache):
    traces.stop()
    gen = KeyedGenerator({}, default="Paris [1].")
    runs = C.answer_runs([gen], [EX], {"complete": [REFS]}, progress=False)
    C.score_runs(runs, [EX], [FACTS], judge="overlap", progress=False)
    C.generate_answers(gen, [EX], [REFS], reflection=True, progress=False)
    assert not list(tmp_path.rglob("*.jsonl"))


def test_self_reflection_trace_scores_the_refusal_decision(folder):
    gen = KeyedGenerator(lambda p: C.REFUSAL if "Tower" not in p else "Paris [1].", name="m")
    replies = C.generate_answers(gen, [EX, EX2], [REFS, PARTIAL], reflection=True, progress=False)
    (t,) = _files(folder, "self-reflection")
    assert t.complete and t.header["model"] == "m"
    assert [r["prediction"] for r in t.records] == replies
    assert [r["flags"]["refused"] for r in t.records] == [False, True]
    assert [r["correct"] for r in t.records] == [1.0, 1.0]
    assert t.records[1]["gold"] == ["refuse (a gold reference is missing)"]
    step = t.records[1]["steps"][1]
    assert step["name"] == "self-reflection" and step["inputs"]["insufficient"] is True
    assert t.prompt_text(step["calls"][0]["prompt"]) == gen.calls[0][1][1]
    assert C.REFLECTION_INSTRUCTION in t.prompt_text(step["calls"][0]["prompt"])
    assert step["calls"][0]["key"] == gen.served[gen.calls[0][1][1]][0]


def test_a_reflection_call_that_fails_leaves_the_finished_run_whole(folder):
    gen = KeyedGenerator(lambda p: C.REFUSAL, name="m", fail_on=2)
    C.generate_answers(gen, [EX], [REFS], reflection=True, progress=False)  # call 1 succeeds
    with pytest.raises(RuntimeError):
        C.generate_answers(gen, [EX2], [PARTIAL], reflection=True, progress=False)
    (t,) = _files(folder, "self-reflection")
    assert t.complete and [r["id"] for r in t.records] == ["q1"]


CORPUS = [Passage(f"t{i}", f"Tea {i}", f"Tea garden number {i} grows green tea.") for i in range(6)]
CORPUS += [Passage("oslo", "Oslo", "Oslo is the capital of Norway."),
           Passage("film", "Film A", "Film A is a 1999 drama directed by Ann Lee.")]


def _rounds(answers, queries, fail_on=None):
    state = {"answer": 0, "query": 0}

    def script(prompt):
        if C.COMPLETION_INSTRUCTION in prompt:
            state["query"] += 1
            return f"{C.QUERY_MARKER} {queries[min(state['query'], len(queries)) - 1]}"
        state["answer"] += 1
        return answers[min(state["answer"], len(answers)) - 1]
    return KeyedGenerator(script, name="m", fail_on=fail_on)


def test_self_completion_trace_records_every_round_and_the_answer_before(folder):
    ex = Example("q", "Which garden grows tea?", ["Oslo"], supporting_facts=[("Oslo", 0), ("Film A", 0)])
    gen = _rounds([C.REFUSAL, C.REFUSAL, "Ann Lee was born in Oslo [2]."], ["Norway capital", "1999 drama"])
    (rec,) = C.self_complete(gen, [ex], BM25Retriever(CORPUS), k_initial=1, cap=4, progress=False)
    (t,) = _files(folder, "self-completion")
    assert t.complete and t.header["compare"] == {"before": "self-reflection on BM25 top 1", "after": "self-completion"}
    (r,) = t.records
    assert [s["name"] for s in r["steps"]] == ["references shown", "self-reflection"] + \
        ["search queries", "retrieval", "answer"] * 2
    assert r["prediction"] == rec.answer and r["correct"] == 1.0
    assert r["before"] == {"prediction": rec.reflected_answer, "correct": 0.0}
    assert r["flags"] == {"refused": True, "rounds": 2, "parse_failures": 0, "still refusing": False}
    assert traces.count_outcomes(traces.pairs(t))["fixed"] == 1
    prompts = [t.prompt_text(c["prompt"]) for s in r["steps"] for c in s["calls"] if c["kind"] == "generate"]
    assert prompts == [p for _, (p,), _ in gen.calls]
    keys = [c["key"] for s in r["steps"] for c in s["calls"] if c["kind"] == "generate"]
    assert keys[1] == gen.served[gen.calls[1][1][0]][0] and keys[0] == gen.served[gen.calls[0][1][0]][0]
    assert r["steps"][2]["outputs"]["queries"] == ["Norway capital"]
    searched = r["steps"][3]["calls"]
    assert searched[0]["kind"] == "retrieve" and searched[0]["query"] == "Norway capital"
    assert searched[0]["passages"][0]["id"] == "oslo" and searched[0]["key"] is None
    assert [x["id"] for x in r["steps"][0]["outputs"]["references"]] == \
        [p["id"] for p in r["steps"][0]["calls"][0]["passages"]]  # BM25's top k_initial for the question
    assert [p["id"] for p in r["steps"][-2]["outputs"]["references"]] == [p.id for p in rec.references.paragraphs]


def test_an_interrupted_self_completion_keeps_the_questions_already_settled(folder):
    sure = Example("sure", "Where is Oslo?", ["Norway"])
    unsure = Example("q", "Which garden grows tea?", ["Oslo"])
    gen = KeyedGenerator(lambda p: "Oslo is in Norway [1]." if "Where is Oslo" in p else C.REFUSAL, name="m",
                         fail_on=2)  # the reflection succeeds, the first round's queries fail
    with pytest.raises(RuntimeError):
        C.self_complete(gen, [unsure, sure], BM25Retriever(CORPUS), k_initial=1, cap=4, progress=False)
    (t,) = _files(folder, "self-completion")
    assert not t.complete and [r["id"] for r in t.records] == ["sure"]
    assert t.records[0]["flags"]["rounds"] == 0 and t.records[0]["correct"] == 1.0
    assert [s["name"] for s in t.records[0]["steps"]] == ["references shown", "self-reflection"]


def test_key_fact_extraction_trace(folder):
    def script(prompt):
        if C.KEY_FACTS_INSTRUCTION not in prompt:
            return "Step 1: Paris is the capital of France."
        return "no list" if "Where?" in prompt else "1. Paris is the capital of France.\n2. x"

    gen = KeyedGenerator(script, name="m1")
    examples = [Example("q1", EX.question, ["Paris"], paragraphs=[Paragraph(p.title, p.sentences, True) for p in GOLD]),
                Example("q2", "Where?", ["Paris"], paragraphs=[GOLD[0]])]
    out = C.llm_key_facts(gen, examples, progress=False)
    (t,) = _files(folder, "key-fact extraction")
    assert t.complete and [r["id"] for r in t.records] == ["q1", "q2"]
    assert [r["flags"]["parse_failures"] for r in t.records] == [0, 1] and out[1].key_facts == []
    r = t.records[0]
    assert r["prediction"] == "\n".join(out[0].key_facts) == "Paris is the capital of France."
    assert r["steps"][1]["outputs"]["key_facts"] == out[0].key_facts
    assert t.prompt_text(r["steps"][0]["calls"][0]["prompt"]) == gen.calls[0][1][0]
    assert t.prompt_text(r["steps"][1]["calls"][0]["prompt"]) == gen.calls[1][1][0]
    assert r["steps"][1]["calls"][0]["key"] == gen.served[gen.calls[1][1][0]][0]


def test_scored_runs_stay_three_nli_calls_when_traced(folder, monkeypatch):
    calls = []
    real = nli.probabilities
    monkeypatch.setattr(nli, "probabilities", lambda p, h, *a, **k: calls.append(len(p)) or real(p, h, *a, **k))
    gen = ScriptedGenerator({}, default="Paris is the capital of France [1].")
    runs = C.answer_runs([gen], [EX], {"complete": [REFS]}, progress=False)
    C.score_runs(runs, [EX], [FACTS], judge="overlap", progress=False)
    assert len(calls) == 3
