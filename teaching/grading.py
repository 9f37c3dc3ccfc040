"""The autograder: each submission runs isolated, records its answers' values, and trusted checks grade those values.

For each submitted notebook the grader rebuilds it from the solution notebook with only the student's answer cells
and with the check cells cut to their recording part (no assert, no reference value), runs it in a sandbox
(`teaching.sandbox`) in the smoke profile under a time limit, then runs every check, visible and hidden, in a clean
process of its own (`teaching.checker`) on the values the run recorded and on the reference values of the solution
notebook's own run. The answer cells are also read statically for covlib's own implementation (`teaching.own_work`).
Grades are written per student and notebook as each finishes; an unchanged submission is not graded again.
"""

from __future__ import annotations

import ast
import copy
import errno
import hashlib
from csv import QUOTE_NONNUMERIC  # every text quoted: a lone carriage return in a name cannot split a row
import json
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

import nbformat

from covlib.core import paths
from teaching import checker, copying, isolation, sandbox, stubs
from teaching.exercises import (CourseError, cell_role, exercise_notebooks, exercises, read, secret_lines, split_checks,
                                strip_solutions)
from teaching.feedback import feedback_notebook
from teaching.handout import inject, smoke_parameters, student_version
from teaching.runner import cell_error
from teaching.submissions import SUBMISSION_CAP, console_text, csv_cell, find_submissions, notebook_id, select, table_cell

INPUTS_KEY = "(inputs)"  # in a solution's reference values: its saved inputs file (`teaching.replay`) and SHA-256
GRADER_VERSION = "4"  # part of every stored grade's fingerprint: a new grader grades everything again


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


def without_reference(source: str) -> str:
    """`source` less its statements that call `exercises.reference` (a submission's run records no reference); a
    source that cannot be parsed is returned as it is (its run fails with the error)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, MemoryError, RecursionError, ValueError):
        return source
    drop = set()
    for stmt in tree.body:
        if any(isinstance(n, ast.Call) and getattr(n.func, "attr", getattr(n.func, "id", "")) == "reference"
               for n in ast.walk(stmt)):
            drop.update(range(stmt.lineno, stmt.end_lineno + 1))
    return "".join(ln for i, ln in enumerate(source.splitlines(keepends=True), 1) if i not in drop)


def answer_sources(submitted: Any | None) -> dict[str, str]:
    """The student's answer cell per exercise (of copies with the same id, the first that is not the untouched stub)."""
    found: dict[str, list[str]] = {}
    for cell in (submitted.cells if submitted is not None else []):
        role = cell_role(cell)
        if role and role[1] == "answer" and cell.get("cell_type") == "code" and isinstance(cell.get("source"), str):
            found.setdefault(role[0], []).append(cell.source)
    return {ex: next((a for a in srcs if "raise NotImplementedError()" not in a), srcs[0]) for ex, srcs in found.items()}


def _bound(source: str) -> set[str]:
    """The names a cell binds at its top level (definitions, assignments, imports)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, MemoryError, RecursionError, ValueError):
        return set()
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        else:
            names.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    return names


def _attributes_read(sources: Sequence[str]) -> dict[str, list[str]]:
    """Per name, the attributes the sources read of it (`S.sets` -> {"S": ["sets"]})."""
    out: dict[str, set[str]] = {}
    for source in sources:
        try:
            tree = ast.parse(source)
        except (SyntaxError, MemoryError, RecursionError, ValueError):
            continue
        for n in ast.walk(tree):
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name):
                out.setdefault(n.value.id, set()).add(n.attr)
    return {k: sorted(v) for k, v in out.items()}


def _inputs_cell(call: str) -> Any:
    return nbformat.v4.new_code_cell(f"from teaching import replay as _replay\n_replay.{call}", metadata={"grader": "inputs"})


def merge(solution: Any, submitted: Any | None, for_student: bool = True) -> tuple[Any, dict[str, str]]:
    """The notebook to run, and per exercise a note on a missing answer cell.

    For the solution: the whole notebook, check cells cut to their recording part, with a cell before each answer
    cell saving the notebook's values for the students' runs (`replay.save`, the answer cells' own names left out).
    For a student: none of the notebook's own cells (they need covlib's graded steps), but each answer cell after a
    cell restoring the values saved before it, then each check cell's recording part (no reference values) after
    restoring them again, the names the answers define kept: no answer cell runs once a hidden input is in."""
    nb = copy.deepcopy(solution)
    answers = answer_sources(submitted) if for_student else {}
    own = sorted({n for (ex, role), c in _cells_by_role(solution).items() if role == "answer" for n in _bound(c.source)})
    views = _attributes_read([c.source for role, c in _cells_by_role(solution).items() if role[1] in ("answer", "checks")])
    notes, cells, records = {}, [], []
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        role = cell_role(cell)
        if role and role[1] == "answer":
            cells.append(_inputs_cell(f"restore({role[0]!r}, globals())" if for_student else
                                      f"save({role[0]!r}, globals(), skip={own!r}, views={views!r}, say=True)"))
            if for_student and role[0] in answers:
                cell.source = answers[role[0]]
            elif for_student:
                cell.source = strip_solutions(cell.source)
                notes[role[0]] = "answer cell missing from the submission"
        elif role and role[1] == "checks" and for_student:
            cell.source = without_reference(split_checks(cell.source)[0])
            records.append(_inputs_cell(f"restore({role[0]!r}, globals(), keep={{KEEP}})"))
            records.append(cell)
            continue
        elif role and role[1] == "checks":
            cell.source = split_checks(cell.source)[0]
        elif for_student:
            continue
        cells.append(cell)
    kept = sorted({n for c in cells if cell_role(c) for n in _bound(c.source)})
    for cell in records:
        cell.source = cell.source.replace("{KEEP}", repr(kept))
    nb.cells = cells + records
    return nb, notes


def _cells_by_role(nb: Any | None) -> dict[tuple[str, str], Any]:
    return {role: c for c in (nb.cells if nb is not None else []) if isinstance(c, dict) and (role := cell_role(c))}


def checks_code(solution: Any) -> dict[str, str]:
    """Per exercise, the solution's checks (below the marker): what the trusted checker runs."""
    return {role[0]: split_checks(c.source)[1] for role, c in _cells_by_role(solution).items() if role[1] == "checks"}


