"""The offline NLI judge: FEVER pair builder, fine-tuning, loading by name, cache fingerprints, accuracy floors."""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter

import numpy as np
import pytest

from covlib import nli
from covlib.core.records import DataError, Example, Paragraph
from covlib.generation import training
from covlib.nli import fever, pairs as P
from covlib.nli.scoring import pair_keys

# Accuracy floors of the judge `make judge` builds, set from the measured values
# (docs/judges.md) minus a margin for retraining noise: a judge that
# falls below them has degraded. The overlap heuristic's measured values are the
# baselines it is compared with; the default is chosen on the key-fact pairs (notebook 00b).
FLOORS = {  # what the built judge must reach (overlap heuristic: fixture accuracy 0.644, AUC 0.974; FEVER test 0.375)
    # measured at 8aeec5e: 0.622, 0.953, 0.602; at e73598f (multi-hop pairs, date fixes, P > .47 chosen on the
    # development pairs): 0.556, 0.958, 0.578
    "fixture_accuracy": 0.50, "fixture_auc": 0.90, "fever_test_accuracy": 0.55,
}


@pytest.fixture(scope="module")
def fever_claims():
    from covlib import data
    from covlib.core import paths

    path = paths.dataset_path("fever", "paper_test_processed.jsonl")
    if not path.exists():
        pytest.skip(f"real data not found at {path} (set COVLIB_DATA or put ../shared/data beside the repo)")
    return data.load_fever(ids=None), [e.id for e in data.load_fever()]


@pytest.fixture(scope="module")
def fever_split(fever_claims):
    claims, test_ids = fever_claims
    return P.split_fever(claims, test_ids, val_fraction=0.1, seed=0)


# --------------------------------------------------------------------------- text and evidence sets


def test_fever_text_undoes_ptb_tokenisation():
    assert P.fever_text("From west to east they are , in order Aruba , Curaçao , and Bonaire .") == (
        "From west to east they are, in order Aruba, Curaçao, and Bonaire."
    )
    assert P.fever_text("Psych -LRB- season 2 -RRB- 's second season , `` Psych '' .") == (
        "Psych (season 2)'s second season, \"Psych\"."
    )
    assert P.fever_text("Raven -LRB- -RRB- was born .") == "Raven was born."


def _claim(cid, claim, label, pars=(), evidence=()):
    paragraphs = [Paragraph("t", list(pars), True)] if pars else []
    return Example(cid, claim, [], label=label, paragraphs=paragraphs, metadata={"evidence": [list(g) for g in evidence]})


def test_evidence_sets_are_split_by_annotation_group():
    e = _claim("1", "c", "SUPPORTS", ["A one .", "B two .", "C three ."],
               [[[0, 0, "P", 0], [0, 0, "P", 1]], [[0, 0, "Q", 4]], [[0, 0, "P", 1], [0, 0, "P", 0]]])
    assert P.fever_evidence_sets(e) == [["A one.", "B two."], ["C three."], ["B two.", "A one."]]


# --------------------------------------------------------------------------- the pair builder on real FEVER


def test_split_keeps_the_papers_sampled_claims_out_of_training(fever_claims, fever_split):
    claims, test_ids = fever_claims
    train_ids = {e.id for e in fever_split["train"]}
    assert len(fever_split["test"]) == 1000 and not train_ids & set(test_ids)
    assert not train_ids & {e.id for e in fever_split["val"]}
    held_out_texts = {fever.norm_claim(e.question) for e in fever_split["test"] + fever_split["val"]}
    assert not any(fever.norm_claim(e.question) in held_out_texts for e in fever_split["train"])
    # 24 claims outside sampled_ids repeat a sampled claim's text: the split drops them from training
    assert len(train_ids) + len(fever_split["val"]) < len(claims) - 1000


