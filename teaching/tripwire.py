"""The own-work rule, enforced by behaviour: in a graded run, covlib's graded functions are tripwires.

The grader starts every submission's kernel with `install()` (an IPython startup file), before any cell runs. While
an exercise's cells run (its answer cell and its check cell, as the grader tells by their cell ids), a profile hook
sees every call -- of Python functions and of built-in ones -- and reports each call of a function whose name is on
the exercise list of names (`exercises.check_own_work(func, "name", ...)` in the check cells) and that was not
defined in a notebook cell. However the function was reached (an import, `getattr`, `pickle.loads`, a `match` class
pattern, a closure), calling it runs its code, and the call is reported. Reports go out through a pipe the grader
reads while the run goes on: what was reported cannot be taken back. Switching the hook off while an exercise's cells
run is reported too (an audit hook, which cannot be removed), and a report that cannot be written stops the kernel.

What it cannot see: a student who copies covlib's source text into their answer (that is their code, then), and a
student who attacks this module's own state in memory on purpose. The static reading (`teaching.own_work`) stays as
a second signal for the teacher.
"""

from __future__ import annotations

import hashlib
import json
import linecache
import os
import sys
import threading
from typing import Any

NAMES_ENV = "COVLIB_TRIPWIRE_NAMES"  # comma-separated names of the graded functions
CELLS_ENV = "COVLIB_TRIPWIRE_CELLS"  # comma-separated `cell_key`s of the exercises' answer and check cells
PIPE_ENV = "COVLIB_TRIPWIRE"  # the pipe the reports go to
STARTUP = "from teaching import tripwire\ntripwire.install()\n"  # the kernel's IPython startup file


def cell_key(source: str) -> str:
    """A cell's key: a hash of its source (the kernel sees a cell's source, not its notebook id)."""
    return hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _cell_file(filename: str, cache: dict = linecache.cache) -> bool:
    """Is `filename` a notebook cell's (where the student's own functions are defined)? IPython registers each cell's
    source in linecache with no modification time; a module imported from a file, wherever it lies, is not one."""
    entry = cache.get(filename)
    return isinstance(entry, tuple) and len(entry) == 4 and entry[1] is None


def install(shell: Any = None) -> None:
    """Arm the tripwires in this kernel (a no-op outside a graded run)."""
    pipe = os.environ.get(PIPE_ENV)
    if not pipe:
        return
    names = frozenset(n for n in os.environ.get(NAMES_ENV, "").split(",") if n)
    cells = frozenset(c for c in os.environ.get(CELLS_ENV, "").split(",") if c)
    fd = os.open(pipe, os.O_WRONLY)
    write, exit_now, dumps, setprofile, frame_at = os.write, os._exit, json.dumps, sys.setprofile, sys._getframe
    fstat, is_cell = os.fstat, _cell_file
    pipe_id = (fstat(fd).st_dev, fstat(fd).st_ino)  # a report goes to this pipe or the run stops
    key = cell_key
    bootstrap = threading.Thread._bootstrap_inner.__code__  # where a new thread sets the profile hook it inherits
    stack: list[str] = []  # the cells running: the outermost is the one the grader asked for
    ours = [False]

    def emit(**record: Any) -> None:
        try:
            status = fstat(fd)
            if (status.st_dev, status.st_ino) != pipe_id:  # the fd was closed or pointed elsewhere (dup2)
                exit_now(70)
            write(fd, (dumps(record) + "\n").encode())
        except BaseException:  # no report, no result: the run stops here
            exit_now(70)

    def current() -> str:
        return stack[0] if stack else ""

    def hook(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            code = frame.f_code
            if code.co_name in names and not is_cell(code.co_filename):
                emit(call=code.co_name, cell=current())
        elif event == "c_call" and getattr(arg, "__name__", None) in names:
            emit(call=arg.__name__, cell=current())

    def armed() -> bool:
        return not stack or stack[0] in cells

    def switch(on: bool) -> None:
        ours[0] = True
        try:
            setprofile(hook if on else None)
        finally:
            ours[0] = False

    def audit(event: str, args: tuple) -> None:
        if event == "sys.setprofile" and not ours[0] and armed():
            if frame_at(1).f_code is bootstrap and threading._profile_hook is hook:
                return  # a new thread taking the hook on
            emit(tamper=event, cell=current())

    def before(info: Any = None) -> None:
        raw = getattr(info, "raw_cell", None)
        stack.append(key(raw) if isinstance(raw, str) else "")
        switch(armed())

    def after(result: Any = None) -> None:
        if stack and armed() and threading._profile_hook is not hook:
            emit(tamper="threading.setprofile", cell=current())
        if stack:
            stack.pop()
        switch(armed())  # between cells too: only the student's callbacks and threads run then

    sys.addaudithook(audit)
    threading.setprofile(hook)  # threads a student starts are watched whatever cell runs
    shell = shell or _shell()
    shell.events.register("pre_run_cell", before)
    shell.events.register("post_run_cell", after)
    switch(True)
    emit(ready=True)


def _shell() -> Any:
    from IPython import get_ipython

    return get_ipython()


def read_report(line: str) -> dict[str, Any] | None:
    """One line of the tripwire's pipe as a report (a JSON object), or None for anything else a student wrote there."""
    try:
        item = json.loads(line)
    except ValueError:
        return None
    return item if isinstance(item, dict) else None


def findings(lines: list[str], cells: dict[str, tuple[str, str]], forbidden: dict[str, list[str]],
             ready_required: bool = True) -> dict[str, str]:
    """Per exercise, why the tripwire says its answer is not the student's own work ('' entries are left out).

    `cells` maps a `cell_key` to (exercise, role) for the cells that count (answer and check cells); `forbidden` maps an
    exercise to the names its check cell guards. A call seen outside any cell (a thread between cells) counts for every
    exercise that guards the name."""
    out: dict[str, str] = {}
    ready = False
    for item in filter(None, map(read_report, lines)):
        ready = ready or item.get("ready") is True
        cell = item.get("cell") if isinstance(item.get("cell"), str) else ""
        where = cells.get(cell)
        if cell and where is None:
            continue  # a cell of the notebook's own, not an exercise's
        if isinstance(item.get("call"), str):
            for ex, names in forbidden.items():
                if item["call"] in names and ex not in out:
                    seen = f"while {where[0]}'s {where[1]} cell ran" if where else "outside any cell"
                    out[ex] = f"calls covlib's {item['call']} ({seen}): write this step yourself"
        elif isinstance(item.get("tamper"), str) and where:
            out.setdefault(where[0], f"switched off the own-work check ({item['tamper']}) in its {where[1]} cell")
    if ready_required and not ready:
        return {ex: "the own-work check did not start in this run, so it cannot be graded" for ex in forbidden}
    return out
