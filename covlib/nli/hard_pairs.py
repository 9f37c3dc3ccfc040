"""Near-miss NLI pairs from FEVER evidence sentences: a swapped subject, a dropped date phrase.

`drop_date` removes one whole date phrase from a sentence, or gives None when it cannot do so
cleanly: a prepositional phrase with its range as a whole ("from 1913 to 1921", "between 1571
and 1878", "in 221 -- 206 BC", "on July 9, 1956", "in the early 1990s"), a sentence-opening one
("In April 1614, she ..." -> "She ..."), a date in parentheses ("(born 7 March 1970)"), or an
attributive year ("a 2003 American comedy" -> "an American comedy"; after "the" or a possessive
only before a lower-case word: "the 2008 BET Awards" names one edition). A result that would
leave a dangling preposition or dash, half a range, doubled punctuation or empty parentheses is
refused, and so is any but an attributive year in a sentence with a superlative or "only"
("the best album in 2009"), where the shorter sentence would say more than the longer one.
`swap_subject` replaces a name as a whole word only ("Ra" never inside "Rachel").
"""

from __future__ import annotations

import random
import re
from typing import Sequence

from covlib.core.records import Example
from covlib.nli.fever import evidence_items, fever_text
from covlib.nli.labelled import NLIPair

__all__ = ["build_hard_pairs", "drop_date", "page_name", "swap_subject"]


# --------------------------------------------------------------------------- date phrases

_MONTH = (r"(?:January|February|March|April|May|June|July|August|September|October|November|December"
          r"|Jan\.|Feb\.|Mar\.|Apr\.|Jun\.|Jul\.|Aug\.|Sept?\.|Oct\.|Nov\.|Dec\.)")
_ERA = r"(?:BCE|BC|CE|AD)"
_YEAR = rf"(?:[0-9]{{1,4}}\s+{_ERA}\b|AD\s+[0-9]{{1,4}}\b|(?:1[0-9]{{3}}|20[0-9]{{2}})s?\b)"
_DAY = r"[0-9]{1,2}(?:st|nd|rd|th)?"
_DATE = rf"(?:(?:c\.|ca\.|circa|around)\s+)?(?:(?:{_DAY}\s+)?{_MONTH}\s+(?:{_DAY},?\s+)?)?{_YEAR}"
_LATER = r"(?:the\s+)?present(?:\s+day)?"
_RANGE = (rf"(?:{_DATE}|[0-9]{{1,4}}(?=\s*(?:--|–|—|-|to|until)\s*[0-9]{{1,4}}\s+{_ERA}))"
          rf"(?:\s*(?:--|–|—|-)\s*(?:{_DATE}|[0-9]{{2}}\b|{_LATER})"
          rf"|\s+(?:to|until|till|through)\s+(?:{_DATE}|{_LATER}))?")
_SCOPE = (r"(?:the\s+)?(?:(?:early|late|mid)(?:\s+|-)|(?:end|beginning|start|middle|turn|summer|spring|autumn|fall|winter)"
          r"\s+of\s+(?:the\s+)?)?")
_PREP = r"(?:in|on|since|from|by|during|until|till|around|circa|c\.|as\s+of|at(?=\s+the\s+\w+\s+of))"
_PHRASE = (rf"(?:(?i:between)\s+{_DATE}\s+and\s+{_DATE}"
           rf"|(?i:{_PREP})\s+{_SCOPE}{_RANGE}(?:,?\s+(?:and|or)\s+(?:the\s+)?{_SCOPE}{_RANGE})?)")
_FUNCTION = ("and|or|but|nor|so|yet|to|until|till|through|as|because|when|where|while|which|who|whom|whose|that|than|"
             "of|in|on|at|by|for|from|with|after|before|since|during|against|under|into|he|she|it|they|we|was|were|"
             "is|are|be|been|had|has|have|did|does")
_MORE = rf"\s*(?:--|–|—|-|\b(?:to|until|till|through|and|or)\b)\s*(?:the\s+)?(?:{_DAY}\s+)?(?:{_MONTH}\s+)?[0-9]"
_AFTER_OK = (rf"(?!{_MORE})"  # never half a range or list
             rf"(?=\s*(?:$|[,.;:!?()\]]|--|–|—)|\s+(?:{_FUNCTION}|the|a|an|his|her|its|their)\b|\s+[A-Z])")

