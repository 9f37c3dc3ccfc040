"""covlib.papers.verify_edit: Algorithm 1 on a scripted LM (who is edited, what the edits contain, batching,
the cheap threshold sweep) and one small end-to-end run on the embedded model."""

from __future__ import annotations

import math
import re
import zlib

import numpy as np
import pytest

from covlib.papers.verify_edit import cot as P
from scripted import ScriptedGenerator
from covlib.core.records import Example, Paragraph, Passage
from covlib.papers import verify_edit as V
from covlib.papers.verify_edit import knowledge as K
from covlib.retrieval.embedding import Encoder

N = 5
SHOTS = [
    (Example("s1", "Who directed Film A?", ["Ann Lee"]), "First, Film A was directed by Ann Lee."),
    (Example("s2", "Where was Ann Lee born?", ["Oslo"]), "First, Ann Lee was born in Oslo."),
]
# question -> CoT paths (text, mean token log-prob); consistency at n = 5 (see test_scores):
#   q1: 3 x "Bob" (w = e^-3) vs 2 x "Alice Smith" (w = e^-0.1): majority 3, wang 0.381
#   q2: 2 x "France" (w = e^-0.01), Spain, Italy, 1 failed parse (w = e^-3): majority 2, wang 4.649
#   q3: 5 x "1990": majority 5, wang 5;  q4: no path parses: majority 0, wang 0
PATHS = {
    "Who wrote Book A?": [
        (" First, Book A was written by Bob. Second, Bob is a writer. The answer is Bob.", -3.0),
        (" First, Book A was written by Bob. The answer is Bob.", -3.0),
        (" First, Bob wrote it. The answer is Bob.", -3.0),
        (" First, Alice Smith wrote Book A. The answer is Alice Smith.", -0.1),
        (" First, Alice Smith wrote Book A. The answer is Alice Smith.", -0.1),
    ],
    "Where is Town B?": [
        (" First, Town B is in France. The answer is France.", -0.01),
        (" First, Town B is in France. The answer is France.", -0.01),
        (" First, Town B is in Spain. The answer is Spain.", -3.0),
        (" First, Town B is in Italy. The answer is Italy.", -3.0),
        (" First, Town B is somewhere.", -3.0),
    ],
    "When was C founded?": [(" First, C was founded in 1990. The answer is 1990.", -0.2)],
    "Who is D?": [(" First, D is someone. Second, D lives in Rome.", -0.5)],
}
REANSWERS = {"Who wrote Book A?": " Alice Smith.", "Where is Town B?": " Germany.", "When was C founded?": " 1991.",
             "Who is D?": " Dan."}
GOLD = {"Who wrote Book A?": "Alice Smith", "Where is Town B?": "France", "When was C founded?": "1990", "Who is D?": "Dan"}


def _reply(prompt: str, reanswers: dict[str, str] = REANSWERS, paths: dict = PATHS):
    """Each Verify-and-Edit prompt kind answered from the scripts above."""
    if prompt.startswith("Write a question that"):  # verifying question for the last rationale sentence
        sentence = re.findall(r"\n(?:Answer|Reason): (.*)\nQuestion:$", prompt)[0]
        return (f" Is it true that {sentence.rstrip('.')}?", -0.1)
    if prompt.endswith(P.ANSWER_MARKER):  # answering again from the edited rationale
        question = re.findall(r"(?:Q|Question|Claim): (.*)\nA:", prompt)[-1]
        return (reanswers[question], -0.2)
    if prompt.endswith("\nAnswer:") or "The answer is" not in prompt:  # verifying answer
        verifying = re.findall(r"(?:Q|Question): (.*)\n(?:A|Answer):$", prompt)[0]
        return (f" Verified [{verifying}]", -0.3)
    return paths[re.findall(r"(?:Q|Question|Claim): (.*)\nA:$", prompt)[0]]


def ScriptedLM(answer_logprob: float = math.log(0.5)) -> ScriptedGenerator:
    """The shared scripted generator with the Verify-and-Edit scripts."""
    return ScriptedGenerator(_reply, score=answer_logprob)


class _HashedWords:
    """A sentence-transformers stand-in: hashed bag of words (no model download, deterministic)."""

    def get_sentence_embedding_dimension(self):
        return 64

    def encode(self, texts, **_):
        out = np.zeros((len(texts), 64), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"\w+", t.lower()):
                out[i, zlib.crc32(w.encode()) % 64] += 1
        return out + 1e-3


ENCODER = Encoder(_HashedWords(), "hashed-words")