def _why_missing(ex: str, executed: Any | None, stopped: str) -> str:
    """Why a run recorded no answer for `ex`, from the executed notebook (the student's to tamper with: words only)."""
    cells = _cells_by_role(executed)
    answer, checks = cells.get((ex, "answer")), cells.get((ex, "checks"))
    if answer is not None and cell_error(answer):
        err = cell_error(answer)
        return f"not run: {err.removeprefix('stopped: ')}" if err.startswith("stopped:") else f"the answer cell raised {err}"
    if checks is not None and cell_error(checks):
        err = cell_error(checks)
        return err if err.startswith(("stopped:", "not answered")) else f"checks: {err}"
    return f"not run: {stopped or 'no answer was recorded'}"


def forbidden(solution: Any) -> dict[str, list[str]]:
    """Per exercise, the names of covlib's functions its answer may not call (its check cell's `check_own_work`)."""
    return {role[0]: stubs.forbidden_names(c.source) for role, c in _cells_by_role(solution).items()
            if role[1] == "checks"}


def graded_covlib(solution: Any, where: Path) -> Path:
    """The covlib a student's run of `solution` gets: a copy with the functions its check cells name stubbed
    (`teaching.stubs`), made once per set of names under `where`."""
    names = sorted({n for names in forbidden(solution).values() for n in names})
    target = where / ("covlib-" + hashlib.sha256(",".join(names).encode()).hexdigest()[:12]) / "covlib"
    if not (target.parent / "done").is_file():
        stubs.stub_copy(paths.code_root() / "covlib", target, names)
        (target.parent / "done").write_text(",".join(names))
    return target


def grade_run(solution: Any, name: str, student: str, run: sandbox.Run, reference: dict[str, dict[str, Any]],
              answers: dict[str, str], notes: dict[str, str], trusted: checker.Trusted | None = None) -> list[Grade]:
    """The grades of one run: the trusted checks on the recorded values, and a note for the teacher where an answer
    copies the source of covlib's function for its step (`teaching.copying`)."""
    found = exercises(solution, name)
    codes = checks_code(solution)
    rows = {e.id: Grade(student, name, e.id, 0.0, e.points) for e in found}
    jobs = {}
    for e in found:
        if e.id not in run.answers:
            rows[e.id].error = _why_missing(e.id, run.notebook, run.stopped)
        else:
            jobs[e.id] = {"code": codes[e.id], "got": run.answers[e.id], "ref": reference.get(e.id, {})}
    for ex, verdict in checker.run_checks(jobs, trusted=trusted).items():
        why = _why_missing(ex, run.notebook, "") if verdict.startswith("KeyError") else ""
        if why and not why.startswith("not run"):  # a value missing because the answer or the recording raised
            verdict = why
        rows[ex].error, rows[ex].points = verdict, 0.0 if verdict else rows[ex].max_points
    for ex, note in notes.items():
        if rows[ex].error:
            rows[ex].error = f"{note}; {rows[ex].error}"
    guarded = forbidden(solution)
    for ex, row in rows.items():
        row.note = copying.review_note(answers.get(ex, ""), guarded.get(ex, []))
    return list(rows.values())


