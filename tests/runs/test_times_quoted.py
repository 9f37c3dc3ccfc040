"""One place for time (issue 37, item 6): docs/times.md holds the one table of measured times, and every other
page quotes its ranges and links to it.

A time in minutes or hours on a quoting page (the README, the course guide, the judge, test, scale-out and teaching
pages, `make help`) must be the range of a row of the table, both ends as the table gives them (to the precision
quoted: "48" for 47.9), never a single figure of its own; the row must be one the paragraph is about (one of the
row's words appears in it); and the paragraph must link to docs/times.md. The few minute figures that are not run
times (an exercise's working time, a retry's back-off) are listed below with the reason. The table itself must hold
the records it summarises: `REFERENCE_SECONDS` (benchmarks.md's reference run) inside its per-notebook and
whole-run ranges, the fresh-clone row the sum of the rows it adds up.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from covlib.core import paths
from covlib.runs import run_times as R

ROOT = paths.code_root()
TABLE_PAGE = "docs/times.md"
# docs/benchmarks.md is not among them: it is the record of single runs (the reference run per notebook, the
# llama-server builds), which the table summarises; it links to the table, and its reference run is checked below.
QUOTING = ("README.md", "notebooks/COURSE.md", "docs/judges.md", "docs/testing.md", "docs/scale_out.md",
           "docs/teaching.md", "Makefile")

# A figure in minutes or hours: "25 min", "~3 min", "1 to 4 minutes", "47.9-58 minutes", "2.5-3.2 min".
FIGURE = re.compile(r"(?<![\w.,])(\d+(?:\.\d+)?)(?:\s*(?:-|–|to)\s*(\d+(?:\.\d+)?))?\s*(min|minutes|hours?)\b")
UNIT = {"min": 60.0, "minutes": 60.0, "hour": 3600.0, "hours": 3600.0, "s": 1.0}

# Minute figures on the quoting pages that are not run times, each matched by a pattern around the figure.
NOT_RUN_TIMES = {
    "notebooks/COURSE.md": [
        (r"\b[1-9] [\w σ'-]+: \d+-\d+ min", "an exercise's estimated working time (a student's, not the machine's)"),
        (r"adds about 15 to 20\s+minutes per notebook", "reading a notebook's introduction"),
    ],
    "docs/scale_out.md": [(r"`Retry-After` header is honoured, up to 5 minutes", "the longest retry back-off")],
}

# The words that say what a row of the table times; a quoted range must have one of its row's words in its paragraph.
ROW_WORDS = {
    "`make env`: a fresh": ("make env", "venv"),
    "`make env` on a machine's first run": ("make env", "from source"),
    "of which: building llama-cpp-python": ("llama-cpp-python", "llama.cpp", "from source"),
    "`make env` where the installed or cached": ("portable", "rebuilds"),
    "`make judge`": ("judge",),
    "`make llama-server`": ("llama-server",),
    "`make reproduce`, `cpu` profile": ("notebooks", "make reproduce", "cpu"),
    "one notebook in the `cpu` profile": ("notebook",),
    "a first `make reproduce`": ("make reproduce", "fresh"),
    "`make test-fast`": ("test-fast",),
    "`make test` with a warm": ("make test",),
    "`make test` from a fresh clone": ("make test",),
    "a student's start": ("student", "set-up"),
    "a student notebook's first run": ("first run", "student"),
    "a notebook re-run from the call cache": ("re-run", "cache"),
}


def _seconds(low: str, high: str | None, unit: str) -> tuple[float, float]:
    scale = UNIT[unit]
    return float(low) * scale, float(high if high is not None else low) * scale


def _table() -> dict[str, tuple[float, float, str]]:
    """The one table: {row: (low seconds, high seconds, the time as written)}."""
    text = (ROOT / TABLE_PAGE).read_text(encoding="utf-8")
    head = "| what | time | runs |"
    assert head in text, f"{TABLE_PAGE} has no table headed {head!r}"
    rows = {}
    for line in text.split(head, 1)[1].split("\n\n", 1)[0].splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        match = re.fullmatch(r"(\d+(?:\.\d+)?)(?:-(\d+(?:\.\d+)?))? (min|s)", cells[1])
        assert match, f"{TABLE_PAGE}: the time of {cells[0]!r} is not 'low-high min' or 'n s': {cells[1]!r}"
        low, high = _seconds(*match.groups())
        assert low <= high, f"{TABLE_PAGE}: {cells[0]!r} has its range backwards"
        rows[cells[0]] = (low, high, cells[1])
    return rows


def _row(rows: dict, start: str) -> tuple[float, float, str]:
    found = [value for name, value in rows.items() if name.startswith(start)]
    assert len(found) == 1, f"{TABLE_PAGE} has {len(found)} rows starting {start!r}"
    return found[0]


def _agrees(quoted: str, unit: str, table_seconds: float) -> bool:
    """Whether a quoted end agrees with the table's end to the precision it is quoted with ("48" for 47.9)."""
    decimals = len(quoted.split(".", 1)[1]) if "." in quoted else 0
    return abs(float(quoted) - table_seconds / UNIT[unit]) <= 0.5 * 10 ** -decimals + 1e-9


