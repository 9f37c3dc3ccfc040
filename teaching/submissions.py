"""Where the submissions are: one folder per student, notebooks found by name below it, links never followed."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Sequence

from teaching.exercises import CourseError

SUBMISSION_CAP = 50 * 2**20  # bytes: a larger submitted notebook is not read


def _regular(path: Path) -> bool:
    """A plain file: not a link, a pipe (reading one would wait forever) or a device."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _notebooks(student: Path) -> list[Path]:
    """The student's notebooks, shallowest first; links (to files or folders), pipes and devices are skipped, so a
    submission can never be a link to the teacher's solution or to another student's file, nor hang the grader."""
    found = []
    for top, dirs, files in os.walk(student, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d != ".ipynb_checkpoints" and not (Path(top) / d).is_symlink())
        found += [Path(top) / f for f in files if f.endswith(".ipynb") and _regular(Path(top) / f)]
    return sorted(found, key=lambda p: (len(p.parts), str(p)))


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
    for student in sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink() and not p.name.startswith(".")):
        files = _notebooks(student)
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


def select(solutions: Sequence[Path], assignments: Sequence[str]) -> list[Path]:
    """The solution notebooks of the chosen assignments ('01', '04', or a whole name); all of them when none is chosen."""
    if not assignments:
        return list(solutions)
    chosen = [p for p in solutions if any(p.name.startswith(a) or p.stem == a for a in assignments)]
    unknown = [a for a in assignments if not any(p.name.startswith(a) or p.stem == a for p in solutions)]
    if unknown or not chosen:
        raise CourseError(f"no assignment {', '.join(unknown) or assignments}: the assignments are "
                          + ", ".join(p.stem for p in solutions))
    return chosen
