"""Exercises in the solution notebooks: nbgrader cells found by id (`<ex>-prompt`, `-answer`, `-checks`), and what must stay secret."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from covlib.core import paths
from covlib.runs.exercises import CHECKS_MARKER


ROLES = ("prompt", "answer", "checks")


STUB = "# YOUR CODE HERE\nraise NotImplementedError()"


MARKERS = (("### BEGIN SOLUTION", "### END SOLUTION"), ("### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"))


EXERCISE_ID = re.compile(r"^(ex\d{2}[a-z]?-[a-z0-9-]+)-(prompt|answer|checks)$")


class CourseError(ValueError):
    """A solution notebook whose exercise markup is inconsistent."""


@dataclass(frozen=True)
class Exercise:
    """One exercise: its notebook, id, points and title (the prompt's first line)."""

    notebook: str  # file name, e.g. "01_consistency_kde.ipynb"
    id: str  # e.g. "ex01-consistency"
    points: float
    title: str


def nbgrader_metadata(cell: Any) -> dict:
    meta = cell.get("metadata") if isinstance(cell, dict) else None
    value = meta.get("nbgrader") if isinstance(meta, dict) else None
    return value if isinstance(value, dict) else {}


def cell_role(cell: Any) -> tuple[str, str] | None:
    """(exercise id, role) of a marked cell, or None (also for metadata a student mangled)."""
    grade_id = nbgrader_metadata(cell).get("grade_id", "")
    m = EXERCISE_ID.match(grade_id) if isinstance(grade_id, str) else None
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
        ids = {r[0] for r in map(cell_role, read(path).cells) if r}
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
        role = cell_role(cell)
        meta = nbgrader_metadata(cell)
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
        if what == "answer" and not all(m in cell.source for m in MARKERS[0]):
            raise CourseError(f"{name} '{ex}-answer' has no ### BEGIN SOLUTION / ### END SOLUTION block")
        if what == "checks" and not meta.get("points"):
            raise CourseError(f"{name} '{ex}-checks' has no points")
        if what == "checks":
            try:
                split_checks(cell.source)
            except CourseError as err:
                raise CourseError(f"{name} '{ex}-checks': {err}; the asserts below it are what the grader runs on the "
                                  "recorded values") from None
    out = []
    for ex, roles in seen.items():
        if set(roles) != set(ROLES) or [roles[r] for r in ROLES] != sorted(roles.values()):
            raise CourseError(f"{name} '{ex}': needs a prompt, an answer and a checks cell, in that order (has {sorted(roles)})")
        title = nb.cells[roles["prompt"]].source.strip().splitlines()[0].strip("#* ")
        out.append(Exercise(name, ex, float(nbgrader_metadata(nb.cells[roles["checks"]])["points"]), title))
    return out


def split_checks(source: str) -> tuple[str, str]:
    """A check cell's recording part (runs with the notebook) and its checks (run by the grader on the values)."""
    lines = source.splitlines(keepends=True)
    at = [i for i, ln in enumerate(lines) if ln.startswith(CHECKS_MARKER)]
    if len(at) != 1:
        raise CourseError(f"a check cell needs exactly one line starting with {CHECKS_MARKER!r} (found {len(at)})")
    return "".join(lines[: at[0]]), "".join(lines[at[0] + 1:])


def all_exercises(folder: str | Path | None = None) -> list[Exercise]:
    """Every exercise of every solution notebook."""
    return [e for p in exercise_notebooks(folder) for e in exercises(read(p), p.name)]


def solution_regions(nb: Any) -> list[str]:
    """The text of every marked solution and hidden-test region of a solution notebook."""
    regions = []
    for cell in nb.cells:
        for begin, end in MARKERS:
            regions += [m.group(1) for m in re.finditer(re.escape(begin) + r"\n(.*?)[ \t]*" + re.escape(end),
                                                        cell.source, re.S)]
    return regions


def format_points(points: float) -> str:
    return f"{points:g} point" + ("" if points == 1 else "s")


def source_lines(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if len(re.sub(r"\s", "", ln)) >= 12 and not ln.strip().startswith("#")]


def secret_lines(solution: Any, regions: Sequence[str] | None = None) -> list[str]:
    """The distinctive lines of the marked regions (default: all of them) that appear nowhere unmarked in the solution."""
    given = "\n".join(strip_solutions(c.source) for c in solution.cells)
    regions = solution_regions(solution) if regions is None else regions
    return [line for region in regions for line in source_lines(region) if line not in given]


def leaked(solution: Any, student: Any) -> list[str]:
    """Lines of the solution's marked regions that appear in the student notebook (and nowhere unmarked in the solution)."""
    import nbformat

    text = nbformat.writes(student)
    sources = "\n".join(c.source for c in student.cells)
    out = [line for line in secret_lines(solution) if line in sources or json.dumps(line)[1:-1] in text]
    return out + [m for m in ("### BEGIN SOLUTION", "### BEGIN HIDDEN TESTS") if m in sources]


def strip_solutions(source: str) -> str:
    """A cell's source with each solution region replaced by the student stub and hidden tests removed."""
    source = re.sub(r"([ \t]*)### BEGIN SOLUTION.*?### END SOLUTION",
                    lambda m: "\n".join(m.group(1) + s for s in STUB.splitlines()), source, flags=re.S)
    return re.sub(r"[ \t]*### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS\n?", "", source, flags=re.S).rstrip()
