"""The simulated model's replies to notebooks 01-03 (`teach`): every Verify-and-Edit prompt answered from gold data.

Each question has answer slots (`planted`: the gold answer and wrong candidates drawn from the dataset's other
answers; FEVER: the three labels) and a latent type. A sampled CoT path states one slot ("First, the question is
about <title>. Second, that points to <X>. The answer is <X>.") or none, at the type's planted shares; Standard
prompting answers on one line. Editing runs for real: the verifying question names the rationale sentence's claim
and the question; the verifying answer quotes the first retrieved sentence and, for the sentence with the claim,
says where the evidence points: the gold answer when the planted edit fixes a wrong claim and a retrieved sentence
comes from the question's own paragraphs (the Dataset source's; none to check: 2Wiki, FEVER's NOT ENOUGH INFO), a
wrong one when it breaks a right claim, else the claim itself. Answering again reads the edited rationale and answers where it points.
Answer log-probabilities (`lm.score`) carry the planted calibration. Nothing here is evidence about the paper.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Callable

from covlib import data
from covlib.core.records import Example
from covlib.core.text import split_sentences
from covlib.generation.simulated import SimLM
from covlib.papers.verify_edit import planted
from covlib.papers.verify_edit.answers import ANSWER_MARKER, answer_key, answer_score, clean_answer, gold_answers
from covlib.papers.verify_edit.cot import cot_prompt, fewshot_examples, standard_prompt
from covlib.papers.verify_edit.prompts import VQ_PROMPTS, verifying_answer_header

CLAIM = "that points to"  # a path's second sentence: "Second, that points to <X>."
POINTS = "points to "  # where an answer is read from: after its last occurrence
EVIDENCE = "The evidence reads:"  # how every verifying answer begins (an edited rationale shows it)
CONFIRM, ABOUT, FOR = "Does the evidence confirm ", "What does the evidence say about ", " for: "
LABELS = ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")
OPPOSITE = {"yes": "no", "no": "yes"}
SENTINEL = "\x00question\x00"
MIN_EVIDENCE = 20  # characters: a retrieved sentence shorter than this is not taken as evidence


@dataclass(frozen=True)
class Known:
    """A question the simulated model can answer: its example, answer slots, type and evidence."""

    example: Example
    dataset: str
    slots: tuple[str, ...]  # one per answer slot: the gold answer at `gold_slot`, wrong candidates elsewhere
    gold_slot: int
    type: str  # one of planted.TYPES
    own: str  # the text of its own paragraphs (where a fix's evidence must come from); "": nothing to check

    @property
    def gold(self) -> list[str]:
        """Its gold aliases ([label] for FEVER)."""
        return gold_answers(self.example, self.dataset)

    def right(self, answer: str | None) -> bool:
        """Whether an answer scores right under the notebooks' metric."""
        return bool(answer) and answer_score(answer, self.gold, self.dataset) == 1.0

    def key(self, *parts: Any) -> tuple:
        """A key for this question's draws."""
        return (self.dataset, self.example.id, *parts)


# --------------------------------------------------------------------------- the questions


def loaders() -> dict[str, Callable[[], list[Example]]]:
    """The examples each dataset's notebooks evaluate (notebook 03's loaders)."""
    return {"hotpotqa": lambda: data.load_adv_hotpotqa(split="test"),
            "2wikimultihop": lambda: data.load_2wikimultihop(split="dev"), "fever": data.load_fever}


def wrong_candidates(example: Example, dataset: str, pool: list[str], k: int) -> list[str]:
    """k wrong answers for a question: FEVER's other labels, else (the opposite of a yes/no, then) other questions'
    answers that score wrong and read back as themselves, drawn by the question's id."""
    gold = gold_answers(example, dataset)
    if dataset == "fever":
        return random.Random(example.id).sample([x for x in LABELS if x != gold[0]], k)
    found, keys = [], {answer_key(g, dataset) for g in gold}
    start = [OPPOSITE[answer_key(gold[0], dataset)]] if answer_key(gold[0], dataset) in OPPOSITE else []
    for cand in start + random.Random(example.id).sample(pool, min(len(pool), 20 * k)):
        key = answer_key(cand, dataset)
        if key and key not in keys and answer_score(cand, gold, dataset) == 0 and clean_answer(f"{cand}.") == cand:
            found.append(cand)
            keys.add(key)
        if len(found) == k:
            return found
    raise ValueError(f"{dataset} {example.id}: fewer than {k} wrong answers found for the simulated model")


