"""What exercise checks need at the students' end (it ships in their wheel): record the answers' values, compare them,
and tell whether an answer is the student's own work.

A check cell records the values an exercise is graded on with `record` (the student's functions' outputs) and
`reference` (covlib's, on the same inputs), then asserts on them below the `CHECKS_MARKER` line. The student runs
those asserts in the notebook; the grader runs them again in its own process, on the values the submission recorded
(JSON, written to the file named by `COVLIB_ANSWERS`) and on the reference values of the solution notebook's run.
Whether an answer is the student's own work is read from its cell's source by one rule, `own_work_problems` (stated
to students as `OWN_WORK_RULE`): `check_own_work` applies it in the student's kernel, the grader in its own process.
"""

from __future__ import annotations

import functools
import json
import math
import os
from typing import Any, Iterable

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
    """Fail when an answer calls covlib's own implementation of the step it was asked to write, or (in the student's
    own run) when its cell breaks the own-work rule the grader reads it by (`own_work_problems`, `OWN_WORK_RULE`)."""
    used = sorted(calls(func) & set(reference))
    assert not used, f"{getattr(func, '__name__', func)} calls {', '.join(used)}: write this step yourself"
    if os.environ.get(ANSWERS_ENV):
        return  # a graded run: the grader reads the answer's source itself, in its own process
    found = _cell_sources(func)
    if found:
        why = own_work_problems(found[0], found[1:], reference)
        assert not why, f"{getattr(func, '__name__', func)}: {why} ({OWN_WORK_RULE})"


def _cell_of(code: Any) -> str | None:
    """The whole notebook cell a code object was compiled from (IPython keeps it in `linecache` under a name that is
    no file on disk), or None for code from a file or from nowhere."""
    import linecache

    name = getattr(code, "co_filename", "")
    if not name or os.path.isfile(name):
        return None
    lines = linecache.getlines(name)
    return "".join(lines) if lines else None


def _cell_sources(func: Any) -> list[str]:
    """The source the grader reads for an answer: its cell, then the cells of the notebook functions it uses (the
    function's own source for one defined in a file; [] when there is none to read)."""
    import inspect
    import textwrap

    code = getattr(func, "__code__", None)
    cell = _cell_of(code)
    if cell is None:
        try:
            return [textwrap.dedent(inspect.getsource(func))] if code is not None and os.path.isfile(code.co_filename) else []
        except (OSError, TypeError):
            return []
    cells, todo, seen = [cell], [func], set()
    while todo:  # the notebook functions this one uses, and theirs
        f = todo.pop()
        if id(f) in seen:
            continue
        seen.add(id(f))
        scope = getattr(f, "__globals__", {})
        for name in calls(f):
            other = scope.get(name)
            source = _cell_of(getattr(other, "__code__", None))
            if source is not None:
                todo.append(other)
                if source not in cells:
                    cells.append(source)
    return cells


# --------------------------------------------------------------------------- own work: the answer's source, read

OWN_WORK_RULE = ("Write each step yourself: an answer may not name covlib's function for that step (as a name, an "
                 "attribute, an import or a string), nor reach code by a computed name (`eval`, `exec`, `compile`, "
                 "`__import__`, `importlib`, `globals()`, `vars()`, `__dict__`, `sys.modules`, `pickle`, `getattr` with "
                 "a computed name or on a module you import). Ordinary Python, such as `operator.itemgetter` or "
                 "`getattr(x, \"real\", x)`, is fine.")

CODE_BUILTINS = frozenset({"eval", "exec", "compile", "__import__", "globals", "locals", "vars", "breakpoint",
                           "__builtins__", "__loader__", "__spec__", "get_ipython"})  # names that run or look up code by a string
NAMESPACE_ATTRIBUTES = frozenset({"__dict__", "__globals__", "__builtins__", "__code__", "__closure__", "__subclasses__",
                                  "__getattribute__", "__getattr__", "__self__", "__loader__", "__spec__", "__import__",
                                  "f_globals", "f_locals", "f_builtins"})  # attributes that open a namespace or code
