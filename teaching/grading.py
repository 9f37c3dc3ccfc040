"""The autograder: each submission runs isolated, records its answers' values, and trusted checks grade those values.

The solution notebook runs first, in the smoke profile, saving before each answer cell the notebook's values
(`teaching.replay`). For each submitted notebook the grader then runs, in a sandbox (`teaching.sandbox`) with a covlib
whose graded functions do not exist (`teaching.stubs`), only the student's answer cells, each after its exercise's
saved values, and the check cells' recording part (no assert, no reference value; `teaching.assembly`); then every
check, visible and hidden, runs in a clean process of its own (`teaching.checker`) on the values the run recorded and on
the reference values of the solution run. Answers that copy covlib's source are flagged for the teacher
(`teaching.copying`). Grades are written per student and notebook as each finishes; an unchanged submission is not
graded again.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import sys
import tempfile
import time
from csv import QUOTE_NONNUMERIC  # every text quoted: a lone carriage return in a name cannot split a row
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

import nbformat

from covlib.core import paths
from teaching import checker, copying, isolation, sandbox
from teaching.assembly import (_cells_by_role, answer_sources, checks_code, forbidden, graded_covlib, merge,  # noqa: F401
                               private_dir, without_reference)
from teaching.exercises import CourseError, exercise_notebooks, exercises, read, secret_lines
from teaching.feedback import feedback_notebook, label
from teaching.handout import inject, smoke_parameters, student_version
from teaching.runner import cell_error
from teaching.submissions import SUBMISSION_CAP, console_text, csv_cell, find_submissions, notebook_id, select, table_cell

INPUTS_KEY = "(inputs)"  # in a solution's reference values: its saved inputs file (`teaching.replay`) and SHA-256
GRADER_VERSION = "5"  # part of every stored grade's fingerprint: a new grader grades everything again


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
    title: str = ""  # the exercise as its notebook names it: "Exercise 2 · Which predictions get edited?"

    @classmethod
    def zero(cls, student: str, notebook: str, exercise: Any, error: str = "") -> "Grade":
        """An exercise (`teaching.exercises.exercises`' item) at 0 points, with why."""
        return cls(student, notebook, exercise.id, 0.0, exercise.points, error, title=exercise.title)


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


def grade_run(solution: Any, name: str, student: str, run: sandbox.Run, reference: dict[str, dict[str, Any]],
              answers: dict[str, str], notes: dict[str, str], trusted: checker.Trusted | None = None) -> list[Grade]:
    """The grades of one run: the trusted checks on the recorded values, and a note for the teacher where an answer
    copies the source of covlib's function for its step (`teaching.copying`)."""
    found = exercises(solution, name)
    codes = checks_code(solution)
    rows = {e.id: Grade.zero(student, name, e) for e in found}
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
    """Run the solution itself (`for_student=False`), saving the values the students' answers run on; or a submission,
    isolated, against the graded covlib on the solution run's `inputs`, twice: with the hidden inputs (its values are
    graded) and without them (what its answer cells print goes back in the feedback: `Run.shown`). The run and the
    missing-answer notes."""
    if not for_student:
        nb, notes = merge(solution, None, for_student=False)
        return sandbox.run(inject(nb, smoke_parameters(nb)), scratch, time_limit, unsafe=unsafe, writable_cache=True,
                           limits=limits), notes
    covlib = graded_covlib(solution)
    nb, notes = merge(solution, submitted)
    run = sandbox.run(nb, scratch, time_limit, unsafe=unsafe, limits=limits, covlib=covlib, inputs=inputs)
    visible = merge(solution, submitted, hidden=False)[0]
    run.shown = sandbox.run(visible, scratch / "visible", time_limit, unsafe=unsafe, limits=limits, covlib=covlib,
                            inputs=inputs).notebook
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
        return [Grade.zero(student, solution_path.name, e, "not submitted") for e in found]
    try:
        if Path(submission).stat().st_size > SUBMISSION_CAP:
            raise ValueError(f"over {SUBMISSION_CAP // 2**20} MB")
        submitted = read(submission)
    except Exception as err:  # not JSON, not a notebook, unreadable, too large: the whole notebook scores 0
        why = f"cannot read the notebook: {type(err).__name__}: {str(err).splitlines()[0][:160] if str(err) else ''}"
        return [Grade.zero(student, solution_path.name, e, why) for e in found]
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
            nbformat.write(feedback_notebook(handout, answers, run.shown, rows, secret_lines(solution)), str(feedback))
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
    try:  # the students' covlib, before anything runs: a check cell naming no covlib function stops here
        graded_covlib(solution)
    except (ValueError, SyntaxError) as err:
        raise CourseError(f"{path.name}: cannot make the covlib its students run with: {err}") from err
    scratch = out / "scratch" / "(solutions)" / path.stem
    run, _ = run_notebook(solution, None, scratch, time_limit, unsafe, for_student=False, limits=limits)
    if trusted:
        trusted.verify()
    rows = grade_run(solution, path.name, "(solutions)", run, run.reference, answer_sources(solution), {}, trusted)
    lost = [f"{r.notebook} {label(r)}: {r.error}" for r in rows if r.points < r.max_points]
    if lost:
        log = f"\n  the run's log ({out / 'scratch' / '(solutions)' / path.stem / 'runner.log'}) ends: {run.log}" \
            if run.log else ""
        raise CourseError("the solution notebooks do not pass their own checks, so nobody can be graded:\n  "
                          + "\n  ".join(lost) + log)
    data = (scratch / sandbox.INPUTS).read_bytes()
    inputs = stored.with_suffix(".inputs.pkl")
    try:
        stored.parent.mkdir(parents=True, exist_ok=True)
        inputs.write_bytes(data)
    except OSError as err:  # a full disk: kept in this process's private folder, used all the same
        _warn(f"the values the students' runs of {path.name} need were not stored in {inputs}: {disk_error(err)}")
        inputs = private_dir() / inputs.name
        inputs.write_bytes(data)
    reference = {**run.reference, INPUTS_KEY: {"path": str(inputs), "sha256": hashlib.sha256(data).hexdigest()}}
    try:
        write_atomic(stored, json.dumps({"fingerprint": fingerprint, "seconds": round(run.seconds, 1),
                                         "points": {r.exercise: r.points for r in rows}, "reference": reference}))
    except OSError as err:
        _warn(f"the reference values of {path.name} were not stored (they are used all the same): {disk_error(err)}")
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
    installed = isolation.installed_covlib(isolation.python_dirs() + [Path("/usr")])
    if installed:
        raise CourseError(f"covlib's source is installed in {installed[0]}, which every submission can read: it holds the "
                          "functions the students must write. Install the repository editable (`pip install -e .`, as "
                          "`make env` does) and grade again")
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
        rows = [Grade.zero(student, path.name, e, f"grader error: {why}"[:200])
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
    frame = pd.DataFrame([asdict(r) for r in rows], columns=["student", "notebook", "exercise", "title", "points",
                                                             "max_points", "error", "note"])
    csv, md = out / f"{name}.csv", out / f"{name}.md"
    totals = frame.groupby("student", sort=True)[["points", "max_points"]].sum().reset_index()
    totals = totals.assign(student=totals["student"].map(table_cell))
    texts = ("student", "notebook", "exercise", "title", "error", "note")
    cleaned = frame.assign(**{c: frame[c].map(table_cell) for c in texts})
    write_atomic(csv, frame.assign(**{c: frame[c].map(csv_cell) for c in texts}).to_csv(index=False, quoting=QUOTE_NONNUMERIC))
    as_text = [i for i, c in enumerate(cleaned.columns) if c in texts]  # a name 007 stays 007, not 7
    write_atomic(md, "# Grades\n\n" + totals.to_markdown(index=False, floatfmt="g", disable_numparse=[0]) + "\n\n"
                 "## Per exercise\n\n" + cleaned.to_markdown(index=False, floatfmt="g", disable_numparse=as_text) + "\n")
    return csv, md
