"""Sentences out of retrieved passages, and Verify-and-Edit's "top-3 sentences most similar to the question"."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from covlib.core.records import Paragraph, Passage
from covlib.core.text import split_sentences
from covlib.retrieval.base import Hit, check_k, check_queries
from covlib.retrieval.embedding import Encoder, load_encoder


def passages_to_sentences(hits: Iterable[Hit | Passage | Paragraph], dedupe: bool = True) -> list[str]:
    """The sentences of the hits' texts in rank order (Paragraph sentences kept as given), duplicates dropped."""
    out: list[str] = []
    for h in hits:
        item = h.passage if isinstance(h, Hit) else h
        if isinstance(item, Paragraph):
            out.extend(s.strip() for s in item.sentences if s.strip())
        else:
            out.extend(s.strip() for s in split_sentences(item.text) if s.strip())
    return list(dict.fromkeys(out)) if dedupe else out


def top_sentences_batch(queries: Sequence[str], sentence_lists: Sequence[Sequence[str]], k: int = 3,
                        encoder: Any = None, dedupe: bool = True) -> list[list[tuple[str, float]]]:
    """top_sentences for many (query, sentences) pairs, embedding each distinct text once."""
    k, queries = check_k(k), check_queries(queries, "top_sentences_batch()")
    if len(queries) != len(sentence_lists):
        raise ValueError(f"{len(queries)} queries but {len(sentence_lists)} sentence lists")
    enc = encoder if isinstance(encoder, Encoder) else load_encoder(encoder)
    lists = [list(dict.fromkeys(s)) if dedupe else list(s) for s in sentence_lists]
    texts = list(dict.fromkeys([*queries, *(s for ss in lists for s in ss)]))
    row = {t: i for i, t in enumerate(texts)}
    vecs = enc.encode(texts)
    out = []
    for q, sents in zip(queries, lists):
        if not sents:
            out.append([])
            continue
        sims = vecs[[row[s] for s in sents]] @ vecs[row[q]]
        order = np.argsort(-sims, kind="stable")[:k]
        out.append([(sents[i], float(sims[i])) for i in order])
    return out


def top_sentences(query: str, sentences: Sequence[str], k: int = 3, encoder: Any = None,
                  dedupe: bool = True) -> list[tuple[str, float]]:
    """The k sentences most similar to the query by embedding cosine, ties in original order.

    Verify-and-Edit ranks retrieved sentences by Euclidean distance of paraphrase-MiniLM-L6-v2
    embeddings; with the unit-normalised all-MiniLM-L6-v2 used here, cosine and Euclidean
    orders coincide. Exact duplicate sentences are dropped first, as in the paper's code.
    """
    return top_sentences_batch([query], [sentences], k=k, encoder=encoder, dedupe=dedupe)[0]


