"""Dense retrieval with a sentence encoder (the embedded all-MiniLM-L6-v2 by default)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from covlib.core.records import DataError, Passage, passage_string

from covlib.retrieval.base import (Hit, check_k, check_queries, check_passages, top_k_indices, read_passages, read_meta, BaseRetriever)
from covlib.retrieval.embedding import Encoder, load_encoder


# ---------------------------------------------------------------------------
# dense


class DenseRetriever(BaseRetriever):
    """Exact inner-product search over unit-normalised sentence embeddings (embedded MiniLM by default)."""

    name = "dense"

    def __init__(self, passages: Sequence[Passage], encoder: Any = None, batch_size: int = 64, progress: bool = False):
        self.passages = check_passages(passages)
        self.encoder = encoder if isinstance(encoder, Encoder) else load_encoder(encoder)
        self.batch_size = batch_size
        self.embeddings = self.encoder.encode([passage_string(p) for p in self.passages],
                                              batch_size=batch_size, progress=progress)

    def config(self) -> dict:
        """The encoder name."""
        return {"encoder": self.encoder.name}

    def search_batch(self, queries: Sequence[str], k: int = 5, progress: bool = False, chunk: int = 1024) -> list[list[Hit]]:
        """The top-k passages for each query by cosine similarity."""
        k, queries = check_k(k), check_queries(queries)
        if not self.passages:
            return [[] for _ in queries]
        q = self.encoder.encode(list(queries), batch_size=self.batch_size, progress=progress)
        out: list[list[Hit]] = []
        for start in range(0, len(q), chunk):
            scores = q[start:start + chunk] @ self.embeddings.T
            for row in top_k_indices(scores, k, positive_only=False):
                out.append([Hit(self.passages[i], s) for i, s in row])
        return out

    def save(self, folder: str | Path) -> Path:
        """Write passages, the encoder name and the embedding matrix (.npy) to a folder."""
        folder = self._save_common(folder)
        np.save(folder / "embeddings.npy", self.embeddings)
        return folder

    @classmethod
    def load(cls, folder: str | Path, encoder: Any = None, batch_size: int = 64) -> "DenseRetriever":
        """Read a folder written by save; the query encoder is the recorded one unless given."""
        folder = Path(folder)
        meta = read_meta(folder, cls.name)
        self = cls.__new__(cls)
        self.passages = read_passages(folder / "passages.jsonl")
        self.encoder = encoder if isinstance(encoder, Encoder) else load_encoder(encoder or meta["config"]["encoder"])
        if self.encoder.name != meta["config"]["encoder"]:
            raise DataError(folder / "meta.json", f"index was built with {meta['config']['encoder']!r}, "
                            f"not {self.encoder.name!r}", field="config.encoder")
        self.batch_size = batch_size
        self.embeddings = np.load(folder / "embeddings.npy")
        if self.embeddings.shape[0] != len(self.passages):
            raise DataError(folder / "embeddings.npy", f"{self.embeddings.shape[0]} rows for {len(self.passages)} passages")
        return self


