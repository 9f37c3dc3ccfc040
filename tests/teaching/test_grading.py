"""The autograder on a tiny course in the real markup: honest grades for broken and misbehaving submissions, and
the attacks of issue 21 (unearned marks, leaks, harm to others, lost grades), each run through the real grading
command, each showing the honest grade and no damage."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbformat import v4

from teaching import course, grading, isolation, sandbox

ROOT = Path(__file__).resolve().parents[2]


def _need_sandbox() -> None:
    why = isolation.unavailable()
    if why:
        if os.environ.get("CI"):  # CI installs bubblewrap (make sandbox): the attacks must run there
            pytest.fail(f"no sandbox: {why}")
        pytest.skip(f"no sandbox: {why} ({isolation.HOW_TO_GET_IT})")


def _meta(ex: str, role: str, points: float | None = None) -> dict:
    m = {"grade": role == "checks", "grade_id": f"{ex}-{role}", "locked": role != "answer", "schema_version": 3,
         "solution": role == "answer", "task": False}
    if points:
        m["points"] = points
    return {"nbgrader": m}


DOUBLE_CHECKS = """from covlib.runs import exercises

exercises.check_own_work(double, "weighted_average")  # your own code, not covlib's
got = exercises.record("ex99-double", two=double(2))
### BEGIN HIDDEN TESTS
got = exercises.record("ex99-double", base=double(base), many=[double(v) for v in range(base)])
ref = exercises.reference("ex99-double", many=[2 * v for v in range(base)])
### END HIDDEN TESTS
# -- checks: on the recorded values
assert got["two"] == 4, f"double(2): expected 4, got {got['two']}"
### BEGIN HIDDEN TESTS
assert got["base"] == 20 and got["many"] == ref["many"], f"hidden_double_check: got {got['base']}"
### END HIDDEN TESTS"""

ROOT_CHECKS = """from covlib.runs import exercises

got = exercises.record("ex99-root", four=root(4))
### BEGIN HIDDEN TESTS
got = exercises.record("ex99-root", two=root(2))
### END HIDDEN TESTS
# -- checks: on the recorded values
assert got["four"] == 2, "root(4) is 2"
### BEGIN HIDDEN TESTS
assert math.isclose(got["two"] ** 2, 2.0), "hidden_root_check"
### END HIDDEN TESTS"""

SOLUTION_BODY = {"ex99-double": "doubled_value = x * 2\n    return doubled_value",
                 "ex99-root": "square_root_of_x = math.sqrt(x)\n    return square_root_of_x"}


AVERAGE = ("import importlib, string\n_m = importlib.import_module('covlib.papers.covrag.metrics')\n"
           "_f = string.Formatter().get_field('0.weighted_' + 'average', (_m,), {})[0]\n")  # covlib's, no name written
HIDDEN_CALL = AVERAGE + "_g = lambda *a: _f(*a)\n"  # a function whose name says nothing: the visible check cannot tell


def tiny_course(folder: Path) -> Path:
    """A one-notebook course with two exercises in the real markup; no model, so each run takes seconds."""
    cells = [v4.new_markdown_cell("# 99 · tiny"), v4.new_code_cell("import math"),
             v4.new_code_cell("profile: str = 'auto'  # profile", metadata={"tags": ["parameters"]}),
             v4.new_code_cell("assert profile == 'smoke'\nbase = 10")]
    for ex, checks, points in (("ex99-double", DOUBLE_CHECKS, 2), ("ex99-root", ROOT_CHECKS, 3)):
        name = ex.split("-")[1]
        cells += [v4.new_markdown_cell(f"### Exercise · {name}", metadata=_meta(ex, "prompt")),
                  v4.new_code_cell(f"def {name}(x):\n    ### BEGIN SOLUTION\n    {SOLUTION_BODY[ex]}\n    ### END SOLUTION",
                                   metadata=_meta(ex, "answer")),
                  v4.new_code_cell(checks, metadata=_meta(ex, "checks", points))]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "99_tiny.ipynb"
    nbformat.write(v4.new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                                          "language": "python"}}), path)
    return path


def _cells(nb, ex: str, role: str):
    return [c for c in nb.cells if course.cell_role(c) == (ex, role)]


def _answer(nb, ex):
    return _cells(nb, ex, "answer")[0]


def submit(solution: Path, folder: Path, edit=lambda nb: None, answers: dict | None = None) -> Path:
    """A student version of the tiny course with correct answers, then `edit`ed (or the given answer cells)."""
    nb = course.student_version(course.read(solution), solution.name)
    for ex, body in SOLUTION_BODY.items():
        cell = _answer(nb, ex)
        cell.source = cell.source.replace("    # YOUR CODE HERE\n    raise NotImplementedError()", "    " + body)
        if answers and ex in answers:
            cell.source = answers[ex]
    edit(nb)
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / solution.name)
    return folder / solution.name


# --------------------------------------------------------------------------- honest grades for broken submissions

