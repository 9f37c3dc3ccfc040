"""NLI judges: the offline overlap heuristic, caching, LLM-as-judge, HF/TRUE backends on tiny random models, and their
input rules (empty pairs, lone strings, judge specs that cannot load)."""

from __future__ import annotations

import shutil
import time

import numpy as np
import pytest

from covlib import nli
from covlib.nli import judges as nli_judges, registry as nli_registry
from scripted import ScriptedGenerator
from covlib.nli import HFNLIJudge, LLMJudge, OverlapJudge, TrueT5Judge, entailment, entailment_labels, load_judge, map_nli_labels
from offline_models import minilm_tokenizer_dir

PREMISE = (
    "Barack Obama was born in Honolulu, Hawaii, in 1961. "
    "He served as the 44th president of the United States from 2009 to 2017."
)


class CountingJudge:
    """Wraps a judge and counts the pairs it is asked about."""

    def __init__(self, inner):
        self.inner, self.name, self.config, self.calls = inner, inner.name, inner.config, 0

    def probabilities(self, premises, hypotheses):
        self.calls += len(premises)
        return self.inner.probabilities(premises, hypotheses)


def FakeLM(logprobs: dict[str, float]) -> ScriptedGenerator:
    """The shared scripted generator scoring each continuation with a fixed log-prob."""
    return ScriptedGenerator({}, name="fake-lm", score=logprobs)


# --------------------------------------------------------------------------- OverlapJudge


def test_overlap_ranks_paraphrase_above_wrong_year(isolated_cache):
    hyps = [
        "Obama was born in Hawaii in 1961.",  # entailed
        "Obama was born in Hawaii in 1962.",  # wrong year
        "Obama was not born in Hawaii.",  # negation
        "The Eiffel Tower is in Paris.",  # unrelated
    ]
    probs = nli.probabilities([PREMISE] * 4, hyps, judge="overlap", progress=False)
    assert np.allclose(probs.sum(axis=1), 1) and (probs >= 0).all()
    ent = probs[:, 0]
    assert ent[0] > 0.9 and ent[0] > ent[1] + 0.5 and ent[0] > ent[2] + 0.5
    assert ent[3] < 0.1
    labels = entailment_labels([PREMISE] * 4, hyps, judge="overlap", progress=False)
    assert labels == ["entailment", "contradiction", "contradiction", "neutral"]


def test_overlap_stemming_and_word_numbers():
    judge = OverlapJudge()
    assert judge.score_pair("The band released two albums.", "The band released 2 album")[0] == pytest.approx(1.0)
    assert judge.score_pair("", "") == (0.0, 1.0, 0.0)  # nothing to check: neutral, never argmax "entailment"
    assert "not NLI" in judge.name


def test_default_judge_is_the_trained_one_once_built_and_named(tmp_path, monkeypatch):
    monkeypatch.setenv("COVLIB_MODELS", str(tmp_path))
    assert isinstance(nli.get_judge(None), OverlapJudge)  # not built: the fallback, named as such
    (tmp_path / nli.DEFAULT_JUDGE).mkdir()
    (tmp_path / nli.DEFAULT_JUDGE / "config.json").write_text("{}")
    built = nli.get_judge(None)
    assert isinstance(built, HFNLIJudge) and built.name == nli.DEFAULT_JUDGE and built.threshold is None
    assert isinstance(load_judge("overlap"), OverlapJudge)
    assert isinstance(load_judge("true"), TrueT5Judge)
    hf = load_judge("some-org/some-nli-model")
    assert isinstance(hf, HFNLIJudge) and hf.name == "hf:some-org/some-nli-model"


def test_cache_second_call_runs_no_judge(isolated_cache):
    judge = CountingJudge(OverlapJudge())
    prem = [PREMISE, PREMISE, PREMISE]
    hyps = ["Obama was born in 1961.", "Obama was born in 1962.", "Obama was born in 1961."]
    first = entailment(prem, hyps, judge=judge, progress=False)
    assert judge.calls == 2  # the duplicate pair is judged once
    second = entailment(prem, hyps, judge=judge, progress=False)
    assert judge.calls == 2
    np.testing.assert_allclose(first, second)
    entailment([PREMISE], ["Obama was president."], judge=judge, progress=False)
    assert judge.calls == 3
    assert (isolated_cache / "calls.sqlite").exists()


