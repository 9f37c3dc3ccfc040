"""Dataset loaders: real shared records, small records written into the tests in each official format, bad input."""

from __future__ import annotations

import json
import sys
import types

import pytest

from covlib import data
from covlib.core.records import DataError, Example, Passage


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_json(path, value):
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


# --------------------------------------------------------------------------- sentence splitter


@pytest.mark.parametrize(
    "text, expected",
    [
        ("One. Two! Three? Four.", ["One.", "Two!", "Three?", "Four."]),
        ("J. K. Rowling wrote it. Dr. Smith agreed.", ["J. K. Rowling wrote it.", "Dr. Smith agreed."]),
        ("He moved to the U.S. in 1990. It grew 3.5%.", ["He moved to the U.S. in 1990.", "It grew 3.5%."]),
        ("It was No. 5 on Jan. 12. Then it fell.", ["It was No. 5 on Jan. 12.", "Then it fell."]),
        ('He said "Go." Then he left.', ['He said "Go."', "Then he left."]),
        ("Mt. Everest is high. St. Louis is a city.", ["Mt. Everest is high.", "St. Louis is a city."]),
        ("Carey Spicer, Jr. (1909 - 1996) played. He won.", ["Carey Spicer, Jr. (1909 - 1996) played.", "He won."]),
        ("Teen Titans Go! is a series.", ["Teen Titans Go! is a series."]),
        ("  ", []),
        ("no final stop", ["no final stop"]),
    ],
)
def test_split_sentences(text, expected):
    assert data.split_sentences(text) == expected


def test_split_sentences_agrees_with_gold_hotpot_splits(shared_data):
    path = shared_data("hotpotqa", "hotpot_dev_distractor_sample100.jsonl")
    paragraphs = [p for e in data.load_hotpotqa(path) for p in e.paragraphs]
    agree = sum(data.split_sentences(p.text) == [s for s in p.sentences if s] for p in paragraphs)
    assert agree / len(paragraphs) > 0.93  # the rest are mostly errors in the gold splits ("Go!" split off)


# --------------------------------------------------------------------------- real shared data


def test_adv_hotpotqa_splits(shared_data):
    path = shared_data("hotpotqa_adv", "sim_dev.json")
    everything = data.load_adv_hotpotqa(path, split="all")
    calibration = data.load_adv_hotpotqa(path, split="calibration")
    test = data.load_adv_hotpotqa(path)
    assert (len(everything), len(calibration), len(test)) == (308, 58, 250)
    assert [e.id for e in calibration + test] == [e.id for e in everything]
    assert test[0].metadata["split"] == "test"
    for example in everything:
        assert len(example.paragraphs) == 4
        assert sum(p.is_supporting for p in example.paragraphs) == 2
        assert [p.title for p in example.paragraphs].count(data.ADVERSARIAL_TITLE) == 2
        assert example.metadata["unlocated_rationale"] == []
        for title, index in example.supporting_facts:
            paragraph = next(p for p in example.paragraphs if p.title == title)
            assert paragraph.is_supporting and 0 <= index < len(paragraph.sentences)


def test_adv_hotpotqa_record_and_alt_answers(shared_data):
    path = shared_data("hotpotqa_adv", "sim_dev.json")
    first = data.load_adv_hotpotqa(path, split="calibration")[0]
    assert first.id == "5ab52a255542996a3a96a048"
    assert first.answers == ["Sochi, Russia", "In Sochi, Russia"]  # gold first, then alt_answers.jsonlines
    assert first.supporting_facts == [
        ("Ukraine at the 2014 Winter Olympics", 0),
        ("Ukraine at the 2014 Winter Olympics", 1),
        ("Oksana Baiul", 0),
        ("Oksana Baiul", 1),
    ]
    assert first.supporting_titles == ["Ukraine at the 2014 Winter Olympics", "Oksana Baiul"]
    assert first.metadata["rationale"][2]["title"] == "Oksana Baiul"
    plain = data.load_adv_hotpotqa(path, split="calibration", alt_answers=None)[0]
    assert plain.answers == ["Sochi, Russia"]


def test_adv_hotpotqa_fewshot_file_needs_split_all(shared_data):
    path = shared_data("hotpotqa_adv", "sim_train.json")
    assert len(data.load_adv_hotpotqa(path, split="all")) == 30
    with pytest.raises(DataError, match="split='all'"):
        data.load_adv_hotpotqa(path, split="test")


