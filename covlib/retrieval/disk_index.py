"""BM25 for corpora that do not fit in memory: DPR's Wikipedia (21M passages, 13 GB) on one machine.

`DiskBM25Retriever.build(passages, folder)` reads the passages once, as a stream (`data.iter_dpr_tsv`
or `data.iter_jsonl_corpus`), and never holds more than one shard of them. Each shard's term
frequencies go to disk as they are counted; once the whole corpus has been read (so document
frequencies and the mean length are known), every shard becomes a term-major posting list of
BM25 weights. The index is a folder of `.npy` arrays opened memory-mapped, so a query touches only
the postings of its own terms, and memory stays small whatever the corpus size:

    folder/meta.json         kind "bm25-disk", sizes, k1, b, shard list, "maps" (passages.jsonl's size and
                             offsets.npy's sha256, checked at open: files of two builds mixed are refused)
    folder/vocab.txt         one term per line, its line number is its id
    folder/passages.jsonl    the passages as read, one JSON object per line
    folder/offsets.npy       byte offset of each passage line (random access by position)
    folder/shard-NNN/{terms,indptr,docs,weights}.npy   postings: the shard's j-th term, terms[j], owns
                             docs[indptr[j]:indptr[j+1]] (only terms present in the shard are listed)

Scores are those of `retrieval.BM25Retriever` (Okapi BM25, k1 = 1.5, b = 0.75, Robertson's idf
clipped at 0, the same tokenizer), so the two rank a corpus alike; ties go to the earlier passage.

A build holds an exclusive lock on `folder.lock` (beside the index): a second build of the same index refuses at
once ("another build of wiki is running"). A missing, truncated or mismatched file is reported by name at open, with
the `make index` command that rebuilds the index. Indexes written before "maps" was added still open (the passage
count alone is checked against meta.json).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from array import array
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from covlib import data
from covlib.core import paths
from covlib.core.records import DataError, Passage, passage_string
from covlib.data.readers import data_suffix
from covlib.retrieval.disk_checks import KIND, BuildLock, check_maps, damaged, offsets_hash, open_array
from covlib.retrieval.base import (FORMAT_VERSION, BaseRetriever, Hit, check_k, check_queries, fingerprint_part,
                                   passage_line, read_meta, tokenize, warn_unsearchable)



class _PassageFile(Sequence[Passage]):
    """The stored passages, read on demand by position (the list a retriever's `passages` would be)."""

    def __init__(self, folder: Path):
        self._path = folder / "passages.jsonl"
        self.offsets = open_array(folder / "offsets.npy", folder)
        try:
            self._handle = open(self._path, "rb")
        except OSError as err:
            raise DataError(self._path, f"cannot open it ({err.strerror}): {damaged(folder)}") from err

    def __len__(self) -> int:
        return len(self.offsets)

    def __iter__(self):
        with open(self._path, "rb") as f:  # one sequential pass, not a seek per passage
            for line in f:
                d = json.loads(line)
                yield Passage(d["id"], d["title"], d["text"])

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        self._handle.seek(int(self.offsets[i]))
        d = json.loads(self._handle.readline())
        return Passage(d["id"], d["title"], d["text"])


class DiskBM25Retriever(BaseRetriever):
    """BM25 over a sharded, memory-mapped index on disk; `build` it from a stream, open it with `load`."""

    name = KIND

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        meta = read_meta(self.folder, KIND)
        if meta.get("format") != FORMAT_VERSION:
            raise DataError(self.folder / "meta.json", f"index format {meta.get('format')}, expected "
                            f"{FORMAT_VERSION}: rebuild it")
        self.meta = meta
        self.k1, self.b = meta["config"]["k1"], meta["config"]["b"]
        self.passages = _PassageFile(self.folder)  # type: ignore[assignment]
        check_maps(self.folder, meta, self.passages)
        if not (self.folder / "vocab.txt").is_file():
            raise DataError(self.folder / "vocab.txt", f"missing: {damaged(self.folder)}")
        self._vocab: dict[str, int] | None = None
        self._shards = []
        for shard in meta["shards"]:
            sub = self.folder / shard["folder"]
            self._shards.append((shard["start"], shard["size"], *(open_array(sub / f"{part}.npy", self.folder)
                                                                  for part in ("terms", "indptr", "docs", "weights"))))

    @classmethod
    def load(cls, folder: str | Path) -> "DiskBM25Retriever":
        """Open an index folder written by `build`."""
        return cls(folder)

    def config(self) -> dict:
        """BM25 parameters and shard size."""
        return dict(self.meta["config"])

    def save(self, folder: str | Path) -> Path:
        """Copy the index folder (it is written by `build` and needs no saving)."""
        folder = Path(folder)
        if folder.resolve() != self.folder.resolve():
            shutil.copytree(self.folder, folder, dirs_exist_ok=True)
        return folder

    @property
    def vocab(self) -> dict[str, int]:
        """Term -> id (read on first search)."""
        if self._vocab is None:
            with open(self.folder / "vocab.txt", encoding="utf-8") as f:
                self._vocab = {line.rstrip("\n"): i for i, line in enumerate(f)}
        return self._vocab

    def search_batch(self, queries: Sequence[str], k: int = 5, progress: bool = False) -> list[list[Hit]]:
        """The top-k passages for each query by BM25 score (zero-score passages left out)."""
        from tqdm.auto import tqdm

        k = check_k(k)
        queries = check_queries(queries)
        vocab = self.vocab
        out = []
        for query in tqdm(queries, desc="bm25-disk", disable=not progress, unit="query"):
            terms = [vocab[t] for t in tokenize(query) if t in vocab]
            ranked = self._rank(terms, k) if terms and k else []
            out.append([Hit(self.passages[i], s) for i, s in ranked])
        return out

    def _rank(self, terms: list[int], k: int) -> list[tuple[int, float]]:
        """(passage position, score) of the k best, score descending, ties by position."""
        best_docs, best_scores = [], []
        wanted = np.asarray(terms, dtype=np.int64)
        for start, _size, shard_terms, indptr, docs, weights in self._shards:
            at = np.minimum(np.searchsorted(shard_terms, wanted), max(len(shard_terms) - 1, 0))
            found = at[np.asarray(shard_terms)[at] == wanted] if len(shard_terms) else at[:0]
            spans = [(int(indptr[j]), int(indptr[j + 1])) for j in found]
            if not spans:
                continue
            d = np.concatenate([docs[s:e] for s, e in spans])
            w = np.concatenate([weights[s:e] for s, e in spans]).astype(np.float64)
            scores = np.bincount(d, weights=w, minlength=_size)  # dense accumulation: no sort of the postings
            cand = np.flatnonzero(scores > 0)
            scores = scores[cand]
            if len(cand) > k:  # keep every passage tied with the k-th, so ties go to the earliest over all shards
                keep = scores >= -np.partition(-scores, k - 1)[k - 1]
                cand, scores = cand[keep], scores[keep]
            best_docs.append(cand.astype(np.int64) + start)
            best_scores.append(scores)
        if not best_docs:
            return []
        d, s = np.concatenate(best_docs), np.concatenate(best_scores)
        order = np.lexsort((d, -s))[:k]
        return [(int(d[j]), float(s[j])) for j in order if s[j] > 0]

    # ------------------------------------------------------------------ build
    @classmethod
    def build(cls, passages: Iterable[Passage], folder: str | Path, *, k1: float = 1.5, b: float = 0.75,
              shard_size: int = 250_000, progress: bool = True) -> "DiskBM25Retriever":
        """Index a stream of passages into `folder` (replaced when it exists); passage ids must be unique."""
        if shard_size < 1 or not (k1 >= 0 and 0 <= b <= 1):
            raise ValueError(f"need shard_size >= 1, k1 >= 0 and 0 <= b <= 1, got {shard_size}, {k1}, {b}")
        folder = Path(folder)
        folder.parent.mkdir(parents=True, exist_ok=True)
        with BuildLock(folder):  # a second build of the same index would share (and wreck) `.building`
            tmp = folder.with_name(folder.name + ".building")
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            try:
                return cls._build_into(tmp, folder, passages, k1, b, shard_size, progress)
            except BaseException:  # a bad record, a duplicate id, Ctrl-C: no half-built index left behind
                shutil.rmtree(tmp, ignore_errors=True)
                raise

    @classmethod
    def _build_into(cls, tmp: Path, folder: Path, passages: Iterable[Passage], k1: float, b: float, shard_size: int,
                    progress: bool) -> "DiskBM25Retriever":
        from tqdm.auto import tqdm

        started = time.perf_counter()
        vocab: dict[str, int] = {}
        df = np.zeros(1 << 16, dtype=np.int64)
        offsets, id_hashes = array("q"), array("q")
        fingerprint = hashlib.sha256()
        terms, lengths = array("i"), array("i")
        shards: list[dict] = []
        total_length, position = 0, 0

        def flush() -> None:
            nonlocal df
            if not lengths:
                return
            tf = _term_major(np.frombuffer(terms, dtype=np.int32), np.frombuffer(lengths, dtype=np.int32), len(vocab))
            if len(vocab) > len(df):
                df = np.concatenate([df, np.zeros(max(len(vocab) - len(df), len(df)), dtype=np.int64)])
            df[: len(vocab)] += np.diff(tf["indptr"])
            sub = tmp / f"shard-{len(shards):03d}"
            sub.mkdir()
            for part, values in tf.items():
                np.save(sub / f"{part}.npy", values)
            np.save(sub / "lengths.npy", np.frombuffer(lengths, dtype=np.int32).copy())
            shards.append({"folder": sub.name, "start": len(offsets) - len(lengths), "size": len(lengths)})
            del terms[:], lengths[:]

        bar = tqdm(desc="index (stream)", unit="passage", disable=not progress)
        with open(tmp / "passages.jsonl", "wb") as store:
            for i, p in enumerate(passages):
                if not isinstance(p, Passage):
                    raise TypeError(f"passage {i} is {type(p).__name__}, not records.Passage")
                line = passage_line(p).encode()
                store.write(line)
                offsets.append(position)
                position += len(line)
                id_hashes.append(hash(p.id))
                fingerprint.update(fingerprint_part(p))
                words = tokenize(passage_string(p))
                terms.extend([vocab.setdefault(w, len(vocab)) for w in words])
                lengths.append(len(words))
                total_length += len(words)
                if len(lengths) == shard_size:
                    flush()
                bar.update(1)
            flush()
        bar.close()
        n = len(offsets)
        if not n:
            raise ValueError("no passages to index (an empty corpus)")
        offsets_array = np.frombuffer(offsets, dtype=np.int64)
        np.save(tmp / "offsets.npy", offsets_array)
        _check_unique_ids(np.frombuffer(id_hashes, dtype=np.int64), _PassageFile(tmp))
        if not vocab:
            warn_unsearchable(n)
        avgdl = total_length / n
        df = df[: len(vocab)]
        idf = np.maximum(0.0, np.log((n - df + 0.5) / (df + 0.5)))  # Robertson's idf, clipped at 0 as bm25s does
        for shard in tqdm(shards, desc="index (weights)", unit="shard", disable=not progress):
            _weigh_shard(tmp / shard["folder"], idf, avgdl, k1, b)
        with open(tmp / "vocab.txt", "w", encoding="utf-8") as f:
            f.writelines(w + "\n" for w in vocab)  # dicts keep insertion order: line number = id
        meta = {"kind": KIND, "format": FORMAT_VERSION, "n_passages": n, "fingerprint": fingerprint.hexdigest(),
                "config": {"k1": k1, "b": b, "shard_size": shard_size}, "shards": shards,
                "maps": {"passages_bytes": position, "offsets_sha256": offsets_hash(offsets_array)},
                "n_terms": len(vocab), "avgdl": avgdl, "build_seconds": round(time.perf_counter() - started, 1)}
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
        shutil.rmtree(folder, ignore_errors=True)
        tmp.rename(folder)
        return cls(folder)

    def __repr__(self) -> str:
        return f"DiskBM25Retriever({len(self)} passages, {len(self._shards)} shards, {self.folder})"


def _term_major(terms: np.ndarray, lengths: np.ndarray, n_terms: int) -> dict[str, np.ndarray]:
    """Term frequencies of one shard as term-major postings: indptr (n_terms + 1), docs, tf."""
    from scipy.sparse import csc_matrix

    docs = np.repeat(np.arange(len(lengths), dtype=np.int32), lengths)
    tf = csc_matrix((np.ones(len(terms), dtype=np.float32), (docs, terms)), shape=(len(lengths), n_terms))
    tf.sum_duplicates()
    return {"indptr": tf.indptr.astype(np.int64), "docs": tf.indices.astype(np.int32), "tf": tf.data}


def _weigh_shard(sub: Path, idf: np.ndarray, avgdl: float, k1: float, b: float) -> None:
    """Replace a shard's term frequencies by BM25 weights, its indptr padded to the final vocabulary."""
    indptr, docs, tf = (np.load(sub / f"{p}.npy") for p in ("indptr", "docs", "tf"))  # term-major, all terms so far
    lengths = np.load(sub / "lengths.npy").astype(np.float64)
    term_of = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    norm = k1 * (1 - b + b * lengths[docs] / max(avgdl, 1e-9))
    weights = (idf[term_of] * tf * (k1 + 1) / (tf + norm)).astype(np.float32)
    keep = weights > 0  # a term in over half the passages has idf 0: its postings add nothing, so they are dropped
    present, counts = np.unique(term_of[keep], return_counts=True)  # only the shard's own terms: size ~ its postings
    np.save(sub / "terms.npy", present.astype(np.int32))
    np.save(sub / "indptr.npy", np.concatenate([[0], np.cumsum(counts)]).astype(np.int64))
    np.save(sub / "docs.npy", docs[keep])
    np.save(sub / "weights.npy", weights[keep])
    (sub / "tf.npy").unlink()
    (sub / "lengths.npy").unlink()


def _check_unique_ids(hashes: np.ndarray, passages: _PassageFile) -> None:
    """Raise on a repeated passage id (hash collisions are checked against the stored ids)."""
    order = np.argsort(hashes, kind="stable")
    same = np.flatnonzero(hashes[order][1:] == hashes[order][:-1])
    for j in same:
        a, b = int(order[j]), int(order[j + 1])
        if passages[a].id == passages[b].id:
            raise ValueError(f"duplicate passage id {passages[a].id!r} (passages {min(a, b)} and {max(a, b)}): "
                             "ids must be unique")


def index_size(folder: str | Path) -> int:
    """Bytes on disk of an index folder."""
    return sum(f.stat().st_size for f in Path(folder).rglob("*") if f.is_file())


def index_folder(name: str) -> Path:
    """Where `make index NAME=...` keeps an index: paths.index_dir() / f"{name}-bm25-disk"."""
    return paths.index_dir() / f"{name}-{KIND}"


def _cli() -> None:  # `python -m covlib.retrieval.disk_index psgs_w100.tsv --name wiki` (what `make index` runs)
    import argparse

    ap = argparse.ArgumentParser(description="Build the streamed, memory-mapped BM25 index of a big corpus.")
    ap.add_argument("corpus", help="DPR psgs_w100.tsv (.tsv) or a JSONL corpus ({id, contents} or {id, title, text})")
    ap.add_argument("--name", default="wiki", help="index name: the folder is <cache>/indexes/<name>-bm25-disk")
    ap.add_argument("--shard-size", type=int, default=250_000, help="passages per shard (memory while indexing)")
    args = ap.parse_args()
    if not args.corpus or not Path(args.corpus).is_file():
        raise SystemExit(f"corpus {args.corpus!r}: no such file (make index TSV=path/to/psgs_w100.tsv)")
    if not args.name.replace("-", "").replace("_", "").isalnum():
        raise SystemExit(f"--name {args.name!r}: use letters, digits, '-' and '_'")
    stream = data.iter_dpr_tsv if data_suffix(args.corpus) in (".tsv", ".csv", ".txt") else data.iter_jsonl_corpus
    try:
        r = DiskBM25Retriever.build(stream(args.corpus), index_folder(args.name), shard_size=args.shard_size)
    except RuntimeError as err:  # another `make index NAME=...` of the same name is running
        raise SystemExit(str(err)) from None
    print(f"{len(r):,} passages indexed in {r.meta['build_seconds']:.0f} s: {r.folder}")
    print(f"use it: corpus={r.folder} in notebooks 08/09, or retrieval.load_retriever({str(r.folder)!r})")


if __name__ == "__main__":
    _cli()
