"""Run a notebook isolated with bubblewrap (`teaching.isolation`): no network, no secrets, no privilege, limits on
memory, disk and processes, the process tree killed whole.

Inside the sandbox the only writable places are the run's working folder (`WORK`: a size-capped tmpfs holding the
run's own copy of the call cache) and `/tmp` (another). The Python installation, the virtual environment, the `covlib`
and `teaching` packages, the data, the models and the retrieval indexes are mounted read-only; the solution
notebooks, the rest of the repository, the shared call cache, the grade table and other students' folders are not
mounted at all; a student's run gets the graded copy of covlib (`teaching.stubs`) where covlib is. What comes back
(the executed notebook, why it stopped, the recorded answers, the solution run's saved inputs) is four files bound one
by one into a read-only folder (`OUT`), each under the file-size limit; the run's output goes through a pipe and is
kept capped (`runner.log`); the grader removes the rest after reading it. The environment is cleared (no API key or
token gets in), the network is a private empty one, and the sandbox has its own process namespace, so every process
a submission starts dies when its run ends or is killed at the time limit.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from covlib.core import paths
from teaching.isolation import (STUDENT_UID, dirs, drop, interpreter, namespaces, python_dirs, system_mounts,
                                 user_namespace)
from teaching.replay import INPUTS_ENV

ANSWERS_CAP = 16 * 2**20  # bytes of recorded answers read back from a run; a larger file is not read
NOTEBOOK_CAP = 64 * 2**20  # bytes of executed notebook read back for the feedback
LOG_CAP = 32 * 2**10  # bytes of the run's own output (stdout and stderr) kept in runner.log: its first and last LOG_CAP

WORK = "/covlib-run"  # inside the sandbox: the run's working folder, a size-capped tmpfs that goes with the run
OUT = "/covlib-out"  # inside the sandbox: a read-only folder of the few files that come back, each bound from the host
INPUTS = "inputs.pkl"  # the values a student's answers run on: saved by the solution run (`teaching.replay`)
OUT_FILES = ("executed.ipynb", "executed.ipynb.stopped", "answers.jsonl", INPUTS)


@dataclass(frozen=True)
class Limits:
    """What one submission's run may use; each is enforced by the kernel, not by polling."""

    disk: int = 1 * 2**30  # bytes written in its working folder (a tmpfs, so memory), beyond its copy of the call cache
    file: int = 256 * 2**20  # bytes any one file may grow to (RLIMIT_FSIZE), beyond the call cache's size
    memory: int = 6 * 2**30  # bytes of address space of each process (RLIMIT_AS)
    processes: int = 256  # processes and threads at once (RLIMIT_NPROC, counted in the sandbox's user namespace)


@dataclass
class Run:
    """What came back from one sandboxed run: the executed notebook (None if unusable), the recorded values, why it stopped."""

    notebook: Any
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)
    reference: dict[str, dict[str, Any]] = field(default_factory=dict)
    stopped: str = ""
    seconds: float = 0.0
    log: str = ""  # the last line the run printed (its runner.log), for messages when it failed
    shown: Any = None  # a student's run without the hidden inputs: its executed notebook, for the feedback


def snapshot_cache(target: Path) -> Path | None:
    """A consistent SQLite copy of the shared call cache at `target` (None when there is no cache yet): a submission
    reads every call the solution run made, and what it adds or spoils goes with its run."""
    shared = paths.cache_dir() / "calls.sqlite"
    if not shared.is_file():
        return None
    target.parent.mkdir(parents=True, exist_ok=True)
    source = sqlite3.connect(f"{shared.resolve().as_uri()}?mode=ro", uri=True)
    copy = sqlite3.connect(target)
    try:
        source.backup(copy)
    finally:
        source.close()
        copy.close()
    return target