DYNAMIC_MODULES = frozenset({"importlib", "imp", "builtins", "__builtin__", "inspect", "ctypes", "gc", "pkgutil", "runpy",
                             "pickle", "_pickle", "cPickle", "marshal", "shelve", "copyreg", "dill", "cloudpickle", "code",
                             "codeop", "timeit", "pdb", "bdb", "doctest", "cProfile", "profile", "trace", "zipimport",
                             "subprocess", "multiprocessing", "pty", "_thread", "asyncio", "pydoc"})  # load or run code by name
MODULE_MEMBERS = {"sys": frozenset({"modules", "_getframe", "_current_frames", "meta_path", "path_hooks",
                                    "path_importer_cache"}),
                  "os": frozenset({"system", "popen", "startfile"})}
OS_PREFIXES = ("exec", "spawn", "posix_spawn", "fork")  # os.execv, os.spawnl, ...: another process, running anything
LOOKUPS = ("getattr", "attrgetter", "methodcaller")  # fine with constant names, a computed lookup otherwise


@functools.lru_cache(maxsize=16)  # the grader reads each answer cell once per exercise of its notebook
def _parse(source: str) -> Any:
    """The syntax tree, None for a syntax error, or the reason a valid-looking source cannot be read at all."""
    import ast

    try:
        return ast.parse(source)
    except SyntaxError:
        return None
    except (MemoryError, RecursionError, ValueError) as err:  # 100,000 unary minus signs, null bytes, ...
        return f"the answer is too deeply nested or too large to read ({type(err).__name__}): write it plainly"


def _names_a_reference(text: str, forbidden: set[str]) -> str:
    """The forbidden name `text` names: itself, or the last part of a dotted path (`covlib.x.sigma`, `mod:sigma`)."""
    last = text.strip().replace(":", ".").rsplit(".", 1)[-1]
    return last if last in forbidden else ""


def _lookup(node: Any, bound: dict[str, str]) -> str:
    """Which of getattr, attrgetter and methodcaller a callee is ('' for none): by name, attribute or import alias."""
    import ast

    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    if isinstance(node, ast.Name) and name in bound:
        name = bound[name].rsplit(".", 1)[-1]
    return name if name in LOOKUPS else ""


def _attribute_problem(attr: str, base: str, forbidden: set[str]) -> tuple[str, str]:
    """('naming' or 'dynamic', what) when reading `attr` (of the module `base`, if known) is not allowed."""
    if attr in forbidden:
        return "naming", attr
    if attr in NAMESPACE_ATTRIBUTES:
        return "dynamic", attr
    if attr in MODULE_MEMBERS.get(base, ()) or (base == "os" and attr.startswith(OS_PREFIXES)):
        return "dynamic", f"{base}.{attr}"
    return "", ""


