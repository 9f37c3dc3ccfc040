"""The judges against people: Ye & Durrett's FACTUAL labels loaded from the real file, agreement measured by whole
questions only, cross-validation that never puts a question on both sides, provenance said in the same words."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from covlib.nli import people as H

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def rationales():
    if not H.factuality_path().is_file():
        pytest.skip(f"people's labels not found at {H.factuality_path()}")
    return H.load_factuality()


def test_the_file_loads_whole_questions_with_people_labels(rationales):
    assert len(rationales) == 252 and len({r.qas_id for r in rationales}) == 126
    assert sum(r.factual for r in rationales) == 192  # the count: 192 factual, 60 not
    assert {r.format for r in rationales} == set(H.FORMATS)
    assert all(len(r.paragraphs) == 4 and r.rationale for r in rationales)


def test_agreement_is_measured_over_whole_questions_only(rationales):
    score = np.array([len(r.rationale) for r in rationales], dtype=float)
    decided = score > np.median(score)
    got = H.people_agreement(rationales, score, decided)
    for est in got.values():  # every interval resamples the 126 questions, not the 252 rationales
        assert est["clusters"] == 126 and est["n"] == 252 and est["low"] <= est["value"] <= est["high"]
    part = rationales[1:]  # one question left with one rationale: not a measure by question
    with pytest.raises(ValueError, match="1 of 126 questions are not whole"):
        H.people_agreement(part, score[1:], decided[1:])
    twice = rationales + rationales[:1]
    with pytest.raises(ValueError, match="not whole"):
        H.people_agreement(twice, np.append(score, 0.0), np.append(decided, True))


def test_folds_split_by_question_and_fit_without_the_test_fold(rationales):
    folds = H.question_folds(rationales, k=5, seed=0)
    seen = np.concatenate([test for _, test in folds])
    assert sorted(seen) == list(range(len(rationales)))
    for train, test in folds:
        assert not {rationales[i].qas_id for i in train} & {rationales[i].qas_id for i in test}
    # A feature that names each rationale's own label is useless out of fold only if the fit never sees the fold:
    # flip the labels of one fold and that fold's out-of-fold predictions do not move.
    features = np.array([[float(r.factual), len(r.rationale) / 100] for r in rationales])
    before = H.cross_validated(rationales, features, k=5, seed=0)
    _, test = folds[0]
    flipped = [r if i not in set(test) else H.Rationale(**{**r.__dict__, "factual": not r.factual})
               for i, r in enumerate(rationales)]
    after = H.cross_validated(flipped, features, k=5, seed=0)
    assert np.allclose(before[test], after[test]) and not np.allclose(before, after)


def test_claims_drop_the_openers():
    text = 'First, Cashmere Cat released "Love Incredible" through Interscope. Second, Interscope is a label.'
    assert H.claims(text) == ['Cashmere Cat released "Love Incredible" through Interscope.', "Interscope is a label."]
    assert H.claims("Second, the answer is three") == ["The answer is three"]


def test_overlap_reads_people_better_claim_by_claim_against_one_paragraph(rationales, isolated_cache):
    # The overlap heuristic on the whole rationale against the four paragraphs together is near chance; each claim
    # against its best paragraph (what an entity-swapped copy cannot give) ranks people's labels better.
    whole = H.people_agreement(rationales, *H.factual_scores(rationales, "overlap", "whole"))
    aligned = H.people_agreement(rationales, *H.factual_scores(rationales, "overlap", "aligned"))
    assert whole["auc"]["value"] < 0.66 < 0.70 < aligned["auc"]["value"]


def test_bad_lines_are_refused_with_their_place(tmp_path, rationales):
    good = {**rationales[0].__dict__, "paragraphs": list(rationales[0].paragraphs)}
    path = tmp_path / "f.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "factual": "yes"}) + "\n")
    with pytest.raises(ValueError, match=r"f.jsonl, line 2, field 'factual': field 'factual' should be bool"):
        H.load_factuality(path)
    path.write_text(json.dumps({**good, "paragraphs": good["paragraphs"][:3]}) + "\n")
    with pytest.raises(ValueError, match="f.jsonl, line 1, field 'paragraphs': 3 paragraphs, not four"):
        H.load_factuality(path)
    path.write_text("{not json\n")
    with pytest.raises(ValueError, match="f.jsonl, line 1: invalid JSON line"):
        H.load_factuality(path)


def test_the_provenance_is_quoted_in_the_same_words():
    for where in ("docs/judges.md", "docs/data.md", "notebooks/00b_nli_judges.py", "notebooks/00b_nli_judges.ipynb"):
        text = (ROOT / where).read_text(encoding="utf-8")
        if where.endswith(".ipynb"):
            text = "\n".join("".join(c["source"]) for c in json.loads(text)["cells"])
        assert H.FACTUALITY_PROVENANCE in " ".join(text.replace("# ", " ").split()), where