def test_training_pairs_are_balanced_and_never_mention_held_out_claims(fever_split):
    pairs = P.build_fever_pairs(fever_split["train"], seed=0)
    counts = P.label_counts(pairs)
    assert len(set(counts.values())) == 1 and counts["entailment"] > 2000, counts
    held_out = {e.question for e in fever_split["test"]}
    assert not any(p.hypothesis in held_out for p in pairs)
    ids = {p.source.split(":", 1)[1] for p in pairs}
    assert ids <= {e.id for e in fever_split["train"]}
    # premises of every label have similar lengths, so length is no shortcut
    words = {label: np.mean([len(p.premise.split()) for p in pairs if p.label == label]) for label in P.LABELS}
    assert max(words.values()) < 1.3 * min(words.values()), words


def test_neutral_premises_never_use_the_claims_own_evidence(fever_split):
    claims = fever_split["train"][:1500]
    pairs = P.build_fever_pairs(claims, seed=1, balance=False)
    by_id = {e.id: e for e in claims}
    sentences_of = {}  # normalised claim text -> every evidence sentence of any claim with that text
    for e in claims:
        sentences_of.setdefault(fever.norm_claim(e.question), set()).update(s for g in P.fever_evidence_sets(e) for s in g)
    neutral = [p for p in pairs if p.label == "neutral"]
    assert len(neutral) > 300
    for p in neutral:
        claim = by_id[p.source.split(":", 1)[1]]
        assert claim.label == "NOT ENOUGH INFO"
        assert not any(s in p.premise for s in sentences_of[fever.norm_claim(claim.question)])
    for p in pairs:  # entailment/contradiction premises hold one of the claim's own evidence sets, whole
        if p.label != "neutral":
            sets = P.fever_evidence_sets(by_id[p.source.split(":", 1)[1]])
            assert any(all(s in p.premise for s in group) for group in sets)


def test_pairs_do_not_depend_on_the_python_hash_seed(shared_data):
    """`make judge` skips retraining when the training pairs' hash is unchanged: it must repeat across processes."""
    import subprocess
    import sys

    shared_data("fever", "paper_test_processed.jsonl")
    code = ("from covlib import data; from covlib.nli import pairs as P; claims = data.load_fever(ids=None)[:1500]; "
            "print(P.pairs_hash(P.build_fever_pairs(claims, seed=0)))")
    hashes = {subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONHASHSEED": str(seed)},
                             capture_output=True, text=True, check=True).stdout for seed in (1, 2)}
    assert len(hashes) == 1, hashes


def test_neutral_pairs_skip_sentences_of_claims_with_the_same_text():
    twin_a = _claim("1", "Bob Dylan sang songs.", "SUPPORTS", ["Bob Dylan sang songs in 1962 ."], [[[0, 0, "Bob_Dylan", 0]]])
    twin_b = _claim("2", "Bob Dylan sang songs.", "NOT ENOUGH INFO")
    other = _claim("3", "Joan Baez sang.", "SUPPORTS", ["Joan Baez sang songs with Bob Dylan ."], [[[0, 0, "Joan_Baez", 0]]])
    filler = [_claim(str(10 + i), f"Filler {w}.", "SUPPORTS", [f"The {w} is a mountain ."], [[[0, 0, f"P{i}", 0]]])
              for i, w in enumerate(["alps", "andes", "rockies", "urals", "atlas"])]  # BM25 needs idf > 0
    pairs = P.build_fever_pairs([twin_a, twin_b, other], corpus=[twin_a, twin_b, other, *filler], seed=0,
                                balance=False, pad_fraction=0)
    neutral = [p for p in pairs if p.label == "neutral"]
    assert [p.premise for p in neutral] == ["Joan Baez sang songs with Bob Dylan."]


def test_pairs_round_trip_and_bad_lines_name_the_line(tmp_path):
    pairs = [P.NLIPair("A cat sat.", "A cat exists.", "entailment", "x:1", "evidence")]
    path = P.save_pairs(pairs, tmp_path / "p.jsonl")
    assert P.load_pairs(path) == pairs and P.pairs_hash(pairs) == P.pairs_hash(P.load_pairs(path))
    path.write_text(path.read_text() + json.dumps({"premise": "p", "hypothesis": "h", "label": "yes"}) + "\n")
    with pytest.raises(DataError, match=r"line 2, field 'label'"):
        P.load_pairs(path)


# --------------------------------------------------------------------------- the credibility fixture


