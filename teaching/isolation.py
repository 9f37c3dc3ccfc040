"""Linux isolation for a graded run: bubblewrap's namespaces and mounts, and, for a root grader, a user namespace of
our own and `setpriv`, so that a submission never runs with a capability or as root.

bubblewrap keeps every capability for a root caller unless told otherwise. For a normal user, bwrap makes the user
namespace and drops every capability (`--cap-drop ALL`, `--disable-userns`). For root, `user_namespace` makes one that
maps root to root (bwrap needs it to mount) and `STUDENT_UID` to itself, and `drop` runs the submission as
`STUDENT_UID` with an empty capability bounding set and `no_new_privs`: outside the sandbox it is then an unprivileged
uid too, and `RLIMIT_NPROC` (which never binds root) binds it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator

HOW_TO_GET_IT = ("install bubblewrap (Debian/Ubuntu: `sudo apt-get install bubblewrap`; Fedora: `sudo dnf install "
                 "bubblewrap`); it needs unprivileged user namespaces (`sysctl kernel.unprivileged_userns_clone=1` on "
                 "older Debian; on Ubuntu 24.04 the bubblewrap package's AppArmor profile allows it). Or grade without "
                 "isolation with UNSAFE=1 (--unsafe): see docs/teaching.md for what that gives up")


ETC = ("/etc/passwd", "/etc/group", "/etc/fonts", "/etc/ld.so.cache", "/etc/localtime", "/etc/alternatives",
       "/etc/matplotlibrc", "/etc/mime.types")


STUDENT_UID = 65534  # a root grader runs each submission as this unprivileged uid (nobody), no capability left

def unavailable() -> str:
    """Why bubblewrap cannot isolate a run here ('' when it can)."""
    bwrap = shutil.which("bwrap")
    if not bwrap:
        return "bubblewrap (bwrap) is not installed"
    if os.geteuid() == 0 and not shutil.which("setpriv"):
        return "running as root, the grader drops to an unprivileged uid with setpriv (util-linux), which is missing"
    with tempfile.TemporaryDirectory() as tmp:
        try:
            with user_namespace() as userns:
                probe = subprocess.run([bwrap, *namespaces(userns), "--die-with-parent", *system_mounts(), "--chdir",
                                        "/", *drop(["true"])], capture_output=True, text=True, cwd=tmp,
                                       pass_fds=[userns] if userns is not None else [])
        except OSError as err:
            return f"cannot create a user namespace for the sandbox ({err})"
    if probe.returncode != 0:
        return f"bubblewrap cannot create a sandbox here ({probe.stderr.strip()[:200] or probe.returncode})"
    return ""


@contextlib.contextmanager
def user_namespace() -> Iterator[int | None]:
    """For a root grader, a user namespace mapping root to root (for bwrap to mount) and `STUDENT_UID` to itself (what
    the submission runs as), as an open fd for `bwrap --userns`; None for anyone else (bwrap makes its own)."""
    if os.geteuid() != 0:
        yield None
        return
    libc = ctypes.CDLL(None, use_errno=True)
    ready, go = os.pipe(), os.pipe()
    pid = os.fork()
    if pid == 0:  # the child only holds the namespace open until the parent has its fd
        os.close(ready[0])
        ok = libc.unshare(0x10000000) == 0  # CLONE_NEWUSER
        os.write(ready[1], b"k" if ok else b"e")
        os.read(go[0], 1)
        os._exit(0)
    os.close(ready[1])
    fd = None
    try:
        if os.read(ready[0], 1) != b"k":
            raise OSError("unshare(CLONE_NEWUSER) failed")
        mapping = f"0 0 1\n{STUDENT_UID} {STUDENT_UID} 1\n"
        for name in ("uid_map", "gid_map"):
            Path(f"/proc/{pid}/{name}").write_text(mapping)
        fd = os.open(f"/proc/{pid}/ns/user", os.O_RDONLY)
    finally:
        os.write(go[1], b"x")
        for end in (ready[0], go[0], go[1]):
            os.close(end)
        os.waitpid(pid, 0)
    try:
        yield fd
    finally:
        os.close(fd)


def namespaces(userns: int | None) -> list[str]:
    """Every namespace new; the user namespace given (root) or made by bwrap, with no way to make another."""
    if userns is None:
        return ["--unshare-all", "--unshare-user", "--disable-userns", "--cap-drop", "ALL"]
    return ["--userns", str(userns), "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try"]


def drop(command: list[str], student: bool = True) -> list[str]:
    """`command` with no capability left when the grader is root, as `STUDENT_UID` for a `student` (a solution run,
    the teacher's own code, stays root, capability-less, so that it can warm the teacher's call cache); as is for
    anyone else (bwrap already dropped every capability)."""
    if os.geteuid() != 0:
        return command
    uid = [f"--reuid={STUDENT_UID}", f"--regid={STUDENT_UID}", "--clear-groups"] if student else []
    return ["setpriv", *uid, "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--", *command]


def system_mounts() -> list[str]:
    args = []
    for top in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    for path in ETC:
        if os.path.exists(path):
            args += ["--ro-bind", path, path]
    args += ["--proc", "/proc"]
    for knob in ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs"):  # the kernel's settings
        if os.path.exists(knob):
            args += ["--ro-bind", knob, knob]
    return args + ["--dev", "/dev", "--size", str(64 * 2**20), "--perms", "1777", "--tmpfs", "/tmp"]


def dirs(path: Path) -> list[str]:
    """bwrap arguments creating `path`'s parents world-readable (a root bwrap makes them 0700 otherwise)."""
    args = []
    for parent in reversed(path.parents):
        if str(parent) != "/":
            args += ["--perms", "0755", "--dir", str(parent)]
    return args


