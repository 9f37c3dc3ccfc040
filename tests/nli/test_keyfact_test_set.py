"""The frozen key-fact test set: its hash, its size and label counts, its questions apart from the development
pairs', and what its header says, recomputed from the file."""

from __future__ import annotations

import json
import shutil
from collections import Counter

import pytest

from covlib.core import paths
from covlib.nli import labelled as L
from covlib.nli.base import LABELS


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    lines = L.keyfact_test_path().read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines[1:]]


def test_the_file_is_the_one_hashed_before_any_judge_ran(rows):
    assert L.file_sha256(L.keyfact_test_path()) == L.KEYFACT_TEST_SHA256
    pairs = L.load_keyfact_test_pairs()
    assert len(pairs) == len(rows)
    assert (paths.code_root() / L.KEYFACT_TEST_GUIDELINE).is_file()


def test_a_changed_file_is_refused(tmp_path, monkeypatch):
    copy = tmp_path / L.KEYFACT_TEST_PAIRS
    shutil.copy(L.keyfact_test_path(), copy)
    text = copy.read_text(encoding="utf-8").replace('"label": "neutral"', '"label": "entailment"', 1)
    copy.write_text(text, encoding="utf-8")
    monkeypatch.setattr(paths, "resources_dir", lambda: tmp_path)
    with pytest.raises(ValueError, match="must not change"):
        L.load_keyfact_test_pairs()


def test_enough_pairs_of_each_label_from_questions_the_development_pairs_do_not_use(rows):
    counts = Counter(r["label"] for r in rows)
    assert len(rows) >= 400 and counts["entailment"] >= 60 and counts["contradiction"] >= 30
    assert set(counts) <= set(LABELS)
    dev = {p.extra["question_id"] for p in L.load_keyfact_pairs()}
    test = {r["question_id"] for r in rows}
    assert len(test) == 40 and not dev & test
    assert not {(p.premise, p.hypothesis) for p in L.load_keyfact_pairs()} & {(r["premise"], r["hypothesis"]) for r in rows}
    assert {r["setting"] for r in rows} == {"answer", "sentence"}
    assert all(r["weight"] >= 1 and r["stratum"] in ("conflict", "high", "mid", "low") for r in rows)
    # the weights bring each stratum back to its size among the candidates: equal within a stratum
    for stratum in {r["stratum"] for r in rows}:
        assert len({r["weight"] for r in rows if r["stratum"] == stratum}) == 1


def test_the_header_says_what_the_labels_show(rows):
    first = L.keyfact_test_path().read_text(encoding="utf-8").splitlines()[0]
    assert json.loads(first) == {"provenance": L.KEYFACT_TEST_PROVENANCE}
    agree = sum(r["labels"][0] == r["labels"][1] for r in rows)
    split = [r for r in rows if r["labels"][0] != r["labels"][1]]
    assert f"they agree on {agree} of {len(rows)} pairs" in L.KEYFACT_TEST_PROVENANCE
    assert f"the {len(split)} splits adjudicated" in L.KEYFACT_TEST_PROVENANCE
    assert f"the {len({r['question_id'] for r in rows})} shared HotpotQA questions" in L.KEYFACT_TEST_PROVENANCE
    assert all(r["why"] for r in split) and all(r["why"] for r in rows if r["label"] != "neutral")
    n = len(rows)
    a, b = Counter(r["labels"][0] for r in rows), Counter(r["labels"][1] for r in rows)
    expected = sum(a[k] * b[k] for k in LABELS) / n / n
    kappa = (agree / n - expected) / (1 - expected)
    assert f"Cohen's kappa {kappa:.2f}" in L.KEYFACT_TEST_PROVENANCE
