"""The simulated model's replies to notebooks 08-11 (`teach`): answers, verifications and rankings from the gold data.

What the offline corpus allows (`build_world`, once per session): each question's round-0 references (what its first
QA prompt shows); a revised query whose top-k holds a gold alias (`hits`: the question and the title of a corpus
passage holding one; only where the corpus holds the gold, about a third of NQ and WebQ here); revised queries whose
top-k changes and holds none (`misses`: the question and the title of a passage just below its top-k).

sim:paper (rates in `planted`). A QA prompt showing the round-0 references is a first answer, right when the
question's latent falls below the role's single-round accuracy; other references make a re-answer, right when the
first was, or, wrong, at `Rates.fix_hit` when the new references hold the gold and `Rates.fix_miss` when not. The
verifier judges correctness at Table 4's accuracy (Table 6's JSON, w/o CoL: judgment and revised query only); σ fires
only on a wrong answer whose references lack the gold, judged false, at `planted.SIGMA_ON_WRONG`, its revised query a
hit at `Rates.hit` (per dataset: the planted gain in reference accuracy, a share of *all* the dataset's questions,
divided by the share that can gain one), else a miss. sim:null: judgments and σ independent of correctness, the hit
rate equal to the round-0 references' own, re-answers fresh draws at the first answers' accuracy. The ranker
(notebook 11) ranks the QA-only answer below both CoV answers, or above them, on planted shares of questions
(`planted.rank_effects`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Sequence

from covlib.core.metrics import accuracy_contains, normalize_answer
from covlib.core.records import Example, Passage
from covlib.core.references import format_references
from covlib.generation.simulated import SimLM
from covlib.papers.covrag import planted
from covlib.papers.covrag.correctness import is_correct
from covlib.papers.covrag.prompts import OUTPUT_CUE, QA_TASK, REFERENCE_TEMPLATE, SEP
from covlib.papers.covrag.ranking import CITATION_RANK_TEMPLATE, OTHERS_RANK_TEMPLATE
from covlib.papers.covrag.training import verification_json, well_formed_question
from covlib.papers.covrag.verifier import Verification

MISS_DEPTH = 2  # passages below the top-k whose titles make miss queries
GOLD_PASSAGES = 3  # corpus passages holding a gold alias tried for a hit query
NOT_VERIFYING = "The answer is supported by the references."  # sim:paper's QA-only model: no verification JSON
_REF_SPLIT = re.compile(r"(?:^|\n)Reference \[\d+\]: ")
_VERIFY_INPUT = re.compile(r'\{ "question": (?P<q>.*?), "answer": (?P<a>.*?), "reference": (?P<refs>.*)\}'
                           + re.escape(SEP) + "Now you are a reading", re.S)
_RANK_INPUT = re.compile(r'\{ "question": (?P<q>.*?), "(?:reference|golden label)": (?P<rest>.*) \}'
                         + re.escape(SEP) + "Now you are a reading", re.S)
_ANSWER_SLOT = re.compile(r', "answer(\d+)": ')


@dataclass
class World:
    """What the corpus allows each question (by example id): its round-0 reference block, a hit query, miss queries."""

    by_question: dict[str, Example]
    dataset: dict[str, str]  # the test set's name; "" for a training question
    first: dict[str, str]  # the reference block its first QA prompt shows
    holds0: dict[str, bool]  # that block holds a gold alias
    hits: dict[str, str] = field(default_factory=dict)
    misses: dict[str, tuple[str, ...]] = field(default_factory=dict)


def _block(refs: Sequence[Passage]) -> str:
    return format_references(refs, template=REFERENCE_TEMPLATE, sep=SEP)


def holds(block: str, gold: Sequence[str]) -> bool:
    """Whether a reference block, as a prompt shows it, holds a gold alias (as `references_hold_answer`, reference by
    reference, so the '[n]' labels never count)."""
    return any(_chunk_holds(chunk, tuple(gold)) for chunk in _REF_SPLIT.split(block) if chunk.strip())


@lru_cache(maxsize=1 << 16)
def _chunk_holds(chunk: str, gold: tuple[str, ...]) -> bool:
    return bool(accuracy_contains(chunk, list(gold)))  # the same passages come back for every model and round


def _gold_passages(examples: Sequence[Example], passages: Sequence[Passage]) -> dict[str, list[Passage]]:
    """Per example id, up to GOLD_PASSAGES passages whose normalised text holds a normalised gold alias."""
    wanted: dict[str, set[str]] = {}
    for ex in examples:
        for alias in ex.answers:
            if normalize_answer(alias):
                wanted.setdefault(normalize_answer(alias), set()).add(ex.id)
    sizes = sorted({len(a.split()) for a in wanted})
    out: dict[str, list[Passage]] = {}
    for p in passages:
        words = normalize_answer(f"{p.title} {p.text}").split()
        grams = {" ".join(words[i:i + n]) for n in sizes for i in range(len(words) - n + 1)}
        for alias in grams & wanted.keys():
            for i in wanted[alias]:
                if len(out.setdefault(i, [])) < GOLD_PASSAGES and p not in out[i]:
                    out[i].append(p)
    return out


def build_world(sets: dict[str, Sequence[Example]], train: Sequence[Example], passages: Sequence[Passage],
                retriever: Any, k: int) -> World:
    """The round-0 references of every question and, for the test questions, the hit and miss queries (checked by
    searching them)."""
    tests = [ex for exs in sets.values() for ex in exs]
    everyone = tests + list(train)
    first = {ex.id: _block([h.passage for h in hs])
             for ex, hs in zip(everyone, retriever.search_batch([ex.question for ex in everyone], k=k))}
    w = World({ex.question.strip(): ex for ex in reversed(everyone)}, {ex.id: "" for ex in train}, first,
              {ex.id: holds(first[ex.id], ex.answers) for ex in everyone})
    w.dataset.update({ex.id: name for name, exs in sets.items() for ex in exs})
    gold = _gold_passages(tests, passages)
    for rank in range(GOLD_PASSAGES):  # the first passage whose title makes a hit query, tried in rounds
        tries = [(ex, f"{ex.question.strip()} {gold[ex.id][rank].title}") for ex in tests
                 if ex.id not in w.hits and len(gold.get(ex.id, ())) > rank]
        for (ex, query), hs in zip(tries, retriever.search_batch([q for _, q in tries], k=k)):
            if holds(_block([h.passage for h in hs]), ex.answers):
                w.hits[ex.id] = query
    deeper = retriever.search_batch([ex.question for ex in tests], k=k + MISS_DEPTH)
    tries = [(ex, f"{ex.question.strip()} {h.passage.title}") for ex, hs in zip(tests, deeper) for h in hs[k:]]
    misses: dict[str, list[str]] = {}
    for (ex, query), hs in zip(tries, retriever.search_batch([q for _, q in tries], k=k)):
        block = _block([h.passage for h in hs])
        if block != first[ex.id] and not holds(block, ex.answers):
            misses.setdefault(ex.id, []).append(query)
    w.misses = {i: tuple(dict.fromkeys(qs)) for i, qs in misses.items()}
    return w


@dataclass(frozen=True)
class Rates:
    """Per dataset, what a role's σ and re-answers need to give back its planted gains (see the module docstring)."""

    hit: dict[str, float]  # P(a fired revision retrieves the gold | the question has a hit query)
    fix_hit: float  # P(a wrong answer is right again | the new references hold the gold)
    fix_miss: dict[str, float]  # P(... | they do not)
    null_hit: dict[str, float]  # sim:null: the round-0 references' own rate, over the questions that can swap


