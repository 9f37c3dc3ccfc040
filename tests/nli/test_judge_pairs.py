"""The judge's training-pair builders: whole date phrases dropped, whole-word subject swaps, training kept apart
from the held-out sentences, multi-hop hard negatives from training questions only, and build_judge's --device."""

from __future__ import annotations

import importlib.util
import re
from collections import Counter

import pytest

from covlib.core.records import Example, Paragraph
from covlib.core.text import split_sentences
from covlib.nli import pairs as P


@pytest.fixture(scope="module")
def fever_claims():
    from covlib import data
    from covlib.core import paths

    path = paths.dataset_path("fever", "paper_test_processed.jsonl")
    if not path.exists():
        pytest.skip(f"real data not found at {path} (set COVLIB_DATA or put ../shared/data beside the repo)")
    return data.load_fever(ids=None)


@pytest.fixture(scope="module")
def evidence_facts(fever_claims):
    """Every (page, plain-text sentence) of the SUPPORTS / REFUTES claims' evidence, once."""
    return list(dict.fromkeys((page, text) for e in fever_claims if e.label in ("SUPPORTS", "REFUTES")
                              for group in P.evidence_items(e) for page, text in group if page))


def _fact_claim(cid: str, page: str, sentence: str) -> Example:
    """A SUPPORTS claim whose one evidence sentence (PTB-free plain text) is `sentence` on `page`."""
    return Example(cid, "c", [], label="SUPPORTS", paragraphs=[Paragraph(page, [sentence], True)],
                   metadata={"evidence": [[[0, 0, page, 0]]]})


# --------------------------------------------------------------------------- 1. a whole date phrase, or none


@pytest.mark.parametrize("sentence, shorter", [
    ("Woodrow Wilson was President of the United States from 1913 to 1921.", "Woodrow Wilson was President of the United States."),
    ("Skins aired on E4 from 2007 -- 2013 in the United Kingdom.", "Skins aired on E4 in the United Kingdom."),
    ("The series ran from 1990–1995 on PBS.", "The series ran on PBS."),
    ("The show ran from 1987-95 on ABC.", "The show ran on ABC."),
    ("Rome fought Carthage from 264 BC to 146 BC.", "Rome fought Carthage."),
    ("The Qin dynasty ruled China from 221 to 206 BC.", "The Qin dynasty ruled China."),
    ("Pannonia was settled by the Goths around 330 AD, where they received land.",
     "Pannonia was settled by the Goths, where they received land."),
    ("The novel was published in serial form between 1855 and 1857.", "The novel was published in serial form."),
    ("Sonny & Cher were a duo made up of Sonny and Cher Bono in the 1960s and 1970s.",
     "Sonny & Cher were a duo made up of Sonny and Cher Bono."),
    ("Tom Hanks was born on July 9, 1956 in Concord.", "Tom Hanks was born in Concord."),
    ("Cruz ran for the seat and, in July 2012, defeated David Dewhurst.", "Cruz ran for the seat and defeated David Dewhurst."),
    ("In April 1614, she married tobacco planter John Rolfe.", "She married tobacco planter John Rolfe."),
    ("Rachel Weisz (born 7 March 1970) is an English actress.", "Rachel Weisz is an English actress."),
    ("Raising Arizona is a 1987 American crime comedy film.", "Raising Arizona is an American crime comedy film."),
    ("Speed is a 1994 action film directed by Jan de Bont.", "Speed is an action film directed by Jan de Bont."),
    ("Scodelario played Catherine in the 2011 film adaptation of Wuthering Heights.",
     "Scodelario played Catherine in the film adaptation of Wuthering Heights."),
    ("Holden Caulfield is a character in J. D. Salinger's 1951 novel The Catcher in the Rye.",
     "Holden Caulfield is a character in J. D. Salinger's novel The Catcher in the Rye."),
])
def test_a_date_phrase_is_dropped_whole(sentence, shorter):
    assert P.drop_date(sentence) == shorter