def _tree_problem(tree: Any, forbidden: set[str]) -> tuple[str, str]:
    """The first thing in `tree` (breadth first) an answer may not do: ('naming', name) or ('dynamic', what)."""
    import ast

    bound: dict[str, str] = {}  # name -> the module path an import binds to it
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                bound[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            for a in node.names:
                bound[a.asname or a.name] = f"{node.module or ''}.{a.name}"
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for node in ast.walk(tree):
        found: tuple[str, str] = ("", "")
        if isinstance(node, ast.Name):
            if node.id in forbidden:
                found = ("naming", node.id)
            elif node.id in CODE_BUILTINS:
                found = ("dynamic", f"{node.id}()" if node.id in ("globals", "locals", "vars") else node.id)
            elif _lookup(node, bound) and id(node) not in called:
                found = ("dynamic", f"{_lookup(node, bound)} passed as a value")
        elif isinstance(node, ast.Attribute):
            base = node.value.id if isinstance(node.value, ast.Name) else ""
            found = _attribute_problem(node.attr, bound.get(base, base).split(".")[0], forbidden)
            if not found[0] and node.attr in LOOKUPS and id(node) not in called:
                found = ("dynamic", f"{node.attr} passed as a value")
        elif isinstance(node, ast.Call) and (kind := _lookup(node.func, bound)):
            found = _lookup_problem(node, kind, bound, forbidden)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            found = _import_problem(node, forbidden)
        elif isinstance(node, ast.MatchClass):  # `case ModuleType(fsum=f)` reads the attribute fsum
            found = next((p for p in (_attribute_problem(a, "", forbidden) for a in node.kwd_attrs) if p[0]), ("", ""))
        elif isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
            text = node.value if isinstance(node.value, str) else node.value.decode("latin-1")
            if name := _names_a_reference(text, forbidden):
                found = ("naming", name)
        if found[0]:
            return found
    return "", ""


def _lookup_problem(node: Any, kind: str, bound: dict[str, str], forbidden: set[str]) -> tuple[str, str]:
    """getattr(x, "name"[, default]), attrgetter("a.b", ...) and methodcaller("name", ...) with constant names are
    fine (each name read as an attribute); computed names, and getattr on a module the answer imports, are not."""
    import ast

    if any(isinstance(a, ast.Starred) for a in node.args) or node.keywords and kind != "methodcaller":
        return "dynamic", f"{kind} with a computed name"
    names = node.args[1:2] if kind == "getattr" else node.args if kind == "attrgetter" else node.args[:1]
    if not names or not all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in names):
        return "dynamic", f"{kind} with a computed name"
    target = node.args[0] if kind == "getattr" else None
    module = bound.get(target.id, "") if isinstance(target, ast.Name) else ""
    if kind == "getattr" and module:
        return "dynamic", f"getattr on the module {target.id}"
    for a in names:
        for part in a.value.split("."):
            found = _attribute_problem(part, module.split(".")[0], forbidden)
            if found[0]:
                return found
    return "", ""


def _import_problem(node: Any, forbidden: set[str]) -> tuple[str, str]:
    """An import of covlib's function itself, or of a module made to load or run code by name."""
    import ast

    paths = [a.name for a in node.names] if isinstance(node, ast.Import) else [
        f"{node.module or ''}.{a.name}" for a in node.names]
    for path in paths:
        parts = [p for p in path.split(".") if p]
        if hit := next((p for p in parts if p in forbidden), ""):
            return "naming", hit
        if parts and parts[0] in DYNAMIC_MODULES:
            return "dynamic", parts[0]
        if len(parts) == 2 and (parts[1] in MODULE_MEMBERS.get(parts[0], ())
                                or (parts[0] == "os" and parts[1].startswith(OS_PREFIXES))):
            return "dynamic", ".".join(parts)
    return "", ""


def _defined(tree: Any) -> set[str]:
    """The names a cell defines at its top level (functions, classes, assigned names)."""
    import ast

    top = list(ast.iter_child_nodes(tree))
    return {n.name for n in top if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))} | {
        t.id for n in top if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}


def _mentioned(tree: Any) -> set[str]:
    """Every name and attribute a cell mentions."""
    import ast

    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}


def own_work_problems(answer: str, others: Iterable[str], forbidden: Iterable[str]) -> str:
    """'' when an answer cell's source keeps the own-work rule (`OWN_WORK_RULE`), else why not; `others` are the
    notebook's other answer cells, read too where the answer uses what they define. The grader and
    `check_own_work` both apply it."""
    trees: dict[str, Any] = {}
    for src in dict.fromkeys([answer, *others]):
        trees[src] = _parse(src)
    if isinstance(trees[answer], str):
        return trees[answer]
    if trees[answer] is None:
        return ""  # a syntax error: the run fails on its own, with the error
    readable = {src: t for src, t in trees.items() if t is not None and not isinstance(t, str)}
    forbidden = set(forbidden)
    todo, seen = [answer], set()
    while todo:  # this answer, and the other answer cells whose definitions it uses
        src = todo.pop(0)
        if src in seen:
            continue
        seen.add(src)
        kind, what = _tree_problem(readable[src], forbidden)
        if kind == "naming":
            return f"uses covlib's {what}: write this step yourself"
        if kind == "dynamic":
            return (f"uses {what}: an answer may not reach code by a computed name (it could be covlib's own "
                    "implementation); write this step yourself")
        mentioned = _mentioned(readable[src])
        todo += [o for o in readable if o not in seen and _defined(readable[o]) & mentioned]
    return ""
