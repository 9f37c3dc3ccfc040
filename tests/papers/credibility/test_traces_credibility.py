"""Per-example traces of the credibility paper's runs: cited answers with §4 metrics, self-reflection, self-completion,
key-fact extraction, written by `credibility.trace.write` from what the methods return (scripted generators and the
overlap judge; one test runs the embedded model)."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
from scripted import KeyedGenerator, ScriptedGenerator

from covlib import generation, nli
from covlib import traces
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
def tracer(tmp_path, isolated_cache):
    return traces.Tracer("04_credibility_models", folder=tmp_path / "traces")


def _files(tracer, method: str) -> list[traces.Trace]:
    out = [traces.read(p) for p in traces.run_files(tracer.folder)]
    for t in out:
        assert traces.validate(t.path) == []
        names = [n for n, _ in {"cited answer": T.ANSWER_STEPS, "self-reflection": T.REFLECTION_STEPS,
                                "self-completion": T.COMPLETION_STEPS,
                                "key-fact extraction": T.KEY_FACT_STEPS}[t.header["method"]]]
        assert [s["name"] for s in t.header["steps"]] == names
        assert all(s["name"] in names for r in t.records for s in r["steps"])
    return [t for t in out if t.header["method"] == method]


def test_cited_answers_trace_one_file_per_model_and_reference_set(tracer):
    gens = [KeyedGenerator({}, default="Paris is the capital of France [1]. Bananas are yellow [3][7].", name="a"),
            ScriptedGenerator({}, default="I do not know.", name="b")]
    sets = {"complete": [REFS], "closed-book": [C.ReferenceSet("q1", "closed-book", (), ())]}
    runs = C.answer_runs(gens, [EX], sets, progress=False)
    rows = C.score_runs(runs, [EX], [FACTS], judge="overlap", progress=False)
    assert not list(tracer.folder.iterdir()), "scoring writes no trace: the notebook does"
    T.write(tracer, rows)
    got = {(t.header["model"], t.header["params"]["references"]): t for t in _files(tracer, "cited answer")}
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


def test_the_same_questions_line_up_by_id_across_reference_sets(tracer):
    gen = ScriptedGenerator(lambda p: "Paris is the capital of France [1]." if "References" in p else "No idea.")
    sets = {"closed-book": [C.closed_book(EX)], "complete": [REFS]}
    T.write(tracer, C.score_runs(C.answer_runs([gen], [EX], sets, progress=False), [EX], [FACTS], judge="overlap",
                                 progress=False))
    got = {t.header["params"]["references"]: t for t in _files(tracer, "cited answer")}
    rows = traces.pairs(got["closed-book"], got["complete"])
    assert [(a["id"], b["id"], o) for a, b, o in rows] == [("q1", "q1", "fixed")]


def test_nothing_is_written_without_a_tracer(tmp_path, isolated_cache):
    gen = KeyedGenerator({}, default="Paris [1].")
    runs = C.answer_runs([gen], [EX], {"complete": [REFS]}, progress=False)
    T.write(None, C.score_runs(runs, [EX], [FACTS], judge="overlap", progress=False))
    T.write(None, C.generate_answers(gen, [EX], [REFS], reflection=True, progress=False))
    T.write(None, C.self_complete(gen, [EX], BM25Retriever(CORPUS), k_initial=1, cap=2, progress=False))
    assert not list(tmp_path.rglob("*.jsonl"))
    with pytest.raises(TypeError, match="no credibility trace"):
        T.write(None, runs)  # unscored runs: their trace is the scored one


def test_self_reflection_trace_scores_the_refusal_decision(tracer):
    gen = KeyedGenerator(lambda p: C.REFUSAL if "Tower" not in p else "Paris [1].", name="m")
    replies = C.generate_answers(gen, [EX, EX2], [REFS, PARTIAL], reflection=True, progress=False)
    T.write(tracer, replies)
    (t,) = _files(tracer, "self-reflection")
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


def test_a_reflection_call_that_fails_leaves_the_finished_run_whole(tracer):
    gen = KeyedGenerator(lambda p: C.REFUSAL, name="m", fail_on=2)
    T.write(tracer, C.generate_answers(gen, [EX], [REFS], reflection=True, progress=False))  # call 1 succeeds
    with pytest.raises(RuntimeError):
        T.write(tracer, C.generate_answers(gen, [EX2], [PARTIAL], reflection=True, progress=False))
    (t,) = _files(tracer, "self-reflection")
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


def test_self_completion_trace_records_every_round_and_the_answer_before(tracer):
    ex = Example("q", "Which garden grows tea?", ["Oslo"], supporting_facts=[("Oslo", 0), ("Film A", 0)])
    gen = _rounds([C.REFUSAL, C.REFUSAL, "Ann Lee was born in Oslo [2]."], ["Norway capital", "1999 drama"])
    done = C.self_complete(gen, [ex], BM25Retriever(CORPUS), k_initial=1, cap=4, progress=False)
    (rec,) = done
    T.write(tracer, done)
    (t,) = _files(tracer, "self-completion")
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


def test_self_completion_records_go_in_the_order_the_questions_settled(tracer):
    sure = Example("sure", "Where is Oslo?", ["Norway"])
    unsure = Example("q", "Which garden grows tea?", ["Oslo"])

    def script(prompt):
        return "Oslo is in Norway [1]." if "Where is Oslo" in prompt else C.REFUSAL
    with pytest.raises(RuntimeError):  # the reflection succeeds, the first round's queries fail: nothing to write
        C.self_complete(KeyedGenerator(script, name="m", fail_on=2), [unsure, sure], BM25Retriever(CORPUS),
                        k_initial=1, cap=4, progress=False)
    assert not list(tracer.folder.iterdir())
    done = C.self_complete(KeyedGenerator(script, name="m"), [unsure, sure], BM25Retriever(CORPUS), k_initial=1,
                           cap=4, progress=False)
    T.write(tracer, done)
    (t,) = _files(tracer, "self-completion")
    assert t.complete and [r["id"] for r in t.records] == ["sure", "q"]  # answered at once, then after the rounds
    assert t.records[0]["flags"]["rounds"] == 0 and t.records[0]["correct"] == 1.0
    assert [s["name"] for s in t.records[0]["steps"]] == ["references shown", "self-reflection"]
    assert t.records[1]["flags"]["rounds"] == C.COMPLETION_ROUNDS and t.records[1]["flags"]["still refusing"]


def test_key_fact_extraction_trace(tracer):
    def script(prompt):
        if C.KEY_FACTS_INSTRUCTION not in prompt:
            return "Step 1: Paris is the capital of France."
        return "no list" if "Where?" in prompt else "1. Paris is the capital of France.\n2. x"

    gen = KeyedGenerator(script, name="m1")
    examples = [Example("q1", EX.question, ["Paris"], paragraphs=[Paragraph(p.title, p.sentences, True) for p in GOLD]),
                Example("q2", "Where?", ["Paris"], paragraphs=[GOLD[0]])]
    out = C.llm_key_facts(gen, examples, progress=False)
    T.write(tracer, out)
    (t,) = _files(tracer, "key-fact extraction")
    assert t.complete and [r["id"] for r in t.records] == ["q1", "q2"]
    assert [r["flags"]["parse_failures"] for r in t.records] == [0, 1] and out[1].key_facts == []
    r = t.records[0]
    assert r["prediction"] == "\n".join(out[0].key_facts) == "Paris is the capital of France."
    assert r["steps"][1]["outputs"]["key_facts"] == out[0].key_facts
    assert t.prompt_text(r["steps"][0]["calls"][0]["prompt"]) == gen.calls[0][1][0]
    assert t.prompt_text(r["steps"][1]["calls"][0]["prompt"]) == gen.calls[1][1][0]
    assert r["steps"][1]["calls"][0]["key"] == gen.served[gen.calls[1][1][0]][0]


def test_scored_runs_stay_three_nli_calls_when_traced(tracer, monkeypatch):
    calls = []
    real = nli.probabilities
    monkeypatch.setattr(nli, "probabilities", lambda p, h, *a, **k: calls.append(len(p)) or real(p, h, *a, **k))
    gen = ScriptedGenerator({}, default="Paris is the capital of France [1].")
    runs = C.answer_runs([gen], [EX], {"complete": [REFS]}, progress=False)
    T.write(tracer, C.score_runs(runs, [EX], [FACTS], judge="overlap", progress=False))
    assert len(calls) == 3 and len(_files(tracer, "cited answer")) == 1


# --------------------------------------------------------------------------- traces written from what the methods return


def test_the_methods_write_no_trace_and_keep_no_memory_for_one():
    import inspect

    from covlib.papers.credibility import answers, improvements, key_facts

    for module in (answers, improvements, key_facts):
        source = inspect.getsource(module)
        assert "traces" not in vars(module) and "trace" not in vars(module), module.__name__
        assert "from covlib import traces" not in source and "credibility.trace as" not in source, module.__name__
    assert not hasattr(T, "_GENERATED") and not hasattr(T, "remember") and not hasattr(T, "generated")


def test_the_results_carry_their_prompts_and_decoding(isolated_cache):
    gen = KeyedGenerator(lambda p: C.REFUSAL if C.REFLECTION_INSTRUCTION in p and "Tower" not in p else "Paris [1].",
                         name="m")
    sets = {"complete": [REFS, PARTIAL], "closed-book": [C.closed_book(EX), C.closed_book(EX2)]}
    runs = C.answer_runs([gen], [EX, EX2], sets, max_new_tokens=12, progress=False)
    closed, refs = runs[("m", "closed-book")]
    assert isinstance(closed, C.Answers) and closed == ["Paris [1].", "Paris [1]."] and refs == sets["closed-book"]
    assert closed.prompts == gen.calls[0][1][2:] and closed.ref_sets == sets["closed-book"]
    assert [ex.id for ex in closed.examples] == ["q1", "q2"] and closed.model == "m"
    assert closed.decoding == {"max_new_tokens": 12, "chat": True}
    scores = C.score_runs(runs, [EX, EX2], [FACTS, dataclasses.replace(FACTS, question_id="q2")], judge="overlap",
                          progress=False)
    assert scores.runs == runs and scores.judge.name == nli.get_judge("overlap").name
    assert [len(d) for d in scores.details.values()] == [2, 2] and set(scores.details[("m", "complete")][0]) == \
        {"recall", "precision", "sc"}
    replies = C.generate_answers(gen, [EX, EX2], [REFS, PARTIAL], reflection=True, progress=False)
    assert isinstance(replies, C.Reflection) and replies.prompts == gen.calls[-1][1]

    ex = Example("q", "Which drama did Ann Lee direct?", ["Film A"])
    rounds = _rounds([C.REFUSAL, "Oslo [1]."], ["Norway capital"])
    done = C.self_complete(rounds, [ex], BM25Retriever(CORPUS), k_initial=1, cap=4, progress=False)
    (rec,) = done
    (reflect,), (asked,), (answer,) = (prompts for _, prompts, _ in rounds.calls)
    assert rec.reflection_prompt == reflect and rec.prompt == rec.history[0].answer_prompt == answer
    assert rec.history[0].query_prompt == asked and rec.history[0].queries == ["Norway capital"]
    assert rec.history[0].hits[0][0].passage.id == "oslo" and rec.history[0].references == rec.references
    assert rec.history[0].may_refuse and rec.initial_hits[0].passage.id == "film"
    assert rec.reflected_references.paragraphs == tuple(h.passage for h in rec.initial_hits)
    answers, refs = done.run()
    assert answers == [rec.answer] and answers.prompts == [answer] and refs == [rec.references]
    assert done.decoding == {"max_new_tokens": 160, "chat": True} and done.query_decoding["max_new_tokens"] == 64


def _lines(folder) -> dict[str, list[dict]]:
    out = {}
    for path in traces.run_files(folder):
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        out[path.name] = [{k: v for k, v in r.items() if k not in ("started", "finished", "commit")} for r in rows]
    return out


def test_writing_one_result_twice_gives_the_same_files(tmp_path, isolated_cache, hotpot_like):
    gen = _rounds([C.REFUSAL, C.REFUSAL, "Ann Lee was born in Oslo [2]."], ["Norway capital", "1999 drama"])
    ex = Example("q", "Which garden grows tea?", ["Oslo"], supporting_facts=[("Oslo", 0), ("Film A", 0)])
    results = [C.score_runs(C.answer_runs([gen], [EX], {"complete": [REFS]}, progress=False), [EX], [FACTS],
                            judge="overlap", progress=False),
               C.generate_answers(gen, [EX, EX2], [REFS, PARTIAL], reflection=True, progress=False),
               C.self_complete(gen, [ex], BM25Retriever(CORPUS), k_initial=1, cap=4, progress=False),
               C.llm_key_facts(gen, hotpot_like, progress=False)]
    first, second = (traces.Tracer("07_reflection_completion", folder=tmp_path / name) for name in ("a", "b"))
    for result in results:
        T.write(first, result)
        T.write(second, result)
        T.write(second, result)  # the same run again replaces its file
    got = _lines(first.folder)
    assert len(got) == 4 and got == _lines(second.folder)
    assert {rows[0]["method"] for rows in got.values()} == {"cited answer", "self-reflection", "self-completion",
                                                             "key-fact extraction"}
    assert all(rows[-1]["type"] == "end" for rows in got.values())


@pytest.fixture
def hotpot_like():
    return [Example("q1", EX.question, ["Paris"], paragraphs=[Paragraph(p.title, p.sentences, True) for p in GOLD])]


def test_build_key_facts_returns_the_extraction_it_ran(tmp_path, monkeypatch, hotpot_like):
    monkeypatch.setenv("COVLIB_ROOT", str(tmp_path))
    gen = KeyedGenerator(lambda p: "1. Paris is the capital of France.", name="m1")
    built = C.build_key_facts("llm", hotpot_like, gen)
    assert built.extraction is not None and built.extraction.prompts == gen.calls[0][1]
    assert built.extraction.key_facts == [built[0].key_facts]
    again = C.build_key_facts("llm", hotpot_like, gen)  # read back: nothing was extracted, nothing to trace
    assert again == built and again.extraction is None and len(gen.calls) == 2
    tracer = traces.Tracer("04_credibility_models", folder=tmp_path / "traces")
    T.write(tracer, again)
    assert not traces.run_files(tracer.folder)
    T.write(tracer, built)
    (t,) = _files(tracer, "key-fact extraction")
    assert [r["id"] for r in t.records] == ["q1"] and t.header["params"]["max_new_tokens"] == 256


@pytest.mark.slow
def test_the_embedded_model_s_trace_names_the_cached_reply_of_each_answer(tracer):
    lm = generation.load_lm("")
    replies = C.generate_answers(lm, [EX, EX2], [REFS, PARTIAL], reflection=True, max_new_tokens=8, progress=False)
    T.write(tracer, replies)
    (t,) = _files(tracer, "self-reflection")
    keys = [k[0] for k in generation.call_keys(lm, replies.prompts, max_new_tokens=8, chat=True)]
    assert [r["steps"][1]["calls"][0]["key"] for r in t.records] == keys and None not in keys
    assert [r["prediction"] for r in t.records] == list(replies)
    assert all(lm.cache.get(k) is not None for k in keys)  # a rerun after a crash costs no model call