@pytest.mark.parametrize("sentence", [
    "She studied at the Drama Centre London, where she graduated from in 2009, and appeared in ten plays.",  # "from,"
    "It was the best-selling album in 2009 in the United States.",  # without the year it would say more
    "The 2014 FIFA World Cup was held in Brazil.",  # one edition of a series, not an attribute
    "The series aired 1990 -- 1995 on PBS.",  # no preposition to drop with it
    "Aruba is an island in the southern Caribbean Sea.",  # no date at all
])
def test_no_date_phrase_is_dropped_where_none_drops_cleanly(sentence):
    assert P.drop_date(sentence) is None


_DANGLING = [re.compile(p) for p in (
    r"(?i)\b(?:from|to|in|on|at|of|by|between|the|a|an)\s*(?:[,.;:)]|$)",  # a preposition or article left dangling
    r"(?:^|\s)(?:–|--|-)\s*(?:[,.;:)]|$)", r"(?:^|[\s(])(?:–|--)\s+(?:[,.;:)]|$)",  # a dash left dangling
    r"\s{2}", r",\s*,", r"\s[,.;:]", r"\(\s*\)",
    r"(?i)\b(?:from|between)\s+(?:to|and|until|–|--)\b",  # "from to"
    r"(?<![0-9])\s(?:to|until|through)\s+(?:[A-Z][a-z]+\s+)?(?:[0-9]{1,2},?\s+)?(?:1[0-9]{3}|20[0-9]{2})\b",  # half a range
    r"(?<![0-9s])\s(?:and|or)\s+(?:the\s+)?(?:1[0-9]{3}|20[0-9]{2})s?\b",  # half a list of years
)]


def _words(text: str) -> set[str]:
    return set(re.findall(r"[\w']+", text.lower()))


def test_dropped_dates_on_real_fever_sentences_leave_no_broken_text(fever_claims):
    """Every dropped-date pair of the real FEVER evidence: the shorter sentence has fewer numbers, no new word (no
    'Louisianaand'), and none of the marks of a half-dropped phrase that the full sentence did not already have."""
    dated = [p for p in P.build_hard_pairs(fever_claims, seed=0) if p.kind == "dropped-date"]
    assert len(dated) > 900  # ranges, BC years and attributive years count too (the old rule gave 700)
    for p in dated:
        text, s = p.hypothesis, p.premise
        assert len(re.findall(r"\d+", s)) < len(re.findall(r"\d+", text)), (text, s)
        assert _words(s) <= _words(text) | {"a", "an"}, (text, s)
        for pattern in _DANGLING:
            assert len(pattern.findall(s)) <= len(pattern.findall(text)), (pattern.pattern, text, s)


def test_hard_pairs_drop_a_whole_range():
    fact = "Woodrow Wilson served as the President of Princeton University from 1902 to 1910."
    pairs = P.build_hard_pairs([_fact_claim("1", "Woodrow_Wilson", fact)], seed=0)
    dated = {p.kind: p for p in pairs if "date" in p.kind}
    assert dated["dropped-date"].premise == "Woodrow Wilson served as the President of Princeton University."
    assert dated["date-dropped-hypothesis"] == P.NLIPair(fact, dated["dropped-date"].premise, "entailment",
                                                         "fever-page:Woodrow_Wilson", "date-dropped-hypothesis")


# --------------------------------------------------------------------------- 2. whole-word subject swaps


def test_a_subject_is_swapped_as_a_whole_word_only():
    assert P.swap_subject("Pakistan borders India; the Pakistani economy is large.", "Pakistan", "Mongolia") == (
        "Mongolia borders India; the Pakistani economy is large.")
    assert P.swap_subject("The Pakistani economy is the 24th-largest in the world.", "Pakistan", "Mongolia") is None
    assert P.swap_subject("Electronic Arts Inc. (EA) is a company.", "Electronic Arts Inc.", "A\\1 B") == (
        "A\\1 B (EA) is a company.")  # the name is escaped, the replacement taken literally


def test_no_swap_where_the_name_is_only_inside_another_word():
    pakistani = "The Pakistani economy is the 24th-largest in the world in terms of purchasing power."
    tigers = "Bengal tigers number around 440 in Bangladesh and 163 -- 253 in Nepal."
    other = "Meg Ryan (born November 19, 1961) is an American actress."
    claims = [_fact_claim("1", "Pakistan", pakistani), _fact_claim("2", "Bengal_tiger", tigers),
              _fact_claim("3", "Meg_Ryan", other)]
    swapped = [p for p in P.build_hard_pairs(claims, seed=0) if p.kind == "swapped-subject"]
    assert [p.hypothesis for p in swapped] == [other]  # "Pakistani" and "tigers" keep their words


