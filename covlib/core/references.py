"""Numbered references and the `[n]` citations that answers make to them (shared by the RAG papers).

A reference list is shown to a model as

    [1] Title: text
    [2] Title: text

and a cited answer marks each sentence with the ids it rests on: `... in 1998 [1][3].`
`parse_citations` reads `[1][2]`, `[1, 2]`, `[1; 2]`, `[12]` and ranges `[1-3]`; ids are
1-based and kept as written, so a citation to a reference that does not exist (`[7]` of
five) survives for the metrics to count. An id has at most three digits (`MAX_ID_DIGITS`; the
papers show 5 to 10 references): a bracket holding a longer number, as a year in "in the year
[1990]", is text, neither parsed nor stripped. `cited_sentences` splits an answer into sentences
with their citations, moving a citation written after the full stop (`... 1998.[1] Next`)
onto the sentence it closes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from covlib.core.records import Paragraph, Passage, passage_string
from covlib.core.text import split_sentences

MAX_ID_DIGITS = 3  # a cited id has at most 3 digits: "[1990]" is a bracketed year (or count), not a citation
_ID = r"\d{1,%d}" % MAX_ID_DIGITS
_GROUP = re.compile(r"\[\s*(" + _ID + r"(?:\s*(?:[,;]|[-–])\s*" + _ID + r")*)\s*\]")
_RUN = r"(?:\s*\[\s*" + _ID + r"(?:\s*(?:[,;]|[-–])\s*" + _ID + r")*\s*\])+"
_AFTER_STOP = re.compile(r"([.!?])(" + _RUN + r")")
_SPACES = re.compile(r"\s+")
_BEFORE_PUNCT = re.compile(r"\s+([.,;:!?])")
MAX_RANGE = 50  # a range longer than this ([1-999]) is read as its two end points


@dataclass(frozen=True)
class CitedSentence:
    """One answer sentence: its text without citation marks and the ids it cites, in order."""

    text: str
    citations: tuple[int, ...]


def format_references(refs: Sequence[Paragraph | Passage], template: str = "[{n}] {text}", sep: str = "\n") -> str:
    """The numbered reference list, n from 1: `template` per reference ('[n] Title: text' by default, the text as
    `records.passage_string` writes a passage), joined by `sep` (a paper's own layout, e.g. 'Reference [{n}]: {text}')."""
    return sep.join(template.format(n=n, text=passage_string(ref)) for n, ref in enumerate(refs, 1))


def _ids(group: str) -> list[int]:
    ids: list[int] = []
    for part in re.split(r"\s*[,;]\s*", group.strip()):
        bounds = [int(x) for x in re.split(r"\s*[-–]\s*", part) if x]
        if len(bounds) == 2 and 0 <= bounds[1] - bounds[0] <= MAX_RANGE:
            ids.extend(range(bounds[0], bounds[1] + 1))
        else:
            ids.extend(bounds)
    return ids


def parse_citations(text: str) -> list[int]:
    """The cited ids in order of first appearance: '[1][2]', '[1, 2]' and '[1-2]' all give [1, 2]."""
    return list(dict.fromkeys(i for m in _GROUP.finditer(text or "") for i in _ids(m.group(1))))


def strip_citations(text: str) -> str:
    """The text with its citation marks removed and the spacing they leave tidied."""
    return _BEFORE_PUNCT.sub(r"\1", _SPACES.sub(" ", _GROUP.sub(" ", text or ""))).strip()


def cited_sentences(answer: str) -> list[CitedSentence]:
    """The answer's sentences with their citations; sentences with no words left (a lone '[2].') are dropped."""
    text = _AFTER_STOP.sub(lambda m: m.group(2) + m.group(1), (answer or "").strip())
    out = []
    for sentence in split_sentences(text):
        plain = strip_citations(sentence)
        if re.search(r"\w", plain):
            out.append(CitedSentence(plain, tuple(parse_citations(sentence))))
    return out


def cited_ids(sentences: Sequence[CitedSentence]) -> list[int]:
    """Every id cited anywhere in the answer, in order of first appearance."""
    return list(dict.fromkeys(i for s in sentences for i in s.citations))