def rates(w: World, r: planted.Role) -> Rates:
    """`Rates` of role `r` from the world's shares per dataset: the planted gains are shares of all the questions."""
    hit, fix_miss, null_hit = {}, {}, {}
    fix_hit = min(1.0, r.gain / r.ref_gain) if r.ref_gain > 0 else 0.0
    for name in {d for d in w.dataset.values() if d}:
        ids = [i for i, d in w.dataset.items() if d == name]
        wrong_fired = (1 - r.single(name)) * planted.SIGMA_ON_WRONG / len(ids)
        reach = wrong_fired * sum(not w.holds0[i] and i in w.hits for i in ids)
        hit[name] = min(1.0, r.ref_gain / reach) if reach > 0 else 0.0
        missed = wrong_fired * sum((not w.holds0[i] and i in w.misses) * (1 - hit[name] * (i in w.hits)) for i in ids)
        rest = r.gain - fix_hit * hit[name] * reach
        fix_miss[name] = min(1.0, max(0.0, rest / missed)) if missed > 0 else 0.0
        swap = [w.holds0[i] for i in ids if i in w.hits and i in w.misses]
        null_hit[name] = sum(swap) / len(swap) if swap else 0.0
    return Rates(hit, fix_hit, fix_miss, null_hit)


# --------------------------------------------------------------------------- answers


