"""The shipped key facts, their review sheet and the key-fact NLI pairs: what made them, said in the same words
in each file's header, the notebooks and the docs; and how much wording the key facts share with the gold
supporting sentences, recomputed from the real files."""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from pathlib import Path

import nbformat
import pytest

from covlib import data
from covlib.core import paths
from covlib.nli import labelled as L
from covlib.papers.credibility import key_facts as K

ROOT = Path(__file__).resolve().parents[3]
NOTEBOOKS = ("04_credibility_models", "05_knowledge_precision", "06_knowledge_recall", "07_reflection_completion")
# Which notebooks quote which file's provenance (the credibility notebooks both; 00b, the judges', the pairs').
NOTEBOOK_QUOTES = {**{name: ("AGENT_KEY_FACTS_PROVENANCE", "KEYFACT_PAIRS_PROVENANCE") for name in NOTEBOOKS},
                   "00b_nli_judges": ("KEYFACT_PAIRS_PROVENANCE", "KEYFACT_TEST_PROVENANCE")}
# Which docs quote which file's provenance.
QUOTED_IN = {
    "AGENT_KEY_FACTS_PROVENANCE": ("docs/credibility.md", "docs/data.md"),
    "AGENT_REVIEW_PROVENANCE": ("docs/credibility.md", "docs/data.md"),
    "KEYFACT_PAIRS_PROVENANCE": ("docs/judges.md", "docs/data.md"),
    "KEYFACT_TEST_PROVENANCE": ("docs/judges.md", "docs/data.md"),
}
# Claims about the project's own data that no record supports: nobody wrote, checked or labelled them by hand, no
# person. (The papers' own human studies, the rating sheet a reader fills and Ye & Durrett's factuality labels, the one
# people-labelled set, `covlib.nli.people`, are by people and say so in other words.)
UNSUPPORTED = re.compile(r"written by hand|hand-written key facts|hand key facts|hand-labell?ed|labell?ed by hand|"
                         r"hand-checked|by two people|two labell?ers|(?:written|checked|reviewed|labell?ed) by people",
                         re.IGNORECASE)
# Agreement with people is supported only where it is about Ye & Durrett's FACTUAL labels, named within a few lines.
PEOPLE_CLAIM = re.compile(r"agree[sd]?(?: best| better)? with people|against people's", re.IGNORECASE)
PEOPLE_SOURCE = re.compile(r"FACTUAL|Ye & Durrett|Ye and Durrett|covlib\.nli\.people|people\.PRIMARY")


def unsupported(text: str) -> list[str]:
    """The claims of `text` no record supports: hand work or people on the project's own data, and an agreement with
    people that names no people-labelled source nearby."""
    return UNSUPPORTED.findall(text) + [m.group() for m in PEOPLE_CLAIM.finditer(text)
                                        if not PEOPLE_SOURCE.search(text[max(0, m.start() - 400): m.end() + 400])]
# Where such a claim could be made: notebooks, docs, the README and course notes, module and script docstrings and
# comments, the package metadata. No file is exempt.
SCANNED = ("notebooks/*.py", "notebooks/*.ipynb", "notebooks/*.md", "docs/*.md", "README.md", "covlib/**/*.py",
           "scripts/*.py", "pyproject.toml")
PAIRS_HASH_V1 = "b1b77e7747f46129631d7fcfddf44355a90ae4e8eac24f036f26b32702a95fd1"  # premise, hypothesis, label


def _provenance() -> dict[str, str]:
    return {"AGENT_KEY_FACTS_PROVENANCE": K.AGENT_KEY_FACTS_PROVENANCE,
            "AGENT_REVIEW_PROVENANCE": K.AGENT_REVIEW_PROVENANCE,
            "KEYFACT_PAIRS_PROVENANCE": L.KEYFACT_PAIRS_PROVENANCE,
            "KEYFACT_TEST_PROVENANCE": L.KEYFACT_TEST_PROVENANCE}