def test_hotpotqa_distractor_sample(shared_data):
    examples = data.load_hotpotqa(shared_data("hotpotqa", "hotpot_dev_distractor_sample100.jsonl"))
    assert len(examples) == 100
    assert all(len(e.paragraphs) == 10 for e in examples)
    first = examples[0]
    assert first.metadata["type"] == "bridge" and first.metadata["level"] == "hard"
    assert first.supporting_facts == [("VIVA Media", 0), ("Gesellschaft mit beschränkter Haftung", 0)]
    assert [p.title for p in first.paragraphs if p.is_supporting] == [t for t, _ in first.supporting_facts]
    assert first.paragraphs[1].sentences[1].startswith("is a Polish")  # stripped, indices kept


def test_2wikimultihop(shared_data):
    train = data.load_2wikimultihop(shared_data("2wikimultihop", "train_subset.json"))
    dev = data.load_2wikimultihop(shared_data("2wikimultihop", "dev_first1000_noctx.json"))
    assert len(train) == 6 and len(dev) == 1000
    assert train[0].id == "6f4fc1b4089b11ebbd78ac1f6bf848b6" and train[0].metadata["type"] == "comparison"
    assert train[0].paragraphs and all(t in [p.title for p in train[0].paragraphs] for t in train[0].supporting_titles)
    assert dev[1].id == "2wiki-0001" and dev[1].answers == ["Mask of Fu Manchu", "The Mask of Fu Manchu"]
    assert all(e.answers and not e.paragraphs for e in dev)


def test_fever_sampled_ids_in_file_order(shared_data):
    ids_path = shared_data("fever", "sampled_ids.json")
    examples = data.load_fever(shared_data("fever", "paper_test_processed.jsonl"), ids=ids_path)
    assert len(examples) == 1000
    assert [e.id for e in examples] == [str(i) for i in json.loads(ids_path.read_text())]
    assert {e.label for e in examples} == set(data.FEVER_LABELS)
    for example in examples:
        assert example.answers == [] and example.answer == example.label
        if example.label == "NOT ENOUGH INFO":
            assert example.paragraphs == [] and example.supporting_facts == []
        else:
            assert len(example.paragraphs) == 1 and example.paragraphs[0].is_supporting
    assert data.load_fever()[0].id == examples[0].id  # defaults are the same files


def test_fever_all_and_train(shared_data):
    everything = data.load_fever(shared_data("fever", "paper_test_processed.jsonl"), ids=None)
    assert len(everything) == 9999
    psych = next(e for e in everything if e.id == "93974")
    assert psych.paragraphs[0].title == "Psych (season 2)" and psych.supporting_facts == [("Psych (season 2)", 0)]
    train = data.load_fever(shared_data("fever", "train_subset.jsonl"), split="train")
    assert len(train) == 12 and train[0].question == "Reg Watson is a current television producer."
    assert train[0].metadata["verifiable"] == "VERIFIABLE"


def test_nq_open_and_web_questions(shared_data):
    nq = data.load_nq_open(shared_data("nq_open", "webglm_nq_open400.jsonl"))
    webq = data.load_web_questions(shared_data("web_questions", "webglm_web_questions400.jsonl"))
    assert len(nq) == 400 and len(webq) == 400
    assert nq[0].id == "nq-0000" and nq[399].id == "nq-0399" and webq[0].id == "webq-0000"
    assert nq[0].answers == ["Akbar the Great", "Babur"]
    assert webq[0].answers == ["Deborah Read"]
    assert all(e.answers for e in nq + webq)


def test_fewshot_pools(shared_data):
    shared_data("hotpotqa_adv", "manual_rat_std.txt")
    pools = {name: data.load_fewshot(name) for name in ("hotpotqa", "2wikimultihop", "fever")}
    assert {name: len(pool) for name, pool in pools.items()} == {"hotpotqa": 30, "2wikimultihop": 6, "fever": 6}
    for pool in pools.values():
        assert all(isinstance(e, Example) and r.startswith("First,") for e, r in pool)
    assert pools["hotpotqa"][0][0].id == "5ab29a54554299340b52552c"
    assert [e.id for e, _ in pools["fever"]] == ["180017", "39149", "52968", "126412", "215766", "873"]
    assert pools["fever"][3][1].endswith("contemporary social issues.")  # stripped