def _examples() -> list[Example]:
    out = []
    for i, (question, gold) in enumerate(GOLD.items()):
        paragraphs = [Paragraph("Fact", [f"The answer to '{question}' is {gold}.", f"{gold} is well known."], True),
                      Paragraph("Other", ["Unrelated text about trains.", "Another distractor sentence."])]
        out.append(Example(f"q{i + 1}", question, [gold], paragraphs=paragraphs))
    return out


@pytest.fixture
def lm():
    return ScriptedLM()


@pytest.fixture
def results(lm):
    res = P.run_cot_sc(lm, _examples(), "2wikimultihop", n=N, shots=SHOTS, progress=False)
    lm.generate_calls.clear()
    lm.score_calls.clear()
    return res


def _ve(lm, results, threshold=None, consistency="wang", **kw):
    return V.verify_and_edit(lm, results, _examples(), "2wikimultihop", K.DatasetKnowledge(), threshold=threshold,
                             n=N, consistency=consistency, shots=SHOTS, encoder=ENCODER, progress=False, **kw)


def test_scores(results):
    assert [r.majority for r in results] == [3, 2, 5, 0]
    assert [round(r.wang, 3) for r in results] == [0.381, 4.649, 5.0, 0.0]
    assert [r.parse_failures for r in results] == [0, 1, 0, 5]
    assert [r.prediction for r in results] == ["Bob", "France", "1990", ""]


@pytest.mark.parametrize("consistency, threshold, edited", [
    ("majority", None, {"q2", "q4"}),  # default ceil(5/2) = 3
    ("wang", None, {"q1", "q4"}),
    ("wang", 3, {"q1", "q4"}),
    ("majority", 0, set()),
    ("wang", 0.5, {"q1", "q4"}),
    ("majority", 1, {"q4"}),
    ("majority", 5, {"q1", "q2", "q4"}),
    ("wang", 5, {"q1", "q2", "q4"}),
    ("wang_raw", 3, {"q1", "q2", "q4"}),  # official unnormalised sum: 1.98 for q2
    ("wang_raw", 6, {"q1", "q2", "q3", "q4"}),
])
def test_which_examples_are_edited(lm, results, consistency, threshold, edited):
    records = _ve(lm, results, threshold, consistency)
    assert {r.id for r in records if r.edited} == edited
    for r in records:
        assert r.threshold == (3 if threshold is None else threshold)
        if not r.edited:
            assert r.prediction == r.original_prediction and r.confidence == r.consistency
            assert r.verifying_questions == [] and r.edited_rationale == ""


def test_edits_contain_verifying_answers(lm, results):
    records = {r.id: r for r in _ve(lm, results, threshold=5)}
    q1 = records["q1"]  # r* = the most probable "Bob" path (all three tie: the first)
    assert q1.original_rationale == "First, Book A was written by Bob. Second, Bob is a writer."
    assert q1.verifying_questions == ["Is it true that Book A was written by Bob?", "Is it true that Bob is a writer?"]
    assert q1.verifying_answers == [f"Verified [{q}]" for q in q1.verifying_questions]
    assert q1.edited_rationale == " ".join(f"{m} {a}." for m, a in zip(("First,", "Second,"), q1.verifying_answers))
    for answer in q1.verifying_answers:
        assert answer in q1.edited_rationale
    assert "Bob is a writer." not in q1.edited_rationale
    assert all(1 <= len(top) <= 3 for top in q1.retrieved)
    assert all(s in {x for p in _examples()[0].paragraphs for x in p.sentences} for top in q1.retrieved for s in top)
    assert (q1.original_prediction, q1.prediction, q1.original_correct, q1.correct) == ("Bob", "Alice Smith", 0.0, 1.0)
    assert (records["q2"].prediction, records["q2"].correct) == ("Germany", 0.0)
    q4 = records["q4"]  # no path parsed: r* is the most probable path's text, still edited sentence by sentence
    assert q4.original_prediction == "" and q4.prediction == "Dan" and q4.correct == 1.0
    assert len(q4.verifying_questions) == 2 and q4.edited_rationale.startswith("First, Verified [")
    # AUC confidence on [0, n]: n * P(new answer) when edited, the consistency otherwise
    assert q1.confidence == pytest.approx(N * 0.5) and q1.answer_logprob == pytest.approx(math.log(0.5))
    assert records["q3"].confidence == pytest.approx(5.0) and not records["q3"].edited


