"""llama-cpp-python's OpenAI-compatible server on the embedded model, started and stopped by covlib.

Two llama.cpp servers on the embedded SmolLM2 GGUF, on 127.0.0.1, each a context manager whose `spec` is what
`load_lm` takes (`with LocalServer() as srv: load_lm(srv.spec)`):

* `LocalServer`: llama-cpp-python's server (`python -m llama_cpp.server`, the `serve` extra; what `make serve` runs).
  It decodes one request at a time, and echoes prompt log-probabilities, so the HTTP backend's `score` works.
* `LlamaServer`: llama.cpp's own `llama-server`, built once per machine into `llama_server_dir()` (under
  `paths.machine_cache_dir()`, shared by every clone, as pip's wheel cache is) by
  `make llama-server` (`scripts/build_llama_server.py`: the llama.cpp vendored in the same llama-cpp-python sdist,
  linked against the libllama and libggml the installed wheel ships; 150-160 s on 2 cores). Its `parallel` slots
  decode concurrent requests in one batch (continuous batching). On 2 cores that gains little: CoT-SC at
  concurrency 8 ran 1.2-1.4x as fast as at concurrency 1, as llama.cpp's decode step itself is only 1.6-1.7x as
  fast per token at batch 8 there (docs/benchmarks.md, "The served path against llama-server").
  It generates (raw text and chat, seeded sampling, stop strings) but cannot `score`: it ignores `echo`, so no
  prompt log-probabilities come back and the HTTP backend's `score` raises `EndpointError`. On /v1/completions it
  returns the generated tokens' log-probabilities in the chat format (`logprobs.content`), which the HTTP backend
  reads wherever it finds it.

`python -m covlib.generation.server --port 8080 [--llama-server --parallel 8]` is what
`make serve [SERVER=llama-server]` runs.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from covlib.core import paths
from covlib.generation.embedded import embedded_gguf
from covlib.generation.http import watch_server
from covlib.generation.spec import ENDPOINT_PREFIX

LLAMA_SERVER_BINARY = "llama-server"
LOG_TAIL_LINES = 12  # the lines of a dead server's log its error quotes
# instructions past x86-64-v3 (AVX2, FMA, F16C, BMI2), which `make env` builds llama.cpp for, by the extension that
# adds them: objdump's mnemonics for AMX and AVX-VNNI; AVX-512 by its EVEX prefix (0x62 opens every EVEX instruction
# in 64-bit mode, after optional address-size or segment prefixes)
UNPORTABLE = (("AMX", re.compile(r"\t(?:ldtilecfg|sttilecfg|tile|tdp|tcmm|tmmul|t2rp|ttdp|tcvtrow)")),
              ("AVX-512", re.compile(r":\t(?:(?:26|2e|36|3e|64|65|67) )*62 ")),
              ("AVX-VNNI", re.compile(r"\t(?:\{vex\} )?(?:vpdp[bw][su][su]ds?|vpmadd52)")))
CLEAN_STOP = (0, -signal.SIGTERM, -signal.SIGKILL, -signal.SIGINT)  # how a server covlib stopped (or Ctrl-C) ends


class LocalServer:
    """llama-cpp-python's OpenAI-compatible server on 127.0.0.1, started and stopped by covlib (tests, benchmarks,
    `make serve`); `spec` is what `load_lm` takes. Use as a context manager.

    With no `gguf`, it serves the embedded SmolLM2 with a BOS token added to every prompt (`bos=True`):
    llama-cpp-python 0.3.36 returns correct echoed log-probabilities, which `score` needs, only for models that
    add one. `bos=False` serves the file exactly as shipped (what the in-process LM computes on)."""

    def __init__(self, gguf: str | None = None, alias: str | None = None, port: int = 0, n_ctx: int = 2048,
                 threads: int | None = None, log: str | None = None, bos: bool = True):
        self.gguf, self.n_ctx = gguf or embedded_gguf(bos=bos), n_ctx
        # the served name enters cache keys: the embedded file with or without BOS, or a GGUF file's own name
        self.alias = alias or (("smollm2-bos" if bos else "smollm2") if gguf is None else Path(gguf).stem)
        self.port = port or free_port()
        self.threads = threads or max(1, (os.cpu_count() or 2))
        self.log = log
        self.process = None
        self.own_log = False  # a log file covlib made (no `log` given): removed on a clean stop, kept when it died
        self.stopping = False  # stop() has begun: the end that follows is not a death
        self.label = "the llama.cpp server (llama-cpp-python)"

    @property
    def base_url(self) -> str:
        """http://127.0.0.1:<port>/v1"""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def spec(self) -> str:
        """openai:<alias>@<base_url>"""
        return f"{ENDPOINT_PREFIX}{self.alias}@{self.base_url}"

    def command(self) -> list[str]:
        """The command line that starts the server."""
        try:
            import llama_cpp.server  # noqa: F401
        except ImportError as err:
            raise RuntimeError("llama-cpp-python's server is not installed: `pip install 'llama-cpp-python[server]'` "
                               "(part of `make env`)") from err
        return [sys.executable, "-m", "llama_cpp.server", "--model", self.gguf, "--model_alias", self.alias,
                "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", str(self.n_ctx),
                "--n_threads", str(self.threads), "--n_threads_batch", str(self.threads)]

    def start(self, wait_s: float = 120.0) -> "LocalServer":
        """Start the server and wait until /v1/models answers."""
        import httpx

        command = self.command()
        if not self.log:
            fd, self.log = tempfile.mkstemp(prefix="covlib-server-", suffix=".log")
            os.close(fd)
            self.own_log = True
        self.stopping = False
        try:
            with open(self.log, "ab") as out:  # unbuffered: a crash loses none of a Python server's last lines
                self.process = subprocess.Popen(command, stdout=out, stderr=out,
                                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise RuntimeError(self.gone(when=" while starting"))
                try:
                    if httpx.get(f"{self.base_url}/models", timeout=2).status_code == 200:
                        watch_server(self.base_url, self.gone)
                        return self
                except httpx.TransportError:
                    pass
                time.sleep(0.3)
            self.own_log = False  # kept: it is what tells why the server never answered
            raise RuntimeError(f"{self.label} did not answer at {self.base_url} within {wait_s:g} s; its log: "
                               f"{self.log}")
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop the server; the log covlib made for it is removed unless the server had died."""
        proc, self.stopping = self.process, True
        watch_server(self.base_url, self.gone, watch=False)
        died = False
        if proc is not None:
            ended_before = proc.poll() is not None
            if not ended_before:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            # Ctrl-C reaches a `make serve` server too, which may end before this looks
            died = (ended_before and proc.returncode not in (0, -signal.SIGINT)) or proc.returncode not in CLEAN_STOP
        if self.own_log and not died:
            Path(self.log).unlink(missing_ok=True)
            self.log = None  # a later start() makes a new one
        self.own_log = False  # a kept log is the user's now: a second stop() leaves it
        self.process = None

    def gone(self, wait_s: float = 1.0, when: str = "") -> str | None:
        """Why the server is not running: how its process ended and the last lines of its log; None while it runs.
        Waits up to `wait_s` for a process whose sockets closed as it died to be reaped."""
        proc = self.process
        if proc is None or self.stopping:
            return None
        try:
            code = proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            return None
        try:
            with open(self.log, "rb") as f:
                f.seek(max(0, f.seek(0, os.SEEK_END) - 16384))
                lines = f.read().decode("utf-8", "replace").splitlines()[-LOG_TAIL_LINES:]
        except OSError:
            lines = []
        tail = "".join(f"\n  | {line}" for line in lines) if lines else " (empty)"
        return f"{self.label} at {self.base_url} died{when} ({exit_reason(code)}); the end of its log {self.log}:{tail}"

    def __enter__(self) -> "LocalServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class LlamaServer(LocalServer):
    """llama.cpp's own `llama-server` on 127.0.0.1 with `parallel` slots and continuous batching: concurrent requests
    decode in one batch. Built by `make llama-server`; `binary` overrides the built one. Use as a context manager.

    It serves the embedded GGUF as shipped (no BOS token; alias `smollm2`) with `ctx_per_slot` tokens of context per
    slot. `generate` works against it; `score` does not (no echoed prompt log-probabilities: the HTTP backend raises
    `EndpointError`; see the module's docstring)."""

    def __init__(self, gguf: str | None = None, alias: str | None = None, port: int = 0, parallel: int = 8,
                 ctx_per_slot: int = 2048, threads: int | None = None, log: str | None = None,
                 binary: str | Path | None = None):
        if parallel < 1 or ctx_per_slot < 64:
            raise ValueError(f"need parallel >= 1 and ctx_per_slot >= 64, got {parallel}, {ctx_per_slot}")
        super().__init__(gguf, alias=alias, port=port, n_ctx=parallel * ctx_per_slot, threads=threads, log=log,
                         bos=False)
        self.parallel, self.ctx_per_slot = parallel, ctx_per_slot
        self.binary = Path(binary) if binary is not None else None
        self.label = f"llama-server (--parallel {parallel})"

    def command(self) -> list[str]:
        """The command line that starts llama-server: `parallel` slots of `ctx_per_slot` tokens, continuous batching,
        sampling from the whole distribution (no top-k 40 or min-p 0.05 of its own: as the in-process LM, vLLM)."""
        binary = self.binary or llama_server_binary()
        return [str(binary), "--model", self.gguf, "--alias", self.alias, "--host", "127.0.0.1",
                "--port", str(self.port), "--ctx-size", str(self.n_ctx), "--parallel", str(self.parallel),
                "--no-kv-unified", "--cont-batching", "--threads", str(self.threads),
                "--threads-batch", str(self.threads), "--no-webui", "--top-k", "0", "--min-p", "0"]


def exit_reason(code: int) -> str:
    """A process's exit status in words; a crash (SIGILL, SIGSEGV, SIGBUS) names what commonly causes it."""
    if code >= 0:
        return f"exit code {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = "unknown signal"
    crash = -code in (signal.SIGILL, signal.SIGSEGV, signal.SIGBUS)
    why = (": a crash in the server's native code, such as an instruction this CPU or virtual machine does not run "
           "(docs/scale_out.md, 'When a served model dies')")
    return f"killed by signal {-code}, {name}" + (why if crash else "")


def unportable_instructions(library: str | Path) -> dict[str, int]:
    """How many instructions of each extension past x86-64-v3 (AMX, AVX-512, AVX-VNNI) a shared library holds, by
    `objdump -d`: {} for the portable build `make env` makes."""
    try:
        listing = subprocess.run(["objdump", "-d", "-w", str(library)], capture_output=True, text=True,
                                 check=True).stdout
    except FileNotFoundError as err:
        raise RuntimeError("objdump is needed to read a library's instructions: apt-get install binutils") from err
    found = (next((name for name, pattern in UNPORTABLE if pattern.search(line)), None)
             for line in listing.splitlines())
    return dict(Counter(name for name in found if name))


def llama_cpp_version() -> str:
    """The installed llama-cpp-python's version: llama-server is built from the llama.cpp it vendors."""
    try:
        return importlib.metadata.version("llama-cpp-python")
    except importlib.metadata.PackageNotFoundError as err:
        raise RuntimeError("llama-cpp-python is not installed (the `serve` extra; `make env`), and llama-server is "
                           "built from, and links, what it ships") from err


def llama_server_dir(version: str | None = None) -> Path:
    """Where `make llama-server` puts llama-server for llama-cpp-python `version` (default: the installed one), once
    per machine: <machine cache>/llama.cpp/llama-server-<version>/."""
    return paths.machine_cache_dir() / "llama.cpp" / f"llama-server-{version or llama_cpp_version()}"


def llama_server_binary() -> Path:
    """The built llama-server; a RuntimeError naming `make llama-server` when it is not built."""
    binary = llama_server_dir() / LLAMA_SERVER_BINARY
    if not binary.is_file():
        raise RuntimeError(f"llama-server is not built ({binary} is missing): run `make llama-server` (or `python "
                           "scripts/build_llama_server.py`), which builds it once from llama-cpp-python's vendored "
                           "llama.cpp in a few minutes")
    return binary


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cli() -> None:  # `python -m covlib.generation.server --port 8080` (what `make serve` runs)
    import argparse

    ap = argparse.ArgumentParser(description="Serve a GGUF model (default: the embedded SmolLM2) over an "
                                 "OpenAI-compatible API with llama-cpp-python, or llama.cpp's llama-server with "
                                 "--llama-server, until Ctrl-C.")
    ap.add_argument("--port", type=int, default=8080)
    ap.add_argument("--gguf", default=None, help="a GGUF file (default: the embedded SmolLM2-135M-Instruct)")
    ap.add_argument("--alias", default=None, help="the model name clients ask for (default: smollm2-bos, "
                    "smollm2 with --no-bos or --llama-server, or the GGUF file's name)")
    ap.add_argument("--n-ctx", type=int, default=2048, help="context tokens (per slot with --llama-server)")
    ap.add_argument("--no-bos", action="store_true", help="serve the embedded GGUF as shipped (score() is refused)")
    ap.add_argument("--llama-server", action="store_true", help="serve with llama.cpp's llama-server (`make "
                    "llama-server` builds it): concurrent requests batched; generate only, no score()")
    ap.add_argument("--parallel", type=int, default=8, help="llama-server's slots (requests decoded together)")
    args = ap.parse_args()
    if args.llama_server:
        srv = LlamaServer(args.gguf, alias=args.alias, port=args.port, parallel=args.parallel, ctx_per_slot=args.n_ctx)
    else:
        srv = LocalServer(args.gguf, alias=args.alias, port=args.port, n_ctx=args.n_ctx, bos=not args.no_bos)
    with srv:
        print(f"serving {srv.gguf} at {srv.base_url}\nuse it: make reproduce MODEL={srv.spec}", flush=True)
        try:
            srv.process.wait()
        except KeyboardInterrupt:
            return
        raise SystemExit(srv.gone())


if __name__ == "__main__":
    _cli()
