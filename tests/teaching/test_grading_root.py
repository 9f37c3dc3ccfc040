"""The sandbox against a grader that runs as root (as CI, `make sandbox` and most grading containers do), and the limits
each submission is held to: every attack goes through the real grading command, and each shows the honest grade, no
privilege, and no harm to the teacher's disk, code or other students (issue 32)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from teaching import checker, isolation, sandbox
from test_grading import HONEST, ROOT, _need_sandbox, _points, submit, tiny_course

REPORT = "ESCAPE-REPORT"

# each prints one line "ESCAPE-REPORT {json}" from its answer cell, which the feedback notebook shows
ESCAPES = {
    "remounts the code read-write": f"""
import json, os, subprocess
def double(x):
    return x + 3
status = open('/proc/self/status').read()
report = {{'uid': os.getuid(), 'cap_eff': [l.split()[1] for l in status.splitlines() if l.startswith('CapEff')][0]}}
for target in [CODE + '/teaching', CODE + '/covlib']:
    done = subprocess.run(['mount', '-o', 'remount,bind,rw', target], capture_output=True, text=True)
    report['remount ' + target.rsplit('/', 1)[1]] = done.returncode
    try:
        with open(target + '/_escaped_{{}}.py'.format(os.getpid()), 'w') as f:
            f.write('escaped')
        report['wrote ' + target.rsplit('/', 1)[1]] = True
    except OSError as err:
        report['wrote ' + target.rsplit('/', 1)[1]] = type(err).__name__
try:
    value = open('/proc/sys/kernel/core_pattern').read()
    with open('/proc/sys/kernel/core_pattern', 'w') as f:  # the same value back: harmless if it works
        f.write(value)
    report['core_pattern'] = 'written'
except OSError as err:
    report['core_pattern'] = type(err).__name__
print('{REPORT}', json.dumps(report))
""",
    "starts 400 processes": f"""
import json, subprocess
def double(x):
    return 2 * x
procs, error = [], ''
try:
    for _ in range(400):
        procs.append(subprocess.Popen(['sleep', '60']))
except OSError as err:
    error = type(err).__name__
print('{REPORT}', json.dumps({{'started': len(procs), 'error': error}}))
for p in procs:
    p.kill()
    p.wait()
""",
    "fills the disk": f"""
import json, os
def double(x):
    return 2 * x
written, error = 0, ''
try:
    with open('big.bin', 'wb') as f:
        for _ in range(24):
            f.write(b'x' * 64 * 2**20)
            written += 64 * 2**20
except OSError as err:
    error = type(err).__name__
print('{REPORT}', json.dumps({{'written': written, 'error': error, 'cwd': os.getcwd()}}))
""",
    "allocates 8 GiB": f"""
import json
def double(x):
    return 2 * x
try:
    block = bytearray(8 * 2**30)
    result = 'allocated'
    del block
except MemoryError:
    result = 'MemoryError'
print('{REPORT}', json.dumps({{'memory': result}}))
""",
    "writes 60 MB to its standard error": """
import os
def double(x):
    return 2 * x
for _ in range(60):
    os.write(2, b'e' * 2**20)
