"""FEVER claims as premise / hypothesis / label pairs for training NLI judges, and the decision threshold.

FEVER claims become NLI pairs the way FEVER-NLI (Nie et al., 2019) builds them:

| claim label      | premise                                                   | label         |
|------------------|-----------------------------------------------------------|---------------|
| SUPPORTS         | the sentences of one of the claim's own evidence sets     | entailment    |
| REFUTES          | the sentences of one of the claim's own evidence sets     | contradiction |
| NOT ENOUGH INFO  | BM25-retrieved evidence sentences of *other* claims       | neutral       |

* One evidence set per claim: the smallest (FEVER annotators marked each set as
  sufficient on its own), so premises are as short as the evidence allows.
* Neutral premises never contain a sentence of the claim's own evidence, nor of a
  claim with the same text (FEVER repeats some claims under several ids).
* Premise padding (`pad_fraction` of the pairs): 1..`max_pad` retrieved sentences of
  other claims are shuffled into the premise, so a judge learns that a fact buried in
  a longer text (an LLM's answer) still entails, and that a long on-topic text
  without it does not. Neutral premises draw their length from the same
  distribution, so length alone says nothing about the label.
* FEVER sentences are PTB-tokenised ("Aruba , Curaçao", "-LRB-"); `fever_text`
  turns them back into plain text, as the answers a judge will read are plain text.
* Splits (`split_fever`): the paper's 1,000 `sampled_ids` claims are the test set
  (the Verify-and-Edit test set), never trained on; a seeded fraction of the rest is
  the validation set; claims whose text equals a held-out claim's are dropped from
  training. Many FEVER claims share evidence sentences with other claims (mutations
  of one sentence), so held-out FEVER accuracy is optimistic for unseen text; pairs
  record their claim ids so a notebook can report the unseen-evidence subset.

`NLIPair`, pair files and the agent-labelled sets are in `covlib.nli.labelled`, FEVER text, evidence sets
and splits in `covlib.nli.fever`, the QA-paragraph pairs in `covlib.nli.paragraphs`; all are re-exported
here. Measuring a judge on labelled pairs is `covlib.nli.evaluation`.
"""

from __future__ import annotations

import random
import re
from typing import Sequence

import numpy as np

from covlib.core.records import Example
from covlib.data import load_fever
from covlib.nli.base import LABELS
from covlib.nli.fever import evidence_items, fever_evidence_sets, fever_text, norm_claim, other_sentences, split_fever
from covlib.nli.labelled import (FIXTURE, KEYFACT_PAIRS, NLIPair, balance_pairs, fixture_path, label_counts,
                                 load_credibility_fixture, load_keyfact_pairs, load_pairs, pairs_hash, save_pairs)
from covlib.nli.paragraphs import build_paragraph_pairs, perturb_number, qa_training_paragraph_pairs

__all__ = [
    "FEVER_TO_NLI", "LABELS", "build_fever_pairs", "build_hard_pairs", "build_key_fact_pairs", "calibrate_threshold",
    "fever_nli_splits", "fever_test_pairs",
    # re-exported from covlib.nli.fever, covlib.nli.labelled and covlib.nli.paragraphs
    "FIXTURE", "KEYFACT_PAIRS", "NLIPair", "balance_pairs", "build_paragraph_pairs", "evidence_items",
    "fever_evidence_sets", "fever_text", "fixture_path", "label_counts", "load_credibility_fixture",
    "load_keyfact_pairs", "load_pairs", "norm_claim", "other_sentences", "pairs_hash", "perturb_number",
    "qa_training_paragraph_pairs", "save_pairs", "split_fever",
]


FEVER_TO_NLI = {"SUPPORTS": "entailment", "REFUTES": "contradiction", "NOT ENOUGH INFO": "neutral"}


def build_fever_pairs(
    examples: Sequence[Example],
    corpus: Sequence[Example] | None = None,
    seed: int = 0,
    pad_fraction: float = 0.5,
    max_pad: int = 2,
    balance: bool = True,
    n_candidates: int = 20,
) -> list[NLIPair]:
    """NLI pairs from FEVER claims (table in the module docstring); neutral premises come from `corpus` claims' evidence."""
    rng = random.Random(seed)
    claims = [e for e in examples if e.label in FEVER_TO_NLI]
    others_of, n_sentences = other_sentences(claims, list(examples if corpus is None else corpus), n_candidates)
    if not n_sentences:
        raise ValueError("the corpus has no evidence sentences to retrieve neutral premises from")
    evidence_of = [fever_evidence_sets(e) for e in claims]
    set_sizes = [min(len(s) for s in sets) for sets in evidence_of if sets] or [1]

    pairs: list[NLIPair] = []
    for e, own_sets, others in zip(claims, evidence_of, others_of):
        label = FEVER_TO_NLI[e.label]
        n_pad = rng.randint(1, max_pad) if rng.random() < pad_fraction else 0
        if label == "neutral":
            if own_sets:
                raise ValueError(f"FEVER claim {e.id} is NOT ENOUGH INFO but has evidence sentences")
            want = rng.choice(set_sizes) + n_pad
            premise_sents = others[:want]
            rng.shuffle(premise_sents)
            kind = "retrieved"
        else:
            if not own_sets:
                raise ValueError(f"FEVER claim {e.id} is {e.label} but has no evidence sentences")
            premise_sents = list(min(own_sets, key=len))
            for s in others[:n_pad]:
                premise_sents.insert(rng.randint(0, len(premise_sents)), s)
            kind = "evidence+padding" if n_pad and len(others) else "evidence"
        if not premise_sents:
            continue  # BM25 found no other sentence sharing a word with this claim
        pairs.append(NLIPair(" ".join(premise_sents), e.question, label, f"fever:{e.id}", kind))
    return balance_pairs(pairs, seed) if balance else pairs


