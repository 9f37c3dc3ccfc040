"""The book (issue 21, item 4 and 6): the teacher's and the students' copies apart, model output made harmless,
damaged notebooks and images skipped with a note, no frozen progress bar, no path of the teacher's machine, ours
beside the paper."""

from __future__ import annotations

import base64
import html
import json
import re
import subprocess
from pathlib import Path

import nbformat
import pytest
from nbformat import v4

from covlib.core import paths
from teaching import book, results_html

ROOT = Path(__file__).resolve().parents[2]

HOSTILE = ('<script>alert("x1")</script><img src="x" onerror="alert(\'x2\')">'
           '<a href="javascript:alert(\'x3\')">click</a><div onclick="alert(\'x4\')">d</div>'
           '<iframe src="https://example.org"></iframe><style>body{display:none}</style>')
PNG = (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00"
       b"\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82")


def _live(page: str) -> list[str]:
    """What would still run in a browser: script elements, event handlers, javascript: links, frames."""
    return (re.findall(r"<script(?![^>]*type=\"text/x-mathjax)[^>]*>\s*[^<\s]", page)
            + re.findall(r"<[^>]+\son\w+\s*=", page) + re.findall(r"href=\"\s*javascript:", page, re.I)
            + re.findall(r"<iframe", page, re.I))


def _executed(folder: Path, stem: str, outputs: list, widgets: dict | None = None) -> Path:
    cell = v4.new_code_cell("print('hello')", execution_count=1)
    cell.outputs = [nbformat.from_dict(o) for o in outputs]
    nb = v4.new_notebook(cells=[v4.new_markdown_cell(f"# {stem}\n\n" + HOSTILE), cell])
    if widgets is not None:
        nb.metadata["widgets"] = widgets
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / f"{stem}.ipynb")
    return folder / f"{stem}.ipynb"


def test_the_teachers_and_the_students_copies_go_to_separate_folders_and_say_which(tmp_path):
    assert book.default_out(False) != book.default_out(True)
    assert book.default_out(True).name == "book-students"
    _executed(tmp_path / "executed", "01_consistency_kde", [])
    teacher = book.build(tmp_path / "executed", tmp_path / "teacher", tmp_path / "f", tmp_path / "t", docs=tmp_path / "d")
    students = book.build(tmp_path / "executed", tmp_path / "students", tmp_path / "f", tmp_path / "t",
                          hide_solutions=True, docs=tmp_path / "d")
    for page in teacher:
        assert "Teacher's copy: contains solutions" in page.read_text(), page.name
    for page in students:
        assert "Teacher's copy" not in page.read_text(), page.name
    done = subprocess.run(["make", "-n", "-o", ".venv/.installed", "book", "STUDENTS=1"], cwd=ROOT, capture_output=True,
                          text=True)
    assert "--hide-solutions" in done.stdout and "--out" not in done.stdout  # the students' default folder
    assert "BOOK=" in subprocess.run(["make", "help"], cwd=ROOT, capture_output=True, text=True).stdout


def test_model_output_rendered_as_html_is_made_harmless(tmp_path):
    outputs = [{"output_type": "display_data", "metadata": {}, "data": {"text/html": HOSTILE, "text/plain": "x"}},
               {"output_type": "display_data", "metadata": {}, "data": {"application/javascript": "alert('x5')",
                                                                          "text/plain": "js"}},
               {"output_type": "display_data", "metadata": {}, "data": {"text/markdown": "**md** " + HOSTILE}},
               {"output_type": "execute_result", "execution_count": 1, "metadata": {},
                "data": {"text/html": "<table><tr><th>kept</th></tr><tr><td>cell</td></tr></table>"}}]
    _executed(tmp_path / "executed", "01_consistency_kde", outputs)
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "tab-01-x.md").write_text("| a | b |\n|---|---|\n| " + HOSTILE.replace("|", "") + " | 1 |\n")
    book.build(tmp_path / "executed", tmp_path / "site", tmp_path / "f", tmp_path / "t", docs=tmp_path / "d")
    page = (tmp_path / "site" / "01_consistency_kde.html").read_text()
    assert _live(page) == [], _live(page)
    assert "alert('x5')" not in page and "x1" not in page.replace("&quot;x1&quot;", "")
    assert "<th>kept</th>" in page and "<strong>md</strong>" in page  # what is harmless stays


