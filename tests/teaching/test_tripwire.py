"""The own-work tripwire in a real IPython shell (in a process of its own: it arms hooks that cannot be removed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from teaching import tripwire

ROOT = Path(__file__).resolve().parents[2]

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


def _run(cells: list[str], watched: list[str], tmp_path: Path, returncode: int = 0) -> list[str]:
    fifo = tmp_path / "tripwire"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
    env = dict(os.environ, PYTHONPATH=str(ROOT), **{tripwire.PIPE_ENV: str(fifo), tripwire.NAMES_ENV: "fsum,other",
                                                   tripwire.CELLS_ENV: ",".join(map(tripwire.cell_key, watched))})
    code = f"CELLS = {cells!r}\n" + textwrap.dedent(SHELL)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == returncode, done.stderr[-2000:]
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


REDIRECT = ("import os\nfds = [f for f in os.listdir('/proc/self/fd')\n       if os.path.realpath(f'/proc/self/fd/{f}').endswith('tripwire')]\n"
            "os.dup2(os.open(os.devnull, os.O_WRONLY), int(fds[0]))\ngot = double(2)")
CALLBACK = "import math\nget_ipython().events.register('post_run_cell', lambda *a: math.fsum([1, 2]))"


def test_a_report_sent_elsewhere_stops_the_kernel(tmp_path):
    lines = _run([ANSWER, REDIRECT, "print('still running')"], [ANSWER, REDIRECT], tmp_path, returncode=70)
    assert lines == ['{"ready": true}']


def test_a_callback_between_cells_is_watched(tmp_path):
    lines = _run([ANSWER, CALLBACK, "x = 1"], [ANSWER, CALLBACK], tmp_path)
    found = tripwire.findings(lines, {tripwire.cell_key(ANSWER): ("ex99-double", "answer")}, {"ex99-double": ["fsum"]})
    assert found == {"ex99-double": "calls covlib's fsum (outside any cell): write this step yourself"}


def test_a_module_copied_where_the_kernel_keeps_its_cells_is_not_a_cell(tmp_path):
    module = tmp_path / "ipykernel_9" / "copied.py"
    module.parent.mkdir()
    module.write_text("def fsum(values):\n    return sum(values)\n")
    use = f"import sys\nsys.path.insert(0, {str(module.parent)!r})\nimport copied\ngot = copied.fsum([1, 2])"
    own = "def fsum(values):\n    return sum(values)\ngot = fsum([1, 2])"  # a function of the student's own name
    lines = _run([use, own], [use, own], tmp_path)
    assert {"call": "fsum", "cell": tripwire.cell_key(use)} in [json.loads(line) for line in lines]
    assert not any(json.loads(line).get("cell") == tripwire.cell_key(own) for line in lines)


def test_a_flood_of_forged_reports_cannot_push_a_real_one_out(tmp_path):
    from teaching import sandbox

    fifo = tmp_path / "tripwire"
    os.mkfifo(fifo)
    reports = sandbox._Reports(fifo, sandbox.Tripwire(("fsum",), ("k1",)))
    writer = os.open(fifo, os.O_WRONLY)
    for i in range(20_000):
        os.write(writer, b'{"ready": true, "n": %d}\n{"call": "fsum", "cell": "forged-%d"}\n' % (i, i))
    os.write(writer, b'{"call": "fsum", "cell": "k1"}\n')
    os.close(writer)
    reports.close()
    assert reports.lines == ['{"ready": true}', '{"call": "fsum", "cell": "k1"}']
