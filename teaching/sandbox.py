"""Run a notebook isolated with bubblewrap: no network, no secrets, one writable folder, the process tree killed whole.

Inside the sandbox the only writable place is the run's scratch folder, which holds the run's own copy of the call
cache. The Python installation, the virtual environment, the `covlib` and `teaching` packages, the data, the models and
the retrieval indexes are mounted read-only; the solution notebooks, the rest of the repository, the shared call cache,
the grade table and other students' folders are not mounted at all.
The environment is cleared (no API key or token gets in), the network is a private empty one, and the sandbox has its
own process namespace, so every process a submission starts dies when its run ends or is killed at the time limit.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from covlib.core import paths

HOW_TO_GET_IT = ("install bubblewrap (Debian/Ubuntu: `sudo apt-get install bubblewrap`; Fedora: `sudo dnf install "
                 "bubblewrap`); it needs unprivileged user namespaces (`sysctl kernel.unprivileged_userns_clone=1` on "
                 "older Debian; on Ubuntu 24.04 the bubblewrap package's AppArmor profile allows it). Or grade without "
                 "isolation with UNSAFE=1 (--unsafe): see docs/teaching.md for what that gives up")


ETC = ("/etc/passwd", "/etc/group", "/etc/fonts", "/etc/ld.so.cache", "/etc/localtime", "/etc/alternatives",
       "/etc/matplotlibrc", "/etc/mime.types")


ANSWERS_CAP = 16 * 2**20  # bytes of recorded answers read back from a run; a larger file is not read
NOTEBOOK_CAP = 64 * 2**20  # bytes of executed notebook read back for the feedback


@dataclass
class Run:
    """What came back from one sandboxed run: the executed notebook (None if unusable), the recorded values, why it stopped."""

    notebook: Any
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)
    reference: dict[str, dict[str, Any]] = field(default_factory=dict)
    stopped: str = ""
    seconds: float = 0.0


def unavailable() -> str:
    """Why bubblewrap cannot isolate a run here ('' when it can)."""
    bwrap = shutil.which("bwrap")
    if not bwrap:
        return "bubblewrap (bwrap) is not installed"
    probe = subprocess.run([bwrap, "--unshare-all", "--die-with-parent", *_system_mounts(), "true"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        return f"bubblewrap cannot create a sandbox here ({probe.stderr.strip()[:200] or probe.returncode})"
    return ""


def _system_mounts() -> list[str]:
    args = []
    for top in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    for path in ETC:
        if os.path.exists(path):
            args += ["--ro-bind", path, path]
    return args + ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]


def _python_dirs() -> list[Path]:
    """The interpreter's installation and the virtual environment (read-only in the sandbox)."""
    dirs = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), Path(sys.executable).resolve().parent.parent}
    return sorted(d for d in dirs if d != Path("/usr") and not str(d).startswith("/usr/"))


def private_cache(scratch: Path) -> Path:
    """A submission's own copy of the call cache (a consistent SQLite snapshot): it reads every call the solution
    run made, and what it adds or spoils is thrown away with the run, never seen by the teacher or another student."""
    private = scratch / "cache"
    private.mkdir(parents=True, exist_ok=True)
    shared = paths.cache_dir() / "calls.sqlite"
    if shared.is_file():
        source = sqlite3.connect(f"{shared.resolve().as_uri()}?mode=ro", uri=True)
        copy = sqlite3.connect(private / "calls.sqlite")
        try:
            source.backup(copy)
        finally:
            source.close()
            copy.close()
    return private


def environment(scratch: Path, writable_cache: bool) -> dict[str, str]:
    """The whole environment of a run: where things are, offline switches, and nothing of the teacher's."""
    venv_bin = str(Path(sys.executable).parent)
    cache = paths.cache_dir() if writable_cache else scratch / "cache"
    return {"PATH": f"{venv_bin}:/usr/local/bin:/usr/bin:/bin", "HOME": str(scratch / "home"), "LANG": "C.UTF-8",
            "USER": "student", "PYTHONPATH": str(paths.code_root()), "PYTHONDONTWRITEBYTECODE": "1",
            "COVLIB_ROOT": str(scratch), "COVLIB_DATA": str(paths.data_dir()), "COVLIB_MODELS": str(paths.models_dir()),
            "COVLIB_CACHE": str(cache), "COVLIB_ANSWERS": str(scratch / "answers.jsonl"),
            "MPLBACKEND": "Agg", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def bwrap_command(scratch: Path, env: dict[str, str], writable_cache: bool) -> list[str]:
    """bwrap's arguments: system read-only, the project's code/data/models/cache read-only, `scratch` writable."""
    args = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--clearenv", *_system_mounts()]
    for d in _python_dirs():
        args += ["--ro-bind", str(d), str(d)]
    code = paths.code_root()
    for d in (code / "covlib", code / "teaching"):
        args += ["--ro-bind", str(d), str(d)]
    mounts = [(paths.data_dir(), False)] + ([(paths.cache_dir(), True)] if writable_cache else [])
    for d, writable in mounts + [(paths.models_dir(), False)]:
        if d.exists():
            args += ["--bind" if writable else "--ro-bind", str(d), str(d)]
    args += ["--bind", str(scratch), str(scratch), "--chdir", str(scratch)]
    if not writable_cache and paths.index_dir().is_dir():  # the solution run's indexes, read-only in the private cache
        args += ["--ro-bind", str(paths.index_dir()), str(scratch / "cache" / "indexes")]
    for k, v in env.items():
        args += ["--setenv", k, v]
    return args


def run(nb: Any, scratch: str | Path, time_limit: float, unsafe: bool = False, writable_cache: bool = False) -> Run:
    """Run `nb` isolated (or, with `unsafe`, only in its own process group with a cleaned environment) and read back
    what it wrote; the whole process tree is killed at `time_limit` (plus a minute for the kernel to start)."""
    import nbformat

    scratch = Path(scratch).resolve()
    if scratch.exists():
        shutil.rmtree(scratch)
    (scratch / "home").mkdir(parents=True)
    if not writable_cache:
        private_cache(scratch)
        if unsafe and paths.index_dir().is_dir():
            (scratch / "cache" / "indexes").symlink_to(paths.index_dir())
    env = environment(scratch, writable_cache)
    out = scratch / "executed.ipynb"
    runner = [sys.executable, "-m", "teaching.runner", str(out), f"{time_limit:g}"]
    cmd = runner if unsafe else bwrap_command(scratch, env, writable_cache) + runner
    started = time.monotonic()
    with open(scratch / "runner.log", "wb") as log:
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=log, stderr=log, cwd=scratch,
                                env=env if unsafe else {"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                                start_new_session=True)
        stopped = ""
        try:
            proc.communicate(nbformat.writes(nb).encode(), timeout=time_limit + 60)
        except subprocess.TimeoutExpired:
            stopped = f"time limit of {time_limit:g} s reached"
        finally:
            _kill(proc)
    result = Run(read_notebook(out), stopped=stopped, seconds=time.monotonic() - started)
    if not stopped:
        said = scratch / "executed.ipynb.stopped"
        result.stopped = said.read_text(errors="replace")[:200] if said.is_file() and not said.is_symlink() else ""
        if not said.is_file() and proc.returncode != 0:
            result.stopped = f"the run ended early (exit status {proc.returncode})"
    result.answers, result.reference = read_answers(scratch / "answers.jsonl")
    return result


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
