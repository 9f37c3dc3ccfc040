"""Premise / hypothesis / label pairs for training and evaluating NLI judges.

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
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from covlib.core import metrics, paths
from covlib import nli
from covlib.nli import LABELS
from covlib.core.records import Example, Passage
from covlib.retrieval import BM25Retriever
from covlib.data import iter_records, load_fever, load_fewshot

FEVER_TO_NLI = {"SUPPORTS": "entailment", "REFUTES": "contradiction", "NOT ENOUGH INFO": "neutral"}
FIXTURE = "credibility_nli_pairs.jsonl"


@dataclass(frozen=True)
class NLIPair:
    """One judged pair; `source` names where it came from (e.g. 'fever:91721'), `kind` how it was built."""

    premise: str
    hypothesis: str
    label: str
    source: str = ""
    kind: str = ""
    extra: dict = field(default_factory=dict, compare=False, hash=False)


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


def _evidence_items(example: Example) -> list[list[tuple[str, str]]]:
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
    return [[text for _, text in group] for group in _evidence_items(example)]


def _norm_claim(text: str) -> str:
    return re.sub(r"\W+", " ", text.lower()).strip()


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
    held_out = {_norm_claim(e.question) for e in test + val}
    test_claims = {_norm_claim(e.question) for e in test}
    val = [e for e in val if _norm_claim(e.question) not in test_claims]
    train = [e for i, e in enumerate(rest) if i not in val_idx and _norm_claim(e.question) not in held_out]
    return {"train": train, "val": val, "test": test}


# --------------------------------------------------------------------------- pair building


def _sentence_index(examples: Sequence[Example]) -> tuple[list[Passage], dict[str, set[str]]]:
    """Distinct evidence sentences as passages, and for each sentence the normalised claims it is evidence of."""
    owners: dict[str, set[str]] = {}
    for e in examples:  # dict, not set: the corpus order (BM25's tie-break) must not depend on the hash seed
        for s in dict.fromkeys(s for group in fever_evidence_sets(e) for s in group):
            owners.setdefault(s, set()).add(_norm_claim(e.question))
    passages = [Passage(str(i), "", s) for i, s in enumerate(owners)]
    return passages, owners


def _other_sentences(claims: Sequence[Example], corpus: Sequence[Example], k: int) -> tuple[list[list[str]], int]:
    """For each claim, the BM25 top-k evidence sentences of *other* corpus claims (never its own evidence, nor a
    same-text claim's), best first; and the number of distinct sentences searched."""
    passages, owners = _sentence_index(corpus)
    hits = BM25Retriever(passages).search_batch([e.question for e in claims], k=k)
    others = []
    for e, ranked in zip(claims, hits):
        own = {s for group in fever_evidence_sets(e) for s in group}
        claim = _norm_claim(e.question)
        others.append([h.text for h in ranked if h.text not in own and claim not in owners.get(h.text, set())])
    return others, len(passages)


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
    others_of, n_sentences = _other_sentences(claims, list(examples if corpus is None else corpus), n_candidates)
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


_NUMBER = re.compile(r"\b(1[0-9]{3}|20[0-9]{2}|[1-9][0-9]?)\b")


def _perturb_number(sentence: str, rng: random.Random) -> str | None:
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
            changed = _perturb_number(fact, rng)
            if changed is not None:
                pairs.append(NLIPair(" ".join(sents), changed, "contradiction", source, "paragraph-changed-number"))
    return pairs


def qa_training_paragraph_pairs(seed: int = 0) -> list[NLIPair]:
    """`build_paragraph_pairs` over the QA *training* questions offline: the Adversarial HotpotQA and 2Wiki few-shot pools."""
    examples = [e for dataset in ("hotpotqa", "2wikimultihop") for e, _ in load_fewshot(dataset)]
    return build_paragraph_pairs(examples, seed=seed)


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
        for page, text in (item for group in _evidence_items(e) for item in group):
            if page:
                by_page.setdefault(page, set()).add(text)
    claims = [e for e in examples if e.label in ("SUPPORTS", "REFUTES") and e.paragraphs]
    others_of, _ = _other_sentences(claims, corpus, n_candidates)
    pairs: list[NLIPair] = []
    for e, others in zip(claims, others_of):
        groups = _evidence_items(e)
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
        changed = _perturb_number(fact, rng)
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
        for group in _evidence_items(e) for page, text in group if page and len(text.split()) >= min_words))
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


def balance_pairs(pairs: Sequence[NLIPair], seed: int = 0) -> list[NLIPair]:
    """Downsample every label to the rarest label's count (seeded), keeping the original order."""
    by_label: dict[str, list[int]] = {}
    for i, p in enumerate(pairs):
        by_label.setdefault(p.label, []).append(i)
    if not by_label:
        return []
    n = min(len(v) for v in by_label.values())
    rng = random.Random(seed)
    keep = {i for idx in by_label.values() for i in rng.sample(idx, n)}
    return [p for i, p in enumerate(pairs) if i in keep]


def label_counts(pairs: Iterable[NLIPair]) -> dict[str, int]:
    """How many pairs carry each label, in LABELS order."""
    counts = Counter(p.label for p in pairs)
    return {label: counts.get(label, 0) for label in LABELS}


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


# --------------------------------------------------------------------------- files


def pairs_hash(pairs: Iterable[NLIPair]) -> str:
    """SHA-256 over premise, hypothesis and label of each pair, in order."""
    h = hashlib.sha256()
    for p in pairs:
        h.update(json.dumps([p.premise, p.hypothesis, p.label], ensure_ascii=False).encode() + b"\n")
    return h.hexdigest()


