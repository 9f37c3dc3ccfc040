"""CoV-RAG's method: σ, the re-retrieval indicator (footnote 2), and Algorithm 1 batched across questions (`cov_rag`).

Each numbered step is ONE generate call:

1. retrieve the top-5 references for the question x;
2. answer x from them with the QA prompt of Table 6 (`qa_prompt`), citing `[n]`;
3. verify (x, references, answer) with the verification prompt of Table 6 (`verification_prompt`),
   parsed into a `Verification` (`parse_verification`: tolerant, every repair counted);
4. σ (`sigma`, footnote 2's thresholds): when it fires, re-retrieve with the revised query x',
   answer the *original* question x from the new references and take that answer.

`max_rounds` (paper: 1) repeats 3-4 on the new answer; each record keeps every round and the
round at which its answer settled. A verification that cannot be parsed never fires σ and is
counted as unverified.

Deviation, labelled where it is made: footnote 2 joins its six conditions with "and"
(`mode="all"`, the default); `mode="any"` fires when a revised query exists and any one of the
other five conditions holds (a revised query is needed to re-retrieve at all).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from covlib.core.records import Example, Passage
from covlib.generation import Generator
import covlib.papers.covrag.trace as trace
from covlib.papers.covrag.prompts import closed_book_prompt, qa_prompt, verification_prompt
from covlib.papers.covrag.verifier import Verification, parse_verification
from covlib.retrieval import Retriever


# --------------------------------------------------------------------------- σ, the re-retrieval indicator


@dataclass(frozen=True)
class Thresholds:
    """Footnote 2's σ: s_k <= 0.27, judgment false, x' non-empty, correctness < 0.26, bias > 0.7, truthfulness <= 0.92.

    `mode="all"` (default) needs all six (the footnote's "and"); `mode="any"` needs a revised query
    and any one of the other five.
    """

    reference_correctness_max: float = 0.27
    correctness_below: float = 0.26
    bias_above: float = 0.7
    truthfulness_max: float = 0.92
    mode: str = "all"

    def __post_init__(self) -> None:
        if self.mode not in ("all", "any"):
            raise ValueError(f"Thresholds.mode must be 'all' or 'any', not {self.mode!r}")


PAPER_THRESHOLDS = Thresholds()


def sigma_conditions(v: Verification, t: Thresholds = PAPER_THRESHOLDS) -> dict[str, bool]:
    """Each of footnote 2's conditions for one verification; a missing value never satisfies its condition."""
    def holds(x: float | None, test) -> bool:
        return x is not None and bool(test(x))

    return {
        "reference_low": holds(v.reference_correctness, lambda x: x <= t.reference_correctness_max),
        "judged_false": v.judgment == "false",
        "has_revision": bool(v.revised_query.strip()),
        "correctness_low": holds(v.correctness, lambda x: x < t.correctness_below),
        "bias_high": holds(v.bias, lambda x: x > t.bias_above),
        "truthfulness_low": holds(v.truthfulness, lambda x: x <= t.truthfulness_max),
    }


def sigma(v: Verification, t: Thresholds = PAPER_THRESHOLDS) -> bool:
    """Whether to re-retrieve with the revised query (False for an output that could not be parsed).

    A verification without its chain of scores (`chain=False`, Table 4's "w/o CoL") has only the
    judgment and the revised query: σ is then judgment false and a revised query (ours: the paper
    does not say how it ran σ for that row).
    """
    if not v.parsed:
        return False
    c = sigma_conditions(v, t)
    if not v.chain:
        return c["judged_false"] and c["has_revision"]
    if t.mode == "all":
        return all(c.values())
    return c["has_revision"] and any(value for key, value in c.items() if key != "has_revision")


# --------------------------------------------------------------------------- Algorithm 1


@dataclass
class Round:
    """One pass of steps 1-4: the query retrieved with, the references, the answer and its verification."""

    query: str
    references: list[Passage]
    answer: str
    verification: Verification | None = None  # None for a last round that was not verified
    fired: bool = False


@dataclass
class CovRagRecord:
    """Algorithm 1 on one question: every round, and the round whose answer is final."""

    id: str
    question: str
    gold: list[str]
    rounds: list[Round] = field(default_factory=list)

    @property
    def answer(self) -> str:
        """The final answer (the last round's: Algorithm 1 line 9 takes the new answer)."""
        return self.rounds[-1].answer

    @property
    def first_answer(self) -> str:
        """The single-iteration answer (CoV-RAG-S)."""
        return self.rounds[0].answer

    @property
    def settled_round(self) -> int:
        """The round whose answer is final: 0 when σ did not fire (or no round was allowed), else the last one."""
        return len(self.rounds) - 1

    @property
    def unverified(self) -> bool:
        """The first verification could not be parsed (σ could not fire)."""
        v = self.rounds[0].verification
        return v is not None and not v.parsed

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready record (references as ids and titles)."""
        rounds = []
        for r in self.rounds:
            rounds.append({"query": r.query, "references": [{"id": p.id, "title": p.title} for p in r.references],
                           "answer": r.answer, "fired": r.fired,
                           "verification": asdict(r.verification) if r.verification else None})
        return {"id": self.id, "question": self.question, "gold": self.gold, "rounds": rounds}


QA_STOP = ("\nQuestion:", "\n\n#", "#Question-Answering")
VERIFY_STOP = ("\n\n#", "#verification-Task#")


def _generate(lm: Generator, prompts: list[str], max_new_tokens: int, stop: Sequence[str], chat: bool,
              desc: str) -> list[str]:
    """One greedy generate call: each prompt's completion text."""
    return [o[0].text for o in lm.generate(prompts, max_new_tokens=max_new_tokens, stop=stop, chat=chat, desc=desc)]


def _answers(lm: Generator, questions: Sequence[str], references: Sequence[Sequence[Passage]], max_new_tokens: int,
             chat: bool, desc: str) -> tuple[list[str], list[str]]:
    """Step 2, untraced: (answers, prompts)."""
    prompts = [qa_prompt(q, refs) for q, refs in zip(questions, references)]
    return [t.strip() for t in _generate(lm, prompts, max_new_tokens, QA_STOP, chat, desc)], prompts


def _verifications(lm: Generator, questions: Sequence[str], answers: Sequence[str],
                   references: Sequence[Sequence[Passage]], max_new_tokens: int, chat: bool, desc: str, chain: bool,
                   labels: Sequence[Sequence[str]] | None = None) -> tuple[list[Verification], list[str]]:
    """Step 3, untraced: (parsed verifications, prompts)."""
    prompts = [verification_prompt(q, a, refs, label=labels[i] if labels else None)
               for i, (q, a, refs) in enumerate(zip(questions, answers, references))]
    return [parse_verification(t, chain=chain) for t in _generate(lm, prompts, max_new_tokens, VERIFY_STOP, chat,
                                                                   desc)], prompts


def _search(retriever: Retriever, queries: Sequence[str], k: int) -> tuple[list[list[Passage]], list[list[Any]]]:
    """The top-k passages per query (as `retrieval.search_passages`) and the hits with their scores."""
    hits = retriever.search_batch(list(queries), k=k)
    return [[h.passage for h in hs] for hs in hits], hits


def answer_batch(lm: Generator, questions: Sequence[str], references: Sequence[Sequence[Passage]],
                 max_new_tokens: int = 128, chat: bool = False, desc: str = "CoV-RAG answer",
                 golds: Sequence[Sequence[str]] | None = None, ids: Sequence[str] | None = None) -> list[str]:
    """Step 2 for many questions: one generate call with Table 6's QA prompt (greedy). `golds` and `ids` (the
    examples') only go to the trace: gold answers and correctness, and ids that join it with other runs."""
    with trace.open_batch("answer", lm, desc, len(questions), max_new_tokens=max_new_tokens, chat=chat) as tr:
        answers, prompts = _answers(lm, questions, references, max_new_tokens, chat, desc)
        trace.write_answers(tr, lm, questions, prompts, answers, references, golds, ids, max_new_tokens=max_new_tokens,
                            stop=QA_STOP, chat=chat)
    return answers


def closed_book_batch(lm: Generator, questions: Sequence[str], max_new_tokens: int = 128, chat: bool = False,
                      golds: Sequence[Sequence[str]] | None = None, ids: Sequence[str] | None = None) -> list[str]:
    """Table 2's closed-book row: answers without references, one generate call (greedy). `golds` and `ids` only go
    to the trace, as in `answer_batch`."""
    desc = "closed-book answer"
    with trace.open_batch(desc, lm, desc, len(questions), max_new_tokens=max_new_tokens, chat=chat) as tr:
        prompts = [closed_book_prompt(q) for q in questions]
        answers = [t.strip() for t in _generate(lm, prompts, max_new_tokens, QA_STOP, chat, desc)]
        trace.write_answers(tr, lm, questions, prompts, answers, None, golds, ids, max_new_tokens=max_new_tokens,
                            stop=QA_STOP, chat=chat)
    return answers


def verify_batch(lm: Generator, questions: Sequence[str], answers: Sequence[str],
                 references: Sequence[Sequence[Passage]], max_new_tokens: int = 160, chat: bool = False,
                 desc: str = "CoV-RAG verify", chain: bool = True,
                 labels: Sequence[Sequence[str]] | None = None) -> list[Verification]:
    """Step 3 for many answers: one generate call with Table 6's verification prompt (greedy), parsed (`chain=False`:
    a verifier trained without the chain of scores). `labels` adds each gold answer (a teacher labelling data)."""
    with trace.open_batch("verify", lm, desc, len(questions), max_new_tokens=max_new_tokens, chat=chat, chain=chain,
                          labels=bool(labels)) as tr:
        checks, prompts = _verifications(lm, questions, answers, references, max_new_tokens, chat, desc, chain, labels)
        trace.write_verifications(tr, lm, questions, answers, prompts, checks, labels, max_new_tokens=max_new_tokens,
                                  stop=VERIFY_STOP, chat=chat)
    return checks


def cov_rag(lm: Generator, examples: Sequence[Example], retriever: Retriever, *, verifier: Generator | None = None,
            k: int = 5, max_rounds: int = 1, thresholds: Thresholds = PAPER_THRESHOLDS, max_new_tokens: int = 128,
            verify_tokens: int = 160, chat: bool = False, chain: bool = True) -> list[CovRagRecord]:
    """Algorithm 1 over all examples, batched: retrieve, answer, verify, and re-retrieve where σ fires.

    `verifier` defaults to `lm` (the paper's one CoV-augmented model does both tasks). The answer
    of a round past the first is verified only when another round may follow (`max_rounds`).
    `chain=False` reads verifications written without the chain of scores (see `sigma`).
    Traced (`covlib.core.traces`): one record per question, written when its answer settles.
    """
    if max_rounds < 0:
        raise ValueError(f"max_rounds must be >= 0, not {max_rounds}")
    if k < 1:
        raise ValueError(f"k must be >= 1, not {k}")
    verifier = verifier or lm
    tk = trace.CovRagTrace(lm, verifier, examples, retriever, k=k, max_rounds=max_rounds, thresholds=thresholds,
                           chat=chat, chain=chain, max_new_tokens=max_new_tokens, verify_tokens=verify_tokens,
                           qa_stop=QA_STOP, verify_stop=VERIFY_STOP)
    with tk:
        records = [CovRagRecord(ex.id, ex.question, list(ex.answers)) for ex in examples]
        questions = [ex.question for ex in examples]
        refs, hits = _search(retriever, questions, k)
        answers, _ = _answers(lm, questions, refs, max_new_tokens, chat, "CoV-RAG answer")
        active = list(range(len(records)))
        tk.retrieved(active, questions, hits, 0)
        tk.answered(active, refs, answers, 0)
        for rec, r, a in zip(records, refs, answers):
            rec.rounds.append(Round(rec.question, r, a))
        for round_no in range(max_rounds + 1):
            if round_no > 0 and round_no == max_rounds:
                break  # the last new answer is taken unverified (Algorithm 1 line 9)
            last = [records[i].rounds[-1] for i in active]
            checks, _ = _verifications(verifier, [records[i].question for i in active], [r.answer for r in last],
                                       [r.references for r in last], verify_tokens, chat,
                                       f"CoV-RAG verify (round {round_no})", chain)
            for r, v in zip(last, checks):
                r.verification, r.fired = v, sigma(v, thresholds)
            if tk:
                tk.verified(active, [r.answer for r in last], [r.references for r in last], checks, round_no,
                            [sigma_conditions(v, thresholds) for v in checks], [r.fired for r in last])
                tk.settled(records, [i for i, r in zip(active, last) if not r.fired])
            active = [i for i, r in zip(active, last) if r.fired]
            if round_no == max_rounds or not active:
                break  # max_rounds=0: σ is recorded, nothing is re-retrieved
            queries = [records[i].rounds[-1].verification.revised_query for i in active]
            new_refs, new_hits = _search(retriever, queries, k)
            new_answers, _ = _answers(lm, [records[i].question for i in active], new_refs, max_new_tokens, chat,
                                      f"CoV-RAG re-answer (round {round_no + 1})")
            tk.retrieved(active, queries, new_hits, round_no + 1)
            tk.answered(active, new_refs, new_answers, round_no + 1)
            for i, q, r, a in zip(active, queries, new_refs, new_answers):
                records[i].rounds.append(Round(q, r, a))
        tk.settled(records, active)
    return records
