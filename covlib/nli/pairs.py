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
* Held-out sentences (`fever_nli_build`): every training pair whose premise or hypothesis
  holds a sentence (`norm_sentence`) of a calibration or test pair is dropped from training,
  so neither set is judged on text trained on; the held-out sets stay as they are.

`NLIPair`, pair files and the agent-labelled sets are in `covlib.nli.labelled`, FEVER text, evidence sets
and splits in `covlib.nli.fever`, the near misses in `covlib.nli.hard_pairs`, the QA-paragraph and
multi-hop pairs in `covlib.nli.paragraphs`; all are re-exported here. Measuring a judge on labelled pairs
is `covlib.nli.evaluation`.
"""

from __future__ import annotations

import random
from typing import Iterable, Sequence

import numpy as np

from covlib.core.records import Example
from covlib.data import load_fever
from covlib.nli.base import LABELS
from covlib.nli.fever import (SentenceIndex, evidence_items, fever_evidence_sets, fever_text, norm_claim,
                              norm_sentence, other_sentences, sentence_index, sentences_in, split_fever)
from covlib.nli.hard_pairs import build_hard_pairs, drop_date, page_name, swap_subject
from covlib.nli.labelled import (FIXTURE, KEYFACT_PAIRS, NLIPair, balance_pairs, fixture_path, label_counts,
                                 load_credibility_fixture, load_keyfact_pairs, load_pairs, pairs_hash, save_pairs)
from covlib.nli.paragraphs import (build_adversarial_pairs, build_multihop_pairs, build_paragraph_pairs,
                                   multihop_training_questions, perturb_number, qa_training_paragraph_pairs)

__all__ = [
    "FEVER_TO_NLI", "LABELS", "build_fever_pairs", "build_key_fact_pairs", "calibrate_threshold", "drop_held_out",
    "fever_nli_build", "fever_nli_splits", "fever_test_pairs", "held_out_sentences",
    # re-exported from covlib.nli.fever, covlib.nli.hard_pairs, covlib.nli.labelled and covlib.nli.paragraphs
    "FIXTURE", "KEYFACT_PAIRS", "NLIPair", "balance_pairs", "build_adversarial_pairs", "build_hard_pairs",
    "build_multihop_pairs",
    "build_paragraph_pairs", "drop_date", "evidence_items", "fever_evidence_sets", "fever_text", "fixture_path",
    "label_counts", "load_credibility_fixture", "load_keyfact_pairs", "load_pairs", "multihop_training_questions",
    "norm_claim", "norm_sentence", "other_sentences", "page_name", "pairs_hash", "perturb_number",
    "qa_training_paragraph_pairs", "save_pairs", "sentence_index", "sentences_in", "split_fever", "swap_subject",
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


def held_out_sentences(pairs: Sequence[NLIPair], known: Iterable[str]) -> SentenceIndex:
    """The `known` sentences that occur in the pairs' premises or hypotheses, and those texts whole, as an index."""
    index = sentence_index(known)
    found = {s for p in pairs for text in (p.premise, p.hypothesis) for s in sentences_in(text, index)}
    return sentence_index(found | {t for p in pairs for t in (p.premise, p.hypothesis)})


def drop_held_out(pairs: Sequence[NLIPair], blocked: SentenceIndex) -> list[NLIPair]:
    """The pairs whose premise and hypothesis hold no `blocked` sentence (`held_out_sentences`), in order."""
    hit = {text: bool(sentences_in(text, blocked)) for text in {t for p in pairs for t in (p.premise, p.hypothesis)}}
    return [p for p in pairs if not (hit[p.premise] or hit[p.hypothesis])]


def _evidence_sentences(claims: Sequence[Example]) -> set[str]:
    """Every evidence sentence of the claims (plain text): what counts as a sentence of a held-out pair."""
    return {text for e in claims for group in evidence_items(e) for _, text in group}


def _held_out_pairs(claims: list[Example], test_ids: list[str], split: dict[str, list[Example]], seed: int,
                    pad_fraction: float) -> dict[str, list[NLIPair]]:
    """The validation, calibration and test pairs (`fever_nli_splits`)."""
    non_test = split["train"] + split["val"]
    return {
        "val": build_fever_pairs(split["val"], corpus=non_test, seed=seed + 1, pad_fraction=pad_fraction),
        "calibration": (build_key_fact_pairs(split["val"], corpus=non_test, seed=seed + 1)
                        + build_hard_pairs(split["val"], seed=seed + 1)),
        "test": _test_pairs(claims, test_ids, seed, pad_fraction),
    }


def _sample_per_label(pairs: Sequence[NLIPair], per_label: int, rng: random.Random) -> list[NLIPair]:
    """`per_label` pairs of each label (at most the rarest label's count), seeded."""
    by_label = {label: [p for p in pairs if p.label == label] for label in LABELS}
    n = min(per_label, *(len(v) for v in by_label.values()))
    return [p for label in LABELS for p in rng.sample(by_label[label], n)]


DEDUP = ("held-out", "training", "none")  # which side loses the pairs that share a sentence (`fever_nli_build`)


