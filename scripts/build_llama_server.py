"""Build llama.cpp's own `llama-server` once per machine (what `make llama-server` runs; `make test` and `make bench`
need it): the tests' second real server, the one that batches concurrent requests (`--parallel N`).

    python scripts/build_llama_server.py           # build when missing or when the wheel's libraries changed
    python scripts/build_llama_server.py --force   # rebuild
    python scripts/build_llama_server.py --check   # exit 3 if the installed wheel holds instructions past x86-64-v3

The source is the llama.cpp vendored in the llama-cpp-python sdist of the version installed here (the `serve` extra,
0.3.36), fetched with pip (pip's cache keeps it). Only what the server adds is compiled: llama.cpp's common library,
the multimodal library the server links (mtmd), cpp-httplib and tools/server. libllama and libggml are the ones the
installed llama-cpp-python wheel ships (the same source, already built by `make env`); they are copied beside the
binary, which finds them there ($ORIGIN), so the build outlives a rebuilt .venv. To compile fast on 2 cores: -O0,
except the files a generated token passes through (HOT: -O2, which the -O0 build ran 30 % slower without; the model's
compute is in the wheel's -O3 libraries); each library's translation units share one precompiled standard-library
header; no web UI, examples, tests or OpenSSL. Measured on 2 cores: 150-160 s (300 s of CPU time; the same targets at
llama.cpp's own -O3 took 420 s of CPU time, and the wheel's libraries, not rebuilt here, about 9 minutes). CMake
comes from PATH, else from PyPI into this environment.

Writes <machine cache>/llama.cpp/llama-server-<version>/ (`covlib.generation.server.llama_server_dir`: ~/.cache/covlib
unless COVLIB_MACHINE_CACHE or XDG_CACHE_HOME says otherwise; shared by every clone on the machine, as pip's wheel
cache is): llama-server, the
wheel's shared libraries and build.json (the version, the seconds the build took, the flags).
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from covlib.generation.server import (LLAMA_SERVER_BINARY, llama_cpp_version, llama_server_dir,  # noqa: E402
                                      unportable_instructions)

# the parts of the vendored llama.cpp tree the server's build reads (the rest: ggml's and llama's own sources, models,
# examples, tests, the web UI's sources, is what the wheel already built or the server does not need)
SOURCES = ("cmake/", "common/", "vendor/", "include/", "ggml/include/", "ggml/cmake/", "tools/mtmd/", "tools/server/",
           "tools/ui/CMakeLists.txt", "tools/ui/ui.cpp.in", "tools/ui/ui.h.in", "scripts/ui-assets.cmake", "LICENSE",
           "src/llama-ext.h")
SKIP = ("tools/server/tests/", "tools/server/bench/", "tools/mtmd/tests/")
# the sources a generated token passes through, by the target that compiles them: -O2 (everything else -O0: it runs
# once per request or never; the model's compute is in the wheel's -O3 libraries)
HOT = {"server-context": ("tools/server/server-context.cpp", "tools/server/server-common.cpp",
                          "tools/server/server-task.cpp", "tools/server/server-queue.cpp"),
       "llama-common": ("common/sampling.cpp", "common/common.cpp", "common/log.cpp")}

# Replaces llama.cpp's top-level CMakeLists.txt in the extracted copy: the libraries the wheel built are imported
# instead of compiled, and only the server's own targets are added.
WRAPPER = r"""cmake_minimum_required(VERSION 3.18)
project("llama.cpp" C CXX)
set(WHEEL_LIB "@WHEEL_LIB@")
set(LLAMA_VERSION_MAJOR 0)
set(LLAMA_VERSION_BASE 0.0.0)
set(LLAMA_BUILD_NUMBER 0)
set(LLAMA_BUILD_COMMIT "llama-cpp-python-@VERSION@")
set(BUILD_COMPILER "${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}")
set(BUILD_TARGET "${CMAKE_SYSTEM_NAME} ${CMAKE_SYSTEM_PROCESSOR}")
set(BUILD_SHARED_LIBS OFF)
set(LLAMA_BUILD_COMMON ON)
set(LLAMA_BUILD_TOOLS OFF)
set(LLAMA_SUBPROCESS ON)
set(LLAMA_OPENSSL OFF)
set(LLAMA_BUILD_UI OFF)
set(LLAMA_USE_PREBUILT_UI OFF)
set(LLAMA_TOOLS_INSTALL OFF)
set(MTMD_VIDEO OFF CACHE BOOL "" FORCE)
set(CMAKE_RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
set(CMAKE_BUILD_WITH_INSTALL_RPATH ON)
set(CMAKE_INSTALL_RPATH "$ORIGIN")
include(cmake/license.cmake)
function(llama_add_compile_flags)
endfunction()
find_package(Threads REQUIRED)
foreach(lib ggml-base ggml-cpu ggml llama)
  add_library(${lib} SHARED IMPORTED GLOBAL)
  set_target_properties(${lib} PROPERTIES IMPORTED_LOCATION "${WHEEL_LIB}/lib${lib}.so"
      INTERFACE_INCLUDE_DIRECTORIES "${PROJECT_SOURCE_DIR}/include;${PROJECT_SOURCE_DIR}/ggml/include")
endforeach()
set_target_properties(ggml PROPERTIES INTERFACE_LINK_LIBRARIES "ggml-base;ggml-cpu")
set_target_properties(llama PROPERTIES INTERFACE_LINK_LIBRARIES "ggml")
add_subdirectory(vendor)
add_subdirectory(common)
add_subdirectory(tools/mtmd)
add_subdirectory(tools/ui)
add_subdirectory(tools/server)
foreach(target llama-common mtmd server-context llama-server-impl)
  target_precompile_headers(${target} PRIVATE <bits/stdc++.h>)
endforeach()
@HOT@"""

FLAGS = "-O0 -DNDEBUG"
UNPORTABLE_EXIT = 3  # --check: the wheel holds instructions past x86-64-v3 (`make env` rebuilds it on this code alone)
# the wheel's libraries llama-server loads, by the names (sonames) it asks for
LIBRARIES = ("libllama.so.0", "libggml.so.0", "libggml-base.so.0", "libggml-cpu.so.0")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--force", action="store_true", help="rebuild even when the binary is there")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="parallel compile jobs (default: the cores)")
    ap.add_argument("--check", action="store_true", help="check, build nothing: exit 3 when the installed "
                    "llama-cpp-python's CPU library holds AMX, AVX-512 or AVX-VNNI instructions (a build for the "
                    "build machine's CPU, which `make env` replaces)")
    args = ap.parse_args()
    if args.check:
        check_wheel()
        return
    version = llama_cpp_version()
    target = llama_server_dir(version)
    if up_to_date(target) and not args.force:
        print(f"llama-server {version} is up to date: {target / LLAMA_SERVER_BINARY}")
        return
    build(version, target, args.jobs)


def check_wheel() -> None:
    """Exit 3, naming what it found, when the installed wheel's libggml-cpu is not the portable x86-64-v3 build."""
    if platform.machine() != "x86_64":
        return
    library = (wheel_lib() / "libggml-cpu.so.0").resolve()
    found = unportable_instructions(library)
    if found:
        counts = ", ".join(f"{n:,} {name}" for name, n in found.items())
        print(f"{library} was built for a newer CPU than x86-64-v3 ({counts} instructions): `make env` rebuilds it",
              file=sys.stderr)
        raise SystemExit(UNPORTABLE_EXIT)
    print(f"{library}: x86-64-v3, no AMX, AVX-512 or AVX-VNNI instruction")


def up_to_date(target: Path) -> bool:
    """Whether `target` holds a built llama-server beside the installed wheel's libraries as they are now (a rebuilt
    wheel, such as `make env`'s portable rebuild of an older native one, means a rebuild)."""
    if not (target / LLAMA_SERVER_BINARY).is_file():
        return False
    libs = wheel_lib()
    return all((target / name).is_file() and filecmp.cmp(target / name, (libs / name).resolve(), shallow=False)
               for name in LIBRARIES)


def wheel_lib() -> Path:
    """The installed llama-cpp-python's shared libraries (libllama, libggml*), which the server links."""
    import llama_cpp

    folder = Path(llama_cpp.__file__).parent / "lib"
    missing = [name for name in LIBRARIES if not (folder / name).exists()]
    if missing:
        raise SystemExit(f"{folder} lacks {', '.join(missing)}: llama-server links the libraries of the installed "
                         "llama-cpp-python (Linux, CPU build; `make env`)")
    return folder


def tool(name: str) -> str | None:
    """`name` (cmake, ninja) from PATH or this environment's bin folder, else None."""
    return shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))


