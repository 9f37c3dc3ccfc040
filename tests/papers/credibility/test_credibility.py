"""The credibility benchmark: citations, reference sets, key facts and their review, the §4 metrics, §5 pipelines."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest
from scripted import ScriptedGenerator

from covlib import data, generation, nli
from covlib.core import references as R
from covlib.core import stats
from covlib.core.records import DataError, Example, Paragraph, Passage
from covlib.papers import credibility as C
from covlib.retrieval import BM25Retriever

# --------------------------------------------------------------------------- citations


@pytest.mark.parametrize("text, ids", [
    ("Paris [1][2].", [1, 2]),
    ("Paris [1, 2].", [1, 2]),
    ("Paris [1; 2].", [1, 2]),
    ("Paris [12].", [12]),
    ("Paris [2-4] and [4][1].", [2, 3, 4, 1]),
    ("Paris [2][2] again [2].", [2]),
    ("No citation here.", []),
    ("A list [a] or [] or [1.5] is not a citation.", []),
    ("", []),
])
def test_parse_citations(text, ids):
    assert R.parse_citations(text) == ids


def test_cited_sentences_moves_citations_after_the_stop_and_strips_them():
    answer = "Paris is the capital of France.[1][3] It hosts the Louvre [2]. It is large."
    got = R.cited_sentences(answer)
    assert [s.text for s in got] == ["Paris is the capital of France.", "It hosts the Louvre.", "It is large."]
    assert [s.citations for s in got] == [(1, 3), (2,), ()]
    assert R.cited_ids(got) == [1, 3, 2]
    assert R.cited_sentences("") == [] and R.cited_sentences("   [2].") == []


@pytest.mark.parametrize("answer, stripped, ids", [
    ("The bridge opened in the year [1990] [2].", "The bridge opened in the year [1990].", [2]),
    ("Its population was [12000] in 2010 [1][3].", "Its population was [12000] in 2010.", [1, 3]),
    ("It fell in [1989-1990] [1, 2].", "It fell in [1989-1990].", [1, 2]),
    ("It opened in 1990 [1][2], closed [3-4].", "It opened in 1990, closed.", [1, 2, 3, 4]),
    ("It was cited as [120].", "It was cited as.", [120]),  # three digits: an id, out of range or not
])
def test_a_bracketed_year_is_text_not_a_citation(answer, stripped, ids):
    assert R.strip_citations(answer) == stripped and R.parse_citations(answer) == ids
    assert [s.citations for s in R.cited_sentences(answer)] == [tuple(ids)]


def test_em_recall_finds_a_bracketed_year(isolated_cache):
    facts = C.KeyFacts("q1", "When did Paris host the fair?", "1990", ["Paris hosted the fair in 1990."], "agents", "test")
    answer = "Paris hosted the fair in the year [1990] [1]."
    row = C.score_answers([answer], [REFS], [facts], [["1990"]], judge="overlap", progress=False)[0]
    assert row["em_recall"] == 1.0  # was 0.0: "[1990]" was stripped as if it were a citation
    assert row["n_cited_sentences"] == 1 and row["cit_precision"] == 1.0  # [1] is still the citation


def test_format_references_numbers_from_one():
    refs = [Paragraph("Paris", ["Capital of France."]), Passage("p9", "Lyon", "A city.")]
    assert R.format_references(refs) == "[1] Paris: Capital of France.\n[2] Lyon: A city."


def test_citation_scores_count_what_does_not_exist():
    assert C.citation_scores([1, 7], gold=[1, 3], n_refs=5) == {"cit_precision": 0.5, "cit_recall": 0.5,
                                                                "invalid_citations": 1.0}
    nothing = C.citation_scores([], gold=[2, 4], n_refs=5)
    assert nothing["cit_precision"] == 0.0 and nothing["cit_recall"] == 0.0
    assert math.isnan(C.citation_scores([1], gold=[], n_refs=0)["cit_recall"])


# --------------------------------------------------------------------------- metrics on worked-out cases

FACTS = C.KeyFacts("q1", "What is the capital of France?", "Paris",
                   ["Paris is the capital of France.", "The Eiffel Tower stands in Paris."], "supporting", "test")
REFS = C.ReferenceSet("q1", "complete", (Paragraph("Paris", ["Paris is the capital of France."]),
                                         Paragraph("Tower", ["The Eiffel Tower stands in Paris."]),
                                         Paragraph("Fruit", ["Bananas are yellow."])), gold=(1, 2))


def _score(answer: str, refs: C.ReferenceSet = REFS) -> dict:
    return C.score_answers([answer], [refs], [FACTS], [["Paris"]], judge="overlap", progress=False)[0]


def test_metrics_on_a_hand_checked_answer(isolated_cache):
    row = _score("Paris is the capital of France [1]. The weather is nice today [3].")
    # recall: the answer entails fact 1, not fact 2; precision: sentence 1 entails a fact, sentence 2 none;
    # SC: [1] entails sentence 1, [3] does not entail sentence 2; citations {1, 3} against gold {1, 2}
    assert (row["recall"], row["precision"], row["f1"]) == (0.5, 0.5, 0.5)
    assert (row["sc_cited"], row["sc_all"]) == (0.5, 0.5)
    assert (row["cit_precision"], row["cit_recall"], row["invalid_citations"]) == (0.5, 0.5, 0.0)
    assert row["em_recall"] == 1.0 and row["n_sentences"] == 2 and row["judge"].startswith("approx-overlap")


def test_a_sentence_without_citation_counts_only_for_sc_all(isolated_cache):
    row = _score("Paris is the capital of France [1]. The Eiffel Tower stands in Paris.")
    assert row["recall"] == 1.0 and row["precision"] == 1.0
    assert row["sc_cited"] == 1.0 and row["sc_all"] == 0.5 and row["n_cited_sentences"] == 1


def test_a_citation_to_a_missing_reference_is_counted_and_supports_nothing(isolated_cache):
    row = _score("Paris is the capital of France [9].")
    assert row["invalid_citations"] == 1.0 and row["cit_precision"] == 0.0
    assert row["sc_cited"] == 0.0 and row["recall"] == 0.5


def test_an_empty_answer_scores_zero(isolated_cache):
    row = _score("")
    assert (row["recall"], row["precision"], row["sc_all"], row["cit_precision"], row["em_recall"]) == (0, 0, 0, 0, 0)
    assert math.isnan(row["sc_cited"]) and row["n_sentences"] == 0


def test_three_batched_nli_calls_whatever_the_number_of_answers(isolated_cache, monkeypatch):
    calls = []
    real = nli.probabilities
    monkeypatch.setattr(nli, "probabilities", lambda p, h, *a, **k: calls.append(len(p)) or real(p, h, *a, **k))
    C.score_answers(["Paris [1].", "Paris is the capital of France [1][2]."] * 5, [REFS] * 10, [FACTS] * 10,
                    [["Paris"]] * 10, judge="overlap", progress=False)
    assert len(calls) == 3 and calls[0] == 20  # 10 answers x 2 key facts in one call


def test_summarize_gives_f1_both_ways():
    rows = [dict(precision=1.0, recall=0.0, f1=0.0, sc_cited=float("nan"), sc_all=0.0, cit_precision=0.0,
                 cit_recall=0.0, em_recall=1.0, invalid_citations=0.0, n_sentences=1, judge="j"),
            dict(precision=0.0, recall=1.0, f1=0.0, sc_cited=1.0, sc_all=1.0, cit_precision=1.0, cit_recall=0.5,
                 em_recall=0.0, invalid_citations=2.0, n_sentences=3, judge="j")]
    s = C.summarize(rows)
    assert s["F1_mean"] == 0.0 and s["F1_of_means"] == pytest.approx(50.0)
    assert s["SC_cited"] == 100.0 and s["SC_all"] == 50.0 and s["invalid_citations"] == 2 and s["n"] == 2


def test_score_answers_refuses_misaligned_inputs():
    other = C.ReferenceSet("q2", "complete", REFS.paragraphs, REFS.gold)
    with pytest.raises(ValueError, match="lined up"):
        C.score_answers(["a"], [other], [FACTS], [["Paris"]], judge="overlap")
    with pytest.raises(ValueError, match="line up"):
        C.score_answers(["a", "b"], [REFS], [FACTS], [["Paris"]], judge="overlap")


# --------------------------------------------------------------------------- reference sets on the real sample


@pytest.fixture(scope="module")
def hotpot(shared_data_module):
    return data.load_hotpotqa(shared_data_module("hotpotqa", "hotpot_dev_distractor_sample100.jsonl"))


@pytest.fixture(scope="module")
def shared_data_module():
    from covlib.core import paths

    def _require(*parts):
        path = paths.dataset_path(*parts)
        if not path.exists():
            pytest.skip(f"real data not found at {path} (set COVLIB_DATA or put ../shared/data beside the repo)")
        return path
    return _require


def _titles(refs):
    return [p.title for p in refs.paragraphs]


def test_with_gold_keeps_both_gold_never_repeats_and_nests(hotpot):
    for ex in hotpot[:30]:
        gold = set(ex.supporting_titles)
        previous: set[str] = set()
        for n in range(2, 11):
            refs = C.with_gold(ex, n, seed=0)
            titles = _titles(refs)
            assert len(titles) == n == len(set(titles))
            assert gold <= set(titles) and {titles[i - 1] for i in refs.gold} == gold
            assert previous <= set(titles)  # more noise adds distractors, never swaps them
            previous = set(titles)
        assert C.with_gold(ex, 5, seed=0) == C.with_gold(ex, 5, seed=0)
        assert C.with_gold(ex, 5, kind="noise").paragraphs == C.with_gold(ex, 5).paragraphs  # shared answers
    assert any(C.with_gold(ex, 5, seed=0).paragraphs != C.with_gold(ex, 5, seed=1).paragraphs for ex in hotpot[:10])


def test_partial_drops_exactly_one_gold(hotpot):
    for ex in hotpot[:30]:
        refs = C.partial(ex, 5, seed=0)
        titles = _titles(refs)
        assert len(titles) == 5 == len(set(titles)) and len(refs.gold) == 1
        assert titles[refs.gold[0] - 1] in ex.supporting_titles
        assert C.partial(ex, 5, seed=0) == refs
    assert C.closed_book(hotpot[0]).paragraphs == () and len(C.closed_book(hotpot[0])) == 0


def test_reference_set_errors(hotpot):
    with pytest.raises(ValueError, match="n_refs=11"):
        C.with_gold(hotpot[0], 11)
    lone = Example("x", "Q?", ["A"], paragraphs=[Paragraph("T", ["S."], True), Paragraph("U", ["V."])])
    with pytest.raises(DataError, match="at least 2 gold"):
        C.with_gold(lone, 2)


def test_reflection_sets_are_balanced(hotpot):
    sets = C.reflection_sets(hotpot[:20], seed=3)
    assert [s.kind for s in sets].count("partial") == 10 and [s.kind for s in sets].count("complete") == 10
    assert sets == C.reflection_sets(hotpot[:20], seed=3)


# --------------------------------------------------------------------------- key facts and their review


def test_supporting_key_facts_are_the_gold_sentences(hotpot):
    records = C.supporting_key_facts(hotpot[:5])
    assert records[0].key_facts[0] == "VIVA Media GmbH (until 2004 \"VIVA Media AG\") is a music television network originating from Germany."
    for ex, r in zip(hotpot, records):
        assert r.source == "supporting" and 1 <= len(r.key_facts) <= len(ex.supporting_facts)


def test_key_facts_file_round_trip_and_version(tmp_path, hotpot):
    records = C.supporting_key_facts(hotpot[:3])
    path = C.save_key_facts(records, tmp_path / "kf.jsonl")
    assert C.load_key_facts(path) == records
    path.write_text(path.read_text().replace('"version": 1', '"version": 0', 1))
    with pytest.raises(DataError, match="line 1.*version"):
        C.load_key_facts(path)


def _sheet_rows(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _write_rows(path, rows):
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def test_review_sheet_round_trip(tmp_path, hotpot):
    records = C.supporting_key_facts(hotpot[:3])
    sheet = C.export_review_sheet(records, tmp_path / "review.csv")
    rows = _sheet_rows(sheet)
    assert len(rows) == sum(len(r.key_facts) for r in records)
    rows[0]["edit"] = "VIVA Media AG was renamed VIVA Media GmbH in 2004."
    rows[-1]["keep"] = "n"
    _write_rows(sheet, rows)
    reviewed = C.read_review_sheet(sheet, records, reviewer="ann")
    assert reviewed[0].key_facts[0] == "VIVA Media AG was renamed VIVA Media GmbH in 2004."
    assert len(reviewed[-1].key_facts) == len(records[-1].key_facts) - 1
    assert reviewed[0].source == "supporting+reviewed" and "ann" in reviewed[0].author


@pytest.mark.parametrize("change, message", [
    (lambda rows: rows[0].update(question_id="nope"), "unknown question id 'nope'"),
    (lambda rows: rows[0].update(key_fact="", edit=""), "kept key fact is empty"),
    (lambda rows: rows[0].update(keep="maybe"), "keep must be y or n"),
    (lambda rows: rows[1].update(fact_id=rows[0]["fact_id"]), "not a fresh id"),
    (lambda rows: [r.update(keep="n") for r in rows if r["question_id"] == rows[0]["question_id"]],
     "left with no key fact"),
])
def test_review_sheet_errors(tmp_path, hotpot, change, message):
    records = C.supporting_key_facts(hotpot[:3])
    sheet = C.export_review_sheet(records, tmp_path / "review.csv")
    rows = _sheet_rows(sheet)
    change(rows)
    _write_rows(sheet, rows)
    with pytest.raises(DataError, match=message):
        C.read_review_sheet(sheet, records)


@pytest.mark.parametrize("text, facts", [
    ("1. VIVA Media AG changed its name in 2004.\n2. GmbH stands for a limited liability company.",
     ["VIVA Media AG changed its name in 2004.", "GmbH stands for a limited liability company."]),
    ("Here are the key facts:\n- **Key fact 1:** The film was directed by Ann Lee.\n* Ann Lee was born in Oslo.",
     ["The film was directed by Ann Lee.", "Ann Lee was born in Oslo."]),
    ("The film was directed by Ann Lee. Ann Lee was born in Oslo.",
     ["The film was directed by Ann Lee.", "Ann Lee was born in Oslo."]),
    ("1) A is B here.\n2) A is B here.\n3) C is D now.\n4) E is F too.\n5) G is H also.",
     ["A is B here.", "C is D now.", "E is F too.", "G is H also."]),
])
def test_parse_key_facts(text, facts):
    assert C.parse_key_facts(text) == facts


def test_llm_key_facts_use_the_papers_two_prompts(hotpot):
    gen = ScriptedGenerator({C.REASONING_INSTRUCTION: "Step 1: VIVA Media AG became VIVA Media GmbH. Step 2: GmbH means...",
                             C.KEY_FACTS_INSTRUCTION: "1. VIVA Media AG became VIVA Media GmbH in 2004.\n"
                                                      "2. GmbH stands for Gesellschaft mit beschränkter Haftung."})
    records = C.llm_key_facts(gen, hotpot[:2], progress=False)
    assert [len(prompts) for _, prompts, _ in gen.calls] == [2, 2] and all(chat for *_, chat in gen.calls)
    first = gen.calls[0][1][0]
    assert first.startswith("Question: VIVA Media AG") and "Answer: Gesellschaft" in first
    assert "Please figure out the reasoning process towards the answer step-by-step without other content." in first
    assert "Please identify 2 to 4 non-redundant key-facts" in gen.calls[1][1][0]
    assert "Step 1: VIVA" in gen.calls[1][1][0]  # step 2 reads step 1's output
    assert records[0].key_facts[1] == "GmbH stands for Gesellschaft mit beschränkter Haftung."
    assert records[0].source == "llm" and records[0].author == "scripted"


# --------------------------------------------------------------------------- answers, reflection, completion


def test_prompts_carry_the_papers_words():
    refs = REFS.paragraphs
    assert C.answer_prompt("Q?", refs).startswith("Question: Q?\n\nReferences:\n[1] Paris: Paris is the capital")
    assert C.answer_prompt("Q?", refs).endswith("Please write a high-quality answer for the given question using only "
                                                "the provided references, and cite them properly using [1][2][3].")
    assert C.answer_prompt("Q?", refs, reflection=True).endswith(
        'respond with "I\'m sorry, I cannot answer the question based on the provided references".')
    assert "References" not in C.answer_prompt("Q?", ())
    assert C.completion_prompt("Q?", refs).endswith(
        'please start your query with "I further need to ask the search engine:" to gather more information.')
    assert isinstance(ScriptedGenerator({}), generation.Generator)


def test_generate_answers_checks_alignment():
    gen = ScriptedGenerator({}, default="Paris [1].")
    ex = Example("q1", "What is the capital of France?", ["Paris"])
    assert C.generate_answers(gen, [ex], [REFS], progress=False) == ["Paris [1]."]
    with pytest.raises(ValueError, match="given for question"):
        C.generate_answers(gen, [Example("q9", "Q?")], [REFS], progress=False)


@pytest.mark.parametrize("text, refused", [
    ("I'm sorry, I cannot answer the question based on the provided references.", True),
    ("I’m sorry, I can't answer the question with these.", True),
    ("The references are insufficient to say.", True),
    ("Paris is the capital [1].", False),
    ("", False),
])
def test_is_refusal(text, refused):
    assert C.is_refusal(text) is refused


def test_reflection_scores_hand_case():
    s = C.reflection_scores(refused=[True, True, False, False], insufficient=[True, False, True, False])
    assert s["accuracy"] == 50.0 and s["f1"] == 50.0 and s["refusal_rate"] == 50.0
    assert C.reflection_scores([False] * 4, [True, False, True, False])["f1"] == 0.0


def test_parse_queries():
    assert C.parse_queries("I further need to ask the search engine: Who founded VIVA?\nThanks") == (
        ["Who founded VIVA?"], True)
    two = "I further need to ask the search engine: \"A?\" I further need to ask the search engine: B?"
    assert C.parse_queries(two) == (["A?", "B?"], True)
    assert C.parse_queries("When was Oslo founded?\nmore") == (["When was Oslo founded?"], False)
    assert C.parse_queries("") == ([], False)


CORPUS = [Passage(f"p{i}", f"Filler {i}", f"Unrelated filler text number {i} about {('gardening', 'tea', 'rowing')[i % 3]}.")
          for i in range(30)]
CORPUS += [Passage("ann", "Ann Lee", "Ann Lee is a film director who was born in Oslo in 1970."),
           Passage("film", "Film A", "Film A is a 1999 drama directed by Ann Lee.")]


def test_self_completion_asks_retrieves_and_answers_again(isolated_cache):
    retriever = BM25Retriever(CORPUS)
    ex = Example("q", "Where was the director of Film A born?", ["Oslo"],
                 supporting_facts=[("Film A", 0), ("Ann Lee", 0)])

    def script(prompt: str) -> str:
        if "I further need to ask" in prompt:
            return "I further need to ask the search engine: Which drama is Film A?"
        if "Ann Lee is a film director" in prompt and "Film A is a 1999 drama" in prompt:
            return "Ann Lee directed Film A [2] and was born in Oslo [1]."
        return C.REFUSAL + "."

    gen = ScriptedGenerator(script)
    (rec,) = C.self_complete(gen, [ex], retriever, k_initial=1, cap=3, max_rounds=1, progress=False)
    assert [d for d, *_ in gen.calls] == ["reflect", "queries (round 1)", "answer (round 1)"]
    assert rec.refused and rec.rounds == 1 and rec.queries == [["Which drama is Film A?"]]
    assert [p.id for p in rec.references.paragraphs] == ["ann", "film"]  # BM25's top 1, then the query's find
    assert rec.references.gold == (1, 2) and rec.answer.startswith("Ann Lee directed") and rec.unmarked == 0
    assert "[1] Ann Lee: Ann Lee is a film director" in gen.calls[2][1][0]

    confident = ScriptedGenerator({}, default="Oslo [1].")
    (rec,) = C.self_complete(confident, [ex], retriever, k_initial=2, cap=3, progress=False)
    assert len(confident.calls) == 1 and not rec.refused and rec.rounds == 0 and len(rec.references) == 2


def test_self_completion_stops_after_max_rounds(isolated_cache):
    retriever = BM25Retriever(CORPUS)
    ex = Example("q", "Where was the director of Film A born?", ["Oslo"])
    stubborn = ScriptedGenerator(lambda p: "Gardening?" if "I further need" in p else C.REFUSAL)
    (rec,) = C.self_complete(stubborn, [ex], retriever, k_initial=1, cap=10, max_rounds=2, progress=False)
    assert rec.rounds == 2 and rec.unmarked == 2 and len(rec.references) == 10 and C.is_refusal(rec.answer)
    assert len({p.id for p in rec.references.paragraphs}) == 10


# --------------------------------------------------------------------------- human ratings


def test_ratings_round_trip_and_correlation(tmp_path):
    sheet = C.export_rating_sheet([{"question_id": "q1", "model": "m", "question": "Q?",
                                    "answer": "A is B [1]. C is D."}], tmp_path / "sheet.csv")
    assert "(1) A is B. (2) C is D." in sheet.read_text()
    path = tmp_path / "ratings.csv"
    rows = [("q1", "m1", "r1", "1 1", "1"), ("q1", "m1", "r2", "1 0", "0.5"), ("q1", "m2", "r1", "0 1", "0.25"),
            ("q1", "m3", "r1", "0 0", "0"), ("q2", "m3", "r1", "", "")]
    path.write_text("question_id,model,rater,helpful,completeness\n" + "\n".join(",".join(r) for r in rows) + "\n")
    human = C.human_scores(C.read_ratings(path))
    assert human["m1"] == {"HPrec": 75.0, "HRec": 75.0, "n_questions": 1} and human["m3"]["HRec"] == 0.0
    auto = {"m1": {"P": 80, "R": 70, "EM_recall": 10}, "m2": {"P": 50, "R": 30, "EM_recall": 90},
            "m3": {"P": 10, "R": 5, "EM_recall": 50}}
    r = C.human_correlation(auto, human)
    assert r["P"] == pytest.approx(np.corrcoef([80, 50, 10], [75, 50, 0])[0, 1])
    assert r["R"] == pytest.approx(np.corrcoef([70, 30, 5], [75, 25, 0])[0, 1]) and r["n_models"] == 3
    with pytest.raises(ValueError, match="at least 3"):
        C.human_correlation({"m1": auto["m1"]}, human)


@pytest.mark.parametrize("line, message", [
    ("q1,m1,r1,1 2,1", "helpful must be 0/1"),
    ("q1,m1,r1,1,0.3", "completeness must be one of"),
    ("q1,m1,,1,1", "field 'rater'"),
])
def test_ratings_errors(tmp_path, line, message):
    path = tmp_path / "ratings.csv"
    path.write_text("question_id,model,rater,helpful,completeness\n" + line + "\n")
    with pytest.raises(DataError, match=message):
        C.read_ratings(path)


def test_build_key_facts_keeps_earlier_questions(tmp_path, monkeypatch, hotpot):
    monkeypatch.setenv("COVLIB_ROOT", str(tmp_path))
    first = C.build_key_facts("supporting", hotpot[:2])
    both = C.build_key_facts("supporting", hotpot[1:4])
    assert both[0] == first[1] and len(C.load_key_facts(C.key_facts_path("supporting"))) == 4
    gen = ScriptedGenerator({C.KEY_FACTS_INSTRUCTION: "1. VIVA Media AG became VIVA Media GmbH."}, name="m1")
    assert C.build_key_facts("llm", hotpot[:1], gen)[0].author == "m1" and len(gen.calls) == 2
    C.build_key_facts("llm", hotpot[:1], gen)
    assert len(gen.calls) == 2  # stored: no new call
    other = ScriptedGenerator({}, default="1. Another model wrote this fact.", name="m2")
    assert C.build_key_facts("llm", hotpot[:1], other)[0].author == "m2"  # another author: rebuilt
    with pytest.raises(ValueError, match="needs a generator"):
        C.build_key_facts("llm", hotpot[:1])
    with pytest.raises(FileNotFoundError, match="no reviewed key facts"):
        C.build_key_facts("llm+reviewed", hotpot[:1])


def test_runs_answer_once_per_model_and_score_with_three_nli_calls(isolated_cache, monkeypatch):
    ex = Example("q1", "What is the capital of France?", ["Paris"])
    gens = [ScriptedGenerator({}, default="Paris is the capital of France [1].", name="a"),
            ScriptedGenerator({}, default="I do not know.", name="b")]
    sets = {"complete": [REFS], "closed-book": [C.ReferenceSet("q1", "closed-book", (), ())]}
    runs = C.answer_runs(gens, [ex], sets, progress=False)
    assert [len(g.calls) for g in gens] == [1, 1] and len(gens[0].calls[0][1]) == 2
    calls = []
    real = nli.probabilities
    monkeypatch.setattr(nli, "probabilities", lambda p, h, *a, **k: calls.append(len(p)) or real(p, h, *a, **k))
    rows = C.score_runs(runs, [ex], [FACTS], judge="overlap", progress=False)
    assert len(calls) == 3 and set(rows) == {("a", "complete"), ("a", "closed-book"), ("b", "complete"),
                                             ("b", "closed-book")}
    assert rows[("a", "complete")][0]["cit_precision"] == 1.0 and rows[("b", "complete")][0]["recall"] == 0.0
    assert math.isnan(rows[("a", "closed-book")][0]["cit_recall"])  # no gold to cite without references


# --------------------------------------------------------------------------- self-completion rounds (issue 19, #10)

ROUND_CORPUS = [Passage(f"t{i}", f"Tea {i}", f"Tea garden number {i} grows green tea.") for i in range(6)]
ROUND_CORPUS += [Passage(f"g{i}", f"Rowing {i}", f"Rowing club number {i} trains at dawn.") for i in range(20)]
ROUND_CORPUS += [Passage("oslo", "Oslo", "Oslo is the capital of Norway."),
                 Passage("film", "Film A", "Film A is a 1999 drama directed by Ann Lee.")]


def _rounds_script(answers: list[str], queries: list[str]):
    """Replies in call order: the n-th answer prompt gets answers[n], the n-th query prompt queries[n]."""
    state = {"answer": 0, "query": 0}

    def script(prompt: str) -> str:
        if C.COMPLETION_INSTRUCTION in prompt:
            state["query"] += 1
            return f"{C.QUERY_MARKER} {queries[min(state['query'], len(queries)) - 1]}"
        state["answer"] += 1
        return answers[min(state["answer"], len(answers)) - 1]
    return script


def test_self_completion_iterates_until_the_model_stops_refusing(isolated_cache):
    retriever = BM25Retriever(ROUND_CORPUS)
    ex = Example("q", "Which garden grows tea?", ["Oslo"])
    gen = ScriptedGenerator(_rounds_script([C.REFUSAL, C.REFUSAL, "Ann Lee was born in Oslo [2]."],
                                           ["Norway capital", "1999 drama"]))
    (rec,) = C.self_complete(gen, [ex], retriever, k_initial=1, cap=4, progress=False)  # the default cap on rounds
    assert [d for d, *_ in gen.calls] == ["reflect", "queries (round 1)", "answer (round 1)",
                                          "queries (round 2)", "answer (round 2)"]
    assert rec.refused and rec.rounds == 2 and rec.queries == [["Norway capital"], ["1999 drama"]]
    assert rec.answer.startswith("Ann Lee was born") and not C.is_refusal(rec.answer)
    ids = [p.id for p in rec.references.paragraphs]
    assert len(ids) == 4 and {"oslo", "film"} <= set(ids)  # round 2's find displaced the question's own filler
    assert ids.index("oslo") < ids.index("film")  # the first round's find stays ahead of the second's
    assert all(C.REFUSAL in prompt for _, (prompt,), _ in gen.calls[2::2])  # still free to refuse before the cap


def test_self_completion_stops_at_the_round_cap(isolated_cache):
    retriever = BM25Retriever(ROUND_CORPUS)
    ex = Example("q", "Which garden grows tea?", ["Oslo"])
    gen = ScriptedGenerator(_rounds_script([C.REFUSAL], ["Norway capital", "1999 drama", "rowing"]))
    (rec,) = C.self_complete(gen, [ex], retriever, k_initial=1, cap=4, progress=False)
    assert C.COMPLETION_ROUNDS == 3 and rec.rounds == C.COMPLETION_ROUNDS and len(rec.queries) == 3
    assert [d for d, *_ in gen.calls][-2:] == ["queries (round 3)", "answer (round 3)"]
    assert C.REFUSAL not in gen.calls[-1][1][0]  # at the cap the model is asked to answer, not to refuse
    (capped,) = C.self_complete(ScriptedGenerator(_rounds_script([C.REFUSAL], ["rowing"])), [ex], retriever,
                                k_initial=1, cap=4, max_rounds=1, progress=False)
    assert capped.rounds == 1
    with pytest.raises(ValueError, match="max_rounds"):
        C.self_complete(gen, [ex], retriever, k_initial=1, cap=4, max_rounds=0, progress=False)



def test_self_completion_and_gold_recall_over_a_make_index_folder(tmp_path, isolated_cache):
    """Notebook 07's `corpus` may be a `make index` folder (retrieval.open_corpus): the pipeline runs on it unchanged."""
    from covlib import retrieval
    from covlib.retrieval.disk_index import DiskBM25Retriever

    DiskBM25Retriever.build(ROUND_CORPUS, tmp_path / "tiny-bm25-disk", shard_size=10, progress=False)
    passages, disk, name = retrieval.open_corpus(tmp_path / "tiny-bm25-disk")
    assert name == "tiny-bm25-disk" and len(passages) == len(ROUND_CORPUS)
    ex = Example("q", "Which garden grows tea?", ["Oslo"], supporting_facts=[("Oslo", 0), ("Film A", 0)])
    gen = ScriptedGenerator(_rounds_script([C.REFUSAL, C.REFUSAL, "Oslo [2]."], ["Norway capital", "1999 drama"]))
    (rec,) = C.self_complete(gen, [ex], disk, k_initial=1, cap=4, progress=False)
    assert rec.rounds == 2 and {"oslo", "film"} <= {p.id for p in rec.references.paragraphs}
    assert len(rec.references.gold) == 2
    (baseline,) = C.bm25_references(disk, [ex], k=4)
    got = C.gold_recall([[p.title for p in baseline.paragraphs], [p.title for p in rec.references.paragraphs]],
                        [ex.supporting_titles] * 2)
    assert got["recall"]["value"] == pytest.approx(50.0)  # BM25 alone finds no gold; completion finds both


