"""FEVER claims as NLI material: plain text, evidence sets, splits, other claims' sentences.

FEVER sentences are PTB-tokenised ("Aruba , Curaçao", "-LRB-"); `fever_text` turns them back into
plain text. `split_fever` holds out the paper's sampled claims (test) and a seeded validation share;
`other_sentences` retrieves, by BM25, evidence sentences of *other* claims (never the claim's own,
nor a same-text claim's), the premises of neutral pairs and the padding of longer premises.
`norm_sentence`, `sentence_index` and `sentences_in` find known sentences inside longer texts (how
training pairs are kept apart from held-out ones).
"""

from __future__ import annotations

import random
import re
from typing import Iterable, Sequence

from covlib.core.records import Example, Passage
from covlib.retrieval import BM25Retriever


# --------------------------------------------------------------------------- FEVER text

_PTB = [
    (re.compile(r"-LRB-\s*"), "("),
    (re.compile(r"\s*-RRB-"), ")"),
    (re.compile(r"-LSB-\s*"), "["),
    (re.compile(r"\s*-RSB-"), "]"),
    (re.compile(r"-LCB-\s*"), "{"),
    (re.compile(r"\s*-RCB-"), "}"),
    (re.compile(r"-COLON-"), ":"),
    (re.compile(r"``\s*|\s*''"), '"'),
    (re.compile(r"\s+([,.;:!?%)\]}])"), r"\1"),
    (re.compile(r"([(\[{$])\s+"), r"\1"),
    (re.compile(r"\s+('s|'re|'ve|'ll|'d|'m|n't)\b"), r"\1"),
    (re.compile(r"\s+--\s+"), " -- "),
    (re.compile(r"\(\s*[;,]?\s*\)"), ""),
    (re.compile(r"\s{2,}"), " "),
]


def fever_text(sentence: str) -> str:
    """A PTB-tokenised FEVER sentence as plain text ('Aruba , Curaçao -LRB- 1 -RRB- .' -> 'Aruba, Curaçao (1).')."""
    text = sentence
    for pattern, repl in _PTB:
        text = pattern.sub(repl, text)
    return text.strip()


def evidence_items(example: Example) -> list[list[tuple[str, str]]]:
    """The claim's evidence sets as lists of (page, plain-text sentence); page '' when unaligned."""
    sentences = [s for p in example.paragraphs for s in p.sentences]
    if not sentences:
        return []
    facts: list[tuple] = []
    groups: list[list[tuple]] = []
    for group in example.metadata.get("evidence", []):
        keys = [(item[2], item[3]) for item in group if isinstance(item[2], str) and isinstance(item[3], int)]
        for key in keys:
            if key not in facts:
                facts.append(key)
        if keys:
            groups.append(list(dict.fromkeys(keys)))
    if len(facts) != len(sentences):  # `pars` does not line up with the evidence items: keep them whole
        return [[("", fever_text(s)) for s in sentences]]
    text = {key: fever_text(s) for key, s in zip(facts, sentences)}
    sets = [tuple((k[0], text[k]) for k in g) for g in groups]
    return [list(s) for s in dict.fromkeys(sets)]


def fever_evidence_sets(example: Example) -> list[list[str]]:
    """The claim's evidence sets as lists of plain-text sentences (all sentences as one set if unaligned)."""
    return [[text for _, text in group] for group in evidence_items(example)]


def norm_claim(text: str) -> str:
    """A claim's text lowercased, each run of non-word characters one space (FEVER repeats claims)."""
    return re.sub(r"\W+", " ", text.lower()).strip()


def norm_sentence(text: str) -> str:
    """A sentence as compared across pair sets: `fever_text`, lower-cased, whitespace collapsed."""
    return " ".join(fever_text(text).lower().split())


SentenceIndex = dict[tuple[str, ...], set[str]]


def sentence_index(sentences: Iterable[str], min_words: int = 4) -> SentenceIndex:
    """Normalised sentences of `min_words` words or more, keyed by their first `min_words` words (for `sentences_in`)."""
    index: SentenceIndex = {}
    for sentence in {norm_sentence(s) for s in sentences}:
        words = sentence.split(" ")
        if len(words) >= min_words:
            index.setdefault(tuple(words[:min_words]), set()).add(sentence)
    return index


def sentences_in(text: str, index: SentenceIndex) -> set[str]:
    """The indexed sentences that `text` (lower-cased, whitespace collapsed; pair texts are plain text already)
    holds whole, from a word's start to a word's end, wherever they are (a sentence without a full stop too)."""
    words = " ".join(text.lower().split()).split(" ")
    k = len(next(iter(index), ()))
    found: set[str] = set()
    for i in range(len(words) - k + 1) if k else ():
        for sentence in index.get(tuple(words[i:i + k]), ()):
            n = sentence.count(" ") + 1
            if " ".join(words[i:i + n]) == sentence:
                found.add(sentence)
    return found


# --------------------------------------------------------------------------- splits


def split_fever(
    examples: Sequence[Example], test_ids: Iterable[str], val_fraction: float = 0.1, seed: int = 0
) -> dict[str, list[Example]]:
    """{'train', 'val', 'test'}: test = `test_ids` claims; val = a seeded fraction of the rest; duplicates of held-out claims dropped from train."""
    if not 0 <= val_fraction < 1:
        raise ValueError(f"val_fraction must be in [0, 1), got {val_fraction}")
    test_ids = {str(i) for i in test_ids}
    known = {e.id for e in examples}
    missing = sorted(test_ids - known)
    if missing:
        raise ValueError(f"{len(missing)} test ids are not among the claims, e.g. {missing[:3]}")
    test = [e for e in examples if e.id in test_ids]
    rest = [e for e in examples if e.id not in test_ids]
    order = list(range(len(rest)))
    random.Random(seed).shuffle(order)
    n_val = round(val_fraction * len(rest))
    val_idx = set(order[:n_val])
    val = [e for i, e in enumerate(rest) if i in val_idx]
    held_out = {norm_claim(e.question) for e in test + val}
    test_claims = {norm_claim(e.question) for e in test}
    val = [e for e in val if norm_claim(e.question) not in test_claims]
    train = [e for i, e in enumerate(rest) if i not in val_idx and norm_claim(e.question) not in held_out]
    return {"train": train, "val": val, "test": test}


def _sentence_index(examples: Sequence[Example]) -> tuple[list[Passage], dict[str, set[str]]]:
    """Distinct evidence sentences as passages, and for each sentence the normalised claims it is evidence of."""
    owners: dict[str, set[str]] = {}
    for e in examples:  # dict, not set: the corpus order (BM25's tie-break) must not depend on the hash seed
        for s in dict.fromkeys(s for group in fever_evidence_sets(e) for s in group):
            owners.setdefault(s, set()).add(norm_claim(e.question))
    passages = [Passage(str(i), "", s) for i, s in enumerate(owners)]
    return passages, owners


def other_sentences(claims: Sequence[Example], corpus: Sequence[Example], k: int) -> tuple[list[list[str]], int]:
    """For each claim, the BM25 top-k evidence sentences of *other* corpus claims (never its own evidence, nor a
    same-text claim's), best first; and the number of distinct sentences searched."""
    passages, owners = _sentence_index(corpus)
    hits = BM25Retriever(passages).search_batch([e.question for e in claims], k=k)
    others = []
    for e, ranked in zip(claims, hits):
        own = {s for group in fever_evidence_sets(e) for s in group}
        claim = norm_claim(e.question)
        others.append([h.text for h in ranked if h.text not in own and claim not in owners.get(h.text, set())])
    return others, len(passages)
