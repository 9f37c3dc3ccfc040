"""What exercise checks need at the students' end (it ships in their wheel): record the answers' values, compare them,
and name what an answer may not call.

A check cell records the values an exercise is graded on with `record` (the student's functions' outputs) and
`reference` (covlib's, on the same inputs), then asserts on them below the `CHECKS_MARKER` line. The student runs
those asserts in the notebook; the grader runs them again in its own process, on the values the submission recorded
(JSON, written to the file named by `COVLIB_ANSWERS`) and on the reference values of the solution notebook's run.
The own-work rule (`OWN_WORK_RULE`) holds by construction: the grader runs answers with a covlib whose functions named
by `check_own_work` have no body (`teaching.stubs`, outside this wheel).
"""

from __future__ import annotations

import dis
import json
import math
import os
from typing import Any

ANSWERS_ENV = "COVLIB_ANSWERS"  # the grader sets it: where `record` and `reference` append their values (JSON lines)


CHECKS_MARKER = "# -- checks"  # a check cell's asserts start at the line beginning with this


_RECORDED: dict[tuple[str, str], dict[str, Any]] = {}


def record(exercise: str, **values: Any) -> dict[str, Any]:
    """Record your answers' values for `exercise` (JSON data: tuples become lists, NumPy values plain Python ones) and return all recorded so far."""
    return _store(exercise, "answers", values)


def reference(exercise: str, **values: Any) -> dict[str, Any]:
    """Record covlib's values for the same inputs; the grader uses the solution notebook's, never a submission's."""
    return _store(exercise, "reference", values)


def _store(exercise: str, kind: str, values: dict[str, Any]) -> dict[str, Any]:
    for key, value in values.items():
        try:
            values[key] = json.loads(json.dumps(value, default=_plain))
        except (TypeError, ValueError) as err:
            raise TypeError(f"{exercise}: {key} must be plain data (numbers, strings, booleans, None, lists, dicts), "
                            f"got {type(value).__name__} ({err})") from None
    path = os.environ.get(ANSWERS_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"exercise": exercise, "kind": kind, "values": values}) + "\n")
    merged = _RECORDED.setdefault((exercise, kind), {})
    merged.update(values)
    return dict(merged)


def _plain(value: Any) -> Any:
    """NumPy scalars and arrays (and anything else with `tolist`) as plain Python values."""
    if callable(getattr(value, "tolist", None)):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not plain data")


def close(a: Any, b: Any, tol: float = 1e-9) -> bool:
    """Equal, with numbers compared to within `tol` (absolute and relative), through nested lists and dicts."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=tol, abs_tol=tol)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y, tol) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k], tol) for k in a)
    return type(a) is type(b) and a == b


def _codes(func: Any) -> list[Any]:
    """A function's code object and those of the functions, lambdas and comprehensions nested in it."""
    out, todo = [], [getattr(func, "__code__", None)]
    while todo:
        code = todo.pop()
        if code is not None:
            out.append(code)
            todo += [c for c in code.co_consts if hasattr(c, "co_names")]
    return out


def calls(func: Any) -> set[str]:
    """Every global, attribute and free name a function's code (nested functions and lambdas included) refers to,
    plus the real names of the functions those globals are (`from covrag import sigma as s` still says sigma)."""
    names = {n for code in _codes(func) for n in code.co_names + code.co_freevars}
    scope = getattr(func, "__globals__", {})
    return names | {getattr(scope[n], "__name__", "") for n in names if n in scope and callable(scope[n])} - {""}


_BY_ATTRIBUTE = {"LOAD_ATTR", "LOAD_METHOD", "LOAD_SUPER_ATTR", "STORE_ATTR", "DELETE_ATTR", "IMPORT_NAME", "IMPORT_FROM"}


def _covlibs(value: Any) -> bool:
    module = getattr(value, "__module__", None)
    return isinstance(module, str) and (module == "covlib" or module.startswith("covlib."))


def own_names(func: Any) -> set[str]:
    """The names a function's code uses for the student's own things: its local variables (closures included) and
    globals its notebook bound to something not covlib's (a `def sigma` of their own). A name also read as an attribute
    or imported (`C.sigma`) is never one: it may be covlib's."""
    codes, scope = _codes(func), getattr(func, "__globals__", {})
    attributes = {i.argval for c in codes for i in dis.get_instructions(c) if i.opname in _BY_ATTRIBUTE}
    bound = {n: scope[n] for c in codes for n in c.co_names if n in scope}
    mine = {n for n, v in bound.items() if not _covlibs(v)} | {n for c in codes for n in c.co_cellvars + c.co_freevars}
    return mine - attributes - {getattr(v, "__name__", "") for v in bound.values() if _covlibs(v)}


OWN_WORK_RULE = """The own-work rule:

- Do write each graded step yourself, in its answer cell (your helper functions go there too).
- Do use the notebook's values and covlib's other functions.
- Don't call covlib's functions for the step (the check cell's `check_own_work` line names them): when your notebook \
is graded they do not exist, so a call, however it is reached, raises an error and the exercise scores 0.
- Don't copy their source: copied lines are flagged for your teacher.
- Don't give your own code their names (`my_sigma`, not `sigma`): the check cell cannot always tell yours from covlib's."""


def check_own_work(func: Any, *reference: str) -> None:
    """Name the covlib functions an exercise replaces (`OWN_WORK_RULE`: the grader runs answers where they do not
    exist), and fail early when the answer's code calls one of them by name (the student's own `sigma` aside)."""
    used = sorted((calls(func) & set(reference)) - own_names(func))
    names, one = ", ".join(used), len(used) == 1
    assert not used, (f"{getattr(func, '__name__', func)} calls {names}: write this step yourself. The name"
                      f"{'' if one else 's'} {names} {'is' if one else 'are'} covlib's: if you wrote "
                      f"{'it' if one else 'them'} yourself, rename yours (e.g. my_{used[0]}).\n\n{OWN_WORK_RULE}")