def run_notebook(solution: Any, submitted: Any | None, scratch: Path, time_limit: float, unsafe: bool,
                 for_student: bool = True, limits: sandbox.Limits = sandbox.Limits(), inputs: Path | None = None
                 ) -> tuple[sandbox.Run, dict[str, str]]:
    """Run a submission against the graded covlib on the solution run's `inputs` (or, `for_student=False`, the
    solution itself, saving them) isolated; the run and the missing-answer notes."""
    nb, notes = merge(solution, submitted, for_student)
    covlib = None
    if for_student:
        covlib = graded_covlib(solution, scratch.parent)
    else:
        nb = inject(nb, smoke_parameters(nb))
    run = sandbox.run(nb, scratch, time_limit, unsafe=unsafe, writable_cache=not for_student, limits=limits,
                      covlib=covlib, inputs=inputs)
    return run, notes


def grade_notebook(solution_path: str | Path, submission: str | Path | None, student: str, reference: dict,
                   time_limit: float = 600, scratch: str | Path | None = None, feedback: str | Path | None = None,
                   unsafe: bool = False, solution_bytes: bytes | None = None,
                   trusted: checker.Trusted | None = None, limits: sandbox.Limits = sandbox.Limits()) -> list[Grade]:
    """Grade one submitted notebook against its solution notebook (as read once, `solution_bytes`, when given) and
    the solution run's `reference` values; with `trusted`, the checks run from that copy of the code, and the code on
    disk is verified unchanged after the run."""
    solution_path = Path(solution_path)
    solution = nbformat.reads(solution_bytes.decode(), as_version=4) if solution_bytes else read(solution_path)
    found = exercises(solution, solution_path.name)
    if submission is None:
        return [Grade(student, solution_path.name, e.id, 0.0, e.points, "not submitted") for e in found]
    try:
        if Path(submission).stat().st_size > SUBMISSION_CAP:
            raise ValueError(f"over {SUBMISSION_CAP // 2**20} MB")
        submitted = read(submission)
    except Exception as err:  # not JSON, not a notebook, unreadable, too large: the whole notebook scores 0
        why = f"cannot read the notebook: {type(err).__name__}: {str(err).splitlines()[0][:160] if str(err) else ''}"
        return [Grade(student, solution_path.name, e.id, 0.0, e.points, why) for e in found]
    scratch = Path(scratch) if scratch else paths.build_dir() / "grades" / "scratch" / student / solution_path.stem
    inputs = inputs_of(reference)
    if inputs is None:
        raise CourseError(f"the values the students' runs of {solution_path.name} need are missing or changed "
                          f"({reference.get(INPUTS_KEY, {}).get('path', 'never saved')}): run the grader again")
    run, notes = run_notebook(solution, submitted, scratch, time_limit, unsafe, limits=limits, inputs=inputs)
    if trusted:
        trusted.verify()
    answers = answer_sources(submitted)
    rows = grade_run(solution, solution_path.name, student, run, reference, answers, notes, trusted)
    if feedback:
        handout = student_version(solution, solution_path.name)  # what was handed out: no solution, no hidden check
        try:
            Path(feedback).parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(feedback_notebook(handout, answers, run.notebook, rows, secret_lines(solution)), str(feedback))
        except OSError as err:
            _warn(f"{student}: the feedback notebook {feedback} was not written: {disk_error(err)}")
    return rows


def disk_error(err: OSError) -> str:
    """An OSError in words, saying "disk full" where it is one."""
    if err.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return f"disk full or over a quota ({err.strerror}): free space where the grades go, then grade again"
    return f"{type(err).__name__}: {err}"


def _warn(text: str) -> None:
    print(f"warning: {console_text(text)}", file=sys.stderr)  # the console, where a teacher grading sees it


