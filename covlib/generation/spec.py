"""Model specs: which model a string names (a local folder, a hub id, or a server `openai:<model>@<base_url>`)."""

from __future__ import annotations

import functools
import os
import re
import socket
from pathlib import Path
from urllib.parse import urlsplit

from covlib.core.paths import is_hub_id

EMBEDDED = ""  # the one spelling of "the embedded model" as a model spec (a notebook's empty `model` parameter)
EMBEDDED_LABEL = "embedded"  # how run records and tables name it

ENDPOINT_PREFIX = "openai:"  # load_lm("openai:<model>@<base_url>")
DEFAULT_BASE_URL = "https://api.openai.com/v1"  # when the spec names no server (and OPENAI_BASE_URL is unset)


def is_endpoint(model: str | None) -> bool:
    """Whether `model` names an OpenAI-compatible server (`openai:<model>@<base_url>`)."""
    return isinstance(model, str) and model.startswith(ENDPOINT_PREFIX)


def model_source(model: str) -> str:
    """A model given as a local folder (`~` expanded) or a hub id, else FileNotFoundError saying which it is not."""
    folder = Path(model).expanduser()
    if folder.is_dir():
        if not (folder / "config.json").is_file():
            raise FileNotFoundError(f"model folder {model!r} holds no config.json: give a folder that save_pretrained "
                                    "wrote (config.json and the weights), a hub id, or nothing for the embedded model")
        return str(folder)
    if is_hub_id(model):
        return model
    what = "is a file, not a model folder" if folder.exists() else "does not exist"
    raise FileNotFoundError(f"model {model!r} {what}, and it is not a hub id (`owner/name`): give a folder "
                            "that save_pretrained wrote, a hub id, or nothing for the embedded model")


@functools.lru_cache(maxsize=None)
def hub_reachable() -> bool:
    """Whether the Hugging Face hub may be asked: not with HF_HUB_OFFLINE set, nor when its host name does not
    resolve (asked once a process)."""
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        return False
    host = urlsplit(os.environ.get("HF_ENDPOINT", "https://huggingface.co")).hostname or "huggingface.co"
    try:
        socket.getaddrinfo(host, 443)
    except OSError:
        return False
    return True


def load_failure(source: str, err: Exception) -> str:
    """Why transformers could not load `source`, in one line: a folder without a model, or a hub id not served."""
    where = "the folder holds no loadable model" if Path(source).is_dir() else \
        "the hub is unreachable from here or the id is wrong"
    return f"{where} ({type(err).__name__}: {' '.join(str(err).split())[:300]})"


def parse_spec(spec: str) -> tuple[str, str]:
    """(served model, base URL) from `openai:<model>@<base_url>`; without `@...`, OPENAI_BASE_URL or OpenAI's."""
    if not spec.startswith(ENDPOINT_PREFIX):
        raise ValueError(f"{spec!r} is not a server spec: write {ENDPOINT_PREFIX}<model>@<base_url>")
    rest = spec[len(ENDPOINT_PREFIX):]
    found = re.search(r"@(https?://[^\s@]+)$", rest)
    model, url = (rest[: found.start()], found.group(1)) if found else (rest, os.environ.get("OPENAI_BASE_URL",
                                                                                            DEFAULT_BASE_URL))
    if "@" in rest and not found:
        raise ValueError(f"{spec!r}: the part after '@' must be a base URL starting with http:// or https:// "
                         f"(e.g. {ENDPOINT_PREFIX}Qwen/Qwen2.5-7B-Instruct@http://127.0.0.1:8000/v1)")
    if not model.strip():
        raise ValueError(f"{spec!r} names no model: write {ENDPOINT_PREFIX}<model>@<base_url>")
    url = url.rstrip("/")
    if not urlsplit(url).path:
        url += "/v1"  # http://host:8000 means the usual /v1 root
    return model, url
