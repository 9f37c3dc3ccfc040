"""The HTTP backend: any OpenAI-compatible server behind the same `Generator` interface as the in-process LM.

`load_lm("openai:<model>@<base_url>")` talks to `vllm serve`, llama.cpp's server, llama-cpp-python's
server, SGLang, `transformers serve` or a hosted API:

* `generate` sends one request per prompt and sample (`n` samples are `n` requests, each with its own
  seed `lm.sample_seed(seed, prompt, i)`, so sampled runs repeat on servers that honour `seed`);
  raw prompts go to `/completions`, `chat=True` to `/chat/completions`; per-token log-probabilities
  are asked for (`logprobs`) and kept as the server reports them.
* `score` reads prompt log-probabilities back from `/completions` with `echo=true` (vLLM,
  llama-cpp-python); a server that does not return them gets an `EndpointError` naming the caller.
* At most `concurrency` requests are in flight (threads); each finished completion is committed to
  the cache as it arrives, so a killed run re-sends only what is missing.
* 429, 5xx, timeouts and dropped connections are retried with exponential backoff (`Retry-After`
  honoured); anything else raises `EndpointError` with the URL, the status and the server's message.
* The API key comes from `COVLIB_API_KEY` or `OPENAI_API_KEY` at request time (surrounding whitespace, such
  as the `\\r` of a CRLF `.env` file, stripped); it is never stored, never part of a name, a cache key or a
  recorded result. Each key goes only to its own servers: `OPENAI_API_KEY` to https://api.openai.com and to
  base URLs starting with a prefix listed (comma-separated) in `COVLIB_API_KEY_URL`, and it wins there;
  `COVLIB_API_KEY` to the configured server otherwise, never to api.openai.com unless listed there too.
* Each attempt has a deadline `timeout` seconds after it is sent (`COVLIB_REQUEST_TIMEOUT`, default 300 s; a
  server trickling its reply's body is cut off at the first bytes past it; its headers are held only to the
  silence limit, `timeout` a read), then is retried; the error names the setting.
* A reply must hold exactly one choice with index 0 (every request asks for n=1), fields of the types read
  (`http.completion_fields`), finite log-probabilities, no more tokens than asked, and no more bytes than
  `http.reply_limit`; anything else is refused before it is cached.

Cache keys hold the backend, the served model and the base URL: the same model name on another server
does not collide.
"""

from __future__ import annotations

import json
import math
import os
import random
import threading
import time
import warnings
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import asdict
from typing import Any, Callable, Iterator, Sequence

from covlib.core import paths
from covlib.core.cache import Cache, make_key
from covlib.generation.base import Completion, first_stop, sample_seed
from covlib.generation.cached import CachedGenerator
from covlib.generation.http import (NUMBER, TOKEN_CHARS, EndpointError, Stopped, api_key, completion_fields,
                                    only_choice, read_body, reply_limit, request_timeout, retryable, server_gone,
                                    server_message, typed)
from covlib.generation.spec import ENDPOINT_PREFIX, parse_spec

DEFAULT_CONCURRENCY = 8