CASES = {
    "full marks": ({}, {"ex99-double": 2, "ex99-root": 3}, ["", ""]),
    "hidden check fails": ({"ex99-double": "def double(x):\n    return 4 if x == 2 else 0"},
                           {"ex99-double": 0, "ex99-root": 3}, ["AssertionError: hidden_double_check", ""]),
    "visible check fails": ({"ex99-double": "def double(x):\n    return x + 3"},
                            {"ex99-double": 0, "ex99-root": 3}, ["AssertionError: double(2): expected 4, got 5", ""]),
    "kernel dies": ({"ex99-double": "import os\nos._exit(1)"}, {"ex99-double": 0, "ex99-root": 0},
                    ["not run: the kernel died", "not run: the kernel died"]),
    "time limit in exercise 2 keeps exercise 1": ({"ex99-root": "import time\ntime.sleep(120)"},
                                                  {"ex99-double": 2, "ex99-root": 0},
                                                  ["", "not run: time limit of 20 s reached"]),
    "endless loop inside the checks": ({"ex99-root": "def root(x):\n    while True:\n        pass"},
                                       {"ex99-double": 2, "ex99-root": 0}, ["", "stopped: time limit of 20 s reached"]),
    "kernel dies inside the checks": ({"ex99-double": "def double(x):\n    import os\n    os._exit(1)"},
                                      {"ex99-double": 0, "ex99-root": 0},
                                      ["stopped: the kernel died", "not run: the kernel died"]),
    "an answer that is not plain data": ({"ex99-root": "def root(x):\n    return {1, 2}"},
                                         {"ex99-double": 2, "ex99-root": 0}, ["", "checks: TypeError: ex99-root: four must be plain data"]),
    "calls the reference it should replace": (
        {"ex99-double": "from covlib.papers.covrag import weighted_average\ndef double(x):\n"
                        "    return 2 * weighted_average({'a': x}, {'a': 1})"},
        {"ex99-double": 0, "ex99-root": 3}, ["checks: AssertionError: double calls weighted_average: write this step yourself", ""]),
    "reaches the reference without naming it": (
        {"ex99-double": HIDDEN_CALL + "def double(x):\n    return 2 * _g({'a': x}, {'a': 1})"},
        {"ex99-double": 0, "ex99-root": 3}, ["checks: RuntimeError: weighted_average is not available when your work is graded", ""]),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_grader_on_a_tiny_course(case, tmp_path):
    _need_sandbox()
    solution = tiny_course(tmp_path / "course")
    answers, points, errors = CASES[case]
    submitted = submit(solution, tmp_path / "subs" / "dan", answers=answers)
    reference = grading.solution_reference(solution, tmp_path / "out", 60, unsafe=False)
    feedback = tmp_path / "feedback.ipynb"
    rows = course.grade_notebook(solution, submitted, "dan", reference, time_limit=20, scratch=tmp_path / "scratch",
                                 feedback=feedback)
    assert {r.exercise: r.points for r in rows} == points
    for r, want in zip(rows, errors):
        assert r.error.startswith(want) if want else r.error == "", (r.exercise, r.error)
    assert feedback.is_file()  # a timeout or a crash still sends feedback back
    top = nbformat.read(feedback, as_version=4).cells[0]  # the grader's own markdown cell, never an output
    assert top.cell_type == "markdown" and top.source.startswith(f"## Grader's verdict: {sum(points.values()):g} / 5 points\n")


def test_recorded_values_are_plain_json_and_numpy_values_become_python_ones(tmp_path, monkeypatch):
    import numpy as np

    from covlib.runs import exercises

    monkeypatch.setenv(exercises.ANSWERS_ENV, str(tmp_path / "answers.jsonl"))
    got = exercises.record("ex99-np", flag=np.bool_(True), row=np.arange(3), pair=(1, np.float32(0.5)))
    assert got == {"flag": True, "row": [0, 1, 2], "pair": [1, 0.5]}
    with pytest.raises(TypeError, match="ex99-np: bad must be plain data"):
        exercises.record("ex99-np", bad={1, 2})
    answers, reference = sandbox.read_answers(tmp_path / "answers.jsonl")
    assert answers == {"ex99-np": got} and reference == {}
    (tmp_path / "answers.jsonl").write_text('not json\n{"exercise": 1}\n' + "[" * 100_000 + "\n")
    assert sandbox.read_answers(tmp_path / "answers.jsonl") == ({}, {})  # garbage is skipped, never raised


# --------------------------------------------------------------------------- the attacks, through the real command

PLANTED = "sk-planted-secret-4242"

ATTACKS = {
    # unearned marks: each hands in a wrong double (x + 3) and tries to pass anyway
    "custom exception handler": "get_ipython().set_custom_exc((BaseException,), lambda *a, **k: None)\n"
                                "def double(x):\n    return x + 3",
    "input transformer turns asserts into pass": (
        "ip = get_ipython()\nip.input_transformers_post.append(lambda lines: [l if 'assert' not in l else "
        "l[:len(l) - len(l.lstrip())] + 'pass\\n' for l in lines])\ndef double(x):\n    return x + 3"),
    "always-equal object and a patched isclose": (
        "import math\nclass Same:\n    def __eq__(self, other):\n        return True\n    __hash__ = None\n"
        "math.isclose = lambda *a, **k: True\ndef double(x):\n    return Same()"),
    # issue 49: covlib's graded function reached without its name, each with what defeated the tripwire, and each
    # computing the right value (2 * the mean of {x}) when the real function runs
    "a module dressed as a notebook cell": (HIDDEN_CALL + "import linecache\nlinecache.cache[_m.__file__] = (1, None, ['\\n'], _m.__file__)\n"
                                            "def double(x):\n    return 2 * _g({'a': x}, {'a': 1})"),
    "one byte on the report pipe": (HIDDEN_CALL + "def double(x):\n    try:\n        open(os.environ.get('COVLIB_TRIPWIRE', '/dev/null'), 'w').write('x')\n"
                                    "    except OSError:\n        pass\n    return 2 * _g({'a': x}, {'a': 1})"),
    "a line of 60,000 brackets on the report pipe": (
        HIDDEN_CALL + "try:\n    open(os.environ.get('COVLIB_TRIPWIRE', '/dev/null'), 'w').write('[' * 60000 + '\\n')\n"
        "except OSError:\n    pass\ndef double(x):\n    return 2 * _g({'a': x}, {'a': 1})"),
    "the code object renamed": (AVERAGE + "import types\n_h = types.FunctionType(_f.__code__.replace(co_name='my_average'), "
                                "_f.__globals__)\n_g = lambda *a: _h(*a)\ndef double(x):\n    return 2 * _g({'a': x}, {'a': 1})"),
    "a raw thread": (HIDDEN_CALL + "import threading, time\ndef double(x):\n    out = []\n"
                     "    threading._start_new_thread(lambda: out.append(_g({'a': x}, {'a': 1})), ())\n"
                     "    for _ in range(100):\n        if out:\n            break\n        time.sleep(0.02)\n"
                     "    return 2 * out[0] if out else None"),
    "a helper interpreter": (
        "import sys, time, os, webbrowser\n_failed = []\ndef double(x):\n    if _failed:\n        return None\n"
        "    path = f'/tmp/answer-{x}'\n"
        "    code = f\"import importlib; m = importlib.import_module('covlib.papers.covrag.metrics'); "
        "open({path!r}, 'w').write(str(getattr(m, 'weighted_' + 'average')({{'a': {x}}}, {{'a': 1}})))\"\n"
        "    webbrowser.BackgroundBrowser([sys.executable, '-c', code]).open('')\n"
        "    for _ in range(200):\n        if os.path.exists(path) and open(path).read():\n"
        "            return 2 * float(open(path).read())\n        time.sleep(0.05)\n    _failed.append(x)"),
    "the cell callbacks unregistered": (HIDDEN_CALL + "import IPython\n_ev = IPython.get_ipython().events\n"
                                        "for _k in ('pre_run_cell', 'post_run_cell'):\n    _ev.callbacks[_k].clear()\n"
                                        "def double(x):\n    return 2 * _g({'a': x}, {'a': 1})"),
    "the threads' profile hook cleared": (HIDDEN_CALL + "import threading\nthreading._profile_hook = None\n"
                                          "def double(x):\n    return 2 * _g({'a': x}, {'a': 1})"),
    "the profile hook switched off": (HIDDEN_CALL + "import sys\ndef double(x):\n    sys.setprofile(None)\n"
                                      "    return 2 * _g({'a': x}, {'a': 1})"),
    "patched record writes the right values": (
        "from covlib.runs import exercises as _e\n_real = _e.record\n"
        "_e.record = lambda ex, **v: _real(ex, **({k: 4 if k == 'two' else 20 if k == 'base' else [] for k in v}\n"
        "                                       if ex == 'ex99-double' else v))\n"
        "def double(x):\n    return x + 3"),
    # leaks into the feedback
    "prints the solution notebook and hidden checks": (
        "def double(x):\n    return 2 * x\nfor p in [SOLUTION, SOLUTION.replace('.ipynb', '.py')]:\n    try:\n"
        "        print(open(p).read())\n    except OSError as err:\n        print('cannot read', type(err).__name__)"),
    "prints the environment": "import os\ndef double(x):\n    return 2 * x\nprint(dict(os.environ))",
    "quotes the hidden record line from a later cell": (
        "import sys, linecache\nSEEN = []\ndef double(x):\n    f = sys._getframe(1)\n"
        "    SEEN.append(''.join(linecache.getlines(f.f_code.co_filename)))\n    return 2 * x"),
    # harm to others
    "rewrites the solution notebook": "def double(x):\n    return 2 * x\ntry:\n    open(SOLUTION, 'w').write('{}')\nexcept OSError as err:\n    print(err)",
    "poisons the shared cache": (
        "import os, sqlite3\ndef double(x):\n    return 2 * x\ntry:\n    db = sqlite3.connect(os.path.join(os.environ['COVLIB_CACHE'], 'calls.sqlite'))\n"
        "    db.execute('CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, value TEXT)')\n"
        "    db.execute(\"INSERT OR REPLACE INTO entries VALUES ('x', 'poison')\")\n    db.commit()\nexcept Exception as err:\n    print(err)"),
    "detached processes rewrite the grade table later": (
        "import os, subprocess, sys\ndef double(x):\n    return 2 * x\nfor _ in range(40):\n"
        "    subprocess.Popen([sys.executable, '-c', f'import time, pathlib\\ntime.sleep(4)\\n'\n"
        "        f'for p in [{GRADES!r}, {OUTSIDE!r}]:\\n    try: pathlib.Path(p).write_text(\"grader-owned\")\\n'\n"
        "        f'    except OSError: pass\\npathlib.Path(\"{MARK}\").write_text(\"alive\")'], start_new_session=True)"),
    "writes outside its scratch folder": (
        "def double(x):\n    return 2 * x\nfor p in [OUTSIDE, '/tmp/covlib-escape', os.path.expanduser('~/../escape')]:\n"
        "    try:\n        open(p, 'w').write('escaped')\n    except OSError:\n        pass"),
    "reaches the network": (
        "import socket\ndef double(x):\n    return 2 * x\ntry:\n    socket.create_connection(('127.0.0.1', PORT), timeout=3).sendall(b'leak')\n"
        "except OSError as err:\n    print('no network', type(err).__name__)"),
    "prints 30 MB": "def double(x):\n    return 2 * x\nprint('y' * 30_000_000)",
}


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    """One real grading run (the command `make grade` calls) of the tiny course: an honest student, then one student
    per attack, then an honest student again; a planted secret in the grader's environment; a port listening on the
    host."""
    _need_sandbox()
    tmp = tmp_path_factory.mktemp("attacks")
    solution = tiny_course(tmp / "course")
    subs, out = tmp / "subs", tmp / "out"
    cache = tmp / "cache"
    cache.mkdir()
    seed = subprocess.run([sys.executable, "-c", "import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); "
                           "db.execute('CREATE TABLE entries (key TEXT PRIMARY KEY, value TEXT NOT NULL)'); "
                           "db.execute(\"INSERT INTO entries VALUES ('k', 'honest')\"); db.commit()", str(cache / "calls.sqlite")])
    assert seed.returncode == 0
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(5)
    listener.settimeout(0.5)
    mark, outside = "covlib-alive-mark-7f3", tmp / "outside.txt"  # the mark is written in the run's own folder
    prelude = (f"import os\nSOLUTION = {str(solution)!r}\nGRADES = {str(out / 'grades.csv')!r}\nOUTSIDE = {str(outside)!r}\n"
               f"MARK = {mark!r}\nPORT = {listener.getsockname()[1]}\n")
    submit(solution, subs / "a-honest")
    names = {}
    for i, (attack, code) in enumerate(ATTACKS.items()):
        student = f"b{i:02d}-{attack.replace(' ', '-')[:40]}"
        names[attack] = student
        submit(solution, subs / student, answers={"ex99-double": prelude + code})
        if attack == "quotes the hidden record line from a later cell":
            submit(solution, subs / student, answers={"ex99-double": prelude + code,
                                                      "ex99-root": "print(SEEN)\ndef root(x):\n    return math.sqrt(x)"})
    submit(solution, subs / "z-honest")
    (subs / "c-linked").mkdir()
    (subs / "c-linked" / solution.name).symlink_to(solution)  # "handed in" as a link to the teacher's solution
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in (solution, cache / "calls.sqlite")}
    Path("/tmp/covlib-escape").unlink(missing_ok=True)  # the outside-write attack's target on the host
    env = dict(os.environ, OPENAI_API_KEY=PLANTED, HF_TOKEN=PLANTED, COVLIB_CACHE=str(cache))
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "teaching.course", "grade", str(subs), "--out", str(out),
                           "--time-limit", "60", "--solutions", str(solution.parent)], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    seconds = time.monotonic() - started
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    table_right_after = (out / "grades.csv").read_text()
    time.sleep(6)  # the detached processes would have written by now
    connections = 0
    try:
        while True:
            listener.accept()[0].close()
            connections += 1
    except (socket.timeout, OSError):
        pass
    listener.close()
    with open(out / "grades.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    return {"solution": solution, "out": out, "subs": subs, "rows": rows, "names": names, "before": before, "cache": cache,
            "table": table_right_after, "mark": mark, "outside": outside, "connections": connections,
            "seconds": seconds, "stdout": done.stdout}