@pytest.mark.parametrize("consistency", ["majority", "wang"])
def test_threshold_sweep_matches_separate_runs(results, consistency):
    lm = ScriptedLM()
    edits = V.compute_edits(lm, results, _examples(), "2wikimultihop", K.DatasetKnowledge(), consistency=consistency,
                            shots=SHOTS, encoder=ENCODER, progress=False)  # max_threshold defaults to n
    assert len(lm.generate_calls) == 3
    for t in range(N + 1):
        assert V.apply_threshold(results, edits, t, consistency) == _ve(ScriptedLM(), results, t, consistency)
    rows = V.sweep_thresholds(results, edits, consistency=consistency)
    assert [row["threshold"] for row in rows] == list(range(N + 1))
    assert rows[0]["edited"] == 0 and rows[0]["accuracy"] == pytest.approx(50.0)  # CoT-SC: France, 1990
    assert rows[N]["edited"] == 3 and rows[N]["accuracy"] == pytest.approx(75.0)  # Alice Smith, 1990, Dan
    with pytest.raises(KeyError, match="max_threshold"):
        V.apply_threshold(results, edits, N + 1, consistency)  # q3 (score 5) was never edited



@pytest.mark.parametrize("consistency", ["majority", "wang"])
def test_correctness_by_threshold_and_sweep_intervals(results, consistency):
    from covlib.core import stats

    edits = V.compute_edits(ScriptedLM(), results, _examples(), "2wikimultihop", K.DatasetKnowledge(),
                            consistency=consistency, shots=SHOTS, encoder=ENCODER, progress=False)
    by_t = V.correctness_by_threshold(results, edits, consistency=consistency)
    assert list(by_t) == list(range(N + 1))
    assert by_t[0] == [0.0, 1.0, 1.0, 0.0]  # CoT-SC: Bob, France, 1990, no answer
    assert by_t[N] == [1.0, 0.0, 1.0, 1.0]  # edited q1, q2, q4: Alice Smith, Germany, Dan
    assert V.correctness_by_threshold(results, edits, [N, 0], consistency) == {N: by_t[N], 0: by_t[0]}
    plain = V.sweep_thresholds(results, edits, consistency=consistency)
    rows = V.sweep_thresholds(results, edits, consistency=consistency, intervals=True, seed=1)
    for t, row, base in zip(range(N + 1), rows, plain):
        assert {k: row[k] for k in base} == base  # the same numbers, bounds added
        assert row["n"] == 4 and row["accuracy"] == pytest.approx(100 * np.mean(by_t[t]))
        assert 0 <= row["accuracy low"] <= row["accuracy"] <= row["accuracy high"] <= 100
        for metric in ("auc", "auc_answer_logprob"):
            assert 0 <= row[f"{metric} low"] <= row[f"{metric} high"] <= 100
    assert rows[0]["accuracy low"] < rows[0]["accuracy high"]  # 2 of 4 right: the interval has width
    assert "accuracy low" not in plain[0]
    # notebook 02's claims are paired differences of these lists, in EM points
    diff = stats.paired_difference(by_t[N], by_t[0], scale=100)
    assert diff["value"] == pytest.approx(25.0) and diff["n"] == 4