def test_swapped_subjects_on_real_fever_keep_every_other_word(evidence_facts, fever_claims):
    swapped = [p for p in P.build_hard_pairs(fever_claims, seed=0) if p.kind == "swapped-subject"]
    assert len(swapped) > 1000
    for p in swapped:
        name = P.page_name(p.source.split(":", 1)[1])
        kept = _words(re.sub(rf"(?<!\w){re.escape(name)}(?:'s)?(?!\w)", " ", p.hypothesis))
        assert kept <= _words(p.premise), (name, p.premise, p.hypothesis)


# --------------------------------------------------------------------------- 3. training kept apart from held-out sentences


def test_a_training_pair_holding_a_held_out_sentence_is_dropped():
    held = [P.NLIPair("Mount Hood is a stratovolcano in Oregon. It last erupted in 1866.", "Mount Hood is in Oregon.",
                      "entailment")]
    known = ["Mount Hood is a stratovolcano in Oregon.", "It last erupted in 1866.", "Mars is a planet of the Sun."]
    blocked = P.held_out_sentences(held, known)
    train = [
        P.NLIPair("Mars is a planet of the Sun. Mount Hood is a stratovolcano in Oregon.", "x y z w", "neutral"),
        P.NLIPair("It is the largest MOUNT HOOD IS A  stratovolcano in Oregon.", "x y z w", "neutral"),  # no full stop before
        P.NLIPair("Mars is a planet of the Sun.", "mount hood is in oregon.", "neutral"),  # a held-out hypothesis
        P.NLIPair("Mars is a planet of the Sun.", "Mount Hood is a stratovolcano in Oregon State.", "neutral"),
    ]
    assert P.drop_held_out(train, blocked) == train[3:]  # a longer sentence is another sentence


@pytest.fixture(scope="module")
def default_build(fever_claims):
    """`make judge`'s pairs at its defaults, and the de-duplication counts (about 20 s)."""
    return P.fever_nli_build(seed=0, val_fraction=0.1, pad_fraction=0.5, key_fact_fraction=0.5, qa_paragraphs=3,
                             hard_fraction=0.3, multihop_fraction=0.2)


@pytest.mark.slow
def test_no_calibration_or_test_sentence_occurs_in_training(default_build):
    """By default calibration loses what training holds, every training pair stays, and the test's unseen part is
    marked (on the old code 344 calibration pairs shared a premise with training and the card's test had no such part)."""
    splits, counts = default_build
    train_text = "\n".join(" ".join(t.lower().split()) for p in splits["train"] for t in (p.premise, p.hypothesis))
    for name in ("calibration", "test_unseen"):
        held = {" ".join(s.lower().split()) for p in splits[name] for text in (p.premise, p.hypothesis)
                for s in split_sentences(text) if len(s.split()) >= 6}
        assert len(held) > 20 and not [s for s in held if s in train_text], name
    full_test = P.fever_test_pairs(seed=0)
    assert splits["test"] == full_test and set(splits["test_unseen"]) < set(full_test)
    assert counts["mode"] == "held-out"
    assert counts["held-out pairs holding a training sentence"]["test"] == 1000 - len(splits["test_unseen"]) > 0
    assert len(splits["train"]) > 10000  # the training side keeps its pairs
    assert {"fever", "key_fact", "hard", "multihop", "qa_paragraphs"} <= set(counts["built"])
    assert all(0 <= counts["dropped"][k] <= counts["built"][k] for k in counts["built"])


def test_an_unknown_dedup_mode_is_refused():
    with pytest.raises(ValueError, match="dedup must be one of"):
        P.fever_nli_build(dedup="both")