def known(lm: SimLM, dataset: str, examples: list[Example]) -> dict[str, Known]:
    """Each example by its question text, with its slots, type and evidence in this simulated world."""
    m, p = planted.answer_slots(dataset), planted.plan(lm.behaviour, dataset)
    pool = sorted({gold_answers(ex, dataset)[0] for ex in examples})
    out = {}
    for ex in examples:
        gold = gold_answers(ex, dataset)[0]
        at = int(lm.draw(dataset, ex.id, "gold slot") * m) if lm.behaviour == "null" else 0
        wrong = wrong_candidates(ex, dataset, pool, m - 1)
        u, type_ = lm.draw(dataset, ex.id, "type"), planted.TYPES[-1]
        for t, cum in zip(planted.TYPES, [sum(p.weights[:i + 1]) for i in range(len(p.weights))]):
            if u < cum:
                type_ = t
                break
        own = "\n".join(p.text for p in ex.paragraphs)
        out.setdefault(ex.question.strip(), Known(ex, dataset, tuple(wrong[:at]) + (gold,) + tuple(wrong[at:]), at,
                                                  type_, own))
    return out


# --------------------------------------------------------------------------- draws


def pick(shares: tuple[float, ...], u: float) -> int:
    """The slot a uniform draw picks by these shares."""
    total = 0.0
    for j, s in enumerate(shares):
        total += s
        if u < total:
            return j
    return len(shares) - 1


def latent(lm: SimLM, k: Known, d: float, right: bool, *key: Any) -> float:
    """An answer's latent x ~ N(d * right, 1), drawn once per question and key."""
    u = min(max(lm.draw(*k.key(*key)), 1e-12), 1 - 1e-12)
    return d * right + NormalDist().inv_cdf(u)


def edited_answer(lm: SimLM, k: Known, claim: str | None, evidence: bool) -> str:
    """Where an edited rationale points: `sim:paper` fixes a wrong claim (with evidence) or breaks a right one at
    the planted chances, else keeps it; `sim:null` draws a slot afresh from the question's shares."""
    u = lm.draw(*k.key("edit"))
    if lm.behaviour == "null":
        return k.slots[pick(planted.shares("null", k.dataset, k.type)[:-1], u)]
    if claim is not None and k.right(claim):
        return k.slots[1] if u < planted.BREAK else claim
    if u < planted.plan("paper", k.dataset).fix and evidence:
        return k.slots[k.gold_slot]
    return claim or k.slots[1]


# --------------------------------------------------------------------------- the prompt kinds


def head(template: str) -> str:
    """The fixed text a prompt kind begins with: all before the question."""
    return template[: template.index(SENTINEL)]


def path_reply(lm: SimLM, k: Known, rng: random.Random) -> tuple[str, float]:
    """One sampled CoT path: a slot at the type's shares, or no answer (the last share)."""
    j = pick(planted.shares(lm.behaviour, k.dataset, k.type), rng.random())
    title = next((p.title for p in k.example.paragraphs if p.is_supporting and p.title), "")
    first = f"First, the {'claim' if k.dataset == 'fever' else 'question'} is about {title or 'what it names'}."
    if j == len(k.slots):
        return f" {first} Second, it is hard to say.", planted.PATH_LOGPROB[1]
    return f" {first} Second, {CLAIM} {k.slots[j]}. {ANSWER_MARKER} {k.slots[j]}.", planted.PATH_LOGPROB[0]


def standard_reply(lm: SimLM, k: Known) -> tuple[str, float]:
    """Standard prompting's one-line answer, its log-probability spread over its words."""
    p, u = planted.plan(lm.behaviour, k.dataset), lm.draw(*k.key("standard"))
    shares = planted.shares(lm.behaviour, k.dataset, k.type)[:-1]
    if lm.behaviour == "null":
        answer = k.slots[pick(shares, u)]
    else:
        right = p.standard * shares[0]
        answer = k.slots[0] if u < right else k.slots[1 + pick(shares[1:], (u - right) / (1 - right) * sum(shares[1:]))]
    lp = float(planted.logprob(latent(lm, k, p.d_answer, k.right(answer), "standard lp")))
    return f" {answer}", lp / max(1, len(answer.split()))


def answer_logprob(lm: SimLM, k: Known, rationale: str, continuation: str) -> float:
    """log P(" <answer>." | the CoT prompt and rationale): an edited rationale's answers have their own calibration."""
    answer, p = clean_answer(continuation), planted.plan(lm.behaviour, k.dataset)
    edited = EVIDENCE in rationale
    x = latent(lm, k, p.d_edit if edited else p.d_answer, k.right(answer), "edited" if edited else "answer",
               answer_key(answer, k.dataset))
    return float(planted.logprob(x))


def verifying_question(k: Known, sentence: str) -> str:
    """A verifying question naming the sentence's claim (or its subject) and the question."""
    question = k.example.question.strip()
    if POINTS in sentence:
        return f" {CONFIRM}{sentence.rsplit(POINTS, 1)[1].strip().rstrip('.')}{FOR}{question}"
    return f" {ABOUT}{sentence.strip().rstrip('.').rsplit(' is about ', 1)[-1]}{FOR}{question}"