def _latent(lm: SimLM, r: planted.Role, ex_id: str) -> float:
    """The question's latent for this role: shared by every role, except on the CHURN share where it is the role's."""
    if lm.draw(ex_id, r.name, "churn") < planted.CHURN:
        return lm.draw(ex_id, r.name, "own")
    return lm.draw(ex_id, "ability")


def right_first(lm: SimLM, r: planted.Role, ex: Example, w: World) -> bool:
    """Whether the role's first answer to `ex` is right."""
    return _latent(lm, r, ex.id) < r.single(w.dataset.get(ex.id, ""))


def right_again(lm: SimLM, r: planted.Role, ex: Example, w: World, rt: Rates, block: str) -> bool:
    """Whether a re-answer from the references `block` (not round 0's) is right."""
    d = w.dataset.get(ex.id, "")
    if r.null:
        return lm.draw(ex.id, r.name, "again", block) < r.single(d)
    if right_first(lm, r, ex, w):
        return True
    return lm.draw(ex.id, r.name, "fix", block) < (rt.fix_hit if holds(block, ex.answers) else rt.fix_miss.get(d, 0))


def answer_text(lm: SimLM, r: planted.Role, ex: Example, block: str, right: bool, w: World) -> str:
    """A cited answer in the role's style: a gold alias when right, else a reference's title (or another question's
    answer) that holds none of them."""
    chunks = [c for c in _REF_SPLIT.split(block) if c.strip()]
    if right:
        n = next((i for i, c in enumerate(chunks, 1) if _chunk_holds(c, tuple(ex.answers[:1]))), 1)
        return f"{r.style}{ex.answers[0]}" + (f" [{n}]." if chunks else ".")
    titled = [(c.split(": ", 1)[0], i) for i, c in enumerate(chunks, 1)]
    pool = titled or [(o.answers[0], None) for o in w.by_question.values() if o.answers]
    start = int(lm.draw(ex.id, r.name, "wrong", block) * len(pool))
    for j in range(len(pool)):
        entity, n = pool[(start + j) % len(pool)]
        text = f"{r.style}{entity}" + (f" [{n}]." if n else ".")
        if entity.strip() and not is_correct(text, ex.answers):
            return text
    return f"{r.style}I do not know."


def _qa_parts(prompt: str) -> tuple[str, str, bool] | None:
    """(reference block, question, closed book) of a QA prompt, None for another prompt."""
    end = SEP + "Answer:"
    if not prompt.startswith(QA_TASK) or not prompt.endswith(end):
        return None
    body = prompt[len(QA_TASK):-len(end)]
    if body.startswith("Question: "):
        return "", body[len("Question: "):], True
    block, sep, question = body.rpartition(SEP + "Question: ")
    return (block, question, False) if sep else None


def answer_responder(w: World, r: planted.Role, rt: Rates) -> Callable[..., str | None]:
    """Table 6's QA prompt (and the closed-book one): a first answer, or a re-answer from revised references."""
    def reply(prompt: str, lm: SimLM, rng: Any) -> str | None:
        parts = _qa_parts(prompt)
        ex = w.by_question.get(parts[1].strip()) if parts else None
        if ex is None:
            return None
        block, _, closed = parts
        if closed:
            d = w.dataset.get(ex.id, "")
            level = r.single(d) if r.null else planted.closed_book(d)
            key = (ex.id, "closed") if r.null else (ex.id, "ability")
            return answer_text(lm, r, ex, "", lm.draw(*key) < level, w)
        first = block == w.first.get(ex.id)
        right = right_first(lm, r, ex, w) if first else right_again(lm, r, ex, w, rt, block)
        return answer_text(lm, r, ex, block, right, w)
    return reply


# --------------------------------------------------------------------------- verifications