def test_default_corpus(shared_data):
    shared_data("hotpotqa", "hotpot_dev_distractor_sample100.jsonl")
    corpus = data.default_corpus()
    assert len(corpus) == 2330
    assert len({p.id for p in corpus}) == len(corpus)
    added = [p for p in corpus if p.title == data.ADVERSARIAL_TITLE]
    assert len(added) == 674 and all(p.id.startswith("added-") for p in added)
    assert all(p.id == p.title for p in corpus if p.title != data.ADVERSARIAL_TITLE)
    baiul = next(p for p in corpus if p.id == "Oksana Baiul")
    assert baiul.text.startswith("Oksana Baiul (born November 16, 1977)")


def test_available_datasets_and_dispatch(shared_data):
    shared_data("nq_open", "webglm_nq_open400.jsonl")
    found = data.available_datasets()
    assert {"adv_hotpotqa", "hotpotqa", "fever", "fever_ids", "nq_open", "web_questions"} <= set(found)
    assert all(p.is_file() for p in found.values())
    assert [e.id for e in data.load("nq_open")] == [e.id for e in data.load_nq_open()]
    assert len(data.load("adv_hotpotqa", split="calibration")) == 58
    with pytest.raises(ValueError, match="unknown dataset"):
        data.load("squad")


# --------------------------------------------------------------------------- official formats, written into the tests


def test_official_hotpotqa_json_list(tmp_path):
    record = {
        "_id": "h1",
        "question": "Which city?",
        "answer": "Paris",
        "type": "bridge",
        "level": "easy",
        "supporting_facts": [["France", 1]],
        "context": [["France", ["France is a country.", " Its capital is Paris."]], ["Spain", ["Spain too."]]],
    }
    (example,) = data.load_hotpotqa(write_json(tmp_path / "hotpot_dev_distractor_v1.json", [record]))
    assert example.id == "h1" and example.answers == ["Paris"]
    assert example.supporting_facts == [("France", 1)]
    assert [(p.title, p.is_supporting) for p in example.paragraphs] == [("France", True), ("Spain", False)]
    assert example.paragraphs[0].sentences[1] == "Its capital is Paris."


def test_official_2wikimultihop(tmp_path):
    record = {
        "_id": "w1",
        "type": "compositional",
        "question": "Who is the mother of the director of film X?",
        "context": [["X (film)", ["X is a film directed by Y."]], ["Y", ["Y is the son of Z."]], ["Q", ["Noise."]]],
        "supporting_facts": [["X (film)", 0], ["Y", 0]],
        "evidences": [["X (film)", "director", "Y"], ["Y", "mother", "Z"]],
        "answer": "Z",
    }
    (example,) = data.load_2wikimultihop(write_json(tmp_path / "dev.json", [record]))
    assert example.supporting_titles == ["X (film)", "Y"]
    assert [p.is_supporting for p in example.paragraphs] == [True, True, False]
    assert example.metadata["evidences"][1] == ["Y", "mother", "Z"]


def test_triviaqa_hf_rows_jsonl_and_json_list(tmp_path):
    row = {
        "question": "Who was the man behind The Chipmunks?",
        "question_id": "tc_2",
        "question_source": "http://www.triviacountry.com/",
        "entity_pages": {"doc_source": [], "filename": [], "title": [], "wiki_context": []},
        "search_results": {"description": [], "filename": [], "rank": [], "title": [], "url": [], "search_context": []},
        "answer": {
            "aliases": ["David Seville", "Ross Bagdasarian"],
            "normalized_aliases": ["david seville", "ross bagdasarian"],
            "matched_wiki_entity_name": "",
            "normalized_matched_wiki_entity_name": "",
            "normalized_value": "david seville",
            "type": "WikipediaEntity",
            "value": "David Seville",
        },
    }
    unlabeled = {**row, "question_id": "tc_3", "answer": {**row["answer"], "aliases": [], "value": ""}}
    jsonl = write_jsonl(tmp_path / "tqa.jsonl", [row, unlabeled])
    for path in (jsonl, write_json(tmp_path / "tqa.json", [row, unlabeled])):
        first, second = data.load_triviaqa(path, split="test")
        assert first.id == "tc_2" and first.answers == ["David Seville", "Ross Bagdasarian"]
        assert first.metadata["normalized_aliases"] == ["david seville", "ross bagdasarian"]
        assert second.answers == []  # the HF test split carries no answers
        with pytest.raises(DataError, match="no answer"):  # any other split must have them
            data.load_triviaqa(path)


