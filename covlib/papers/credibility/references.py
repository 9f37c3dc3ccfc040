"""Reference sets (§6): complete, partial and closed-book, seeded per question with gold positions recorded; BM25's top k."""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from typing import Any, Sequence


from covlib.core.records import DataError, Example, Paragraph, Passage
from covlib.retrieval import Retriever, search_passages


# --------------------------------------------------------------------------- reference sets (§6)


@dataclass(frozen=True)
class ReferenceSet:
    """The numbered references one prompt shows; `gold` are the 1-based positions of gold paragraphs."""

    question_id: str
    kind: str
    paragraphs: tuple[Paragraph | Passage, ...]
    gold: tuple[int, ...]

    def __len__(self) -> int:
        return len(self.paragraphs)


def rng(seed: int, *parts: Any) -> random.Random:
    digest = hashlib.sha256("\x00".join(map(str, (seed, *parts))).encode("utf-8")).digest()
    return random.Random(int.from_bytes(digest[:8], "little"))


def _gold_and_distractors(ex: Example, seed: int) -> tuple[list[Paragraph], list[Paragraph]]:
    titles = set(ex.supporting_titles)
    gold = [p for p in ex.paragraphs if p.title in titles]
    if len(gold) < 2:
        raise DataError(ex.id, f"needs at least 2 gold paragraphs in its context, found {len(gold)}")
    distractors = [p for p in ex.paragraphs if p.title not in titles]
    rng(seed, ex.id, "distractors").shuffle(distractors)  # one order per question: noise sets are nested
    return gold, distractors


def _arrange(ex: Example, kind: str, chosen: list[Paragraph], gold_titles: set[str], seed: int) -> ReferenceSet:
    order = list(chosen)
    rng(seed, ex.id, "order", len(order)).shuffle(order)  # not keyed by kind: with_gold(5) == noise k=3
    return ReferenceSet(ex.id, kind, tuple(order), tuple(i for i, p in enumerate(order, 1) if p.title in gold_titles))


def with_gold(ex: Example, n_refs: int, seed: int = 0, kind: str = "complete") -> ReferenceSet:
    """All gold paragraphs plus distractors up to `n_refs`, in a seeded order (2 gold + k noise when n = 2 + k)."""
    gold, distractors = _gold_and_distractors(ex, seed)
    if not len(gold) <= n_refs <= len(gold) + len(distractors):
        raise ValueError(f"{ex.id}: n_refs={n_refs} must lie in [{len(gold)}, {len(gold) + len(distractors)}]")
    chosen = gold + distractors[: n_refs - len(gold)]
    return _arrange(ex, kind, chosen, {p.title for p in gold}, seed)


def partial(ex: Example, n_refs: int = 5, seed: int = 0) -> ReferenceSet:
    """One gold paragraph (seeded choice) dropped and replaced by a distractor; `n_refs` references in all."""
    gold, distractors = _gold_and_distractors(ex, seed)
    dropped = rng(seed, ex.id, "dropped").randrange(len(gold))
    kept = [g for i, g in enumerate(gold) if i != dropped]
    if not len(kept) <= n_refs <= len(kept) + len(distractors):
        raise ValueError(f"{ex.id}: n_refs={n_refs} must lie in [{len(kept)}, {len(kept) + len(distractors)}]")
    chosen = kept + distractors[: n_refs - len(kept)]
    return _arrange(ex, "partial", chosen, {p.title for p in gold}, seed)


def closed_book(ex: Example) -> ReferenceSet:
    """No references at all."""
    return ReferenceSet(ex.id, "closed-book", (), ())


def hits_set(ex: Example, kind: str, passages: Sequence[Passage | Paragraph]) -> ReferenceSet:
    """A reference set from retrieved passages; gold positions are those whose title is a supporting title."""
    titles = set(ex.supporting_titles)
    return ReferenceSet(ex.id, kind, tuple(passages), tuple(i for i, p in enumerate(passages, 1) if p.title in titles))


def bm25_references(retriever: Retriever, examples: Sequence[Example], k: int = 10) -> list[ReferenceSet]:
    """The top-k passages for each original question (Table 4's baseline), one batched search."""
    found = search_passages(retriever, [ex.question for ex in examples], k)
    return [hits_set(ex, "bm25", passages) for ex, passages in zip(examples, found)]