def test_interval_plot_helpers():
    """The optional interval drawing of `plotting` that notebooks 02 and 03 use (error bars, shaded bands)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd
    from matplotlib.collections import LineCollection, PolyCollection

    from covlib.report import plotting

    fig, (a, b, c) = plt.subplots(1, 3)
    ours = pd.DataFrame({"row": ["CoT", "VE", "SC"], "EM": [30.0, 40.0, 20.0], "lo": [20.0, 35.0, float("nan")],
                         "hi": [45.0, 50.0, float("nan")]})
    plotting.bar_with_reference(ours, "row", "EM", reference={"CoT": 33.0, "VE": 37.0, "SC": 31.0}, ax=a, ci=("lo", "hi"))
    (bars,) = [coll for coll in a.collections if isinstance(coll, LineCollection)]
    spans = sorted((round(seg[:, 1].min(), 6), round(seg[:, 1].max(), 6)) for seg in bars.get_segments())
    assert spans == [(20.0, 45.0), (35.0, 50.0)]  # on our bars only; SC has no bounds
    centres = sorted(round(seg[0, 0], 6) for seg in bars.get_segments())
    ours_bars = sorted(round(p.get_x() + p.get_width() / 2, 6) for p in a.containers[0].patches[:2])
    assert centres == ours_bars
    plotting.bar_with_reference(ours, "row", "EM", ax=b)
    assert not [coll for coll in b.collections if isinstance(coll, LineCollection)]  # no ci: no error bars
    with pytest.raises(ValueError, match="hue"):
        plotting.bar_with_reference(ours.assign(h="x"), "row", "EM", hue="h", ci=("lo", "hi"))
    plotting.line_with_peak([0, 1, 2], {"EM": [1.0, 3.0, 2.0], "AUC": [2.0, 2.0, 2.0]}, ax=c,
                            bands={"EM": ([0.5, 2.0, 1.0], [1.5, 4.0, 3.0])})
    (band,) = [coll for coll in c.collections if isinstance(coll, PolyCollection)]  # EM only
    ys = band.get_paths()[0].vertices[:, 1]
    assert ys.min() == pytest.approx(0.5) and ys.max() == pytest.approx(4.0)
    with pytest.raises(ValueError, match="band"):
        plotting.line_with_peak([0, 1], {"EM": [1.0, 2.0]}, bands={"EM": ([0.0], [3.0])})
    plt.close("all")

def test_every_step_is_one_batched_call(results):
    lm = ScriptedLM()
    _ve(lm, results, threshold=N)
    # 3 edited examples with 2 + 1 + 2 rationale sentences: one call per step, never one per example
    assert [c[:2] for c in lm.generate_calls] == [("verifying questions", 5), ("verifying answers", 5),
                                                  ("answering again", 3)]
    assert lm.score_calls == [3]
    doubled = results + [P.PromptResult(**{**vars(r), "id": r.id + "b"}) for r in results]
    examples = _examples() + [Example(e.id + "b", e.question, e.answers, paragraphs=e.paragraphs) for e in _examples()]
    lm2 = ScriptedLM()
    V.verify_and_edit(lm2, doubled, examples, "2wikimultihop", K.DatasetKnowledge(), threshold=N, shots=SHOTS,
                      encoder=ENCODER, progress=False)
    assert [c[1] for c in lm2.generate_calls] == [10, 10, 6] and lm2.score_calls == [6]
    assert not _ve(ScriptedLM(), results, threshold=0)[0].edited


def test_split_and_join_rationale():
    assert V.split_rationale("First, A is B. Second, B is C.") == ["A is B.", "B is C."]
    assert V.split_rationale("First, A is B. It is old. Second, C.") == ["A is B. It is old.", "C."]
    assert V.split_rationale("Paris is big. Dr. Who is old.") == ["Paris is big.", "Dr. Who is old."]
    assert V.split_rationale("  ") == []
    assert V.join_rationale(["the film is old", "It won."]) == "First, The film is old. Second, It won."


def test_knowledge_sources(monkeypatch):
    from covlib.retrieval import BM25Retriever

    ex = _examples()[0]
    assert K.DatasetKnowledge().retrieve("q?", ex) == [s for p in ex.paragraphs for s in p.sentences]
    assert K.DatasetKnowledge(unit="paragraph").retrieve("q?", ex) == [p.text for p in ex.paragraphs]
    with pytest.raises(ValueError, match="no paragraphs"):
        K.DatasetKnowledge().retrieve("q?", Example("x", "Q?", ["a"]))
    corpus = [Passage("p1", "Book A", "Book A was written by Alice Smith. It is long."),
              Passage("p2", "Trains", "Trains run on rails."), Passage("p3", "Cats", "Cats sleep a lot."),
              Passage("p4", "Rome", "Rome is in Italy."), Passage("p5", "Tea", "Tea is a drink.")]
    knowledge = K.RetrieverKnowledge(BM25Retriever(corpus), k=1)
    assert knowledge.label.startswith("BM25")
    assert knowledge.retrieve_batch(["Who wrote Book A?", "rails"], [ex, ex]) == [
        ["Book A was written by Alice Smith.", "It is long."], ["Trains run on rails."]]
    monkeypatch.delenv("COVLIB_SEARCH_ENDPOINT", raising=False)
    with pytest.raises(RuntimeError, match="COVLIB_SEARCH_ENDPOINT"):
        K.WebKnowledge()


def test_make_knowledge(isolated_cache, monkeypatch):
    corpus = [Passage(f"p{i}", f"T{i}", f"Topic {i} has fact number {i}. Also more.") for i in range(6)]
    assert isinstance(K.make_knowledge("dataset"), K.DatasetKnowledge)
    bm25 = K.make_knowledge("bm25", corpus=corpus, corpus_name="tiny", k=2)
    assert bm25.label.startswith("BM25") and bm25.retrieve("topic 3", Example("x", "Q?"))[0] == "Topic 3 has fact number 3."
    assert (isolated_cache / "indexes" / "tiny-bm25" / "meta.json").exists()
    assert K.make_knowledge("tfidf", corpus=corpus, corpus_name="tiny").label.startswith("TF-IDF")
    monkeypatch.delenv("COVLIB_SEARCH_ENDPOINT", raising=False)
    with pytest.raises(RuntimeError):
        K.make_knowledge("web")
    with pytest.raises(ValueError, match="unknown knowledge"):
        K.make_knowledge("google")


def test_figure_rows_are_named_by_the_knowledge_that_ran_the_papers_name_in_brackets(isolated_cache):
    """fig-03 once named our BM25 and TF-IDF bars "VE: Wiki." and "VE: DrQA", the paper's sources, which did not run."""
    assert V.row_label("CoT-SC + VE", "bm25") == "VE: BM25\n(paper: Wiki.)"
    assert V.row_label("CoT-SC + VE", "tfidf") == "VE: TF-IDF\n(paper: DrQA)"
    assert V.row_label("CoT-SC + VE", "dataset") == "VE: Dataset" and V.row_label("CoT-SC + VE", "dense") == "VE: dense"
    assert [V.row_label(m) for m in ("Standard", "CoT", "CoT-SC")] == ["Standard", "CoT", "CoT-SC"]
    corpus = [Passage(f"p{i}", f"T{i}", f"Topic {i} has fact number {i}.") for i in range(4)]
    for kind in ("bm25", "tfidf"):  # the name on the bar is the one the source that ran gives itself
        ran = K.make_knowledge(kind, corpus=corpus, corpus_name="tiny").label
        assert ran.startswith(V.row_label("CoT-SC + VE", kind).removeprefix("VE: ").split("\n")[0])