def environment(work: str | Path, out: str | Path, cache: str | Path, limits: Limits, cache_size: int = 0) -> dict[str, str]:
    """The whole environment of a run: where things are, offline switches, its limits, and nothing of the teacher's."""
    venv_bin = str(Path(interpreter()).parent)
    return {"PATH": f"{venv_bin}:/usr/local/bin:/usr/bin:/bin", "HOME": f"{work}/home", "LANG": "C.UTF-8",
            "USER": "student", "PYTHONPATH": str(paths.code_root()), "PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": "/tmp",
            "COVLIB_ROOT": str(work), "COVLIB_DATA": str(paths.data_dir()), "COVLIB_MODELS": str(paths.models_dir()),
            "COVLIB_CACHE": str(cache), "COVLIB_ANSWERS": f"{out}/answers.jsonl", INPUTS_ENV: f"{out}/{INPUTS}",
            "COVLIB_LIMITS": f"{limits.memory},{limits.file + cache_size},{limits.processes}",
            "MPLBACKEND": "Agg", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def read_only() -> list[Path]:
    """The project's folders a run reads and may not change: its code, the data and the models."""
    code = paths.code_root()
    return [code / "covlib", code / "teaching", paths.data_dir(), paths.models_dir()]


def bwrap_command(scratch: Path, env: dict[str, str], writable_cache: bool, limits: Limits, userns: int | None,
                  cache_fd: int | None, cache_size: int, covlib: Path | None = None) -> list[str]:
    """bwrap's arguments: system, code, data and models read-only (`covlib`, when given, mounted where covlib is); a
    size-capped tmpfs to work in; the files that come back bound one by one into a read-only folder; nothing else."""
    args = ["bwrap", *namespaces(userns), "--die-with-parent", "--new-session", "--clearenv", *system_mounts()]
    for d in python_dirs() + read_only():
        if d.exists():
            source = covlib if covlib is not None and d == paths.code_root() / "covlib" else d
            args += dirs(d) + ["--ro-bind", str(source), str(d)]
    if writable_cache:  # the solution run warms the shared cache
        args += dirs(paths.cache_dir()) + ["--bind", str(paths.cache_dir()), str(paths.cache_dir())]
    if writable_cache:  # the solution run (the teacher's code) keeps what it wrote, for the book and for a look
        args += ["--bind", str(scratch / "work"), WORK]
    else:
        args += ["--size", str(limits.disk + cache_size), "--perms", "0777", "--tmpfs", WORK]
    for sub in ("home", "cache"):
        args += ["--perms", "0777", "--dir", f"{WORK}/{sub}"]
    if cache_fd is not None:
        args += ["--perms", "0666", "--file", str(cache_fd), f"{WORK}/cache/calls.sqlite"]
    if not writable_cache and paths.index_dir().is_dir():  # the solution run's indexes, read-only in the private cache
        args += ["--ro-bind", str(paths.index_dir()), f"{WORK}/cache/indexes"]
    args += ["--size", str(2**20), "--tmpfs", OUT]
    for name in OUT_FILES:
        args += ["--bind", str(scratch / "out" / name), f"{OUT}/{name}"]
    args += ["--remount-ro", OUT, "--chdir", WORK]
    for k, v in env.items():
        args += ["--setenv", k, v]
    return args


def run(nb: Any, scratch: str | Path, time_limit: float, unsafe: bool = False, writable_cache: bool = False,
        limits: Limits = Limits(), covlib: Path | None = None, inputs: Path | None = None) -> Run:
    """Run `nb` isolated (or, with `unsafe`, only in its own process group with a cleaned environment) within
    `limits`, and read back what it wrote; the whole process tree is killed at `time_limit` (plus a minute for the
    kernel to start). A student's run gets `covlib` (the graded copy, `teaching.stubs`) where covlib is, and its own
    copy of the solution run's `inputs` (`teaching.replay`). Only `runner.log` (capped) stays in `scratch` afterwards,
    and, for the solution's own run (`writable_cache`), its executed notebook, its saved inputs (`INPUTS`) and what it
    wrote (`work/`: figures, tables, results)."""
    import nbformat

    scratch = Path(scratch).resolve()
    if scratch.exists():
        shutil.rmtree(scratch)
    (scratch / "out").mkdir(parents=True)
    for name in OUT_FILES:
        (scratch / "out" / name).touch()
    (scratch / "work").mkdir()
    if inputs is not None:  # the run's own copy of the values its answers run on
        shutil.copyfile(inputs, scratch / "out" / INPUTS)
    if writable_cache:
        paths.cache_dir().mkdir(parents=True, exist_ok=True)  # else its writes would land in the sandbox and vanish
    snapshot = None if writable_cache else snapshot_cache(scratch / "snapshot" / "calls.sqlite")
    shared = paths.cache_dir() / "calls.sqlite"  # the file-size limit leaves room for the cache to grow
    cache_size = snapshot.stat().st_size if snapshot else shared.stat().st_size if shared.is_file() else 0
    if unsafe:
        work, out = scratch / "work", scratch / "out"
        (work / "home").mkdir()
        cache = paths.cache_dir() if writable_cache else work / "cache"
        if snapshot:
            cache.mkdir(parents=True, exist_ok=True)
            shutil.move(str(snapshot), cache / "calls.sqlite")
        if not writable_cache and paths.index_dir().is_dir():
            cache.mkdir(parents=True, exist_ok=True)
            (cache / "indexes").symlink_to(paths.index_dir())
        if covlib is not None:  # the graded covlib first on the path (unsafe: the real one is still on the disk)
            (scratch / "code").mkdir()
            (scratch / "code" / "covlib").symlink_to(covlib)
            (scratch / "code" / "teaching").symlink_to(paths.code_root() / "teaching")
    else:
        work, out = Path(WORK), Path(OUT)
        cache = paths.cache_dir() if writable_cache else work / "cache"
        if os.geteuid() == 0 and not writable_cache:
            for name in OUT_FILES:
                os.chown(scratch / "out" / name, STUDENT_UID, STUDENT_UID)
    env = environment(work, out, cache, replace(limits, processes=0) if unsafe else limits, cache_size)
    if unsafe and covlib is not None:
        env["PYTHONPATH"] = str(scratch / "code")
    runner = [interpreter(), "-m", "teaching.runner", f"{out}/executed.ipynb", f"{time_limit:g}"]
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        fds = []
        if unsafe:
            cmd = runner
        else:
            userns = stack.enter_context(user_namespace())
            cache_file = stack.enter_context(open(snapshot, "rb")) if snapshot else None
            fds = [fd for fd in (userns, cache_file.fileno() if cache_file else None) if fd is not None]
            cmd = bwrap_command(scratch, env, writable_cache, limits, userns,
                                cache_file.fileno() if cache_file else None, cache_size, covlib) + drop(runner, not writable_cache)
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                cwd=scratch, pass_fds=fds, start_new_session=True,
                                env=env if unsafe else {"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
        log = _Log(proc.stdout)
        stopped = ""
        try:
            proc.stdin.write(nbformat.writes(nb).encode())
            proc.stdin.close()
        except OSError:  # the run ended before reading its notebook: its log says why
            pass
        try:
            proc.wait(timeout=time_limit + 60)
        except subprocess.TimeoutExpired:
            stopped = f"time limit of {time_limit:g} s reached"
        finally:
            _kill(proc)
            log.join()
    try:
        (scratch / "runner.log").write_bytes(log.text())
    except OSError:  # a full disk: the run's results are still read back
        pass
    said = scratch / "out" / "executed.ipynb.stopped"
    if not stopped and proc.returncode == 0:
        stopped = said.read_text(errors="replace")[:200] if said.is_file() and not said.is_symlink() else ""
    elif not stopped:
        stopped = f"the run ended early (exit status {proc.returncode}): {log.last_line() or 'it printed nothing'}"[:300]
    result = Run(read_notebook(scratch / "out" / "executed.ipynb"), stopped=stopped,
                 seconds=time.monotonic() - started, log=log.last_line())
    result.answers, result.reference = read_answers(scratch / "out" / "answers.jsonl")
    if writable_cache and (scratch / "out" / "executed.ipynb").is_file():
        shutil.move(str(scratch / "out" / "executed.ipynb"), scratch / "executed.ipynb")
    if writable_cache and (scratch / "out" / INPUTS).is_file():
        shutil.move(str(scratch / "out" / INPUTS), scratch / INPUTS)
    for leftover in ("out", "snapshot", "code") + (() if writable_cache else ("work",)):  # the capped log stays
        if (scratch / leftover).is_dir():
            shutil.rmtree(scratch / leftover, ignore_errors=True)
        else:
            (scratch / leftover).unlink(missing_ok=True)
    return result


class _Log:
    """Reads a run's output as it comes, keeping its first and last `LOG_CAP` bytes (a run may print gigabytes)."""

    def __init__(self, stream: Any):
        self.head, self.tail, self.dropped = b"", b"", 0
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream: Any) -> None:
        while chunk := stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536):
            if len(self.head) < LOG_CAP:
                take = LOG_CAP - len(self.head)
                self.head, chunk = self.head + chunk[:take], chunk[take:]
            joined = self.tail + chunk
            self.dropped += max(0, len(joined) - LOG_CAP)
            self.tail = joined[-LOG_CAP:]

    def join(self) -> None:
        self.thread.join(timeout=10)

    def text(self) -> bytes:
        cut = f"\n[... {self.dropped:,} bytes of output cut ...]\n".encode() if self.dropped else b""
        return self.head + cut + self.tail

    def last_line(self) -> str:
        lines = [ln for ln in self.text().decode(errors="replace").splitlines() if ln.strip()]
        return lines[-1].strip()[:300] if lines else ""


def _kill(proc: subprocess.Popen) -> None:
    """Kill the run's process group (the sandbox's process namespace dies with it)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def read_notebook(path: Path) -> Any:
    """The executed notebook a run left, or None when it is missing, a link, too large or not a notebook."""
    import nbformat

    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > NOTEBOOK_CAP:
            return None
        return nbformat.reads(path.read_text(errors="replace"), as_version=4)
    except Exception:  # whatever a student wrote there
        return None


def read_answers(path: Path) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """The values recorded by `exercises.record` / `exercises.reference`, per exercise (the last value of a key wins);
    malformed lines are skipped, a file over the cap or a link is not read."""
    answers: dict[str, dict[str, Any]] = {}
    reference: dict[str, dict[str, Any]] = {}
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > ANSWERS_CAP:
            return answers, reference
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return answers, reference
    for line in lines:
        try:
            item = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if (not isinstance(item, dict) or not isinstance(item.get("exercise"), str)
                or not isinstance(item.get("values"), dict) or item.get("kind") not in ("answers", "reference")):
            continue
        store = answers if item["kind"] == "answers" else reference
        store.setdefault(item["exercise"], {}).update(item["values"])
    return answers, reference
