"""The checks of each exercise, run in a clean process of their own on recorded values: what decides a grade.

`python -m teaching.checker` reads {exercise: {"code", "got", "ref"}} as JSON from standard input and prints
{exercise: ""} for checks that passed, or the first failure's "Name: message". The code is the solution's check cell
below `exercises.CHECKS_MARKER`, and sees only `got` (a submission's recorded answers: plain JSON data), `ref` (the
solution run's reference values), `math` and `covlib.runs.exercises`; nothing of the submission's process gets here. The grader runs it from a private
copy of covlib/ and teaching/ made before the first run (`trusted_copy`), without site-packages, and checks after every
run that the code on disk has not changed (`Trusted.verify`): no submission can change what grades it.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from covlib.core import paths
from covlib.runs import exercises

SECONDS_PER_EXERCISE = 20


MESSAGE_CAP = 300


class _Timeout(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Timeout()


def check_one(code: str, got: dict[str, Any], ref: dict[str, Any]) -> str:
    """'' when `code` runs through on (got, ref), else 'Name: message' of what stopped it."""
    scope = {"got": got, "ref": ref, "math": math, "exercises": exercises, "__name__": "checks"}
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(SECONDS_PER_EXERCISE)
    try:
        exec(compile(code, "<checks>", "exec"), scope)  # teacher's code, on plain data
    except _Timeout:
        return f"the checks ran over {SECONDS_PER_EXERCISE} s on the recorded values"
    except KeyError as err:
        return f"KeyError: no recorded value {err}"
    except BaseException as err:  # any failure is a failed check; its message goes to the student
        text = str(err).strip().splitlines()
        return f"{type(err).__name__}: {text[0] if text else ''}".strip().rstrip(":")[:MESSAGE_CAP]
    finally:
        signal.alarm(0)
    return ""


CODE = ("covlib", "teaching")  # the packages the checks import, copied before any run and verified after each


class CodeChanged(RuntimeError):
    """The grader's own code changed on disk while submissions ran."""


def code_fingerprint(root: Path) -> str:
    """SHA-256 over the names and bytes of every .py file of `CODE` under `root`."""
    digest = hashlib.sha256()
    for package in CODE:
        for path in sorted((root / package).rglob("*.py")):
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


@dataclass(frozen=True)
class Trusted:
    """A private copy of the grader's code (where the checks run from) and the fingerprint of the code it copied."""

    root: Path
    fingerprint: str

    def verify(self) -> None:
        """Raise CodeChanged when the code on disk no longer matches what was copied before the runs."""
        now = code_fingerprint(paths.code_root())
        if now != self.fingerprint:
            raise CodeChanged(f"covlib/ or teaching/ under {paths.code_root()} changed while submissions ran "
                              f"(fingerprint {self.fingerprint[:12]} -> {now[:12]}): grading stopped. Look at "
                              "`git status` and `git diff` there, restore the code, and grade again")


def trusted_copy(target: Path) -> Trusted:
    """Copy `CODE`'s .py files into `target` (a private folder no sandbox mounts); the checks run from there."""
    root = paths.code_root()
    before = code_fingerprint(root)
    for package in CODE:
        for path in (root / package).rglob("*.py"):
            dest = target / path.relative_to(root)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, dest)
    if code_fingerprint(target) != before or code_fingerprint(root) != before:
        raise CodeChanged(f"the code under {root} changed while it was being copied: grade again")
    return Trusted(target, before)


def run_checks(jobs: dict[str, dict[str, Any]], timeout: float = 300, trusted: Trusted | None = None) -> dict[str, str]:
    """Run each exercise's checks in a fresh process from the `trusted` copy of the code (default: the code root),
    with no site-packages; an exercise the process did not report fails."""
    if not jobs:
        return {}
    code = trusted.root if trusted else paths.code_root()
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(code), "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        done = subprocess.run([sys.executable, "-S", "-m", "teaching.checker"], input=json.dumps(jobs),
                              capture_output=True, text=True, timeout=timeout, env=env, cwd=code)
        verdicts = json.loads(done.stdout) if done.returncode == 0 else {}
    except (subprocess.TimeoutExpired, ValueError):
        verdicts = {}
    return {ex: verdicts.get(ex, "the checks did not finish") if isinstance(verdicts.get(ex, ""), str)
            else "the checks did not finish" for ex in jobs}


def main() -> int:
    """Read the jobs from standard input; print the verdicts as JSON."""
    jobs = json.loads(sys.stdin.read())
    print(json.dumps({ex: check_one(job["code"], job["got"], job["ref"]) for ex, job in jobs.items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
