"""The record types every dataset loader, retriever and notebook share."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Paragraph:
    """A titled paragraph split into sentences; `is_supporting` marks gold evidence."""

    title: str
    sentences: list[str]
    is_supporting: bool = False

    @property
    def text(self) -> str:
        """The sentences joined by single spaces."""
        return " ".join(s.strip() for s in self.sentences if s.strip())


@dataclass
class Example:
    """One QA question or fact-verification claim, whatever dataset it came from.

    `answers` holds the gold answer first, then aliases (empty for claims);
    `label` is the claim label (SUPPORTS / REFUTES / NOT ENOUGH INFO) for FEVER;
    `supporting_facts` are (title, sentence index) pairs.
    """

    id: str
    question: str
    answers: list[str] = field(default_factory=list)
    label: str | None = None
    paragraphs: list[Paragraph] = field(default_factory=list)
    supporting_facts: list[tuple[str, int]] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def answer(self) -> str:
        """The gold answer (claim label for fact verification)."""
        if self.answers:
            return self.answers[0]
        return self.label or ""

    @property
    def supporting_titles(self) -> list[str]:
        """Titles of the supporting paragraphs, in order, without repeats."""
        titles = [p.title for p in self.paragraphs if p.is_supporting]
        titles += [t for t, _ in self.supporting_facts]
        return list(dict.fromkeys(titles))


@dataclass(frozen=True)
class Passage:
    """One retrievable unit of a corpus."""

    id: str
    title: str
    text: str


class DataError(ValueError):
    """Malformed or missing input data; the message names the file, line and field."""

    def __init__(self, path: Any, message: str, line: int | None = None, field: str | None = None):
        where = str(path)
        if line is not None:
            where += f", line {line}"
        if field is not None:
            where += f", field {field!r}"
        super().__init__(f"{where}: {message}")
        self.path, self.line, self.field = path, line, field


def text_list(values: Any, what: str, where: str, plural: str | None = None) -> list[str]:
    """`values` as a list of strings of valid Unicode; a lone string is refused (it would be used character by
    character), and so is a lone surrogate (no tokenizer or file can hold it).

    `what` names one item ("prompt", "premise") and `where` the caller ("generate()").
    """
    if isinstance(values, str) or not isinstance(values, Iterable):
        raise TypeError(f"{where} takes a list of {plural or what + 's'}, not {type(values).__name__} "
                        f"(wrap one {what} in a list)")
    values = list(values)
    for i, value in enumerate(values):
        if not isinstance(value, str):
            raise TypeError(f"{where}: {what} {i} is {type(value).__name__}, not str")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as err:
            raise ValueError(f"{where}: {what} {i} is not valid Unicode text ({err.reason} at character {err.start}: "
                             f"{value[max(0, err.start - 20):err.start]!r}...)") from None
    return values


def passage_string(p: Passage | Paragraph) -> str:
    """The text a retriever indexes for a passage: 'title: text' (title dropped when empty)."""
    return f"{p.title}: {p.text}" if p.title else p.text