def test_triviaqa_dpr_tsv(tmp_path):
    path = tmp_path / "trivia-test.qa.csv"
    path.write_text(
        "Who was the man behind The Chipmunks?\t['David Seville']\n"
        'Which Lloyd Webber musical premiered in the US?\t["Sunset Boulevard", "Sunset Blvd"]\n',
        encoding="utf-8",
    )
    first, second = data.load_triviaqa(path)
    assert (first.id, first.answers) == ("tqa-0000", ["David Seville"])
    assert (second.id, second.answers) == ("tqa-0001", ["Sunset Boulevard", "Sunset Blvd"])
    path.write_text("a question\t['x']\nno answer column here\n", encoding="utf-8")
    with pytest.raises(DataError, match="line 2"):
        data.load_triviaqa(path)


def _write_dpr_qa(path, rows):
    """A *.qa.csv exactly as DPR's scripts write it: csv.writer with a tab delimiter, answers as str(list)."""
    import csv

    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t")
        for question, answers in rows:
            writer.writerow([question, str(answers)])


DPR_ROWS = [
    ("who said hi", ['He said "hi"', "O'Neil"]),
    ("where is paris", ["Paris", "Paris, France"]),
    ('the "quoted"\tquestion', ["a\tb", 'x "y" z']),
    ("a question written\nover two lines", ["two"]),
    ("a line\u2028separator and a form\x0cfeed inside", ["kept"]),
]


@pytest.mark.parametrize("loader", ["load_triviaqa", "load_nq_open", "load_web_questions"])
def test_dpr_qa_csv_quoted_as_the_csv_module_writes_it(tmp_path, loader):
    path = tmp_path / "test.qa.csv"
    _write_dpr_qa(path, DPR_ROWS)
    examples = getattr(data, loader)(path)
    assert [(e.question, e.answers) for e in examples] == [(q, a) for q, a in DPR_ROWS]
    assert examples[0].id.endswith("-0000") and examples[-1].id.endswith("-0004")
    # a byte-order mark is not part of the first question
    path.write_bytes("\ufeff".encode() + path.read_bytes())
    assert getattr(data, loader)(path)[0].question == "who said hi"


def test_dpr_qa_csv_errors_name_the_line_and_field(tmp_path):
    path = tmp_path / "bad.qa.csv"
    cases = [
        ("q1\t['a']\n\t['b']\n", "line 2", "question"),
        ("q1\t['a']\nq2\t['a']\nq3\t[]\n", "line 3", "answers"),
        ("q1\t['a']\nq2\tnot a list\n", "line 2", "answers"),
        ('q1\t[\'a\']\n"unclosed\t[\'b\']\nq3\t[\'c\']\n', "line 2", None),
        ("q1\t['a']\tsurplus\n", "line 1", None),
    ]
    for text, where, field in cases:
        path.write_text(text, encoding="utf-8")
        with pytest.raises(DataError, match=where) as err:
            data.load_nq_open(path)
        if field:
            assert err.value.field == field, text


def test_open_qa_jsonl_rejects_empty_questions_and_answers(tmp_path):
    path = tmp_path / "nq.jsonl"
    path.write_text('{"question": "", "answer": ["x"]}\n', encoding="utf-8")
    with pytest.raises(DataError, match="line 1.*empty question"):
        data.load_nq_open(path)
    path.write_text('{"question": "q?", "answer": ["x"]}\n{"question": "q2?", "answer": [" "]}\n', encoding="utf-8")
    with pytest.raises(DataError, match="line 2.*no answer"):
        data.load_nq_open(path)


def test_sample_is_seeded_and_keeps_file_order():
    examples = data.load_nq_open() if data.available_datasets().get("nq_open") else [
        Example(f"x{i}", f"q{i}?", ["a"]) for i in range(400)]
    a, b = data.sample(examples, 100, seed=3), data.sample(examples, 100, seed=3)
    assert a == b and len(a) == 100 and len({e.id for e in a}) == 100
    position = {e.id: i for i, e in enumerate(examples)}
    assert [position[e.id] for e in a] == sorted(position[e.id] for e in a)  # the file's order, not the ids' sort
    assert data.sample(examples, 100, seed=4) != a
    assert data.sample(examples, None) == list(examples) and data.sample(examples, 10_000) == list(examples)
    with pytest.raises(ValueError):
        data.sample(examples, -1)