def cmake() -> str:
    """A CMake >= 3.18: from PATH, else installed from PyPI into this environment."""
    found = tool("cmake")
    if found:
        out = subprocess.run([found, "--version"], capture_output=True, text=True).stdout.split()
        have = tuple(int(x) for x in (out[2] if len(out) > 2 else "0").split(".")[:2] if x.isdigit())
        if have >= (3, 18):
            return found
    print("installing CMake from PyPI into this environment", flush=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "cmake>=3.18"], check=True)
    found = tool("cmake")
    if not found:
        raise SystemExit("CMake is needed to build llama-server: `pip install cmake` or `apt-get install cmake`")
    return found


def fetch_source(version: str, scratch: Path) -> Path:
    """The vendored llama.cpp tree of llama-cpp-python `version`'s sdist, extracted under `scratch` (only SOURCES)."""
    sdist_dir = scratch / "sdist"
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                    f"llama-cpp-python=={version}", "-d", str(sdist_dir)], check=True)
    (sdist,) = sdist_dir.glob("llama_cpp_python-*.tar.gz")
    prefix = f"llama_cpp_python-{version}/vendor/llama.cpp/"
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(prefix)
                   and m.name[len(prefix):].startswith(SOURCES) and not m.name[len(prefix):].startswith(SKIP)]
        safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}  # Python >= 3.10.12 / 3.11.4
        tar.extractall(scratch, members=members, **safe)
    sdist.unlink()
    return scratch / prefix