def python_dirs() -> list[Path]:
    """The interpreter's installation and the virtual environment (read-only in the sandbox), links resolved."""
    dirs = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), Path(sys.executable).resolve().parent.parent}
    return sorted(d for d in dirs if d != Path("/usr") and not str(d).startswith("/usr/"))


def installed_covlib(dirs: list[Path]) -> list[Path]:
    """Copies of covlib's source installed under `dirs` (a non-editable `pip install`, a Debian `dist-packages` one, an
    egg): mounted in every sandbox, they would hand a submission the graded functions the graded copy leaves out."""
    found = set()
    for d in dirs:
        for pattern in ("lib*/python*/*-packages", "local/lib*/python*/*-packages"):
            for packages in d.glob(pattern):
                found.update(p for p in [packages / "covlib", *packages.glob("covlib*.egg/covlib")]
                             if (p / "__init__.py").is_file())
    return sorted(found)


def interpreter() -> str:
    """The virtual environment's python with its folder's links resolved: the path that exists inside the sandbox."""
    return str(Path(sys.prefix).resolve() / "bin" / Path(sys.executable).name) if sys.prefix != sys.base_prefix \
        else str(Path(sys.executable).resolve())


def unreadable(roots: list[Path]) -> str:
    """'' when `STUDENT_UID` can read every folder and file under `roots` (what a root grader mounts read-only), else
    the first it cannot read and the remedy."""
    for root in roots:
        for folder, subdirs, files in os.walk(root) if root.is_dir() else []:
            for path, is_dir in [(folder, True)] + [(os.path.join(folder, f), False) for f in files]:
                try:
                    mode = os.lstat(path)
                except OSError:
                    continue
                need = (stat.S_IROTH | stat.S_IXOTH) if is_dir else stat.S_IROTH
                if mode.st_uid != STUDENT_UID and not stat.S_ISLNK(mode.st_mode) and mode.st_mode & need != need:
                    return (f"{path} cannot be read by the unprivileged uid {STUDENT_UID} that a root grader runs "
                            f"submissions as (mode {stat.filemode(mode.st_mode)}): `chmod -R a+rX {root}`, or grade as "
                            "a normal user")
    return ""
