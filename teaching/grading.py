"""The autograder: rebuild each submission from the solution notebook, run it in the smoke profile under a time limit, read the points."""

from __future__ import annotations

import contextlib
import copy
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from covlib import nli
from covlib.core import paths
from teaching.exercises import CourseError, cell_role, exercise_notebooks, exercises, read, strip_solutions


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


def merge(solution: Any, submitted: Any | None, name: str) -> tuple[Any, dict[str, str]]:
    """The notebook to grade: the solution notebook with the student's answer cells in place of its own.

    Returns it and, per exercise, a note on a missing answer cell (then the empty stub is used).
    """
    nb = copy.deepcopy(solution)
    found: dict[str, list[str]] = {}
    for cell in (submitted.cells if submitted is not None else []):
        role = cell_role(cell)
        if role and role[1] == "answer" and cell.get("cell_type") == "code" and isinstance(cell.get("source"), str):
            found.setdefault(role[0], []).append(cell.source)
    # a copied answer cell keeps its id: take the first one that is not the untouched stub
    answers = {ex: next((a for a in srcs if "raise NotImplementedError()" not in a), srcs[0]) for ex, srcs in found.items()}
    notes = {}
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        role = cell_role(cell)
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
        role = cell_role(cell)
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
        role = cell_role(cell)
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