# --------------------------------------------------------------------------- intervals

def _row(qid, precision, recall, **kw):
    base = dict(question_id=qid, precision=precision, recall=recall, f1=C.f1(precision, recall), sc_cited=1.0,
                sc_all=0.5, cit_precision=0.5, cit_recall=1.0, em_recall=1.0, invalid_citations=0.0, n_sentences=2,
                judge="j")
    return {**base, **kw}


def test_intervals_match_summarize_and_bracket_the_value():
    rows = [_row(f"q{i}", p, r) for i, (p, r) in enumerate([(1, 1), (0.5, 0), (0, 0.5), (1, 0.5), (0.25, 1)])]
    rows.append(_row("q5", float("nan"), float("nan"), f1=float("nan")))  # no key facts: left out
    s, est = C.summarize(rows), C.intervals(rows)
    for name in ("P", "R", "F1_mean", "F1_of_means", "SC_cited", "SC_all", "CitP", "CitR", "EM_recall"):
        assert est[name]["value"] == pytest.approx(s[name]), name
    assert est["P"]["n"] == 5 and est["EM_recall"]["n"] == 6
    assert est["R"]["low"] < est["R"]["value"] < est["R"]["high"]
    # every answer contains the gold: 6 of 6, a proportion with its Wilson interval (the old bootstrap said [100, 100])
    assert est["EM_recall"]["high"] == 100.0
    assert est["EM_recall"]["low"] == pytest.approx(100 * stats.wilson_interval(6, 6)[0])
    cols = C.interval_columns(est, {"R": "R", "SC_cited": "SC (cited sents)"})
    assert cols["R"] == est["R"]["value"] and cols["R 95% CI"].startswith(f"{est['R']['value']:.1f} [")
    assert set(cols) == {"R", "R 95% CI", "SC (cited sents)", "SC (cited sents) 95% CI"}


