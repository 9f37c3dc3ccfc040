"""Shared fixtures: the real data folder (skip when absent) and an isolated cache."""

from __future__ import annotations

import pytest

from covlib.core import paths


def _require(*parts: str):
    path = paths.dataset_path(*parts)
    if not path.exists():
        pytest.skip(f"real data not found at {path} (set COVLIB_DATA or put ../shared/data beside the repo)")
    return path


@pytest.fixture
def shared_data():
    """Return a function that gives a path under ../shared/data or skips the test with the reason."""
    return _require


@pytest.fixture
def isolated_cache(tmp_path, monkeypatch):
    """Point COVLIB_CACHE at a fresh folder so tests never share generation caches."""
    monkeypatch.setenv("COVLIB_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def scratch_root(tmp_path, monkeypatch, isolated_cache):
    """A scratch project root (COVLIB_ROOT) for what a run writes; the real data and converted models stay shared."""
    monkeypatch.setenv("COVLIB_DATA", str(paths.data_dir()))
    monkeypatch.setenv("COVLIB_MODELS", str(paths.models_dir()))
    monkeypatch.setenv("COVLIB_ROOT", str(tmp_path / "root"))
    return tmp_path / "root"


# Test tiers (`make test-fast` leaves these out; `make test`, what CI runs, has them all). A test is marked by the
# fixtures it uses, so a new test that starts a server or trains a model lands in the right tier by itself.
_TIER_FIXTURES = {"server": ("server", "bos_server", "llama_server"), "training": ("adapter", "tiny_judge_dir")}


def pytest_collection_modifyitems(config, items):
    for item in items:
        for marker, fixtures in _TIER_FIXTURES.items():
            if any(f in item.fixturenames for f in fixtures):
                item.add_marker(getattr(pytest.mark, marker))
