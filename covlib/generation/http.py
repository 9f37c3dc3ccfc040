"""What the HTTP backend says to and reads from a server: API keys, timeouts, retries, masked errors, reply checks.

Which key goes where, how long a request may wait, which statuses are retried, errors with every key masked, and the
fields of a reply checked, and how much of it is read, for how long.
"""

from __future__ import annotations

import json
import math
import os
import time
from typing import Any, Callable
from urllib.parse import urlsplit

KEY_VARIABLES = ("COVLIB_API_KEY", "OPENAI_API_KEY")  # read at request time, each bound to its servers (api_key)
RETRY_STATUS = frozenset({408, 429})  # and every 5xx but 501 (not implemented: retrying cannot help)
DEFAULT_TIMEOUT = 300.0  # seconds a request waits for its answer; COVLIB_REQUEST_TIMEOUT or timeout= overrides
REPLY_BYTES, TOKEN_BYTES = 1 << 20, 4096  # a reply may hold 1 MiB + 4 KiB a token asked (or echoed): reply_limit
TOKEN_CHARS = 128  # a completion's text holds at most this many characters a token asked (no vocabulary's are longer)
NUMBER = (int, float)  # a log-probability in a reply
OPENAI_HOST_URL = "https://api.openai.com/"  # where OPENAI_API_KEY goes without COVLIB_API_KEY_URL
# the servers this process started (covlib.generation.server), by base URL: each says why it is gone, or None while
# it runs; a request that cannot reach one of them reports that at once instead of retrying a dead port
_LOCAL_SERVERS: dict[str, Callable[[], str | None]] = {}


def key_value(variable: str) -> str | None:
    """The key in `variable`, surrounding whitespace (a CRLF .env file's \\r) stripped; None when unset or blank."""
    return (os.environ.get(variable) or "").strip() or None


def _listed(base_url: str) -> bool:
    """Whether `base_url` starts with one of the comma-separated prefixes in COVLIB_API_KEY_URL."""
    url = base_url.rstrip("/") + "/"
    return any(url.startswith(u.strip().rstrip("/") + "/") for u in
               os.environ.get("COVLIB_API_KEY_URL", "").split(",") if u.strip())


def key_bound(base_url: str) -> bool:
    """Whether OPENAI_API_KEY may be sent to `base_url`: OpenAI's own API over https, or a base URL starting
    with one of the comma-separated prefixes in COVLIB_API_KEY_URL."""
    return (base_url.rstrip("/") + "/").startswith(OPENAI_HOST_URL) or _listed(base_url)


def api_key(base_url: str) -> str | None:
    """The key a request to `base_url` carries: OPENAI_API_KEY where it is bound (key_bound), else COVLIB_API_KEY,
    the configured server's key, which never goes to OpenAI's host unless COVLIB_API_KEY_URL lists that URL."""
    key = key_value("OPENAI_API_KEY") if key_bound(base_url) else None
    if key is None and (urlsplit(base_url).hostname != urlsplit(OPENAI_HOST_URL).hostname or _listed(base_url)):
        key = key_value("COVLIB_API_KEY")
    return key


def request_timeout(timeout: float | None) -> float:
    """`timeout` when given, else COVLIB_REQUEST_TIMEOUT, else DEFAULT_TIMEOUT; a value not above 0 is refused."""
    if timeout is not None:
        return timeout
    text = os.environ.get("COVLIB_REQUEST_TIMEOUT", "").strip()
    if not text:
        return DEFAULT_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"COVLIB_REQUEST_TIMEOUT={text!r}: need a number of seconds > 0")
    return value


class EndpointError(RuntimeError):
    """A server could not be reached, rejected a request, or answered something unusable; names the URL.
    The API key is masked in the message, should a server or proxy echo it back."""

    def __init__(self, message: str):
        super().__init__(redact(message))


class Stopped(EndpointError):
    """A request not sent because another request of its run had failed (that one's error is raised)."""


def redact(text: str) -> str:
    """The text with every API key covlib would send replaced by ***."""
    for variable in KEY_VARIABLES:
        raw = os.environ.get(variable) or ""
        # the key as set, as sent (stripped), and as libraries print it (escaped: repr, JSON, bytes)
        forms = {raw, raw.strip(), repr(raw)[1:-1], repr(raw.encode())[2:-1], repr(raw.strip())[1:-1]}
        for form in sorted(forms, key=len, reverse=True):
            if len(form.strip()) >= 4:
                text = text.replace(form, "***")
    return text


def watch_server(base_url: str, gone: Callable[[], str | None], watch: bool = True) -> None:
    """Register a server this process runs at `base_url` (`gone()` says why it died); watch=False forgets it, if it
    is still the one registered there."""
    key = base_url.rstrip("/")
    if watch:
        _LOCAL_SERVERS[key] = gone
    elif _LOCAL_SERVERS.get(key) == gone:
        del _LOCAL_SERVERS[key]


def server_gone(base_url: str) -> str | None:
    """Why the server this process started at `base_url` is gone; None when it runs or is not ours."""
    gone = _LOCAL_SERVERS.get(base_url.rstrip("/"))
    return gone() if gone is not None else None