def save_pairs(pairs: Iterable[NLIPair], path: str | Path) -> Path:
    """Write pairs as JSONL (one object per line), atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for p in pairs:
            f.write(json.dumps(asdict(p), ensure_ascii=False) + "\n")
    tmp.replace(path)
    return path


def load_pairs(path: str | Path) -> list[NLIPair]:
    """Read a pairs JSONL (save_pairs' format, or the fixture's with extra keys); errors name file, line and field."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no NLI pairs file at {path}")
    known = {"premise", "hypothesis", "label", "source", "kind", "extra"}
    pairs = []
    for row, loc in iter_records(path):
        for key in ("premise", "hypothesis", "label"):
            if not isinstance(row.get(key), str) or not row[key].strip():
                raise loc.error("missing or empty", field=key)
        if row["label"] not in LABELS:
            raise loc.error(f"label should be one of {LABELS}, got {row['label']!r}", field="label")
        extra = dict(row.get("extra") or {}, **{k: v for k, v in row.items() if k not in known})
        source = row.get("source") or row.get("id", "")
        pairs.append(NLIPair(row["premise"], row["hypothesis"], row["label"], str(source), str(row.get("kind", row.get("setting", ""))), extra))
    return pairs


def fixture_path() -> Path:
    """The hand-checked credibility-setting pairs shipped with the tests (answer / answer sentence vs key fact)."""
    return paths.code_root() / "tests" / "fixtures" / FIXTURE


def load_credibility_fixture() -> list[NLIPair]:
    """The hand-checked credibility-setting NLI pairs (premise: an answer or answer sentence; hypothesis: a key fact)."""
    return load_pairs(fixture_path())


# --------------------------------------------------------------------------- the key-fact test set

KEYFACT_PAIRS = "keyfact_nli_pairs-v1.jsonl"  # in paths.resources_dir(); written by scripts/keyfact_pairs.py, labelled by hand


def load_keyfact_pairs() -> list[NLIPair]:
    """The hand-labelled key-fact pairs: the embedded model's real answers (or answer sentences) vs hand key facts.

    Labelled without any judge's output and kept apart from every training pair; the judge's
    accuracy on them is what the credibility tables print beside their numbers (`decision_accuracy`).
    """
    return load_pairs(paths.resources_dir() / KEYFACT_PAIRS)


def _decisions(judge: nli.Judge, pairs: Sequence[NLIPair], progress: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(the judge's own 'entailed' decision, people's) per pair, as booleans."""
    probs = nli.probabilities([p.premise for p in pairs], [p.hypothesis for p in pairs], judge, progress)
    return nli.entailed(probs, judge).astype(bool), np.array([p.label == "entailment" for p in pairs])


def _f1(said: np.ndarray, gold: np.ndarray) -> float:
    """F1 (%) of the 'entailed' decision: 2 TP / (decided + truly entailed); NaN when both are empty."""
    said, gold = np.asarray(said, dtype=bool), np.asarray(gold, dtype=bool)
    total = said.sum() + gold.sum()
    return float(200 * (said & gold).sum() / total) if total else float("nan")


def decision_accuracy(judge: nli.Judge | str | None, pairs: Sequence[NLIPair], seed: int = 0,
                      progress: bool = False) -> dict[str, dict[str, float]]:
    """How often the judge's own decision f (`nli.entailed`) agrees with the gold 'is entailed', with 95% intervals:
    accuracy, entailment precision and recall (over pairs decided / labelled entailed), and their F1."""
    if not pairs:
        raise ValueError("decision_accuracy of no pairs")
    judge = nli.get_judge(judge)
    said, gold = _decisions(judge, pairs, progress)
    hit = (said == gold).astype(float)
    return {
        "judge": judge.name,
        "threshold": getattr(judge, "threshold", None),
        "accuracy": metrics.mean_interval(hit, scale=100, seed=seed),
        "entail_precision": metrics.mean_interval(hit[said], scale=100, seed=seed),
        "entail_recall": metrics.mean_interval(hit[gold], scale=100, seed=seed),
        "entail_f1": metrics.bootstrap(_f1, said, gold, seed=seed),
    }


def f1_difference(judge_a: nli.Judge | str | None, judge_b: nli.Judge | str | None, pairs: Sequence[NLIPair],
                  seed: int = 0) -> dict[str, float]:
    """F1 of judge a's 'entailed' decision minus judge b's on the same pairs, with a paired bootstrap interval."""
    said_a, gold = _decisions(nli.get_judge(judge_a), pairs)
    said_b, _ = _decisions(nli.get_judge(judge_b), pairs)
    return metrics.bootstrap(lambda a, b, g: _f1(a, g) - _f1(b, g), said_a, said_b, gold, seed=seed)


def judge_note(judge: nli.Judge | str | None, seed: int = 0) -> str:
    """One line for beside a credibility table: how far the judge's decision agrees with people on the key-fact pairs."""
    d = decision_accuracy(judge, load_keyfact_pairs(), seed=seed)
    fmt = metrics.format_interval
    rule = "" if d["threshold"] is None else f" (decides 'entailed' at P > {d['threshold']:.2f})"
    return (f"judge {d['judge']}{rule} on {d['accuracy']['n']} hand-labelled key-fact pairs: agrees with people "
            f"{fmt(d['accuracy'])}%; when it says 'entailed' it is right {fmt(d['entail_precision'])}% "
            f"(n={d['entail_precision']['n']}); of the truly entailed it finds {fmt(d['entail_recall'])}% "
            f"(n={d['entail_recall']['n']}); F1 of 'entailed' {fmt(d['entail_f1'])}")