def test_credibility_fixture_is_balanced_and_its_key_facts_are_gold_sentences(shared_data):
    pairs = P.load_credibility_fixture()
    assert len(pairs) >= 60 and set(P.label_counts(pairs).values()) == {len(pairs) // 3}
    assert Counter(p.kind for p in pairs).keys() == {"answer", "sentence"}
    rows = {json.loads(line)["id"]: json.loads(line) for line in shared_data("hotpotqa", "hotpot_dev_distractor_sample100.jsonl").open()}
    for p in pairs:
        row = rows[p.extra["question_id"]]
        paragraphs = dict(zip(row["context"]["title"], row["context"]["sentences"]))
        gold = {paragraphs[t][i].strip() for t, i in zip(row["supporting_facts"]["title"], row["supporting_facts"]["sent_id"])}
        assert p.hypothesis in gold, p.source


# --------------------------------------------------------------------------- fine-tuning


TINY = [
    ("Paris is the capital of France.", "France's capital is Paris.", "entailment"),
    ("Paris is the capital of France.", "Paris is in Germany.", "contradiction"),
    ("Paris is the capital of France.", "Paris has a famous zoo.", "neutral"),
    ("Tom Hanks was born in 1956 in California.", "Tom Hanks was born in 1956.", "entailment"),
    ("Tom Hanks was born in 1956 in California.", "Tom Hanks was born in 1972.", "contradiction"),
    ("Tom Hanks was born in 1956 in California.", "Tom Hanks has two sisters.", "neutral"),
    ("The Nile flows north into the Mediterranean.", "The Nile ends in the Mediterranean.", "entailment"),
    ("The Nile flows north into the Mediterranean.", "The Nile flows south.", "contradiction"),
    ("The Nile flows north into the Mediterranean.", "The Nile is home to crocodiles.", "neutral"),
]


@pytest.fixture(scope="module")
def tiny_judge_dir(tmp_path_factory):
    """The embedded MiniLM fine-tuned for a few steps on nine pairs (module-scoped: trained once)."""
    from covlib.retrieval.embedding import encoder_dir

    out = tmp_path_factory.mktemp("models") / "tiny-nli"
    info = training.fine_tune_pair_classifier(TINY, encoder_dir(), out, labels=P.LABELS, max_steps=12,
                                              batch_size=9, learning_rate=1e-4, warmup_ratio=0.0, seed=0,
                                              progress=False, card={"name": "tiny-nli"})
    return out, info


def test_a_few_training_steps_lower_the_loss_and_write_a_card(tiny_judge_dir):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from covlib.retrieval.embedding import encoder_dir

    out, info = tiny_judge_dir
    tok = AutoTokenizer.from_pretrained(str(out))
    import transformers

    transformers.set_seed(0)  # the same head initialisation training started from
    before_model = AutoModelForSequenceClassification.from_pretrained(
        str(encoder_dir()), num_labels=3, id2label=dict(enumerate(P.LABELS)), label2id={k: i for i, k in enumerate(P.LABELS)}
    )
    before = training.mean_loss(before_model, tok, TINY)
    after = training.mean_loss(AutoModelForSequenceClassification.from_pretrained(str(out)), tok, TINY)
    assert after < 0.7 * before, (before, after)
    card = training.read_card(out)
    assert card["name"] == "tiny-nli" and card["steps"] == 12 and len(card["settings"]["data"]) == 64
    assert not out.with_name(out.name + ".work").exists(), "checkpoints are removed once the model is in place"


def test_a_trained_judge_loads_by_name_and_scores(tiny_judge_dir, tmp_path, monkeypatch, isolated_cache):
    out, _ = tiny_judge_dir
    monkeypatch.setenv("COVLIB_MODELS", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="make judge"):
        nli.load_judge(nli.TRAINED_JUDGE)
    shutil.copytree(out, tmp_path / nli.TRAINED_JUDGE)
    judge = nli.load_judge(nli.TRAINED_JUDGE)
    assert judge.name == nli.TRAINED_JUDGE
    probs = nli.probabilities([t[0] for t in TINY], [t[1] for t in TINY], judge=judge, progress=False)
    assert probs.shape == (9, 3) and np.allclose(probs.sum(axis=1), 1)
    assert (probs.argmax(axis=1) == [P.LABELS.index(t[2]) for t in TINY]).mean() >= 2 / 3
    scores, _ = nli.evaluate([t[0] for t in TINY], [t[1] for t in TINY], [t[2] for t in TINY], judge=judge, progress=False)
    assert scores["judge"] == nli.TRAINED_JUDGE and scores["n"] == 9
    shutil.copytree(out, tmp_path / "my-judge")  # any folder build_judge.py writes loads by its name
    assert nli.load_judge("my-judge").name == "my-judge"
    assert nli.load_judge("my-judge", device="cpu").device == "cpu" == nli.get_judge("my-judge", device="cpu").device
    with pytest.raises(ValueError, match="unknown judge 'no-such-judge'"):  # not a trained judge, not `owner/name`
        nli.load_judge("no-such-judge")
    hub = nli.load_judge("someone/nli-model")  # a hub id: loaded lazily, on first use
    assert isinstance(hub, nli.HFNLIJudge) and hub.config["files"] is None


def test_retrained_weights_change_the_cache_key(tiny_judge_dir, tmp_path, isolated_cache):
    import torch
    from safetensors.torch import load_file, save_file

    out, _ = tiny_judge_dir
    folder = tmp_path / "judge"
    shutil.copytree(out, folder)
    judge = nli.HFNLIJudge(folder, name="same-name")
    premises, hypotheses = [t[0] for t in TINY], [t[1] for t in TINY]
    first = nli.probabilities(premises, hypotheses, judge=judge, progress=False)
    fingerprint = judge.config["files"]
    training.update_card(folder, note="cards are notes, not weights")
    assert nli.HFNLIJudge(folder, name="same-name").config["files"] == fingerprint

    weights = load_file(folder / "model.safetensors")  # "retrain": same file name, new values
    weights = {k: (v + 0.5 * torch.randn_like(v) if k.startswith("classifier") else v) for k, v in weights.items()}
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    retrained = nli.HFNLIJudge(folder, name="same-name")
    assert retrained.config["files"] != fingerprint
    second = nli.probabilities(premises, hypotheses, judge=retrained, progress=False)
    assert not np.allclose(first, second), "retrained judge returned the old model's cached probabilities"


@pytest.fixture(scope="module")
def random_judges(tmp_path_factory):
    """Three randomly initialised 2-layer BERT NLI cross-encoders (seeds 0, 1, 2) with MiniLM's tokenizer."""
    import torch
    import transformers

    from offline_models import minilm_tokenizer_dir

    folders = []
    for seed in range(3):
        folder = tmp_path_factory.mktemp("random-judges") / f"seed{seed}"
        folder.mkdir()
        for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
            if (minilm_tokenizer_dir() / name).exists():
                shutil.copy(minilm_tokenizer_dir() / name, folder / name)
        torch.manual_seed(seed)
        config = transformers.BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                                         intermediate_size=128, id2label=dict(enumerate(P.LABELS)),
                                         label2id={k: i for i, k in enumerate(P.LABELS)})
        model = transformers.BertForSequenceClassification(config)
        with torch.no_grad():
            model.classifier.weight.mul_(50)  # logits of a few units, so two seeds' probabilities differ clearly
        model.save_pretrained(folder)
        folders.append(folder)
    return folders


