"""The offline lexical heuristic `OverlapJudge`: approximate, NOT an NLI model.

Method and limits
-----------------
P(entailment) is the content-word recall of the hypothesis in the premise:
both texts are lowercased, tokenised into words and numbers, stopwords are
removed and words are crudely stemmed (possessive 's, plural s/es/ies,
-ed/-ing on long words); recall is the share of the hypothesis's content
words and numbers found in the premise. It is then multiplied down by
numbers (years included; "two" counts as 2) of the hypothesis missing from
the premise (x0.2 when all are missing) and by a negation mismatch (x0.3)
between the hypothesis and the premise sentence that overlaps it most.
Contradiction mass is the remaining (1 - P(entail)) times recall times a
conflict strength: a missing number where the premise states another number
of the same kind (year vs year), or a negation mismatch. Whatever is left is
neutral. It is deterministic and fast, but it is a lexical proxy, not
inference: it misses paraphrases and synonyms ("died" vs "passed away"),
ignores word order and roles ("A beat B" == "B beat A"), sees only explicit
negation words, and rewards premises that merely mention the same words.
Use it for plumbing and relative comparisons, never as a stand-in for the
paper's absolute TRUE-based numbers.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from covlib.nli.base import EMPTY_PAIR


STOPWORDS = frozenset(
    """a an the and or but if then than so as of at by for from in into on onto to with within about above
    after again against before below between during over under up down out off through via per
    is are was were be been being am has have had having do does did doing will would shall should can
    could may might must it its itself this that these those there here which who whom whose what when
    where why how i me my we our ours you your yours he him his she her hers they them their theirs
    one's also too very just only such same other another any all both each few more most some own
    s t d ll m re ve y o""".split()
)
NEGATIONS = frozenset("not no never none nobody nothing neither nor without cannot nowhere".split())
WORD_NUMBERS = {
    w: str(i)
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen twenty".split()
    )
}
_TOKEN = re.compile(r"\d+(?:[.,]\d+)*|[a-z]+(?:'[a-z]+)?")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


def _stem(word: str) -> str:
    for suffix in ("'s", "'"):
        if word.endswith(suffix):
            word = word[: -len(suffix)]
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 5 and word.endswith("ied"):
        return word[:-3] + "y"
    if len(word) > 5 and word.endswith(("sses", "shes", "ches", "xes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    if len(word) > 6 and word.endswith("ing"):
        return word[:-3]
    if len(word) > 5 and word.endswith("ed"):
        return word[:-2]
    return word


def _analyse(text: str) -> tuple[set[str], set[str], bool]:
    """(content word stems, normalised numbers, has negation) of a text."""
    words: set[str] = set()
    numbers: set[str] = set()
    negated = False
    for tok in _TOKEN.findall(text.lower()):
        if tok[0].isdigit():
            numbers.add(tok.replace(",", ""))
        elif tok in WORD_NUMBERS:
            numbers.add(WORD_NUMBERS[tok])
        elif tok in NEGATIONS or tok.endswith("n't"):
            negated = True
        elif tok not in STOPWORDS:
            words.add(_stem(tok))
    return words, numbers, negated


def _is_year(number: str) -> bool:
    return len(number) == 4 and number.isdigit() and 1000 <= int(number) <= 2100


def _best_sentence_negated(premise: str, content: set[str]) -> bool:
    """Whether the premise sentence sharing most content with the hypothesis has a negation."""
    best, best_overlap = False, -1
    for sentence in _SENTENCE.split(premise):
        words, numbers, negated = _analyse(sentence)
        overlap = len(content & (words | numbers))
        if sentence.strip() and overlap > best_overlap:
            best, best_overlap = negated, overlap
    return best


class OverlapJudge:
    """APPROXIMATE, not NLI: content-word recall with number and negation penalties (see module docstring)."""

    name = "approx-overlap (not NLI)"

    def __init__(self, number_penalty: float = 0.8, negation_factor: float = 0.3, conflict_strength: float = 0.8):
        self.number_penalty = number_penalty
        self.negation_factor = negation_factor
        self.conflict_strength = conflict_strength

    @property
    def config(self) -> dict[str, Any]:
        """Version and weights of the heuristic (bump version when the method changes)."""
        return {
            "version": 2,  # 2: a hypothesis with no content word is neutral (was uniform, argmax "entailment")
            "number_penalty": self.number_penalty,
            "negation_factor": self.negation_factor,
            "conflict_strength": self.conflict_strength,
        }

    def score_pair(self, premise: str, hypothesis: str) -> tuple[float, float, float]:
        """(entailment, neutral, contradiction) for one pair."""
        h_words, h_nums, h_neg = _analyse(hypothesis)
        if not h_words and not h_nums:
            return EMPTY_PAIR  # nothing to check ("It is."): neutral, never an argmax "entailment"
        p_words, p_nums, _ = _analyse(premise)
        content = h_words | h_nums
        recall = len(content & (p_words | p_nums)) / len(content)

        missing = h_nums - p_nums
        miss_frac = len(missing) / len(h_nums) if h_nums else 0.0
        conflicts = [n for n in missing if any(_is_year(n) == _is_year(m) for m in p_nums)]
        conflict_frac = len(conflicts) / len(h_nums) if h_nums else 0.0

        negation_mismatch = h_neg != _best_sentence_negated(premise, content)

        entail = recall * (1 - self.number_penalty * miss_frac)
        if negation_mismatch:
            entail *= self.negation_factor
        strength = min(1.0, self.conflict_strength * (conflict_frac + float(negation_mismatch)))
        contra = (1 - entail) * recall * strength
        return (entail, 1 - entail - contra, contra)

    def probabilities(self, premises: list[str], hypotheses: list[str]) -> np.ndarray:
        """(N, 3) heuristic probabilities."""
        rows = [self.score_pair(p, h) for p, h in zip(premises, hypotheses)]
        return np.array(rows, dtype=float).reshape(len(rows), 3)