def retryable(status: int) -> bool:
    """Whether a reply with this HTTP status is worth sending again."""
    return status in RETRY_STATUS or (status >= 500 and status != 501)


def reply_limit(payload: dict[str, Any]) -> int:
    """The most bytes read of the reply to `payload`: REPLY_BYTES + TOKEN_BYTES per token asked (max_tokens) and,
    with echo, per prompt character (each echoed prompt token comes back with its log-probability)."""
    echoed = len(payload.get("prompt", "")) if payload.get("echo") else 0
    return REPLY_BYTES + TOKEN_BYTES * (int(payload.get("max_tokens") or 0) + echoed)


def read_body(reply: Any, url: str, limit: int, deadline: float) -> bytes:
    """The body of a streamed httpx reply: EndpointError past `limit` bytes, TimeoutError while it is still
    arriving at `deadline` (time.monotonic)."""
    body = bytearray()
    for chunk in reply.iter_bytes():
        body += chunk
        if len(body) > limit:
            raise EndpointError(f"{url}: the reply is over {limit:,} bytes, more than a reply to this request can "
                                f"hold (1 MiB + 4 KiB a token asked); refused, nothing cached: check that the server "
                                "honours max_tokens")
        if time.monotonic() > deadline:
            raise TimeoutError(f"the reply was still arriving, {len(body):,} bytes read")
    return bytes(body)


def typed(value: Any, kind: type | tuple[type, ...], path: str, each: type | tuple[type, ...] | None = None) -> Any:
    """`value` when it is a `kind` (a list: with each item an `each`); else TypeError naming the reply field `path`."""
    wrong = [(path, value, kind)] if not isinstance(value, kind) else [
        (f"{path}[{i}]", v, each) for i, v in enumerate(value if each else ()) if not isinstance(v, each)][:1]
    if wrong:
        where, value, want = wrong[0]
        names = " or ".join(t.__name__ for t in (want if isinstance(want, tuple) else (want,)))
        raise TypeError(f"{where} must be {names}, got {type(value).__name__} {str(value)[:40]!r}")
    return value


def only_choice(reply: Any) -> dict[str, Any]:
    """The one choice of a reply to an n=1 request; IndexError when there is not exactly one, with index 0."""
    choices = typed(typed(reply, dict, "the reply").get("choices"), list, "choices")
    if len(choices) != 1:
        raise IndexError(f"an n=1 request needs exactly one choice, got {len(choices)}")
    choice = typed(choices[0], dict, "choices[0]")
    if choice.get("index", 0) != 0:
        raise IndexError(f"the one choice of an n=1 request must have index 0, got {choice.get('index')!r}")
    return choice


def completion_fields(reply: Any, chat: bool) -> tuple[str, list[str], list[float], str, int]:
    """(text, tokens, log-probabilities, finish reason, tokens generated) of an n=1 generation reply, every field read
    checked (TypeError, IndexError or ValueError naming its path); tokens generated: usage.completion_tokens or the
    tokens listed, whichever is more."""
    choice = only_choice(reply)
    if chat:
        message = typed(choice.get("message"), dict, "choices[0].message")
        text = typed(message.get("content"), str, "choices[0].message.content")
    else:
        text = typed(choice.get("text"), str, "choices[0].text")
    logprobs = typed(choice.get("logprobs") or {}, dict, "choices[0].logprobs")
    if chat or "content" in logprobs:  # llama-server answers /completions in the chat format too
        entries = typed(logprobs.get("content") or [], list, "choices[0].logprobs.content", dict)
        at = "choices[0].logprobs.content[{}].{}".format
        tokens = [typed(e.get("token"), str, at(i, "token")) for i, e in enumerate(entries)]
        values = [typed(e.get("logprob"), NUMBER, at(i, "logprob")) for i, e in enumerate(entries)]
    else:
        tokens = typed(logprobs.get("tokens") or [], list, "choices[0].logprobs.tokens", str)
        values = typed(logprobs.get("token_logprobs") or [], list, "choices[0].logprobs.token_logprobs", NUMBER)
    if len(tokens) != len(values):
        raise ValueError(f"choices[0].logprobs holds {len(tokens)} tokens but {len(values)} log-probabilities")
    reason = typed(choice.get("finish_reason") or "stop", str, "choices[0].finish_reason")
    used = typed(typed(reply.get("usage") or {}, dict, "usage").get("completion_tokens") or 0, int,
                 "usage.completion_tokens")
    return text, list(tokens), [float(v) for v in values], reason, max(used, len(tokens))


def server_message(body: bytes, reason: str) -> str:
    """The error message a server put in its reply body (OpenAI's {"error": {"message": ...}} or plain text);
    `reason`, the HTTP reason phrase, when the body is empty."""
    try:
        parsed = json.loads(body)
        err = parsed.get("error", parsed) if isinstance(parsed, dict) else parsed
        message = err.get("message", err) if isinstance(err, dict) else err
        return " ".join(str(message).split())[:300]
    except ValueError:
        return " ".join(body.decode(errors="replace").split())[:300] or reason