def verifying_answer(lm: SimLM, k: Known, question: str, retrieved: str) -> str:
    """The first retrieved sentence and, when the verifying question names a claim, where the evidence points."""
    lines = [s for s in (retrieved.split("\n") if k.dataset == "hotpotqa" else split_sentences(retrieved)) if s.strip()]
    first = lines[0].strip().rstrip(".") if lines else "nothing was found"
    if not question.startswith(CONFIRM):
        return f" {EVIDENCE} {first}."
    claim = question[len(CONFIRM):].rsplit(FOR, 1)[0]
    evidence = not k.own or any(len(s) >= MIN_EVIDENCE and s.strip() in k.own for s in lines)
    return f" {EVIDENCE} {first}; so it {POINTS}{edited_answer(lm, k, claim, evidence)}."


def reanswer(lm: SimLM, k: Known, rationale: str) -> str:
    """Answering again: where the edited rationale points (none pointed: the edit's own answer)."""
    if POINTS in rationale:
        return f" {rationale.rsplit(POINTS, 1)[1].strip().rstrip('.')}."
    return f" {edited_answer(lm, k, None, True)}."


# --------------------------------------------------------------------------- teaching


def find(questions: dict[str, Known], text: str) -> Known | None:
    """The question a text ends with (after " for: "), if known."""
    parts = text.split(FOR)
    return next((questions[FOR.join(parts[i:]).strip()] for i in range(1, len(parts))
                 if FOR.join(parts[i:]).strip() in questions), None)


def responders(lm: SimLM, dataset: str, questions: dict[str, Known]) -> dict[str, Callable]:
    """The responders (and the scorer) for one dataset's prompt kinds."""
    shots = fewshot_examples(dataset)
    std, cot = head(standard_prompt(SENTINEL, dataset, shots)), head(cot_prompt(SENTINEL, dataset, shots))
    vq, va = head(VQ_PROMPTS[dataset].replace("{question}", SENTINEL)), verifying_answer_header(dataset)
    va_line = re.compile(r"\n(?:Q|Question): (?P<q>[^\n]*)\n(?:A|Answer):$")

    def asked(prompt: str, start: str) -> tuple[Known | None, str]:
        question, _, rest = prompt[len(start):].partition("\nA:")
        return questions.get(question.strip()), rest

    def standard(prompt: str, lm: SimLM, rng: random.Random):
        k, _ = asked(prompt, std) if prompt.startswith(std) else (None, "")
        return standard_reply(lm, k) if k else None

    def chain(prompt: str, lm: SimLM, rng: random.Random):
        k, rest = asked(prompt, cot) if prompt.startswith(cot) else (None, "")
        if k is None:
            return None
        if prompt.endswith(ANSWER_MARKER):  # answering again, after the edited rationale
            return reanswer(lm, k, rest[: -len(ANSWER_MARKER)])
        return path_reply(lm, k, rng)

    def score(prompt: str, continuation: str, lm: SimLM):
        k, rest = asked(prompt, cot) if prompt.startswith(cot) and prompt.endswith(ANSWER_MARKER) else (None, "")
        return answer_logprob(lm, k, rest, continuation) if k else None

    def verify_q(prompt: str, lm: SimLM, rng: random.Random):
        found = re.match(r"(?P<q>.*)\n(?:Answer|Reason): (?P<s>.*)\nQuestion:$", prompt[len(vq):], re.S) \
            if prompt.startswith(vq) else None
        k = questions.get(found["q"].strip()) if found else None
        return verifying_question(k, found["s"]) if k else None

    def verify_a(prompt: str, lm: SimLM, rng: random.Random):
        found = va_line.search(prompt) if prompt.startswith(va) else None
        k = find(questions, found["q"]) if found else None
        return verifying_answer(lm, k, found["q"].strip(), prompt[len(va): found.start()]) if k else None

    return {"standard": standard, "cot": chain, "score": score, "verifying question": verify_q,
            "verifying answer": verify_a}


def teach(S: Any, lm: SimLM) -> None:
    """Teach a simulated model every prompt notebooks 01-03 send, for the three datasets' evaluation questions."""
    for dataset, load in loaders().items():
        questions = known(lm, dataset, load())
        r = responders(lm, dataset, questions)
        lm.teach(f"{dataset} standard", r["standard"])
        lm.teach(f"{dataset} CoT", r["cot"], r["score"])
        lm.teach(f"{dataset} verifying question", r["verifying question"])
        lm.teach(f"{dataset} verifying answer", r["verifying answer"])