def revised_query(lm: SimLM, r: planted.Role, ex: Example, w: World, rt: Rates, block: str) -> str:
    """The query a firing verification proposes: the hit query at the planted rate, else a miss query, else the
    question as Table 6 advises (BM25 then finds the same references). sim:null swaps a question that has both at the
    round-0 references' own rate (`Rates.null_hit`), gives a miss only where round 0 held no gold, else the question:
    the references after revision hold the gold as often as before."""
    d, misses = w.dataset.get(ex.id, ""), w.misses.get(ex.id, ())
    miss = misses[int(lm.draw(ex.id, r.name, "miss", block) * len(misses))] if misses else ""
    if r.null:
        if ex.id in w.hits and misses:
            return w.hits[ex.id] if lm.draw(ex.id, r.name, "hit", block) < rt.null_hit.get(d, 0.0) else miss
        return miss if miss and not w.holds0[ex.id] else well_formed_question(ex.question)
    if ex.id in w.hits and lm.draw(ex.id, r.name, "hit", block) < rt.hit.get(d, 0.0):
        return w.hits[ex.id]
    return miss or well_formed_question(ex.question)


def _between(lm: SimLM, key: tuple, low: float, high: float) -> float:
    return round(low + (high - low) * lm.draw(*key), 2)


def verification(lm: SimLM, r: planted.Role, ex: Example, w: World, rt: Rates, answer: str, block: str
                 ) -> Verification:
    """The role's verification of `answer` from `block`: judgment, σ, and Table 1's scores consistent with both."""
    key = (ex.id, r.name, answer, block)
    truth, held, u = is_correct(answer, ex.answers), holds(block, ex.answers), lm.draw(*key, "judge")
    if r.null:
        judged_true, fire = u >= 0.5, u < planted.SIGMA_NULL
    else:
        judged_true = truth if u < r.jdg else not truth
        fire = not (truth or held or judged_true) and lm.draw(*key, "fire") < planted.SIGMA_ON_WRONG / r.jdg
    if fire:
        rc, query = _between(lm, (*key, "rc"), 0.05, 0.25), revised_query(lm, r, ex, w, rt, block)
    else:
        rc = _between(lm, (*key, "rc"), 0.7, 1.0) if held else _between(lm, (*key, "rc"), 0.35, 0.6)
        query = "" if judged_true or not r.chain else well_formed_question(ex.question)
    good = judged_true
    return Verification(
        reference_correctness=rc, correctness=_between(lm, (*key, "c"), *((0.75, 1.0) if good else (0.0, 0.2))),
        citation_accuracy=_between(lm, (*key, "ca"), *((0.5, 1.0) if truth else (0.0, 0.5))),
        truthfulness=_between(lm, (*key, "t"), *((0.93, 1.0) if good else (0.3, 0.9))),
        bias=_between(lm, (*key, "b"), *((0.0, 0.3) if good else (0.75, 0.95))),
        conciseness=_between(lm, (*key, "cc"), 0.6, 1.0), judgment="true" if judged_true else "false",
        revised_query=query, status="ok", chain=r.chain)


def verify_responder(w: World, r: planted.Role, rt: Rates) -> Callable[..., str | None]:
    """Table 6's verification prompt: Table 6's JSON (w/o CoL: judgment and revised query), a planted share in a
    code fence (Table 4's Fmt); sim:paper's QA-only model writes no JSON at all."""
    def reply(prompt: str, lm: SimLM, rng: Any) -> str | None:
        found = _VERIFY_INPUT.search(prompt) if prompt.startswith("#verification-Task#") else None
        ex = w.by_question.get(found.group("q").strip()) if found else None
        if ex is None or not prompt.endswith(OUTPUT_CUE):
            return None
        answer, block = found.group("a").strip(), found.group("refs").split(SEP + "Label: ")[0]
        if r.jdg is None and not r.null:
            return NOT_VERIFYING
        text = verification_json(verification(lm, r, ex, w, rt, answer, block), chain=r.chain)
        fenced = lm.draw(ex.id, r.name, answer, block, "format") >= r.fmt
        return f"```json\n{text}\n```" if fenced else text
    return reply


# --------------------------------------------------------------------------- rankings (Table 16)


def _shown_answers(rest: str) -> list[str]:
    parts = _ANSWER_SLOT.split(rest)
    return [parts[i + 1].strip() for i in range(1, len(parts) - 1, 2)]


