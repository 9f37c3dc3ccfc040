"""covlib.papers.verify_edit.cot: Appendix C prompts, answer parsing, self-consistency scores, batched runs on a scripted LM."""

from __future__ import annotations

import math
import re

import pytest

from covlib.papers.verify_edit import cot as P
from scripted import ScriptedGenerator
from covlib.core.records import Example

SHOTS = [
    (Example("s1", "Who directed Film A?", ["Ann Lee"]), "First, Film A was directed by Ann Lee."),
    (Example("s2", "Where was Ann Lee born?", ["Oslo"]), "First, Ann Lee was born in Oslo."),
]


def ScriptedLM(paths: dict[str, list[tuple[str, float]]], answer_logprob: float = math.log(0.5)) -> ScriptedGenerator:
    """The shared scripted generator, answering each prompt by its last question: paths[question] = [(text, mean lp)]."""
    return ScriptedGenerator(lambda prompt: paths[re.findall(r"(?:Q|Question|Claim): (.*)\nA:", prompt)[-1]],
                             score=answer_logprob)


# --------------------------------------------------------------------------- prompts on the real few-shot pools


def test_hotpotqa_prompts_have_six_handwritten_shots(shared_data):
    shared_data("hotpotqa_adv", "manual_rat_std.txt")
    shots = P.fewshot_examples("hotpotqa")
    assert [ex.id for ex, _ in shots] == list(P.PAPER_SHOT_IDS["hotpotqa"])
    prompt = P.cot_prompt("Who is X?", "hotpotqa", shots)
    assert prompt.count("Q: ") == 7 and prompt.count("The answer is") == 6
    assert prompt.endswith("\n\nQ: Who is X?\nA:")
    assert ("Q: What band did Antony King work with that formed in 1985 in Manchester?\nA: First, Antony King worked "
            "as house engineer for Simply Red. Second, Simply Red formed in 1985 in Manchester. "
            "The answer is Simply Red.\n\n") in prompt
    for _, rationale in shots:
        assert rationale in prompt
    standard = P.standard_prompt("Who is X?", "hotpotqa", shots)
    assert standard.count("Q: ") == 7 and "The answer is" not in standard and "First," not in standard
    assert "Q: III - Odyssey of the Mind is the sixth album by a German band formed in what city?\nA: Düsseldorf\n" in standard
    assert len(P.fewshot_examples("hotpotqa", 2)) == 2


def test_fever_prompts_have_the_three_appendix_shots(shared_data):
    shared_data("fever", "manual_rat.txt")
    shots = P.fewshot_examples("fever")
    assert [ex.id for ex, _ in shots] == ["180017", "39149", "126412"]  # Reg Watson, Gadsden flag, Black Mirror
    prompt = P.cot_prompt("The sky is green.", "fever", shots)
    assert prompt.startswith(P.FEVER_HEADER + "\n\nClaim: Reg Watson is a current television producer.\nA: First,")
    assert prompt.count("Claim: ") == 4 and prompt.endswith("\n\nClaim: The sky is green.\nA:")
    assert "The answer is REFUTES.\n" in prompt and "The answer is NOT ENOUGH INFO.\n" in prompt
    assert "Second, The series uses technology to comment on contemporary social issues. The answer is SUPPORTS." in prompt
    standard = P.standard_prompt("The sky is green.", "fever", shots)
    assert "Claim: Black Mirror is about society.\nA: SUPPORTS\n" in standard and "First," not in standard


def test_2wiki_cot_prompt_uses_question_lines(shared_data):
    shared_data("2wikimultihop", "manual_rat.txt")
    shots = P.fewshot_examples("2wikimultihop")
    assert len(shots) == 6
    prompt = P.cot_prompt("Who?", "2wikimultihop", shots, rationale="First, Bob is tall.")
    assert prompt.count("Question: ") == 7 and prompt.endswith("Question: Who?\nA: First, Bob is tall. The answer is")
    assert "The answer is I'M Taraneh, 15.\n" in prompt


