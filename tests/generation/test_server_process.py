"""The llama.cpp servers' processes: the CPU instructions the build they run may use, and what a client hears when one
dies (issue 53: on a virtual Xeon whose CPUID reports AMX, the native build died at its first completion with SIGILL
or SIGSEGV in libggml-cpu, and the client retried a closed port six times, then asked "is the server running?").

`make env` builds llama-cpp-python for x86-64-v3 (AVX2, FMA, F16C, BMI2) on any x86-64 build machine; the check
reads the built library's instructions with objdump, so it needs no machine with AMX.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from covlib.core import paths
from covlib.core.cache import Cache
from covlib.generation.endpoint import EndpointError, EndpointLM
from covlib.generation.server import (LLAMA_SERVER_BINARY, LlamaServer, LocalServer, llama_server_dir,
                                      unportable_instructions)

x86_64 = pytest.mark.skipif(platform.machine() != "x86_64", reason="the portable build is for x86-64")
# a function for each extension past x86-64-v3, and one within it; compiled by gcc into shared libraries
PAST_V3 = r"""
#include <immintrin.h>
__attribute__((target("amx-tile"))) void amx(const void *cfg) { _tile_loadconfig(cfg); _tile_release(); }
__attribute__((target("avx512f"))) __m512 avx512(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
__attribute__((target("avxvnni"))) __m256i vnni(__m256i s, __m256i a, __m256i b) {
    return _mm256_dpbusd_avx_epi32(s, a, b); }
"""
V3 = r"""
#include <immintrin.h>
__m256 v3(__m256 a, __m256 b, __m256 c) { return _mm256_fmadd_ps(a, b, c); }
"""


def _script():
    spec = importlib.util.spec_from_file_location("build_llama_server", paths.code_root() / "scripts" /
                                                  "build_llama_server.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@x86_64
@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc compiles the sample kernels")
def test_the_check_names_each_extension_past_x86_64_v3(tmp_path):
    found = {}
    for name, source, flags in (("past", PAST_V3, []), ("v3", V3, ["-mavx2", "-mfma"])):
        (tmp_path / f"{name}.c").write_text(source)
        subprocess.run(["gcc", "-O2", "-shared", "-fPIC", *flags, "-o", str(tmp_path / f"lib{name}.so"),
                        str(tmp_path / f"{name}.c")], check=True)
        found[name] = unportable_instructions(tmp_path / f"lib{name}.so")
    assert found == {"past": {"AMX": 2, "AVX-512": 1, "AVX-VNNI": 1}, "v3": {}}, found


@x86_64
def test_the_installed_llama_cpp_is_built_for_x86_64_v3_not_the_build_machine():
    """The native build held 373 AMX and 42,499 AVX-512 instructions on a Xeon; `make env` rebuilds such a wheel."""
    import llama_cpp

    library = (Path(llama_cpp.__file__).parent / "lib" / "libggml-cpu.so.0").resolve()
    assert unportable_instructions(library) == {}
    assert subprocess.run([sys.executable, str(paths.code_root() / "scripts" / "build_llama_server.py"), "--check"],
                          capture_output=True).returncode == 0


def test_llama_server_is_rebuilt_when_the_wheel_s_libraries_change(tmp_path):
    """llama-server runs copies of the wheel's libraries: a rebuilt wheel (the portable one replacing a native one)
    must not leave the server on the old copies."""
    script = _script()
    libs = script.wheel_lib()
    assert not script.up_to_date(tmp_path)  # nothing built
    (tmp_path / LLAMA_SERVER_BINARY).write_bytes(b"")
    for name in script.LIBRARIES:
        shutil.copy2((libs / name).resolve(), tmp_path / name)
    assert script.up_to_date(tmp_path)
    with open(tmp_path / "libggml-cpu.so.0", "r+b") as f:  # one byte changed: another build
        first = f.read(1)
        f.seek(0)
        f.write(bytes([first[0] ^ 1]))
    assert not script.up_to_date(tmp_path)


def _kill_when_busy(pid: int, port: int, sig: int = signal.SIGSEGV) -> threading.Thread:
    """A thread that sends `sig` to the server as soon as a client's connection to `port` is open (a request is in)."""
    def run():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if any(c.status == psutil.CONN_ESTABLISHED and c.laddr.port == port
                   for c in psutil.Process(pid).net_connections()):
                break
            time.sleep(0.002)
        os.kill(pid, sig)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.mark.server
@pytest.mark.parametrize("kind", ["llama-cpp-python", "llama-server"])
def test_a_server_that_dies_during_a_request_is_named_with_its_signal_and_log(kind, tmp_path):
    """A crash in the server's native code (here a SIGSEGV sent while it reads a 1,500-word prompt) is reported at
    once, one request sent: how the process ended and the end of its log, not retries against a closed port."""
    if kind == "llama-server":
        if not (llama_server_dir() / LLAMA_SERVER_BINARY).is_file():
            subprocess.run([sys.executable, str(paths.code_root() / "scripts" / "build_llama_server.py")], check=True)
        srv = LlamaServer(parallel=1, ctx_per_slot=2048, log=str(tmp_path / "server.log"))
    else:
        srv = LocalServer(bos=False, log=str(tmp_path / "server.log"))
    with srv:
        lm = EndpointLM(srv.alias, srv.base_url, cache=Cache(tmp_path / "calls.sqlite", table="lm"), backoff=0.2)
        killer = _kill_when_busy(srv.process.pid, srv.port)
        started = time.monotonic()
        with pytest.raises(EndpointError) as caught:
            lm.generate(["word " * 1500], max_new_tokens=64, progress=False)
        killer.join()
        message = str(caught.value)
        assert f"{srv.label} at {srv.base_url} died (killed by signal 11, SIGSEGV: a crash in the server's native " \
               "code" in message, message
        assert f"the end of its log {tmp_path / 'server.log'}:\n  | " in message  # the log's last lines, quoted
        assert lm.requests_sent == 1 and time.monotonic() - started < 60
    assert (tmp_path / "server.log").exists()


@pytest.mark.server
def test_a_server_that_dies_or_hangs_while_starting_says_how(tmp_path):
    """The same words when the process ends before it answers: its exit status and its log's last lines. The log
    covlib made is kept then, and when a server never answers; a cleanly stopped server's is removed."""
    class Broken(LocalServer):
        def command(self) -> list[str]:
            return [sys.executable, "-c", "import sys; print('loading the model'); sys.exit('model file is corrupt')"]

    class Silent(LocalServer):  # runs, never answers
        def command(self) -> list[str]:
            return [sys.executable, "-c", "import time; print('waiting for a GPU', flush=True); time.sleep(60)"]

    srv = Broken(gguf=str(tmp_path / "none.gguf"))
    with pytest.raises(RuntimeError, match=r"died while starting \(exit code 1\); the end of its log .*\n  \| loading "
                                           r"the model\n  \| model file is corrupt$"):
        srv.start()
    assert Path(srv.log).exists() and srv.process is None
    Path(srv.log).unlink()
    silent = Silent(gguf=str(tmp_path / "none.gguf"))
    with pytest.raises(RuntimeError, match=r"did not answer at .* within 1 s; its log: "):
        silent.start(wait_s=1)
    assert "waiting for a GPU" in Path(silent.log).read_text() and silent.process is None  # stopped, its log kept
    Path(silent.log).unlink()
    with LocalServer(bos=False) as clean:  # no log named: covlib's own, removed on a clean stop
        log = Path(clean.log)
        assert log.exists()
    assert not log.exists()
