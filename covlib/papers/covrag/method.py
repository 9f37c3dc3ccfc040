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

Nothing here writes a trace: each step returns what it did (`AnswerBatch`, `VerifyBatch`, and
`cov_rag`'s `CovRagRun`: the outputs, the prompts sent, the decoding settings, the run's settings)
and `trace.write(tracer, result)` turns that into the run's trace.

Deviation, labelled where it is made: footnote 2 joins its six conditions with "and"
(`mode="all"`, the default); `mode="any"` fires when a revised query exists and any one of the
other five conditions holds (a revised query is needed to re-retrieve at all).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from covlib.core.records import Example, Passage
from covlib.generation import Generator
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
    """One pass of steps 1-4: the query retrieved with, the references (and their retrieval scores), the answer, its
    verification and σ, with the prompts sent for each (what a trace shows of the round)."""

    query: str
    references: list[Passage]
    answer: str
    verification: Verification | None = None  # None for a last round that was not verified
    fired: bool = False
    scores: list[float | None] = field(default_factory=list)  # the retriever's score of each reference
    answer_prompt: str = ""  # the QA prompt the answer came from
    verify_prompt: str = ""  # the verification prompt ("" when the round was not verified)
    conditions: dict[str, bool] = field(default_factory=dict)  # footnote 2's conditions on `verification`


@dataclass
class CovRagRecord:
    """Algorithm 1 on one question: every round, and the round whose answer is final."""

    id: str
    question: str
    gold: list[str]
    rounds: list[Round] = field(default_factory=list)
    dataset: str = ""  # the example's `metadata["dataset"]` ("nq_open", ...; "" when unknown)

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


def _decoding(max_new_tokens: int, stop: Sequence[str], chat: bool) -> dict[str, Any]:
    """A greedy generate call's settings that enter its cache key (`covlib.generation.call_keys`)."""
    return {"max_new_tokens": max_new_tokens, "stop": tuple(stop), "chat": chat}


@dataclass(eq=False, repr=False)
class AnswerBatch(list):
    """The answers of `answer_batch` or `closed_book_batch` (a list of str) and what produced them: the model, the
    prompts sent, the decoding settings, and what the trace adds (`trace.write`): references, golds, ids."""

    lm: Generator
    kind: str  # "answer" (Table 6's QA prompt) or "closed-book answer"
    desc: str
    questions: list[str]
    prompts: list[str]
    max_new_tokens: int
    stop: tuple[str, ...]
    chat: bool
    references: list[list[Passage]] | None = None  # None: closed-book
    golds: list[list[str]] | None = None  # only for the trace: gold answers and correctness
    ids: list[str] | None = None  # only for the trace: the examples' ids, which join it with other runs

    @property
    def decoding(self) -> dict[str, Any]:
        """The generate call's settings that enter its cache key."""
        return _decoding(self.max_new_tokens, self.stop, self.chat)


@dataclass(eq=False, repr=False)
class VerifyBatch(list):
    """The parsed verifications of `verify_batch` (a list of `Verification`) and what produced them: the model, the
    answers verified, the prompts sent, the decoding settings, and the gold labels a teacher was shown."""

    lm: Generator
    desc: str
    questions: list[str]
    answers: list[str]
    prompts: list[str]
    max_new_tokens: int
    stop: tuple[str, ...]
    chat: bool
    chain: bool
    labels: list[list[str]] | None = None  # the gold answers added to the prompts (a teacher labelling data)

    @property
    def decoding(self) -> dict[str, Any]:
        """The generate call's settings that enter its cache key."""
        return _decoding(self.max_new_tokens, self.stop, self.chat)


@dataclass(eq=False, repr=False)
class CovRagRun(list):
    """What `cov_rag` returns: one `CovRagRecord` per question, in the examples' order (a list), and the run's
    settings: the models, the retriever's name, k, rounds, σ's thresholds and the decoding of both tasks."""

    lm: Generator
    verifier: Generator  # `lm` itself unless another model verified
    retriever: str  # the retriever's name
    k: int
    max_rounds: int
    thresholds: Thresholds
    max_new_tokens: int
    verify_tokens: int
    chat: bool
    chain: bool

    @property
    def answer_decoding(self) -> dict[str, Any]:
        """The answer calls' settings that enter their cache keys."""
        return _decoding(self.max_new_tokens, QA_STOP, self.chat)

    @property
    def verify_decoding(self) -> dict[str, Any]:
        """The verification calls' settings that enter their cache keys."""
        return _decoding(self.verify_tokens, VERIFY_STOP, self.chat)


def _generate(lm: Generator, prompts: list[str], decoding: dict[str, Any], desc: str) -> list[str]:
    """One greedy generate call: each prompt's completion text."""
    return [o[0].text for o in lm.generate(prompts, **decoding, desc=desc)]


def _search(retriever: Retriever, queries: Sequence[str], k: int) -> tuple[list[list[Passage]], list[list[Any]]]:
    """The top-k passages per query (as `retrieval.search_passages`) and their scores."""
    hits = retriever.search_batch(list(queries), k=k)
    return [[h.passage for h in hs] for hs in hits], [[getattr(h, "score", None) for h in hs] for hs in hits]


