"""NLI training pairs from the Wikipedia paragraphs of QA training questions, and the changed-number perturbation.

A sentence of a paragraph is entailed by the paragraph, not entailed by the paragraph without it,
and contradicted when one of its years or small numbers is changed (`perturb_number`, also used for
FEVER key-fact pairs in `covlib.nli.pairs`).
"""

from __future__ import annotations

import random
import re
from typing import Sequence

from covlib.core.records import Example
from covlib.data import load_fewshot
from covlib.nli.labelled import NLIPair


_NUMBER = re.compile(r"\b(1[0-9]{3}|20[0-9]{2}|[1-9][0-9]?)\b")


def perturb_number(sentence: str, rng: random.Random) -> str | None:
    """The sentence with one of its years or small numbers changed (None when it has none)."""
    found = list(_NUMBER.finditer(sentence))
    if not found:
        return None
    m = rng.choice(found)
    value = int(m.group())
    new = value + rng.choice([-1, 1]) * rng.randint(1, 12 if value > 999 else max(2, value // 2))
    if new <= 0 or new == value:
        new = value + 3
    return sentence[: m.start()] + str(new) + sentence[m.end() :]


def build_paragraph_pairs(examples: Sequence[Example], seed: int = 0, min_words: int = 6) -> list[NLIPair]:
    """Pairs from the Wikipedia paragraphs of QA training questions, one sentence s of each paragraph:

    paragraph -> s (entailment: a fact inside a longer text); paragraph without s -> s (neutral:
    same topic and words, fact absent); paragraph -> s with a year or number changed
    (contradiction), when s has one. Paragraphs with fewer than two sentences are skipped.
    """
    rng = random.Random(seed)
    pairs: list[NLIPair] = []
    seen: set[tuple[str, ...]] = set()
    for e in examples:
        for para in e.paragraphs:
            sents = [x.strip() for x in para.sentences if x.strip()]
            if len(sents) < 2 or tuple(sents) in seen:
                continue
            seen.add(tuple(sents))
            candidates = [i for i, x in enumerate(sents) if len(x.split()) >= min_words]
            if not candidates:
                continue
            i = rng.choice(candidates)
            fact, rest = sents[i], sents[:i] + sents[i + 1 :]
            source = f"{e.metadata.get('dataset', 'qa')}:{e.id}:{para.title}"
            pairs.append(NLIPair(" ".join(sents), fact, "entailment", source, "paragraph"))
            pairs.append(NLIPair(" ".join(rest), fact, "neutral", source, "paragraph-minus-fact"))
            changed = perturb_number(fact, rng)
            if changed is not None:
                pairs.append(NLIPair(" ".join(sents), changed, "contradiction", source, "paragraph-changed-number"))
    return pairs


def qa_training_paragraph_pairs(seed: int = 0) -> list[NLIPair]:
    """`build_paragraph_pairs` over the QA *training* questions offline: the Adversarial HotpotQA and 2Wiki few-shot pools."""
    examples = [e for dataset in ("hotpotqa", "2wikimultihop") for e, _ in load_fewshot(dataset)]
    return build_paragraph_pairs(examples, seed=seed)
