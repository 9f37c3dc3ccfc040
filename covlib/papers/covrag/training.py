"""CoV-RAG's training data (§2.2): QA and verification SFT pairs, gold or teacher labels, and the leakage check.

The verifier's targets are Table 6's JSON (`verification_json`, "w/ CoL") or only its judgment and
revised query ("w/o CoL", Table 4); labels come from a teacher model or, offline, from the gold
answer (`gold_verification`); `training_set` refuses training questions that are test questions.

`train_two_stages` runs §2.2's stages as the paper orders them: (1) SFT of M1 on the RAG QA pairs
(our QA-only, WebGLM-like adapter); (2) M1 answers the training questions, its answers are verified
(gold or teacher labels), and the w/o CoL and w/ CoL adapters learn L_QA + L_verification (Eqs. 2-4)
on them. Each stage is a LoRA run (`covlib.generation.training.fine_tune_lora`); M1 is loaded with its
adapter, so its predictions enter the call cache by the adapter's content fingerprint.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from covlib.core import paths
from covlib.core.metrics import normalize_answer
from covlib.core.records import Example, Passage
from covlib.core.references import parse_citations, strip_citations
from covlib import generation
from covlib.generation import Generator
from covlib.generation import training as lora_training
from covlib.papers.covrag.method import AnswerBatch, VerifyBatch, answer_batch, verify_batch
from covlib.papers.covrag.metrics import is_correct, references_hold_answer
from covlib.papers.covrag.prompts import ANSWER_SCORES, qa_prompt, verification_prompt
from covlib.papers.covrag.verifier import Verification


def verification_json(v: Verification, chain: bool = True) -> str:
    """A verification as the target the verifier is trained to write: Table 6's JSON ("w/ CoL"), or with
    `chain=False` only the judgment and revised query ("w/o CoL", Table 4)."""
    def num(x: float | None) -> float:
        return round(float(x if x is not None else 0.0), 2)

    out: dict[str, Any] = {}
    if chain:
        out["1"] = {"reference_correctness": num(v.reference_correctness)}
        out["2"] = {name: num(getattr(v, name)) for name in ANSWER_SCORES}
    out["3"] = v.judgment or "unclear"
    out["4"] = v.revised_query
    return json.dumps(out, ensure_ascii=False)


def well_formed_question(question: str) -> str:
    """The paper's advice for a revised query (Table 6 step 4), applied by rule: capitalised, ending with '?'."""
    q = " ".join(question.split()).rstrip(" .?!")
    return (q[:1].upper() + q[1:] + "?") if q else ""


def gold_verification(question: str, answer: str, references: Sequence[Passage], gold: Sequence[str]) -> Verification:
    """Verification labels derived from the gold answer (our offline stand-in for the paper's GPT-4 labels).

    correctness = answer contains gold; reference_correctness = a reference contains gold; citation
    accuracy = share of cited references that contain gold; bias, truthfulness = 0.1 / 0.9 when
    correct, 0.9 / 0.3 when not; conciseness = min(1, 40 / words). Judgment true iff correct; a
    wrong answer gets the question rewritten by `well_formed_question` as its revised query.
    """
    correct = is_correct(answer, gold)
    cited = [i for i in parse_citations(answer) if 1 <= i <= len(references)]
    holding = [references_hold_answer([references[i - 1]], gold) for i in cited]
    words = max(1, len(strip_citations(answer).split()))
    return Verification(
        reference_correctness=1.0 if references_hold_answer(references, gold) else 0.0,
        correctness=1.0 if correct else 0.0,
        citation_accuracy=sum(holding) / len(holding) if holding else 0.0,
        truthfulness=0.9 if correct else 0.3,
        bias=0.1 if correct else 0.9,
        conciseness=min(1.0, 40 / words),
        judgment="true" if correct else "false",
        revised_query="" if correct else well_formed_question(question),
        status="ok",
    )


def gold_answer(references: Sequence[Passage], gold: Sequence[str]) -> str:
    """A cited QA target from the gold answer: 'gold [n].' with n the first reference holding it (none: 'gold.')."""
    n = next((i for i, p in enumerate(references, 1) if references_hold_answer([p], gold)), None)
    return f"{gold[0]} [{n}]." if n else f"{gold[0]}."


