"""Compare BM25 backends (bm25s vs rank-bm25): index and query time on the real paragraphs repeated to ~N.

    .venv/bin/python scripts/bench_bm25.py [--size 100000] [--queries 200]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from covlib.core import paths  # noqa: E402
from covlib.core.records import Passage  # noqa: E402
from covlib.retrieval import BM25Retriever  # noqa: E402


def corpus(size: int) -> tuple[list[Passage], list[str]]:
    """Adversarial-HotpotQA paragraphs repeated (with distinct ids and a copy tag) up to `size`, and its questions."""
    records = json.loads(paths.dataset_path("hotpotqa_adv", "sim_dev.json").read_text())
    base = list({(p["title"], p["context"]): None for r in records for p in r["paragraphs"]})
    out = [Passage(f"{i}", t, f"{c} copy{i // len(base)}") for i, (t, c) in
           ((i, base[i % len(base)]) for i in range(size))]
    return out, [r["question"] for r in records]


def main() -> None:
    """Time both backends and print the ratio."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    args = ap.parse_args()
    passages, questions = corpus(args.size)
    questions = (questions * (args.queries // len(questions) + 1))[: args.queries]
    times = {}
    for backend in ("bm25s", "rank_bm25"):  # warm up imports so they are not timed
        BM25Retriever(passages[:50], backend=backend).search("warm up")
    for backend in ("bm25s", "rank_bm25"):
        t0 = time.perf_counter()
        r = BM25Retriever(passages, backend=backend)
        t1 = time.perf_counter()
        hits = r.search_batch(questions, k=10)
        t2 = time.perf_counter()
        times[backend] = (t1 - t0, t2 - t1)
        print(f"{backend:10s} index {t1 - t0:7.2f}s  {len(questions)} queries {t2 - t1:7.2f}s "
              f"({1000 * (t2 - t1) / len(questions):.1f} ms/query)  top1 {hits[0][0].title!r}")
    (ia, qa), (ib, qb) = times["bm25s"], times["rank_bm25"]
    print(f"rank_bm25 / bm25s: index x{ib / ia:.2f}, query x{qb / qa:.1f}, total x{(ib + qb) / (ia + qa):.1f}")


if __name__ == "__main__":
    main()
