"""The simulated model's replies to notebooks 04-07 (`teach`) and its planted human ratings (`planted_ratings`).

A reply is computed from the question's gold data and what the prompt shows: which gold paragraphs its numbered
references hold (complete, partial or none) and how many references there are. Each shipped key fact is stated, in
its own words with a `[n]` citation, when the question's latent for that fact (shared by every arm, `SHARED`) mixed
with the arm's own falls below the persona's planted recall (`planted.recall_at`); sentences copied from a distractor
reference (or, without one, a plain sentence) bring precision to the planted share; the answer may end with "So the
answer is <gold>." (EM-recall). The reflection prompt is refused at the planted rates; a self-completion query names
the missing gold paragraph's title at the planted rate, else repeats the question. What the rates are, per persona
and behaviour, is `planted`: nothing here is evidence about the paper.
"""

from __future__ import annotations

import csv
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist
from typing import Any, Sequence

import numpy as np

from covlib.core.metrics import accuracy_contains
from covlib.core.records import Example
from covlib.core.references import cited_sentences, strip_citations
from covlib.core.text import split_sentences
from covlib.generation.simulated import SimLM, uniform
from covlib import nli
from covlib.nli.judge_error import PREMISE_KINDS
from covlib.nli.labelled import NLIPair
from covlib.papers.credibility import planted
from covlib.papers.credibility.answers import Scores
from covlib.papers.credibility.key_facts import build_key_facts, gold_sentences, supporting_key_facts
from covlib.papers.credibility.paper import PAPER_PEARSON, PAPER_TABLE2
from covlib.papers.credibility.prompts import (ANSWER_INSTRUCTION, CLOSED_BOOK_INSTRUCTION, COMPLETION_INSTRUCTION,
                                               KEY_FACTS_INSTRUCTION, QUERY_MARKER, REASONING_INSTRUCTION,
                                               REFLECTION_INSTRUCTION, REFUSAL)
from covlib.papers.credibility.ratings import RATING_COLUMNS

MAX_FILLERS = 8  # sentences without a key fact in one answer (a foundation persona's low precision needs several)
PLAIN = ("I am not sure about the remaining details.", "Other details are uncertain to me.",
         "This is what I can say about the question.", "More context would be needed to be certain.")
RATERS = ("simulated rater 1", "simulated rater 2")
_NORMAL = NormalDist()


@dataclass(frozen=True)
class Known:
    """A question the simulated model knows: its example, the shipped key facts it may state, each fact's gold
    paragraph (the gold title sharing most words with it)."""

    example: Example
    facts: tuple[str, ...]
    homes: tuple[str, ...]


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def known_questions(examples: Sequence[Example]) -> dict[str, Known]:
    """By question text: what the model knows (the shipped key facts; HotpotQA's supporting sentences without them)."""
    try:
        facts = build_key_facts("agents", examples)
    except ValueError:  # questions the shipped key facts do not cover
        facts = supporting_key_facts(examples)
    out = {}
    for ex, kf in zip(examples, facts):
        gold = [p for p in ex.paragraphs if p.title in set(ex.supporting_titles)] or list(ex.paragraphs)
        homes = tuple(max(gold, key=lambda p: len(_words(f) & _words(f"{p.title} {p.text}"))).title
                      for f in kf.key_facts)
        out[ex.question] = Known(ex, tuple(kf.key_facts), homes)
    return out


def parse_prompt(prompt: str) -> tuple[str, list[str]] | None:
    """(question, its numbered references as 'Title: text') of a '[Question], [References]. <instruction>' prompt."""
    if not prompt.startswith("Question: "):
        return None
    question, _, rest = prompt[len("Question: "):].partition("\n\n")
    refs: list[str] = []
    if rest.startswith("References:\n"):
        block = rest[len("References:\n"):].split("\n\n", 1)[0]
        refs = [r.strip() for r in re.split(r"(?m)^\[\d+\] ", block) if r.strip()]
    return question, refs


def gold_positions(q: Known, refs: Sequence[str]) -> dict[str, int]:
    """Gold title -> its 1-based position among the references shown."""
    titles = set(q.example.supporting_titles)
    return {t: i for i, ref in enumerate(refs, 1) for t in titles if ref.startswith(f"{t}: ")}