def test_prompt_layout_without_data():
    assert P.cot_prompt("Q3?", "hotpotqa", SHOTS) == (
        "Q: Who directed Film A?\nA: First, Film A was directed by Ann Lee. The answer is Ann Lee.\n\n"
        "Q: Where was Ann Lee born?\nA: First, Ann Lee was born in Oslo. The answer is Oslo.\n\n"
        "Q: Q3?\nA:"
    )
    assert P.standard_prompt("Q3?", "2wikimultihop", SHOTS) == (
        "Q: Who directed Film A?\nA: Ann Lee\n\nQ: Where was Ann Lee born?\nA: Oslo\n\nQ: Q3?\nA:"
    )
    with pytest.raises(ValueError, match="no prompts"):
        P.cot_prompt("Q?", "triviaqa", SHOTS)


# --------------------------------------------------------------------------- parsing


@pytest.mark.parametrize("text, expected", [
    (" First, X. The answer is 1991.", "1991"),
    (" first, x. the ANSWER is \"Simply Red\".", "Simply Red"),
    (" The answer is St. Louis. Second, more text. The answer is Paris.", "St. Louis"),  # first marker, first sentence
    (" The answer is 27 April 1967\nQ: next", "27 April 1967"),
    (" First, Bob is tall.", None),  # no marker: failed parse
    (" The answer is .", None),
    ("", None),
])
def test_parse_answer(text, expected):
    assert P.parse_answer(text) == expected


def test_parse_answer_fever_and_standard():
    assert P.parse_answer(" First, x. The answer is SUPPORTS.", "fever") == "SUPPORTS"
    assert P.parse_answer(" The answer is not enough info.", "fever") == "NOT ENOUGH INFO"
    assert P.parse_answer(" The answer is refutes", "fever") == "REFUTES"
    assert P.parse_answer(" The answer is maybe.", "fever") is None
    assert P.parse_answer(" REFUTES", "fever", marker=False) == "REFUTES"
    assert P.parse_answer(" Simply Red\n", "hotpotqa", marker=False) == "Simply Red"
    assert P.parse_answer(" Simply Red") is None  # CoT parsing needs the marker
    assert P.split_cot(" First, a. Second, b. The answer is c.") == ("First, a. Second, b.", "c", 35)


# --------------------------------------------------------------------------- consistency


def test_wang_score_hand_computed():
    answers = ["Paris", "paris.", "London", None, "The Paris"]  # normalised: paris, paris, london, -, paris
    means = [-0.1, -0.2, -0.05, -1.0, -0.3]
    sc = P.self_consistency(answers, means, "hotpotqa")
    # w = e^-0.1, e^-0.2, e^-0.05, e^-1, e^-0.3 = 0.904837, 0.818731, 0.951229, 0.367879, 0.740818
    # wang = 5 * (0.904837 + 0.818731 + 0.740818) / 3.783494 = 5 * 2.464386 / 3.783494
    assert sc["wang"] == pytest.approx(3.256759, abs=1e-6)
    assert sc["wang_raw"] == pytest.approx(2.464386, abs=1e-6)
    assert sc["majority"] == 3 and sc["chosen"] == 0  # most probable "paris" path


def test_equal_weights_make_wang_equal_majority():
    sc = P.self_consistency(["x", "x", "y", None, "z"], [-0.7] * 5, "hotpotqa")
    assert sc["majority"] == 2 and sc["wang"] == pytest.approx(2.0)
    assert sc["wang_raw"] == pytest.approx(2 * math.exp(-0.7))


def test_majority_and_wang_votes_can_differ():
    answers = ["Alpha", "Alpha", "Alpha", "Beta", "Beta"]
    means = [-3.0, -3.0, -3.0, -0.1, -0.1]
    by_votes = P.self_consistency(answers, means, "hotpotqa")
    by_weight = P.self_consistency(answers, means, "hotpotqa", vote="wang")
    assert by_votes["chosen"] == 0 and by_votes["majority"] == 3
    assert by_votes["wang"] == pytest.approx(5 * 3 * math.exp(-3) / (3 * math.exp(-3) + 2 * math.exp(-0.1)))
    assert by_weight["chosen"] == 3 and by_weight["majority"] == 2
    assert by_weight["wang"] == pytest.approx(5 - by_votes["wang"])