# --------------------------------------------------------------------------- 4. multi-hop hard negatives


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def test_multihop_pairs_label_the_fact_by_its_presence():
    pairs = P.build_multihop_pairs(seed=0)
    kinds = Counter((p.kind, p.label) for p in pairs)
    assert kinds[("multihop-other-step", "neutral")] == kinds[("multihop-both-steps", "entailment")] > 50
    assert kinds[("multihop-same-entity", "neutral")] == kinds[("multihop-fact-in-paragraph", "entailment")] > 10
    for p in pairs:
        assert (_norm(p.hypothesis) in _norm(p.premise)) == (p.label == "entailment"), p
    assert P.build_multihop_pairs(seed=0) == pairs


def test_multihop_pairs_come_from_training_questions_only(shared_data):
    from covlib import data

    shared_data("hotpotqa", "hotpot_dev_distractor_sample100.jsonl")
    pairs = P.build_multihop_pairs(seed=0)
    training_ids = {e.id for e in P.multihop_training_questions()}
    assert {p.source.split(":")[1] for p in pairs} <= training_ids
    evaluation = data.load_hotpotqa() + data.load_adv_hotpotqa(split="all")
    assert not training_ids & {e.id for e in evaluation}
    texts = "\n".join(_norm(t) for p in pairs for t in (p.premise, p.hypothesis))
    used = [s for e in evaluation for para in e.paragraphs for s in para.sentences
            if len(s.split()) >= 6 and _norm(s) in texts]
    assert not used


@pytest.mark.slow
def test_multihop_pairs_reach_training(default_build):
    splits, counts = default_build
    multihop = [p for p in splits["train"] if p.kind.startswith("multihop-")]
    assert 0 < len(multihop) <= counts["built"]["multihop"]
    assert not [p for p in splits["calibration"] + splits["test"] if p.kind.startswith("multihop-")]


# --------------------------------------------------------------------------- 5. build_judge --device


