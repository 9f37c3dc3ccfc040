"""Look at the book as a reader would: headless Chromium screenshots of the index and notebook pages (and the DOM).

    python scripts/book_screenshots.py [--book build/book] [--out build/book-screenshots] [PAGE ...]

Needs a Chromium (`apt-get install chromium` on Debian); the pages are opened from disk with the
network switched off, so anything that still needs the network shows up as missing.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def browser() -> str | None:
    """The Chromium binary on PATH, or None."""
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def screenshot(page: Path, png: Path, width: int = 1280, height: int = 1600, binary: str | None = None) -> Path:
    """Render one page from disk, offline, into a PNG."""
    binary = binary or browser()
    if binary is None:
        raise RuntimeError("no Chromium found: apt-get install chromium")
    png.parent.mkdir(parents=True, exist_ok=True)
    cmd = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>",  # no network: nothing remote may load
           f"--window-size={width},{height}", f"--screenshot={png}", page.resolve().as_uri()]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if done.returncode != 0 or not png.is_file():
        raise RuntimeError(f"chromium failed on {page}: {done.stderr[-500:]}")
    return png


def dump_dom(page: Path, fragment: str = "", binary: str | None = None, timeout: int = 120,
             size: tuple[int, int] | None = None) -> str:
    """The DOM of one page from disk, offline, after its scripts ran (`--dump-dom`); `fragment`: "#outcome=fixed";
    `size`: the window's (width, height), else Chromium's default."""
    binary = binary or browser()
    if binary is None:
        raise RuntimeError("no Chromium found: apt-get install chromium")
    cmd = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--proxy-server=127.0.0.1:9",
           "--proxy-bypass-list=<-loopback>", *([f"--window-size={size[0]},{size[1]}"] if size else []),
           "--dump-dom", page.resolve().as_uri() + fragment]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0 or "<html" not in done.stdout:
        raise RuntimeError(f"chromium failed on {page}{fragment}: {done.stderr[-500:]}")
    return done.stdout


def has_content(png: Path) -> bool:
    """Whether a screenshot shows something: at least 2% of its pixels differ from the background."""
    from PIL import Image

    image = Image.open(png).convert("L")
    pixels = list(image.getdata())
    background = max(set(pixels[:1000]), key=pixels[:1000].count)
    return sum(abs(p - background) > 30 for p in pixels) > 0.02 * len(pixels)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--book", default=str(ROOT / "build" / "book"))
    parser.add_argument("--out", default=str(ROOT / "build" / "book-screenshots"))
    parser.add_argument("pages", nargs="*", help="page names (default: index.html and the first notebook page)")
    args = parser.parse_args(argv)
    book = Path(args.book)
    if not (book / "index.html").is_file():
        parser.error(f"no book at {book}: run `make book` first")
    pages = args.pages or ["index.html"] + [p.name for p in sorted(book.glob("[0-9]*.html"))[:1]]
    for name in pages:
        png = screenshot(book / name, Path(args.out) / (Path(name).stem + ".png"))
        print(png, "" if has_content(png) else "(blank!)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
