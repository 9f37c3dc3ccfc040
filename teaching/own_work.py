"""Is an answer the student's own work? A static reading of the answer cells, in the grader's process.

The check cell's `exercises.check_own_work(func, "name", ...)` runs in the student's kernel, where the student's code
could get round it. The grader therefore reads the answer cells' source itself, by the same rule the visible check
applies (`covlib.runs.exercises.own_work_problems`, stated to students as `OWN_WORK_RULE`): an answer may not name
covlib's implementation of the step (as a name, an attribute, an import or a string naming it), nor reach code by a
computed name (`eval`, `importlib`, `vars()`, `__dict__`, `getattr` with a computed name or on a module, `pickle`,
`sys.modules`, ...), in its own cell or in another answer cell of the notebook that it uses. Ordinary Python
(`operator.itemgetter`, `getattr(x, "real", x)`) passes. This reading is a second signal beside the run's own.
"""

from __future__ import annotations

import ast
from typing import Iterable

from covlib.runs.exercises import OWN_WORK_RULE, own_work_problems

__all__ = ["OWN_WORK_RULE", "forbidden_names", "problems"]


def forbidden_names(checks_source: str) -> list[str]:
    """The names a check cell passes to `check_own_work` (its string arguments)."""
    try:
        tree = ast.parse(checks_source)
    except (SyntaxError, MemoryError, RecursionError, ValueError):
        return []
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "check_own_work":
            names += [a.value for a in node.args[1:] if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return names


def problems(answer: str, others: Iterable[str], forbidden: Iterable[str]) -> str:
    """'' for an answer that is its own work, else why not; `others` are the notebook's other answer cells. An answer
    too deeply nested to parse fails here, with the reason, and costs no other exercise."""
    return own_work_problems(answer, others, forbidden)
