"""The simulated model on the credibility notebooks' prompts (covlib.papers.credibility.simulation): every prompt kind
answered in the format the real parsers read, and on the shared HotpotQA questions, through the package's own
methods, the planted effects come back (`sim:paper`) or none does (`sim:null`)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from covlib import nli, retrieval
from covlib.core import paths, stats
from covlib.core.references import cited_sentences
from covlib.generation.simulated import SimLM
from covlib.papers import credibility as C
from covlib.papers.credibility import claims, planted, simulation
from covlib.papers.credibility.improvements import reflection_claims
from covlib.papers.credibility.notebook import NOTEBOOKS
from covlib.runs import session


@pytest.fixture(scope="module")
def questions():
    if not paths.dataset_path("hotpotqa", "hotpot_dev_distractor_sample100.jsonl").exists():
        pytest.skip(f"real data not found under {paths.data_dir()}")
    return C.load_questions("", 500, 0)


def taught(spec: str, questions) -> SimLM:
    lm = SimLM(spec)
    simulation.teach(SimpleNamespace(examples=questions), lm)
    return lm


def sets(questions, n: int = 5) -> dict[str, list]:
    return {"closed-book": [C.closed_book(ex) for ex in questions], "partial": [C.partial(ex, n) for ex in questions],
            "complete": [C.with_gold(ex, n) for ex in questions]}


def true_recall(answers, questions) -> np.ndarray:
    known = {k.example.id: k for k in simulation.known_questions(questions).values()}
    return np.array([simulation.content(a, known[ex.id])[1] for a, ex in zip(answers, questions)])


def test_every_notebook_spec_teaches_the_simulated_model_and_an_unknown_prompt_is_refused(questions):
    assert all(spec["simulate"] is simulation.teach for spec in NOTEBOOKS.values())
    lm = taught("sim:paper/Vicuna-7B", questions)
    with pytest.raises(ValueError, match="no simulated reply"):
        lm.generate(["Question: a question no notebook asked\n\nPlease write a high-quality answer."])


def test_answers_cite_the_references_shown_and_state_the_shipped_key_facts(questions):
    lm = taught("sim:paper/Vicuna-13B", questions)
    runs = C.answer_runs([lm], questions, sets(questions), progress=False)
    facts = {k.example.id: k.facts for k in simulation.known_questions(questions).values()}
    for setting, (answers, refs) in ((s, runs[(lm.name, s)]) for s in ("closed-book", "partial", "complete")):
        for answer, r in zip(answers, refs):
            found = cited_sentences(answer)
            assert found and all(1 <= i <= len(r) for s in found for i in s.citations)
            assert setting != "closed-book" or not any(s.citations for s in found)
        said = [f for a, r in zip(answers, refs) for f in facts[r.question_id] if f.rstrip(".") in a]
        assert said, setting  # key facts are stated in their shipped words


@pytest.mark.parametrize("persona", ["ChatGLM2-6B", "LLaMA-7B"])
def test_true_recall_follows_table3_in_each_reference_setting(questions, persona):
    lm = taught(f"sim:paper/{persona}", questions)
    runs = C.answer_runs([lm], questions, sets(questions), progress=False)
    want = planted.paper_rates(persona).recall
    for setting in want:
        got = stats.mean_interval(true_recall(runs[(lm.name, setting)][0], questions), scale=1)
        assert abs(got["value"] - want[setting]) < 3 * max((got["high"] - got["low"]) / 4, 0.01), (setting, got)


def test_noise_lowers_true_recall_as_planted_and_null_keeps_it(questions):
    for spec, drop in (("sim:paper/Vicuna-7B", planted.effects("cred-noise-lowers-recall")["Vicuna-7B"]),
                       ("sim:null", 0.0)):
        lm = taught(spec, questions)
        few, many = ([C.with_gold(ex, n, kind="noise") for ex in questions] for n in (5, 10))
        runs = C.answer_runs([lm], questions, {5: few, 10: many}, progress=False)
        diff = stats.paired_difference(true_recall(runs[(lm.name, 5)][0], questions),
                                       true_recall(runs[(lm.name, 10)][0], questions), scale=100)
        assert diff["low"] <= drop <= diff["high"], (spec, diff)


def test_the_judged_recall_gap_comes_back_with_sim_paper_and_not_with_sim_null(questions):
    questions = questions[:60]
    judge = nli.get_judge("overlap")  # a real judge of the library, fast; the notebooks run the trained one
    planted_gap = claims.PLANTED_BY_MODEL["cred-complete-beats-partial"]["ChatGLM2-6B"]
    for spec, want in (("sim:paper/ChatGLM2-6B", planted_gap), ("sim:null", 0.0)):
        lm = taught(spec, questions)
        chosen = {k: v for k, v in sets(questions).items() if k != "closed-book"}
        rows = C.score_runs(C.answer_runs([lm], questions, chosen, progress=False), questions,
                            C.build_key_facts("agents", questions), judge, progress=False)
        a, b = (lm.name, "complete"), (lm.name, "partial")
        rates = simulation.correction_rates(rows)  # each arm's own, measured on its answers
        est = C.corrected_difference(rows[a], rows[b], rates[a], rates[b])
        assert est["low"] <= want <= est["high"] and est["raw"]["low"] <= want <= est["raw"]["high"], (spec, est)
        assert (est["raw"]["low"] > 0) == (want > 0)  # the raw gap finds the planted one; none under null
        assert "judge_bound" not in est
        test_set = nli.evaluation.judge_rates(judge)  # one measurement for both arms: shown, not counted
        assert "not on this model's answers" in C.corrected_difference(rows[a], rows[b], test_set, test_set)["judge_bound"]


def test_reflection_refuses_at_table4_rates_and_null_is_at_chance(questions):
    groups = C.reflection_sets(questions, 5)
    partial = [s.kind == "partial" for s in groups]
    for behaviour in ("paper", "null"):
        lms = [taught(f"sim:{behaviour}/{p}", questions) for p in ("Vicuna-13B", "Llama2-chat-13B")]
        replies = {g.name: C.generate_answers(g, questions, groups, reflection=True, progress=False) for g in lms}
        for record in reflection_claims(lms, replies, partial, "hotpotqa, test")[:2]:
            want = 0.0 if behaviour == "null" else claims.PLANTED_BY_MODEL["cred-reflection-above-chance"][
                record["model"].split(",")[0]]
            assert record["low"] <= want <= record["high"], record


def test_self_completion_asks_for_the_missing_gold_paragraph_and_finds_it(questions):
    _, retriever, _ = retrieval.open_corpus("")
    lm = taught("sim:paper/Llama2-chat-13B", questions)
    done = C.self_complete(lm, questions, retriever, k_initial=3, cap=6, max_rounds=2, progress=False)
    asked = [d for d in done if d.queries]
    assert asked and all(d.unmarked == 0 for d in done)  # every reply used the paper's query marker
    titles = {t for ex in questions for t in ex.supporting_titles}
    assert sum(q in titles for d in asked for q in d.queries[0]) > len(asked) / 2  # planted: 81% of refusals
    gold = [list(ex.supporting_titles) for ex in questions]
    before = C.gold_recall([[p.title for p in d.reflected_references.paragraphs] for d in done], gold)["recall"]
    after = C.gold_recall([[p.title for p in d.references.paragraphs] for d in done], gold)["recall"]
    assert after["value"] > before["high"]


def test_the_key_fact_prompts_give_back_the_shipped_key_facts(questions):
    lm = taught("sim:paper/ChatGPT", questions[:5])
    got = C.llm_key_facts(lm, questions[:5], progress=False)
    assert [k.key_facts for k in got] == [list(k.key_facts) for k in C.build_key_facts("agents", questions[:5])]


def test_planted_refusals_give_table4_accuracy_and_f1_and_claims_declare_them():
    for persona, row in C.PAPER_TABLE4.items():
        a, b = planted.refusals(persona)
        if a < 1:  # ChatGPT's rounded Acc and F1 ask for a > 1: clipped
            assert (a + 1 - b) / 2 == pytest.approx(row[6] / 100) and 2 * a / (1 + a + b) == pytest.approx(row[7] / 100)
    for claim_id, by_model in claims.PLANTED_BY_MODEL.items():
        c = claims.claim(claim_id)
        assert any(v == pytest.approx(c.planted_effect[0], abs=0.05) for v in by_model.values()), claim_id


def test_planted_ratings_carry_table2_pearson_and_the_notebook_reads_them(questions, tmp_path):
    for behaviour in ("paper", "null"):
        lms = [taught(f"sim:{behaviour}/{p}", questions) for p in C.PAPER_MODELS]
        runs = C.answer_runs(lms, questions, {"complete": sets(questions)["complete"]}, progress=False)
        rows = [{"question_id": ex.id, "model": g.name, "answer": runs[(g.name, "complete")][0][i]}
                for g in lms for i, ex in enumerate(questions[:50])]
        path = simulation.planted_ratings(SimpleNamespace(generators=lms, examples=questions), rows, tmp_path / "r.csv")
        human = C.human_scores(C.read_ratings(path))
        known = {k.example.id: k for k in simulation.known_questions(questions).values()}
        truth = {g.name: np.mean([simulation.content(r["answer"], known[r["question_id"]]) for r in rows
                                  if r["model"] == g.name], axis=0) for g in lms}
        auto = {n: {"P": 100 * t[0], "R": 100 * t[1], "EM_recall": 100 * t[2]} for n, t in truth.items()}
        est = C.human_correlation_intervals(auto, human)
        if behaviour == "paper":
            assert est["R"]["value"] == pytest.approx(C.PAPER_PEARSON["R"], abs=0.05)
            assert est["EM_recall"]["value"] == pytest.approx(C.PAPER_PEARSON["EM_recall"], abs=0.05)
        assert est["R_minus_EM_recall"]["low"] <= (0.34 if behaviour == "paper" else 0.0) <= est["R_minus_EM_recall"]["high"]
    assert simulation.planted_ratings(SimpleNamespace(generators=lms[:3], examples=questions), rows, tmp_path / "x") is None


def test_the_notebook_door_teaches_every_paper_model(questions, monkeypatch, tmp_path):
    monkeypatch.setenv("COVLIB_DATA", str(paths.data_dir()))
    monkeypatch.setenv("COVLIB_ROOT", str(tmp_path))
    S = session.start(NOTEBOOKS["06"], profile="smoke", model="sim:paper", models="", device="cpu", questions="",
                      n_questions=500, seed=0, n_refs=5, key_facts="agents", judge="overlap", max_new_tokens=160)
    assert [g.persona for g in S.generators] == list(C.PAPER_MODELS)
    answers = C.generate_answers(S.generators[0], S.examples, [C.partial(ex, 5) for ex in S.examples], progress=False)
    assert all(cited_sentences(a) for a in answers)


def test_key_facts_written_by_the_papers_prompts_come_from_a_simulated_model_through_the_door(questions, monkeypatch,
                                                                                              tmp_path):
    monkeypatch.setenv("COVLIB_DATA", str(paths.data_dir()))
    monkeypatch.setenv("COVLIB_ROOT", str(tmp_path))  # the door's `load` asks for them before it teaches the model
    S = session.start(NOTEBOOKS["06"], profile="smoke", model="sim:paper/Vicuna-13B", models="", device="cpu",
                      questions="", n_questions=500, seed=0, n_refs=5, key_facts="llm", judge="overlap",
                      max_new_tokens=160)
    assert [f.key_facts for f in S.facts] == [list(f.key_facts) for f in C.build_key_facts("agents", S.examples)]
    assert S.facts[0].author == S.generators[0].name


def test_figures_05_and_06_caption_without_the_judges_agreement_paragraph():
    """The agreement note is a paragraph: as a one-line caption it made the figures ~9000 px wide (sim:paper runs)."""
    for name in ("05_knowledge_precision", "06_knowledge_recall"):
        source = (paths.code_root() / "notebooks" / f"{name}.py").read_text(encoding="utf-8")
        calls = [line for line in source.splitlines() if "plotting.caption(" in line]
        assert calls and not any("judge_agreement" in line for line in calls), name


def test_the_judge_correction_reads_the_simulations_own_labelled_pairs(questions):
    """The frozen test set's rates do not carry to the simulation's verbatim key facts (with the trained judge every
    arm's corrected recall snapped to 0 under sim:null): the simulation's judged pairs, labelled by what it stated,
    give the rates, and under sim:null each arm's corrected recall holds the true recall."""
    questions = questions[:120]
    judge = nli.get_judge(nli.offline_judge())
    lm = taught("sim:null", questions)
    runs = C.answer_runs([lm], questions, sets(questions), progress=False)
    rows = C.score_runs(runs, questions, C.build_key_facts("agents", questions), judge, progress=False)
    pairs = [p for key in rows for p in simulation.labelled_pairs(rows, key)]
    known = {k.example.id: k for k in simulation.known_questions(questions).values()}
    stated = sum(round(simulation.content(a, known[ex.id])[1] * len(known[ex.id].facts)) for answers, _ in runs.values()
                 for a, ex in zip(answers, questions) if C.plain_answer(a).strip())
    assert sum(p.kind == "answer" and p.label == "entailment" for p in pairs) == stated > 0  # labels: what it stated
    assert {p.extra["stratum"] for p in pairs} <= set(nli.STRATA)
    rates = simulation.correction_rates(rows)  # per run, on that run's own answers
    assert set(rates) == set(rows) and sum(r.n_pairs for run in rates.values() for r in run.values()) == len(pairs)
    assert len({run["answer"].measured_on for run in rates.values()}) == len(rows)
    for setting in ("closed-book", "partial", "complete"):
        truth = 100 * true_recall(runs[(lm.name, setting)][0], questions).mean()
        est = C.judge_corrected(rows[(lm.name, setting)], rates[(lm.name, setting)])["R_corrected"]
        assert est["low"] <= truth <= est["high"], (setting, truth, est)
    real = C.score_runs({("a model", s): (list(runs[(lm.name, s)][0]), runs[(lm.name, s)][1]) for s in ("complete", "partial")},
                        questions, C.build_key_facts("agents", questions), judge, progress=False)
    real_rates = simulation.correction_rates(real)  # a model's: 00b's, one measurement for every run
    assert {r["answer"].measured_on for r in real_rates.values()} == {nli.judge_error.TEST_SET}
    assert real_rates[("a model", "complete")]["answer"].n_pairs == nli.judge_rates(judge)["answer"].n_pairs