def _markdown(name: str) -> str:
    nb = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
    return "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")


@pytest.fixture
def hotpot(shared_data):
    return data.load_hotpotqa(shared_data("hotpotqa", "hotpot_dev_distractor_sample100.jsonl"))


# --------------------------------------------------------------------------- one provenance text per file


def test_each_files_header_holds_its_provenance():
    facts = K.load_key_facts(K.key_facts_path("agents"))
    assert {f.author for f in facts} == {K.AGENT_KEY_FACTS_PROVENANCE}
    header, _ = K.read_agent_review()
    assert header["provenance"] == K.AGENT_REVIEW_PROVENANCE
    first = (paths.resources_dir() / L.KEYFACT_PAIRS).read_text(encoding="utf-8").splitlines()[0]
    assert json.loads(first) == {"provenance": L.KEYFACT_PAIRS_PROVENANCE}


def test_the_shipped_source_is_named_for_the_agents_that_made_it_and_the_old_key_is_refused():
    assert K.DEFAULT_KEY_FACTS == "agents" and "agents" in K.SOURCES and "hand" not in K.SOURCES
    assert (K.AGENT_KEY_FACTS, K.AGENT_REVIEW_SHEET) == ("key_facts_agents-v1.jsonl", "key_facts_agents-review.csv")
    assert K.key_facts_path("agents") == paths.resources_dir() / K.AGENT_KEY_FACTS
    assert not list(paths.resources_dir().glob("*hand*"))
    facts = K.load_key_facts(K.key_facts_path("agents"))
    assert len(facts) == 100 and {f.source for f in facts} == {"agents"}
    assert "key_facts_agents-v1.jsonl" in K.AGENT_REVIEW_PROVENANCE and "hand" not in K.AGENT_REVIEW_PROVENANCE
    with pytest.raises(ValueError, match="'hand' was renamed to 'agents'"):
        K.build_key_facts("hand", [])


def test_notebooks_and_docs_quote_the_provenance_in_the_same_words():
    texts = _provenance()
    for name, consts in NOTEBOOK_QUOTES.items():
        source = (ROOT / "notebooks" / f"{name}.py").read_text(encoding="utf-8")
        markdown = _markdown(name)
        for const in consts:
            assert texts[const] in source and texts[const] in markdown, f"{name} does not quote {const}"
    for name in NOTEBOOKS:
        source = (ROOT / "notebooks" / f"{name}.py").read_text(encoding="utf-8")
        params = next(line for line in source.splitlines() if line.startswith("key_facts: str"))
        assert "quoted below" in params
    for const, docs in QUOTED_IN.items():
        for doc in docs:
            assert texts[const] in (ROOT / doc).read_text(encoding="utf-8"), f"{doc} does not quote {const}"


def test_no_notebook_or_doc_claims_a_person_or_hand_work_the_record_does_not_show():
    files = sorted({f for pattern in SCANNED for f in ROOT.glob(pattern)})
    assert len(files) > 50 and ROOT / "docs" / "library.md" in files
    claims = {str(f.relative_to(ROOT)): unsupported(f.read_text(encoding="utf-8")) for f in files}
    offending = {f: c for f, c in claims.items() if c}
    assert not offending, f"claims no record supports: {offending}"
    for text in _provenance().values():
        assert not unsupported(text)
    assert unsupported("The judge agrees with people on the key-fact pairs.") == ["agrees with people"]
    assert not unsupported("Against Ye & Durrett's FACTUAL labels the judge agrees best with people.")


def test_the_credibility_tables_note_names_who_labelled_the_pairs(isolated_cache):
    from covlib.nli import evaluation as nli_eval

    from covlib.nli.people import factuality_path

    note = nli_eval.judge_note("overlap")
    assert "key-fact pairs labelled by AI coding agents" in note
    if not factuality_path().is_file():
        assert "agreement with people's labels is not measured here" in note
        return
    assert "people's FACTUAL labels of 252 GPT-3 rationales" in note and "Ye & Durrett" in note  # their people's
    assert not unsupported(note)