def rank_pattern(lm: SimLM, ex: Example, criterion: str, effect: float, systems: int) -> str:
    """"planted" (the QA-only answer below the CoV answers), "reversed" or "tie" for one question and criterion, at
    shares whose mean-rank difference is `effect` (planted: +2 of 3 systems, +1 of 2; reversed: -1)."""
    up = (effect + planted.RANK_NOISE) / (2 if systems == 3 else 1)
    u = lm.draw(ex.id, "rank", criterion)
    return "planted" if u < up else "reversed" if u < up + planted.RANK_NOISE else "tie"


def rank_scores(pattern: str, kinds: Sequence[str]) -> list[float]:
    """Each shown answer's score (kinds: "RAG", "single", "multi"; an answer both CoV rows wrote is "single")."""
    table = {"planted": {"RAG": 0.5, "single": 0.8, "multi": 0.9}, "tie": {"RAG": 0.9, "single": 0.9, "multi": 0.9},
             "reversed": {"RAG": 0.9, "single": 0.4, "multi": 0.6}}[pattern]
    if "multi" not in kinds:
        table = {**table, "single": table["multi"]}  # the CoV answers agree: one score
    return [table[k] for k in kinds]


def rank_responder(w: World, systems: dict[str, Any], behaviour: str) -> Callable[..., str | None]:
    """Table 16's ranking prompts: which shown answer is the QA-only system's and which CoV-RAG-S's (their replies to
    the round-0 QA prompt, regenerated), ranked by the planted pattern of each criterion."""
    effects = planted.rank_effects(behaviour)

    def reply(prompt: str, lm: SimLM, rng: Any) -> str | None:
        kind = "citation" if prompt.startswith(CITATION_RANK_TEMPLATE[:60]) else \
            "others" if prompt.startswith(OTHERS_RANK_TEMPLATE[:60]) else None
        found = _RANK_INPUT.search(prompt) if kind else None
        ex = w.by_question.get(found.group("q").strip()) if found else None
        if ex is None or not all(systems.values()):
            return None
        shown, first = _shown_answers(found.group("rest")), qa_prompt_of(w, ex)
        rag, single = (systems[s].reply(first, None)[0].strip() for s in ("RAG", "CoV"))
        kinds = ["RAG" if a == rag else "single" if a == single else "multi" for a in shown]
        criteria = ["Citation Accuracy"] if kind == "citation" else ["Correctness", "Truthfulness", "Conciseness"]
        result = {}
        for criterion in criteria:
            scores = rank_scores(rank_pattern(lm, ex, criterion, effects[criterion], len(shown)), kinds)
            order = sorted(range(len(shown)), key=lambda i: -scores[i])
            result[criterion] = "[" + ", ".join(f'("answer{i + 1}", {scores[i]})' for i in order) + "]"
        body = ", ".join(f'"{c}": {v}' for c, v in result.items())
        return '{ "rank_result": {' + body + '}, "rank_reason": ' + json.dumps("simulated: a planted ranking") + " }"
    return reply


def qa_prompt_of(w: World, ex: Example) -> str:
    """The round-0 QA prompt of a question (its references as the world found them)."""
    return QA_TASK + w.first[ex.id] + SEP + "Question: " + ex.question.strip() + SEP + "Answer:"


# --------------------------------------------------------------------------- the notebook door


def session_world(S: Any) -> World:
    """The session's `World`, built once (kept in `S.data`)."""
    if "covrag_world" not in S.data:
        S.data["covrag_world"] = build_world(S.sets, S.data.get("train", []), S.passages, S.retriever, S.k)
    return S.data["covrag_world"]


def teach(S: Any, lm: SimLM) -> None:
    """Teach `lm` every prompt notebooks 08-11 send: QA (and closed-book), verification, and the two rankings."""
    w = session_world(S)
    r = planted.role(lm.behaviour, lm.persona, lm.variant, S.notebook)
    rt = rates(w, r)
    systems = {"RAG": S.data.get("rag_model"), "CoV": S.data.get("cov_model")}
    lm.teach("covrag-answer", answer_responder(w, r, rt))
    lm.teach("covrag-verify", verify_responder(w, r, rt))
    lm.teach("covrag-rank", rank_responder(w, systems, lm.behaviour))
