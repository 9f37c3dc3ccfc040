"""The CoV-RAG notebooks through the one door (08-11): the model list, adapters, and `session.start` in the smoke
profile (what each records in every profile: tests/runs/test_session.py)."""

from __future__ import annotations

import itertools

import pytest

from covlib.papers import covrag as C
from covlib.papers.covrag import workload
from covlib.papers.covrag import notebook as N
from covlib.papers.covrag.notebook import NOTEBOOKS
from covlib.runs import profiles, session

# Each notebook's parameters as its parameters cell sets them, in the smoke profile.
NB08 = dict(profile="smoke", model="", adapter="", verifier="", device="", datasets="NQ,WebQ", n_per_dataset=400,
            triviaqa="", mintaka="", corpus="", k=5, seed=0, chat=True, max_new_tokens=128, verify_tokens=160,
            reference_correctness_max=0.27, correctness_below=0.26, bias_above=0.7, truthfulness_max=0.92,
            sigma_mode="all")
NB09 = dict(profile="smoke", model="", models="", adapter="", device="", datasets="NQ,WebQ,Mintaka,TriviaQA",
            n_per_dataset=400, triviaqa="", mintaka="", corpus="", k=5, max_rounds=1, seed=0, chat=True,
            max_new_tokens=128, verify_tokens=160, sigma_mode="all")
NB10 = dict(profile="smoke", model="", device="", teacher="", n_train=308, test_datasets="NQ,WebQ", n_test=400,
            corpus="", k=5, seed=0, chat=False, lora_rank=16, lora_alpha=32, learning_rate=2e-4, epochs=2.0,
            max_steps=-1, batch_size=8, max_length=1024, max_new_tokens=128, verify_tokens=160, evaluate_base=True)
NB11 = dict(profile="smoke", model="", qa_adapter="", covrag_adapter="", ranker="", device="", datasets="NQ,WebQ",
            n_per_dataset=400, corpus="", k=5, seed=0, chat=False, max_new_tokens=128, verify_tokens=160,
            ranker_tokens=200)


def setup(key: str, **given):
    """Notebook `key` opened through the door with `given` as its parameters."""
    return session.start(NOTEBOOKS[key], **given)


@pytest.fixture
def project(scratch_root, shared_data):
    """A scratch project root (build/adapters/) with the real data."""
    shared_data("hotpotqa_adv", "sim_dev.json")
    return scratch_root


# --------------------------------------------------------------------------- the model list, the adapters


@pytest.mark.parametrize("model, models, profile", itertools.product(("", "m"), ("", "a, b,"), profiles.PROFILES))
def test_model_list_is_what_notebook_09_wrote_inline(model, models, profile):
    inline = [m.strip() for m in models.split(",") if m.strip()] or (
        list(C.PAPER_MODELS.values()) if profile == "full" and not model else [model])
    assert profiles.model_list(model, models, profile, C.PAPER_MODELS) == inline


def test_adapter_or_default_finds_notebook_10s_adapter(project):
    assert N.adapter_or_default("given", "qa-only", "smoke") == "given"
    assert N.adapter_or_default("", "qa-only", "smoke") == ""
    folder = project / "build" / "adapters" / "10-smoke-qa-only"
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text("{}")
    assert N.adapter_or_default("", "qa-only", "smoke") == str(folder)
    assert N.adapter_or_default("", "qa-only", "cpu") == ""


# --------------------------------------------------------------------------- setup, for real, in the smoke profile


def test_setup_of_notebook_08(project):
    S = setup("08", **NB08)
    assert (S.profile, S.n_per_dataset, S.k, S.max_new_tokens, S.verify_tokens) == ("smoke", 4, 2, 24, 48)
    assert S.names == ["NQ", "WebQ"] and S.sizes == {"NQ": 4, "WebQ": 4} and S.missing == []
    assert [len(v) for v in S.sets.values()] == [4, 4] and S.examples == S.sets["NQ"] + S.sets["WebQ"]
    assert S.sets == {n: v for n, v in C.load_datasets(sizes=S.sizes, seed=0).items() if n in S.names}
    assert S.thresholds == C.PAPER_THRESHOLDS and S.chat is True and S.seed == 0
    assert len(S.passages) > 2000 and S.corpus_name and S.retriever.search(S.examples[0].question, k=2)
    assert "SmolLM2" in S.base.name and S.checker is S.base and not {"labeller", "ranker"} & set(S.data)
    with pytest.raises(AttributeError, match="not a parameter of this notebook"):
        S.n_train


def test_setup_of_notebook_09(project):
    S = setup("09", **{**NB09, "sigma_mode": "any"})
    assert S.missing == ["Mintaka", "TriviaQA"] and list(S.sets) == ["NQ", "WebQ"]
    assert S.sizes == {"NQ": 4, "WebQ": 4, "Mintaka": 4, "TriviaQA": 4}
    assert S.model_ids == [""] and len(S.generators) == 1 and S.thresholds == C.Thresholds(mode="any")
    assert "checker" not in S.data


def test_setup_of_notebook_10(project):
    S = setup("10", **NB10)
    assert (S.n_train, S.n_test, S.k, S.max_steps, S.batch_size, S.learning_rate) == (6, 2, 2, 2, 2, 2e-3)
    assert (S.max_length, S.max_new_tokens, S.verify_tokens, S.evaluate_base) == (192, 16, 40, False)
    assert (S.lora_rank, S.epochs) == (16, 2.0)  # not capped: as given
    assert S.names == ["NQ", "WebQ"] and len(S.examples) == 4 and len(S.train) == 6
    assert not {ex.question for ex in S.train} & {ex.question for ex in S.examples}
    assert S.labeller is None and "thresholds" not in S.values and "SmolLM2" in S.base.name


def test_notebook_10_refuses_a_served_model_before_training(project):
    """Training and probe losses need the weights in this process: a server spec is refused with what to give."""
    with pytest.raises(TypeError, match="notebook 10 trains LoRA adapters.*MODEL=<hub id or folder>"):
        setup("10", **{**NB10, "model": "openai:smollm2@http://127.0.0.1:9/v1"})


def test_setup_of_notebook_11(project):
    S = setup("11", **NB11)
    assert (S.n_per_dataset, S.k, S.max_new_tokens, S.verify_tokens, S.ranker_tokens) == (2, 2, 16, 40, 48)
    assert len(S.examples) == 4 and (S.qa_adapter, S.covrag_adapter) == ("", "")
    assert S.rag_model is S.cov_model is S.ranker  # no adapters trained here: all three are the embedded model
    assert "generators" not in S.data


def test_setup_refuses_bad_and_unknown_parameters_before_loading_anything(project, monkeypatch):
    monkeypatch.setattr(workload, "load_datasets", lambda *a, **k: pytest.fail("loaded the test sets"))  # load's and the plan's
    with pytest.raises(ValueError) as err:
        setup("08", **{**NB08, "k": 0, "bias_above": 1.5})
    assert "k must be >= 1" in str(err.value) and "bias_above must be between 0.0 and 1.0" in str(err.value)
    with pytest.raises(ValueError, match="parameter datasets: unknown 'SQuAD'"):
        setup("08", **{**NB08, "datasets": "NQ,SQuAD"})
    with pytest.raises(ValueError, match="parameter test_datasets is empty"):
        setup("10", **{**NB10, "test_datasets": " , "})
    with pytest.raises(ValueError, match="sigma_mode: unknown 'some'; choose from all, any"):
        setup("09", **{**NB09, "sigma_mode": "some"})
