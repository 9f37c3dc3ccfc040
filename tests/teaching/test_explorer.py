"""The book's trace explorer (issue 23): one page per notebook listing every example of every traced run, one page per
example step by step, filters that work from file:// (checked in headless Chromium), model output escaped."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from urllib.parse import unquote

import nbformat
import pytest
from nbformat import v4

from covlib import traces
from chromium import screenshots
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
    example = next((site / "explore" / VE).glob("*/1.html")).read_text()
    assert html.escape(XSS) in example and html.escape(XSS) in _run_page(site, VE).read_text()


def test_an_example_page_shows_its_steps_with_previous_next_and_back(site):
    run = next(p for p in (site / "explore" / VE).iterdir() if p.is_dir())
    page = (run / "3.html").read_text()
    for number, (name, _) in enumerate(VE_STEPS, 1):
        assert f"Step {number}. {name}" in page
    assert 'href="2.html"' in page and 'href="4.html"' in page and f'href="../{run.name}.html"' in page
    assert "<details>" in page and "<summary>" in page and "<pre" in page and "<ol" in page, "trace markup survives"
    assert "Teacher&#x27;s copy" in page or "Teacher's copy" in page
    last = (run / f"{N_VE - 1}.html").read_text()
    assert f'href="{N_VE}.html"' not in last


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
        assert (tmp_path / "site" / "explore" / COV / page[:-5] / "0.html").is_file()


def _text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment)).strip()


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
    assert sorted(p.name for p in kept.glob("*.html")) == ["0.html", "1.html"]


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