def answer_batch(lm: Generator, questions: Sequence[str], references: Sequence[Sequence[Passage]],
                 max_new_tokens: int = 128, chat: bool = False, desc: str = "CoV-RAG answer",
                 golds: Sequence[Sequence[str]] | None = None, ids: Sequence[str] | None = None) -> AnswerBatch:
    """Step 2 for many questions: one generate call with Table 6's QA prompt (greedy). `golds` and `ids` (the
    examples') only go to the trace (`trace.write`): gold answers and correctness, and ids that join it with other
    runs."""
    batch = AnswerBatch(lm=lm, kind="answer", desc=desc, questions=list(questions),
                        prompts=[qa_prompt(q, refs) for q, refs in zip(questions, references)],
                        max_new_tokens=max_new_tokens, stop=QA_STOP, chat=chat,
                        references=[list(refs) for refs in references],
                        golds=[list(g) for g in golds] if golds else None, ids=[str(i) for i in ids] if ids else None)
    batch.extend(t.strip() for t in _generate(lm, batch.prompts, batch.decoding, desc))
    return batch


def closed_book_batch(lm: Generator, questions: Sequence[str], max_new_tokens: int = 128, chat: bool = False,
                      golds: Sequence[Sequence[str]] | None = None, ids: Sequence[str] | None = None) -> AnswerBatch:
    """Table 2's closed-book row: answers without references, one generate call (greedy). `golds` and `ids` only go
    to the trace, as in `answer_batch`."""
    desc = "closed-book answer"
    batch = AnswerBatch(lm=lm, kind=desc, desc=desc, questions=list(questions),
                        prompts=[closed_book_prompt(q) for q in questions], max_new_tokens=max_new_tokens,
                        stop=QA_STOP, chat=chat, references=None, golds=[list(g) for g in golds] if golds else None,
                        ids=[str(i) for i in ids] if ids else None)
    batch.extend(t.strip() for t in _generate(lm, batch.prompts, batch.decoding, desc))
    return batch


def verify_batch(lm: Generator, questions: Sequence[str], answers: Sequence[str],
                 references: Sequence[Sequence[Passage]], max_new_tokens: int = 160, chat: bool = False,
                 desc: str = "CoV-RAG verify", chain: bool = True,
                 labels: Sequence[Sequence[str]] | None = None) -> VerifyBatch:
    """Step 3 for many answers: one generate call with Table 6's verification prompt (greedy), parsed (`chain=False`:
    a verifier trained without the chain of scores). `labels` adds each gold answer (a teacher labelling data)."""
    prompts = [verification_prompt(q, a, refs, label=labels[i] if labels else None)
               for i, (q, a, refs) in enumerate(zip(questions, answers, references))]
    batch = VerifyBatch(lm=lm, desc=desc, questions=list(questions), answers=list(answers), prompts=prompts,
                        max_new_tokens=max_new_tokens, stop=VERIFY_STOP, chat=chat, chain=chain,
                        labels=[list(g) for g in labels] if labels else None)
    batch.extend(parse_verification(t, chain=chain) for t in _generate(lm, prompts, batch.decoding, desc))
    return batch


def cov_rag(lm: Generator, examples: Sequence[Example], retriever: Retriever, *, verifier: Generator | None = None,
            k: int = 5, max_rounds: int = 1, thresholds: Thresholds = PAPER_THRESHOLDS, max_new_tokens: int = 128,
            verify_tokens: int = 160, chat: bool = False, chain: bool = True) -> CovRagRun:
    """Algorithm 1 over all examples, batched: retrieve, answer, verify, and re-retrieve where σ fires.

    `verifier` defaults to `lm` (the paper's one CoV-augmented model does both tasks). The answer
    of a round past the first is verified only when another round may follow (`max_rounds`).
    `chain=False` reads verifications written without the chain of scores (see `sigma`).
    Returns one record per question with every round (its prompts, references and scores, verification and σ) and
    the run's settings: `trace.write` turns it into the run's trace once it has returned (the generate calls are
    cached, so a run repeated after a crash costs no model call).
    """
    if max_rounds < 0:
        raise ValueError(f"max_rounds must be >= 0, not {max_rounds}")
    if k < 1:
        raise ValueError(f"k must be >= 1, not {k}")
    run = CovRagRun(lm=lm, verifier=verifier or lm, retriever=getattr(retriever, "name", type(retriever).__name__),
                    k=k, max_rounds=max_rounds, thresholds=thresholds, max_new_tokens=max_new_tokens,
                    verify_tokens=verify_tokens, chat=chat, chain=chain)
    run.extend(CovRagRecord(ex.id, ex.question, list(ex.answers), dataset=str(ex.metadata.get("dataset", "")))
               for ex in examples)
    active = list(range(len(run)))
    queries = [rec.question for rec in run]
    for round_no in range(max_rounds + 1):
        # steps 1-2; past round 0, step 4: re-retrieve with the revised queries, answer the original questions
        refs, scores = _search(retriever, queries, k)
        answers = answer_batch(lm, [run[i].question for i in active], refs, max_new_tokens, chat,
                               "CoV-RAG answer" if round_no == 0 else f"CoV-RAG re-answer (round {round_no})")
        for i, q, r, s, a, p in zip(active, queries, refs, scores, answers, answers.prompts):
            run[i].rounds.append(Round(q, r, a, scores=s, answer_prompt=p))
        if round_no > 0 and round_no == max_rounds:
            break  # the last new answer is taken unverified (Algorithm 1 line 9)
        # step 3 and σ
        last = [run[i].rounds[-1] for i in active]
        checks = verify_batch(run.verifier, [run[i].question for i in active], [r.answer for r in last],
                              [r.references for r in last], verify_tokens, chat, f"CoV-RAG verify (round {round_no})",
                              chain)
        for r, v, p in zip(last, checks, checks.prompts):
            r.verification, r.verify_prompt = v, p
            r.conditions, r.fired = sigma_conditions(v, thresholds), sigma(v, thresholds)
        active = [i for i, r in zip(active, last) if r.fired]
        if round_no == max_rounds or not active:
            break  # max_rounds=0: σ is recorded, nothing is re-retrieved
        queries = [run[i].rounds[-1].verification.revised_query for i in active]
    return run
