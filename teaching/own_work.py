"""Is an answer the student's own work? A static reading of the answer cells, in the grader's process.

The check cell's `exercises.check_own_work(func, "name", ...)` runs in the student's kernel, where the student's code
could get round it. The grader therefore reads the answer cells' source itself: an answer may not name covlib's
implementation of the step (as a name, an attribute, an import or a string naming it), nor reach names dynamically (`getattr`,
`importlib`, `__dict__`, `eval`, ...), in its own cell or in another answer cell of the notebook that it uses.
"""

from __future__ import annotations

import ast
from typing import Iterable

DYNAMIC_NAMES = frozenset({"getattr", "__import__", "eval", "exec", "compile", "globals", "vars", "locals", "importlib",
                           "builtins", "__builtins__", "attrgetter", "methodcaller"})
DYNAMIC_ATTRIBUTES = frozenset({"modules", "__dict__", "__getattribute__", "__globals__", "__builtins__", "f_globals",
                                "f_locals", "__code__", "__closure__", "__subclasses__", "__import__"})
DYNAMIC_MODULES = frozenset({"importlib", "inspect", "builtins", "ctypes", "gc", "pkgutil", "runpy", "operator"})


def forbidden_names(checks_source: str) -> list[str]:
    """The names a check cell passes to `check_own_work` (its string arguments)."""
    try:
        tree = ast.parse(checks_source)
    except SyntaxError:
        return []
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "check_own_work":
            names += [a.value for a in node.args[1:] if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return names


def _defined(tree: ast.AST) -> set[str]:
    return {n.name for n in ast.iter_child_nodes(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))} | {
        t.id for n in ast.iter_child_nodes(tree) if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}


def _words(tree: ast.AST) -> Iterable[tuple[str, str]]:
    """(kind, text) of every name, attribute, imported name and string in `tree`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            yield "name", node.id
        elif isinstance(node, ast.Attribute):
            yield "attribute", node.attr
        elif isinstance(node, ast.alias):
            yield "import", node.name
            if node.asname:
                yield "name", node.asname
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield "import", node.module
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield "string", node.value


def problems(answer: str, others: Iterable[str], forbidden: Iterable[str]) -> str:
    """'' for an answer that is its own work, else why not; `others` are the notebook's other answer cells."""
    trees = {}
    for src in [answer, *others]:
        try:
            trees[src] = ast.parse(src)
        except SyntaxError:
            continue
    if answer not in trees:
        return ""  # a syntax error: the run fails on its own, with the error
    used, todo, seen = [], [answer], set()
    while todo:  # this answer, and the other answer cells whose definitions it uses
        src = todo.pop()
        if src in seen:
            continue
        seen.add(src)
        words = list(_words(trees[src]))
        used += words
        mentioned = {w for _, w in words}
        todo += [o for o in trees if o not in seen and _defined(trees[o]) & mentioned]
    forbidden = set(forbidden)
    for kind, word in used:
        top = word.split(".")[0]
        if word in forbidden or (kind == "import" and word.split(".")[-1] in forbidden):
            return f"uses covlib's {word.split('.')[-1]}: write this step yourself"
        if (kind == "name" and word in DYNAMIC_NAMES) or (kind == "attribute" and word in DYNAMIC_ATTRIBUTES) or (
                kind == "import" and top in DYNAMIC_MODULES):
            return f"uses {word}: answers may not reach names dynamically; write this step yourself"
    return ""