def _replace_weights(source, folder):
    """Put `source`'s weights in `folder` under the same name, renamed into place as a rebuild does."""
    tmp = folder / ".model.safetensors.tmp"
    shutil.copy(source / "model.safetensors", tmp)
    os.replace(tmp, folder / "model.safetensors")


def test_a_judge_kept_alive_across_retraining_never_caches_the_old_model_under_the_new_files_key(
        random_judges, tmp_path, isolated_cache):
    """Issue 32, item 7 (the torch judge): a judge used, its weights replaced, used again; a fresh judge on the new
    weights gets their probabilities, not the live judge's old ones cached under the new weights' key."""
    premises, hypotheses = [t[0] for t in TINY], [t[1] for t in TINY]
    folder = tmp_path / "judge"
    shutil.copytree(random_judges[0], folder)
    kept = nli.HFNLIJudge(folder, device="cpu", name="same-name")
    old, key = nli.probabilities(premises, hypotheses, judge=kept, progress=False), kept.config
    _replace_weights(random_judges[1], folder)  # retrained: the same file name, new weights
    new = nli.HFNLIJudge(folder, device="cpu").probabilities(premises, hypotheses)  # the new weights, no cache
    assert np.abs(new - old).max() > 0.05, "the two models must give different probabilities"

    again = nli.probabilities(premises, hypotheses, judge=kept, progress=False)  # the live judge, once more
    fresh = nli.HFNLIJudge(folder, device="cpu", name="same-name")
    np.testing.assert_allclose(nli.probabilities(premises, hypotheses, judge=fresh, progress=False), new, atol=1e-6,
                               err_msg="a fresh judge got the old model's probabilities from the cache")
    assert fresh.config["files"] != key["files"]
    assert kept.config == key, "the live judge keeps the key of the weights it runs"
    np.testing.assert_allclose(again, old, atol=1e-6)

    cold = nli.HFNLIJudge(folder, device="cpu", name="cold")  # another name: nothing of it is cached yet
    pair_keys(premises[:1], hypotheses[:1], cold)  # its key is taken (a cache hit would end here), not loaded
    _replace_weights(random_judges[2], folder)
    with pytest.raises(RuntimeError, match="changed on disk after this judge took its cache key"):
        nli.probabilities(premises, hypotheses, judge=cold, progress=False)