def _points(rows, student: str) -> dict[str, float]:
    return {r["exercise"]: float(r["points"]) for r in rows if r["student"] == student}


HONEST = {"ex99-double": 2.0, "ex99-root": 3.0}


OWN_WORK_ATTACKS = ["a module dressed as a notebook cell", "one byte on the report pipe",
                    "a line of 60,000 brackets on the report pipe", "the code object renamed", "a raw thread",
                    "a helper interpreter", "the cell callbacks unregistered", "the threads' profile hook cleared",
                    "the profile hook switched off"]


@pytest.mark.slow
@pytest.mark.parametrize("attack", ["custom exception handler", "input transformer turns asserts into pass",
                                    "always-equal object and a patched isclose", "patched record writes the right values",
                                    *OWN_WORK_ATTACKS])
def test_an_attack_earns_no_unearned_marks(attacked, attack):
    rows = [r for r in attacked["rows"] if r["student"] == attacked["names"][attack]]
    assert {r["exercise"]: float(r["points"]) for r in rows} == {"ex99-double": 0.0, "ex99-root": 3.0}, rows
    stub = "checks: RuntimeError: weighted_average is not available when your work is graded"
    want = {"always-equal object and a patched isclose": "checks: TypeError: ex99-double: two must be plain data",
            "patched record writes the right values": "AssertionError: hidden_double_check",
            "a raw thread": "AssertionError: double(2): expected 4, got None",  # the thread's call raised the stub's error
            "a helper interpreter": "AssertionError: double(2): expected 4, got None"}  # so did the helper's
    assert rows[0]["error"].startswith(want.get(attack, stub if attack in OWN_WORK_ATTACKS else
                                                "AssertionError: double(2): expected 4, got 5")), rows[0]