""",
    "uses operator.itemgetter": "from operator import itemgetter\ndef double(x):\n    return sum(itemgetter(0, 0)([x]))",
    "uses getattr on a number": "def double(x):\n    return 2 * getattr(x, 'real', x)",
}


@pytest.fixture(scope="module")
def escaped(tmp_path_factory):
    """One real grading run of the tiny course with the escapes above, between two honest students."""
    _need_sandbox()
    tmp = tmp_path_factory.mktemp("escapes")
    solution = tiny_course(tmp / "course")
    subs, out = tmp / "subs", tmp / "out"
    prelude = f"CODE = {str(ROOT)!r}\n"
    submit(solution, subs / "a-honest")
    names = {}
    for i, (attack, code) in enumerate(ESCAPES.items()):
        names[attack] = f"b{i:02d}-{attack.replace(' ', '-')[:30]}"
        submit(solution, subs / names[attack], answers={"ex99-double": prelude + code.lstrip()})
    submit(solution, subs / "z-honest")
    before = checker.code_fingerprint(ROOT)
    done = subprocess.run([sys.executable, "-m", "teaching.course", "grade", str(subs), "--out", str(out),
                           "--time-limit", "90", "--solutions", str(solution.parent)], cwd=ROOT,
                          env=dict(os.environ, COVLIB_CACHE=str(tmp / "cache")), capture_output=True, text=True)
    escapes = sorted(ROOT.glob("*/_escaped_*.py"))
    for path in escapes:  # never leave them in the checkout, whatever the test says
        path.unlink()
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    with open(out / "grades.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    reports = {}
    for attack, student in names.items():
        feedback = (out / "feedback" / student / solution.name).read_text()
        lines = [ln for cell in nbformat.reads(feedback, as_version=4).cells for out_ in cell.get("outputs", [])
                 for ln in "".join(out_.get("text", "")).splitlines() if ln.startswith(REPORT)]
        reports[attack] = json.loads(lines[-1].split(" ", 1)[1]) if lines else None
    return {"rows": rows, "names": names, "reports": reports, "out": out, "escapes": escapes, "before": before,
            "after": checker.code_fingerprint(ROOT)}


@pytest.mark.slow
def test_a_submission_gets_no_privilege_and_cannot_touch_the_code(escaped):
    report = escaped["reports"]["remounts the code read-write"]
    assert report is not None, "the attack printed no report"
    assert report["cap_eff"] == "0000000000000000", report  # as root, bwrap kept every capability (issue 32)
    if os.geteuid() == 0:
        assert report["uid"] == isolation.STUDENT_UID, report
    assert report["remount teaching"] != 0 and report["remount covlib"] != 0, report
    assert report["wrote teaching"] != True and report["wrote covlib"] != True, report  # noqa: E712
    assert report["core_pattern"] != "written", report
    assert escaped["escapes"] == [] and escaped["after"] == escaped["before"]
    rows = escaped["rows"]
    assert _points(rows, escaped["names"]["remounts the code read-write"]) == {"ex99-double": 0.0, "ex99-root": 3.0}
    assert _points(rows, "a-honest") == HONEST and _points(rows, "z-honest") == HONEST


@pytest.mark.slow
def test_each_submission_is_held_to_its_limits(escaped):
    limits, reports, names = sandbox.Limits(), escaped["reports"], escaped["names"]
    assert reports["starts 400 processes"]["started"] < limits.processes, reports["starts 400 processes"]
    disk = reports["fills the disk"]
    assert disk["error"] and disk["written"] <= limits.file + 64 * 2**20, disk
    assert reports["allocates 8 GiB"] == {"memory": "MemoryError"}
    scratch = escaped["out"] / "scratch"
    left = [p for p in scratch.rglob("*") if p.is_file() and "(solutions)" not in p.parts]  # the teacher's run stays
    assert {p.name for p in left} <= {"runner.log"}, left  # what a student's run wrote goes with it
    assert all(p.stat().st_size <= 2 * sandbox.LOG_CAP + 200 for p in left), [(p, p.stat().st_size) for p in left]
    for attack in ("fills the disk", "allocates 8 GiB", "writes 60 MB to its standard error"):
        assert _points(escaped["rows"], names[attack]) == HONEST, attack  # each harms only itself, and not its grade
    assert _points(escaped["rows"], names["starts 400 processes"])["ex99-root"] == 3.0  # the next exercise still runs


@pytest.mark.slow
def test_ordinary_python_that_cannot_reach_covlib_keeps_its_points(escaped):
    for attack in ("uses operator.itemgetter", "uses getattr on a number"):
        assert _points(escaped["rows"], escaped["names"][attack]) == HONEST, attack


def test_the_grader_checks_from_a_private_copy_and_stops_when_the_code_changes(tmp_path):
    trusted = checker.trusted_copy(tmp_path)
    assert (tmp_path / "teaching" / "checker.py").read_bytes() == (ROOT / "teaching" / "checker.py").read_bytes()
    jobs = {"ex": {"code": "assert got['a'] == 2, 'a is 2'", "got": {"a": 1}, "ref": {}}}
    (tmp_path / "teaching" / "checker.py").write_text((tmp_path / "teaching" / "checker.py").read_text().replace(
        "def check_one(code: str, got: dict[str, Any], ref: dict[str, Any]) -> str:\n",
        "def check_one(code: str, got: dict[str, Any], ref: dict[str, Any]) -> str:\n    return ''\n"))
    assert checker.run_checks(jobs, trusted=trusted) == {"ex": ""}  # the checks run from the copy, not the checkout
    trusted = checker.trusted_copy(tmp_path / "fresh")
    assert checker.run_checks(jobs, trusted=trusted) == {"ex": "AssertionError: a is 2"}
    probe = ROOT / "teaching" / "_probe_code_changed.py"
    try:
        probe.write_text("# a file a submission could not have written\n")
        with pytest.raises(checker.CodeChanged, match="changed while submissions ran"):
            trusted.verify()
    finally:
        probe.unlink(missing_ok=True)
    trusted.verify()



@pytest.mark.slow
def test_a_virtual_environment_behind_a_link_still_grades(tmp_path):
    _need_sandbox()
    solution = tiny_course(tmp_path / "course")
    submit(solution, tmp_path / "subs" / "dan")
    venv = Path(sys.prefix)
    (tmp_path / "venv-link").symlink_to(venv, target_is_directory=True)  # a .venv that is a symbolic link
    done = subprocess.run([str(tmp_path / "venv-link" / "bin" / "python"), "-m", "teaching.course", "grade",
                           str(tmp_path / "subs"), "--out", str(tmp_path / "out"), "--time-limit", "60",
                           "--solutions", str(solution.parent)], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-1000:] + done.stderr[-2000:]
    assert "dan: 5 / 5" in done.stdout


WARMS_THE_CACHE = """from covlib.core.cache import Cache
Cache().put('solution-run-entry', {'text': 'warm'})"""


@pytest.mark.slow
def test_the_solution_run_warms_a_cache_folder_that_did_not_exist_yet(tmp_path, monkeypatch):
    _need_sandbox()
    from nbformat import v4

    from teaching import grading

    solution = tiny_course(tmp_path / "course")
    nb = nbformat.read(solution, as_version=4)
    nb.cells.insert(4, v4.new_code_cell(WARMS_THE_CACHE))  # after the parameters, before the exercises
    nbformat.write(nb, solution)
    cache = tmp_path / "not-yet" / "cache"
    monkeypatch.setenv("COVLIB_CACHE", str(cache))
    grading.solution_reference(solution, tmp_path / "out", 60, unsafe=False)
    from covlib.core.cache import Cache

    assert Cache(cache / "calls.sqlite").get("solution-run-entry") == {"text": "warm"}  # not lost in the sandbox


@pytest.mark.slow
def test_a_full_disk_says_so_and_the_other_students_are_still_graded(tmp_path):
    _need_sandbox()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs for the grades needs root (CI runs as root)")
    solution = tiny_course(tmp_path / "course")
    for student in ("a-first", "b-second", "c-third"):
        submit(solution, tmp_path / "subs" / student)
    out = tmp_path / "grades"
    out.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(out)], check=True)
    try:
        (out / "filler").write_bytes(b"f" * 224 * 2**10)  # a nearly full disk: the grades, tables and feedback fill it
        cmd = [sys.executable, "-m", "teaching.course", "grade", str(tmp_path / "subs"), "--out", str(out),
               "--time-limit", "60", "--solutions", str(solution.parent)]
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout[-1000:] + done.stderr[-2000:]
        for student in ("a-first", "b-second", "c-third"):  # each one's turn came, and the console says how it went
            assert f"{student}: " in done.stdout, done.stdout
        assert "disk full" in done.stderr, done.stderr[-2000:]
        assert not list(out.rglob("*.part")), "a half-written file was left behind"
    finally:
        subprocess.run(["umount", "-l", str(out)], check=False)


def test_a_root_grader_refuses_files_its_unprivileged_students_could_not_read(tmp_path, monkeypatch):
    _need_sandbox()
    if os.geteuid() != 0:
        pytest.skip("only a root grader runs submissions as another uid")
    from teaching import course

    solution = tiny_course(tmp_path / "course")
    submit(solution, tmp_path / "subs" / "dan")
    models = tmp_path / "models"
    (models / "converted").mkdir(parents=True)
    (models / "converted").chmod(0o700)  # what tempfile.mkdtemp leaves behind
    monkeypatch.setenv("COVLIB_MODELS", str(models))
    with pytest.raises(course.CourseError, match=r"converted cannot be read by the unprivileged uid 65534 .*"
                                                 r"chmod -R a\+rX"):
        course.grade(tmp_path / "subs", tmp_path / "out", time_limit=30, folder=solution.parent, progress=False)
    (models / "converted").chmod(0o755)
    rows = course.grade(tmp_path / "subs", tmp_path / "out", time_limit=30, folder=solution.parent, progress=False)
    assert {r.exercise: r.points for r in rows} == HONEST


@pytest.mark.slow
def test_a_grader_error_is_not_stored_and_the_next_run_grades_again(tmp_path):
    _need_sandbox()
    solution = tiny_course(tmp_path / "course")
    submit(solution, tmp_path / "subs" / "dan")
    out = tmp_path / "out"
    (out / "scratch").mkdir(parents=True)
    (out / "scratch" / "dan").write_text("a file where dan's scratch folder goes")  # the grader cannot make it
    cmd = [sys.executable, "-m", "teaching.course", "grade", str(tmp_path / "subs"), "--out", str(out),
           "--time-limit", "60", "--solutions", str(solution.parent)]
    first = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert first.returncode == 0 and "dan: 0 / 5" in first.stdout, first.stdout + first.stderr[-2000:]
    (out / "scratch" / "dan").unlink()
    second = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert "dan: 5 / 5" in second.stdout, second.stdout + second.stderr[-2000:]
