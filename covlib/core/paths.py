"""Every path the project reads or writes, in one place.

Each is a function so that environment variables set after import (tests,
papermill parameters) are honoured; nothing touches the disk at import time.

| variable          | default                     | what                                  |
|-------------------|-----------------------------|---------------------------------------|
| COVLIB_ROOT       | the repository root         | where figures/, tables/, results/ go  |
| COVLIB_DATA       | <root>/../shared/data       | the real evaluation data              |
| COVLIB_CACHE      | <root>/.cache               | LLM/NLI call cache, indexes           |
| COVLIB_MODELS     | <root>/.cache/models        | converted model weights               |
| COVLIB_MACHINE_CACHE | $XDG_CACHE_HOME/covlib or ~/.cache/covlib | builds kept once per machine (llama-server) |

Where a variable is not set, a `covlib.toml` in the current folder or one of its parents may set
it: `root`, `data`, `cache`, `models`, each a path relative to that file (`make assignments` writes
one beside the student notebooks: `root = "."`, `data = "data"`, so a new shell in the hand-out
needs no export). Environment variables win over the file; with neither, the defaults above hold.
`describe_data_dir()` says which of the three chose the data folder, for "file not found" errors.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Iterable

CONFIG_NAME = "covlib.toml"
CONFIG_KEYS = {"root": "COVLIB_ROOT", "data": "COVLIB_DATA", "cache": "COVLIB_CACHE", "models": "COVLIB_MODELS"}


def config_file(start: str | Path | None = None) -> Path | None:
    """The nearest `covlib.toml` in `start` (default: the current folder) or its parents; None when there is none."""
    try:
        here = Path(start).resolve() if start is not None else Path.cwd()
    except OSError:  # the current folder was deleted
        return None
    for folder in (here, *here.parents):
        candidate = folder / CONFIG_NAME
        if candidate.is_file():
            return candidate
    return None


def _parse_toml(text: str, path: Path) -> dict:
    try:
        import tomllib
    except ImportError:  # Python 3.10: the flat `key = "value"` lines `make assignments` writes
        found = {}
        for number, line in enumerate(text.splitlines(), start=1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            match = re.fullmatch(r'([A-Za-z_]+)\s*=\s*"([^"]*)"', line)
            if not match:
                raise ValueError(f"{path}, line {number}: expected key = \"path\", got {line!r}")
            found[match.group(1)] = match.group(2)
        return found
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ValueError(f"{path}: not valid TOML ({err})") from err


def config(start: str | Path | None = None) -> dict[str, Path]:
    """The settings of the nearest `covlib.toml` (see `config_file`) as absolute paths, by key; {} without one."""
    path = config_file(start)
    if path is None:
        return {}
    raw = _parse_toml(path.read_text(encoding="utf-8"), path)
    unknown = sorted(set(raw) - set(CONFIG_KEYS))
    if unknown:
        raise ValueError(f"{path}: unknown setting(s) {', '.join(unknown)}; known: {', '.join(CONFIG_KEYS)}")
    out = {}
    for key, value in raw.items():
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"{path}: {key} should be a path in quotes, got {value!r}")
        out[key] = (path.parent / Path(value).expanduser()).resolve()
    return out


def _setting(key: str) -> Path | None:
    """The environment variable for `key` when set, else the nearest covlib.toml's `key`, else None."""
    env = os.environ.get(CONFIG_KEYS[key])
    if env:
        return Path(env).resolve()
    return config().get(key)


def root() -> Path:
    """Where figures/, tables/, results/ go: COVLIB_ROOT, else a covlib.toml's `root`, else the repository root."""
    return _setting("root") or code_root()


def code_root() -> Path:
    """The repository this code lives in (fixtures, scripts), whatever COVLIB_ROOT says."""
    return Path(__file__).resolve().parents[2]  # covlib/core/paths.py -> the repository


def resources_dir() -> Path:
    """Data files the project ships inside the covlib package (the key facts, their review sheet and the key-fact NLI pairs)."""
    return Path(__file__).resolve().parents[1] / "resources"


