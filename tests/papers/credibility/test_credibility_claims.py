"""The credibility paper's claims: who each claim is about (declared model cards), strength by size, never by the
order models are listed, mechanisms that never ran, and Table 2's correlations over models with Fisher-z intervals."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scripted import ScriptedGenerator

from covlib import generation
from covlib.core import stats
from covlib.core.records import Example, Passage
from covlib.papers import credibility as C
from covlib.papers.credibility import claims as CC
from covlib.papers.credibility.improvements import completion_claims, reflection_claims
from covlib.papers.credibility.intervals import human_correlation_intervals, nonoverlapping_difference, tuning_claims
from covlib.papers.credibility.ratings import human_correlation_claims
from covlib.retrieval import BM25Retriever
from covlib.report import claims as ledger

VICUNA_7B, VICUNA_13B = "lmsys/vicuna-7b-v1.3", "lmsys/vicuna-13b-v1.3"
LLAMA_7B, LLAMA2_CHAT = "huggyllama/llama-7b", "meta-llama/Llama-2-13b-chat-hf"
PARTIAL = [True, False] * 4  # equal groups, as `reflection_sets` makes them


def _replies(correct: list[bool]) -> list[str]:
    """Reflection replies that are right exactly where `correct` says: refuse on partial, answer on complete."""
    return [C.REFUSAL if (partial == right) else "An answer [1]." for partial, right in zip(PARTIAL, correct)]


def _by_claim(records: list[dict], claim_id: str) -> list[dict]:
    return [r for r in records if r["claim"] == claim_id]


# --------------------------------------------------------------------------- the declared model cards


def test_every_paper_model_has_a_card_and_the_papers_table_1_kinds():
    for name, hub_id in C.PAPER_MODELS.items():
        card = CC.model_card(ScriptedGenerator({}, name=hub_id))
        assert card is not None and card.name == name, hub_id
    foundation = {c.name for c in CC.MODEL_CARDS if not c.instruction_tuned}
    assert foundation == {"LLaMA-7B", "LLaMA-13B", "Llama2-13B"}  # Table 1's "Foundation LLMs"
    assert {c.name for c in CC.MODEL_CARDS if c.rlhf} == {"ChatGLM2-6B", "Llama2-chat-13B", "ChatGPT"}
    served = ScriptedGenerator({}, name="openai:gpt-3.5-turbo@http://localhost:8000/v1")
    assert CC.model_card(served).name == "ChatGPT" and CC.model_card(ScriptedGenerator({}, name="x/y")) is None


def test_the_embedded_model_is_instruction_tuned_not_rlhf_and_its_size_is_read_from_its_config():
    lm = generation.load_lm("")  # nothing is generated: its config is read, its weights are not loaded
    card = CC.model_card(lm)
    assert card.name == "SmolLM2-135M-Instruct" and card.instruction_tuned and not card.rlhf
    assert "DPO" in card.training and "GPT-4" in card.training
    size, how = CC.parameter_count(lm)
    assert size == pytest.approx(0.1345, abs=1e-3) and how == "counted from the model's config"
    assert CC.size_label(size) == "0.13B" and CC.size_label(6.74) == "6.7B" and CC.size_label(13.02) == "13B"
    assert CC.parameter_count(ScriptedGenerator({}, name=VICUNA_7B)) == (6.74, "declared (the "
                                                                         "lmsys/vicuna-7b-v1.3 model card)")
    assert CC.parameter_count(ScriptedGenerator({}, name="openai:gpt-3.5-turbo@http://x"))[0] is None  # unpublished


def test_outside_says_whom_the_claim_is_about():
    lm = generation.load_lm("")
    why = CC.outside(CC.RLHF_SCOPE, lm)
    assert why.startswith("not testable here (the claim is about models tuned on human preference feedback (RLHF)")
    assert "SmolLM2-135M-Instruct" in why and "DPO" in why
    assert CC.outside(CC.INSTRUCTION_SCOPE, lm) == ""
    assert CC.outside(CC.RLHF_SCOPE, ScriptedGenerator({}, name=LLAMA2_CHAT)) == ""
    assert "pre-trained only" in CC.outside(CC.INSTRUCTION_SCOPE, ScriptedGenerator({}, name=LLAMA_7B))
    assert "no declared model card" in CC.outside(CC.RLHF_SCOPE, ScriptedGenerator({}, name="someone/model"))


# --------------------------------------------------------------------------- 9. strength from size, not list order


def test_strength_comes_from_size_not_from_the_order_models_are_listed():
    small, big = generation.load_lm(""), ScriptedGenerator({}, name=VICUNA_7B)
    replies = {small.name: _replies([True, False, False, True, False, True, False, True]),  # 4 of 8
               big.name: _replies([True] * 7 + [False])}  # 7 of 8
    runs = [reflection_claims(order, replies, PARTIAL, "hotpotqa, reflection") for order in ([small, big], [big, small])]
    first, second = (_by_claim(r, "cred-reflection-tracks-strength") for r in runs)
    assert first == second and len(first) == 1  # listing the larger model first changes nothing
    (row,) = first
    assert row["scope"].startswith("strongest vs weakest, hotpotqa, reflection, 6.7B (lmsys/vicuna-7b-v1.3) − 0.13B")
    assert row["value"] == pytest.approx(100 * (7 - 4) / 8) and row["test"] == "exact McNemar"
    assert "counted from the model's config" in row["sizes"] and "declared" in row["sizes"]
    assert CC.CLAIMS[[c.id for c in CC.CLAIMS].index("cred-reflection-tracks-strength")].is_primary(row["scope"])


def test_strength_pools_models_of_one_size_and_adds_each_step_up():
    gens = [ScriptedGenerator({}, name=n) for n in (VICUNA_13B, LLAMA_7B, LLAMA2_CHAT)] + [generation.load_lm("")]
    hits = {VICUNA_13B: [True] * 8, LLAMA2_CHAT: [True] * 6 + [False] * 2, LLAMA_7B: [True] * 4 + [False] * 4}
    hits[gens[3].name] = [False] * 8
    rows = _by_claim(reflection_claims(gens, {n: _replies(h) for n, h in hits.items()}, PARTIAL, "s"),
                     "cred-reflection-tracks-strength")
    assert [r["scope"].split(", ")[0] for r in rows] == ["strongest vs weakest"] + ["next size up"] * 2
    assert "13B (lmsys/vicuna-13b-v1.3, meta-llama/Llama-2-13b-chat-hf) − 0.13B" in rows[0]["scope"]
    assert rows[0]["value"] == pytest.approx(100 * (7 / 8 - 0)) and rows[0]["test"].startswith("sign-flip")
    assert len({r["model"] for r in rows}) == 1  # one family: one verdict


@pytest.mark.parametrize("names, why", [
    ([VICUNA_13B, LLAMA2_CHAT], "needs models of 2 or more distinct known sizes"),  # both 13B
    (["someone/unknown"], "of unknown size"),
])
def test_strength_refuses_without_two_known_sizes(names, why):
    gens = [ScriptedGenerator({}, name=n) for n in names] + ([generation.load_lm("")] if len(names) == 1 else [])
    replies = {g.name: _replies([True] * 8) for g in gens}
    (row,) = _by_claim(reflection_claims(gens, replies, PARTIAL, "s"), "cred-reflection-tracks-strength")
    assert why in row["untestable"] and row["scope"] == "strongest vs weakest, s"


# --------------------------------------------------------------------------- 7. self-reflection above chance


def test_reflection_above_chance_per_instruction_tuned_model_with_an_exact_test():
    gens = [ScriptedGenerator({}, name=n) for n in (VICUNA_7B, LLAMA_7B, VICUNA_13B, LLAMA2_CHAT)]
    replies = {VICUNA_7B: _replies([True] * 7 + [False]), LLAMA_7B: _replies([True] * 8),
               VICUNA_13B: [C.REFUSAL] * 8, LLAMA2_CHAT: [""] * 8}
    rows = {r["model"]: r for r in _by_claim(reflection_claims(gens, replies, PARTIAL, "hotpotqa, r"),
                                             "cred-reflection-above-chance")}
    est = rows[VICUNA_7B]
    assert est["value"] == pytest.approx(100 * (7 / 8 - 0.5)) and est["test"] == "exact binomial"
    assert est["p"] == pytest.approx(0.0703125) and est["n"] == 8 and est["chance"] == 0.5
    assert ledger.verdict(est)[0] == "inconclusive at this n"
    assert "(the claim is about instruction-tuned models)" in rows[LLAMA_7B]["untestable"]
    # one decision every time is a measured absence of discrimination, not a missing measurement
    constant = rows[VICUNA_13B]
    assert "untestable" not in constant and constant["value"] == 0.0 and constant["p"] == 1.0
    assert "refused 8 of 8" in constant["note"] and ledger.verdict(constant)[0] == "inconclusive at this n"
    assert "no text" in rows[LLAMA2_CHAT]["untestable"]


def test_chance_is_the_better_constant_decision_with_unequal_groups():
    partial = [True, True, True, False, False]
    gen = ScriptedGenerator({}, name=VICUNA_7B)
    replies = {gen.name: [C.REFUSAL, C.REFUSAL, C.REFUSAL, C.REFUSAL, "An answer."]}  # 4 of 5 right
    (row,) = _by_claim(reflection_claims([gen], replies, partial, "s"), "cred-reflection-above-chance")
    assert row["chance"] == pytest.approx(0.6) and row["value"] == pytest.approx(100 * (0.8 - 0.6))


# --------------------------------------------------------------------------- 10, 11a. self-completion: whom, and whether it ran


CORPUS = [Passage(f"p{i}", f"Filler {i}", f"Unrelated filler text number {i} about rowing.") for i in range(12)]
CORPUS += [Passage("ann", "Ann Lee", "Ann Lee is a film director who was born in Oslo in 1970."),
           Passage("film", "Film A", "Film A is a 1999 drama directed by Ann Lee.")]
QUESTIONS = [Example(f"q{i}", "Where was the director of Film A born?", ["Oslo"]) for i in range(4)]


def _completed(gen: ScriptedGenerator) -> list[C.Completed]:
    return C.self_complete(gen, QUESTIONS, BM25Retriever(CORPUS), k_initial=1, cap=3, max_rounds=1, progress=False)


def test_self_completion_is_tested_only_for_rlhf_models_on_which_it_ran(isolated_cache):
    asks = ScriptedGenerator(lambda p: "I further need to ask the search engine: Film A director"
                             if "I further need" in p else C.REFUSAL if C.REFUSAL in p else "Oslo [1].",
                             name=LLAMA2_CHAT)  # refuses while it may, asks, answers when it must
    never_refuses = ScriptedGenerator({}, default="Oslo [1].", name="THUDM/chatglm2-6b")
    no_query = ScriptedGenerator(lambda p: "" if "I further need" in p else C.REFUSAL,
                                 name="openai:gpt-3.5-turbo@http://localhost:1/v1")
    outside = ScriptedGenerator(lambda p: C.REFUSAL, name=VICUNA_13B)
    gens = [asks, never_refuses, no_query, outside]
    completed = {g.name: _completed(g) for g in gens}
    gain = {g.name: stats.paired_difference([0.5, 0.6, 0.7, 0.9], [0.1, 0.2, 0.3, 0.2], scale=100) for g in gens}
    rows = {r["model"]: r for r in completion_claims(gens, completed, gain, "hotpotqa, bm25", k_initial=1, cap=3,
                                                     available=100)}
    assert rows[LLAMA2_CHAT]["value"] == pytest.approx(gain[LLAMA2_CHAT]["value"]) and "untestable" not in rows[LLAMA2_CHAT]
    assert rows[LLAMA2_CHAT]["refused"] == 4 and rows[LLAMA2_CHAT]["asked"] == 4 and rows[LLAMA2_CHAT]["available"] == 100
    assert "refused 0 of 4 questions, so self-completion never ran" in rows["THUDM/chatglm2-6b"]["untestable"]
    assert "no completion round yielded a search query" in rows[no_query.name]["untestable"]
    assert "(the claim is about models tuned on human preference feedback (RLHF)" in rows[VICUNA_13B]["untestable"]
    assert "no preference tuning" in rows[VICUNA_13B]["untestable"]


def test_the_embedded_model_is_outside_the_self_completion_claim(isolated_cache):
    lm = generation.load_lm("")
    done = [C.Completed("q", None, "Oslo", refused=True, rounds=1, queries=[["x"]])]  # it ran: still outside
    (row,) = completion_claims([lm], {lm.name: done}, {lm.name: stats.paired_difference([1.0, 0.5], [0.0, 0.1])},
                               "hotpotqa", k_initial=5, cap=10)
    assert ledger.verdict(row) == ("not testable here", row["untestable"])
    assert "SmolLM2-135M-Instruct" in row["untestable"] and "not count as RLHF" in row["untestable"]


# --------------------------------------------------------------------------- 7. Table 1: instruction-tuned vs foundation


def _rows(f1: list[float]) -> list[dict]:
    return [dict(question_id=f"q{i}", precision=v, recall=v, f1=v, sc_cited=v, sc_all=v, cit_precision=v,
                 cit_recall=v, em_recall=1.0) for i, v in enumerate(f1)]


def test_instruction_tuned_against_foundation_models_by_their_cards():
    gens = [ScriptedGenerator({}, name=n) for n in (VICUNA_7B, LLAMA_7B, LLAMA2_CHAT, "someone/model")]
    rows = {VICUNA_7B: _rows([0.5, 0.6, 0.4, 0.8, 0.7]), LLAMA2_CHAT: _rows([0.7, 0.8, 0.6, 0.6, 0.9]),
            LLAMA_7B: _rows([0.1, 0.0, 0.2, 0.1, 0.0]), "someone/model": _rows([1.0] * 5)}
    records = tuning_claims(gens, rows, "hotpotqa, 5 references", seed=0)
    assert [r["scope"].split(", ")[0] for r in records] == ["F1", "R", "P", "SC", "CitP", "CitR"]
    primary = records[0]
    tuned = (np.array([0.5, 0.6, 0.4, 0.8, 0.7]) + np.array([0.7, 0.8, 0.6, 0.6, 0.9])) / 2
    assert primary["value"] == pytest.approx(100 * (tuned - np.array([0.1, 0.0, 0.2, 0.1, 0.0])).mean())
    assert "instruction-tuned: lmsys/vicuna-7b-v1.3, meta-llama/Llama-2-13b-chat-hf" in primary["scope"]
    assert "no model card (kind unknown): someone/model" in primary["scope"]  # left out, and said so
    claim = CC.CLAIMS[[c.id for c in CC.CLAIMS].index("cred-instruction-beats-foundation")]
    assert claim.is_primary(primary["scope"]) and not claim.is_primary(records[1]["scope"])
    (alone,) = tuning_claims([generation.load_lm("")], {generation.EMBEDDED_NAME: _rows([0.5] * 5)}, "hotpotqa")
    assert "foundation: none" in alone["untestable"] and claim.is_primary(alone["scope"])


# --------------------------------------------------------------------------- 5, 7. Table 2 over models


AUTO = {"m1": {"P": 80, "R": 70, "EM_recall": 10}, "m2": {"P": 50, "R": 30, "EM_recall": 90},
        "m3": {"P": 10, "R": 5, "EM_recall": 50}, "m4": {"P": 60, "R": 40, "EM_recall": 40},
        "m5": {"P": 40, "R": 45, "EM_recall": 60}}
HUMAN = {"m1": {"HPrec": 75, "HRec": 70}, "m2": {"HPrec": 50, "HRec": 25}, "m3": {"HPrec": 0, "HRec": 0},
         "m4": {"HPrec": 55, "HRec": 45}, "m5": {"HPrec": 35, "HRec": 40}}


def _fisher(r: float, n: int) -> tuple[float, float]:
    z, half = np.arctanh(r), 1.959964 / np.sqrt(n - 3)
    return float(np.tanh(z - half)), float(np.tanh(z + half))


def test_correlations_over_models_have_fisher_z_intervals_and_the_model_count():
    est = human_correlation_intervals(AUTO, HUMAN)
    for key in ("P", "R", "EM_recall"):
        assert est[key]["n"] == 5 and est[key]["test"] == "Pearson, Fisher-z"
        assert (est[key]["low"], est[key]["high"]) == pytest.approx(_fisher(est[key]["value"], 5), abs=1e-6)
    diff = stats.correlation_difference([70, 30, 5, 40, 45], [10, 90, 50, 40, 60], [70, 25, 0, 45, 40])
    assert est["R_minus_EM_recall"]["value"] == pytest.approx(est["R"]["value"] - est["EM_recall"]["value"])
    assert (est["R_minus_EM_recall"]["low"], est["R_minus_EM_recall"]["high"]) == pytest.approx((diff["low"], diff["high"]))
    three = human_correlation_intervals({m: AUTO[m] for m in ("m1", "m2", "m3")}, HUMAN)
    assert three["R"]["n"] == 3 and np.isnan(three["R"]["low"])  # 3 models: a value, no interval


def test_zou_for_correlations_sharing_no_variable():
    rng = np.random.default_rng(0)
    a, b, c, d = rng.normal(size=(4, 12))
    b, d = a + b, c + 0.5 * d
    shared = nonoverlapping_difference(a, b, c, b)  # sharing b after all: the overlapping case
    assert (shared["low"], shared["high"]) == pytest.approx((stats.correlation_difference(a, c, b)["low"],
                                                             stats.correlation_difference(a, c, b)["high"]))
    same = nonoverlapping_difference(a, b, a, b)  # one correlation against itself: fully dependent, so only the
    r, lo, hi = same["r_first"]["value"], same["r_first"]["low"], same["r_first"]["high"]  # interval's skew is left
    assert same["value"] == 0 and (same["low"], same["high"]) == pytest.approx((-abs((r - lo) - (hi - r)),
                                                                                abs((r - lo) - (hi - r))))
    far = nonoverlapping_difference(a, b, c, d)
    assert far["low"] < far["value"] < far["high"] and far["n"] == 12


def test_human_correlation_claims_record_both_correlations_or_say_why_not():
    rows = human_correlation_claims(AUTO, HUMAN, "hotpotqa, 5 references")
    assert [r["scope"].split(", ")[0] for r in rows] == ["recall", "precision"]
    recall = rows[0]
    assert recall["r_key_facts"]["n"] == recall["r_em_recall"]["n"] == recall["n"] == 5
    assert recall["value"] == pytest.approx(recall["r_key_facts"]["value"] - recall["r_em_recall"]["value"])
    assert "r(key-fact R, human recall) = " in recall["note"] and "5 models, Fisher-z" in recall["note"]
    claim = CC.CLAIMS[[c.id for c in CC.CLAIMS].index("cred-human-correlation")]
    assert claim.is_primary(recall["scope"]) and not claim.is_primary(rows[1]["scope"])
    (few,) = human_correlation_claims(AUTO, {m: HUMAN[m] for m in ("m1", "m2", "m3")}, "hotpotqa")
    assert few["untestable"].startswith("not testable with fewer than 4 rated models (3 rated: m1, m2, m3)")
    (none,) = human_correlation_claims(AUTO, None, "hotpotqa")
    assert "no human ratings" in none["untestable"] and claim.is_primary(none["scope"])


def test_human_correlation_claims_keep_their_note_and_the_judge_line_notebook_04_gives():
    rows = human_correlation_claims(AUTO, HUMAN, "hotpotqa", note="judge overlap: AUC 0.62")  # once crashed: note twice
    assert all(r["note"].startswith("r(key-fact") and r["note"].endswith("; judge overlap: AUC 0.62") for r in rows)


# --------------------------------------------------------------------------- the ledger reads them: one verdict each


def test_the_ledger_gives_one_verdict_per_claim_and_model(tmp_path):
    small, big = generation.load_lm(""), ScriptedGenerator({}, name=VICUNA_13B)
    replies = {small.name: _replies([False] * 2 + [True] * 6), big.name: _replies([True] * 8)}
    records = reflection_claims([big, small], replies, PARTIAL, "hotpotqa, reflection")
    (tmp_path / "07_reflection_completion.json").write_text(json.dumps(
        {"metrics": {"claims": records}, "params": {"profile": "smoke"}}))
    rows = [r for r in ledger.collect(ledger.read_results(tmp_path), CC.CLAIMS) if r["notebook"] == "07_reflection_completion"]
    strength = [r for r in rows if r["id"] == "cred-reflection-tracks-strength"]
    assert [r["role"] for r in strength] == ["primary"] and strength[0]["verdict"] == "inconclusive at this n"
    chance = {r["model"]: r for r in rows if r["id"] == "cred-reflection-above-chance"}
    assert chance[big.name]["verdict"] == "supported"  # 8 of 8 against 50%: p = 0.0078
    assert chance[small.name]["role"] == "primary" and chance[small.name]["n"] == 8
    for c in CC.CLAIMS:
        assert c.quote and (c.paper_effect is None) == (not c.effect_source), c.id


def test_primaries_match_the_scopes_the_notebooks_record():
    claim = {c.id: c for c in CC.CLAIMS}
    noise = claim["cred-noise-lowers-recall"]
    assert noise.is_primary("hotpotqa, 5 vs 10 references, 2 gold + noise, key facts: agents, v1")  # the paper's doubling
    assert not noise.is_primary("hotpotqa, 2 vs 10 references, 2 gold + noise, key facts: agents")  # fewest vs most
    for cid in ("cred-complete-beats-partial", "cred-partial-beats-closed", "cred-self-completion-helps",
                "cred-reflection-above-chance"):
        assert claim[cid].is_primary("hotpotqa, 5 references, key facts: agents"), cid
    assert {c.notebook for c in CC.CLAIMS} == {"04_credibility_models", "05_knowledge_precision",
                                               "06_knowledge_recall", "07_reflection_completion", ""}
    assert all(c.untestable for c in CC.CLAIMS if not c.notebook)  # no run here can: the ledger says why


def test_a_raw_judge_counted_difference_is_shown_not_counted(tmp_path):
    """Raw key-fact F1 counts the judge's decisions, whose bias differs between the arms' answers: a self-completion
    or instruction-tuning row that reads it is judge-bound, not a verdict."""
    est = stats.paired_difference([1.0] * 30 + [0.0] * 10, [0.0] * 30 + [0.0] * 10, scale=100)
    rec = CC.estimate("cred-self-completion-helps", "hotpotqa", est, "key-fact F1 points", model="m",
                      judge_bound=CC.JUDGE_BOUND)
    (tmp_path / "07_reflection_completion.json").write_text(json.dumps({"metrics": {"claims": [rec]}}))
    (row,) = [r for r in ledger.collect(ledger.read_results(tmp_path), CC.CLAIMS) if r["id"] == rec["claim"]]
    assert est["p"] < 1e-6 and row["verdict"] == "not testable here" and not row["counted"]
    assert row["reason"].startswith("judge-bound, not counted (raw key-fact and citation metrics")