MINTAKA_OFFICIAL = [
    {
        "id": "9ace9041",
        "question": "What is the fourth book in the Twilight series?",
        "translations": {"de": "Welches ist das vierte Buch in der Twilight-Saga-Serie?"},
        "questionEntity": [],
        "answer": {
            "answerType": "entity",
            "answer": [{"name": "Q53945", "label": {"en": "Breaking Dawn", "de": None}}],
            "mention": "Breaking Dawn (2008)",
        },
        "category": "books",
        "complexityType": "ordinal",
    },
    {
        "id": "88bdb808",
        "question": "How many games are in the Uncharted series?",
        "translations": {"de": "Aus wie vielen Spielen besteht die Uncharted-Reihe?"},
        "questionEntity": [],
        "answer": {
            "answerType": "entity",
            "answer": [
                {"name": "Q17150", "label": "Uncharted: Drake's Fortune"},
                {"name": "Q17146", "label": "Uncharted 2"},
            ],
            "mention": "Uncharted: Drake's Fortune (2007), Uncharted 2 (2009)",
            "answerNum": 2,
        },
        "category": "videogames",
        "complexityType": "count",
    },
    {
        "id": "b1",
        "question": "Is Mont Blanc taller than Mount Rainier?",
        "translations": {"de": "Ist der Mont Blanc höher als der Mount Rainier?"},
        "answer": {"answerType": "boolean", "answer": [True], "mention": "Yes"},
        "category": "geography",
        "complexityType": "comparative",
    },
    {
        "id": "n1",
        "question": "How many astronauts have been elected to Congress?",
        "translations": {"de": "Wie viele Astronauten wurden in den Kongress gewählt?"},
        "answer": {"answerType": "numerical", "answer": [4.0], "mention": "4"},
        "category": "politics",
        "complexityType": "count",
    },
    {
        "id": "e0",
        "question": "Who won?",
        "translations": {"de": "Wer hat gewonnen?"},
        "answer": {"answerType": "entity", "answer": None, "mention": "nobody"},
        "category": "sports",
        "complexityType": "generic",
    },
]


def test_mintaka_official(tmp_path):
    path = write_json(tmp_path / "mintaka_test.json", MINTAKA_OFFICIAL)
    twilight, uncharted, boolean, number, unlinked = data.load_mintaka(path)
    assert twilight.answers == ["Breaking Dawn", "Breaking Dawn (2008)"]
    assert uncharted.answers[:2] == ["2", "Uncharted: Drake's Fortune, Uncharted 2"]
    assert uncharted.metadata["answer_entities"] == ["Uncharted: Drake's Fortune", "Uncharted 2"]
    assert boolean.answers == ["Yes", "True"]
    assert number.answers == ["4"]
    assert unlinked.answers == ["nobody"]
    assert twilight.metadata["category"] == "books" and twilight.metadata["answerType"] == "entity"
    german = data.load_mintaka(path, lang="de")
    assert german[0].question.startswith("Welches ist")
    assert german[0].answers[0] == "Breaking Dawn"  # no German label: English fallback


def test_mintaka_hf_rows(tmp_path):
    rows = [
        {
            "id": "9ace9041",
            "lang": "en",
            "question": "What is the fourth book in the Twilight series?",
            "answerText": "Breaking Dawn",
            "category": "books",
            "complexityType": "ordinal",
            "questionEntity": [
                {"name": "Q44523", "entityType": "entity", "label": "Twilight", "mention": "Twilight", "span": [31, 39]}
            ],
            "answerEntity": [{"name": "Q53945", "label": "Breaking Dawn"}],
        },
        {
            "id": "b1",
            "lang": "en",
            "question": "Is Mont Blanc taller than Mount Rainier?",
            "answerText": "True",
            "category": "geography",
            "complexityType": "comparative",
            "questionEntity": [],
            "answerEntity": [],
        },
    ]
    twilight, boolean = data.load_mintaka(write_jsonl(tmp_path / "mintaka.jsonl", rows))
    assert twilight.answers == ["Breaking Dawn"] and twilight.metadata["complexityType"] == "ordinal"
    assert boolean.answers == ["True"]