class EndpointLM(CachedGenerator):
    """An OpenAI-compatible server as a `covlib.generation.base.Generator`; build it with `load_lm("openai:<model>@<url>")`."""

    def __init__(self, model: str, base_url: str, *, concurrency: int | None = None, timeout: float | None = None,
                 retries: int = 5, backoff: float = 1.0, cache: Cache | None = None):
        concurrency = concurrency or int(os.environ.get("COVLIB_CONCURRENCY", DEFAULT_CONCURRENCY))
        timeout = request_timeout(timeout)
        if concurrency < 1 or retries < 0 or not (timeout > 0 and math.isfinite(timeout)):
            raise ValueError(f"need concurrency >= 1, retries >= 0 and timeout > 0, got {concurrency}, {retries}, "
                             f"{timeout}")
        self.served_model, self.base_url = model, base_url.rstrip("/")
        self.name = f"{ENDPOINT_PREFIX}{model}@{self.base_url}"
        self.concurrency, self.timeout, self.retries, self.backoff = concurrency, timeout, retries, backoff
        self.cache = cache if cache is not None else Cache(paths.cache_dir() / "calls.sqlite", table="lm")
        self.requests_sent = 0  # HTTP requests made by this object, retries included (tests, benchmarks)
        self._lock = threading.Lock()
        self._client = None
        self._warned: set[str] = set()
        self._echo_checked = False
        self._run_state = threading.local()  # per worker thread: the Event that stops its run

    @classmethod
    def from_spec(cls, spec: str, **options: Any) -> "EndpointLM":
        """The backend for `openai:<model>@<base_url>`."""
        model, url = parse_spec(spec)
        return cls(model, url, **options)

    def __repr__(self) -> str:
        return f"EndpointLM({self.name!r}, concurrency={self.concurrency})"

    # ------------------------------------------------------------------ HTTP
    def _http(self):
        with self._lock:  # the worker threads share one client (one connection pool)
            if self._client is None:
                import httpx

                self._client = httpx.Client(timeout=httpx.Timeout(self.timeout, connect=min(10.0, self.timeout)),
                                            limits=httpx.Limits(max_connections=self.concurrency))
            return self._client

    def _headers(self) -> dict[str, str]:
        key = api_key(self.base_url)  # each key only to its own servers: never the local one's to OpenAI
        return {"Authorization": f"Bearer {key}"} if key else {}

    def post(self, route: str, payload: dict[str, Any]) -> dict[str, Any]:
        """POST `payload` to `<base_url>/<route>` and return the JSON reply, retrying what may pass; each attempt
        reads at most `reply_limit(payload)` bytes, for at most `timeout` seconds from sending."""
        import httpx

        url, limit = f"{self.base_url}/{route}", reply_limit(payload)
        last = ""
        for attempt in range(self.retries + 1):
            stop = getattr(self._run_state, "stop", None)
            if stop is not None and stop.is_set():  # another request of this run failed: do not start or retry
                raise Stopped(f"{url}: not sent, the run stopped on an earlier error")
            wait_s = min(60.0, self.backoff * 2 ** attempt) * (0.5 + random.random() / 2)
            with self._lock:
                self.requests_sent += 1
            deadline = time.monotonic() + self.timeout
            try:
                with self._http().stream("POST", url, json=payload, headers=self._headers()) as reply:
                    body = read_body(reply, url, limit, deadline)  # a trickling server is cut off at the deadline
            except (httpx.TimeoutException, TimeoutError) as err:
                last = (f"no answer within {self.timeout:g} s ({type(err).__name__}: {err}; set COVLIB_REQUEST_TIMEOUT "
                        "or the timeout= option, in seconds, to wait longer)")
            except httpx.TransportError as err:
                gone = server_gone(self.base_url)  # a server this process started has died: say how, do not retry
                if gone is not None:
                    raise EndpointError(f"{url}: {gone}") from None
                refused = isinstance(err, httpx.ConnectError)
                last = (f"cannot connect ({err}): is the server running at {self.base_url}?" if refused
                        else f"connection failed ({type(err).__name__}: {err})")
            else:
                if reply.status_code == 200:
                    try:
                        return json.loads(body)
                    except ValueError:
                        raise EndpointError(f"{url}: malformed response (HTTP 200 but not JSON): "
                                            f"{body[:200].decode(errors='replace')!r}") from None
                last = f"HTTP {reply.status_code}: {server_message(body, reply.reason_phrase)}"
                if not retryable(reply.status_code):
                    raise EndpointError(f"{url} rejected the request ({last}); model {self.served_model!r}")
                after = reply.headers.get("retry-after", "")
                wait_s = min(float(after), 300.0) if after.replace(".", "", 1).isdigit() else wait_s
            if attempt < self.retries:
                time.sleep(wait_s)
        raise EndpointError(f"{url}: gave up after {self.retries + 1} attempts: {last}")

    # ------------------------------------------------------------- generation
    def _key(self, kind: str, **parts: Any) -> str:
        return make_key(kind=kind, backend="openai", model=self.served_model, base_url=self.base_url, **parts)

    def _generate_keys(self, prompts: list[str], n_distinct: int, decoding: dict, chat: bool) -> list[list[str]]:
        return [[self._key("generate", chat=chat, prompt=p, sample=i, **decoding) for i in range(n_distinct)]
                for p in prompts]

    def _generate_missing(self, todo: dict[str, tuple[str, int]], samples: dict[str, list[str]], decoding: dict,
                          chat: bool, progress: bool, desc: str) -> Iterator[dict[str, Any]]:
        return self._run(todo, lambda job: asdict(self._complete(job[0], job[1], decoding, chat)), progress, desc)

    def _run(self, todo: dict[str, Any], work: Callable[[Any], Any], progress: bool,
             desc: str) -> Iterator[dict[str, Any]]:
        """`work(job)` for every job, `concurrency` at a time; each result is yielded as {key: result} as it arrives
        (`cached_batch` commits it). On the first error, requests not yet sent are cancelled, those in flight finish
        (their results kept), and the error is raised."""
        from tqdm.auto import tqdm

        bar = tqdm(total=len(todo), desc=desc, disable=not progress, unit="request")
        pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="covlib-endpoint")
        stop = threading.Event()  # this run's: set on its first error
        error: BaseException | None = None

        def guarded(job: Any) -> Any:
            self._run_state.stop = stop
            try:
                return work(job)
            except BaseException:
                stop.set()  # at once, in the worker: no other request of this run starts after it
                raise

        try:
            pending = {pool.submit(guarded, job): key for key, job in todo.items()}
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    key = pending.pop(future)
                    if future.cancelled():
                        continue
                    if future.exception() is not None:
                        if error is None or isinstance(error, Stopped):  # raise the error that stopped the run
                            error = future.exception()
                        continue
                    yield {key: future.result()}  # committed before the next: a crash after this loses nothing
                    bar.update(1)
                if error is not None:  # in-flight requests finish (kept); the rest are not sent
                    for future in pending:
                        future.cancel()
        except BaseException:  # Ctrl-C: stop sending, keep what is committed
            stop.set()
            raise
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
            bar.close()
        if error is not None:
            raise error

    def _complete(self, prompt: str, sample: int, decoding: dict[str, Any], chat: bool) -> Completion:
        payload: dict[str, Any] = {"model": self.served_model, "max_tokens": decoding["max_new_tokens"],
                                   "temperature": decoding["temperature"], "top_p": decoding["top_p"], "n": 1}
        if decoding["stop"]:
            payload["stop"] = decoding["stop"]
        if decoding["temperature"] > 0:
            payload["seed"] = sample_seed(decoding["seed"], prompt, sample) & 0x7FFFFFFF  # 31 bits: every server
        if chat:
            payload.update(messages=[{"role": "user", "content": prompt}], logprobs=True, top_logprobs=1)
            reply = self.post("chat/completions", payload)
        else:
            payload.update(prompt=prompt, logprobs=1)
            reply = self.post("completions", payload)
        return self._completion(reply, chat, decoding["stop"], decoding["max_new_tokens"])

    def _completion(self, reply: dict[str, Any], chat: bool, stops: list[str], asked: int) -> Completion:
        url = f"{self.base_url}/{'chat/completions' if chat else 'completions'}"
        try:
            text, tokens, values, reason, used = completion_fields(reply, chat)
        except (IndexError, TypeError, ValueError, OverflowError) as err:
            raise EndpointError(f"{url}: malformed response ({type(err).__name__}: {err}): "
                                f"{str(reply)[:300]}") from None
        if used > asked or len(text) > TOKEN_CHARS * asked:
            got = (f"{used} tokens (usage.completion_tokens or the tokens listed)" if used > asked else
                   f"{len(text):,} characters (more than {TOKEN_CHARS} a token asked)")
            raise EndpointError(f"{url}: a reply of {got} to max_tokens={asked}; refused, nothing cached: the server "
                                "does not honour max_tokens (check it, and any proxy in front of it)")
        field = "choices[0].logprobs.content[].logprob" if chat else "choices[0].logprobs.token_logprobs"
        bad = next((i for i, v in enumerate(values) if not math.isfinite(v)), None)
        if bad is not None:
            raise EndpointError(f"{url}: non-finite log-probability {values[bad]} in {field}[{bad}] "
                                f"(token {tokens[bad]!r}); refused, nothing cached")
        if not tokens and text:
            self._warn_once("logprobs", f"{self.base_url} returned no log-probabilities: Completion.token_logprobs "
                            "are empty (self-consistency weights and answer log-probabilities need them)")
        cut = first_stop(text, stops)
        if cut is not None:  # a server that ignored a stop string: cut as the in-process LM does
            text, reason = text[:cut], "stop"
        kept, length = 0, 0
        while kept < len(tokens) and length < len(text):  # the tokens that make the text (servers may add the stop's)
            length += len(tokens[kept])
            kept += 1
        if length >= len(text):
            tokens, values = tokens[:kept], values[:kept]
        return Completion(text=text, tokens=[str(t) for t in tokens], token_logprobs=values,
                          finish_reason="length" if reason == "length" else "stop")

    def _warn_once(self, what: str, message: str) -> None:
        if what not in self._warned:
            self._warned.add(what)
            warnings.warn(message, stacklevel=3)

    # ---------------------------------------------------------------- scoring
    def _score_texts(self, prompts: Sequence[str], chat: bool, desc: str) -> list[str]:
        if chat:
            raise EndpointError(f"{desc}: score(chat=True) is not available from {self.name}: an OpenAI-compatible "
                                "server scores raw text only (echo=true on /completions); use chat=False")
        return list(prompts)

    def _score_missing(self, todo: dict[str, tuple[str, str]], progress: bool, desc: str) -> Iterator[dict[str, float]]:
        """`score`'s misses from the server's echoed prompt log-probabilities (checked once per object first)."""
        try:
            self._check_echo(desc)
            yield from self._run(todo, lambda job: self._score_one(job[0], job[1], desc), progress, desc)
        except EndpointError as err:
            if str(err).startswith(desc):
                raise
            raise EndpointError(f"{desc} needs prompt log-probabilities (score: echo=true on /completions), "
                                f"and {self.name} failed to give them: {err}") from None

    def _check_echo(self, desc: str) -> None:
        """Once per object: the echoed log-probability of a token must equal the one the server gives when it
        generates that token; otherwise (e.g. llama-cpp-python 0.3 with a model that adds no BOS token, whose
        echoed values are shifted by one position) `score` would be silently wrong, so it raises instead."""
        with self._lock:
            if self._echo_checked:
                return
        probe = "The capital of France is"
        reply = self.post("completions", {"model": self.served_model, "prompt": probe, "max_tokens": 1,
                                          "temperature": 0.0, "logprobs": 1})
        first = self._completion(reply, False, [], 1)
        if first.text.strip() and first.token_logprobs:
            echoed = self._score_one(probe, first.text, desc)
            if abs(echoed - first.token_logprobs[0]) > 0.05:
                raise EndpointError(
                    f"{desc} needs prompt log-probabilities (score), and those of {self.name} are wrong: the echoed "
                    f"log-probability of {first.text!r} after {probe!r} is {echoed:.3f}, but {first.token_logprobs[0]:.3f} "
                    "when the server generates it (llama-cpp-python shifts echoed values by one token for models "
                    "that add no BOS token). Use vLLM, or an in-process model, for score()")
        with self._lock:
            self._echo_checked = True

    def _score_one(self, prompt: str, continuation: str, desc: str) -> float:
        text = prompt + continuation
        reply = self.post("completions", {"model": self.served_model, "prompt": text, "max_tokens": 1,
                                          "temperature": 0.0, "echo": True, "logprobs": 1})
        why = ""
        try:
            logprobs = typed(only_choice(reply).get("logprobs") or {}, dict, "choices[0].logprobs")
            tokens = typed(logprobs.get("tokens") or [], list, "choices[0].logprobs.tokens", str)
            values = typed(logprobs.get("token_logprobs") or [], list, "choices[0].logprobs.token_logprobs",
                           (*NUMBER, type(None)))
            offsets = typed(logprobs.get("text_offset") or [], list, "choices[0].logprobs.text_offset", int)
            if not (tokens and values and offsets) or not len(tokens) == len(values) == len(offsets):
                why = "the reply holds no prompt tokens with log-probabilities and text offsets"
        except (IndexError, TypeError, OverflowError) as err:
            raise EndpointError(f"{self.base_url}/completions: malformed response ({type(err).__name__}: {err}): "
                                f"{str(reply)[:300]}") from None
        if not why:
            # the continuation's tokens: those that end past the prompt and start before the end of the text
            picked = [v for t, v, o in zip(tokens, values, offsets)
                      if o < len(text) and o + max(len(t), 1) > len(prompt)]
            if not picked or any(v is None or not math.isfinite(float(v)) for v in picked):
                why = "the echoed prompt log-probabilities do not cover the continuation"
        if why:
            raise EndpointError(f"{desc} needs prompt log-probabilities (score), and {self.name} does not return "
                                f"them: {why}. Servers with echo=true and logprobs on /completions (vLLM, "
                                "llama-cpp-python) do; chat-only APIs do not")
        return float(sum(float(v) for v in picked))
