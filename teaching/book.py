"""A reading copy: the executed notebooks, their figures and tables, as a static site that works offline.

`build` renders each executed notebook with nbconvert into one self-contained HTML page (images
inline, no script or font fetched from the network), appends the figures and tables the notebook
wrote and, where its results record the paper's numbers, ours beside the paper's, and writes an
index page listing each paper, its notebooks and what each reproduces, plus the course guide and
the pages of `docs/` (one HTML page each, linked from the index). Open `index.html` from disk; no
server is needed. Outputs and tables are model output, so they are sanitised (nbconvert's
`sanitize_html` with a bleach policy: no script, event handler or javascript: link stays live);
absolute paths of the machine that ran the notebooks are replaced by neutral names. The teacher's
copy (solutions shown, `build/book/`) says so in a banner on every page; the students' copy
(`hide_solutions`) goes to `build/book-students/`. A notebook that wrote traces (results/traces/) gets an
explorer page, linked from its page and the index: every example of every run, step by step (teaching.explorer).
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any, Sequence

from covlib.core import paths
from teaching import explorer
from teaching.exercises import strip_solutions
from teaching.results_html import ledger_section, markdown_html, summary_section
from teaching.safe_html import check_images, neutral_paths, offline, sanitize

# (paper, where it appeared, [(notebook, what it reproduces)])
PAPERS: tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...] = (
    ("Data and judges", "shared by the three papers", (
        ("00_data_tour", "the datasets, the offline corpus and retrieval recall@k"),
        ("00b_nli_judges", "every NLI judge on the same held-out pairs"),
    )),
    ("Verify-and-Edit: A Knowledge-Enhanced Chain-of-Thought Framework", "Zhao et al., ACL 2023", (
        ("01_consistency_kde", "Fig. 2: consistency of correct vs incorrect CoT-SC predictions"),
        ("02_threshold_ablation", "Fig. 3: EM and AUC as the consistency threshold moves"),
        ("03_verify_and_edit_tables", "Tables 1-3: Verify-and-Edit on HotpotQA, 2WikiMultiHop and FEVER"),
    )),
    ("How Credible Is an Answer From Retrieval-Augmented LLMs?", "Zhou, Liu and Dou", (
        ("04_credibility_models", "Tables 1-2: key-fact precision/recall, citations and self-consistency per model"),
        ("05_knowledge_precision", "Fig. 3: metrics as noise references are added"),
        ("06_knowledge_recall", "Table 3: complete, partial and no references"),
        ("07_reflection_completion", "Table 4: self-reflection and self-completion"),
    )),
    ("Retrieving, Rethinking and Revising: Chain-of-Verification for RAG (CoV-RAG)", "CoV-RAG", (
        ("08_covrag_verifier", "Tables 1 and 6: the verifier's scores and judgment; how often σ fires"),
        ("09_covrag_iterations", "Table 2, Fig. 3, Table 5: single vs multi-iteration accuracy"),
        ("10_covrag_finetune", "§2.2 and Table 4: LoRA fine-tuning of the verifier"),
        ("11_covrag_judge", "Table 3: answers ranked by an LLM judge"),
    )),
    ("The claims ledger", "the three papers' directional claims against our runs", (
        ("12_claims", "every claim: the paper's evidence, ours with its 95% interval, a verdict"),
    )),
)
TEMPLATE = "teaching/templates/book.html.j2"  # nbconvert's lab template, each code cell's source folded

_STYLE = """
body.covlib-book { font: 16px/1.5 system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
.covlib-book h1 { font-size: 1.8rem; } .covlib-book h2 { margin-top: 2rem; border-bottom: 1px solid #ddd; }
.covlib-book li { margin: .3rem 0; } .covlib-book .missing { color: #888; }
.covlib-book code { background: #f4f4f4; padding: 0 .2rem; }
.covlib-book pre, section.covlib-outputs pre { overflow-x: auto; white-space: pre-wrap; overflow-wrap: anywhere; max-width: 100%; }
.covlib-book pre { background: #f4f4f4; padding: .5rem; } .covlib-book table { border-collapse: collapse; }
table.ledger { table-layout: fixed; width: min(calc(100vw - 2rem), 84rem); position: relative; left: 50%;
  transform: translateX(-50%); border-collapse: collapse; }
section.covlib-outputs table.ledger { width: 100%; left: 0; transform: none; }
table.ledger td, table.ledger th { border: 1px solid #ddd; padding: .2rem .4rem; font-size: .85rem; vertical-align: top;
  overflow-wrap: break-word; }
details.covlib-untestable > summary, details.covlib-why > summary { cursor: pointer; }
details.covlib-untestable > summary { margin: .5rem 0; color: #555; }
td.covlib-num { white-space: nowrap; text-align: right; } table.ledger a, section.covlib-summary a { color: #0645ad; }
.covlib-book td, .covlib-book th { border: 1px solid #ccc; padding: .2rem .5rem; }
nav.covlib-nav { position: sticky; top: 0; z-index: 10; background: #f7f7f7; border-bottom: 1px solid #ddd;
  padding: .5rem 1rem; font: 14px system-ui, sans-serif; }
nav.covlib-nav a { margin-right: 1.5rem; }
section.covlib-outputs { max-width: 70rem; margin: 2rem auto; padding: 0 1rem; font: 15px system-ui, sans-serif; }
section.covlib-outputs img { max-width: 100%; border: 1px solid #eee; }
section.covlib-outputs table { border-collapse: collapse; font-size: 13px; }
section.covlib-outputs table:not(.ledger), .covlib-book table:not(.ledger) { display: block; max-width: 100%; overflow-x: auto; }  /* a wide table scrolls in its box */
section.covlib-outputs td, section.covlib-outputs th { border: 1px solid #ccc; padding: .15rem .4rem; }
.covlib-outputs .missing, .covlib-unreadable { color: #a33; }
section.covlib-summary { border-bottom: 2px solid #ddd; padding-bottom: 1rem; }
details.covlib-code > summary { cursor: pointer; color: #666; font: 12px monospace; padding: .1rem 1rem; }
nav.covlib-contents li { margin: .15rem 0; } .covlib-verdicts span { margin-right: 1rem; display: inline-block; }
td.verdict-supported { color: #1b7e5f; } td.verdict-contradicted { color: #b34700; }
div.covlib-teacher { background: #fff3cd; border-bottom: 2px solid #e0a800; color: #5c4400; padding: .4rem 1rem;
  font: bold 14px system-ui, sans-serif; text-align: center; }
"""
TEACHER_BANNER = ("Teacher's copy: contains solutions — hand out build/book-students/ "
                  "(<code>make book STUDENTS=1</code>) instead")
_REMOTE_SCRIPT = re.compile(r"<script[^>]*\bsrc=\"https?://[^\"]*\"[^>]*>\s*</script>", re.I)
_SCRIPT = re.compile(r"<script\b[^>]*>.*?</script>", re.I | re.S)
_DOC_LINK = re.compile(r'href="(?:docs/)?([\w-]+)\.md(#[\w-]*)?"')  # a link between docs pages, to its rendered copy


def catalogue() -> list[str]:
    """Every notebook the book lists, in reading order."""
    return [nb for _, _, notebooks in PAPERS for nb, _ in notebooks]


def _banner(hide_solutions: bool) -> str:
    return "" if hide_solutions else f'<div class="covlib-teacher" role="note">{TEACHER_BANNER}</div>'


def _nav(prev: str | None, nxt: str | None, explore: str | None = None) -> str:
    links = ['<a href="index.html">↑ index</a>', '<a href="course-guide.html">course guide</a>']
    if explore:
        links.append(f'<a href="explore-{explore}.html">traces: every example, step by step</a>')
    if prev:
        links.append(f'<a href="{prev}.html">← {html.escape(prev)}</a>')
    if nxt:
        links.append(f'<a href="{nxt}.html">{html.escape(nxt)} →</a>')
    return f'<nav class="covlib-nav">{"".join(links)}</nav>'


class UnreadableNotebook(ValueError):
    """An executed notebook that cannot be read (half-written, truncated JSON, not a notebook)."""


def read_notebook(path: str | Path) -> Any:
    """The notebook at `path`; UnreadableNotebook saying why when it is not a readable notebook."""
    import nbformat

    try:
        return nbformat.read(str(path), as_version=4)
    except (ValueError, OSError, KeyError, TypeError, AttributeError, nbformat.ValidationError) as err:
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise UnreadableNotebook(f"{Path(path).name} cannot be read ({reason[:200]})") from err


def render_notebook(path: str | Path, figures: Path, tables: Path, nav: str = "", hide_solutions: bool = False,
                    results: Path | None = None) -> str:
    """One executed notebook as a self-contained HTML page (nbconvert's lab template, nothing remote, outputs
    sanitised, the machine's absolute paths neutral); UnreadableNotebook when it cannot be read.

    `hide_solutions`: the exercises' solutions show as the student stub and the hidden checks are left out; without
    it the page carries the teacher's-copy banner. `results`: the results folder (ours beside the paper).
    """
    from nbconvert import HTMLExporter

    nb = check_images(offline(read_notebook(path)))
    if hide_solutions:
        for cell in nb.cells:
            cell.source = strip_solutions(cell.source)
            for out in cell.get("outputs", []):
                if out.get("output_type") == "error":
                    out["traceback"] = []  # a traceback quotes the source it ran, hidden checks included
    # nbconvert's own sanitising (what nbviewer sets): text/html and text/markdown outputs and Markdown cells go
    # through its clean_html filter, application/javascript is not emitted. Its filter keeps too little (no th,
    # img or heading), so it is given ours.
    exporter = HTMLExporter(template_name="lab", template_file=str(paths.code_root() / TEMPLATE), sanitize_html=True,
                            filters={"clean_html": sanitize})
    body, _ = exporter.from_notebook_node(nb)
    stem = Path(path).stem
    summary = summary_section(stem, figures, tables, results)
    opening = (f"<section class=\"covlib-outputs\"><h1>{html.escape(_notebook_title(nb, stem))}</h1></section>{summary}"
               "<section class=\"covlib-outputs\"><h2 id=\"notebook\">The notebook, step by step</h2><p>Each code "
               "cell is folded under <em>code</em>; its outputs follow it.</p></section>")
    body = _REMOTE_SCRIPT.sub("", body)
    body = _SCRIPT.sub(lambda m: "" if re.search(r"(import|src)\W+https?://", m.group(0)) else m.group(0), body)
    body = body.replace("</head>", f"<style>{_STYLE}</style></head>", 1)
    return re.sub(r"(<body[^>]*>)", lambda m: m.group(1) + _banner(hide_solutions) + nav + opening, body, count=1)


def _notebook_title(nb: Any, stem: str) -> str:
    """The notebook's own title (its first Markdown heading), else its file name."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            heading = next((line[2:].strip() for line in cell.source.splitlines() if line.startswith("# ")), "")
            if heading:
                return heading
    return stem


def unreadable_page(stem: str, reason: str, nav: str = "", hide_solutions: bool = False) -> str:
    """The page of an executed notebook that cannot be read: why, and the command that runs it again."""
    number = stem.split("_", 1)[0]
    return _page(stem, _banner(hide_solutions) + nav + f"<h1><code>{html.escape(stem)}</code></h1>"
                 f"<p class=\"covlib-unreadable\">Skipped: {html.escape(reason)}. The executed notebook is half-written "
                 f"or damaged; <code>make reproduce ONLY={html.escape(number)}</code>, then <code>make book</code>, "
                 "renders it again.</p>")


def _page(title: str, content: str) -> str:
    return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{_STYLE}</style></head><body class=\"covlib-book\">{content}</body></html>")


def contents(built: Sequence[str], explored: Sequence[str] = (), docs: Sequence[Path] = ()) -> str:
    """The index's short table of contents: one line per paper with its notebooks, then the ledger and the docs."""
    items = []
    for paper, _, notebooks in PAPERS:
        links = [f"<a href=\"{stem}.html\" title=\"{html.escape(what)}\">{stem.split('_', 1)[0]}</a>" if stem in built
                 else f"<span class=\"missing\" title=\"not run yet: make reproduce\">{stem.split('_', 1)[0]}</span>"
                 for stem, what in notebooks]
        items.append(f"<li>{html.escape(paper.split(':')[0])}: {' · '.join(links)}</li>")
    extra = ['<a href="#ledger">claims ledger</a>', '<a href="#notebooks">what each notebook reproduces</a>',
             '<a href="course-guide.html">course guide</a>'] + (['<a href="#docs">documentation</a>'] if docs else [])
    explore = f"; traces of {len(explored)} notebooks, example by example" if explored else ""
    return (f"<nav class=\"covlib-contents\"><h2>Contents</h2><ul>{''.join(items)}</ul><p>{' · '.join(extra)}"
            f"{html.escape(explore)}</p></nav>")


def docs_pages(folder: Path) -> list[Path]:
    """The project's documentation pages (docs/*.md), library map first, then by name."""
    return sorted(folder.glob("*.md"), key=lambda p: (p.stem != "library", p.stem)) if folder.is_dir() else []


def docs_section(pages: Sequence[Path]) -> str:
    """The index's list of documentation pages, each linked to its rendered copy (titled by its first heading)."""
    if not pages:
        return ""
    items = "".join(f"<li><a href=\"docs-{html.escape(p.stem)}.html\">{html.escape(_title(p))}</a></li>" for p in pages)
    return f"<h2 id=\"docs\">Documentation</h2><ul>{items}</ul>"


def _title(page: Path) -> str:
    first = next((line for line in page.read_text(encoding="utf-8").splitlines() if line.startswith("# ")), "")
    return first[2:].strip() or page.stem


def index_page(built: Sequence[str], tables: Path | None = None, docs: Sequence[Path] = (),
               unreadable: dict[str, str] | None = None, hide_solutions: bool = True, explored: Sequence[str] = (),
               results: Path | None = None) -> str:
    """The index: a short contents, the claims ledger (counts per verdict, the paper's evidence, a link per row), then
    each paper, its notebooks, what each reproduces (a notebook not executed yet says how to run it; one that cannot
    be read says so; one with traces links its explorer). Without `hide_solutions`, the teacher's-copy banner."""
    unreadable = unreadable or {}
    parts = [_banner(hide_solutions), "<h1>covlib: verification in retrieval-augmented generation, reproduced</h1>",
             "<p>The executed notebooks of this reproduction, with their figures and tables. "
             "Teachers: see the <a href=\"course-guide.html\">course guide</a>.</p>",
             contents(built, explored, docs),
             ledger_section(tables if tables is not None else paths.tables_dir(), results),
             "<h2 id=\"notebooks\">What each notebook reproduces</h2>"]
    for paper, where, notebooks in PAPERS:
        parts.append(f"<h3>{html.escape(paper)}</h3><p><em>{html.escape(where)}</em></p><ul>")
        for stem, what in notebooks:
            what = html.escape(what) + (f' (<a href="explore-{stem}.html">traces: every example</a>)' if stem in explored else "")
            if stem in unreadable:
                number = stem.split("_", 1)[0]
                parts.append(f"<li class=\"covlib-unreadable\"><a href=\"{stem}.html\"><code>{stem}</code></a>: "
                             f"{what} (skipped: {html.escape(unreadable[stem])}; "
                             f"<code>make reproduce ONLY={number}</code>, then <code>make book</code>)</li>")
            elif stem in built:
                parts.append(f"<li><a href=\"{stem}.html\"><code>{stem}</code></a>: {what}</li>")
            else:
                number = stem.split("_", 1)[0]
                parts.append(f"<li class=\"missing\"><code>{stem}</code>: {what} "
                             f"(not executed yet: <code>make reproduce ONLY={number}</code>, then <code>make book</code>)</li>")
        parts.append("</ul>")
    parts.append(docs_section(docs))
    return _page("covlib: the reading copy", "".join(parts))


def default_out(hide_solutions: bool = False) -> Path:
    """Where the book goes: build/book/ (the teacher's copy, solutions shown) or build/book-students/."""
    return paths.build_dir() / ("book-students" if hide_solutions else "book")


def build(executed: str | Path | None = None, out: str | Path | None = None, figures: str | Path | None = None,
          tables: str | Path | None = None, guide: str | Path | None = None, hide_solutions: bool = False,
          docs: str | Path | None = None, results: str | Path | None = None, notes: list[str] | None = None,
          traces: str | Path | None = None) -> list[Path]:
    """Render every executed notebook found in `executed`, the index, the course guide and docs/ into `out`
    (default: `default_out(hide_solutions)`), and the explorer of each notebook with traces under `traces` (default
    <results>/traces). A notebook that cannot be read gets a page saying so and a note on the index, and the rest of
    the book is built; `notes` (when given) collects what was skipped."""
    executed = Path(executed) if executed else paths.code_root() / "notebooks" / "executed"
    out = Path(out) if out else default_out(hide_solutions)
    results = Path(results) if results else paths.results_dir()
    notes = notes if notes is not None else []
    figures = Path(figures) if figures else paths.figures_dir()
    tables = Path(tables) if tables else paths.tables_dir()
    guide = Path(guide) if guide else paths.code_root() / "notebooks" / "COURSE.md"
    out.mkdir(parents=True, exist_ok=True)
    order = catalogue()
    built = [stem for stem in order if (executed / f"{stem}.ipynb").is_file()]
    written, unreadable = [], {}
    banner = _banner(hide_solutions)
    explored = explorer.write(out, Path(traces) if traces else results / "traces", order, _page, banner, built, notes)
    for i, stem in enumerate(built):
        nav = _nav(built[i - 1] if i else None, built[i + 1] if i + 1 < len(built) else None,
                   stem if stem in explored else None)
        page = out / f"{stem}.html"
        try:
            text = render_notebook(executed / f"{stem}.ipynb", figures, tables, nav, hide_solutions, results)
        except UnreadableNotebook as err:
            unreadable[stem] = str(err)
            notes.append(f"{stem}: skipped, {err}")
            text = unreadable_page(stem, str(err), nav, hide_solutions)
        if "is not a PNG image" in text:
            notes.append(f"{stem}: a figure or image output is not a PNG image; skipped with a note on its page")
        page.write_text(neutral_paths(text), encoding="utf-8")
        written.append(page)
    text = guide.read_text(encoding="utf-8") if guide.is_file() else "# Course guide\n\n(not found)"
    (out / "course-guide.html").write_text(neutral_paths(_page("Course guide", banner + _nav(None, None) + markdown_html(text))),
                                           encoding="utf-8")
    pages = docs_pages(Path(docs) if docs else paths.code_root() / "docs")
    for page in pages:
        target = out / f"docs-{page.stem}.html"
        body = _DOC_LINK.sub(r'href="docs-\1.html\2"', markdown_html(page.read_text(encoding="utf-8")))
        target.write_text(neutral_paths(_page(_title(page), banner + _nav(None, None) + body)), encoding="utf-8")
    index = index_page(built, tables, pages, unreadable, hide_solutions, explored, results)
    (out / "index.html").write_text(neutral_paths(index), encoding="utf-8")
    return [out / "index.html", out / "course-guide.html", *written, *(out / f"docs-{p.stem}.html" for p in pages)]


def _cli(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m teaching.book", description=__doc__.splitlines()[0])
    parser.add_argument("--executed", default=str(paths.code_root() / "notebooks" / "executed"),
                        help="folder of executed notebooks (make reproduce writes notebooks/executed)")
    parser.add_argument("--out", default=None,
                        help="output folder (default: build/book/, the teacher's copy; build/book-students/ with --hide-solutions)")
    parser.add_argument("--figures", default=None, help="figures folder (default: figures/)")
    parser.add_argument("--tables", default=None, help="tables folder (default: tables/)")
    parser.add_argument("--hide-solutions", action="store_true",
                        help="show the exercises' solutions as the student stub and leave out hidden checks (a copy for students)")
    args = parser.parse_args(argv)
    out = Path(args.out) if args.out else default_out(args.hide_solutions)
    notes: list[str] = []
    written = build(args.executed, out, args.figures, args.tables, hide_solutions=args.hide_solutions, notes=notes)
    skipped = sum(1 for n in notes if ": skipped," in n)
    pages = sum(1 for p in written if p.stem in catalogue()) - skipped
    copy = "the students' copy (solutions hidden)" if args.hide_solutions else \
        "the teacher's copy (solutions shown; hand out the one `make book STUDENTS=1` writes)"
    print(f"book: {pages} of {len(catalogue())} notebooks rendered, {copy}; open {out / 'index.html'}")
    for note in notes:
        print(f"  note: {note}")
    if pages < len(catalogue()):
        print("notebooks not executed yet are listed on the index page with the command that runs them")
    return 0


if __name__ == "__main__":
    raise SystemExit(_cli())