_MID = re.compile(rf"(?P<lead>,)?\s+{_PHRASE}{_AFTER_OK}")
_START = re.compile(rf"^{_PHRASE}(?!{_MORE})\s*,\s*")
_PAREN = re.compile(rf"\s*\((?:(?:born|b\.)\s+)?{_RANGE}\)")
_ATTRIBUTIVE = re.compile(
    rf"\b(?P<det>[Tt]he|[Aa]n?|[Hh]is|[Hh]er|[Ii]ts|[Tt]heir|[Tt]his|[Tt]hat|\w+'s)\s+"
    rf"(?P<date>(?:1[0-9]{{3}}|20[0-9]{{2}})s?(?:\s*(?:--|–|—|-)\s*(?:[0-9]{{4}}|[0-9]{{2}}))?)\s+"
    rf"(?=(?!(?:{_FUNCTION})\b)(?P<next>[A-Za-z]))")

_SUPERLATIVE = re.compile(
    r"\b(?:the\s+(?:first|last)|only|most|least|best|worst|top|record|largest|biggest|highest|lowest|oldest|youngest"
    r"|longest|shortest|greatest|earliest|latest|fastest|smallest|richest|tallest|deepest|busiest|heaviest|strongest"
    r"|wealthiest|hottest|coldest|widest|newest|most-\w+|best-\w+|highest-\w+)\b", re.I)
_SEAM_LEFT = re.compile(r"(?:--|–|—|-|\b(?i:from|between|to|and|or|until|till|since|in|on|of|by|at|the|a|an|during))\s*$")
_SEAM_RIGHT = re.compile(r"^\s*(?:[,.;:)]|$)")
_MALFORMED = [re.compile(p) for p in (
    r"\s{2}", r"\s[,.;:)]", r",\s*[,.;:]", r"\(\s*[),;]", r"[,;]\s*\)",
    r"(?:^|\s)(?:--|–|—|-)(?:\s*[,.;:)]|\s*$)", r"(?:^|[\s(])(?:--|–|—|-)\s",
    r"\b(?i:from|to|in|on|at|of|by|since|until|between|during|the|a|an)\s*(?:[,.;:)]|$)",
    r"\b(?i:from|between)\s+(?:to|and|until|--|–)\b",
)]


def page_name(page: str) -> str:
    """A FEVER page id as the name a sentence uses ('Savages_-LRB-2012_film-RRB-' -> 'Savages')."""
    return re.sub(r"\s*\([^)]*\)\s*$", "", fever_text(page.replace("_", " "))).strip()


def _article(det: str, word: str) -> str:
    """'a' or 'an' (same case) as `word` needs; any other determiner unchanged."""
    if det.lower() not in ("a", "an"):
        return det
    vowel = word[:1].lower() in "aeiou" and not re.match(r"(?i)(?:uni|use|usu|uti|eu|one|ur[aeiou])", word)
    new = "an" if vowel else "a"
    return new.capitalize() if det[0].isupper() else new


def _malformed_count(text: str) -> int:
    """How many malformations (dangling preposition or dash, doubled punctuation, empty parentheses) `text` has."""
    return sum(len(p.findall(text)) for p in _MALFORMED)


def _clean(original: str, left: str, right: str) -> str | None:
    """left + right as one sentence, or None when the cut left it malformed."""
    if _SEAM_RIGHT.match(right) and _SEAM_LEFT.search(left):
        return None
    if re.match(_MORE, right):
        return None
    left, right = left.rstrip(), right.lstrip()
    text = (left + ("" if not left or right[:1] in ",.;:!?)]" else " ") + right).strip()
    return text if text and _malformed_count(text) <= _malformed_count(original) else None


def _says_more_without(sentence: str) -> bool:
    """A superlative or 'only' sentence ('the best film in 1994'): without its date it would say more, not less."""
    return bool(_SUPERLATIVE.search(sentence))


def _mid_candidate(sentence: str, m: re.Match) -> str | None:
    """The sentence without a mid-sentence date phrase; a phrase between two commas takes both."""
    right = sentence[m.end():]
    if m.group("lead") and right.startswith(","):
        right = right[1:]
    return _clean(sentence, sentence[: m.start()], right)


def _start_candidate(sentence: str, m: re.Match) -> str | None:
    """The sentence without its opening date phrase, capitalised."""
    rest = sentence[m.end():]
    return _clean(sentence, "", rest[:1].upper() + rest[1:]) if rest[:1].isalpha() else None