def setting_of(q: Known, refs: Sequence[str]) -> str:
    """'complete' (every gold paragraph shown), 'partial' (some) or 'closed-book' (none, or no references)."""
    shown = len(gold_positions(q, refs))
    return "complete" if shown and shown >= len(set(q.example.supporting_titles)) else "partial" if shown else \
        "closed-book"


def _arm(prompt: str) -> str:
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:16]


def _normal(u: float) -> float:
    return _NORMAL.inv_cdf(min(max(u, 1e-12), 1 - 1e-12))


def stated(lm: SimLM, q: Known, arm: str, rate: float) -> list[int]:
    """The key facts (indices) an answer states: fact k when Φ(√ρ z_question,k + √(1-ρ) z_arm,k) < rate."""
    qid = q.example.id
    return [k for k in range(len(q.facts))
            if _NORMAL.cdf(planted.SHARED ** 0.5 * _normal(lm.draw(qid, "fact", k))
                           + (1 - planted.SHARED) ** 0.5 * _normal(lm.draw(qid, "fact", k, arm))) < rate]


def filler_count(n_stated: int, n_facts: int, rate: float, precision: float, draw: float) -> int:
    """Sentences without a key fact, so that an answer's expected precision is the planted share: answers that state
    none score 0 (one plain sentence), so those that state some carry precision / P(some stated)."""
    if not n_stated:
        return 1
    some = 1 - (1 - rate) ** n_facts
    share = min(1.0, max(precision / some if some > 0 else 1.0, 1 / (MAX_FILLERS + 1)))
    x = n_stated * (1 - share) / share
    return min(MAX_FILLERS, int(x) + (draw < x - int(x)))


def _fact_sentence(q: Known, k: int, refs: Sequence[str], gold: dict[str, int], cite_gold: float, rng: Any,
                   text: str = "") -> str:
    """Key fact k in its own words (or `text` resting on it), citing its gold reference at the planted rate."""
    text = (text or q.facts[k]).strip().rstrip(".")
    if not refs:
        return f"{text}."
    home, others = gold.get(q.homes[k]), [i for i in range(1, len(refs) + 1) if i not in gold.values()]
    cite = home if home and rng.random() < cite_gold else rng.choice(others or list(range(1, len(refs) + 1)))
    return f"{text} [{cite}]."


def _fillers(refs: Sequence[str], gold: dict[str, int], m: int) -> list[str]:
    """`m` sentences that state no key fact: distractor references' sentences, cited, else plain ones."""
    copied = []
    for i, ref in enumerate(refs, 1):
        if i not in gold.values():
            copied += [(j, f"{s.rstrip('.')} [{i}].") for j, s in enumerate(split_sentences(ref.partition(": ")[2]))]
    copied = [s for _, s in sorted(copied, key=lambda x: x[0])]  # every distractor's first sentence first
    return (copied + list(PLAIN))[:m] if copied else [PLAIN[j % len(PLAIN)] for j in range(m)]


def _answer(prompt: str, lm: SimLM, rng: Any, known: dict[str, Known], r: planted.Rates) -> str | None:
    """A cited answer (or, to the reflection prompt, the refusal) with the planted recall and precision."""
    kind = ("reflect" if prompt.endswith(REFLECTION_INSTRUCTION) else "answer" if prompt.endswith(ANSWER_INSTRUCTION)
            else "closed" if prompt.endswith(CLOSED_BOOK_INSTRUCTION) else None)
    parsed = parse_prompt(prompt) if kind else None
    q = known.get(parsed[0]) if parsed else None
    if q is None:
        return None
    refs, arm, qid = parsed[1], _arm(prompt), q.example.id
    setting, gold = setting_of(q, refs), gold_positions(q, refs)
    if kind == "reflect":
        refuse = r.refuse_complete if setting == "complete" else r.refuse_partial
        if lm.draw(qid, "refuse", arm) < refuse:
            return f"{REFUSAL}."
    rate = planted.recall_at(r, setting, len(refs))
    facts = stated(lm, q, arm, rate)
    m = filler_count(len(facts), len(q.facts), rate, r.precision[setting], rng.random())
    says = lm.draw(qid, "says answer", arm) < r.says_answer
    sentences = [_fact_sentence(q, k, refs, gold, r.cite_gold, rng) for k in facts]
    sentences += _fillers(refs, gold, max(m, int(says)) - int(says))
    if says:  # the answer, resting on the last key fact
        sentences.append(_fact_sentence(q, len(q.facts) - 1, refs, gold, r.cite_gold, rng,
                                        f"So the answer is {q.example.answer}"))
    return " ".join(sentences)


