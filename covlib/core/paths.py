"""Every path the project reads or writes, in one place.

Each is a function so that environment variables set after import (tests,
papermill parameters) are honoured; nothing touches the disk at import time.

| variable          | default                     | what                                  |
|-------------------|-----------------------------|---------------------------------------|
| COVLIB_ROOT       | the repository root         | where figures/, tables/, results/ go  |
| COVLIB_DATA       | <root>/../shared/data       | the real evaluation data              |
| COVLIB_CACHE      | <root>/.cache               | LLM/NLI call cache, indexes           |
| COVLIB_MODELS     | <root>/.cache/models        | converted model weights               |
"""

from __future__ import annotations

import os
import re
from pathlib import Path


def root() -> Path:
    """Repository root (COVLIB_ROOT overrides)."""
    env = os.environ.get("COVLIB_ROOT")
    return Path(env).resolve() if env else code_root()


def code_root() -> Path:
    """The repository this code lives in (fixtures, scripts), whatever COVLIB_ROOT says."""
    return Path(__file__).resolve().parents[2]  # covlib/core/paths.py -> the repository


def resources_dir() -> Path:
    """Data files the project ships inside the covlib package (hand-written key facts and their review sheet)."""
    return Path(__file__).resolve().parents[1] / "resources"


def data_dir() -> Path:
    """Folder holding the shared evaluation data (COVLIB_DATA overrides)."""
    env = os.environ.get("COVLIB_DATA")
    return Path(env).resolve() if env else (root().parent / "shared" / "data").resolve()


def cache_dir() -> Path:
    """Folder for generation caches, converted models and indexes (COVLIB_CACHE overrides)."""
    env = os.environ.get("COVLIB_CACHE")
    return Path(env).resolve() if env else root() / ".cache"


def models_dir() -> Path:
    """Folder for converted model weights (COVLIB_MODELS overrides; kept apart from the call cache)."""
    env = os.environ.get("COVLIB_MODELS")
    return Path(env).resolve() if env else root() / ".cache" / "models"


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