def test_verifying_prompts(shared_data):
    shared_data("hotpotqa_adv", "manual_answer.txt")
    vq = V.verifying_question_prompt("Who is X?", "X is Y.", "hotpotqa")
    assert vq.count("Overall Question:") == 3 and vq.endswith("Overall Question: Who is X?\nAnswer: X is Y.\nQuestion:")
    header = V.verifying_answer_header("hotpotqa")
    assert header.count("\nQ: ") == 3 and "A: Antony King work with the band Simply Red" in header
    va = V.verifying_answer_prompt("Who is Y?", ["Y is Z.", "Z is W."], "hotpotqa", header)
    assert va.endswith("\n\nY is Z.\nZ is W.\nQ: Who is Y?\nA:")
    fever = V.verifying_answer_prompt("Who?", ["A.", "B."], "fever", V.verifying_answer_header("fever"))
    assert fever.count("Question: ") == 3 and fever.endswith("\n\nA. B.\nQuestion: Who?\nAnswer:")
    assert V.verifying_question_prompt("Claim.", "R.", "fever").endswith("Claim: Claim.\nReason: R.\nQuestion:")


@pytest.fixture
def one_torch_thread():
    """One intra-op torch thread: on the 2-core machine shared with other jobs, 2 spinning OpenMP threads made
    this test ~10x slower (measured 394 s with 2 threads, 37 s with 1, same load)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.slow
def test_end_to_end_on_the_embedded_model(shared_data, tmp_path, one_torch_thread):
    """Two Adversarial HotpotQA test questions, n = 2, Dataset knowledge, everything edited (threshold n + 1)."""
    shared_data("hotpotqa_adv", "sim_dev.json")
    from covlib.core.cache import Cache
    from covlib.data import load_adv_hotpotqa
    from covlib.generation import LM

    lm = LM(cache=Cache(tmp_path / "calls.sqlite", table="lm"))
    examples = load_adv_hotpotqa(split="test")[:2]
    results = P.run_cot_sc(lm, examples, "hotpotqa", n=2, max_new_tokens=40, progress=False)
    assert [r.n for r in results] == [2, 2] and all(len(r.texts) == 2 for r in results)
    assert all(0 <= r.wang <= 2 and 0 <= r.majority <= 2 for r in results)
    short = dict(vq_max_new_tokens=20, va_max_new_tokens=24, answer_max_new_tokens=8, progress=False)
    records = V.verify_and_edit(lm, results, examples, "hotpotqa", K.DatasetKnowledge(), threshold=3, **short)
    assert all(r.edited for r in records)
    sentences = {s.strip() for ex in examples for p in ex.paragraphs for s in p.sentences}
    for r in records:
        assert len(r.verifying_questions) == len(r.verifying_answers) == len(r.retrieved) >= 1
        assert all(1 <= len(top) <= 3 and set(top) <= sentences for top in r.retrieved)
        assert r.edited_rationale.startswith("First, ")
        assert 0 <= r.confidence <= 2 and r.correct in (0.0, 1.0)
    calls = lm.forward_calls
    assert V.verify_and_edit(lm, results, examples, "hotpotqa", K.DatasetKnowledge(), threshold=3, **short) == records
    assert lm.forward_calls == calls  # everything came from the cache