def fever_nli_build(
    seed: int = 0, val_fraction: float = 0.1, pad_fraction: float = 0.5, key_fact_fraction: float = 0.0,
    qa_paragraphs: int = 0, hard_fraction: float = 0.0, multihop_fraction: float = 0.0, dedup: str = "held-out",
    adversarial: int = 0,
) -> tuple[dict[str, list[NLIPair]], dict]:
    """`fever_nli_splits` and what de-duplication dropped: ({'train', 'val', 'calibration', 'test'}, counts).

    `dedup` "held-out" (the default) keeps every training pair and drops from calibration each pair that holds a
    training sentence; the test keeps the paper's 1,000 claims, and `test_unseen` is its part whose text holds no
    training sentence (29 pairs at the defaults: FEVER claims are mutations of few sentences, 3,639 for 9,999
    claims, and neutral premises are other claims' evidence). "training" drops on the training side instead (about
    1,700 of 15,000 training pairs stay); "none" drops nothing. The counts: per training source, the pairs `built`
    and those holding a calibration or test sentence (`dropped`), and the held-out pairs holding a training one.
    """
    if dedup not in DEDUP:
        raise ValueError(f"dedup must be one of {DEDUP}, got {dedup!r}")
    claims, test_ids = _load_claims()
    split = split_fever(claims, test_ids, val_fraction=val_fraction, seed=seed)
    held_out = _held_out_pairs(claims, test_ids, split, seed, pad_fraction)
    known = _evidence_sentences(claims)
    blocked = held_out_sentences(held_out["calibration"] + held_out["test"], known)
    counts: dict = {"mode": dedup, "built": {}, "dropped": {}}

    def keep(name: str, pairs: list[NLIPair]) -> list[NLIPair]:
        kept = drop_held_out(pairs, blocked)
        counts["built"][name], counts["dropped"][name] = len(pairs), len(pairs) - len(kept)
        return kept if dedup == "training" else pairs

    fever = build_fever_pairs(split["train"], seed=seed, pad_fraction=pad_fraction, balance=False)
    train = balance_pairs(keep("fever", fever), seed)
    n_fever, rng = len(train), random.Random(seed)
    if key_fact_fraction > 0:
        extra = keep("key_fact", build_key_fact_pairs(split["train"], seed=seed))
        train += _sample_per_label(extra, round(key_fact_fraction * n_fever / 3), rng)
    if hard_fraction > 0:
        hard = keep("hard", build_hard_pairs(split["train"], seed=seed))
        train += rng.sample(hard, min(len(hard), round(hard_fraction * n_fever)))
    if multihop_fraction > 0:
        multihop = keep("multihop", build_multihop_pairs(seed=seed))
        train += rng.sample(multihop, min(len(multihop), round(multihop_fraction * n_fever)))
    if qa_paragraphs > 0:
        train += keep("qa_paragraphs", qa_training_paragraph_pairs(seed)) * qa_paragraphs
    if adversarial > 0:
        train += keep("adversarial", build_adversarial_pairs(seed=seed)) * adversarial
    if key_fact_fraction > 0 or qa_paragraphs > 0 or hard_fraction > 0 or multihop_fraction > 0 or adversarial > 0:
        random.Random(seed).shuffle(train)
    seen = held_out_sentences(train, known)
    unseen = {name: drop_held_out(held_out[name], seen) for name in ("calibration", "test")}
    counts["held-out pairs holding a training sentence"] = {n: len(held_out[n]) - len(unseen[n]) for n in unseen}
    if dedup == "held-out":  # calibration loses them; the test keeps the paper's claims, its unseen part beside it
        held_out["calibration"] = unseen["calibration"]
    return {"train": train, **held_out, "test_unseen": unseen["test"]}, counts


def fever_nli_splits(
    seed: int = 0, val_fraction: float = 0.1, pad_fraction: float = 0.5, key_fact_fraction: float = 0.0,
    qa_paragraphs: int = 0, hard_fraction: float = 0.0, multihop_fraction: float = 0.0, dedup: str = "held-out",
    adversarial: int = 0,
) -> dict[str, list[NLIPair]]:
    """Train / val / calibration / test NLI pairs from the processed FEVER file; test = the paper's sampled_ids claims.

    Train premises are retrieved from training claims only; val from every non-test
    claim; test from every claim (as a deployed judge would see any text), not balanced.
    `key_fact_fraction` adds that share (of the FEVER training pairs' count) of
    `build_key_fact_pairs` from the training claims, balanced by label; `hard_fraction`
    adds that share of `build_hard_pairs` (near misses), `multihop_fraction` that share of
    `build_multihop_pairs` (capped by how many there are). With `qa_paragraphs` = k > 0, the
    training set also gets k copies of the QA-training paragraph pairs
    (`qa_training_paragraph_pairs`); with `adversarial` = k > 0, k copies of the minimal pairs of Adversarial
    HotpotQA's entity-swapped copies (`build_adversarial_pairs`: its few-shot pool and calibration split). Calibration: the key-fact-shaped and near-miss pairs
    of the validation claims, where `calibrate_threshold` sets the judge's decision
    threshold. De-duplication (`dedup`, `fever_nli_build`): by default no calibration pair holds a
    sentence of a training pair, and `test_unseen` is the part of the test that holds none.
    """
    return fever_nli_build(seed, val_fraction, pad_fraction, key_fact_fraction, qa_paragraphs, hard_fraction,
                           multihop_fraction, dedup, adversarial)[0]


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
