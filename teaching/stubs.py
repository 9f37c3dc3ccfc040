"""The covlib a submission runs against: a copy in which each graded function has no body, so there is nothing to call.

The own-work rule holds by construction: a student's code runs (in the sandbox) with this copy mounted where covlib is,
and the functions the check cells name (`exercises.check_own_work(func, "name", ...)`) raise "write this step
yourself" however they are reached (an import, `getattr`, `pickle`, another thread or process, a rebuilt code
object): their code is not in the process, nor in any file it can read. The copy keeps every other function, class and
constant, so the values the grader supplies (`teaching.replay`) load and the students' own helpers run. A stub raises
RuntimeError, not NotImplementedError, which the grader reads as an answer cell left as handed out.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path
from typing import Iterable

NOT_HERE = ("{name} is not available when your work is graded: the exercise asks you to write this step yourself "
            "(covlib's own {name} is not in the grading copy of covlib)")


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


def stub_source(source: str, names: set[str]) -> tuple[str, list[str]]:
    """`source` with the body of every function (or method) named in `names` replaced by a `raise` (its docstring kept);
    and the names stubbed, in order. A stubbed function inside another is gone with the outer body; a body on the
    line where the signature ends is refused: no graded function is written so."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    found = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name in names]
    inner = {id(m) for n in found for m in ast.walk(n) if m is not n}
    outer = sorted((n for n in found if id(n) not in inner), key=lambda n: n.lineno, reverse=True)
    for node in outer:  # bottom-up, so earlier line numbers stay right
        start = node.body[1 if ast.get_docstring(node) is not None and len(node.body) > 1 else 0]  # the docstring stays
        first, last = start.lineno, node.body[-1].end_lineno
        if lines[first - 1][:start.col_offset].strip():
            raise ValueError(f"{node.name} (line {node.lineno}) has its body on the signature's line: cannot stub it")
        lines[first - 1:last] = [f"{' ' * start.col_offset}raise RuntimeError({NOT_HERE.format(name=node.name)!r})\n"]
    out = "".join(lines)
    compile(out, "<stub>", "exec")
    return out, [n.name for n in reversed(outer)]


def stub_copy(covlib: Path, target: Path, names: Iterable[str]) -> dict[str, list[str]]:
    """Copy the package `covlib` to `target` (no bytecode caches: they would hold the real code) with every function
    named in `names` stubbed; per file changed, the names stubbed there. A name found nowhere is an error."""
    names = set(names)
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(covlib, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo"))
    stubbed: dict[str, list[str]] = {}
    for path in sorted(target.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if not any(f"def {n}(" in text for n in names):
            continue
        new, done = stub_source(text, names)
        if done:
            path.write_text(new, encoding="utf-8")
            stubbed[str(path.relative_to(target))] = done
    missing = names - {n for done in stubbed.values() for n in done}
    if missing:
        raise ValueError(f"no function {', '.join(sorted(missing))} in {covlib}: a check cell's check_own_work names it")
    return stubbed
