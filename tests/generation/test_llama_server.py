"""The HTTP backend (covlib.generation.endpoint) against the tests' second real server: llama.cpp's own `llama-server`
(`covlib.generation.server.LlamaServer`), which decodes concurrent requests in one batch (`--parallel` slots,
continuous batching), serving the embedded SmolLM2-135M-Instruct GGUF on 127.0.0.1.

The binary is built once per machine by `make llama-server` (which `make test` runs first); the fixture builds it the
same way, with `scripts/build_llama_server.py`, when it is missing.
"""

from __future__ import annotations

import math
import subprocess
import sys
import threading

import httpx
import pytest

from covlib.core import paths
from covlib.core.cache import Cache
from covlib.generation.endpoint import EndpointError, EndpointLM
from covlib.generation.server import LLAMA_SERVER_BINARY, LlamaServer, llama_server_dir
from server_prompts import PROMPTS

PARALLEL = 4


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory):
    """llama-server with PARALLEL slots of 1,024 tokens on the embedded GGUF as shipped; built first when missing."""
    if not (llama_server_dir() / LLAMA_SERVER_BINARY).is_file():
        subprocess.run([sys.executable, str(paths.code_root() / "scripts" / "build_llama_server.py")], check=True)
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    with LlamaServer(parallel=PARALLEL, ctx_per_slot=1024, log=str(log)) as srv:
        yield srv


def _client(srv: LlamaServer, tmp_path, name: str = "calls", **options) -> EndpointLM:
    return EndpointLM(srv.alias, srv.base_url, cache=Cache(tmp_path / f"{name}.sqlite", table="lm"), **options)


@pytest.mark.server
def test_greedy_generation_repeats_and_raw_completions_carry_logprobs(llama_server, tmp_path):
    """llama-server returns /v1/completions log-probabilities in the chat format (logprobs.content); the HTTP backend
    reads them there too, so raw completions come back with a log-probability per token."""
    first = _client(llama_server, tmp_path, "a").generate(PROMPTS, max_new_tokens=16, progress=False)
    again = _client(llama_server, tmp_path, "b").generate(PROMPTS, max_new_tokens=16, progress=False)
    assert [c.text for (c,) in first] == [c.text for (c,) in again]  # greedy: the same text, request after request
    assert all(c.text and c.finish_reason in ("stop", "length") for (c,) in first)
    assert all(len(c.tokens) == len(c.token_logprobs) > 0 and "".join(c.tokens) == c.text for (c,) in first)
    assert all(math.isfinite(x) and x <= 0 for (c,) in first for x in c.token_logprobs)
    assert first[0][0].text.startswith(" Paris")


@pytest.mark.server
def test_sampling_repeats_per_seed(llama_server, tmp_path):
    kw = dict(n=3, temperature=0.9, max_new_tokens=10, progress=False)
    texts = lambda runs: [[c.text for c in row] for row in runs]  # noqa: E731
    first = _client(llama_server, tmp_path, "a", concurrency=3).generate(PROMPTS[:3], seed=1, **kw)
    again = _client(llama_server, tmp_path, "b", concurrency=3).generate(PROMPTS[:3], seed=1, **kw)
    other = _client(llama_server, tmp_path, "c", concurrency=3).generate(PROMPTS[:3], seed=2, **kw)
    assert texts(first) == texts(again) and texts(first) != texts(other)
    assert any(len(set(row)) > 1 for row in texts(first))  # the n samples differ from each other


@pytest.mark.server
def test_stop_strings_and_chat_with_logprobs(llama_server, tmp_path):
    lm = _client(llama_server, tmp_path)
    (c,), = lm.generate(["Question: Who wrote Hamlet?\nAnswer:"], max_new_tokens=24, stop="\n", progress=False)
    assert c.text.strip() and "\n" not in c.text and c.finish_reason == "stop"
    (c,), = lm.generate(["What is 2+2? Answer in one sentence."], max_new_tokens=12, chat=True, progress=False)
    assert c.text and len(c.tokens) == len(c.token_logprobs) > 0  # chat replies: logprobs.content, read
    assert all(math.isfinite(x) and x <= 0 for x in c.token_logprobs) and "".join(c.tokens) == c.text


@pytest.mark.server
def test_concurrent_requests_decode_together_and_keep_most_greedy_texts(llama_server, tmp_path):
    """Concurrency PARALLEL: the slots decode together (seen on /slots mid-run). Batched matrix products round
    differently from one request's, so a greedy text may part from the sequential one once two tokens come close;
    measured on these 8 prompts x 24 tokens: 8 of 8 equal in each of 5 runs (on 6-shot CoT prompts x 128 tokens at
    8 slots, 9 and 11 of 16: make bench, 7c)."""
    busy, done = [], threading.Event()

    def watch():
        while not done.is_set():
            slots = httpx.get(f"{llama_server.base_url.removesuffix('/v1')}/slots", timeout=5).json()
            busy.append(sum(s["is_processing"] for s in slots))
            done.wait(0.05)

    sequential = _client(llama_server, tmp_path, "c1", concurrency=1).generate(PROMPTS, max_new_tokens=24,
                                                                               progress=False)
    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        batched = _client(llama_server, tmp_path, "cN", concurrency=PARALLEL).generate(PROMPTS, max_new_tokens=24,
                                                                                       progress=False)
    finally:
        done.set()
        watcher.join()
    assert max(busy) >= 2, busy  # requests were in the slots at once
    same = sum(a.text == b.text for (a,), (b,) in zip(sequential, batched))
    assert same >= 6, [(a.text, b.text) for (a,), (b,) in zip(sequential, batched)]  # measured 8 of 8
    assert all(a.text.split()[:2] == b.text.split()[:2] for (a,), (b,) in zip(sequential, batched))


@pytest.mark.server
def test_score_is_refused_and_a_too_long_prompt_rejected(llama_server, tmp_path):
    """llama-server ignores `echo`: no prompt log-probabilities, so `score` raises instead of returning nothing."""
    lm = _client(llama_server, tmp_path, backoff=0.01)
    with pytest.raises(EndpointError, match="answer log-prob needs prompt log-probabilities .*does not return them"):
        lm.score(["The capital of France is"], [" Paris"], progress=False, desc="answer log-prob")
    sent = lm.requests_sent
    with pytest.raises(EndpointError, match=r"rejected the request \(HTTP 400: .*exceeds the available context size"):
        lm.generate(["word " * 1500], max_new_tokens=4, progress=False)  # longer than a slot's 1,024 tokens
    assert lm.requests_sent == sent + 1  # not retried


def test_a_missing_binary_names_the_make_target(tmp_path, monkeypatch):
    monkeypatch.setenv("COVLIB_MACHINE_CACHE", str(tmp_path / "machine"))
    with pytest.raises(RuntimeError, match=r"llama-server is not built .*run `make llama-server`"):
        LlamaServer().start()
    with pytest.raises(ValueError, match="parallel >= 1"):
        LlamaServer(parallel=0)
