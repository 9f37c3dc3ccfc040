"""The own-work tripwire in a real IPython shell (in a process of its own: it arms hooks that cannot be removed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from teaching import tripwire

ROOT = Path(__file__).resolve().parent.parent

ANSWER = "import pickle\ndef double(x):\n    return pickle.loads(b'cmath\\nfsum\\n.')([x, x])"
CHECKS = "got = double(2)"
TAMPER = "import sys\nsys.setprofile(None)\ngot = double(3)"
THREAD = ("import threading, math\nt = threading.Thread(target=lambda: math.fsum([1, 2]))\nt.start()\nt.join()\n"
          "got = math.fsum([1, 1])")

SHELL = """
import sys
from IPython.core.interactiveshell import InteractiveShell
from teaching import tripwire
shell = InteractiveShell.instance()
tripwire.install(shell)
for source in CELLS:
    shell.run_cell(source)
"""


def _run(cells: list[str], watched: list[str], tmp_path: Path) -> list[str]:
    fifo = tmp_path / "tripwire"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
    env = dict(os.environ, PYTHONPATH=str(ROOT), **{tripwire.PIPE_ENV: str(fifo), tripwire.NAMES_ENV: "fsum,other",
                                                   tripwire.CELLS_ENV: ",".join(map(tripwire.cell_key, watched))})
    code = f"CELLS = {cells!r}\n" + textwrap.dedent(SHELL)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    data = b""
    try:
        while chunk := os.read(reader, 65536):
            data += chunk
    except BlockingIOError:
        pass
    os.close(reader)
    return data.decode().splitlines()


def test_a_call_however_reached_is_reported_only_in_the_exercises_cells(tmp_path):
    cells = ["import math\nmath.fsum([1, 2])", ANSWER, CHECKS, "double(5)", THREAD]
    lines = _run(cells, [ANSWER, CHECKS, THREAD], tmp_path)
    items = [json.loads(line) for line in lines]
    assert items[0] == {"ready": True}
    calls = [(i["call"], i["cell"]) for i in items if "call" in i]
    key = tripwire.cell_key
    assert ("fsum", key(CHECKS)) in calls  # through pickle, from the check cell
    assert ("fsum", key(THREAD)) in calls and calls.count(("fsum", key(THREAD))) == 2  # a thread is watched too
    assert all(cell != key(cells[0]) and cell != key("double(5)") for _, cell in calls)  # the notebook's own cells
    roles = {key(ANSWER): ("ex99-double", "answer"), key(CHECKS): ("ex99-double", "checks"),
             key(THREAD): ("ex99-root", "answer")}
    found = tripwire.findings(lines, roles, {"ex99-double": ["fsum"], "ex99-root": ["sqrt"]})
    assert found == {"ex99-double": "calls covlib's fsum (while ex99-double's checks cell ran): write this step yourself"}


def test_switching_the_hook_off_is_reported_and_the_next_cell_is_watched_again(tmp_path):
    lines = _run([ANSWER, TAMPER, CHECKS], [ANSWER, TAMPER, CHECKS], tmp_path)
    items = [json.loads(line) for line in lines]
    assert {"tamper": "sys.setprofile", "cell": tripwire.cell_key(TAMPER)} in items
    assert {"call": "fsum", "cell": tripwire.cell_key(CHECKS)} in items


def test_a_run_without_the_tripwire_cannot_be_graded():
    assert tripwire.findings([], {}, {"ex01-x": ["self_consistency"]}) == {
        "ex01-x": "the own-work check did not start in this run, so it cannot be graded"}
    forged = ['{"ready": true}', '{"call": "self_consistency", "cell": "not-a-watched-cell"}', "garbage", "[1]"]
    assert tripwire.findings(forged, {}, {"ex01-x": ["self_consistency"]}) == {}