def _paragraphs(page: str, root: Path) -> list[str]:
    """A page's paragraphs (blocks between blank lines); each line on its own for the Makefile."""
    text = (root / page).read_text(encoding="utf-8")
    return text.splitlines() if page == "Makefile" else re.split(r"\n\s*\n", text)


def _quote_problems(page: str, rows: dict, root: Path = ROOT) -> list[str]:
    """What is wrong with each minute figure on a page: no range of the table, a row the paragraph is not about, no
    link to the table in its paragraph."""
    problems = []
    exempt = NOT_RUN_TIMES.get(page, [])
    for paragraph in _paragraphs(page, root):
        flat = re.sub(r"\s+", " ", paragraph)
        spared = [m.span() for pattern, _ in exempt for m in re.finditer(pattern, flat)]
        for fig in FIGURE.finditer(flat):
            if any(a <= fig.start() and fig.end() <= b for a, b in spared):
                continue
            low, high, unit = fig.groups()
            shown = fig.group(0)
            # both ends as the table gives them; a single figure only for a row of one run (or one value)
            matching = [name for name, (lo, hi, _) in rows.items()
                        if _agrees(low, unit, lo) and _agrees(high or low, unit, hi) and (high or lo == hi)]
            if not matching:
                problems.append(f"{page}: {shown!r} is no range of {TABLE_PAGE} (…{flat[max(0, fig.start() - 60):fig.end() + 20]}…)")
                continue
            about = [name for name in matching
                     if any(word.lower() in flat.lower() for word in ROW_WORDS.get(_key(name), ()))]
            if not about:
                problems.append(f"{page}: {shown!r} is the range of {matching}, which its paragraph is not about")
            elif "times.md" not in flat:
                problems.append(f"{page}: {shown!r} is quoted without a link to {TABLE_PAGE} in its paragraph")
    return problems


def _key(name: str) -> str:
    return next((key for key in ROW_WORDS if name.startswith(key)), name)


def test_the_table_names_its_machine_and_every_row_has_its_words():
    text = (ROOT / TABLE_PAGE).read_text(encoding="utf-8")
    assert "2-core reference machine" in text and "24 GiB" in text and "no GPU" in text
    rows = _table()
    assert {_key(name) for name in rows} == set(ROW_WORDS), "a row of the table has no words here, or a row went"
    for name in rows:
        runs = text.split(name, 1)[1].split("\n", 1)[0]
        assert re.search(r"20\d\d-\d\d-\d\d|below|the sum", runs), f"{name!r}: no date for its runs"


@pytest.mark.parametrize("page", QUOTING)
def test_a_page_quotes_times_only_as_the_tables_ranges_with_a_link(page):
    problems = _quote_problems(page, _table())
    assert not problems, "\n".join(problems)


def test_the_pages_that_quote_a_time_link_to_the_table():
    for page in ("README.md", "notebooks/COURSE.md", "docs/judges.md", "docs/testing.md", "docs/scale_out.md",
                 "docs/benchmarks.md"):
        assert "times.md" in (ROOT / page).read_text(encoding="utf-8"), f"{page} does not link to {TABLE_PAGE}"
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for target in ("judge", "llama-server", "test-fast"):
        line = next(line for line in makefile.splitlines() if line.startswith(f"{target}:"))
        assert "docs/times.md" in line and FIGURE.search(line), f"make help's {target} line quotes no range of the table"


