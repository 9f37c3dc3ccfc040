"""The tests' one way to reach headless Chromium: scripts/book_screenshots.py, or a skip (a failure under CI)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


def screenshots() -> ModuleType:
    """`book_screenshots` when a Chromium is found; else skip, or fail when CI is set (`make test` installs it)."""
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))
    import book_screenshots

    if book_screenshots.browser() is None:
        if os.environ.get("CI"):
            pytest.fail("no Chromium under CI: `make test` installs it (`make browser`) and these checks must run")
        pytest.skip("no Chromium on this machine (make browser, or apt-get install chromium)")
    return book_screenshots
