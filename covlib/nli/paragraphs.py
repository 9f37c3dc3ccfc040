"""NLI training pairs from the Wikipedia paragraphs of QA training questions, and the changed-number perturbation.

A sentence of a paragraph is entailed by the paragraph, not entailed by the paragraph without it,
and contradicted when one of its years or small numbers is changed (`perturb_number`, also used for
FEVER key-fact pairs in `covlib.nli.pairs`). `build_multihop_pairs` mines hard negatives from the
questions' gold paragraphs: a fact of another step of the same question, and other facts of the
right entity, each beside its matching positive. Only training questions are read (the HotpotQA
and 2Wiki few-shot pools, the 2Wiki train subset), never an evaluation set.
"""

from __future__ import annotations

import difflib
import random
import re
from typing import Sequence

from covlib.core.records import Example, Paragraph
from covlib.core import paths
from covlib.data import ADVERSARIAL_TITLE, SHARED_FILES, load_2wikimultihop, load_adv_hotpotqa, load_fewshot
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


def multihop_training_questions() -> list[Example]:
    """The multi-hop *training* questions offline: the HotpotQA few-shot pool and the 2Wiki train subset, once each."""
    examples = [e for e, _ in load_fewshot("hotpotqa")] + load_2wikimultihop(split="train")
    return list({e.id: e for e in examples}.values())


def _gold_steps(example: Example, min_words: int) -> list[tuple[Paragraph, list[int]]]:
    """Each gold paragraph of the question (once per title) with the indices of its supporting sentences."""
    wanted: dict[str, list[int]] = {}
    for title, i in example.supporting_facts:
        wanted.setdefault(title, []).append(i)
    steps: dict[str, tuple[Paragraph, list[int]]] = {}
    for para in example.paragraphs:
        if para.title in wanted and para.title not in steps:
            ok = [i for i in dict.fromkeys(wanted[para.title])
                  if 0 <= i < len(para.sentences) and len(para.sentences[i].split()) >= min_words]
            if ok:
                steps[para.title] = (para, ok)
    return list(steps.values())


def _norm(text: str) -> str:
    """Lower-cased, whitespace collapsed: how the builder compares a hypothesis with a premise."""
    return " ".join(text.lower().split())


def _other_step_pairs(example: Example, steps: list[tuple[Paragraph, list[int]]], rng: random.Random,
                      source: str) -> list[NLIPair]:
    """A supporting sentence of one gold paragraph (among 0-2 real sentences of the question's other paragraphs) -> a
    supporting sentence of another gold paragraph: neutral; with that sentence shuffled in: entailment."""
    pairs: list[NLIPair] = []
    for para, supp in steps:
        for other, other_supp in steps:
            if other is para:
                continue
            for i in other_supp:
                fact, step = other.sentences[i].strip(), para.sentences[rng.choice(supp)].strip()
                pool = [x.strip() for p in example.paragraphs if p.title not in (other.title, ADVERSARIAL_TITLE)
                        for x in p.sentences if x.strip() and x.strip() != step and _norm(fact) not in _norm(x)]
                pad = rng.sample(pool, min(len(pool), rng.randint(0, 2)))
                neutral, both = [step] + pad, [step, fact] + pad
                rng.shuffle(neutral)
                rng.shuffle(both)
                where = f"{source}:{other.title}"
                pairs.append(NLIPair(" ".join(neutral), fact, "neutral", where, "multihop-other-step"))
                pairs.append(NLIPair(" ".join(both), fact, "entailment", where, "multihop-both-steps"))
    return pairs


def _same_entity_pairs(steps: list[tuple[Paragraph, list[int]]], rng: random.Random, source: str) -> list[NLIPair]:
    """1-3 non-supporting sentences of the fact's own paragraph -> the fact: neutral; with the fact in its place among
    them: entailment."""
    pairs: list[NLIPair] = []
    for para, supp in steps:
        rest = [j for j, x in enumerate(para.sentences) if j not in supp and x.strip()]
        for i in supp:
            fact = para.sentences[i].strip()
            chosen = sorted(rng.sample(rest, min(len(rest), rng.randint(1, 3))))
            others = [para.sentences[j].strip() for j in chosen if _norm(fact) not in _norm(para.sentences[j])]
            if not others:
                continue
            with_fact = [para.sentences[j].strip() for j in sorted(chosen + [i])]
            where = f"{source}:{para.title}"
            pairs.append(NLIPair(" ".join(others), fact, "neutral", where, "multihop-same-entity"))
            pairs.append(NLIPair(" ".join(with_fact), fact, "entailment", where, "multihop-fact-in-paragraph"))
    return pairs


def build_multihop_pairs(examples: Sequence[Example] | None = None, seed: int = 0, min_words: int = 5) -> list[NLIPair]:
    """Hard negatives from the gold paragraphs of multi-hop training questions (default `multihop_training_questions`):

    | premise                                                  | hypothesis                       | label      |
    |----------------------------------------------------------|----------------------------------|------------|
    | a supporting sentence of one gold paragraph (+0-2 others) | the other gold paragraph's one  | neutral    |
    | the same, with that sentence shuffled in                  | it                               | entailment |
    | 1-3 other sentences of the same gold paragraph            | its supporting sentence          | neutral    |
    | the same, with the supporting sentence in its place       | it                               | entailment |

    The first row is "a fact from another step of the same question", the third "the right
    entity with the wrong relation"; each neutral kind has its entailed twin of the same shape,
    so the premise's shape does not reveal the label. Questions with fewer than two gold
    paragraphs are skipped.
    """
    rng = random.Random(seed)
    pairs: list[NLIPair] = []
    for e in multihop_training_questions() if examples is None else examples:
        steps = _gold_steps(e, min_words)
        if len(steps) < 2:
            continue
        source = f"{e.metadata.get('dataset', 'qa')}:{e.id}"
        pairs += _other_step_pairs(e, steps, rng, source) + _same_entity_pairs(steps, rng, source)
    return pairs