def test_a_half_written_notebook_is_skipped_with_a_note_and_the_rest_is_built(tmp_path):
    _executed(tmp_path / "executed", "01_consistency_kde", [])
    good = _executed(tmp_path / "executed", "02_threshold_ablation", [])
    text = good.read_text()
    (tmp_path / "executed" / "01_consistency_kde.ipynb").write_text(text[: len(text) // 2])  # killed mid-write
    notes: list[str] = []
    written = book.build(tmp_path / "executed", tmp_path / "site", tmp_path / "f", tmp_path / "t", docs=tmp_path / "d",
                         notes=notes)
    assert (tmp_path / "site" / "02_threshold_ablation.html") in written
    index = (tmp_path / "site" / "index.html").read_text()
    assert "skipped" in index and "make reproduce ONLY=01" in index
    assert "cannot be read" in (tmp_path / "site" / "01_consistency_kde.html").read_text()
    assert any(n.startswith("01_consistency_kde: skipped") for n in notes)


def test_a_garbage_png_is_skipped_with_a_note(tmp_path):
    garbage = base64.b64encode(b"this is not a png at all").decode()
    good = base64.b64encode(PNG).decode()
    _executed(tmp_path / "executed", "01_consistency_kde",
              [{"output_type": "display_data", "metadata": {}, "data": {"image/png": garbage, "text/plain": "fig"}},
               {"output_type": "display_data", "metadata": {}, "data": {"image/png": good, "text/plain": "fig"}}])
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "fig-01-broken.png").write_bytes(b"\x89PNG half")
    (tmp_path / "f" / "fig-01-fine.png").write_bytes(PNG)
    book.build(tmp_path / "executed", tmp_path / "site", tmp_path / "f", tmp_path / "t", docs=tmp_path / "d")
    page = (tmp_path / "site" / "01_consistency_kde.html").read_text()
    assert garbage not in page and "image skipped: this output is not a PNG image" in page
    assert good in page  # a real image still shows
    assert "fig-01-broken.png</code> is not a PNG image" in page
    assert base64.b64encode(PNG).decode() in page.split("fig-01-fine")[-1]


def test_a_progress_bar_is_not_shown_at_all(tmp_path):
    bar = {"output_type": "display_data", "metadata": {},
           "data": {"application/vnd.jupyter.widget-view+json": {"model_id": "abc", "version_major": 2,
                                                                   "version_minor": 0},
                    "text/plain": "scoring:   0%|          | 0/272 [00:00<?, ?it/s]"}}
    done = {"output_type": "display_data", "metadata": {},
            "data": {"application/vnd.jupyter.widget-view+json": {"model_id": "m1", "version_major": 2,
                                                                   "version_minor": 0},
                     "text/plain": "embedding:   0%|          | 0/10"}}
    state = {"m1": {"model_name": "HBoxModel", "state": {"_model_name": "HBoxModel", "children": ["IPY_MODEL_m2",
                                                                                                    "IPY_MODEL_m3"]}},
             "m2": {"state": {"_model_name": "HTMLModel", "value": "embedding: 100%"}},
             "m3": {"state": {"_model_name": "HTMLModel", "value": " 10/10 [00:01&lt;00:00]"}}}
    widgets = {"application/vnd.jupyter.widget-state+json": {"state": state, "version_major": 2, "version_minor": 0}}
    trainer = {"output_type": "display_data", "metadata": {}, "data": {"text/plain": "<IPython.core.display.HTML>",
               "text/html": "<div><progress value='2' max='2'></progress> [2/2 00:03, Epoch 0/1]</div>"
                            "<table class='dataframe'><tr><th>Step</th><th>Training Loss</th></tr></table>"}}
    _executed(tmp_path / "executed", "01_consistency_kde", [bar, done, trainer], widgets)
    book.build(tmp_path / "executed", tmp_path / "site", tmp_path / "f", tmp_path / "t", docs=tmp_path / "d")
    page = (tmp_path / "site" / "01_consistency_kde.html").read_text()
    assert "0/272" not in page and not re.search(r"(?<!\d)0%\|", page)
    assert "embedding" not in page and "10/10" not in page  # not its final state either: progress is not a result
    assert "Training Loss" not in page and "Epoch 0/1" not in page  # nor a trainer's progress table


def test_no_absolute_path_of_the_teachers_machine_is_on_a_page(tmp_path, monkeypatch):
    data = paths.data_dir()
    printed = f"reading {data}/hotpotqa_adv/sim_dev.json from {paths.code_root()}/notebooks and {Path.home()}/x\n"
    _executed(tmp_path / "executed", "01_consistency_kde",
              [{"output_type": "stream", "name": "stdout", "text": printed}])
    for hide in (False, True):
        site = tmp_path / f"site-{hide}"
        book.build(tmp_path / "executed", site, tmp_path / "f", tmp_path / "t", hide_solutions=hide, docs=tmp_path / "d")
        page = (site / "01_consistency_kde.html").read_text()
        assert str(data) not in page and str(paths.code_root()) not in page, hide
        assert "$COVLIB_DATA/hotpotqa_adv/sim_dev.json" in page


def test_the_course_guides_command_block_wraps(tmp_path):
    book.build(tmp_path / "none", tmp_path / "site", tmp_path / "f", tmp_path / "t", docs=tmp_path / "d")
    guide = (tmp_path / "site" / "course-guide.html").read_text()
    assert re.search(r"\.covlib-book pre[^{]*\{[^}]*white-space: pre-wrap", guide)
    assert "<code>make grade</code>" in guide


def test_ours_is_shown_beside_the_papers_number(tmp_path):
    _executed(tmp_path / "executed", "01_consistency_kde", [])
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "01_consistency_kde.json").write_text(json.dumps({"metrics": {
        "cot_sc_em": 12.5, "cot_sc_em_interval": {"low": 4.0, "high": 25.0},
        "paper": {"cot_sc_em": 31.2, "source": "Verify-and-Edit Table 1 (text-davinci-003)"}}}))
    book.build(tmp_path / "executed", tmp_path / "site", tmp_path / "f", tmp_path / "t", docs=tmp_path / "d",
               results=tmp_path / "r")
    page = (tmp_path / "site" / "01_consistency_kde.html").read_text()
    row = re.search(r"<tr><td><code>cot_sc_em</code></td><td>([^<]*)</td><td>([^<]*)</td></tr>", page)
    assert row and row.groups() == ("12.5 [4.0, 25.0]", "31.2"), page[-2000:]
    assert "Verify-and-Edit Table 1" in page