def _query(prompt: str, lm: SimLM, known: dict[str, Known], r: planted.Rates) -> str | None:
    """Self-completion's search query: the missing gold paragraph's title at the planted rate, else the question."""
    parsed = parse_prompt(prompt) if prompt.endswith(COMPLETION_INSTRUCTION) else None
    q = known.get(parsed[0]) if parsed else None
    if q is None:
        return None
    missing = [t for t in q.example.supporting_titles if t not in gold_positions(q, parsed[1])]
    hit = missing and lm.draw(q.example.id, "query", _arm(prompt)) < r.query_hits
    return f"{QUERY_MARKER} {missing[0] if hit else q.example.question}"


def _key_facts(prompt: str, known: dict[str, Known]) -> str | None:
    """The paper's two key-fact prompts (§3): the gold supporting sentences as reasoning, the shipped facts listed."""
    parsed = parse_prompt(prompt)
    q = known.get(parsed[0]) if parsed else None
    if q is None:
        return None
    if prompt.endswith(REASONING_INSTRUCTION):
        return " ".join(gold_sentences(q.example)) or q.example.answer
    if prompt.endswith(KEY_FACTS_INSTRUCTION):
        return "\n".join(f"{i}. {f}" for i, f in enumerate(q.facts, 1))
    return None


def teach(S: Any, lm: SimLM) -> None:
    """Teach `lm` every prompt kind notebooks 04-07 send, from the session's questions (`S.examples`)."""
    known, r = known_questions(S.examples), planted.rates(lm.behaviour, lm.persona)
    lm.teach("credibility cited answer", lambda p, m, rng: _answer(p, m, rng, known, r))
    lm.teach("credibility search query", lambda p, m, rng: _query(p, m, known, r))
    lm.teach("credibility key facts", lambda p, m, rng: _key_facts(p, known))


# --------------------------------------------------------------------------- the judge's error on the simulation's answers


def labelled_pairs(scores: Scores, key: tuple[str, str]) -> list[NLIPair]:
    """Every (premise, key fact) pair the judge decided in run `key` of `scores` (its decision in `extra["said"]`),
    labelled by what the simulation stated: entailed exactly when the fact's own words are in the premise (a whole
    answer for recall, a sentence for precision)."""
    out = []
    for q, judged in zip(scores.examples, scores.details[key]):
        for metric, kind in (("recall", "answer"), ("precision", "sentence")):
            for *_, premise, fact, _probs, said in judged[metric]:
                label = "entailment" if fact.strip().rstrip(".") in premise else "neutral"
                out.append(NLIPair(premise, fact, label, f"sim:{q.id}", kind, {
                    "stratum": nli.stratum(premise, fact), "question_id": q.id, "said": said}))
    return out


def correction_rates(scores: Scores) -> dict[tuple[str, str], dict[str, nli.JudgeRates]]:
    """Per run (model, setting), the judge's error its judge-corrected columns fold in: the frozen key-fact test
    set's (00b; one measurement for every run), or, for a run whose answers are the simulation's, that run's own
    judged pairs (`labelled_pairs`): the judge errs differently on each condition's answers (docs/simulation.md)."""
    test_set = None
    out = {}
    for key, run in scores.runs.items():
        if isinstance(getattr(run[0], "generator", None), SimLM):
            pairs = labelled_pairs(scores, key)
            out[key] = {kind: nli.rates_from_decisions(scores.judge.name, [p.extra["said"] for p in mine], mine,
                                                       f"{key[0]}'s {key[1]} answers, labelled by the simulation")
                        for kind in PREMISE_KINDS for mine in [[p for p in pairs if p.kind == kind]]}
        else:
            out[key] = test_set = test_set or nli.judge_rates(scores.judge)
    return out


