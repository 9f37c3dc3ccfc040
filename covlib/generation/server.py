"""llama-cpp-python's OpenAI-compatible server on the embedded model, started and stopped by covlib.

`python -m covlib.generation.server --port 8080` is what `make serve` runs; tests and benchmarks use
`with LocalServer() as srv: load_lm(srv.spec)`.
"""

from __future__ import annotations

import os
import time
from typing import Any

from covlib.generation.embedded import embedded_gguf
from covlib.generation.spec import ENDPOINT_PREFIX


class LocalServer:
    """llama-cpp-python's OpenAI-compatible server on 127.0.0.1, started and stopped by covlib (tests, benchmarks,
    `make serve`); `spec` is what `load_lm` takes. Use as a context manager.

    With no `gguf`, it serves the embedded SmolLM2 with a BOS token added to every prompt (`bos=True`):
    llama-cpp-python 0.3.36 returns correct echoed log-probabilities, which `score` needs, only for models that
    add one. `bos=False` serves the file exactly as shipped (what the in-process LM computes on)."""

    def __init__(self, gguf: str | None = None, alias: str | None = None, port: int = 0, n_ctx: int = 2048,
                 threads: int | None = None, log: str | None = None, bos: bool = True):
        from pathlib import Path

        self.gguf, self.n_ctx = gguf or embedded_gguf(bos=bos), n_ctx
        # the served name enters cache keys: the embedded file with or without BOS, or a GGUF file's own name
        self.alias = alias or (("smollm2-bos" if bos else "smollm2") if gguf is None else Path(gguf).stem)
        self.port = port or free_port()
        self.threads = threads or max(1, (os.cpu_count() or 2))
        self.log = log
        self.process = None

    @property
    def base_url(self) -> str:
        """http://127.0.0.1:<port>/v1"""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def spec(self) -> str:
        """openai:<alias>@<base_url>"""
        return f"{ENDPOINT_PREFIX}{self.alias}@{self.base_url}"

    def start(self, wait_s: float = 120.0) -> "LocalServer":
        """Start the server and wait until /v1/models answers."""
        import subprocess
        import sys

        import httpx

        try:
            import llama_cpp.server  # noqa: F401
        except ImportError as err:
            raise RuntimeError("llama-cpp-python's server is not installed: `pip install 'llama-cpp-python[server]'` "
                               "(part of `make env`)") from err
        out = open(self.log, "ab") if self.log else subprocess.DEVNULL
        self.process = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", self.gguf, "--model_alias", self.alias,
             "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", str(self.n_ctx),
             "--n_threads", str(self.threads), "--n_threads_batch", str(self.threads)],
            stdout=out, stderr=out)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the llama.cpp server exited with code {self.process.returncode} at start"
                                   + (f"; see {self.log}" if self.log else ""))
            try:
                if httpx.get(f"{self.base_url}/models", timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"the llama.cpp server did not answer at {self.base_url} within {wait_s:g} s")

    def stop(self) -> None:
        """Stop the server."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except Exception:
                self.process.kill()
        self.process = None

    def __enter__(self) -> "LocalServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cli() -> None:  # `python -m covlib.generation.server --port 8080` (what `make serve` runs)
    import argparse

    ap = argparse.ArgumentParser(description="Serve a GGUF model (default: the embedded SmolLM2) over an "
                                 "OpenAI-compatible API with llama-cpp-python, until Ctrl-C.")
    ap.add_argument("--port", type=int, default=8080)
    ap.add_argument("--gguf", default=None, help="a GGUF file (default: the embedded SmolLM2-135M-Instruct)")
    ap.add_argument("--alias", default=None, help="the model name clients ask for (default: smollm2-bos, "
                    "smollm2 with --no-bos, or the GGUF file's name)")
    ap.add_argument("--n-ctx", type=int, default=2048)
    ap.add_argument("--no-bos", action="store_true", help="serve the embedded GGUF as shipped (score() is refused)")
    args = ap.parse_args()
    with LocalServer(args.gguf, alias=args.alias, port=args.port, n_ctx=args.n_ctx, bos=not args.no_bos) as srv:
        print(f"serving {srv.gguf} at {srv.base_url}\nuse it: make reproduce MODEL={srv.spec}", flush=True)
        try:
            srv.process.wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    _cli()
