"""The simulated model's core: its spec, its determinism, its refusals, and the notebook door that teaches it."""

from __future__ import annotations

import pytest

from covlib import generation
from covlib.generation.simulated import SimLM, parse_sim, with_persona
from covlib.papers.covrag import PAPER_MODELS as COVRAG_MODELS
from covlib.papers.credibility import PAPER_MODELS
from covlib.papers.credibility.claims import model_card, parameter_count
from covlib.runs import parameters, profiles, session


def _coin(prompt: str, lm: SimLM, rng) -> str | None:
    """Answers prompts that start with 'Q:': heads or tails from the sample's stream, and the question's own draw."""
    if not prompt.startswith("Q:"):
        return None
    return f"{'heads' if rng.random() < 0.5 else 'tails'} {lm.draw(prompt[2:].strip()):.6f}"


@pytest.mark.parametrize("spec, want", [("sim:paper", ("paper", "", 0)), ("sim:null@7", ("null", "", 7)),
                                        ("sim:paper/Llama2-13B@2", ("paper", "Llama2-13B", 2))])
def test_a_spec_names_behaviour_persona_and_world(spec, want):
    assert parse_sim(spec) == want
    assert with_persona("sim:null@7", "Vicuna-7B") == "sim:null/Vicuna-7B@7"


@pytest.mark.parametrize("spec", ["sim:", "sim:strong", "sim:paper@x", "sim:Paper"])
def test_a_bad_spec_is_refused_naming_the_form(spec):
    with pytest.raises(ValueError, match=r"sim:<behaviour>\[/<persona>\]\[@<seed>\]"):
        SimLM(spec)


def test_replies_repeat_per_prompt_and_sample_and_differ_across_samples_and_worlds():
    lm = SimLM("sim:paper")
    lm.teach("coin", _coin)
    greedy = [c.text for c in lm.generate(["Q: a", "Q: a"], n=3)[0]]
    assert len(set(greedy)) == 1  # greedy: one reply, repeated
    sampled = [c.text for c in lm.generate(["Q: a"], n=40, temperature=0.7, seed=1)[0]]
    again = [c.text for c in lm.generate(["Q: b", "Q: a"], n=40, temperature=0.7, seed=1)[1]]
    assert sampled == again and len({t.split()[0] for t in sampled}) == 2  # per (prompt, sample), whatever the batch
    other = SimLM("sim:paper@1")
    other.teach("coin", _coin)
    assert other.generate(["Q: a"])[0][0].text.split()[1] != greedy[0].split()[1]  # another world's draws
    assert {t.split()[1] for t in sampled} == {greedy[0].split()[1]}  # the question's draw, shared by every sample


def test_an_untaught_prompt_is_an_error_naming_it_and_stop_strings_cut():
    lm = SimLM("sim:null")
    with pytest.raises(ValueError, match="taught: nothing.*'Unknown kind"):
        lm.generate(["Unknown kind of prompt"])
    lm.teach("echo", lambda p, m, r: ("one. two. three", -0.2))
    (comp,), = lm.generate(["x"], stop=[". three"])
    assert comp.text == "one. two" and comp.logprob == pytest.approx(-0.4)
    assert lm.score(["x"], ["a b c"]) == [pytest.approx(-1.2)]  # no scorer: per word


def test_load_lm_names_it_simulated_and_refuses_nothing_of_its_own():
    lm = generation.load_lm("sim:paper/Llama2-13B@3", adapter="/tmp/x/10-full-qa-only")
    assert lm.name == "Llama2-13B, simulated (planted effects), paper, world 3+adapter:10-full-qa-only"
    assert lm.variant == "10-full-qa-only" and generation.load_lm("sim:paper/Llama2-13B@3") is not lm


def test_a_bare_simulated_model_stands_for_every_paper_model_with_its_card():
    assert profiles.model_list("sim:null@2", "", "cpu", PAPER_MODELS) == [f"sim:null/{m}@2" for m in PAPER_MODELS]
    assert profiles.model_list("sim:paper", "", "smoke", COVRAG_MODELS) == [f"sim:paper/{m}" for m in COVRAG_MODELS]
    assert profiles.model_list("sim:paper/Vicuna-7B", "", "full", PAPER_MODELS) == ["sim:paper/Vicuna-7B"]
    lm = generation.load_lm("sim:paper/Vicuna-13B")
    assert model_card(lm).name == "Vicuna-13B" and parameter_count(lm)[0] == 13.0


def test_the_door_teaches_a_simulated_model_and_a_notebook_without_a_simulation_refuses_it():
    taught = []
    spec = {"name": "x_sim", "recorded": ("model",), "models": ("model",),
            "parameters": {"profile": parameters.PROFILE, "model": parameters.MODEL, "device": parameters.DEVICE},
            "simulate": lambda S, lm: taught.append((S.notebook, lm.name))}
    S = session.start(spec, profile="smoke", model="sim:null@5", device="cpu")
    assert taught == [("x_sim", "simulated (planted effects), null, world 5")]
    with pytest.raises(ValueError, match="sends no prompt a simulated model answers"):
        session.start({**spec, "simulate": None}, profile="smoke", model="sim:null@5", device="cpu")
    assert S.lm is generation.load_lm("sim:null@5")
