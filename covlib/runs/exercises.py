"""What exercise checks need at the students' end (it ships in their wheel): is an answer the student's own work?"""

from __future__ import annotations

from typing import Any


def calls(func: Any) -> set[str]:
    """Every global, attribute and free name a function's code (nested functions and lambdas included) refers to,
    plus the real names of the functions those globals are (`from covrag import sigma as s` still says sigma)."""
    names: set[str] = set()
    todo = [getattr(func, "__code__", None)]
    while todo:
        code = todo.pop()
        if code is None:
            continue
        names.update(code.co_names, code.co_freevars)
        todo += [c for c in code.co_consts if hasattr(c, "co_names")]
    scope = getattr(func, "__globals__", {})
    return names | {getattr(scope[n], "__name__", "") for n in names if n in scope and callable(scope[n])} - {""}


def check_own_work(func: Any, *reference: str) -> None:
    """Fail when an answer calls covlib's own implementation of the step it was asked to write."""
    used = sorted(calls(func) & set(reference))
    assert not used, f"{getattr(func, '__name__', func)} calls {', '.join(used)}: write this step yourself"