# --------------------------------------------------------------------------- the pairs stay frozen, joined by v1 wording


def test_keyfact_pairs_are_frozen_and_join_the_facts_through_their_first_wording():
    pairs = L.load_keyfact_pairs()
    assert len(pairs) == 359 and L.pairs_hash(pairs) == PAIRS_HASH_V1  # labels and texts untouched
    _, rows = K.read_agent_review()
    kept = [r for r in rows if r["key_fact"]]
    fact_of = {r["v1_key_fact"]: r["fact_id"] for r in kept}
    assert all(p.hypothesis in fact_of for p in pairs)  # every pair maps to a fact id
    rewritten = {r["v1_key_fact"] for r in kept if r["key_fact"] != r["v1_key_fact"]}
    n_pairs = sum(p.hypothesis in rewritten for p in pairs)
    assert f"{len(rewritten)} of them" in L.KEYFACT_PAIRS_PROVENANCE
    assert f"{n_pairs} of the {len(pairs)} pairs" in L.KEYFACT_PAIRS_PROVENANCE
    agree = sum(p.extra["labels"][0] == p.extra["labels"][1] for p in pairs)
    assert f"they agree on {agree} pairs" in L.KEYFACT_PAIRS_PROVENANCE


def test_a_provenance_record_is_a_header_only_on_the_first_line(tmp_path):
    pair = {"premise": "A cat sat.", "hypothesis": "A cat sat.", "label": "entailment"}
    path = tmp_path / "pairs.jsonl"
    path.write_text(json.dumps({"provenance": "made by a test"}) + "\n" + json.dumps(pair) + "\n", encoding="utf-8")
    assert [p.premise for p in L.load_pairs(path)] == ["A cat sat."]
    path.write_text(json.dumps(pair) + "\n" + json.dumps({"provenance": "made by a test"}) + "\n", encoding="utf-8")
    with pytest.raises(Exception, match="premise"):
        L.load_pairs(path)


# --------------------------------------------------------------------------- overlap with the gold sentences


def _brute_longest(fact: list[str], sentence: list[str]) -> int:
    return max((n for i in range(len(fact)) for j in range(len(sentence)) for n in range(1, len(fact) - i + 1)
                if fact[i:i + n] == sentence[j:j + n]), default=0)


def test_longest_shared_run_matches_a_brute_force_count():
    rng = random.Random(0)
    for _ in range(300):
        fact = [rng.choice("abcd") for _ in range(rng.randint(0, 9))]
        sentences = [[rng.choice("abcd") for _ in range(rng.randint(0, 9))] for _ in range(rng.randint(1, 3))]
        assert K.longest_shared_run(" ".join(fact), [" ".join(s) for s in sentences]) == max(
            _brute_longest(fact, s) for s in sentences)
    # each run within one sentence; words are letters and digits, case and punctuation ignored
    assert K.longest_shared_run("Bath, Maine is far.", ["He was from Bath", "Maine is far"]) == 3
    assert K.shared_runs("William King was from Bath, Maine.", ["a statesman from Bath, Maine."], 2) == [
        "from Bath Maine"]


def test_copied_runs_keep_names_numbers_and_the_questions_words():
    gold = ["Dollfuss was assassinated as part of a failed coup attempt by Nazi agents in 1934."]
    keep = ("one of which was assassinated as part of what?", "a failed coup attempt")
    assert K.copied_runs("Nazi agents assassinated Engelbert Dollfuss in 1934, in a failed coup attempt.", gold,
                         keep) == []
    assert K.copied_runs("Dollfuss was killed in 1934 by Nazi agents in a plot.", gold, keep) == ["by Nazi agents in"]
    titles = ['"The Dark Tower" series of novels contain references to numerous locations.']
    assert K.copied_runs('Stephen King wrote "The Dark Tower" series.', titles) == ["The Dark Tower series"]
    assert K.copied_runs('Stephen King wrote "The Dark Tower" books.', titles) == []  # a quoted title is a name
    assert K.overlap_distribution([0, 1, 2, 3, 4, 5, 9]) == dict.fromkeys(K.OVERLAP_BINS, 1) | {"5+": 2}