def solution_reference(path: Path, out: Path, time_limit: float, unsafe: bool,
                       trusted: checker.Trusted | None = None,
                       limits: sandbox.Limits = sandbox.Limits()) -> dict[str, dict[str, Any]]:
    """Run the solution notebook (warming the call cache) and return its reference values; it must score full marks.

    Stored in `out/reference/`, and reused while the solution notebook, covlib and the grader are unchanged."""
    solution = read(path)
    fingerprint = hashlib.sha256(path.read_bytes() + checker.code_fingerprint(paths.code_root()).encode()).hexdigest()
    stored = out / "reference" / f"{path.stem}.json"
    if stored.is_file():
        saved = json.loads(stored.read_text())
        if saved.get("fingerprint") == fingerprint and inputs_of(saved["reference"]) is not None:
            return saved["reference"]
    scratch = out / "scratch" / "(solutions)" / path.stem
    run, _ = run_notebook(solution, None, scratch, time_limit, unsafe, for_student=False, limits=limits)
    if trusted:
        trusted.verify()
    rows = grade_run(solution, path.name, "(solutions)", run, run.reference, answer_sources(solution), {}, trusted)
    lost = [f"{r.notebook} {r.exercise}: {r.error}" for r in rows if r.points < r.max_points]
    if lost:
        log = f"\n  the run's log ({out / 'scratch' / '(solutions)' / path.stem / 'runner.log'}) ends: {run.log}" \
            if run.log else ""
        raise CourseError("the solution notebooks do not pass their own checks, so nobody can be graded:\n  "
                          + "\n  ".join(lost) + log)
    inputs = stored.with_suffix(".inputs.pkl")
    data = (scratch / sandbox.INPUTS).read_bytes()
    reference = {**run.reference, INPUTS_KEY: {"path": str(inputs), "sha256": hashlib.sha256(data).hexdigest()}}
    try:
        stored.parent.mkdir(parents=True, exist_ok=True)
        inputs.write_bytes(data)
        write_atomic(stored, json.dumps({"fingerprint": fingerprint, "seconds": round(run.seconds, 1),
                                         "points": {r.exercise: r.points for r in rows}, "reference": reference}))
    except OSError as err:
        raise CourseError(f"the values the students' runs need ({inputs}) were not stored: {disk_error(err)}") from err
    return reference


