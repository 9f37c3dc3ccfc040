"""Sentence splitting shared by the data readers, retrieval and the papers' methods."""

from __future__ import annotations

import re
import unicodedata

# Words that end with a period without ending the sentence. Title words never end
# one; the "numbered" ones only when a digit follows ("No. 5", "Jan. 12", "c. 1500").
# Jr./Sr. only hold before "(" ("Carey Spicer, Jr. (1909 - 1996)"). Deliberately absent:
# Inc, Ltd, Co, Corp, etc (they often do end a sentence).
# Words any paraphrase may share with its source: articles, prepositions, pronouns, auxiliaries, conjunctions.
FUNCTION_WORDS = frozenset("""a an the this that these those it its he him his she her they them their who whom whose
which what when where s of in on at to for from by with as into onto about than then and or but nor not no both
either is are was were be been being am has have had do does did will would can could may might shall should also
there here one during after before between through under over within without near while until since via across
against among around upon""".split())

_WORD = re.compile(r"\w+")


def overlap_words(text: str) -> list[str]:
    """A text's words as overlap measures count them: runs of letters, digits and _, NFC and lowercased."""
    return _WORD.findall(unicodedata.normalize("NFC", text).lower())


_ABBREVIATIONS = frozenset(
    "mr mrs ms messrs dr prof rev fr hon st ste mt ft gen col lt maj sgt capt cmdr adm "
    "gov sen rep pres supt vs cf al approx dept univ assn".split()
)


_NUMBERED_ABBREVIATIONS = frozenset(
    "no nos vol vols pp fig figs art ch op ca jan feb mar apr jun jul aug sep sept oct nov dec".split()
)


# A run of sentence punctuation, optional closing quotes/brackets, then whitespace.
_CANDIDATE_END = re.compile(r"([.!?]+)[\"'”’)\]]*\s+")


def _ends_sentence(punct: str, previous: str, following: str) -> bool:
    """Whether the punctuation after `previous` ends a sentence, given the text that follows."""
    if not following or following[0].islower():
        return False
    if punct != ".":
        return True
    word = previous.lstrip("([{\"'“‘")
    if len(word) == 1 and word.isalpha():  # initials "J. K. Rowling", "(b. 1950)"
        return False
    if "." in word:  # "U.S.", "e.g.", "a.m.", "J.R.R."
        return False
    lowered = word.lower()
    if lowered in _ABBREVIATIONS:
        return False
    if lowered in ("jr", "sr") and following[0] == "(":
        return False
    return not (lowered in _NUMBERED_ABBREVIATIONS and following[0].isdigit())


def split_sentences(text: str) -> list[str]:
    """Split English text into sentences with a small regex rule set (abbreviation-, initial- and decimal-aware).

    A sentence ends at `.`, `!` or `?` (plus closing quotes/brackets) followed by
    whitespace and a character that is not lower-case, except after an initial
    ("J. K."), a dotted abbreviation ("U.S.", "e.g."), a title ("Dr.", "St.", "Mt."),
    "Jr."/"Sr." before "(", or a numbered abbreviation before a digit ("No. 5", "Jan. 12"). Decimals ("3.5")
    never split because no space follows the point. Known limits: a sentence that
    really ends with "U.S." or a single capital letter is joined to the next one.
    """
    sentences: list[str] = []
    start = 0
    for match in _CANDIDATE_END.finditer(text):
        before = text[start : match.start()].split()
        previous = before[-1] if before else ""
        if _ends_sentence(match.group(1), previous, text[match.end() :]):
            sentences.append(text[start : match.end()].strip())
            start = match.end()
    rest = text[start:].strip()
    if rest:
        sentences.append(rest)
    return [s for s in sentences if s]
