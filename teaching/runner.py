"""Run one notebook in a fresh kernel under a time limit: what the grader starts inside a submission's sandbox.

`python -m teaching.runner OUT TIME_LIMIT` reads the notebook (JSON) from standard input, so that no notebook file
lies in the sandbox, runs its code cells in order and rewrites OUT after every cell (outputs capped per cell), so
that a run killed at the time limit still leaves what it had done. Everything this writes is the student's to tamper
with: the grader reads it only for the feedback, never for a grade.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

STOPPED = "GraderStopped"


OUTPUT_CAP = 200_000  # characters of output kept per cell; the rest is cut with a note


def execute(nb: Any, cwd: str | Path, time_limit: float, stop_on_error: bool = False,
            after_cell: Callable[[Any], None] | None = None) -> str:
    """Run `nb`'s code cells in order in a fresh kernel within `time_limit` seconds, outputs in place.

    Errors stay in the cells' outputs and execution goes on (unless `stop_on_error`). Returns why it
    stopped early ("" when every cell ran).
    """
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    deadline = time.monotonic() + time_limit
    client = NotebookClient(nb, timeout=int(time_limit) + 1, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(cwd)}})
    try:
        with client.setup_kernel():
            for i, cell in enumerate(nb.cells):
                if cell.cell_type != "code":
                    continue
                left = deadline - time.monotonic()
                if left <= 0:
                    return f"time limit of {time_limit:g} s reached"
                client.timeout = max(1, int(left))
                try:
                    client.execute_cell(cell, i)
                except CellTimeoutError:
                    return _stopped(cell, f"time limit of {time_limit:g} s reached")
                except DeadKernelError as err:
                    return _stopped(cell, f"the kernel died ({str(err).strip() or 'no reason given'})")
                finally:
                    cap_outputs(cell)
                    if after_cell:
                        after_cell(nb)
                if stop_on_error and cell_error(cell):
                    return f"cell {i} raised {cell_error(cell)}"
    except DeadKernelError as err:
        return f"the kernel died ({str(err).strip() or 'no reason given'})"
    except RuntimeError as err:  # a kernel that will not start
        return f"the kernel failed: {err}"
    return ""


def _stopped(cell: Any, why: str) -> str:
    """Mark the cell that was running when execution stopped (it has started, so it must not count as passed)."""
    from nbformat import from_dict

    cell.setdefault("outputs", []).append(from_dict({"output_type": "error", "ename": STOPPED, "evalue": why,
                                                     "traceback": []}))
    return why


def cap_outputs(cell: Any, cap: int = OUTPUT_CAP) -> None:
    """Cut a cell's outputs to about `cap` characters in all, saying so."""
    used, kept = 0, []
    for out in cell.get("outputs", []):
        size = len(json.dumps(out))
        if used + size > cap:
            if out.get("output_type") == "stream":
                text = "".join(out.get("text", ""))[: max(0, cap - used)]
                kept.append(dict(out, text=text))
            kept.append({"output_type": "stream", "name": "stderr",
                         "text": f"\n[output cut: over {cap:,} characters in this cell]\n"})
            break
        used += size
        kept.append(out)
    from nbformat import from_dict

    cell["outputs"] = [from_dict(o) for o in kept]


def cell_error(cell: Any) -> str:
    """'Name: message' (first line, at most 200 characters) of a cell's error output, or ''."""
    for out in cell.get("outputs", []) if isinstance(cell, dict) else []:
        if not isinstance(out, dict) or out.get("output_type") != "error":
            continue
        ename, evalue = str(out.get("ename", ""))[:80], str(out.get("evalue", ""))
        if ename == "NotImplementedError":
            return "not answered (NotImplementedError)"
        if ename == STOPPED:
            return f"stopped: {evalue[:160]}"
        value = evalue.strip().splitlines()
        return f"{ename}: {value[0] if value else ''}".strip().rstrip(":")[:200]
    return ""


def _write(nb: Any, out: Path) -> None:
    """Rewrite `out` in place (in the sandbox it is a file bound into a read-only folder: no rename there)."""
    import nbformat

    text = nbformat.writes(nb).encode()
    with open(out, "wb") as f:
        f.write(text)


def apply_limits(spec: str) -> None:
    """Set the run's limits, soft and hard, from "address space bytes,file bytes,processes" (0: no limit)."""
    import resource

    for name, value in zip(("RLIMIT_AS", "RLIMIT_FSIZE", "RLIMIT_NPROC"), spec.split(",")):
        if int(value) > 0:
            resource.setrlimit(getattr(resource, name), (int(value), int(value)))


def main(argv: list[str]) -> int:
    """Read a notebook from standard input, run it, write it (and why it stopped, beside it) to argv[0]."""
    import nbformat

    out, time_limit = Path(argv[0]), float(argv[1])
    apply_limits(os.environ.get("COVLIB_LIMITS", "0,0,0"))
    nb = nbformat.reads(sys.stdin.read(), as_version=4)
    stopped = execute(nb, Path.cwd(), time_limit, after_cell=lambda n: _write(n, out))
    _write(nb, out)
    with open(out.with_name(out.name + ".stopped"), "w") as f:  # in place, as `_write`
        f.write(stopped)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
