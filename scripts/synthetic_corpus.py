"""Write a synthetic DPR-format corpus (`id<TAB>text<TAB>title`, 100-word passages) for retrieval benchmarks.

Words are pseudo-words drawn from a Zipf distribution (exponent 1.07, as Wikipedia's word counts
roughly follow) over a fixed vocabulary, so posting-list lengths look like a real corpus's. Seeded.

    .venv/bin/python scripts/synthetic_corpus.py --passages 1000000 --out .cache/bench/synthetic-1m.tsv
"""

from __future__ import annotations

import argparse
import csv
import itertools
from pathlib import Path

import numpy as np

SYLLABLES = [a + b for a in "bcdfghklmnprstvz" for b in ("a", "e", "i", "o", "u", "ar", "en", "is", "on", "ul")]


def vocabulary(size: int, seed: int) -> list[str]:
    """`size` distinct pseudo-words of 2-4 syllables."""
    rng = np.random.default_rng(seed)
    words: dict[str, None] = {}
    while len(words) < size:
        n = rng.integers(2, 5, size=size)
        picks = rng.integers(0, len(SYLLABLES), size=(size, 4))
        for k, row in zip(n, picks):
            words["".join(SYLLABLES[i] for i in row[:k])] = None
            if len(words) == size:
                break
    return list(words)


def write(out: Path, passages: int, words_per_passage: int = 100, vocab_size: int = 500_000, seed: int = 0) -> Path:
    """Write the corpus file and return its path."""
    vocab = np.array(vocabulary(vocab_size, seed), dtype=object)
    weights = 1.0 / np.arange(1, vocab_size + 1) ** 1.07
    cdf = np.cumsum(weights / weights.sum())
    rng = np.random.default_rng(seed + 1)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f, delimiter="\t", lineterminator="\n")
        w.writerow(["id", "text", "title"])
        ids = itertools.count(1)
        for start in range(0, passages, 10_000):
            n = min(10_000, passages - start)
            draws = np.searchsorted(cdf, rng.random((n, words_per_passage + 2)))
            for row in vocab[np.minimum(draws, vocab_size - 1)]:
                w.writerow([next(ids), " ".join(row[2:]), " ".join(row[:2]).title()])
    tmp.replace(out)
    return out


def main() -> None:
    """Command line."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--passages", type=int, default=1_000_000)
    ap.add_argument("--words", type=int, default=100, help="words per passage (DPR: 100)")
    ap.add_argument("--vocab", type=int, default=500_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    if args.passages < 1 or args.words < 1 or args.vocab < 1:
        raise SystemExit("--passages, --words and --vocab must be >= 1")
    print(write(args.out, args.passages, args.words, args.vocab, args.seed))


if __name__ == "__main__":
    main()