@pytest.mark.parametrize("attack", OWN_WORK_ATTACKS)
def test_each_own_work_attack_is_a_real_route_to_covlib(attack, tmp_path):
    """Outside grading, against the real covlib, each attack's double(2) is 4: what stops it is the graded copy."""
    code = "import os\n" + ATTACKS[attack] + "\nprint('double(2) =', double(2))"
    if "IPython.get_ipython" in code:
        code = code.replace("IPython.get_ipython().events", "__import__('types').SimpleNamespace(callbacks={'pre_run_cell': [], 'post_run_cell': []})")
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert "double(2) = 4.0" in run.stdout, (run.stdout, run.stderr[-800:])


@pytest.mark.slow
def test_a_link_to_the_solution_is_not_graded(attacked):
    rows = [r for r in attacked["rows"] if r["student"] == "c-linked"]
    assert rows and all(float(r["points"]) == 0 and r["error"] == "not submitted" for r in rows)


@pytest.mark.slow
def test_no_solution_hidden_check_or_secret_reaches_the_feedback(attacked):
    solution = course.read(attacked["solution"])
    secrets = course.secret_lines(solution)
    assert any("hidden_double_check" in s for s in secrets) and any("doubled_value" in s for s in secrets)
    feedback = sorted((attacked["out"] / "feedback").rglob("*.ipynb"))
    assert len(feedback) == len(ATTACKS) + 2
    for path in feedback:
        text = path.read_text()
        assert PLANTED not in text and "HIDDEN TESTS" not in text, path
        own = (attacked["subs"] / path.parent.name / path.name).read_text()
        for line in secrets:
            if line not in own:  # the students handed in some of the solution's own lines
                assert line not in text and json.dumps(line)[1:-1] not in text, (path, line)
        assert path.stat().st_size < 2 * 2**20, path  # 30 MB of printing is cut
    printed = (attacked["out"] / "feedback" / attacked["names"]["prints the solution notebook and hidden checks"]
               / "99_tiny.ipynb").read_text()
    assert "cannot read FileNotFoundError" in printed  # the solutions are not even there
    network = (attacked["out"] / "feedback" / attacked["names"]["reaches the network"] / "99_tiny.ipynb").read_text()
    assert "no network" in network and attacked["connections"] == 0


@pytest.mark.slow
def test_no_attack_harms_the_teacher_or_another_student(attacked):
    rows, before = attacked["rows"], attacked["before"]
    for path, digest in before.items():  # the solution notebook and the shared cache are unchanged
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, path
    assert not list(attacked["out"].rglob(attacked["mark"])), "a process outlived its run"
    assert not attacked["outside"].exists()
    assert not Path("/tmp/covlib-escape").exists()
    assert (attacked["out"] / "grades.csv").read_text() == attacked["table"]
    assert _points(rows, "a-honest") == HONEST and _points(rows, "z-honest") == HONEST
    for attack in ("prints the solution notebook and hidden checks", "prints the environment",
                   "rewrites the solution notebook",
                   "poisons the shared cache",
                   "writes outside its scratch folder", "reaches the network", "prints 30 MB"):
        assert _points(rows, attacked["names"][attack]) == HONEST, attack
    for attack in ("quotes the hidden record line from a later cell", "detached processes rewrite the grade table later"):
        assert _points(rows, attacked["names"][attack]) == HONEST, attack  # right answers: no rule against frames now
    quoted = (attacked["out"] / "feedback" / attacked["names"]["quotes the hidden record line from a later cell"]
              / "99_tiny.ipynb").read_text()
    assert "two=double(2)" in quoted and "base=double(base)" not in quoted  # the feedback's run had no hidden input
    leftovers = subprocess.run(["pgrep", "-f", attacked["mark"]], capture_output=True, text=True)
    assert leftovers.stdout.strip() == ""