def build_key_fact_pairs(
    examples: Sequence[Example], corpus: Sequence[Example] | None = None, seed: int = 0, n_candidates: int = 20
) -> list[NLIPair]:
    """Pairs whose hypothesis is a whole evidence sentence, the shape of a key fact (balanced):

    | premise                                              | hypothesis          | label         |
    |------------------------------------------------------|---------------------|---------------|
    | the sentence among 1-2 retrieved others               | an evidence sentence| entailment    |
    | the SUPPORTS claim (much shorter than the sentence)   | its evidence        | neutral       |
    | other sentences of the same page (not the claim's own)| an evidence sentence| neutral       |
    | the REFUTES claim                                     | its evidence        | contradiction |
    | the sentence among retrieved others                   | it, a number changed| contradiction |

    A claim that a sentence supports says less than the sentence (FEVER claims are short),
    so the sentence does not follow from it; a claim the sentence refutes conflicts with it.
    """
    rng = random.Random(seed)
    corpus = list(examples if corpus is None else corpus)
    by_page: dict[str, set[str]] = {}
    for e in corpus:
        for page, text in (item for group in evidence_items(e) for item in group):
            if page:
                by_page.setdefault(page, set()).add(text)
    claims = [e for e in examples if e.label in ("SUPPORTS", "REFUTES") and e.paragraphs]
    others_of, _ = other_sentences(claims, corpus, n_candidates)
    pairs: list[NLIPair] = []
    for e, others in zip(claims, others_of):
        groups = evidence_items(e)
        page, fact = max(min(groups, key=len), key=lambda item: len(item[1]))
        own = {t for group in groups for _, t in group}
        source = f"fever:{e.id}"
        context = [fact] + others[: rng.randint(1, 2)]
        rng.shuffle(context)
        pairs.append(NLIPair(" ".join(context), fact, "entailment", source, "contains-fact"))
        if e.label == "REFUTES":
            pairs.append(NLIPair(e.question, fact, "contradiction", source, "refuted-claim-to-evidence"))
        elif len(fact.split()) >= 1.5 * len(e.question.split()):
            pairs.append(NLIPair(e.question, fact, "neutral", source, "claim-to-evidence"))
        mates = sorted(by_page.get(page, set()) - own - {fact})
        if page and mates:
            rng.shuffle(mates)
            pairs.append(NLIPair(" ".join(mates[: rng.randint(1, 3)]), fact, "neutral", source, "same-page"))
        changed = perturb_number(fact, rng)
        if changed is not None:
            pairs.append(NLIPair(" ".join(context), changed, "contradiction", source, "changed-number"))
    return balance_pairs(pairs, seed)


_DATE_PHRASE = re.compile(
    r",?\s+(?:in|on|since|from|by|during|until|around|circa|c\.)\s+(?:the\s+)?(?:early\s+|late\s+|mid-?)?"
    r"(?:(?:January|February|March|April|May|June|July|August|September|October|November|December)\s+)?"
    r"(?:[0-9]{1,2},?\s+)?(?:1[0-9]{3}|20[0-9]{2})s?\b"
)


def _page_name(page: str) -> str:
    """A FEVER page id as the name a sentence uses ('Savages_-LRB-2012_film-RRB-' -> 'Savages')."""
    return re.sub(r"\s*\([^)]*\)\s*$", "", fever_text(page.replace("_", " "))).strip()


def _drop_date(sentence: str) -> str | None:
    """The sentence without one of its date phrases ('..., born in 1956 in X' -> '..., born in X'); None when it has none."""
    found = list(_DATE_PHRASE.finditer(sentence))
    if not found:
        return None
    m = found[0]
    return re.sub(r"\s+([,.;:])", r"\1", sentence[: m.start()] + sentence[m.end() :]).strip()


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
    names = sorted({n for n in (_page_name(page) for page, _ in facts) if len(n) > 3})
    pairs: list[NLIPair] = []
    for page, fact in facts:
        name, source = _page_name(page), f"fever-page:{page}"
        if len(name) > 3 and name in fact:
            other = next((n for n in (rng.choice(names) for _ in range(5)) if n not in fact and name not in n), None)
            if other:
                pairs.append(NLIPair(fact.replace(name, other), fact, "neutral", source, "swapped-subject"))
        shorter = _drop_date(fact)
        if shorter and len(shorter.split()) >= min_words - 2:
            pairs.append(NLIPair(shorter, fact, "neutral", source, "dropped-date"))
            pairs.append(NLIPair(fact, shorter, "entailment", source, "date-dropped-hypothesis"))
    return pairs