# --------------------------------------------------------------------------- planted human ratings (Table 2)


def content(answer: str, q: Known) -> tuple[float, float, float]:
    """What an answer truly holds: (share of sentences stating a key fact, share of key facts stated, EM-recall)."""
    plain = strip_citations(answer)
    said = sum(f.strip().rstrip(".") in plain for f in q.facts)
    sentences = len(cited_sentences(answer))
    return (min(1.0, said / sentences) if sentences else 0.0, said / max(len(q.facts), 1),
            accuracy_contains(plain, q.example.answers))


def correlated(columns: np.ndarray, targets: Sequence[float], free: np.ndarray) -> np.ndarray:
    """A centred unit vector h whose correlation with each column is its target (`free`: a random direction for the
    rest); where no such vector exists, the nearest feasible direction within the columns' span."""
    z = columns - columns.mean(axis=0)
    z = z / np.linalg.norm(z, axis=0)
    basis, tri = np.linalg.qr(z)
    beta = np.linalg.solve(tri.T, np.asarray(targets, dtype=float))
    rest = free - free.mean() - basis @ (basis.T @ (free - free.mean()))
    left = 1 - float(beta @ beta)
    if left <= 0:
        return basis @ (beta / np.linalg.norm(beta))
    return basis @ beta + np.sqrt(left) * rest / np.linalg.norm(rest)


def human_targets(truth: dict[str, tuple[float, float, float]], behaviour: str, seed: int) -> dict[str, tuple[float, float]]:
    """Per model (HPrec, HRec) in %: Table 2's people's mean and spread, with Table 2's Pearson to the answers' true
    P, and R and EM-recall (`sim:paper`), or no relation to them (`sim:null`)."""
    names, cols = list(truth), np.array([truth[n] for n in truth], dtype=float)
    people = np.array([v[3:] for v in PAPER_TABLE2.values()], dtype=float)
    loc, scale = people.mean(axis=0), people.std(axis=0, ddof=1) * np.sqrt(len(names) - 1)
    free = np.random.default_rng([seed, 48]).standard_normal((2, len(names)))
    if behaviour == "null" or np.ptp(cols, axis=0).min() == 0:  # people's scores owe nothing to the answers
        h = [(v - v.mean()) / np.linalg.norm(v - v.mean()) for v in free]
    else:
        h = [correlated(cols[:, :1], [PAPER_PEARSON["P"]], free[0]),
             correlated(cols[:, 1:], [PAPER_PEARSON["R"], PAPER_PEARSON["EM_recall"]], free[1])]
    return {n: tuple(float(np.clip(loc[j] + scale[j] * h[j][i], 0, 100)) for j in (0, 1)) for i, n in enumerate(names)}


def planted_ratings(S: Any, rows: Sequence[dict[str, Any]], path: str | Path) -> Path | None:
    """A filled rating sheet (`ratings.RATING_COLUMNS`) whose raters are the simulation, for the rating sheet's rows
    (question_id, model, answer), when every model is simulated and at least 4 are rated; else None."""
    lms = {g.name: g for g in S.generators}
    if len(lms) < 4 or not all(isinstance(g, SimLM) for g in lms.values()):
        return None
    known = {k.example.id: k for k in known_questions(S.examples).values()}
    truth = {n: tuple(np.mean([content(r["answer"], known[r["question_id"]]) for r in rows if r["model"] == n],
                              axis=0)) for n in lms}
    first = next(iter(lms.values()))
    target = human_targets(truth, first.behaviour, first.world_seed)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(RATING_COLUMNS)
        for r in rows:
            hprec, hrec = (t / 100 for t in target[r["model"]])
            for rater in RATERS:
                key = (first.world_seed, "rating", r["question_id"], r["model"], rater)
                low = np.floor(hrec * 4) / 4
                level = min(1.0, low + 0.25 * (uniform(*key, "completeness") < (hrec - low) * 4))
                flags = [int(uniform(*key, "helpful", j) < hprec) for j in range(max(1, len(cited_sentences(r["answer"]))))]
                w.writerow([r["question_id"], r["model"], rater, " ".join(map(str, flags)), f"{level:g}"])
    return path
