"""The checks of each exercise, run in a clean process of their own on recorded values: what decides a grade.

`python -m teaching.checker` reads {exercise: {"code", "got", "ref"}} as JSON from standard input and prints
{exercise: ""} for checks that passed, or the first failure's "Name: message". The code is the solution's check cell
below `exercises.CHECKS_MARKER`, and sees only `got` (a submission's recorded answers: plain JSON data), `ref` (the
solution run's reference values), `math` and `covlib.runs.exercises`; nothing of the submission's process gets here.
"""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
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


def run_checks(jobs: dict[str, dict[str, Any]], timeout: float = 300) -> dict[str, str]:
    """Run each exercise's checks in a fresh trusted process; an exercise the process did not report fails."""
    if not jobs:
        return {}
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(paths.code_root()), "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        done = subprocess.run([sys.executable, "-m", "teaching.checker"], input=json.dumps(jobs), capture_output=True,
                              text=True, timeout=timeout, env=env, cwd=paths.code_root())
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