def _attributive_candidate(sentence: str, m: re.Match) -> str | None:
    """The sentence without an attributive year ('the 1994 film' -> 'the film'), a/an agreeing with the next word;
    after 'the' or a possessive only before a lower-case word ('the 2008 BET Awards' is one edition of a series)."""
    if m.group("det").lower() not in ("a", "an") and m.group("next").isupper():
        return None
    det = _article(m.group("det"), sentence[m.end():])
    return _clean(sentence, sentence[: m.start()] + det, sentence[m.end():])


def _candidates(sentence: str) -> list[tuple[int, bool, str | None]]:
    """(start, attributive, shorter sentence or None) for every date phrase, in reading order."""
    found = [(m.start(), False, _mid_candidate(sentence, m)) for m in _MID.finditer(sentence)]
    found += [(m.start(), False, _start_candidate(sentence, m)) for m in _START.finditer(sentence)]
    found += [(m.start(), False, _clean(sentence, sentence[: m.start()], sentence[m.end():]))
              for m in _PAREN.finditer(sentence)]
    found += [(m.start(), True, _attributive_candidate(sentence, m)) for m in _ATTRIBUTIVE.finditer(sentence)]
    return sorted(found, key=lambda c: c[0])


def drop_date(sentence: str) -> str | None:
    """The sentence without its first cleanly droppable date phrase ('born on July 9, 1956 in X' -> 'born in X'),
    else None."""
    for _, attributive, shorter in _candidates(sentence):
        if shorter and (attributive or not _says_more_without(sentence)):
            return shorter
    return None


# --------------------------------------------------------------------------- subject swap


def _whole_word(name: str) -> re.Pattern:
    """`name` as a whole word: not inside another word ('Ra' never matches 'Rachel')."""
    return re.compile(rf"(?<!\w){re.escape(name)}(?!\w)")


def swap_subject(fact: str, name: str, other: str) -> str | None:
    """`fact` with every whole-word `name` replaced by `other`; None when `name` is not there as a whole word."""
    pattern = _whole_word(name)
    return pattern.sub(lambda _: other, fact) if pattern.search(fact) else None


def _other_name(fact: str, name: str, names: Sequence[str], rng: random.Random) -> str | None:
    """Another page's name, not in the fact and not containing `name` (five seeded draws)."""
    return next((n for n in (rng.choice(names) for _ in range(5)) if n not in fact and name not in n), None)


def build_hard_pairs(examples: Sequence[Example], seed: int = 0, min_words: int = 6) -> list[NLIPair]:
    """Near-miss pairs, the errors a judge makes on key facts (on-topic answers that do not state the fact):

    | premise                                            | hypothesis                 | label      |
    |----------------------------------------------------|----------------------------|------------|
    | an evidence sentence with its subject's name swapped| the sentence               | neutral    |
    | the sentence with a date phrase dropped             | the sentence               | neutral    |
    | the sentence                                        | it with the date dropped   | entailment |

    A sentence about another entity with the same predicate ('Mamata Banerjee Inc. (EA) is an
    American video game company' for 'Electronic Arts Inc. (EA) is ...'), or one that leaves out
    the date a key fact states, shares nearly every word with the fact and still does not entail it; the
    third row is the reverse direction, which does. Not balanced: two neutral kinds to one
    entailment kind, as near misses outnumber entailed facts in real answers.
    """
    rng = random.Random(seed)
    facts = list(dict.fromkeys(
        (page, text) for e in examples if e.label in ("SUPPORTS", "REFUTES")
        for group in evidence_items(e) for page, text in group if page and len(text.split()) >= min_words))
    names = sorted({n for n in (page_name(page) for page, _ in facts) if len(n) > 3})
    pairs: list[NLIPair] = []
    for page, fact in facts:
        name, source = page_name(page), f"fever-page:{page}"
        if len(name) > 3 and _whole_word(name).search(fact):
            other = _other_name(fact, name, names, rng)
            swapped = swap_subject(fact, name, other) if other else None
            if swapped:
                pairs.append(NLIPair(swapped, fact, "neutral", source, "swapped-subject"))
        shorter = drop_date(fact)
        if shorter and len(shorter.split()) >= min_words - 2:
            pairs.append(NLIPair(shorter, fact, "neutral", source, "dropped-date"))
            pairs.append(NLIPair(fact, shorter, "entailment", source, "date-dropped-hypothesis"))
    return pairs