@pytest.mark.slow
def test_a_killed_grader_keeps_every_finished_grade_and_a_rerun_skips_them(tmp_path):
    _need_sandbox()
    solution = tiny_course(tmp_path / "course")
    submit(solution, tmp_path / "subs" / "a-first")
    submit(solution, tmp_path / "subs" / "b-slow", answers={"ex99-root": "import time\ntime.sleep(300)"})
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "teaching.course", "grade", str(tmp_path / "subs"), "--out", str(out),
           "--time-limit", "200", "--solutions", str(solution.parent)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    stored = out / "students" / "a-first" / "99_tiny.json"
    deadline = time.monotonic() + 120
    while not stored.exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(3)  # b-slow is running now
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    with open(out / "grades.csv", newline="") as f:
        assert _points(list(csv.DictReader(f)), "a-first") == HONEST
    mtime = stored.stat().st_mtime_ns
    (tmp_path / "subs" / "b-slow" / solution.name).unlink()
    submit(solution, tmp_path / "subs" / "b-slow")
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert stored.stat().st_mtime_ns == mtime  # unchanged submission: not graded again
    with open(out / "grades.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert _points(rows, "a-first") == HONEST and _points(rows, "b-slow") == HONEST


# --------------------------------------------------------------------------- one assignment at a time, refusals


@pytest.mark.slow
def test_grading_refuses_without_a_sandbox_unless_told(tmp_path, monkeypatch):
    solution = tiny_course(tmp_path / "course")
    submit(solution, tmp_path / "subs" / "dan")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no bwrap on the PATH
    with pytest.raises(course.CourseError, match="bubblewrap .* is not installed.*apt-get install bubblewrap.*UNSAFE=1"):
        course.grade(tmp_path / "subs", tmp_path / "out", time_limit=30, folder=solution.parent, progress=False)
    monkeypatch.undo()
    rows = course.grade(tmp_path / "subs", tmp_path / "out", time_limit=30, folder=solution.parent, progress=False,
                        unsafe=True)
    assert {r.exercise: r.points for r in rows} == HONEST


@pytest.mark.slow
def test_one_assignment_is_graded_and_totalled_alone(tmp_path):
    _need_sandbox()
    solution = tiny_course(tmp_path / "course")
    other = solution.with_name("98_other.ipynb")
    other.write_text(solution.read_text().replace("ex99-", "ex98-"))
    submit(solution, tmp_path / "subs" / "dan")
    done = subprocess.run([sys.executable, "-m", "teaching.course", "grade", str(tmp_path / "subs"), "--out",
                           str(tmp_path / "out"), "--time-limit", "60", "--solutions", str(solution.parent),
                           "--assignment", "99"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "dan: 5 / 5" in done.stdout and "grades-99.csv" in done.stdout
    assert sorted(p.name for p in (tmp_path / "out" / "reference").iterdir()) == ["99_tiny.inputs.pkl", "99_tiny.json"]  # only its solution ran
    with open(tmp_path / "out" / "grades-99.csv", newline="") as f:
        assert {r["notebook"] for r in csv.DictReader(f)} == {"99_tiny.ipynb"}


def test_links_pipes_and_linked_folders_are_never_submissions(tmp_path):
    solution = tiny_course(tmp_path / "course")
    subs = tmp_path / "subs"
    (subs / "pipe").mkdir(parents=True)
    os.mkfifo(subs / "pipe" / solution.name)  # reading it would wait forever
    (subs / "link").mkdir()
    (subs / "link" / solution.name).symlink_to(solution)
    (subs / "folder-link").mkdir()
    (subs / "folder-link" / "week1").symlink_to(solution.parent, target_is_directory=True)
    (subs / "linked-student").symlink_to(solution.parent, target_is_directory=True)
    found = grading.find_submissions(subs, [solution.name])
    assert found == {"folder-link": {}, "link": {}, "pipe": {}}


def test_an_unknown_assignment_is_refused_with_the_list(tmp_path):
    solution = tiny_course(tmp_path / "course")
    with pytest.raises(course.CourseError, match="no assignment 07: the assignments are 99_tiny"):  # noqa
        grading.select(course.exercise_notebooks(solution.parent), ["07"])
    assert grading.select(course.exercise_notebooks(solution.parent), ["99"]) == [solution]


def test_a_stray_copy_of_a_solution_notebook_is_refused(tmp_path):
    solution = tiny_course(tmp_path)
    shutil.copy(solution, tmp_path / "99_tiny-Copy1.ipynb")
    with pytest.raises(course.CourseError, match="exercise 'ex99-double' is in both"):
        course.exercise_notebooks(tmp_path)


def test_the_solution_must_pass_its_own_checks(tmp_path):
    _need_sandbox()
    solution = tiny_course(tmp_path / "course")
    nb = course.read(solution)
    _answer(nb, "ex99-root").source = _answer(nb, "ex99-root").source.replace("math.sqrt(x)", "x / 2")
    nbformat.write(nb, solution)
    with pytest.raises(course.CourseError, match="the solution notebooks do not pass their own checks"):
        grading.solution_reference(solution, tmp_path / "out", 60, unsafe=False)


def test_grade_table_escapes_and_totals(tmp_path):
    import re

    rows = [course.Grade("dan", "99_tiny.ipynb", "ex99-double", 2.0, 2.0),
            course.Grade("dan", "99_tiny.ipynb", "ex99-root", 0.0, 3.0, "AssertionError: a | b\nsecond line"),
            course.Grade("eve", "99_tiny.ipynb", "ex99-double", 0.0, 2.0, "not submitted")]
    csv_path, md_path = course.write_table(rows, tmp_path)
    with open(csv_path, newline="") as f:
        back = list(csv.DictReader(f))
    assert [r["error"] for r in back] == ["", "AssertionError: a | b\nsecond line", "not submitted"]
    md = md_path.read_text()
    assert "a \\| b second line" in md and re.search(r"\| dan\s+\|\s+2 \|\s+5 \|", md)
    assert re.search(r"\| eve\s+\|\s+0 \|\s+2 \|", md)


# --------------------------------------------------------------------------- issue 32: the own-work rule, feedback,
# deep answers, hostile names in the table, naming an assignment

REACHES_COVLIB = {  # each reaches covlib's weighted_average without writing its name: 2 * mean of {x} is 2x
    "through a lambda": HIDDEN_CALL + "def double(x):\n    return 2 * _g({'a': x}, {'a': 1})",
    "a rebuilt code object": AVERAGE + "import types\n_g = types.FunctionType(_f.__code__.replace(co_name='mine'), _f.__globals__)\n"
                             "def double(x):\n    return 2 * _g({'a': x}, {'a': 1})",
    "getattr with a computed name": "import importlib\ndef double(x):\n    m = importlib.import_module('covlib.papers.covrag')\n"
                                    "    return 2 * getattr(m, 'weighted_' + 'average')({'a': x}, {'a': 1})",
    "pickle": "import pickle\ndef double(x):\n    return 2 * pickle.loads(b'ccovlib.papers.covrag.metrics\\nweighted_' + b'average\\n.')({'a': x}, {'a': 1})",
}


def test_the_graded_covlib_has_no_body_for_the_graded_functions(tmp_path):
    """Each function a check cell names is a `raise` in the graded copy, everything else is covlib's, and no bytecode
    of the real one comes along; a name that is in no module is refused."""
    from teaching import stubs

    solution = course.read(tiny_course(tmp_path / "course"))
    target = grading.graded_covlib(solution)
    assert target.name == "covlib" and not list(target.rglob("__pycache__")) and not list(target.rglob("*.pyc"))
    metrics = (target / "papers" / "covrag" / "metrics.py").read_text()
    real = (ROOT / "covlib" / "papers" / "covrag" / "metrics.py").read_text()
    assert 'raise RuntimeError("weighted_average is not available when your work is graded' in metrics
    assert metrics.count("\n") < real.count("\n") and metrics.replace(" ", "") != real.replace(" ", "")
    run = subprocess.run([sys.executable, "-c", "import covlib.papers.covrag as C\nprint(C.PAPER_COUNTS)\n"
                          "C.weighted_average({'a': 1}, {'a': 1})"], cwd=tmp_path, capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(target.parent)))
    assert run.returncode == 1 and "RuntimeError: weighted_average is not available" in run.stderr, run.stderr
    assert run.stdout.strip()  # the rest of the package imports and works
    with pytest.raises(ValueError, match="no function fsum"):
        stubs.stub_copy(ROOT / "covlib", tmp_path / "other", ["fsum"])


def test_a_stub_keeps_what_follows_a_nested_graded_function_and_refuses_a_one_line_body():
    from teaching import stubs

    source = ('def outer(x):\n    """Doc."""\n    def inner(y):\n        return y\n    return inner(x)\n\n\nLIMIT = 3\n'
              'TOTAL = 4\n\n\ndef kept(x):\n    return x\n')
    out, done = stubs.stub_source(source, {"outer", "inner"})
    scope: dict = {}
    exec(out, scope)
    assert done == ["outer"] and scope["LIMIT"] == 3 and scope["TOTAL"] == 4 and scope["kept"](5) == 5
    assert scope["outer"].__doc__ == "Doc."
    with pytest.raises(RuntimeError, match="outer is not available when your work is graded"):
        scope["outer"](1)
    with pytest.raises(ValueError, match="body on the signature's line"):
        stubs.stub_source("def f(a,\n      b): return a\n", {"f"})


def test_values_a_check_cell_binds_are_never_supplied_to_a_student(tmp_path, monkeypatch):
    """Review of round 4: the values saved before exercise 2 held exercise 1's recorded `got` and hidden `ref`
    (bound in its check cell), which a later answer could record again or print. Nothing a check or answer cell
    binds is saved, nor a notebook function that calls the solution's."""
    from teaching import replay

    solution = course.read(tiny_course(tmp_path))
    nb, _ = grading.merge(solution, None, for_student=False)
    saves = [c.source for c in nb.cells if c.get("metadata", {}).get("grader") == "inputs"]
    assert len(saves) == 2 and all("'got'" in s and "'ref'" in s and "'double'" in s for s in saves)
    monkeypatch.setenv(replay.INPUTS_ENV, str(tmp_path / "inputs.pkl"))
    scope = {"base": 10, "got": {"two": 4}, "ref": {"many": [0, 2]}, "double": lambda x: 2 * x, "math": __import__("math")}
    exec("def helper(x):\n    return double(x)\ndef plain(x):\n    return x", scope)
    lost = replay.save("ex99-root", {k: v for k, v in scope.items() if k != "__builtins__"}, skip=["got", "ref", "double"])
    back: dict = {}
    replay.restore("ex99-root", back)
    assert set(back) == {"base", "math", "plain"} and lost == ["helper"] and back["plain"](3) == 3


@pytest.mark.parametrize("case", REACHES_COVLIB)
def test_every_route_to_a_graded_function_ends_in_its_stub(case, tmp_path):
    """What the static rule and the tripwire tried to catch route by route: with the graded copy, each route runs the
    stub; the same answer against the real covlib computes the right value (it is a real route)."""
    solution = course.read(tiny_course(tmp_path / "course"))
    target = grading.graded_covlib(solution)
    code = REACHES_COVLIB[case] + "\nprint(double(21))"
    for where, want in ((ROOT, "42.0"), (target.parent, "RuntimeError: weighted_average is not available")):
        run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                             env=dict(os.environ, PYTHONPATH=str(where)))
        assert want in run.stdout + run.stderr, (where, run.stdout, run.stderr[-500:])


def test_a_covlib_installed_in_the_environment_is_found(tmp_path):
    """A non-editable install puts covlib's source in site-packages, which every sandbox mounts read-only: the grader
    refuses to grade with it there (`grade` raises with the path)."""
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    (site / "covlib").mkdir(parents=True)
    assert isolation.installed_covlib([tmp_path / "venv"]) == []  # a folder without the package's __init__
    (site / "covlib" / "__init__.py").write_text("")
    assert isolation.installed_covlib([tmp_path / "venv"]) == [site / "covlib"]
    assert isolation.installed_covlib(isolation.python_dirs()) == []  # this environment: covlib is editable


def test_the_visible_check_names_a_direct_call_and_states_the_rule():
    from covlib.runs import exercises

    scope: dict = {}
    exec("from covlib.papers.covrag import weighted_average as avg\ndef double(x):\n    return 2 * avg({'a': x}, {'a': 1})", scope)
    with pytest.raises(AssertionError, match="double calls weighted_average: write this step yourself") as err:
        exercises.check_own_work(scope["double"], "weighted_average")
    assert exercises.OWN_WORK_RULE in str(err.value) and "do not exist" in exercises.OWN_WORK_RULE
    exec("def honest(x):\n    return 2 * x", scope)
    exercises.check_own_work(scope["honest"], "weighted_average")


def test_copied_source_is_flagged_for_the_teacher_with_the_lines_and_honest_work_is_not():
    from teaching import copying

    path, source, first = copying.reference_source("self_consistency")
    assert path == "covlib/papers/verify_edit/cot.py" and first > 1
    renamed = source.replace("answers", "paths").replace("weights", "w").replace("votes", "tally")
    copied = "def consistency(paths, mean_logprobs, dataset='hotpotqa', vote='wang'):\n" + renamed
    note = copying.review_note(copied, ["self_consistency"])
    assert note.startswith("for review: lines 2-") and "match covlib's self_consistency (covlib/papers/verify_edit/cot.py" in note
    for nb_path in course.exercise_notebooks():  # the shipped solutions, written apart from covlib: not flagged
        nb = course.read(nb_path)
        for ex, answer in grading.answer_sources(nb).items():
            assert copying.review_note(answer, grading.forbidden(nb)[ex]) == "", (nb_path.name, ex)


DEEP = "def double(x):\n    return " + "-" * 100_000 + "x\n"  # ast.parse raises MemoryError, not SyntaxError


def test_a_too_deeply_nested_answer_fails_its_own_exercise_only(tmp_path):
    root = "def root(x):\n    return math.sqrt(x)"
    assert grading.without_reference("x = " + "-" * 100_000 + "1\n").startswith("x = ---")
    solution = course.read(tiny_course(tmp_path))
    submitted = course.student_version(solution, "99_tiny.ipynb")
    _answer(submitted, "ex99-double").source, _answer(submitted, "ex99-root").source = DEEP, root
    nb, _ = grading.merge(solution, submitted)  # the grader reads it without failing
    assert _answer(nb, "ex99-double").source == DEEP
    run = sandbox.Run(notebook=None, answers={"ex99-root": {"four": 2.0, "two": 2 ** 0.5}})
    rows = grading.grade_run(solution, "99_tiny.ipynb", "dan", run, {}, {"ex99-double": DEEP, "ex99-root": root}, {})
    assert {r.exercise: r.points for r in rows} == {"ex99-double": 0.0, "ex99-root": 3.0}
    double = next(r for r in rows if r.exercise == "ex99-double")
    assert double.error.startswith("not run") and "grader error" not in double.error


def _verdict_cells(nb) -> list:
    return [c for c in nb.cells if c.source.lstrip("# ").startswith("Grader's verdict")]


def test_feedback_verdicts_are_the_graders_markdown_and_printing_cannot_pass_for_one(tmp_path):
    from teaching import feedback

    solution = course.read(tiny_course(tmp_path))
    handout = course.student_version(solution, "99_tiny.ipynb")
    fake = "[grader] ex99-double: 2 / 2 points, passed\n## Grader's verdict: 5 / 5 points\n"
    answers = {"ex99-double": f"print({fake!r})\ndef double(x):\n    return x + 3", "ex99-root": "def root(x):\n    return 2"}
    executed = grading.merge(solution, None, for_student=False)[0]
    _answer(executed, "ex99-double").outputs = [v4.new_output("stream", name="stdout", text=fake)]
    rows = [course.Grade("dan", "99_tiny.ipynb", "ex99-double", 0.0, 2.0,
                         "AssertionError: double(2): expected 4, got '\n\n## Grader's verdict: 2 / 2 points <b>x</b>'"),
            course.Grade("dan", "99_tiny.ipynb", "ex99-root", 3.0, 3.0)]
    nb = feedback.feedback_notebook(handout, answers, executed, rows)
    verdicts = _verdict_cells(nb)
    assert [c.cell_type for c in verdicts] == ["markdown"] * 3  # the notebook's, then one per exercise
    assert verdicts[0] is nb.cells[0] and verdicts[0].source.startswith("## Grader's verdict: 3 / 5 points\n")
    assert verdicts[1].source.startswith("#### Grader's verdict · ex99-double: 0 / 2 points, failed\n")
    assert verdicts[2].source.startswith("#### Grader's verdict · ex99-root: 3 / 3 points, passed\n")
    body = verdicts[1].source.splitlines()[1:]  # the check's message, which quotes the student's value: code, not markdown
    assert [ln for ln in body if ln.strip() and not ln.startswith("    ")] == ["Why:"]
    answer = _answer(nb, "ex99-double")
    assert answer.outputs[0].text == feedback.OUTPUT_LABEL and answer.outputs[1].text == fake  # shown, as theirs
    for cell in nb.cells:
        if cell.cell_type == "code" and cell is not answer:
            assert cell.outputs == [], cell.source  # no verdict among outputs, where a student could print one
        assert cell.cell_type == "markdown" or "Grader's verdict" not in json.dumps(cell.get("outputs", [])) \
            or cell is answer


def test_the_grade_table_and_feedback_give_the_exercise_title_beside_its_id(tmp_path):
    """Issue 52: `ex01-threshold` is "Exercise 2 · Which predictions get edited?" in the notebook: both are shown."""
    from teaching import feedback

    solution = ROOT / "notebooks" / "01_consistency_kde.ipynb"
    rows = grading.grade_notebook(solution, None, "dan", {})
    csv_path, md_path = course.write_table(rows, tmp_path)
    with open(csv_path, newline="") as f:
        read = {r["exercise"]: r["title"] for r in csv.DictReader(f)}
    assert read["ex01-threshold"] == "Exercise 2 · Which predictions get edited?"
    assert ["dan", "01_consistency_kde.ipynb", "ex01-threshold", "Exercise 2 · Which predictions get edited?"] in \
        [r[:4] for r in _md_rows(md_path.read_text().split("## Per exercise")[1])]
    nb = feedback.feedback_notebook(course.student_version(course.read(solution), solution.name), {}, None, rows)
    verdicts = [c.source for c in _verdict_cells(nb)]
    assert "- ex01-threshold (Exercise 2 · Which predictions get edited?): 0 / " in verdicts[0]
    assert any(v.startswith("#### Grader's verdict · ex01-threshold (Exercise 2 · Which predictions get edited?): 0 / ")
               for v in verdicts[1:])


def _md_rows(section: str) -> list[list[str]]:
    """The rows of a Markdown table, split into cells as GitHub does (a backslash escapes the next character)."""
    rows = []
    for line in section.splitlines():
        if not line.startswith("|"):
            continue
        cells, cell, i = [], "", 1
        while i < len(line):
            if line[i] == "\\" and i + 1 < len(line):
                cell += line[i:i + 2]
                i += 2
                continue
            if line[i] == "|":
                cells.append(cell.strip())
                cell = ""
            else:
                cell += line[i]
            i += 1
        rows.append(cells)
    return rows[2:]  # less the header and the rule under it


def test_student_names_cannot_add_a_row_or_display_reversed(tmp_path):
    names = ["eve|fake", "mallory\n| forged | 99 | 99 |", "\u202eevil\u2066", "back\\|slash", "dan", "007"]
    rows = [course.Grade(n, "99_tiny.ipynb", ex, pts, of) for n in names
            for ex, pts, of in (("ex99-double", 2.0, 2.0), ("ex99-root", 0.0, 3.0))]
    csv_path, md_path = course.write_table(rows, tmp_path)
    md = md_path.read_text()
    totals, per_exercise = md.split("## Per exercise")
    got = _md_rows(totals)
    assert len(got) == len(names) and all(len(r) == 3 for r in got), got  # no fake row, no extra column
    assert [r[1:] for r in got] == [["2", "5"]] * len(names)
    shown = {r[0] for r in got}
    assert {"eve\\|fake", "mallory \\| forged \\| 99 \\| 99 \\|", "&lt;U+202E&gt;evil&lt;U+2066&gt;", "back\\\\\\|slash",
            "007"} <= shown  # a name that looks like a number is shown as written
    assert all(len(r) == 8 for r in _md_rows(per_exercise)) and len(_md_rows(per_exercise)) == len(rows)
    assert not any(ch in md for ch in "\u202e\u2066\u200e\u200f\u061c")
    with open(csv_path, newline="") as f:
        assert sorted({r["student"] for r in csv.DictReader(f)}) == sorted(names)  # the CSV keeps the raw name


def test_messages_and_names_cannot_run_html_load_images_or_become_spreadsheet_formulas(tmp_path):
    """An exception text reached grades.md raw (`<img onerror>`, `<script>`, a remote image), and a folder named
    `=HYPERLINK(...)` became a live formula in the CSV (OWASP's CSV injection)."""
    from markdown_it import MarkdownIt

    hostile = ['<img src=x onerror="alert(1)">', "<script>alert(2)</script>", "![t](http://evil.example/p.png)",
               "[click](javascript:alert(3))", "&lt;script&gt;"]
    rows = [course.Grade("=HYPERLINK(\"evil.example\",\"click\")", "99_tiny.ipynb", "ex99-double", 0.0, 2.0, error=e)
            for e in hostile] + [course.Grade(n, "99_tiny.ipynb", "ex99-root", 1.0, 3.0, error="-1 is not 1")
                                  for n in ("+cmd", "-sum", "@at", "\tTab", "\rcr", "dan")]
    csv_path, md_path = course.write_table(rows, tmp_path)
    html = MarkdownIt("commonmark", {"html": True}).enable("table").render(md_path.read_text())  # raw HTML allowed
    assert "<img" not in html and "<script" not in html and "<a " not in html and "onerror=\"" not in html
    assert "&lt;img src=x onerror=" in html and "&amp;lt;script&amp;gt;" in html  # shown as text
    with open(csv_path, newline="") as f:
        read = list(csv.DictReader(f))
    assert {r["student"] for r in read} == {"'=HYPERLINK(\"evil.example\",\"click\")", "'+cmd", "'-sum", "'@at",
                                           "'\tTab", "'\rcr", "dan"}
    assert {r["error"] for r in read if r["exercise"] == "ex99-root"} == {"'-1 is not 1"}
    assert all(not r[c].startswith(("=", "+", "-", "@", "\t", "\r")) for r in read for c in r if c not in ("points", "max_points"))


def test_a_students_name_reaches_the_console_with_its_control_characters_escaped():
    from teaching.submissions import console_text

    forged = "eve\nfake-row: 3 / 3\x1b[2K\x1b[31m\u202e"
    shown = console_text(forged)
    assert "\n" not in shown and "\x1b" not in shown and "\u202e" not in shown
    assert shown == "eve\\nfake-row: 3 / 3\\x1b[2K\\x1b[31m\\u202e" and console_text("Zoë Ünal") == "Zoë Ünal"


def test_an_assignment_is_a_number_or_a_whole_name():
    from teaching.submissions import select

    found = course.exercise_notebooks()
    first = found[0]  # 01_consistency_kde
    assert first.stem == "01_consistency_kde"
    for picks in (["01"], ["01", "01"], ["01_consistency_kde"], ["01_consistency_kde.ipynb"], ["01", "01_consistency_kde"]):
        assert select(found, picks) == [first], picks
        assert grading.table_name(picks) == "grades-01"
    assert grading.table_name([]) == "grades" and select(found, []) == found
    assert grading.table_name(["04", "01"]) == grading.table_name(["01", "04", "01"]) == "grades-01-04"
    for bad in ("0", "1", "01_consistency", "consistency_kde", "01 ", "*"):
        with pytest.raises(course.CourseError, match=r"no assignment .*: the assignments are 01_consistency_kde, "):
            select(found, [bad])
    lettered = [Path("00_data_tour.ipynb"), Path("00b_nli_judges.ipynb")]
    assert select(lettered, ["00"]) == lettered[:1] and select(lettered, ["00b"]) == lettered[1:]
    assert grading.table_name(lettered[1:]) == "grades-00b"


def test_the_grade_command_resolves_the_assignment_first(tmp_path):
    done = subprocess.run([sys.executable, "-m", "teaching.course", "grade", str(tmp_path / "nowhere"),
                           "--assignment", "0"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 1 and "no assignment 0: the assignments are 01_consistency_kde" in done.stderr
    done = subprocess.run([sys.executable, "-m", "teaching.course", "grade", str(tmp_path / "nowhere"), "--out",
                           str(tmp_path / "out"), "--assignment", "01,01_consistency_kde", "--assignment", "01", "--unsafe"],
                          cwd=ROOT, capture_output=True, text=True)
    assert f"grading 01_consistency_kde into {tmp_path / 'out' / 'grades-01.csv'}" in done.stdout, done.stdout
    assert done.returncode == 2 and "submissions folder not found" in done.stderr
