"""The model work of notebooks 08-11 for a run's plan (`covlib.runs.plan`): their calls, made on recorders.

`work_08` ... `work_11` load the profile's test (and training) questions and the BM25 corpus as the notebooks'
`load` does and run the paper's own methods (`cov_rag`, `closed_book_batch`, `answer_batch`, `training_set`,
`rank_answers`) with each model's `covlib.generation.recording.Recorder`, which keeps each call's prompts, tokens and
cache keys; notebook 10's LoRA runs are recorded over the real training pairs (`Recorder.train`). What the replies
decide is played by placeholders (`SCRIPT`), each a declared bound: an answer fills `max_new_tokens`; every
verification fires σ with a revised query, which finds the question's next `k` passages (`Shifted`), so every
question is re-answered every round. The adapters notebook 10 trains are those of this profile's folders, as a run
of both 10 and 11 uses them (their keys, before 10 has run, are the plan's own).
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Sequence

from covlib import data
from covlib.core.records import Example
from covlib.generation.recording import Recorder, Script
from covlib.generation.training import training_steps
from covlib.papers.covrag.method import answer_batch, closed_book_batch, cov_rag
from covlib.papers.covrag.paper import load_datasets
from covlib.papers.covrag.ranking import rank_answers
from covlib.papers.covrag.training import (M1, VARIANTS, WITH_COL, WITHOUT_COL, adapter_folder, qa_pairs,
                                           training_set, verification_json)
from covlib.papers.covrag.verifier import Verification
from covlib.retrieval import open_corpus, search_passages

REVISED = "revised: "  # a placeholder revised query: this, then the question
RE_ANSWERED = "at most: σ fires for every question, every round"


def verification(rec: Recorder, prompt: str, tokens: int, sample: int) -> str:
    """A verification that fires σ (footnote 2's six conditions, and a judgment without the chain) with a revised
    query: `REVISED` and the question."""
    question = prompt.split('{ "question": ', 1)[-1].split(', "answer": ', 1)[0]
    return verification_json(Verification(reference_correctness=0.0, correctness=0.0, citation_accuracy=0.0,
                                          truthfulness=0.0, bias=1.0, conciseness=0.0, judgment="false",
                                          revised_query=REVISED + question, status="ok"))


SCRIPT = Script(replies={"CoV-RAG verify": verification, "teacher verification": verification},
                bounds={"CoV-RAG re-answer": RE_ANSWERED, "CoV-RAG verify (round 1": RE_ANSWERED,
                        "CoV-RAG verify (round 2": RE_ANSWERED, "CoV-RAG verify (round 3": RE_ANSWERED})


class Shifted:
    """The notebook's retriever, save that a revised query (`REVISED` and the question) finds the question's next `k`
    passages: re-retrieval brings other references of the corpus' own sizes."""

    def __init__(self, retriever: Any) -> None:
        self.retriever, self.name = retriever, getattr(retriever, "name", "retriever")

    def search_batch(self, queries: Sequence[str], k: int) -> list[list[Any]]:
        """Each query's hits as the retriever gives them; a revised one's, ranks k+1..2k of its question."""
        revised = [q.startswith(REVISED) for q in queries]
        plain = iter(self._search([q for q, r in zip(queries, revised) if not r], k))
        more = iter(self._search([q[len(REVISED):] for q, r in zip(queries, revised) if r], 2 * k))
        return [next(more)[k:] if r else next(plain) for r in revised]

    def _search(self, queries: list[str], k: int) -> list[list[Any]]:
        return self.retriever.search_batch(queries, k=k) if queries else []


def test_sets(v: dict[str, Any]) -> dict[str, list[Example]]:
    """Each named test set that loads, in order (the notebooks' `load` and the plan read the same)."""
    names = v.get("test_datasets", v.get("datasets"))
    loaded = load_datasets(triviaqa=v.get("triviaqa", ""), mintaka=v.get("mintaka", ""), sizes=v["sizes"],
                           seed=v["seed"])
    return {name: loaded[name] for name in names if name in loaded}


def questions(v: dict[str, Any]) -> list[Example]:
    """The test questions as the notebooks' `load` has them: every test set's, in order."""
    return [ex for exs in test_sets(v).values() for ex in exs]


def covrag(rec: Recorder, v: dict[str, Any], examples: list[Example], retriever: Any, **options: Any) -> Any:
    """`cov_rag` with the notebook's settings (`options`: the rest), the σ-firing placeholders."""
    with rec.playing(SCRIPT):
        return cov_rag(rec, examples, Shifted(retriever), k=v["k"], max_new_tokens=v["max_new_tokens"],
                       verify_tokens=v["verify_tokens"], chat=v["chat"], **options)


def work_08(v: dict[str, Any], record: Callable[..., Recorder]) -> list[dict[str, Any]]:
    """Notebook 08: one round of answers and their verifications (σ recorded, not acted on)."""
    base = record(v["model"], v["adapter"])
    covrag(base, v, questions(v), open_corpus(v["corpus"])[1], verifier=record(v["verifier"]) if v["verifier"] else
           base, max_rounds=0, thresholds=v["thresholds"])
    return []


def work_09(v: dict[str, Any], record: Callable[..., Recorder]) -> list[dict[str, Any]]:
    """Notebook 09: per model, closed-book answers and CoV-RAG with `max_rounds` rounds (its first 08's calls)."""
    examples, retriever = questions(v), open_corpus(v["corpus"])[1]
    for model in v["model_ids"]:
        rec = record(model, v["adapter"] if model == v["model"] else "")
        closed_book_batch(rec, [ex.question for ex in examples], v["max_new_tokens"], v["chat"])
        covrag(rec, v, examples, retriever, max_rounds=v["max_rounds"], thresholds=v["thresholds"])
    return []


def lora(rec: Recorder, name: str, pairs: list[tuple[str, str]], v: dict[str, Any]) -> None:
    """One LoRA run of notebook 10 over `pairs` (prompt, target), as many sequences as its steps take."""
    steps = training_steps(len(pairs), v["batch_size"], v["epochs"], v["max_steps"])
    rec.train([rec.render(p, v["chat"]) + t for p, t in pairs], steps * v["batch_size"], v["max_length"],
              desc=f"LoRA, {name}")


def work_10(v: dict[str, Any], record: Callable[..., Recorder]) -> list[dict[str, Any]]:
    """Notebook 10: §2.2's two stages (M1 on the QA pairs, its training answers, the two multitask adapters) and
    CoV-RAG evaluated on the base model and each adapter."""
    examples, retriever = questions(v), open_corpus(v["corpus"])[1]
    train = data.sample(data.load_adv_hotpotqa(split="all"), v["n_train"], v.get("seed", 0))
    refs = search_passages(retriever, [ex.question for ex in train], v["k"])
    base, tested = record(v["model"]), [ex.question for ex in examples]
    lora(base, M1, qa_pairs(train, refs), v)
    m1 = record(v["model"], adapter_folder(VARIANTS[M1], v["profile"]))
    with m1.playing(SCRIPT):
        predictions = answer_batch(m1, [ex.question for ex in train], refs, v["max_new_tokens"], v["chat"],
                                   desc="training predictions (M1: the QA-SFT adapter)")
    teacher = record(v["teacher"]) if v["teacher"] else None
    for name, chain in ((WITHOUT_COL, False), (WITH_COL, True)):
        with teacher.playing(SCRIPT) if teacher else contextlib.nullcontext():
            pairs = training_set(train, refs, predictions, test_questions=tested, chain=chain, teacher=teacher,
                                 verify_tokens=v["verify_tokens"]).multitask()
        lora(base, name, pairs, v)
    evaluated = ([("base", "")] if v["evaluate_base"] else []) + [
        (name, adapter_folder(slug, v["profile"])) for name, slug in VARIANTS.items()]
    for name, folder in evaluated:
        covrag(record(v["model"], folder), v, examples, retriever, max_rounds=1, chain="w/o CoL" not in name)
    return []


def work_11(v: dict[str, Any], record: Callable[..., Recorder]) -> list[dict[str, Any]]:
    """Notebook 11: the RAG and CoV-RAG answers (10's calls on its adapters) and the two rankings."""
    examples, retriever = questions(v), open_corpus(v["corpus"])[1]
    asked = [ex.question for ex in examples]
    references = search_passages(retriever, asked, v["k"])
    rag_model = record(v["model"], v["qa_adapter"] or adapter_folder(VARIANTS[M1], v["profile"]))
    with rag_model.playing(SCRIPT):
        rag = answer_batch(rag_model, asked, references, v["max_new_tokens"], v["chat"], desc="RAG answer")
    records = covrag(record(v["model"], v["covrag_adapter"] or adapter_folder(VARIANTS[WITH_COL], v["profile"])), v,
                     examples, retriever, max_rounds=1)
    answers = {"RAG": rag, "CoV, single iteration": [r.first_answer for r in records],
               "CoV, multi-iteration": [r.answer for r in records]}
    ranker = record(v["ranker"])
    rank_answers(ranker, "others", asked, answers, ["Correctness", "Truthfulness", "Conciseness"],
                 golds=[ex.answers for ex in examples], seed=v["seed"], max_new_tokens=v["ranker_tokens"])
    two = {name: answers[name] for name in ("RAG", "CoV, single iteration")}
    rank_answers(ranker, "citation", asked, two, ["Citation Accuracy"], references=references, seed=v["seed"],
                 max_new_tokens=v["ranker_tokens"])
    return []