def test_length_mismatch_raises(isolated_cache):
    with pytest.raises(ValueError, match="premises"):
        entailment(["a", "b"], ["a"], progress=False)


# --------------------------------------------------------------------------- LLMJudge


def test_llm_judge_softmax_by_hand(isolated_cache):
    lm = FakeLM({" yes": -0.5, " unclear": -2.0, " no": -3.0})
    judge = LLMJudge(lm)
    assert "fake-lm" in judge.name
    probs = nli.probabilities(["The sky is blue.", "Grass is green."], ["The sky has a colour.", "Grass is red."], judge=judge, progress=False)
    e = np.exp([-0.5, -2.0, -3.0])
    np.testing.assert_allclose(probs, np.vstack([e / e.sum()] * 2), rtol=1e-9)
    assert len(lm.scored) == 6 and lm.scored[0][0].startswith("Premise: The sky is blue.")
    assert {c for _, c in lm.scored} == {" yes", " unclear", " no"}


def test_llm_judge_spec_loads_lm_lazily(monkeypatch):
    asked = []

    def fake_load_lm(model=None, **kw):
        asked.append((model, kw))
        return FakeLM({}) if model == "tiny" else None

    monkeypatch.setattr(nli_registry, "load_lm", fake_load_lm)  # the registry's name for covlib.generation.load_lm
    judge = load_judge("llm:tiny")
    assert isinstance(judge, LLMJudge) and judge.name == "llm-judge:fake-lm"
    load_judge("llm:tiny", device="cpu")
    assert asked == [("tiny", {"device": None}), ("tiny", {"device": "cpu"})]


# --------------------------------------------------------------------------- HF + TRUE on tiny random models