def run(log: Path, command: list[str]) -> None:
    """Run a build step with its output appended to `log`; on failure, exit with the log's last lines."""
    with open(log, "a", encoding="utf-8") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-40:])
        raise SystemExit(f"{tail}\n\nbuilding llama-server failed ({' '.join(command[:3])} ...: exit code "
                         f"{done.returncode}); the whole log is {log}")


def build(version: str, target: Path, jobs: int) -> None:
    """Configure and build the llama-server target, then install it with the wheel's libraries into `target`."""
    libs, cmake_bin = wheel_lib(), cmake()
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".build-llama-server-", dir=target.parent))
    log = target.parent / f"{target.name}.build.log"
    log.write_text("", encoding="utf-8")
    started = time.monotonic()
    try:
        print(f"fetching the llama-cpp-python {version} sdist (llama.cpp's source)", flush=True)
        src = fetch_source(version, scratch)
        fetched = time.monotonic() - started
        (src / "CMakeLists.txt").write_text(
            WRAPPER.replace("@WHEEL_LIB@", libs.as_posix()).replace("@VERSION@", version)
            .replace("@HOT@", "".join(f'set_source_files_properties({" ".join(files)} TARGET_DIRECTORY {owner} '
                                      'PROPERTIES COMPILE_OPTIONS "-O2")\n' for owner, files in HOT.items())),
            encoding="utf-8")
        out = scratch / "build"
        generator = ["-G", "Ninja"] if tool("ninja") else []
        print(f"building llama-server with {jobs} jobs (a few minutes on 2 cores; log: {log})", flush=True)
        run(log, [cmake_bin, "-S", str(src), "-B", str(out), *generator, "-DCMAKE_BUILD_TYPE=Release",
                  f"-DCMAKE_CXX_FLAGS_RELEASE={FLAGS}", f"-DCMAKE_C_FLAGS_RELEASE={FLAGS}", "-Wno-dev"])
        run(log, [cmake_bin, "--build", str(out), "--target", "llama-server", "-j", str(jobs)])
        staged = scratch / "install"
        staged.mkdir()
        shutil.copy2(out / "bin" / LLAMA_SERVER_BINARY, staged / LLAMA_SERVER_BINARY)
        for name in LIBRARIES:
            shutil.copy2((libs / name).resolve(), staged / name)
        check = subprocess.run([str(staged / LLAMA_SERVER_BINARY), "--version"], capture_output=True, text=True)
        if check.returncode != 0:
            raise SystemExit(f"the built llama-server does not run: {check.stderr.strip()[-500:]}")
        seconds = time.monotonic() - started
        (staged / "build.json").write_text(json.dumps({
            "llama_cpp_python": version, "seconds": round(seconds, 1), "fetch_seconds": round(fetched, 1),
            "jobs": jobs, "flags": FLAGS, "hot_O2": [f for files in HOT.values() for f in files],
            "machine": platform.machine(), "cores": os.cpu_count(),
            "version_output": (check.stdout + check.stderr).strip()[-300:]}, indent=1) + "\n", encoding="utf-8")
        if target.exists():
            shutil.rmtree(target)
        os.replace(staged, target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"built {target / LLAMA_SERVER_BINARY} in {seconds:.0f} s (of which fetching the source {fetched:.0f} s)")


if __name__ == "__main__":
    main()
