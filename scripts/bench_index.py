"""Wikipedia-scale retrieval, measured: build the streamed, memory-mapped BM25 index over a DPR-format corpus
and report indexing time, peak memory, index size and queries/s at k=5, with a linear extrapolation to DPR's
21,015,324 passages.

    .venv/bin/python scripts/bench_index.py                      # synthetic 1M passages (written once)
    .venv/bin/python scripts/bench_index.py --tsv psgs_w100.tsv  # a real DPR file
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

DPR_PASSAGES = 21_015_324


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def build(tsv: Path, folder: Path, shard_size: int) -> None:
    """Child process: build the index and print its numbers as JSON (peak memory is this process's alone)."""
    from covlib import data
    from covlib.retrieval.disk_index import DiskBM25Retriever, index_size

    start_rss = _peak_rss_mb()
    t0 = time.perf_counter()
    r = DiskBM25Retriever.build(data.iter_dpr_tsv(tsv), folder, shard_size=shard_size)
    seconds = time.perf_counter() - t0
    print(json.dumps({"passages": len(r), "seconds": seconds, "peak_rss_mb": _peak_rss_mb(),
                      "rss_before_mb": start_rss, "index_bytes": index_size(folder), "n_terms": r.meta["n_terms"],
                      "shards": len(r.meta["shards"])}))


def query(folder: Path, n_queries: int, k: int) -> None:
    """Child process: queries/s at k over words drawn from random passages (seeded), as JSON."""
    import numpy as np

    from covlib.retrieval.disk_index import DiskBM25Retriever
    from covlib.retrieval import tokenize

    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    r = DiskBM25Retriever.load(folder)
    _ = r.vocab
    open_s = time.perf_counter() - t0
    queries = []
    for i in rng.integers(0, len(r), size=n_queries):
        words = tokenize(r.passages[int(i)].text)
        queries.append(" ".join(rng.choice(words, size=min(6, len(words)), replace=False)))
    t0 = time.perf_counter()
    hits = r.search_batch(queries, k=k)
    seconds = time.perf_counter() - t0
    print(json.dumps({"queries": n_queries, "seconds": seconds, "qps": n_queries / seconds, "open_seconds": open_s,
                      "peak_rss_mb": _peak_rss_mb(), "mean_hits": sum(map(len, hits)) / n_queries}))


def _child(*args: str) -> dict:
    out = subprocess.run([sys.executable, __file__, *args], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    """Command line."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tsv", type=Path, help="a DPR-format corpus (default: the synthetic one, written if missing)")
    ap.add_argument("--passages", type=int, default=1_000_000, help="size of the synthetic corpus")
    ap.add_argument("--index", type=Path, help="index folder (default: .cache/bench/index-<corpus name>)")
    ap.add_argument("--shard-size", type=int, default=250_000)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--_build", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--_query", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    from covlib.core import paths

    tsv = args.tsv or paths.cache_dir() / "bench" / f"synthetic-{args.passages}.tsv"
    folder = args.index or paths.cache_dir() / "bench" / f"index-{tsv.stem}"
    if args._build:
        return build(tsv, folder, args.shard_size)
    if args._query:
        return query(folder, args.queries, args.k)
    if not tsv.exists():
        if args.tsv:
            raise SystemExit(f"{tsv}: no such file")
        print(f"writing the synthetic corpus {tsv} ...", flush=True)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, str(Path(__file__).with_name("synthetic_corpus.py")), "--passages",
                        str(args.passages), "--out", str(tsv)], check=True)
        print(f"  {time.perf_counter() - t0:.0f} s, {tsv.stat().st_size / 1e9:.2f} GB")
    b = _child("--tsv", str(tsv), "--index", str(folder), "--shard-size", str(args.shard_size), "--_build")
    q = _child("--tsv", str(tsv), "--index", str(folder), "--queries", str(args.queries), "--k", str(args.k),
               "--_query")
    scale = DPR_PASSAGES / b["passages"]
    print(f"corpus            {tsv} ({tsv.stat().st_size / 1e9:.2f} GB, {b['passages']:,} passages, "
          f"{b['n_terms']:,} terms, {b['shards']} shards)")
    print(f"indexing          {b['seconds']:.0f} s ({b['passages'] / b['seconds']:,.0f} passages/s)")
    print(f"peak memory       {b['peak_rss_mb']:.0f} MB while indexing (Python + libraries alone: "
          f"{b['rss_before_mb']:.0f} MB); {q['peak_rss_mb']:.0f} MB while querying")
    print(f"index on disk     {b['index_bytes'] / 1e9:.2f} GB")
    print(f"queries           {q['qps']:.1f} queries/s at k={args.k} ({q['queries']} queries, one process; "
          f"opening the index {q['open_seconds']:.1f} s)")
    print(f"x{scale:.1f} to DPR's 21M (linear): indexing ~{b['seconds'] * scale / 3600:.1f} h, index "
          f"~{b['index_bytes'] * scale / 1e9:.0f} GB, queries ~{q['qps'] / scale:.1f}/s (postings grow with the "
          "corpus; memory grows with the vocabulary, not the passages)")


if __name__ == "__main__":
    main()
