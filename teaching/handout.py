"""What a student is handed: the student version of a solution notebook (nbgrader clears the solutions and hidden
checks) set to the smoke profile, as the grader runs it."""

from __future__ import annotations

import copy
import re
from typing import Any

from covlib import nli
from covlib.runs.exercises import OWN_WORK_RULE
from teaching.exercises import CourseError, exercises, format_points


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



STUDENT_HEADER = """**Assignment: {title}**

Write your code in the cells that say `# YOUR CODE HERE` (replace the `raise NotImplementedError()`),
then run the check cell below each one: its asserts are the visible checks. The grader runs this
notebook again in the smoke profile with hidden checks added. It takes **only your answer cells**
from this file, so keep helper code inside them, and do not rename the notebook. The cell after the
parameters sets the smoke profile (a dozen examples: what the grader runs); delete it for a full run.

{rule}

The check cell's `check_own_work` line fails when your answer calls one of those functions by name.

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
    nb.cells.insert(0, v4.new_markdown_cell(STUDENT_HEADER.format(title=title, listing=listing, rule=OWN_WORK_RULE)))
    return nb


def student_parameters(nb: Any) -> dict[str, Any]:
    """What a student notebook sets after its `parameters` cell: the smoke profile, the overlap judge where there is one
    (no `make judge` needed; the checks hold for any judge)."""
    out = smoke_parameters(nb)
    if "judge" in out:
        out["judge"] = "overlap"
    return out