# --------------------------------------------------------------------------- the judge `make judge` builds


@pytest.fixture(scope="module")
def built_judge():
    """The judge `make judge` builds; skipped when absent (`make test` does not train it: 15-55 min on 2 cores)."""
    folder = nli.trained_judge_dir()
    if not (folder / "config.json").is_file():
        pytest.skip(f"the trained judge is not built at {folder}: run `make judge`, then these floors are checked")
    return nli.load_trained_judge(), FLOORS


def test_built_judge_beats_its_accuracy_floor_on_the_credibility_fixture(built_judge, isolated_cache):
    judge, floors = built_judge
    pairs = P.load_credibility_fixture()
    scores, _ = nli.evaluate([p.premise for p in pairs], [p.hypothesis for p in pairs], [p.label for p in pairs],
                             judge=judge, progress=False)
    assert scores["accuracy"] >= floors["fixture_accuracy"], scores
    assert scores["entail_auc"] >= floors["fixture_auc"], scores


def test_built_judge_card_records_its_data_and_held_out_metrics(built_judge):
    judge, floors = built_judge
    card = training.read_card(nli.trained_judge_dir())
    assert judge.name.startswith(card["name"]) and len(card["pairs_sha256"]["train"]) == 64  # '<name> (<backend>)' on ONNX
    assert card["metrics"]["fever_test"]["accuracy"] >= floors["fever_test_accuracy"], card["metrics"]
    assert card["pair_counts"]["train"]["entailment"] > 3000
    assert card["fingerprint"] == judge.config["files"]
    # the frozen key-fact test set: which file (its hash) and the numbers on it, pooled and per premise kind
    test = card["metrics"]["keyfact_test_decision"]
    assert test["sha256"] == nli.KEYFACT_TEST_SHA256 and test["accuracy"]["n"] == 581
    assert {"weighted", "weighted_answer", "weighted_sentence"} <= set(test)
    assert card["calibration"]["rule"] in ("argmax", "dev-threshold") and card["calibration"]["n_pairs"] == 359


def test_built_judge_card_records_its_agreement_with_people(built_judge):
    from covlib.nli.people import factuality_path

    judge, _ = built_judge
    if not factuality_path().is_file():
        pytest.skip(f"people's labels not found at {factuality_path()}")
    people = training.read_card(nli.trained_judge_dir()).get("people")
    assert people is not None, "make judge writes the agreement with people's labels into card.json"
    assert people["config"] == judge.config and people["rationales"] == 252 and people["questions"] == 126
    for rule in ("whole", "claims", "aligned"):  # every interval resamples whole questions
        for est in people["rules"][rule].values():
            assert est["clusters"] == 126 and est["n"] == 252