def test_label_mapping():
    assert map_nli_labels({0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"}) == {0: "contradiction", 1: "neutral", 2: "entailment"}
    assert map_nli_labels({"0": "entailment", "1": "not_entailment"}) == {0: "entailment", 1: "not_entailment"}
    with pytest.raises(ValueError, match="cannot map"):
        map_nli_labels({0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"})
    two = nli_judges.three_way(np.array([[0.7, 0.3]]), {0: "entailment", 1: "not_entailment"})
    np.testing.assert_allclose(two, [[0.7, 0.15, 0.15]])


@pytest.fixture(scope="module")
def tiny_bert_dir(tmp_path_factory):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    out = tmp_path_factory.mktemp("tiny-bert-nli")
    source = minilm_tokenizer_dir()
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (source / name).exists():
            shutil.copy(source / name, out / name)
    torch.manual_seed(0)
    config = transformers.BertConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
        id2label={0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"},
        label2id={"CONTRADICTION": 0, "NEUTRAL": 1, "ENTAILMENT": 2},
    )
    transformers.BertForSequenceClassification(config).save_pretrained(out)
    return out


def test_hf_judge_tiny_bert(tiny_bert_dir, isolated_cache):
    judge = HFNLIJudge(str(tiny_bert_dir), device="cpu", batch_size=4)
    assert judge.mapping == {0: "contradiction", 1: "neutral", 2: "entailment"}
    prem = [PREMISE, "A cat sat on the mat.", "Paris is in France.", "x", PREMISE]
    hyps = ["Obama was born in 1961.", "A dog sat.", "Paris is a city in Europe with many museums.", "y", "Obama was president."]
    batched = judge.probabilities(prem, hyps)
    assert batched.shape == (5, 3)
    np.testing.assert_allclose(batched.sum(axis=1), 1, atol=1e-6)
    single = np.vstack([judge.probabilities([p], [h]) for p, h in zip(prem, hyps)])
    np.testing.assert_allclose(batched, single, atol=1e-5)
    # column order follows id2label: column 0 (entailment) is the model's class 2
    import torch

    enc = judge._tokenizer(prem[:1], hyps[:1], return_tensors="pt")
    with torch.inference_mode():
        raw = torch.softmax(judge._model(**enc).logits, -1)[0].numpy()
    np.testing.assert_allclose(batched[0], raw[[2, 1, 0]], atol=1e-5)
    cached = entailment(prem, hyps, judge=judge, progress=False)
    np.testing.assert_allclose(cached, batched[:, 0], atol=1e-6)


def test_device_reaches_every_judge_that_runs_a_model(tiny_bert_dir, isolated_cache):
    """`load_judge(spec, device)` and `get_judge(spec, device)` put a judge's model on `device`; never in the cache key."""
    assert isinstance(nli.get_judge("overlap", device="cpu"), OverlapJudge)  # no model: the device is not needed
    judge = load_judge(str(tiny_bert_dir), device="cpu")
    assert isinstance(judge, HFNLIJudge) and judge.device == "cpu"
    probs = nli.probabilities([PREMISE], ["Obama was born in 1961."], judge=judge, progress=False)
    assert probs.shape == (1, 3) and judge.device == "cpu" and next(judge._model.parameters()).device.type == "cpu"
    via_get = nli.get_judge(str(tiny_bert_dir), device="cpu")
    assert isinstance(via_get, HFNLIJudge) and via_get.device == "cpu"
    default = load_judge(str(tiny_bert_dir))
    assert default.device is None and (default.name, default.config) == (judge.name, judge.config)
    assert load_judge("true", device="cpu").device == "cpu"  # weights load lazily: only the device is recorded
    assert load_judge("llm", device="cpu").lm.device == "cpu"  # the embedded generator behind the LLM judge


def test_true_input_format():
    assert nli.true_input("P.", "H.") == "premise: P. hypothesis: H."
    judge = TrueT5Judge()
    assert judge.model_id == "google/t5_xxl_true_nli_mixture" and judge.name.startswith("true:")


def test_true_judge_tiny_t5(tmp_path, isolated_cache):
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = ["<pad>", "</s>", "<unk>", "premise:", "hypothesis:", "0", "1", "the", "sky", "is", "blue", "grass", "green", "."]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")
    fast.save_pretrained(tmp_path)
    torch.manual_seed(0)
    config = transformers.T5Config(
        vocab_size=len(words), d_model=16, d_kv=8, d_ff=32, num_layers=1, num_heads=2,
        decoder_start_token_id=0, pad_token_id=0, eos_token_id=1,
    )
    transformers.T5ForConditionalGeneration(config).save_pretrained(tmp_path)
    judge = TrueT5Judge(str(tmp_path), device="cpu", batch_size=2)
    probs = judge.probabilities(["the sky is blue .", "grass is green .", "the sky"], ["the sky is blue .", "the sky is green .", "blue"])
    assert probs.shape == (3, 3)
    np.testing.assert_allclose(probs.sum(axis=1), 1, atol=1e-6)
    np.testing.assert_allclose(probs[:, 1], probs[:, 2])
    assert judge._ids == (6, 5)
    single = np.vstack([judge.probabilities([p], [h]) for p, h in [("grass is green .", "the sky is green .")]])
    np.testing.assert_allclose(single[0], probs[1], atol=1e-5)


def test_empty_hypothesis_or_premise_is_neutral(isolated_cache):
    assert nli.entailment_labels(["Paris is in France."], [""], progress=False) == ["neutral"]
    probs = nli.probabilities(["", "  "], ["Paris is in France.", "x"], progress=False)
    assert probs.tolist() == [[0.0, 1.0, 0.0], [0.0, 1.0, 0.0]]
    # the overlap heuristic's rule (judge=None is the trained judge once `make judge` built it)
    assert nli.entailment_labels(["Paris is in France."], ["It is."], judge="overlap", progress=False) == ["neutral"]


def test_lone_strings_and_non_strings_are_refused(isolated_cache):
    with pytest.raises(TypeError, match=r"probabilities\(\) takes a list of premises, not str"):
        nli.probabilities("Paris", "Paris")
    with pytest.raises(TypeError, match="premise 0 is NoneType"):
        nli.entailment([None], ["x"])
    assert nli.probabilities(("Paris is big.",), iter(["Paris is big."]), progress=False).shape == (1, 3)


def test_bad_judge_specs_fail_at_once(tmp_path):
    start = time.perf_counter()
    for spec in ("foo", "", "   "):
        with pytest.raises(ValueError, match="choose 'minilm-fever-nli'"):
            nli.load_judge(spec)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        nli.load_judge(str(tmp_path / "no-such-judge"))
    assert time.perf_counter() - start < 5
    empty = tmp_path / "not-a-model"
    empty.mkdir()
    with pytest.raises(RuntimeError, match="could not load NLI model.*holds no loadable model.*Offline choices"):
        nli.probabilities(["a"], ["b"], judge=nli.load_judge(str(empty)), progress=False)