@pytest.mark.parametrize("stem", ["01_consistency_kde"])
def test_notebook_01_records_the_papers_number_the_book_shows(stem):
    from covlib.papers import verify_edit

    source = (ROOT / "notebooks" / f"{stem}.py").read_text()
    assert re.search(r'"paper": \{"cot_sc_em": verify_edit\.PAPER_TABLES\["hotpotqa"\]\[\("CoT-SC", "-"\)\]\[0\]', source)
    assert verify_edit.PAPER_TABLES["hotpotqa"][("CoT-SC", "-")][0] == 31.2  # Table 1, the number the book shows


def test_our_number_and_its_interval_are_shown_with_the_same_decimals(tmp_path):
    (tmp_path / "01_consistency_kde.json").write_text(json.dumps({"metrics": {
        "cot_sc_em": 3.3333333333333335, "cot_sc_em_interval": {"low": 0.0, "high": 8.333333333333332},
        "paper": {"cot_sc_em": 31.2}}}))
    section = results_html.paper_section("01_consistency_kde", tmp_path)
    assert "<td>3.3 [0.0, 8.3]</td><td>31.2</td>" in section, section  # not "[0.000, 8.3]"


def test_markdown_links_to_javascript_in_outputs_and_tables_are_not_live(tmp_path):
    link = "[click me](javascript:alert('x6')) and <javascript:alert('x7')>"
    _executed(tmp_path / "executed", "01_consistency_kde",
              [{"output_type": "display_data", "metadata": {}, "data": {"text/markdown": link, "text/plain": "md"}}])
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "tab-01-links.md").write_text(f"| a | b |\n|---|---|\n| {link} | 1 |\n")
    book.build(tmp_path / "executed", tmp_path / "site", tmp_path / "f", tmp_path / "t", docs=tmp_path / "d")
    page = (tmp_path / "site" / "01_consistency_kde.html").read_text()
    assert not re.search(r"href=[\"']?\s*javascript:", page, re.I), re.findall(r"<a[^>]*>", page)
    assert page.count("click me") == 2  # the text stays, the link does not