def test_no_parse_means_no_vote():
    assert P.self_consistency([None, None], [-0.1, -0.2], "hotpotqa") == {
        "chosen": -1, "majority": 0, "wang": 0.0, "wang_raw": 0.0}


# --------------------------------------------------------------------------- runs on a scripted LM


def _examples():
    return [
        Example("q1", "Who wrote Book A?", ["Alice Smith"]),
        Example("q2", "Where is Town B?", ["France"]),
        Example("q3", "Who is D?", ["Dan"]),
    ]


def test_cot_sc_counts_failed_parses_and_batches():
    lm = ScriptedLM({
        "Who wrote Book A?": [
            (" First, Book A is by Alice Smith. The answer is Alice Smith.", -0.2),
            (" First, Book A is by Bob. The answer is Bob.", -0.5),
            (" First, Book A is by Alice Smith. the answer is alice smith", -0.4),
            (" First, Book A is old.", -0.1),  # no "The answer is"
            (" First, Book A is by Carol. The answer is Carol.", -0.3),
        ],
        "Where is Town B?": [(" First, Town B is in Spain. The answer is Spain.", -0.5)],
        "Who is D?": [(" First, D is someone.", -0.5), ("", 0.0)],
    })
    results = P.run_cot_sc(lm, _examples(), "2wikimultihop", n=5, shots=SHOTS, progress=False)
    assert lm.generate_calls == [("CoT-SC 2wikimultihop n=5", 3, 5)] and lm.score_calls == [2]
    q1, q2, q3 = results
    assert q1.prediction == "Alice Smith" and q1.correct == 1.0 and q1.parse_failures == 1
    assert q1.majority == 2 and q1.chosen_path == 0 and q1.rationale == "First, Book A is by Alice Smith."
    w = [math.exp(m) for m in (-0.2, -0.5, -0.4, -0.1, -0.3)]
    assert q1.wang == pytest.approx(5 * (w[0] + w[2]) / sum(w))
    assert q1.answers == ["Alice Smith", "Bob", "alice smith", None, "Carol"]
    assert q1.answer_logprob == pytest.approx(math.log(0.5))
    assert q2.prediction == "Spain" and q2.correct == 0.0 and q2.majority == 5 and q2.wang == pytest.approx(5)
    # every path failed: counted, prediction "", wrong, zero consistency
    assert q3.prediction == "" and q3.correct == 0.0 and q3.parse_failures == 5
    assert (q3.majority, q3.wang, q3.chosen_path, q3.answer_logprob) == (0, 0.0, -1, float("-inf"))
    assert len(q3.texts) == 5 and q3.rationales[0] == "First, D is someone."
    summary = P.summarize(results)
    assert summary["parse_failures"] == 6 and summary["paths"] == 15 and summary["no_prediction"] == 1
    assert summary["accuracy"] == pytest.approx(100 / 3)


def test_standard_and_cot_are_single_greedy_calls():
    lm = ScriptedLM({
        "Who wrote Book A?": [(" Alice Smith", -0.3)],
        "Where is Town B?": [(" The answer is France.", -0.2)],
        "Who is D?": [("", 0.0)],
    })
    std = P.run_standard(lm, _examples(), "hotpotqa", shots=SHOTS, progress=False)
    assert [r.prediction for r in std] == ["Alice Smith", "France", ""]
    assert [r.correct for r in std] == [1.0, 1.0, 0.0] and std[0].answer_logprob == pytest.approx(-0.6)
    assert lm.score_calls == []  # the standard completion is the answer
    cot = P.run_cot(lm, _examples(), "hotpotqa", shots=SHOTS, progress=False)
    assert [r.prediction for r in cot] == ["", "France", ""] and [r.parse_failures for r in cot] == [1, 0, 1]
    assert [c[1:] for c in lm.generate_calls] == [(3, 1), (3, 1)] and lm.score_calls == [1]


