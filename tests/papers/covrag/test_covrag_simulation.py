"""CoV-RAG's simulated model (issue 48): every prompt kind answered in the format the real parser reads, and on the
real NQ questions, the offline corpus and the package's own methods, sim:paper gives back the planted effects
within their intervals while sim:null shows none."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from covlib.core import stats
from covlib.generation import load_lm
from covlib.core.claim import SIM_LABEL
from covlib.generation.simulated import SimLM
from covlib.papers import covrag as C
from covlib.papers.covrag import claims, planted, simulation as sim
from covlib.papers.covrag.notebook import NOTEBOOKS
from covlib.retrieval import open_corpus, search_passages
from covlib.runs import session
from test_covrag_setup import NB10, NB11


@pytest.fixture(scope="module")
def corpus():
    try:
        sets = {"NQ": C.load_datasets(sizes={"NQ": 400, "WebQ": 1})["NQ"]}  # the claims' primary setting: NQ, 400
    except Exception as err:  # the shared data folder is absent
        pytest.skip(f"real data not found: {err}")
    passages, retriever, _ = open_corpus("")
    return sets, passages, retriever, sim.build_world(sets, [], passages, retriever, 5)  # one world, every test


def session_like(corpus, notebook="09_covrag_iterations", k=5, **data):
    sets, passages, retriever, world = corpus
    return SimpleNamespace(sets=sets, passages=passages, retriever=retriever, k=k, notebook=notebook,
                           data={"covrag_world": world, **data}, examples=[ex for exs in sets.values() for ex in exs])


def taught(S, spec, adapter=""):
    lm = SimLM(spec, variant=adapter)
    sim.teach(S, lm)
    return lm


@pytest.fixture(scope="module")
def S(corpus):
    return session_like(corpus)


# --------------------------------------------------------------------------- formats the real parsers read


def test_every_prompt_kind_is_answered_in_the_format_its_parser_reads(S):
    lm = taught(S, "sim:paper/Llama2-13b")
    w, ex = sim.session_world(S), S.sets["NQ"][0]
    first = sim.qa_prompt_of(w, ex)
    refs = [h.passage for h in S.retriever.search_batch([ex.question], k=S.k)[0]]
    assert first == C.qa_prompt(ex.question, refs)  # the world's round-0 prompt is the notebooks' own
    answer = lm.generate([first])[0][0].text
    assert C.is_correct(answer, ex.answers) == sim.right_first(lm, planted.role("paper", "Llama2-13b"), ex, w)
    closed = lm.generate([C.closed_book_prompt(ex.question)])[0][0].text
    assert closed.startswith("The answer is ") and closed.endswith(".")
    v = C.verify_batch(lm, [ex.question], [answer], [refs])[0]
    assert v.parsed and v.judgment in ("true", "false") and all(x is not None for x in v.scores().values())
    with pytest.raises(ValueError, match="no simulated reply"):
        lm.generate(["Tell me a story."])  # a prompt of no kind it was taught is refused, never a blank reply
    with pytest.raises(ValueError, match="no simulated reply"):
        SimLM("sim:paper").generate([first])  # untaught: nothing answers (the notebook door teaches it)


def test_right_answers_score_right_and_wrong_ones_wrong_under_the_notebooks_metric(S):
    w = sim.session_world(S)
    r, lm = planted.role("paper", "Vicuna-13b"), taught(S, "sim:paper/Vicuna-13b")
    scoreable = [ex for ex in S.sets["NQ"] if C.is_correct(ex.answers[0], ex.answers)]
    assert len(scoreable) == 398  # two golds are "---" and ")": no answer can score right under the metric
    for ex in scoreable:
        for right in (True, False):
            text = sim.answer_text(lm, r, ex, w.first[ex.id], right, w)
            assert C.is_correct(text, ex.answers) == right, (ex.question, ex.answers, text)


def test_sigma_fires_only_on_wrong_answers_whose_references_lack_the_gold_and_the_verifier_follows_correctness(S):
    lm = taught(S, "sim:paper/Llama2-13b")
    records = C.cov_rag(lm, S.examples, S.retriever, k=S.k, max_rounds=0)
    fired = [r for r in records if r.rounds[0].fired]
    assert len(fired) > 40
    assert not any(C.is_correct(r.first_answer, r.gold) or C.references_hold_answer(r.rounds[0].references, r.gold)
                   for r in fired)
    f = C.question_flags(records)
    jdg = stats.mean_interval(f["judgment"], scale=100)
    assert jdg["low"] <= C.PAPER_TABLE4["w/ CoL"]["Jdg"] <= jdg["high"]  # Table 4's judgment accuracy, planted
    fmt = stats.mean_interval(f["format"], scale=100)
    assert fmt["low"] <= C.PAPER_TABLE4["w/ CoL"]["Fmt"] <= fmt["high"]  # Fmt 99.5: the rest in a code fence, repaired
    assert all(r.rounds[0].verification.parsed for r in records)
    null = C.cov_rag(taught(S, "sim:null"), S.sets["NQ"], S.retriever, k=S.k, max_rounds=0)
    assert abs(100 * np.mean(C.question_flags(null)["judgment"]) - 50) < 6  # judgments independent of correctness


def test_several_rounds_run_when_max_rounds_allows_them(S):
    records = C.cov_rag(taught(S, "sim:paper/ChatGLM2-6b"), S.sets["NQ"][:200], S.retriever, k=S.k, max_rounds=3)
    assert max(len(r.rounds) for r in records) == 4  # σ fired again on some re-answers, up to the cap
    assert any(r.rounds[1].query != r.question for r in records if len(r.rounds) > 1)  # the revised query retrieved


# --------------------------------------------------------------------------- the planted effects come back


@pytest.mark.parametrize("behaviour", ["paper", "null"])
def test_notebook_09s_claims_recover_the_planted_effects_and_null_shows_none(S, behaviour):
    records = C.cov_rag(taught(S, f"sim:{behaviour}/Llama2-13b"), S.sets["NQ"], S.retriever, k=S.k, max_rounds=1)
    f = C.question_flags(records)  # the claims' primary setting: NQ, 400 questions
    for claim_id, after, before in (("covrag-multi-round-beats-single", "multi", "single"),
                                    ("covrag-revision-raises-ref-acc", "reference_multi", "reference_single")):
        est = stats.paired_difference(f[after], f[before], scale=100)
        want = claims.claim(claim_id).planted_effect[0] if behaviour == "paper" else 0.0
        assert est["low"] <= want <= est["high"], (claim_id, est)
        if behaviour == "null":
            assert est["p"] > 0.05 and est["better"] + est["worse"] > 0, (claim_id, est)  # σ ran, both ways


def test_the_personas_keep_table_2s_order(S):
    w, acc = sim.session_world(S), {}
    for persona in C.PAPER_MODELS:
        lm, r = taught(S, f"sim:paper/{persona}"), planted.role("paper", persona)
        acc[persona] = np.mean([sim.right_first(lm, r, ex, w) for ex in S.sets["NQ"]])
    assert acc["Llama2-13b"] > acc["ChatGLM2-6b"] and acc["Vicuna-13b"] > acc["ChatGLM2-6b"]  # NQ: 66.0, 63.5 > 59.8


def variants_run(S, behaviour, examples):
    out = {}
    for name, slug in C.VARIANTS.items():
        lm = taught(S, f"sim:{behaviour}", adapter=f"10-full-{slug}")
        out[name] = C.cov_rag(lm, examples, S.retriever, k=S.k, max_rounds=1, chain=name != C.WITHOUT_COL)
    return out


@pytest.mark.parametrize("behaviour", ["paper", "null"])
def test_notebook_10s_planted_variants_give_back_table_4_and_table_2(corpus, behaviour):
    S10 = session_like(corpus, notebook="10_covrag_finetune")
    rows = {(c["claim"], c["scope"].split(",")[0]): c  # on NQ's 400 (notebook 10 pools NQ and WebQ: 800)
            for c in C.finetune_comparisons(variants_run(S10, behaviour, S10.sets["NQ"]), "t")}
    for claim_id in ("covrag-col-beats-no-col", "covrag-beats-qa-only", "covrag-s-beats-qa-only"):
        c = claims.claim(claim_id)
        est = rows[(claim_id, c.primary)]["est"]
        want = c.planted_effect[0] if behaviour == "paper" else 0.0
        assert est["low"] <= want <= est["high"], (claim_id, est)
    if behaviour == "paper":  # the planted variants' own rows: Table 4's judgment accuracy, w/ CoL against w/o CoL
        jdg = rows[("covrag-col-beats-no-col", "judgment accuracy on the questions both judged")]["est"]
        assert jdg["low"] <= C.PAPER_TABLE4["w/ CoL"]["Jdg"] - C.PAPER_TABLE4["w/o CoL"]["Jdg"] <= jdg["high"]


def test_the_planted_effects_follow_from_the_paper_and_each_other():
    cov, m1 = planted.role("paper", "", "10-full-qa-verify-chain"), planted.role("paper", "", "10-full-qa-only")
    no_col = planted.role("paper", "", "10-full-qa-verify-no-chain")
    mean = lambda f: (f("NQ") + f("WebQ")) / 2  # noqa: E731  (notebook 10 pools NQ and WebQ, n each)
    assert 100 * (mean(cov.multi_at) - mean(m1.single)) == pytest.approx(planted.effect("covrag-beats-qa-only"))
    assert 100 * (mean(cov.single) - mean(m1.single)) == pytest.approx(planted.effect("covrag-s-beats-qa-only"))
    col = planted.effect("covrag-col-beats-no-col")
    assert 100 * (mean(cov.multi_at) - mean(no_col.multi_at)) == pytest.approx(col)
    assert 100 * cov.gain == pytest.approx(planted.effect("covrag-multi-round-beats-single"))
    assert planted.rank_effects("paper")["Correctness"] == pytest.approx(planted.effect("covrag-gpt4-ranking"))
    for persona in C.PAPER_MODELS:  # notebook 10 as sim:paper/<persona>: each persona's own Table 2 numbers
        row = f"{persona}, simulated (planted effects), paper, adapter 10-full-qa-verify-chain"
        cov_p, m1_p = planted.role("paper", persona, "x-qa-verify-chain"), planted.role("paper", persona, "x-qa-only")
        for claim_id, ours in (("covrag-beats-qa-only", mean(cov_p.multi_at) - mean(m1_p.single)),
                               ("covrag-s-beats-qa-only", mean(cov_p.single) - mean(m1_p.single))):
            assert claims.claim(claim_id).planted_for(row) == pytest.approx(100 * ours, abs=1e-9), (persona, claim_id)
    assert set(planted.rank_effects("null").values()) == {0.0}
    assert planted.role_of("", "10_covrag_finetune") == C.M1  # notebook 10's untuned base
    assert planted.role_of("", "09_covrag_iterations") == C.WITH_COL  # the paper's CoV-RAG model
    with pytest.raises(ValueError, match="no planted variant"):
        planted.role_of("my-adapter", "08_covrag_verifier")


@pytest.mark.parametrize("behaviour", ["paper", "null"])
def test_notebook_11s_simulated_judge_ranks_as_planted(corpus, behaviour):
    S11 = session_like(corpus, notebook="11_covrag_judge")
    rag = taught(S11, f"sim:{behaviour}", "10-full-qa-only")
    cov = taught(S11, f"sim:{behaviour}", "10-full-qa-verify-chain")
    S11.data.update(rag_model=rag, cov_model=cov)
    judge = taught(S11, f"sim:{behaviour}/GPT-4")
    examples = S11.sets["NQ"]
    qs, golds = [ex.question for ex in examples], [ex.answers for ex in examples]
    refs = [[h.passage for h in hs] for hs in S11.retriever.search_batch(qs, k=S11.k)]
    records = C.cov_rag(cov, examples, S11.retriever, k=S11.k, max_rounds=1)
    answers = {"RAG": C.answer_batch(rag, qs, refs), "CoV, single iteration": [r.first_answer for r in records],
               "CoV, multi-iteration": [r.answer for r in records]}
    others = C.rank_answers(judge, "others", qs, answers, ["Correctness", "Truthfulness", "Conciseness"], golds=golds)
    two = {k: answers[k] for k in ("RAG", "CoV, single iteration")}
    citation = C.rank_answers(judge, "citation", qs, two, ["Citation Accuracy"], references=refs)
    per_question = {**C.rank_values(others, list(answers)), **C.rank_values(citation, list(two))}
    assert all(len(v["RAG"]) == len(qs) for v in per_question.values())  # every ranking parsed, mapped back
    comparisons = C.table3_comparisons(per_question, {c: len(qs) for c in per_question}, judge.name, False, len(qs))
    for c in comparisons:
        criterion = c["scope"].split(",")[0]
        want = planted.rank_effects(behaviour)[criterion]
        assert c["est"]["low"] <= want <= c["est"]["high"], c
    primary = comparisons[0]["est"]
    assert (primary["value"] > 0) if behaviour == "paper" else (primary["p"] > 0.05)


# --------------------------------------------------------------------------- through the notebook door


def test_the_door_teaches_notebook_10s_planted_variants_and_11s_simulated_judge(scratch_root, tmp_path):
    S10 = session.start(NOTEBOOKS["10"], **{**NB10, "model": "sim:paper"})  # a TypeError before (not an in-process LM)
    variants = {lm.variant for lm in S10.planted_variants}
    assert variants == {f"10-smoke-{slug}" for slug in C.VARIANTS.values()}
    refs = search_passages(S10.retriever, [ex.question for ex in S10.train], S10.k)
    stages = C.train_two_stages(S10.base, "sim:paper", S10.train, refs, test_questions=[], adapters_dir=tmp_path,
                                prefix="10-smoke-")
    assert "no training ran" in stages.planted and all(card["steps"] == 0 for card in stages.cards.values())
    assert stages.m1 is load_lm("sim:paper", adapter=str(tmp_path / "10-smoke-qa-only"))  # taught by the door
    assert len(stages.predictions) == 6 and len(stages.with_chain.verification) == 6
    S11 = session.start(NOTEBOOKS["11"], **{**NB11, "model": "sim:paper"})
    assert S11.values["ranker"] == "sim:paper/GPT-4" and S11.ranker.persona == "GPT-4"  # not the embedded stand-in
    assert S11.rag_model.variant == "10-smoke-qa-only" and S11.cov_model.variant == "10-smoke-qa-verify-chain"
    assert "covrag-rank" in S11.ranker.responders


def test_a_persona_table2_does_not_name_is_an_error_and_the_case_of_b_does_not_matter():
    with pytest.raises(ValueError, match="no simulated CoV-RAG persona 'GPT-3'"):
        planted.role("paper", "GPT-3")
    assert planted.role("paper", "Vicuna-13B") == planted.role("paper", "Vicuna-13b") != planted.role("paper", "")
    c = claims.claim("covrag-beats-qa-only")  # the credibility paper's spelling gets its own planted effect
    assert c.planted_for(f"Vicuna-13B, {SIM_LABEL}, paper") == dict(c.planted_by)["Vicuna-13b"] != c.planted_effect[0]