def normalize_question(question: str) -> str:
    """A question compared for leakage: lowercased, punctuation and articles dropped, spaces collapsed."""
    return normalize_answer(question)


def check_no_leak(train_questions: Iterable[str], test_questions: Iterable[str]) -> None:
    """Raise ValueError naming the questions when a (normalised) test question is among the training questions."""
    test = {normalize_question(q): q for q in test_questions}
    leaked = sorted({test[n] for n in (normalize_question(q) for q in train_questions) if n in test})
    if leaked:
        shown = "; ".join(repr(q) for q in leaked[:5])
        raise ValueError(f"{len(leaked)} test question(s) in the training data: {shown}"
                         + (" ..." if len(leaked) > 5 else ""))


def qa_pairs(examples: Sequence[Example], references: Sequence[Sequence[Passage]]) -> list[tuple[str, str]]:
    """L_QA's pairs (Eq. 3): question + references -> the cited gold answer (`gold_answer`), one per example."""
    if len(examples) != len(references):
        raise ValueError(f"{len(examples)} examples, {len(references)} reference lists")
    return [(qa_prompt(ex.question, refs), " " + gold_answer(refs, ex.answers)) for ex, refs in zip(examples, references)]


@dataclass(frozen=True)
class TrainingSet:
    """SFT pairs for one model: QA pairs, verification pairs, and where their labels came from."""

    qa: list[tuple[str, str]]
    verification: list[tuple[str, str]]
    labels: str  # "gold" or "teacher:<model name>"
    teacher_checks: VerifyBatch | None = None  # the teacher's verifications (its `verify_batch`); None: gold labels

    def multitask(self) -> list[tuple[str, str]]:
        """L_QA + L_verification (Eqs. 2-4): both tasks' pairs in one list (interleaved, QA first)."""
        out: list[tuple[str, str]] = []
        for i in range(max(len(self.qa), len(self.verification))):
            out += self.qa[i:i + 1] + self.verification[i:i + 1]
        return out


def training_set(examples: Sequence[Example], references: Sequence[Sequence[Passage]], predictions: Sequence[str],
                 *, test_questions: Iterable[str], chain: bool = True, teacher: Generator | None = None,
                 verify_tokens: int = 160) -> TrainingSet:
    """§2.2's data from training questions only: QA pairs (question + references -> cited gold answer) and
    verification pairs (question + references + a model's prediction -> its verification).

    Verification labels come from `teacher` (its output for the same prompt plus Table 13's gold
    'Label:' line; only complete outputs are kept) or, without one, from the gold answer
    (`gold_verification`).
    Raises ValueError when a test question is among the training questions.
    """
    check_no_leak([ex.question for ex in examples], test_questions)
    if not (len(examples) == len(references) == len(predictions)):
        raise ValueError(f"{len(examples)} examples, {len(references)} reference lists, {len(predictions)} predictions")
    qa = qa_pairs(examples, references)
    prompts = [verification_prompt(ex.question, pred, refs) for ex, refs, pred in zip(examples, references, predictions)]
    if teacher is None:
        labels = [gold_verification(ex.question, pred, refs, ex.answers)
                  for ex, refs, pred in zip(examples, references, predictions)]
        source = "gold"
    else:
        labels = verify_batch(teacher, [ex.question for ex in examples], predictions, references, verify_tokens,
                              desc="teacher verification", labels=[ex.answers for ex in examples])
        source = f"teacher:{teacher.name}"
    # only complete labels become targets: a missing score must not be taught as 0.0
    verification = [(p, " " + verification_json(v, chain)) for p, v in zip(prompts, labels) if v.complete]
    return TrainingSet(qa, verification, source, labels if teacher is not None else None)


# --------------------------------------------------------------------------- §2.2's stages

M1 = "QA only (WebGLM-like)"  # stage 1's model: SFT on the RAG QA data alone (the paper's M1; WebGLM's recipe)
WITHOUT_COL, WITH_COL = "QA + verification w/o CoL", "QA + verification w/ CoL"  # stage 2 (Table 4's rows)
VARIANTS = {M1: "qa-only", WITHOUT_COL: "qa-verify-no-chain", WITH_COL: "qa-verify-chain"}  # name -> folder slug


def adapter_folder(slug: str, profile: str) -> str:
    """build/adapters/10-<profile>-<slug>: where notebook 10 writes a variant (a simulated model's is only named)."""
    return str(paths.build_dir() / "adapters" / f"10-{profile}-{slug}")