def test_hf_open_qa_schemas(tmp_path):
    nq = data.load_nq_open(write_jsonl(tmp_path / "nq.jsonl", [{"question": "where is x", "answer": ["y", "y", "z"]}]))
    assert nq[0].answers == ["y", "z"]
    webq = data.load_web_questions(
        write_jsonl(tmp_path / "wq.jsonl", [{"url": "http://freebase.com/x", "question": "q", "answers": ["A"]}])
    )
    assert webq[0].answers == ["A"] and webq[0].metadata["url"] == "http://freebase.com/x"


def test_dpr_tsv(tmp_path):
    path = tmp_path / "psgs_w100.tsv"
    path.write_text(
        'id\ttext\ttitle\n1\t"Aaron Aaron ( or ; ""Ahärôn"") is a prophet."\tAaron\n'
        "2\tSecond passage.\tAbel\n3\tThird.\tSeth\n",
        encoding="utf-8",
    )
    passages = data.read_dpr_tsv(path)
    assert passages[0] == Passage("1", "Aaron", 'Aaron Aaron ( or ; "Ahärôn") is a prophet.')
    assert [p.id for p in passages] == ["1", "2", "3"]
    assert [p.title for p in data.read_dpr_tsv(path, limit=2)] == ["Aaron", "Abel"]
    path.write_text("1\ttext\ttitle\n", encoding="utf-8")
    with pytest.raises(DataError, match="header"):
        data.read_dpr_tsv(path)
    path.write_text("id\ttext\ttitle\n1\tok\tT\n2\tmissing title\n", encoding="utf-8")
    with pytest.raises(DataError, match="line 3"):
        data.read_dpr_tsv(path)


def test_jsonl_corpus(tmp_path):
    rows = [
        {"id": "0", "contents": '"Aaron"\nAaron is a prophet.'},
        {"id": 1, "title": "Abel", "text": "Abel was a shepherd."},
        {"id": "2", "contents": '"Seth"\nSeth is the third son.'},
    ]
    path = write_jsonl(tmp_path / "wiki.jsonl", rows)
    assert data.read_jsonl_corpus(path) == [
        Passage("0", "Aaron", "Aaron is a prophet."),
        Passage("1", "Abel", "Abel was a shepherd."),
        Passage("2", "Seth", "Seth is the third son."),
    ]
    assert len(data.read_jsonl_corpus(path, limit=1)) == 1


def test_build_corpus_dedupes():
    from covlib.core.records import Paragraph

    fakes = [Paragraph("added", ["fake one."]), Paragraph("added", ["fake two."])]
    one = Example("1", "q", paragraphs=[Paragraph("A", ["first A."]), *fakes])
    two = Example("2", "q", paragraphs=[Paragraph("A", ["second A."]), Paragraph("added", ["fake one."])])
    corpus = data.build_corpus([one], [two])
    assert [(p.title, p.text) for p in corpus] == [("A", "first A."), ("added", "fake one."), ("added", "fake two.")]
    assert corpus[1].id == data.build_corpus([two])[1].id  # id depends on the text only


# --------------------------------------------------------------------------- hub ids


def test_hub_id_rows_use_the_same_converter(monkeypatch):
    calls = []
    hotpot_row = {
        "id": "h1",
        "question": "Which city?",
        "answer": "Paris",
        "type": "bridge",
        "level": "easy",
        "supporting_facts": {"title": ["France"], "sent_id": [0]},
        "context": {"title": ["France", "Spain"], "sentences": [["Paris is in France."], ["Spain too."]]},
    }

    def load_dataset(name, config, split):
        calls.append((name, config, split))
        return [hotpot_row] if "hotpot" in name else [{"question": "where is x", "answer": ["y"]}]

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    (example,) = data.load_nq_open("google-research-datasets/nq_open")
    assert calls[-1] == ("google-research-datasets/nq_open", None, "validation")
    assert (example.id, example.answers) == ("nq-0000", ["y"])
    (hotpot,) = data.load_hotpotqa("hotpotqa/hotpot_qa")
    assert calls[-1] == ("hotpotqa/hotpot_qa", "distractor", "validation")
    assert hotpot.supporting_titles == ["France"] and hotpot.metadata["level"] == "easy"
    data.load_hotpotqa("hotpot_qa:fullwiki", split="train")
    assert calls[-1] == ("hotpot_qa", "fullwiki", "train")
    with pytest.raises(DataError, match="record 0: missing field 'id'"):
        data.load_hotpotqa("someone/other_dataset")  # hub rows are checked like file records