@pytest.fixture(scope="module")
def build_judge():
    from covlib.core import paths

    spec = importlib.util.spec_from_file_location("build_judge", paths.code_root() / "scripts" / "build_judge.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_build_judge_takes_a_device_and_the_multihop_share(build_judge):
    args = build_judge.parse_args([])
    assert args.device == "" and args.multihop_fraction == 0.2 and args.dedup == "held-out"
    args = build_judge.parse_args(["--device", "cpu", "--multihop-fraction", "0.1", "--dedup", "none"])
    assert args.device == "cpu" and args.multihop_fraction == 0.1 and args.dedup == "none"
    for bad in (["--device", "tpu"], ["--multihop-fraction", "-1"], ["--dedup", "yes"]):
        with pytest.raises(SystemExit):
            build_judge.parse_args(bad)


def test_the_card_records_the_device_and_what_dedup_dropped(build_judge, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")  # restored after the test
    args = build_judge.parse_args(["--device", "cpu", "--multihop-fraction", "0.1"])
    args.device = build_judge.resolve_device(args.device)
    import os

    assert args.device == "cpu" and os.environ["CUDA_VISIBLE_DEVICES"] == ""  # the Trainer sees no GPU
    counts = {"mode": "held-out", "built": {"fever": 10}, "dropped": {"fever": 3}}
    card = build_judge.card_fields(args, counts)
    assert card == {"device": "cpu", "dedup": counts}
    settings = build_judge.build_settings(args, "abc")
    assert settings["multihop_fraction"] == 0.1 and settings["dedup"] == "held-out" and "device" not in settings


def test_cuda_is_refused_where_torch_sees_no_gpu(build_judge, monkeypatch):
    monkeypatch.setattr(build_judge, "default_device", lambda: "cpu")
    with pytest.raises(SystemExit, match="--device cuda"):
        build_judge.resolve_device("cuda")
    assert build_judge.resolve_device("") == "cpu"
    monkeypatch.setattr(build_judge, "default_device", lambda: "cuda")
    assert build_judge.resolve_device("") == build_judge.resolve_device("cuda") == "cuda"


def test_the_decision_rule_is_chosen_on_the_development_pairs_only(build_judge, monkeypatch):
    """build_judge's rule: the argmax, or the threshold that beats its F1 on the development pairs; the frozen test set
    is never read while choosing (loading it here fails the test)."""
    from covlib import nli
    from covlib.nli import evaluation, labelled

    def forbidden():
        raise AssertionError("the frozen test set was read while choosing the decision rule")

    monkeypatch.setattr(labelled, "load_keyfact_test_pairs", forbidden)
    monkeypatch.setattr(nli, "load_keyfact_test_pairs", forbidden)
    judge = nli.get_judge("overlap")
    rule = build_judge.dev_rule(judge)
    dev = P.load_keyfact_pairs()
    said, gold = evaluation.decisions(judge, dev)
    probs = nli.probabilities([p.premise for p in dev], [p.hypothesis for p in dev], judge)
    argmax_f1 = evaluation.decision_scores(probs.argmax(axis=1) == 0, gold, [p.extra["question_id"] for p in dev])
    assert rule["dev_f1_argmax"] == pytest.approx(argmax_f1["entail_f1"]["value"] / 100)
    assert rule["n_pairs"] == len(dev) == 359
    if rule["rule"] == "dev-threshold":
        assert rule["f1"] > rule["dev_f1_argmax"] and 0.3 < rule["threshold"] < 1
    else:
        assert rule["dev_best_threshold"]["f1"] <= rule["dev_f1_argmax"] and "threshold" not in rule


def test_a_published_model_is_readable_by_the_unprivileged_grader(tmp_path):
    """safetensors writes its file through a private temporary (mode 0600); `make judge` as root then left weights the
    grading sandbox's unprivileged uid could not read, and every grading run refused. Publishing opens them up as far
    as the umask allows."""
    import os
    import stat

    from covlib.generation import training

    def save(folder):
        weights = folder / "model.safetensors"
        weights.write_bytes(b"weights")
        weights.chmod(0o600)
        (folder / "sub").mkdir(mode=0o700)
        (folder / "sub" / "x.json").write_text("{}")
        (folder / "sub" / "x.json").chmod(0o600)

    previous = os.umask(0o022)
    try:
        out, work = tmp_path / "judge", tmp_path / "work"
        work.mkdir()
        training._publish(out, work, {"name": "judge"}, save)
    finally:
        os.umask(previous)
    for path in (out / "model.safetensors", out / "sub" / "x.json", out / "card.json"):
        assert stat.S_IMODE(path.stat().st_mode) & 0o044 == 0o044, path
    assert stat.S_IMODE((out / "sub").stat().st_mode) & 0o055 == 0o055
    assert not work.exists()


# --------------------------------------------------------------------------- minimal pairs of Adversarial HotpotQA


def test_swap_back_takes_the_copys_fact_and_keeps_the_gold_names():
    from covlib.nli.paragraphs import _swap_back

    gold = "Jolyon Palmer (born 20 January 1991) is a British racing driver."
    assert _swap_back(gold, "Barnes House (born 20 January 1969) is a British racing driver.", "Jolyon Palmer") == (
        "Jolyon Palmer (born 20 January 1969) is a British racing driver.")
    # a possessive is still the name; only names differ -> no hybrid; a dropped word is not a changed fact
    assert _swap_back("Pärt's music is tonal.", "Agarwal's music is atonal.", "Arvo Pärt") == "Pärt's music is atonal."
    assert _swap_back(gold, gold.replace("Jolyon Palmer", "Barnes House"), "Jolyon Palmer") is None
    assert _swap_back(gold, gold.replace(" British", ""), "Jolyon Palmer") is None


def test_adversarial_pairs_never_call_a_sentence_of_the_premise_neutral_and_skip_the_test_questions(shared_data):
    from covlib import data
    from covlib.nli.paragraphs import _norm, adversarial_training_questions, build_adversarial_pairs

    shared_data("hotpotqa_adv", "sim_dev.json")
    pairs = build_adversarial_pairs()
    assert len(pairs) == len({(p.premise, p.hypothesis, p.label) for p in pairs}) > 500
    for p in pairs:
        if p.label == "neutral":  # nothing a paragraph of the premise says is called unstated
            assert _norm(p.hypothesis) not in _norm(p.premise), p
        else:
            assert _norm(p.hypothesis) in _norm(p.premise)
    trained = {e.id for e in adversarial_training_questions()}
    assert len(trained) == 88 and not trained & {e.id for e in data.load_adv_hotpotqa(split="test")}
    assert {p.source.split(":")[1] for p in pairs} <= trained
