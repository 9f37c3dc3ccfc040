"""The values a submission's answers run on, supplied by the grader: saved by the solution run, restored for a student.

A student's run is not the whole notebook: the notebook's own cells compute with covlib's implementations of the
graded steps, which the student's covlib does not have (`teaching.stubs`). The solution run (the teacher's code, the
real covlib) therefore saves, just before each exercise's answer cell, the notebook's variables (`save`); a student's
run is, per exercise, a cell restoring them (`restore`), the student's answer cell and the recording part of the
check cell. What is saved: every variable that pickles (cloudpickle: modules by name, the notebook's own functions by
value), except what the answer and check cells bind (the solution's functions, recorded and reference values, hidden
inputs: never supplied) and functions that call them. A variable
that does not pickle, or only over `VALUE_CAP`, is saved as the attributes the answer and check cells read of it (a
session holding a model), else with what does not pickle set to None (a run's results less the model that made them).
"""

from __future__ import annotations

import copy
import io
import os
import pickle
from types import SimpleNamespace
from typing import Any, Iterable

INPUTS_ENV = "COVLIB_INPUTS"  # the grader sets it: the file the values are saved to (solution) or read from (student)
VALUE_CAP = 16 * 2**20  # bytes of one pickled value; a larger one (a model, an index) is not supplied
SKIP = frozenset({"In", "Out", "get_ipython", "exit", "quit"})  # IPython's own


class _Capped(io.BytesIO):
    """A buffer that refuses to grow past `VALUE_CAP`: a model's weights stop pickling there, not at their end."""

    def write(self, data: Any) -> int:
        if self.tell() + len(data) > VALUE_CAP:
            raise OverflowError(f"over {VALUE_CAP} bytes")
        return super().write(data)


def _dumps(value: Any) -> bytes | None:
    """`value` pickled, or None when it does not pickle or is over `VALUE_CAP` (a model's weights, an index)."""
    import cloudpickle

    buffer = _Capped()
    try:
        cloudpickle.dump(value, buffer)
    except Exception:  # a model, a lock, an open file, or too large: not supplied as it is
        return None
    return buffer.getvalue()


def _stripped(value: Any, depth: int = 0) -> Any:
    """`value` if it pickles, else `_strip(value)`."""
    return value if _dumps(value) is not None else _strip(value, depth)


def _strip(value: Any, depth: int = 0) -> Any:
    """A copy of `value` (which does not pickle whole) with what does not pickle set to None: its attributes (a run's
    results less the model that made them) and, in a dict, list or tuple (subclasses too), its items (to `depth` 2)."""
    if depth > 2:
        return None
    if type(value) is tuple:
        return tuple(_stripped(v, depth + 1) for v in value)
    try:
        clone = copy.copy(value)
        if isinstance(clone, dict):
            clone.update({k: _stripped(v, depth + 1) for k, v in clone.items()})
        elif isinstance(clone, list):
            clone[:] = [_stripped(v, depth + 1) for v in clone]
        for attr, v in list(getattr(clone, "__dict__", {}).items()):
            if _dumps(v) is None:
                setattr(clone, attr, None)
    except Exception:  # a copy that cannot be made or changed
        return None
    return clone


def _refers_to(value: Any, names: set[str]) -> bool:
    """Whether a function (or a nested one in it) names one of `names` as a global."""
    todo = [getattr(value, "__code__", None)]
    while todo:
        code = todo.pop()
        if code is not None and hasattr(code, "co_names"):
            if set(code.co_names) & names:
                return True
            todo += [c for c in code.co_consts if hasattr(c, "co_names")]
    return False


def save(exercise: str, namespace: dict[str, Any], skip: Iterable[str] = (), views: dict[str, list[str]] | None = None,
         say: bool = False) -> list[str]:
    """Append `exercise`'s values (the namespace less `skip` and private names) to the inputs file; the names of the
    values that could not be saved (printed with `say`). `views`: per variable, the attributes to save when it does
    not pickle whole."""
    skip, saved, lost = set(skip) | SKIP, {}, []
    for name, value in list(namespace.items()):
        if name.startswith("_") or name in skip:
            continue
        if _refers_to(value, skip):  # a notebook function calling the solution's: pickled by value, it would carry it
            lost.append(name)
            continue
        data = _dumps(value)
        if data is None and name in (views or {}) and not isinstance(value, (dict, list, tuple)):  # what cells read
            attrs = {a: getattr(value, a) for a in views[name] if hasattr(value, a)}
            data = _dumps(SimpleNamespace(**{a: v for a, v in attrs.items() if _dumps(v) is not None}))
        if data is None:  # it did not pickle whole: strip it, not try it again
            data = _dumps(_strip(value))
        if data is None:
            lost.append(name)
        else:
            saved[name] = data
    with open(os.environ[INPUTS_ENV], "ab") as f:
        pickle.dump((exercise, saved), f, protocol=pickle.HIGHEST_PROTOCOL)
    if say and lost:
        print(f"{exercise}: not supplied to the students' runs (they do not pickle, are over {VALUE_CAP // 2**20} "
              f"MiB, or call the solution's functions): {', '.join(sorted(lost))}")
    return lost


def restore(exercise: str, namespace: dict[str, Any]) -> list[str]:
    """Put `exercise`'s saved values into `namespace`; the names that could not be loaded here (they stay unset)."""
    found: dict[str, bytes] = {}
    with open(os.environ[INPUTS_ENV], "rb") as f:
        while True:
            try:
                name, values = pickle.load(f)
            except EOFError:
                break
            if name == exercise:
                found = values
                break
    lost = []
    for name, data in found.items():
        try:
            namespace[name] = pickle.loads(data)
        except Exception:  # a value of a class the grading copy lacks
            lost.append(name)
    return lost