def _load_claims() -> tuple[list[Example], list[str]]:
    """Every processed FEVER claim (file order) and the paper's sampled_ids."""
    return load_fever(ids=None), [e.id for e in load_fever(ids="default")]


def _test_pairs(claims: Sequence[Example], test_ids: Sequence[str], seed: int, pad_fraction: float) -> list[NLIPair]:
    wanted = set(test_ids)
    test = [e for e in claims if e.id in wanted]
    return build_fever_pairs(test, corpus=claims, seed=seed + 2, pad_fraction=pad_fraction, balance=False)


def fever_test_pairs(seed: int = 0, pad_fraction: float = 0.5) -> list[NLIPair]:
    """The held-out FEVER test pairs of `fever_nli_splits` (same seed), without building the training pairs."""
    return _test_pairs(*_load_claims(), seed=seed, pad_fraction=pad_fraction)


def fever_nli_splits(
    seed: int = 0, val_fraction: float = 0.1, pad_fraction: float = 0.5, key_fact_fraction: float = 0.0,
    qa_paragraphs: int = 0, hard_fraction: float = 0.0,
) -> dict[str, list[NLIPair]]:
    """Train / val / calibration / test NLI pairs from the processed FEVER file; test = the paper's sampled_ids claims.

    Train premises are retrieved from training claims only; val from every non-test
    claim; test from every claim (as a deployed judge would see any text), not balanced.
    `key_fact_fraction` adds that share (of the FEVER training pairs' count) of
    `build_key_fact_pairs` from the training claims, balanced by label; `hard_fraction`
    adds that share of `build_hard_pairs` (near misses). With `qa_paragraphs` = k > 0, the
    training set also gets k copies of the QA-training paragraph pairs
    (`qa_training_paragraph_pairs`). Calibration: the key-fact-shaped and near-miss pairs
    of the validation claims, where `calibrate_threshold` sets the judge's decision
    threshold; FEVER claims share evidence sentences, so many of these sentences (and 344
    of 2,423 whole pairs in the default build) also occur in training.
    """
    claims, test_ids = _load_claims()
    split = split_fever(claims, test_ids, val_fraction=val_fraction, seed=seed)
    non_test = split["train"] + split["val"]
    train = build_fever_pairs(split["train"], seed=seed, pad_fraction=pad_fraction)
    n_fever, rng = len(train), random.Random(seed)
    if key_fact_fraction > 0:
        extra = build_key_fact_pairs(split["train"], seed=seed)
        per_label = min(len(extra) // 3, round(key_fact_fraction * n_fever / 3))
        train += [p for label in LABELS for p in rng.sample([x for x in extra if x.label == label], per_label)]
    if hard_fraction > 0:
        hard = build_hard_pairs(split["train"], seed=seed)
        train += rng.sample(hard, min(len(hard), round(hard_fraction * n_fever)))
    if qa_paragraphs > 0:
        train += qa_training_paragraph_pairs(seed) * qa_paragraphs
    if key_fact_fraction > 0 or qa_paragraphs > 0 or hard_fraction > 0:
        random.Random(seed).shuffle(train)
    return {
        "train": train,
        "val": build_fever_pairs(split["val"], corpus=non_test, seed=seed + 1, pad_fraction=pad_fraction),
        "calibration": (build_key_fact_pairs(split["val"], corpus=non_test, seed=seed + 1)
                        + build_hard_pairs(split["val"], seed=seed + 1)),
        "test": _test_pairs(claims, test_ids, seed, pad_fraction),
    }


def calibrate_threshold(p_entail: Sequence[float], gold: Sequence[bool], prevalence: float,
                        grid: Sequence[float] = tuple(np.round(np.arange(0.34, 0.995, 0.01), 2))) -> dict[str, float]:
    """The P(entailment) threshold with the best F1 of 'entailed' once the pairs are reweighted so that a share
    `prevalence` of them is entailed (the share in the metric's real input), with that F1, precision and recall."""
    p, g = np.asarray(p_entail, dtype=float), np.asarray(gold, dtype=bool)
    if not 0 < prevalence < 1 or not g.any() or g.all():
        raise ValueError(f"calibration needs 0 < prevalence < 1 (got {prevalence}) and both classes among the pairs")
    w = np.where(g, prevalence / g.sum(), (1 - prevalence) / (~g).sum())
    best: dict[str, float] = {}
    for t in grid:
        said = p > t
        tp = float(w[said & g].sum())
        precision, recall = tp / max(float(w[said].sum()), 1e-12), tp / float(w[g].sum())
        f1 = 2 * precision * recall / (precision + recall) if tp else 0.0
        if not best or f1 > best["f1"]:
            best = {"threshold": float(t), "f1": f1, "precision": precision, "recall": recall}
    return best
