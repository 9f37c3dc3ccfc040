"""The book's trace explorer at full-profile size, measured: build time, size on disk, and how long headless Chromium
takes to load the notebook's page, a run's page (its list of examples) and one example page.

    .venv/bin/python scripts/bench_explorer.py                    # 1000 examples, 5 sampled paths of ~600 characters
    .venv/bin/python scripts/bench_explorer.py --examples 3000    # three times the largest run of the full profile
    .venv/bin/python scripts/bench_explorer.py --examples 300 --keep build/bench-explorer

A synthetic Verify-and-Edit-like run (before/after, CoT-SC paths, split rationale, verifying questions, retrieved
passages, answer again) is written with covlib.traces, then `teaching.book.build` renders the book with it.
Chromium times are `chromium --headless --dump-dom file://...` wall times (median of 3), start-up included, each
also shown over an empty page's (the page's own share); the run page also reports when its filters were applied
(`performance.now()` at the end of its script).
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

NOTEBOOK = "03_verify_and_edit_tables"
STEPS = [("Sample reasoning paths", "CoT-SC: n reasoning paths at temperature 0.7, majority vote"),
         ("Split the rationale into sentences", "the rationale of an inconsistent prediction, sentence by sentence"),
         ("Verifying questions", "one question per sentence"), ("Retrieve", "top-k passages per question"),
         ("Answer again", "the edited rationale, then the answer")]
WORDS = ("the", "film", "was", "directed", "by", "born", "in", "city", "river", "album", "released", "year", "team",
         "played", "which", "first", "capital", "university", "founded", "novel", "written", "actor", "married")


def _text(rng: random.Random, chars: int) -> str:
    out: list[str] = []
    while sum(len(w) + 1 for w in out) < chars:
        out.append(rng.choice(WORDS))
    return " ".join(out).capitalize() + "."


def write_run(folder: Path, examples: int, paths: int, chars: int, seed: int = 0) -> Path:
    """A synthetic Verify-and-Edit-like trace of `examples` records; returns its file."""
    from covlib import traces

    rng = random.Random(seed)
    tracer = traces.Tracer(NOTEBOOK, folder=folder / NOTEBOOK)
    shots = "".join(f"Q: {_text(rng, 80)}\nA: {_text(rng, 300)} So the answer is x.\n\n" for _ in range(6))
    with tracer.open_run("verify_edit", "verify_edit", "CoT-SC + Verify-and-Edit, HotpotQA, BM25 (synthetic)",
                         STEPS, {"n": paths, "examples": examples}, model="synthetic",
                         compare=("CoT-SC", "CoT-SC + VE")) as tr:
        for i in range(examples):
            question = _text(rng, 120) + "?"
            prompt = tr.prompts([f"{shots}Q: {question}\nA:"] * 2)[0]
            sampled = [_text(rng, chars) for _ in range(paths)]
            sentences = sampled[0].split(" which ")[:4]
            questions = [f"What {_text(rng, 40).lower()}?" for _ in sentences]
            before, after = rng.random() < 0.4, rng.random() < 0.45
            tr.write({
                "id": f"hp-{i:05d}", "question": question, "gold": ["x"], "prediction": rng.choice(WORDS),
                "correct": float(after), "before": {"prediction": rng.choice(WORDS), "correct": float(before)},
                "flags": {"parse_failures": int(rng.random() < 0.1), "edited": rng.random() < 0.6},
                "steps": [
                    traces.step("Sample reasoning paths", {"question": question},
                                {"paths": sampled, "votes": {"x": 3, "y": 2}, "consistency": 3},
                                [traces.call("generate", f"{i:064x}", prompt=prompt, n=paths, temperature=0.7)]),
                    traces.step("Split the rationale into sentences", {"rationale": sampled[0]},
                                {"sentences": sentences}),
                    traces.step("Verifying questions", {"sentences": sentences}, {"questions": questions},
                                [traces.call("generate", f"{i + 1:064x}", prompt=q) for q in questions]),
                    traces.step("Retrieve", {"questions": questions},
                                {"passages": [_text(rng, 300) for _ in questions]},
                                [traces.call("retrieve", None, k=1)]),
                    traces.step("Answer again", {"facts": sentences}, {"answer": rng.choice(WORDS)},
                                [traces.call("generate", f"{i + 2:064x}", prompt=f"{question}\nA:")])]})
    return tr.path


def _size(paths: list[Path]) -> int:
    return sum(p.stat().st_size for p in paths)


def _load(binary: str, page: Path, fragment: str = "", repeat: int = 3) -> tuple[float, float | None]:
    """Median seconds of `chromium --dump-dom` on the page (start-up included), and median milliseconds from the
    page's navigation to its filters applied (the run page's `data-ready-ms`; None on a page without it)."""
    import book_screenshots

    times, ready = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        dom = book_screenshots.dump_dom(page, fragment, binary)
        times.append(time.perf_counter() - start)
        found = re.search(r'data-ready-ms="(\d+)"', dom)
        if found:
            ready.append(float(found.group(1)))
    return statistics.median(times), (statistics.median(ready) if ready else None)


def _shown(name: str, measured: tuple[float, float | None], blank: float) -> str:
    total, ready = measured
    own = f"{total - blank:.2f} s over the empty page" + (f", filters applied at {ready:.0f} ms" if ready else "")
    return f"{name} {total:.2f} s ({own})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=1000,
                        help="examples in the run (the full profile's largest run: notebook 03's 1000 2Wiki or FEVER)")
    parser.add_argument("--paths", type=int, default=5, help="sampled reasoning paths per example")
    parser.add_argument("--chars", type=int, default=600, help="characters per path")
    parser.add_argument("--keep", default=None, help="build here and keep it (default: a temporary folder)")
    args = parser.parse_args(argv)

    import book_screenshots
    from teaching import book

    with tempfile.TemporaryDirectory() as tmp:
        base = Path(args.keep) if args.keep else Path(tmp)
        start = time.perf_counter()
        trace = write_run(base / "traces", args.examples, args.paths, args.chars)
        wrote = time.perf_counter() - start
        site = base / "book"
        start = time.perf_counter()
        book.build(base / "none", site, base / "f", base / "t", docs=base / "no-docs", results=base / "r",
                   traces=base / "traces")
        built = time.perf_counter() - start
        listing = site / f"explore-{NOTEBOOK}.html"
        (run_page,) = sorted((site / "explore" / NOTEBOOK).glob("*.html"))
        examples = sorted(p for p in (site / "explore").rglob("*/*/*.html") if p.parent != run_page.parent)
        sizes = sorted(p.stat().st_size for p in examples)
        print(f"trace: {args.examples} examples x {args.paths} paths of ~{args.chars} characters, "
              f"{trace.stat().st_size / 1e6:.1f} MB written in {wrote:.1f} s")
        print(f"build (book.build, explorer included): {built:.1f} s, {len(examples)} example pages")
        print(f"size: {(_size(examples) + listing.stat().st_size + run_page.stat().st_size) / 1e6:.1f} MB in all; "
              f"run page {run_page.stat().st_size / 1e6:.2f} MB; example page median {sizes[len(sizes) // 2] / 1e3:.1f} "
              f"kB, largest {sizes[-1] / 1e3:.1f} kB")
        binary = book_screenshots.browser()
        if binary is None:
            print("chromium: not found (make browser); load times not measured")
            return 0
        blank = base / "blank.html"
        blank.write_text("<!DOCTYPE html><html><body>x</body></html>")
        empty = _load(binary, blank)[0]
        print(f"chromium --dump-dom, median of 3 (start-up included): empty page {empty:.2f} s")
        for name, page, fragment in (("notebook page", listing, ""), ("run page", run_page, ""),
                                     ("run page #outcome=fixed", run_page, "#outcome=fixed"),
                                     ("example page", examples[len(examples) // 2], "")):
            print("  " + _shown(name, _load(binary, page, fragment), empty))
    return 0


if __name__ == "__main__":
    sys.exit(main())