def test_paired_differences_and_the_recall_drop():
    few = [_row(f"q{i}", 1.0, r) for i, r in enumerate([1.0, 1.0, 0.5, 0.5])]
    many = [_row(f"q{i}", 1.0, r) for i, r in enumerate([0.5, 1.0, 0.0, 0.5])]
    d = C.paired(few, many, "R")
    assert d["value"] == pytest.approx(25.0) and d["n"] == 4 and 0 <= d["low"] <= 25 <= d["high"]
    drop = C.recall_drop(few, many)
    assert drop["absolute"]["value"] == pytest.approx(25.0)
    assert drop["relative"]["value"] == pytest.approx(100 * (0.75 - 0.5) / 0.75)  # in % of the recall with fewer refs
    assert drop["relative"]["low"] <= drop["relative"]["value"] <= drop["relative"]["high"]
    with pytest.raises(ValueError, match="same questions"):
        C.paired(few, many[::-1], "R")


def test_reflection_intervals_match_reflection_scores():
    refused = [True, True, False, False, True, False, False, True]
    partial = [True, False, False, True, True, False, True, True]
    plain, est = C.reflection_scores(refused, partial), C.reflection_intervals(refused, partial)
    assert est["accuracy"]["value"] == pytest.approx(plain["accuracy"]) and est["f1"]["value"] == pytest.approx(plain["f1"])
    assert est["accuracy"]["n"] == est["f1"]["n"] == 8
    assert est["f1"]["low"] <= est["f1"]["value"] <= est["f1"]["high"]
    assert C.reflection_correct(refused, partial) == [1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0]
    assert C.reflection_intervals([False] * 4, [False] * 4)["f1"]["value"] == 0.0  # sklearn's zero_division=0