def test_a_run_returns_its_results_and_what_it_sent():
    """A run is the list of its results plus what its one generate and one score call were: what its trace is
    written from (`verify_edit.trace.write`)."""
    lm = ScriptedLM({"Who wrote Book A?": [(" First, Bob. The answer is Bob.", -0.2)],
                     "Where is Town B?": [(" First, Oslo.", -0.3)], "Who is D?": [(" Dan", -0.1)]})
    std = P.run_standard(lm, _examples(), "hotpotqa", shots=SHOTS, max_new_tokens=16, progress=False)
    assert isinstance(std, P.PromptRun) and isinstance(std, list) and len(std) == 3 and std[:1] == [std[0]]
    assert (std.lm, std.method, std.dataset, std.shots, std.vote) == (lm, "standard", "hotpotqa", 2, "majority")
    assert std.decoding == {"n": 1, "temperature": 0.0, "max_new_tokens": 16, "stop": ["\n"]} and std.scored == []
    sc = P.run_cot_sc(lm, _examples(), "hotpotqa", n=3, temperature=0.5, seed=7, shots=SHOTS, vote="wang",
                      progress=False)
    assert sc.decoding == {"n": 3, "temperature": 0.5, "max_new_tokens": 96, "stop": list(P.COT_STOP), "seed": 7}
    assert (sc.method, sc.vote) == ("cot_sc", "wang") and [r.finish_reasons for r in sc] == [["stop"] * 3] * 3
    assert [(p, c) for _, p, c in sc.scored] == lm.scored  # what the one score call received
    ((i, prefix, continuation),) = sc.scored  # only "Bob" parsed: one answer scored, after its rationale
    assert i == 0 and prefix == sc[0].prompt + " First, Bob. The answer is" and continuation == " Bob."


def test_fever_results_are_labels():
    lm = ScriptedLM({"The sky is green.": [(" First, the sky is blue. The answer is refutes.", -0.1),
                                           (" First, hm. The answer is SUPPORTS.", -0.2)]})
    claim = Example("c1", "The sky is green.", label="REFUTES")
    (r,) = P.run_cot_sc(lm, [claim], "fever", n=3, shots=SHOTS, progress=False)
    assert r.answers == ["REFUTES", "SUPPORTS", "REFUTES"] and r.prediction == "REFUTES"
    assert r.correct == 1.0 and r.gold == ["REFUTES"] and r.majority == 2


def test_rescore_against_the_first_alias_only():
    """2Wiki's dev file lists many aliases; the paper's code compared one answer string (issue 19, item 15)."""
    lm = ScriptedLM({
        "Where was Ann born?": [(" First, Ann was born in Missoula, Montana. The answer is Missoula, Montana.", -0.2)],
        "Where was Bo born?": [(" First, Bo was born in Galați. The answer is Galați.", -0.2)],
        "Who is D?": [(" First, D is someone.", -0.5)],
    })
    examples = [Example("a", "Where was Ann born?", ["Missoula", "Missoula, Montana"]),
                Example("b", "Where was Bo born?", ["Galați", "Galati", "Galatz"]),
                Example("d", "Who is D?", ["Dan", "D"])]
    results = P.run_cot(lm, examples, "2wikimultihop", shots=SHOTS, progress=False)
    assert [r.correct for r in results] == [1.0, 1.0, 0.0]  # any alias
    assert P.rescore(results, aliases="all") == [1.0, 1.0, 0.0]
    assert P.rescore(results, aliases="first") == [0.0, 1.0, 0.0]  # "Missoula, Montana" is the second alias
    assert P.rescore(results) == P.rescore(results, aliases="first")
    # anything with prediction / gold / dataset (Verify-and-Edit records too); FEVER has one gold label
    fever = [P.PromptResult(**{**vars(results[0]), "dataset": "fever", "prediction": "refutes", "gold": ["REFUTES"]})]
    assert P.rescore(fever, "first") == P.rescore(fever, "all") == [1.0]
    assert P.rescore([P.PromptResult(**{**vars(results[0]), "gold": []})], "first") == [0.0]
    with pytest.raises(ValueError, match="aliases"):
        P.rescore(results, aliases="second")
