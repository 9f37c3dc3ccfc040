"""CoV-RAG's claims as the ledger reads them (issue 33, items 6, 7, 11a, 14): the paper's sentences verbatim, what
a run records when the step a claim is about never ran, Table 4's and Table 3's comparisons, and §2.2's two stages."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from covlib.core import paths, stats
from covlib.core.records import Example, Passage
from covlib.papers import covrag as C
from covlib.papers.covrag import claims
from covlib.retrieval import BM25Retriever
from covlib.report import claims as ledger
from scripted import ScriptedGenerator

PAPER_TEXT = Path(paths.data_dir()).parent / "papers" / "000_a5ded85f1c634e2b.txt"

# --------------------------------------------------------------------------- the claims as data


def test_covrag_claims_quote_the_paper_verbatim_and_declare_their_headline_setting():
    if not PAPER_TEXT.is_file():
        pytest.skip(f"the paper's text is not at {PAPER_TEXT}")
    text = PAPER_TEXT.read_text(encoding="utf-8")
    ours = {c.id: c for c in claims.CLAIMS}
    assert set(ours) == {"covrag-beats-qa-only", "covrag-multi-round-beats-single", "covrag-revision-raises-ref-acc",
                         "covrag-col-beats-no-col", "covrag-s-beats-qa-only", "covrag-gpt4-ranking"}
    assert claims.CLAIMS[0].id == "covrag-beats-qa-only"  # the paper's headline (Table 2) comes first
    assert ours["covrag-beats-qa-only"].primary == "multi-iteration accuracy"
    for c in ours.values():
        assert c.quote in text, c.id
        assert c.primary and c.paper_effect and c.effect_source and c.full_n, c.id
        assert c.full_n == 400, c.id  # the paper's 400 per dataset, as notebooks 09-11 declare it
    assert ours["covrag-col-beats-no-col"].primary == "multi-iteration accuracy"
    assert ours["covrag-s-beats-qa-only"].primary == "single-iteration accuracy"
    assert ours["covrag-gpt4-ranking"].primary == "Correctness"
    gone = {"covrag-finetune-raises-judgment", "covrag-multi-round-ge-single"}
    assert not gone & {c.id for c in claims.CLAIMS}
    for nb in ("08_covrag_verifier", "09_covrag_iterations", "10_covrag_finetune", "11_covrag_judge"):
        source = (paths.code_root() / "notebooks" / f"{nb}.py").read_text(encoding="utf-8")
        assert not any(old in source for old in gone), nb


# --------------------------------------------------------------------------- 11a: σ never fired

CORPUS = [
    Passage("beorn", "Beorn", "Beorn is a skin-changer in The Hobbit who can turn into a great black bear."),
    Passage("smaug", "Smaug", "Smaug is a dragon who guards the treasure of the Lonely Mountain."),
    Passage("princeton", "Princeton Tigers", "The Tigers of Princeton hold the record number of titles in the sport."),
    Passage("alabama", "Alabama Crimson Tide", "Alabama has won 13 national championships in college football."),
    Passage("rutgers", "Rutgers", "Rutgers played Princeton in the first college football game in 1869."),
    Passage("bees", "Bees", "Bees make honey and live in hives."),
]
EXAMPLES = [
    Example("q1", "who turns into a bear in the hobbit", ["Beorn"]),
    Example("q2", "who has won the most college football national champions", ["Princeton"]),
    Example("q3", "which dragon guards the lonely mountain", ["Smaug"]),
]
FIRES = ('{"1": {"reference_correctness": 0.2}, "2": {"correctness": 0.1, "citation_accuracy": 0.5, '
         '"truthfulness": 0.5, "bias": 0.9, "conciseness": 0.5}, "3": "false", '
         '"4": "Which team holds the record number of titles, the Tigers?"}')
QUIET = ('{"1": {"reference_correctness": 0.9}, "2": {"correctness": 0.9, "citation_accuracy": 0.9, '
         '"truthfulness": 0.9, "bias": 0.1, "conciseness": 0.9}, "3": "true", "4": ""}')


def _lm(verification: str, name: str = "scripted") -> ScriptedGenerator:
    def reply(prompt: str) -> str:
        if prompt.startswith("#verification-Task#"):
            return verification if '"answer": Alabama' in prompt else QUIET
        if "Reference [1]: Princeton" in prompt:
            return "Princeton [1]."
        if "bear" in prompt:
            return "Beorn [1]."
        if "dragon" in prompt:
            return "Smaug [1]."
        return "Alabama [1]."
    return ScriptedGenerator(reply, name=name)


def _run(verification: str, max_rounds: int = 1, chain: bool = True):
    return C.cov_rag(_lm(verification), EXAMPLES, BM25Retriever(CORPUS), k=2, max_rounds=max_rounds, chain=chain)


def test_no_revision_names_the_counts_when_sigma_never_fired():
    unparsed = _run("I think the answer is wrong, search for Princeton.")  # the verifier's output does not parse
    why = C.no_revision(unparsed)
    assert why == ("σ fired on 0 of 3 questions (the verifier's output parsed on 2 of 3): the multi-round run is the "
                   "single-round run")
    quiet = C.no_revision(_run(QUIET), "no query was revised")
    assert quiet == "σ fired on 0 of 3 questions (the verifier's output parsed on 3 of 3): no query was revised"
    zero = C.no_revision(_run(FIRES, max_rounds=0))  # σ fired, but nothing may be re-retrieved
    assert zero.startswith("σ fired on 1 of 3 questions") and "max_rounds=0" in zero
    assert C.no_revision(_run(FIRES)) is None  # one question re-retrieved: the claim is testable
    assert C.no_revision([]).startswith("σ fired on 0 of 0")


def test_a_claim_whose_step_never_ran_is_recorded_not_testable_and_the_ledger_says_why():
    records = _run(QUIET)
    flags = C.question_flags(records)
    comparison = C.revision_comparison("covrag-multi-round-beats-single", "NQ, BM25 over test, max_rounds=1", records,
                                       flags["multi"], flags["single"], "accuracy points")
    rec = claims.record(comparison, model="scripted")
    assert rec["untestable"] == C.no_revision(records) and "value" not in rec
    (row,) = [r for r in ledger.collect({"09_covrag_iterations": {"metrics": {"claims": [rec]}}}, claims.CLAIMS)
              if r["id"] == "covrag-multi-round-beats-single"]
    assert row["role"] == "primary" and row["verdict"] == "not testable here" and "σ fired on 0 of 3" in row["reason"]
    # what the old code recorded instead: an estimate of 0 (0 better, 0 worse), read as "inconclusive at this n"
    est = claims.estimate("covrag-multi-round-beats-single", "NQ",
                          stats.paired_difference(flags["multi"], flags["single"], scale=100), "accuracy points")
    assert (est["better"], est["worse"]) == (0, 0) and ledger.verdict(est)[0] == "inconclusive at this n"
    # σ re-retrieved a question: an estimate, paired, exact McNemar
    fired = _run(FIRES)
    f = C.question_flags(fired)
    live = C.revision_comparison("covrag-multi-round-beats-single", "NQ", fired, f["multi"], f["single"], "points")
    assert live["est"]["test"] == "exact McNemar" and (live["est"]["better"], live["est"]["worse"]) == (1, 0)


# --------------------------------------------------------------------------- Table 4: w/ CoL against w/o CoL


def _by_scope(comparisons):
    return {c["scope"].split(", ")[0] + ("" if c["claim"] == "covrag-col-beats-no-col" else " (qa-only)"): c
            for c in comparisons if c["claim"] != "covrag-beats-qa-only"}


def test_finetune_comparisons_are_primary_on_multi_iteration_accuracy_with_jdg_on_both_judged():
    with_col = _run(FIRES)  # σ fires on the football question, the re-retrieved answer is right
    without_col = C.cov_rag(_lm("no json here"), EXAMPLES, BM25Retriever(CORPUS), k=2, max_rounds=1, chain=False)
    qa_only = C.cov_rag(ScriptedGenerator(lambda p: "no json" if p.startswith("#verification-Task#") else "Nobody."),
                        EXAMPLES, BM25Retriever(CORPUS), k=2, max_rounds=1)
    comps = C.finetune_comparisons({C.M1: qa_only, C.WITHOUT_COL: without_col, C.WITH_COL: with_col}, "NQ test")
    assert [c["scope"] for c in comps] == [
        "multi-iteration accuracy, NQ test", "single-iteration accuracy, NQ test",
        "judgment accuracy on the questions both judged, NQ test", "Dlt, NQ test", "multi-iteration accuracy, NQ test",
        "single-iteration accuracy, NQ test"]
    assert [c["claim"] for c in comps] == (["covrag-col-beats-no-col"] * 4
                                           + ["covrag-beats-qa-only", "covrag-s-beats-qa-only"])
    assert [c["baseline"] for c in comps] == [C.WITHOUT_COL] * 4 + [C.M1] * 2
    headline = comps[4]["est"]  # CoV-RAG's multi-iteration answer against the QA-only adapter's: the paper's Table 2
    assert headline["test"] == "exact McNemar" and (headline["better"], headline["worse"], headline["n"]) == (3, 0, 3)
    by = _by_scope(comps)
    mi = by["multi-iteration accuracy"]["est"]
    assert mi["test"] == "exact McNemar" and (mi["better"], mi["worse"], mi["n"]) == (1, 0, 3)
    assert mi["value"] == pytest.approx(100 / 3) and mi["p"] == 1.0 and "note" not in mi
    assert (by["single-iteration accuracy"]["est"]["better"], by["single-iteration accuracy"]["est"]["worse"]) == (0, 0)
    jdg = by["judgment accuracy on the questions both judged"]["est"]
    assert jdg["n"] == 2 and "2 of 3 questions judged" in jdg["note"]  # the football verification failed to parse
    assert by["Dlt"]["est"]["n"] == 3
    qa = by["single-iteration accuracy (qa-only)"]["est"]  # CoV-RAG-S right on bear and dragon, the QA-only on none
    assert (qa["better"], qa["worse"]) == (2, 0)
    recs = [claims.record(c, model="w/ CoL") for c in comps]
    rows = [r for r in ledger.collect({"10_covrag_finetune": {"metrics": {"claims": recs}}}, claims.CLAIMS)
            if r["id"] == "covrag-col-beats-no-col"]
    assert [r["role"] for r in rows] == ["primary", "secondary", "secondary", "secondary"]
    assert rows[0]["scope"].startswith("multi-iteration accuracy")

    # neither adapter re-retrieved, and no question judged by both: Dlt and Jdg are not testable, with the counts
    quiet = _run(QUIET)
    never = C.cov_rag(ScriptedGenerator(lambda p: "no json" if p.startswith("#verification-Task#") else "Beorn [1]."),
                      EXAMPLES, BM25Retriever(CORPUS), k=2, max_rounds=1, chain=False)
    by = _by_scope(C.finetune_comparisons({C.WITHOUT_COL: never, C.WITH_COL: quiet}, "NQ test"))
    assert "covrag-s-beats-qa-only" not in {c["claim"] for c in by.values()}  # M1 did not run
    assert by["Dlt"]["untestable"].startswith("σ fired on 0 (w/ CoL) and 0 (w/o CoL) of 3 questions, none re-retrieved")
    assert "w/ CoL 3 of 3, w/o CoL 0 of 3" in by["judgment accuracy on the questions both judged"]["untestable"]
    # Mi is Si here: not a second test of the same comparison, but "not testable" with the counts (item 11a)
    assert by["multi-iteration accuracy"]["untestable"].startswith("σ fired on 0 (w/ CoL) and 0 (w/o CoL) of 3")
    assert "the multi-iteration run is the single-iteration run" in by["multi-iteration accuracy"]["untestable"]
    # M1 ran, but the w/ CoL adapter never re-retrieved: CoV-RAG is CoV-RAG-S, so the headline (Table 2) is "not
    # testable here" with the counts, not a second copy of covrag-s-beats-qa-only's comparison
    comps = C.finetune_comparisons({C.M1: qa_only, C.WITHOUT_COL: never, C.WITH_COL: quiet}, "NQ test")
    (headline,) = [c for c in comps if c["claim"] == "covrag-beats-qa-only"]
    assert headline["untestable"].startswith("σ fired on 0 of 3 questions") and "est" not in headline
    assert "covrag-s-beats-qa-only's comparison" in headline["untestable"]
    assert [c["est"]["test"] for c in comps if c["claim"] == "covrag-s-beats-qa-only"] == ["exact McNemar"]
    recs = [claims.record(c, model="w/ CoL") for c in comps]
    (row,) = [r for r in ledger.collect({"10_covrag_finetune": {"metrics": {"claims": recs}}}, claims.CLAIMS)
              if r["id"] == "covrag-beats-qa-only"]
    assert row["verdict"] == "not testable here" and "σ fired on 0 of 3" in row["reason"]
    with pytest.raises(ValueError, match="same questions"):
        C.finetune_comparisons({C.WITHOUT_COL: quiet[:2], C.WITH_COL: quiet}, "x")


# --------------------------------------------------------------------------- Table 3: the GPT-4 ranking


def test_table3_comparisons_are_untestable_with_the_stand_in_judge_and_paired_with_a_named_one():
    per_question = {"Correctness": {"RAG": [2, 3, 2, 3], "CoV, single iteration": [1, 1, 3, 2],
                                    "CoV, multi-iteration": [1, 2, 1, 1]},
                    "Truthfulness": {"RAG": [1, 1], "CoV, single iteration": [2, 2], "CoV, multi-iteration": [3, 3]},
                    "Citation Accuracy": {"RAG": [], "CoV, single iteration": []}}
    ranked = {"Correctness": 4, "Truthfulness": 2, "Citation Accuracy": 0}
    stand_in = C.table3_comparisons(per_question, ranked, "SmolLM2", stand_in=True, n=6)
    assert all(c["untestable"].startswith("the claim is GPT-4's ranking; the judge here is the offline stand-in "
                                          "SmolLM2 (not GPT-4), which ranked ") for c in stand_in)
    assert "ranked 4 of 6 questions completely" in stand_in[0]["untestable"]  # even a finished ranking is not GPT-4's
    named = C.table3_comparisons(per_question, ranked, "big-judge", stand_in=False, n=6)
    assert [c["scope"] for c in named] == [
        "Correctness, CoV-RAG (CoV, multi-iteration) vs RAG, judge big-judge",
        "Truthfulness, CoV-RAG (CoV, multi-iteration) vs RAG, judge big-judge",
        "Citation Accuracy, CoV-RAG-S (CoV, single iteration) vs RAG, judge big-judge"]
    assert claims.claim("covrag-gpt4-ranking").is_primary(named[0]["scope"])
    correct = named[0]["est"]
    assert correct["value"] == pytest.approx(1.25) and correct["n"] == 4 and correct["test"].startswith("sign-flip")
    assert named[1]["est"]["value"] == pytest.approx(-2.0)  # CoV ranked worse on truthfulness here
    assert named[2]["untestable"] == "the judge big-judge finished no ranking of the 6 questions (0 parsed)"
    rec = claims.record(stand_in[0], model="cov")
    assert ledger.verdict(rec)[0] == "not testable here"


# --------------------------------------------------------------------------- §2.2: M1 first, then the verifiers

TRAIN = [Example("t1", "which dragon guards the lonely mountain", ["Smaug"]),
         Example("t2", "what do bees make", ["honey"])]


@pytest.mark.training
def test_two_stages_train_m1_first_and_the_verifiers_judge_m1s_predictions(tmp_path, isolated_cache):
    from covlib import generation
    from covlib.generation import training

    base = generation.load_lm("")
    refs = [[h.passage for h in hits] for hits in BM25Retriever(CORPUS).search_batch([e.question for e in TRAIN], k=2)]
    stages = C.train_two_stages(base, "", TRAIN, refs, test_questions=["Who wrote Hamlet?"], adapters_dir=tmp_path,
                                prefix="t-", max_new_tokens=6, rank=2, alpha=4, max_steps=1, batch_size=2,
                                learning_rate=2e-3, max_length=128, seed=0, progress=False)
    assert list(stages.cards) == [C.M1, C.WITHOUT_COL, C.WITH_COL]
    m1 = stages.cards[C.M1]
    assert m1["stage"].startswith("1") and m1["settings"]["n_train"] == len(TRAIN)  # stage 1: the QA pairs alone
    assert stages.pairs[C.M1] == C.qa_pairs(TRAIN, refs)
    assert stages.m1.name.endswith("+adapter:t-qa-only") and stages.m1.adapter_files
    assert Path(m1["folder"]) == tmp_path / "t-qa-only" and (tmp_path / "t-qa-only" / "adapter_config.json").is_file()
    # M1's predictions are M1's answers (served again from the cache, keyed by the adapter's fingerprint) ...
    again = C.answer_batch(generation.load_lm("", adapter=m1["folder"]), [e.question for e in TRAIN], refs, 6, False)
    assert again == stages.predictions
    # ... and they are what the verification pairs judge, for both stage-2 adapters
    for ts, chain in ((stages.with_chain, True), (stages.without_chain, False)):
        assert ts.labels == "gold" and len(ts.verification) == len(TRAIN)
        for (prompt, target), ex, r, pred in zip(ts.verification, TRAIN, refs, stages.predictions):
            assert prompt == C.verification_prompt(ex.question, pred, r)
            wanted = C.gold_verification(ex.question, pred, r, ex.answers)
            assert json.loads(target)["3"] == wanted.judgment
    for name, ts in ((C.WITHOUT_COL, stages.without_chain), (C.WITH_COL, stages.with_chain)):
        card = stages.cards[name]
        assert card["stage"].startswith("2") and card["predictions_from"] == stages.m1.name
        assert card["m1_adapter_files"] == stages.m1.adapter_files
        assert stages.pairs[name] == ts.multitask() and card["settings"]["n_train"] == 2 * len(TRAIN)
        assert training.read_card(card["folder"])["predictions_from"] == stages.m1.name
    assert set(json.loads(stages.without_chain.verification[0][1])) == {"3", "4"}
    with pytest.raises(ValueError, match="test question"):
        C.train_two_stages(base, "", TRAIN, refs, test_questions=["What do bees make?"], adapters_dir=tmp_path,
                           prefix="leak-", max_steps=1)
    assert not (tmp_path / "leak-qa-only").exists()  # refused before any training


def test_notebook_10_trains_in_two_stages_and_records_the_new_claims():
    """The notebook's code calls the two stages and records Table 4's and Fig. 3's claims, not the judgment one."""
    source = (paths.code_root() / "notebooks" / "10_covrag_finetune.py").read_text(encoding="utf-8")
    assert "C.train_two_stages(" in source and "C.finetune_comparisons(" in source
    assert "not a fine-tuned M1" not in source and "covrag-finetune-raises-judgment" not in source
    assert not re.search(r"answer_batch\(base,", source)  # the training predictions are M1's, not the base model's


# --------------------------------------------------------------------------- what notebooks 09-11 record in smoke
# Called by tests/test_notebooks.py on the smoke runs' metrics (one papermill run per notebook, shared there).