def test_gold_recall_agrees_with_recall_at_k():
    from covlib.core import metrics

    ranked = [["A", "x", "B"], ["x", "y", "C"], ["D", "E", "z"], ["q"]]
    gold = [["A", "B"], ["C", "F"], ["D", "E"], []]
    est = C.gold_recall(ranked, gold)
    assert est["recall"]["value"] == pytest.approx(100 * metrics.recall_at_k(ranked, gold, ks=(3,))[3])
    assert est["all"]["value"] == pytest.approx(100 * metrics.all_recall_at_k(ranked, gold, ks=(3,))[3])
    assert est["recall"]["n"] == 3  # the question without gold titles is left out


def test_human_correlation_intervals():
    auto = {"m1": {"P": 80, "R": 70, "EM_recall": 10}, "m2": {"P": 50, "R": 30, "EM_recall": 90},
            "m3": {"P": 10, "R": 5, "EM_recall": 50}, "m4": {"P": 60, "R": 40, "EM_recall": 40}}
    human = {"m1": {"HPrec": 75, "HRec": 70}, "m2": {"HPrec": 50, "HRec": 25}, "m3": {"HPrec": 0, "HRec": 0},
             "m4": {"HPrec": 55, "HRec": 45}}
    plain, est = C.human_correlation(auto, human), C.human_correlation_intervals(auto, human)
    for k in ("P", "R", "EM_recall"):
        assert est[k]["value"] == pytest.approx(plain[k]) and est[k]["n"] == 4
    assert est["P_minus_EM_recall"]["value"] == pytest.approx(plain["P"] - plain["EM_recall"])
    with pytest.raises(ValueError, match="at least 3"):
        C.human_correlation_intervals({"m1": auto["m1"], "m2": auto["m2"]}, human)
