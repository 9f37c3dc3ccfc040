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


PROBE = """<script>
const first = document.querySelector('#results table, #results img');
const code = document.querySelector('details.covlib-code');
const ledger = document.querySelector('table.ledger');
const heads = ledger ? [...ledger.querySelectorAll('th')].map(th => th.textContent) : [];
const why = ledger && heads.includes('why') ? ledger.querySelectorAll('th')[heads.indexOf('why')] : null;
document.body.setAttribute('data-probe', JSON.stringify({
  result: first ? Math.round(first.getBoundingClientRect().top) : null,
  code: code ? Math.round(code.getBoundingClientRect().top) : null,
  ledger_bottom: ledger ? Math.round(ledger.getBoundingClientRect().bottom) : null,
  row_max: ledger ? Math.max(0, ...[...ledger.querySelectorAll('tbody tr')].map(r => Math.round(r.getBoundingClientRect().height))) : null,
  page_width: document.documentElement.scrollWidth,
  why_share: why ? why.getBoundingClientRect().width / ledger.getBoundingClientRect().width : null,
  screen: window.innerHeight, what: first ? first.closest('section').querySelector('h2, h3').textContent : null}));
</script>"""


def where_results_start(page: Path, scratch: Path, size: tuple[int, int] | None = None) -> dict:
    """Open a copy of a book page in headless Chromium with a probe appended: where (in pixels from the top of the
    first screen) its first result table or figure and its first code cell are, the screen's height, the page's width; of its first
    ledger table: where it ends, its tallest row and the "why" column's share of its width (`size`: the window's)."""
    import json
    import re

    shots = screenshots()
    copy = scratch / f"probe-{page.name}"
    copy.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>", 1), encoding="utf-8")
    dom = shots.dump_dom(copy, size=size)
    found = re.search(r"data-probe=\"([^\"]*)\"", dom)
    assert found, "the probe did not run"
    return json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