LEDGER_CSV = ("paper,claim,role,scope,ours [95% CI],paper evidence,n,better / worse,p,verdict,reason,counted,notebook\n"
              "Verify-and-Edit,CoT-SC + VE beats CoT-SC,primary,\"hotpotqa, dataset\",\"10.00 [0.78, 20.62]\","
              "Tables 1-3: +4.5 to +25.6 EM,60,7 / 1,0.0703,inconclusive at this n,r,True,03_verify_and_edit_tables\n"
              "Verify-and-Edit,CoT-SC + VE beats CoT-SC,secondary,\"hotpotqa, bm25\",\"6.67 [-1.8, 16.5]\","
              "Tables 1-3,60,5 / 1,0.22,inconclusive at this n,r,False,03_verify_and_edit_tables\n"
              "CoV-RAG,GPT-4 ranks CoV-RAG first,primary,correctness,—,Table 3: ranks,,,,not testable here,"
              "no GPT-4 offline,False,\n")


def _ve_page(tmp_path: Path, outputs: list) -> str:
    _executed(tmp_path / "executed", "03_verify_and_edit_tables", outputs)
    (tmp_path / "t").mkdir(exist_ok=True)
    (tmp_path / "t" / "tab-03-hotpotqa.md").write_text(
        "**tab-03-hotpotqa**\n\n_model: m · profile: smoke_\n\n| method | EM/acc [95% CI] | paper EM/acc | n |\n"
        "|:---|:---|---:|---:|\n| CoT-SC + VE | 13.3 [6.9, 24.2] | 56.80 | 60 |\n")
    (tmp_path / "t" / "tab-12-claims.csv").write_text(LEDGER_CSV)
    book.build(tmp_path / "executed", tmp_path / "site", tmp_path / "f", tmp_path / "t", docs=tmp_path / "d",
               results=tmp_path / "r")
    return (tmp_path / "site" / "03_verify_and_edit_tables.html").read_text()


def test_a_notebook_page_opens_on_its_results_with_the_code_folded(tmp_path):
    page = _ve_page(tmp_path, [{"output_type": "stream", "name": "stdout", "text": "hello\n"}])
    results, step = page.index('id="results"'), page.index("The notebook, step by step")
    assert results < page.index(">tab-03-hotpotqa</h3>") < step < page.index('<details class="covlib-code">')
    assert page.index("Claims this notebook tests") < step and "CoT-SC + VE beats CoT-SC" in page[results:step]
    assert "Tables 1-3: +4.5 to +25.6 EM" in page[results:step]  # the paper's evidence beside ours
    assert "hotpotqa, bm25" not in page  # the primary row only; the secondary ones are in notebook 12
    assert page.count(">tab-03-hotpotqa</h3>") == 1, "the table is not repeated at the bottom"
    assert '<details class="covlib-code"><summary>code</summary>' in page
    assert '<td class="covlib-num"' in page and "13.3 [6.9, 24.2]</td>" in page  # an interval stays on one line