def data_dir() -> Path:
    """Folder holding the shared evaluation data: COVLIB_DATA, else a covlib.toml's `data`, else <root>/../shared/data."""
    return _setting("data") or (root().parent / "shared" / "data").resolve()


def describe_data_dir() -> str:
    """Where the data folder comes from and how to point it elsewhere, for "file not found" messages."""
    folder = data_dir()
    if os.environ.get("COVLIB_DATA"):
        how = "set by the environment variable COVLIB_DATA"
    else:
        found = config_file()
        how = (f"set by `data` in {found}" if found is not None and "data" in config()
               else f"the default <root>/../shared/data: no COVLIB_DATA variable, and no {CONFIG_NAME} with a `data` "
                    "setting in the current folder or its parents")
    return (f"the data folder is {folder} ({how}). Point COVLIB_DATA at the folder holding the data (export "
            f"COVLIB_DATA=/path/to/data), or start Python / Jupyter inside the hand-out folder, whose {CONFIG_NAME} "
            f"says where its data/ folder is")


def cache_dir() -> Path:
    """Folder for generation caches and indexes: COVLIB_CACHE, else a covlib.toml's `cache`, else <root>/.cache."""
    return _setting("cache") or root() / ".cache"


def models_dir() -> Path:
    """Converted model weights (kept apart from the call cache): COVLIB_MODELS, else a covlib.toml's `models`, else
    <root>/.cache/models."""
    return _setting("models") or root() / ".cache" / "models"


def machine_cache_dir() -> Path:
    """Builds kept once per machine and shared by every clone, as pip's wheel cache is (llama-server):
    COVLIB_MACHINE_CACHE, else $XDG_CACHE_HOME/covlib, else ~/.cache/covlib."""
    env = os.environ.get("COVLIB_MACHINE_CACHE") or ""
    if env.strip():
        return Path(env).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "covlib"


def index_dir() -> Path:
    """Folder for persisted retrieval indexes."""
    return cache_dir() / "indexes"


def figures_dir() -> Path:
    """Folder for figures (PNG + PDF)."""
    return root() / "figures"


def tables_dir() -> Path:
    """Folder for tables (CSV + Markdown)."""
    return root() / "tables"


def results_dir() -> Path:
    """Folder for headline-metric JSON files that tests read."""
    return root() / "results"


def build_dir() -> Path:
    """Built artefacts worth keeping apart from caches (benchmark key facts, review sheets): <root>/build."""
    return root() / "build"


def unwritable(folders: Iterable[Path]) -> str | None:
    """The first of `folders` that cannot be created or written to (a temporary file is made and removed in each),
    with the reason; None when every one can."""
    for folder in map(Path, folders):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-check-"):
                pass
        except OSError as err:  # a read-only mount (EROFS), no permission (EACCES), a file in the way
            blocker = next((p for p in (folder, *folder.parents) if p.exists() and not p.is_dir()), None)
            return f"{folder} cannot be written: " + (f"{blocker} is a file, not a folder" if blocker is not None
                                                      else err.strerror or str(err))
    return None


def dataset_path(*parts: str) -> Path:
    """A file under the shared data folder, e.g. dataset_path('fever', 'sampled_ids.json')."""
    return data_dir().joinpath(*parts)


# `name` or `owner/name`, optionally `:config`; a trailing `.json`-like extension marks a file, not a hub id
# (hub names such as `Qwen2.5-7B` or `opt-1.3b` end otherwise).
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?(:[\w.-]+)?$")
_FILE_EXTENSION = re.compile(r"\.[A-Za-z]{2,5}$")


def is_hub_id(source: object) -> bool:
    """Whether `source` is a Hugging Face hub id rather than a local path.

    A hub id is a string naming no existing path, shaped `name` or `owner/name` (optionally
    `:config`), with no file extension, and whose `owner` is not a local folder. Anything else
    is a local path, so a mistyped file name fails at once with "not found" instead of a hub lookup.
    """
    if not isinstance(source, str) or not _HUB_ID.match(source) or Path(source).expanduser().exists():
        return False
    name = source.partition(":")[0]
    if _FILE_EXTENSION.search(name):
        return False
    owner, slash, _ = name.partition("/")
    return not (slash and Path(owner).is_dir())