def test_the_old_single_figures_fail_the_check(tmp_path):
    """The check is not a tautology: the figures issue 37 found (and the README's first one) fail it."""
    rows = _table()
    old = {"README.md": "notebooks in under an hour (about 87 minutes, [times](docs/times.md)).\n\n"
                        "notebooks in under an hour (47.9 minutes of notebooks, [times](docs/times.md)).",
           "docs/judges.md": "`make judge` takes about 25 minutes on a 2-core CPU on a good day ([times.md](times.md)).",
           "Makefile": "judge: env ## train the judge once (~25 min CPU; docs/times.md)\n"
                       "llama-server: env ## build llama-server once (~3 min on 2 cores; docs/times.md)",
           "docs/testing.md": "llama-server, which `make test` runs first; about 2.5 minutes on 2 cores."}
    for page, text in old.items():
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / page).write_text(text, encoding="utf-8")
    found = {page: _quote_problems(page, rows, tmp_path) for page in old}
    assert len(found["README.md"]) == 2 and all("no range" in p for p in found["README.md"]), found["README.md"]
    for page in ("docs/judges.md", "docs/testing.md"):
        assert len(found[page]) == 1 and "no range" in found[page][0], found[page]
    # "~3 min" is within 2.5-3.2 at a whole minute, but a single figure where the table has a range
    assert len(found["Makefile"]) == 2 and all("no range" in p for p in found["Makefile"]), found["Makefile"]
    # the right range in the wrong place, or without the link, fails too
    (tmp_path / "docs" / "judges.md").write_text("`make judge` takes 2.5-3.2 min ([times.md](times.md)).")
    (tmp_path / "docs" / "testing.md").write_text("`make judge` takes 26-55 min on 2 cores.")
    assert "not about" in _quote_problems("docs/judges.md", rows, tmp_path)[0]
    assert "without a link" in _quote_problems("docs/testing.md", rows, tmp_path)[0]


def test_the_table_holds_the_reference_run_and_adds_up():
    rows = _table()
    reference = {stem: s for stem, s in R.REFERENCE_SECONDS["cpu"].items() if s}
    low, high, _ = _row(rows, "`make reproduce`, `cpu` profile")
    total = sum(reference.values())
    assert low - 3 <= total <= high + 3, f"the reference run's {total / 60:.1f} min is outside the table's range"
    # per notebook: the reference run inside each notebook's cpu range
    text = (ROOT / TABLE_PAGE).read_text(encoding="utf-8")
    per_notebook = {m.group(1): (float(m.group(2)), float(m.group(3) or m.group(2)))
                    for m in re.finditer(r"^\| (\d{2}[a-z]?) [^|]+\| (\d+(?:\.\d+)?)(?:-(\d+(?:\.\d+)?))? \(", text, re.M)}
    assert set(per_notebook) == {stem.split("_", 1)[0] for stem in R.REFERENCE_SECONDS["cpu"]}
    for stem, seconds in reference.items():
        lo, hi = per_notebook[stem.split("_", 1)[0]]
        assert lo - 0.05 <= seconds / 60 <= hi + 0.05, f"{stem}: {seconds / 60:.2f} min outside {lo}-{hi}"
    one_low, one_high, _ = _row(rows, "one notebook in the `cpu` profile")
    assert abs(one_low / 60 - min(lo for lo, _ in per_notebook.values())) <= 0.05
    assert abs(one_high / 60 - max(hi for _, hi in per_notebook.values())) <= 0.05
    # a first make reproduce on a fresh clone: make env, make judge and the notebooks, low with low, high with high
    fresh = _row(rows, "a first `make reproduce`")
    env_low = _row(rows, "`make env`: a fresh")[0]
    env_high = _row(rows, "`make env` on a machine's first run")[1]
    judge = _row(rows, "`make judge`")
    assert abs(fresh[0] - (env_low + judge[0] + low)) <= 60 and abs(fresh[1] - (env_high + judge[1] + high)) <= 60


def test_the_benchmarks_record_is_the_reference_run():
    """benchmarks.md keeps run A's per-notebook record (with what dominates), whose total is the range's low end."""
    total = f"{sum(s for s in R.REFERENCE_SECONDS['cpu'].values() if s) / 60:.1f}"
    doc = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert f"| **all notebooks** | **{total}** |" in doc
    _, _, shown = _row(_table(), "`make reproduce`, `cpu` profile")
    assert shown.startswith(f"{total}-"), f"the whole run's range {shown!r} does not start at the reference {total}"
    for page in ("README.md", "notebooks/COURSE.md"):
        text = (ROOT / page).read_text(encoding="utf-8")
        assert "| cpu profile |" not in text, f"{page} keeps its own per-notebook cpu times"