@dataclass
class TwoStages:
    """What §2.2's two stages produced: M1 and its predictions, the verification data built on them, the adapters."""

    m1: Generator  # stage 1's model (base + the QA-only adapter), loaded: it produced `predictions`
    predictions: AnswerBatch  # M1's answers to the training questions: what the verifier learns to judge
    with_chain: TrainingSet  # QA pairs + verification of M1's answers, Table 6's JSON (w/ CoL)
    without_chain: TrainingSet  # the same with judgment and revised query only (w/o CoL)
    pairs: dict[str, list[tuple[str, str]]]  # per variant (VARIANTS), the rendered (prompt, target) pairs it learned
    cards: dict[str, dict[str, Any]]  # per variant, its adapter's card, with "folder" and "stage"
    planted: str = ""  # a simulated model: why nothing was trained (its variants are planted); "" when trained


def train_two_stages(base: Any, model: str, train: Sequence[Example], references: Sequence[Sequence[Passage]], *,
                     test_questions: Iterable[str], adapters_dir: str | Path, prefix: str, device: str = "",
                     teacher: Generator | None = None, chat: bool = False, max_new_tokens: int = 128,
                     verify_tokens: int = 160, **lora: Any) -> TwoStages:
    """§2.2's training in the paper's order: (1) M1 = LoRA SFT of `model` on the QA pairs; (2) M1 answers the
    training questions, those answers are labelled (gold, or `teacher`), and the w/o CoL and w/ CoL adapters learn
    L_QA + L_verification (Eqs. 2-4) from `model`. `base` is `model` loaded (it renders the prompts); `lora` goes to
    `fine_tune_lora`; adapters are written to `adapters_dir/<prefix><slug>` (VARIANTS). M1's predictions (and a
    teacher's labels) are traced by `trace.write(tracer, <the TwoStages returned>)`.

    A simulated `model` (`sim:...`) trains nothing: each variant is the planted one its folder's name gives
    (`covlib.generation.load_lm`), the data are built all the same, and `planted` says so (the cards have no steps)."""
    test_questions = list(test_questions)
    planted = (f"no training ran: {model} is a simulated model, and its fine-tuned variants are planted (each adapter "
               "folder's name picks one; nothing is written there)") if generation.is_simulated(model) else ""
    check_no_leak([ex.question for ex in train], test_questions)
    base_dir = model or generation.embedded_model_dir()
    adapters_dir = Path(adapters_dir)
    pairs: dict[str, list[tuple[str, str]]] = {}
    cards: dict[str, dict[str, Any]] = {}

    def fit(name: str, raw: Sequence[tuple[str, str]], stage: str, **card: Any) -> str:
        folder = adapters_dir / f"{prefix}{VARIANTS[name]}"
        if planted:
            pairs[name] = list(raw)
            cards[name] = {"name": name, "steps": 0, "loss_curve": [], "planted": planted, **card}
        else:
            pairs[name] = [(base.render(p, chat), t) for p, t in raw]
            cards[name] = lora_training.fine_tune_lora(pairs[name], base_dir, folder,
                                                       card={"name": name, "stage": stage, **card}, **lora)
        cards[name].update(folder=str(folder), stage=stage)
        return str(folder)

    m1_folder = fit(M1, qa_pairs(train, references), "1: SFT on the RAG QA pairs (M1)")
    m1 = generation.load_lm(model, device=device, adapter=m1_folder)
    predictions = answer_batch(m1, [ex.question for ex in train], references, max_new_tokens, chat,
                               desc="training predictions (M1: the QA-SFT adapter)",
                               golds=[ex.answers for ex in train], ids=[ex.id for ex in train])
    sets = {chain: training_set(train, references, predictions, test_questions=test_questions, chain=chain,
                                teacher=teacher, verify_tokens=verify_tokens) for chain in (False, True)}
    judged = {"predictions_from": m1.name, "m1_adapter_files": getattr(m1, "adapter_files", None),
              "labels": sets[True].labels}
    for name, chain in ((WITHOUT_COL, False), (WITH_COL, True)):
        fit(name, sets[chain].multitask(), "2: L_QA + L_verification on M1's predictions", **judged)
    return TwoStages(m1, predictions, sets[True], sets[False], pairs, cards, planted)