def test_a_wide_results_table_scrolls_in_its_box_not_the_page(tmp_path):
    """Notebook 06's table of ten "X [95% CI]" columns (intervals kept on one line) made its page 2,180 px wide at a
    1,280 px window, the whole page scrolling sideways; now the table scrolls in its own box."""
    from chromium import where_results_start

    _ve_page(tmp_path, [])
    head = "| method | " + " | ".join(f"complete P{k} (judge-corrected) [95% CI]" for k in range(10)) + " | n |\n"
    row = "| CoT-SC + VE | " + " | ".join("13.3 [6.9, 24.2]" for _ in range(10)) + " | 60 |\n"
    (tmp_path / "t" / "tab-03-hotpotqa.md").write_text("**tab-03-hotpotqa**\n\n" + head + "|:---|" + "---:|" * 11 + "\n" + row)
    book.build(tmp_path / "executed", tmp_path / "site", tmp_path / "f", tmp_path / "t", docs=tmp_path / "d",
               results=tmp_path / "r")
    probe = where_results_start(tmp_path / "site" / "03_verify_and_edit_tables.html", tmp_path, size=(1280, 1600))
    assert probe["page_width"] <= 1280, probe


def test_a_notebook_page_keeps_a_simulated_models_rows_apart_with_what_was_planted(tmp_path):
    sim = "Vicuna-13B, simulated (planted effects), paper"
    _executed(tmp_path / "executed", "03_verify_and_edit_tables", [])
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "tab-12-claims.csv").write_text(
        LEDGER_CSV.replace(",notebook\n", ",notebook,model,planted,planted inside 95% CI\n", 1).replace(
            "03_verify_and_edit_tables\n", "03_verify_and_edit_tables,SmolLM2,,\n", 1)
        + f"Verify-and-Edit,CoT-SC + VE beats CoT-SC,primary,\"sim scope\",\"9.0 [1.0, 17.0]\",Tables 1-3,60,7 / 1,"
          f"0.03,supported,r,True,03_verify_and_edit_tables,\"{sim}\",25.6,no\n")
    book.build(tmp_path / "executed", tmp_path / "site", tmp_path / "f", tmp_path / "t", docs=tmp_path / "d")
    page = (tmp_path / "site" / "03_verify_and_edit_tables.html").read_text()
    real, apart = page.split("a check of the measuring chain, not evidence about the papers")
    assert "Claims this notebook tests" in real and "hotpotqa, dataset" in real and "sim scope" not in real
    assert "sim scope" in apart and html.escape(sim) in apart and "inside 0 of 1" in apart


def test_a_message_printed_again_is_cut_short(tmp_path):
    why = "WebSearch has no endpoint: pass WebSearch(endpoint=...) or set COVLIB_SEARCH_ENDPOINT to a URL"
    text = "".join(f"{name}: web unavailable: {why}\n" for name in ("hotpotqa", "2wikimultihop", "fever"))
    page = _ve_page(tmp_path, [{"output_type": "stream", "name": "stdout", "text": text}])
    assert page.count(why) == 1 and page.count("… (as above)") == 2
    assert "fever: web unavailable: WebSearch has no… (as above)" in page


def test_the_front_page_opens_on_contents_then_counts_then_a_linked_ledger(tmp_path):
    _ve_page(tmp_path, [])
    (tmp_path / "r").mkdir(exist_ok=True)
    (tmp_path / "r" / "12_claims.json").write_text(json.dumps({"metrics": {"primary_verdicts": {
        "supported": 0, "contradicted": 0, "inconclusive at this n": 1, "not testable here": 1}, "n_same_comparison": 0}}))
    book.build(tmp_path / "executed", tmp_path / "site", tmp_path / "f", tmp_path / "t", docs=tmp_path / "d",
               results=tmp_path / "r")
    index = (tmp_path / "site" / "index.html").read_text()
    assert index.index("Contents") < index.index('id="ledger"') < index.index('id="notebooks"')
    assert "<strong>1</strong> inconclusive at this n" in index and "<strong>0</strong> supported" in index
    assert re.findall(r'<td><a href="([\w]+)\.html#results">', index) == ["03_verify_and_edit_tables", "12_claims"]
    assert "Tables 1-3: +4.5 to +25.6 EM" in index and "10.00 [0.78, 20.62]" in index