def test_shipped_facts_copy_no_wording_and_the_sheet_and_docs_report_the_real_counts(hotpot):
    facts = K.load_key_facts(K.key_facts_path("agents"))
    header, rows = K.read_agent_review()
    kept = [r for r in rows if r["key_fact"]]
    assert list(rows[0]) == list(K.AGENT_REVIEW_COLUMNS)
    by_question: dict[str, list[str]] = {}
    for r in kept:
        by_question.setdefault(r["question_id"], []).append(r["v1_key_fact"])
    first = [K.KeyFacts(f.question_id, f.question, f.answer, by_question[f.question_id], f.source, "v1")
             for f in facts]
    now, before = K.gold_overlap(facts, hotpot), K.gold_overlap(first, hotpot)
    # ids stable: the sheet's rows, the shipped facts and the first wording line up fact by fact
    assert [r["fact_id"] for r in kept] == [o["fact_id"] for o in now] == [o["fact_id"] for o in before]
    assert [r["key_fact"] for r in kept] == [o["key_fact"] for o in now]
    for r, a, b in zip(kept, now, before):
        assert (int(r["run"]), r["shared_run"], int(r["wording_run"]), r["wording_shared"]) == (
            a["run"], a["shared_run"], a["wording_run"], a["wording_shared"]), r["fact_id"]
        assert (int(r["run_v1"]), int(r["wording_run_v1"])) == (b["run"], b["wording_run"]), r["fact_id"]
        assert (r["rewrite"] == "kept") == (r["key_fact"] == r["v1_key_fact"]), r["fact_id"]
    counts = {"run": [o["run"] for o in now], "run_v1": [o["run"] for o in before],
              "wording_run": [o["wording_run"] for o in now], "wording_run_v1": [o["wording_run"] for o in before]}
    doc = (ROOT / "docs" / "credibility.md").read_text(encoding="utf-8")
    for key, runs in counts.items():
        dist = K.overlap_distribution(runs)
        assert header[key] == K.format_distribution(dist), key
        row = re.search(rf"^\| [^|\n]*\(`{key}`\) \|(.*)\|$", doc, re.M)
        assert row and [c.strip() for c in row.group(1).split("|")] == [str(v) for v in dist.values()], key
    # the first wording kept 39 facts at three or four words of copied wording, none at five; now none at three
    assert Counter(min(n, 5) for n in counts["wording_run_v1"] if n >= 3) == {3: 20, 4: 19}
    assert max(counts["wording_run"]) <= 2
    rewritten = [r for r in kept if r["key_fact"] != r["v1_key_fact"]]
    assert f"then {len(rewritten)} facts were rewritten" in K.AGENT_KEY_FACTS_PROVENANCE
    assert all(int(r["wording_run_v1"]) < 3 or r in rewritten for r in kept)  # every copied fact was rewritten


def test_rewritten_facts_keep_their_numbers_and_their_answer(hotpot):
    answers = {ex.id: ex.answer for ex in hotpot}
    numbers = lambda text: {w for w in K.overlap_words(text) if any(ch.isdigit() for ch in w)}  # noqa: E731
    for r in K.read_agent_review()[1]:
        if r["key_fact"] and r["key_fact"] != r["v1_key_fact"]:
            assert numbers(r["v1_key_fact"]) <= numbers(r["key_fact"]), r["fact_id"]
            answer = set(K.overlap_words(answers[r["question_id"]]))
            assert answer & set(K.overlap_words(r["v1_key_fact"])) <= set(K.overlap_words(r["key_fact"])), r["fact_id"]
