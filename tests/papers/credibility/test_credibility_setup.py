"""The credibility notebooks through the one door (04-07): the model list and `session.start` in the smoke profile
(what each records in every profile: tests/runs/test_session.py)."""

from __future__ import annotations

import itertools

import pytest

from covlib.papers import credibility as C
from covlib.papers.credibility.notebook import NOTEBOOKS
from covlib.runs import profiles, session

SMOKE = dict(profile="smoke", model="", models="", device="", questions="", n_questions=500, seed=0, key_facts="supporting",
             judge="overlap", max_new_tokens=160)


def setup(key: str = "04", **given):
    """Notebook `key` opened through the door: the smoke parameters above, `n_refs=5` unless given, and `given`."""
    return session.start(NOTEBOOKS[key], **{**SMOKE, "n_refs": 5, **given})


@pytest.fixture
def project(scratch_root, shared_data):
    """A scratch project root (build/ for key facts) with the real data."""
    shared_data("hotpotqa", "hotpot_dev_distractor_sample100.jsonl")
    return scratch_root


# --------------------------------------------------------------------------- the model list


@pytest.mark.parametrize("model, models, profile", itertools.product(("", "m"), ("", "a, b,", " , "),
                                                                     profiles.PROFILES))
def test_model_list_is_what_the_credibility_notebooks_compared(model, models, profile):
    """`models` listed, else `model`, else the paper's open models in the full profile, else the embedded model."""
    listed = [m.strip() for m in models.split(",") if m.strip()]
    expected = listed or ([model] if model else list(C.PAPER_MODELS.values()) if profile == "full" else [""])
    assert profiles.model_list(model, models, profile, C.PAPER_MODELS) == expected


# --------------------------------------------------------------------------- setup, for real, in the smoke profile


def test_setup_of_notebook_04_loads_questions_models_and_both_key_fact_sources(project):
    S = setup(compare_key_facts="agents", n_rating=50)
    assert (S.profile, S.n_questions, S.max_new_tokens, S.models) == ("smoke", 8, 32, [""])
    assert S.params == dict(profile="smoke", models=[""], questions="shared sample", n_questions=8, seed=0, n_refs=5,
                            key_facts="supporting", compare_key_facts="agents", judge="overlap", max_new_tokens=32)
    assert S.examples == C.load_questions("", 8, 0) and len(S.examples) == 8
    (g,) = S.generators
    assert "SmolLM2" in g.name
    assert [f.question_id for f in S.facts] == [ex.id for ex in S.examples] == [f.question_id for f in S.other_facts]
    assert S.facts[0].author == "HotpotQA gold supporting sentences" and S.compare == "agents"
    assert (project / "build" / "key_facts").is_dir()  # key facts built under the project's build/


def test_setup_of_notebook_04_without_a_second_source(project):
    S = setup(compare_key_facts="supporting")
    assert S.compare == "" and S.other_facts is None and S.params["compare_key_facts"] == ""


def test_setup_of_notebook_05_reads_and_caps_the_sweep(project):
    S = setup("05", n_refs="10, 2,5,3")
    assert S.n_refs == [2, 5] and S.params["n_refs"] == [2, 5] and "compare_key_facts" not in S.params
    with pytest.raises(ValueError, match="n_refs must be >= 1, got 0"):
        setup("05", n_refs="0,5")


def test_setup_of_notebook_07_opens_the_corpus_and_caps_completion(project):
    S = setup("07", cap=10, k_initial=5, max_rounds=3, corpus="")
    assert (S.cap, S.k_initial) == (6, 3)
    assert list(S.params) == ["profile", "models", "questions", "n_questions", "seed", "n_refs", "cap", "k_initial",
                              "max_rounds", "corpus", "key_facts", "judge", "max_new_tokens"]
    assert S.params["corpus"] == "offline HotpotQA paragraphs"
    assert S.corpus_meta["corpus_size"] == len(S.passages) > 2000 and S.corpus_meta["corpus"] == S.corpus_name
    assert "both gold paragraphs present for 8 of 8 questions" in S.corpus_meta["corpus_makeup"]
    assert [h.passage.id for h in S.retriever.search(S.examples[0].question, k=3)]


def test_setup_refuses_bad_parameters_before_loading_anything(project, monkeypatch):
    monkeypatch.setattr(C, "load_questions", lambda *a, **k: pytest.fail("loaded questions"))
    with pytest.raises(ValueError) as err:
        setup(n_questions=0, seed=1.5, max_new_tokens=-3)
    assert all(name in str(err.value) for name in ("n_questions", "seed", "max_new_tokens"))
    with pytest.raises(ValueError, match="max_rounds must be >= 1, got 0"):
        setup("07", cap=10, k_initial=5, max_rounds=0, corpus="")
    with pytest.raises(ValueError, match="unknown profile"):
        setup(profile="fast")
    with pytest.raises(ValueError, match="n_refs must be a whole number, got '5'"):  # papermill -p n_refs 5 as text
        setup(n_refs="5")