def test_hub_unreachable_message(monkeypatch):
    def load_dataset(name, config, split):
        raise ConnectionError("Couldn't reach 'mandarjoshi/trivia_qa' on the Hub")

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    with pytest.raises(DataError) as err:
        data.load_triviaqa("mandarjoshi/trivia_qa:rc.nocontext")
    message = str(err.value)
    assert "hub is unreachable" in message and "local file path works" in message and "rc.nocontext" in message


# --------------------------------------------------------------------------- bad input


def test_missing_file(tmp_path):
    with pytest.raises(DataError, match="file not found") as err:
        data.load_nq_open(tmp_path / "nope.jsonl")
    assert "nope.jsonl" in str(err.value)
    with pytest.raises(DataError, match="file not found"):
        data.load_hotpotqa(str(tmp_path / "missing.jsonl"))  # a string path is not mistaken for a hub id


def test_bad_json_line(tmp_path):
    path = tmp_path / "broken.jsonl"
    path.write_text('{"question": "a", "answer": ["b"]}\n{"question": "c", "answer": ["d"]}\n{"question": oops}\n')
    with pytest.raises(DataError) as err:
        data.load_nq_open(path)
    assert "broken.jsonl" in str(err.value) and "line 3" in str(err.value) and err.value.line == 3


def test_missing_field_names_field_and_line(tmp_path):
    path = write_jsonl(tmp_path / "nq.jsonl", [{"question": "a", "answer": ["b"]}, {"question": "c"}])
    with pytest.raises(DataError, match="missing field 'answer'") as err:
        data.load_nq_open(path)
    assert err.value.line == 2 and err.value.field == "answer"


def test_wrong_type_in_json_list_names_record(tmp_path):
    records = [{"test_id": 0, "question": "q?", "answer": ["a"]}, {"test_id": "1", "question": "q?", "answer": ["a"]}]
    with pytest.raises(DataError) as err:
        data.load_2wikimultihop(write_json(tmp_path / "dev.json", records))
    message = str(err.value)
    assert "record 1" in message and "'test_id'" in message and "should be int, got str" in message


def test_nested_field_errors(tmp_path):
    paragraph = {"title": "T", "context": 3, "is_supp": True}
    record = {"qas_id": "x", "question": "q", "answer": "a", "rationale": [], "paragraphs": [paragraph]}
    with pytest.raises(DataError, match=r"paragraphs\[0\]\.context"):
        data.load_adv_hotpotqa(write_json(tmp_path / "adv.json", [record]), split="all", alt_answers=None)
    fever = {"id": 1, "question": "claim", "label": "TRUE", "evidence": [], "pars": []}
    with pytest.raises(DataError, match="'label' should be one of"):
        data.load_fever(write_jsonl(tmp_path / "fever.jsonl", [fever]), ids=None)


def test_invalid_json_file(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('[\n  {"a": 1},\n  {"a": }\n]\n')
    with pytest.raises(DataError, match="line 3"):
        data.load_mintaka(path)


def test_fever_unknown_id(tmp_path):
    row = {"id": 1, "question": "c", "label": "SUPPORTS", "evidence": [], "pars": []}
    path = write_jsonl(tmp_path / "fever.jsonl", [row])
    assert [e.id for e in data.load_fever(path, ids=[1])] == ["1"]
    with pytest.raises(DataError, match="id 2 not found"):
        data.load_fever(path, ids=[1, 2])


def test_fewshot_rationale_without_example(tmp_path, monkeypatch):
    monkeypatch.setenv("COVLIB_DATA", str(tmp_path))
    (tmp_path / "2wikimultihop").mkdir()
    record = {"_id": "w1", "question": "q", "answer": "a", "context": [], "supporting_facts": [], "evidences": []}
    write_json(tmp_path / "2wikimultihop" / "train_subset.json", [record])
    (tmp_path / "2wikimultihop" / "manual_rat.txt").write_text("w1\tFirst, a. Second, b.\nw9\tFirst, c.\n")
    with pytest.raises(DataError) as err:
        data.load_fewshot("2wikimultihop")
    assert "manual_rat.txt" in str(err.value) and "line 2" in str(err.value) and "'w9'" in str(err.value)
    (tmp_path / "2wikimultihop" / "manual_rat.txt").write_text("w1 no tab here\n")
    with pytest.raises(DataError, match="line 1"):
        data.load_fewshot("2wikimultihop")