def adversarial_training_questions() -> list[Example]:
    """The Adversarial HotpotQA questions a judge may train on: the few-shot pool (sim_train) and the calibration split
    (the first 58 of sim_dev); never the 250 test questions, whose rationales people labelled."""
    return load_adv_hotpotqa(paths.dataset_path(*SHARED_FILES["adv_hotpotqa_fewshot"]), split="all") + \
        load_adv_hotpotqa(split="calibration")


def _source_of(copy: Paragraph, golds: Sequence[Paragraph]) -> Paragraph | None:
    """The gold paragraph an entity-swapped copy was made from: the one sharing most of its words (None if none)."""
    words = set(copy.text.lower().split())
    best = max(golds, key=lambda g: len(words & set(g.text.lower().split())), default=None)
    return best if best is not None and len(best.sentences) == len(copy.sentences) else None


def _bare(word: str) -> str:
    """A word as names are matched: lower-cased, without surrounding punctuation or a possessive 's."""
    return re.sub(r"['’]s$", "", word.strip("()[],.;:!?\"'“”‘’")).lower()


def _swap_back(gold: str, copy: str, title: str) -> str | None:
    """The gold sentence with the copy's changed facts but the gold's own names: each span the copy *replaced* that
    shares no word with the gold title (a date, a number, a place) is taken from the copy, while a span holding a name
    stays the gold's whole (a fact beside the name in one span is not taken); words the copy only dropped or added
    are left as the gold has them. None when no such span differs."""
    g, c = gold.split(), copy.split()
    named = {_bare(w) for w in title.split()} - {""}
    out, changed = [], False
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=g, b=c, autojunk=False).get_opcodes():
        if op == "replace" and not any(_bare(w) in named for w in g[i1:i2]):
            out += c[j1:j2]
            changed = True
        else:
            out += g[i1:i2]
    return " ".join(out) if changed else None


def build_adversarial_pairs(examples: Sequence[Example] | None = None, seed: int = 0) -> list[NLIPair]:
    """Minimal pairs from Adversarial HotpotQA's entity-swapped copies (default `adversarial_training_questions`):

    | premise                                   | hypothesis                                          | label      |
    |-------------------------------------------|-----------------------------------------------------|------------|
    | the question's four paragraphs            | a gold sentence the copy changed                    | entailment |
    | the four paragraphs                       | that sentence, the gold names kept, the copy's fact | neutral    |
    | the gold paragraph                        | the same hybrid                                     | neutral    |
    | the entity-swapped copy                   | the gold sentence                                   | neutral    |
    | the entity-swapped copy                   | its own sentence                                    | entailment |

    The hybrid is the error of a model that reads the copy's fact as the gold entity's ("Jolyon Palmer (born 20
    January 1969)" beside "Jolyon Palmer (born 20 January 1991)" and "Barnes House (born 20 January 1969)"): every
    word of it is in the paragraphs, none states it. It is labelled neutral, not contradiction: what the judge must
    learn is "not entailed", and many changed spans (a place, a name inside a title) contradict nothing. A hybrid
    that is a sentence of any paragraph (a copy's sentence with no name in it) is left out, and each pair is kept
    once. The four paragraphs keep their order in the file.
    """
    rng = random.Random(seed)
    pairs: dict[tuple[str, str, str], NLIPair] = {}
    for e in adversarial_training_questions() if examples is None else examples:
        golds = [p for p in e.paragraphs if p.is_supporting]
        everything = " ".join(p.text for p in e.paragraphs)
        for copy in (p for p in e.paragraphs if p.title == ADVERSARIAL_TITLE):
            gold = _source_of(copy, golds)
            if gold is None:
                continue
            where = f"adv_hotpotqa:{e.id}:{gold.title}"
            for g, c in zip(gold.sentences, copy.sentences):
                g, c = g.strip(), c.strip()
                if g == c or len(g.split()) < 4:
                    continue
                found = [NLIPair(everything, g, "entailment", where, "adversarial-gold-in-all"),
                         NLIPair(copy.text, g, "neutral", where, "adversarial-copy-to-gold"),
                         NLIPair(copy.text, c, "entailment", where, "adversarial-copy-to-itself")]
                hybrid = _swap_back(g, c, gold.title)
                if hybrid is not None and _norm(hybrid) not in _norm(everything):
                    found += [NLIPair(everything, hybrid, "neutral", where, "adversarial-hybrid-in-all"),
                              NLIPair(gold.text, hybrid, "neutral", where, "adversarial-hybrid-to-gold")]
                for pair in found:
                    pairs.setdefault((pair.premise, pair.hypothesis, pair.label), pair)
    out = list(pairs.values())
    rng.shuffle(out)
    return out
