"""What a grading run executes: the solution notebook saving its values, a student's answers on those values, and the
covlib each runs with (the real one for the solution, a copy without the graded functions for a student).
"""

from __future__ import annotations

import ast
import copy
import hashlib
import tempfile
from pathlib import Path
from typing import Any, Sequence

import nbformat

from covlib.core import paths
from teaching import stubs
from teaching.exercises import cell_role, split_checks, strip_solutions


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
    """Every name a cell binds anywhere in it (definitions, assignments, imports, in `if`, `try`, `with` or not)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, MemoryError, RecursionError, ValueError):
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
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


def merge(solution: Any, submitted: Any | None, for_student: bool = True, hidden: bool = True
          ) -> tuple[Any, dict[str, str]]:
    """The notebook to run, and per exercise a note on a missing answer cell.

    For the solution: the whole notebook, check cells cut to their recording part, with a cell before each answer
    cell saving the notebook's values for the students' runs (`replay.save`; what answer and check cells bind left out).
    For a student: none of the notebook's own cells (they need covlib's graded steps), but per exercise a cell
    restoring the values saved before its answer cell, the student's answer cell and the check cell's recording part
    (no reference values; without `hidden`, no hidden inputs either)."""
    nb = copy.deepcopy(solution)
    answers = answer_sources(submitted) if for_student else {}
    saving = ""  # the solution's save calls: never supplied is what the solution's answer cells define (its functions)
    if not for_student:  # and what check cells bind (recorded values, hidden inputs, reference values)
        sources = [c.source for role, c in _cells_by_role(solution).items() if role[1] in ("answer", "checks")]
        own = sorted({n for source in sources for n in _bound(source)})
        saving = f"skip={own!r}, views={_attributes_read(sources)!r}, say=True"
    notes, cells = {}, []
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        role = cell_role(cell)
        if role and role[1] == "answer":
            call = f"restore({role[0]!r}, globals())" if for_student else f"save({role[0]!r}, globals(), {saving})"
            cells.append(nbformat.v4.new_code_cell(f"from teaching import replay as _replay\n_lost = _replay.{call}",
                                                   metadata={"grader": "inputs"}))
            if for_student and role[0] in answers:
                cell.source = answers[role[0]]
            elif for_student:
                cell.source = strip_solutions(cell.source)
                notes[role[0]] = "answer cell missing from the submission"
        elif role and role[1] == "checks":
            record = split_checks(cell.source)[0]
            cell.source = record if not for_student else without_reference(record if hidden else strip_solutions(record))
        elif for_student:
            continue
        cells.append(cell)
    nb.cells = cells
    return nb, notes


def _cells_by_role(nb: Any | None) -> dict[tuple[str, str], Any]:
    return {role: c for c in (nb.cells if nb is not None else []) if isinstance(c, dict) and (role := cell_role(c))}


def checks_code(solution: Any) -> dict[str, str]:
    """Per exercise, the solution's checks (below the marker): what the trusted checker runs."""
    return {role[0]: split_checks(c.source)[1] for role, c in _cells_by_role(solution).items() if role[1] == "checks"}


def forbidden(solution: Any) -> dict[str, list[str]]:
    """Per exercise, the names of covlib's functions its answer may not call (its check cell's `check_own_work`)."""
    return {role[0]: stubs.forbidden_names(c.source) for role, c in _cells_by_role(solution).items()
            if role[1] == "checks"}


_PRIVATE: list[tempfile.TemporaryDirectory] = []  # this process's own folder: the graded copies of covlib, and more


def private_dir() -> Path:
    """A folder of this process's own (no sandbox mounts it whole), removed when it ends."""
    if not _PRIVATE:
        _PRIVATE.append(tempfile.TemporaryDirectory(prefix="covlib-graded-"))
    return Path(_PRIVATE[0].name)


def graded_covlib(solution: Any) -> Path:
    """The covlib a student's run of `solution` gets: a copy with the functions its check cells name stubbed
    (`teaching.stubs`), made once per set of names in this process, in a folder of its own that goes with it."""
    names = sorted({n for names in forbidden(solution).values() for n in names})
    target = private_dir() / hashlib.sha256(",".join(names).encode()).hexdigest()[:12] / "covlib"
    if not (target.parent / "done").is_file():
        stubs.stub_copy(paths.code_root() / "covlib", target, names)
        (target.parent / "done").write_text(",".join(names))
    return target