def inputs_of(reference: dict[str, Any]) -> Path | None:
    """The solution run's saved inputs file named in its `reference` values, if it is there unchanged."""
    saved = reference.get(INPUTS_KEY) or {}
    path = Path(saved.get("path", "")) if saved.get("path") else None
    try:
        return path if path and hashlib.sha256(path.read_bytes()).hexdigest() == saved.get("sha256") else None
    except OSError:
        return None


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` so that a reader (or a kill) sees the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.part")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    except OSError:  # a full disk: no half-written part left behind
        tmp.unlink(missing_ok=True)
        raise


def _fingerprint(submission: Path | None, solution: bytes, reference: dict, time_limit: float, unsafe: bool,
                 limits: sandbox.Limits = sandbox.Limits()) -> str:
    digest = hashlib.sha256(f"{GRADER_VERSION}|{time_limit:g}|{unsafe}|{limits}|".encode())
    digest.update(solution)
    digest.update(json.dumps(reference, sort_keys=True).encode())
    if submission is not None:
        try:
            digest.update(submission.read_bytes()[: SUBMISSION_CAP + 1])
        except OSError:
            digest.update(b"unreadable")
    return digest.hexdigest()


def grade(submissions: str | Path, out: str | Path | None = None, time_limit: float = 600,
          folder: str | Path | None = None, progress: bool = True, assignments: Sequence[str] = (),
          unsafe: bool = False, limits: sandbox.Limits = sandbox.Limits()) -> list[Grade]:
    """Grade every student's notebooks of the chosen assignments (default: all) within `limits` each; write the grade
    table, each student's stored grades and feedback notebooks to `out`. Refuses without isolation unless `unsafe`."""
    why = "" if unsafe else isolation.unavailable()
    if why:
        raise CourseError(f"cannot isolate the submissions: {why}. To grade safely, {isolation.HOW_TO_GET_IT}")
    why = isolation.unreadable(sandbox.read_only() + [paths.index_dir()]) if not unsafe and os.geteuid() == 0 else ""
    if why:
        raise CourseError(f"a submission could not read what it needs: {why}")
    solutions = select(exercise_notebooks(folder), assignments)
    out = Path(out) if out else paths.build_dir() / "grades"
    found = find_submissions(submissions, [p.name for p in solutions])
    texts = {p.name: p.read_bytes() for p in solutions}  # read once: nothing a run does to the files changes them here
    with tempfile.TemporaryDirectory(prefix="covlib-checker-") as private:
        try:
            return _grade_all(solutions, texts, found, out, time_limit, progress, assignments, unsafe,
                              checker.trusted_copy(Path(private)), limits)
        except checker.CodeChanged as err:
            raise CourseError(str(err)) from None


def _grade_all(solutions: list[Path], texts: dict[str, bytes], found: dict, out: Path, time_limit: float,
               progress: bool, assignments: Sequence[str], unsafe: bool, trusted: checker.Trusted,
               limits: sandbox.Limits) -> list[Grade]:
    references = {p.name: solution_reference(p, out, 3 * time_limit, unsafe, trusted, limits)
                  for p in _bar(solutions, progress, "solutions")}
    rows: list[Grade] = []
    for student in _bar(list(found), progress, "students"):
        for path in solutions:
            submission, note = found[student].get(path.name, (None, ""))
            graded = _grade_stored(path, texts[path.name], submission, student, references[path.name], out,
                                   time_limit, unsafe, trusted, limits)
            for row in graded:
                row.note = "; ".join(n for n in (note, row.note) if n)
            rows += graded
        try:  # after each student: a killed grader keeps what was done
            write_table(rows, out, table_name(assignments))
        except OSError as err:
            _warn(f"the grade table was not written after {student}: {disk_error(err)}")
    return rows


def _grade_stored(path: Path, text: bytes, submission: Path | None, student: str, reference: dict, out: Path,
                  time_limit: float, unsafe: bool, trusted: checker.Trusted | None = None,
                  limits: sandbox.Limits = sandbox.Limits()) -> list[Grade]:
    """One student's notebook: the stored grade when nothing changed since, else graded now and stored."""
    stored = out / "students" / student / f"{path.stem}.json"
    fingerprint = _fingerprint(submission, text, reference, time_limit, unsafe, limits)
    try:
        saved = json.loads(stored.read_text())
        if saved.get("fingerprint") == fingerprint:
            return [Grade(**r) for r in saved["rows"]]
    except (OSError, ValueError, TypeError, KeyError):
        pass
    started = time.monotonic()
    try:
        rows = grade_notebook(path, submission, student, reference, time_limit, scratch=out / "scratch" / student / path.stem,
                              feedback=out / "feedback" / student / path.name, unsafe=unsafe, solution_bytes=text,
                              trusted=trusted, limits=limits)
    except checker.CodeChanged:
        raise
    except Exception as err:  # one submission must never stop the others
        why = disk_error(err) if isinstance(err, OSError) else f"{type(err).__name__}: {err}"
        rows = [Grade(student, path.name, e.id, 0.0, e.points, f"grader error: {why}"[:200])
                for e in exercises(nbformat.reads(text.decode(), as_version=4), path.name)]
    if any(r.error.startswith("grader error") for r in rows):  # not stored: the next run grades it again
        return rows
    try:
        write_atomic(stored, json.dumps({"fingerprint": fingerprint, "seconds": round(time.monotonic() - started, 1),
                                         "rows": [asdict(r) for r in rows]}))
    except OSError as err:
        _warn(f"{student}'s grade for {path.name} was not stored (it is in the table): {disk_error(err)}")
    return rows


def table_name(assignments: Sequence[str | Path]) -> str:
    """grades (every assignment) or grades-01-04: the numbers of the chosen notebooks, each once, in order, however
    they were named (01, 01_consistency_kde, 01,01 and a resolved path all give grades-01)."""
    return "grades" + "".join(f"-{n}" for n in sorted({notebook_id(str(a)) for a in assignments}))


def _bar(items: list, show: bool, desc: str) -> Any:
    if not show:
        return items
    from tqdm.auto import tqdm

    return tqdm(items, desc=desc, unit="notebook" if desc == "solutions" else "student")


def write_table(rows: Sequence[Grade], out: str | Path, name: str = "grades") -> tuple[Path, Path]:
    """<name>.csv (one row per student and exercise, as recorded but for a formula's start, `csv_cell`) and <name>.md
    (totals per student, then that table, every text cell cleaned by `table_cell`)."""
    import pandas as pd

    out = Path(out)
    frame = pd.DataFrame([asdict(r) for r in rows], columns=["student", "notebook", "exercise", "points", "max_points",
                                                             "error", "note"])
    csv, md = out / f"{name}.csv", out / f"{name}.md"
    totals = frame.groupby("student", sort=True)[["points", "max_points"]].sum().reset_index()
    totals = totals.assign(student=totals["student"].map(table_cell))
    texts = ("student", "notebook", "exercise", "error", "note")
    cleaned = frame.assign(**{c: frame[c].map(table_cell) for c in texts})
    write_atomic(csv, frame.assign(**{c: frame[c].map(csv_cell) for c in texts}).to_csv(index=False, quoting=QUOTE_NONNUMERIC))
    write_atomic(md, "# Grades\n\n" + totals.to_markdown(index=False, floatfmt="g") + "\n\n## Per exercise\n\n"
                 + cleaned.to_markdown(index=False, floatfmt="g") + "\n")
    return csv, md
