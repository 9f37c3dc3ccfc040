"""The model work of notebooks 04-07 for a run's plan (`covlib.runs.plan`): their calls, made on recorders.

`work_04` ... `work_07` load the profile's questions as the notebooks' `load` does and run the paper's own methods
(`answer_runs`, `generate_answers`, `self_complete`, `llm_key_facts`) with each compared model's
`covlib.generation.recording.Recorder`, which keeps each call's prompts, tokens and cache keys. Self-completion runs
on the notebook's real BM25 corpus; what the model's replies decide is played by placeholders (`SCRIPT`): every
reflection refuses, every round asks a query (the question itself) and refuses again, up to `max_rounds` (the bound).
What no recorder sees is declared: the NLI judge's pairs, `PAIRS_PER_ANSWER` an answer (the data decides how many
sentences an answer has), and the judge's check on the labelled key-fact pairs, once a run.
"""

from __future__ import annotations

from typing import Any, Callable

from covlib import retrieval
from covlib.nli.labelled import load_keyfact_pairs, load_keyfact_test_pairs
from covlib.generation.recording import Recorder, Script
from covlib.papers.credibility.answers import answer_runs, generate_answers
from covlib.papers.credibility.improvements import reflection_sets, self_complete
from covlib.papers.credibility.key_facts import llm_key_facts
from covlib.papers.credibility.paper import load_questions
from covlib.papers.credibility.prompts import QUERY_MARKER, REFUSAL
from covlib.papers.credibility.references import bm25_references, closed_book, partial, with_gold

PAIRS_PER_ANSWER = 10  # NLI pairs judged an answer: key facts x (1 + sentences) + cited sentences (10-11 measured)
QUERY_WORDS = 12  # a placeholder query's words
REFUSED = "at most: every question refused every round"


def query(rec: Recorder, prompt: str, tokens: int, sample: int) -> str:
    """A self-completion query after the paper's marker: the first words of the prompt's last reference (what it
    leaves open), so that each round finds passages the question's own ranking does not."""
    last = [line for line in prompt.splitlines() if line.startswith("[")][-1]
    return f"{QUERY_MARKER} {' '.join(last.split()[1:QUERY_WORDS + 1])}"


SCRIPT = Script(replies={"reflect": lambda rec, p, t, s: REFUSAL, "answer (round": lambda rec, p, t, s: REFUSAL,
                         "queries (round": query},
                bounds={"queries (round": REFUSED, "answer (round": REFUSED,
                        "reasoning steps": "at most: every question without stored key facts",
                        "key facts": "at most: every question without stored key facts"})
Sets = Callable[[Any], Any]


def judged(step: str, v: dict[str, Any], answers: int, key: str = "", model: str | None = None) -> dict[str, Any]:
    """The NLI pairs judged for `answers` answers."""
    return dict(step=f"{step}: judged", kind="judge", rows=answers * PAIRS_PER_ANSWER, key=key, model=model,
                bound=f"declared: {PAIRS_PER_ANSWER} pairs an answer")


def judge_check(v: dict[str, Any]) -> dict[str, Any]:
    """The judge's check on the labelled key-fact pairs (dev and test), the same in 04-07: once a run."""
    pairs = len(load_keyfact_pairs()) + len(load_keyfact_test_pairs())
    return dict(step="the judge's check", kind="judge", rows=pairs, key=f"judge check {v['judge']}")


def key_facts(v: dict[str, Any], record: Callable[..., Recorder], examples: list) -> None:
    """Key facts the paper's two prompts write (source 'llm'), with the first model."""
    if "llm" in (v["key_facts"], v.get("compare_key_facts")):
        with record(v["models"][0]).playing(SCRIPT) as rec:
            llm_key_facts(rec, examples, progress=False)


def answering(v: dict[str, Any], record: Callable[..., Recorder], sets: dict[str, Sets]) -> list[dict[str, Any]]:
    """Every model's answers with each reference setting (`sets`: name -> per question), and their judging."""
    examples = load_questions(v["questions"], v["n_questions"], v["seed"])
    key_facts(v, record, examples)
    refs = {name: [make(ex) for ex in examples] for name, make in sets.items()}
    work = []
    for model in v["models"]:
        with record(model).playing(SCRIPT) as rec:
            answer_runs([rec], examples, refs, max_new_tokens=v["max_new_tokens"], progress=False)
        work += [judged(name, v, len(examples), f"{name} {v['n_refs']} {model} {len(examples)} {v['max_new_tokens']} "
                        f"{v['seed']}", model or None) for name in refs]
    return work + [judge_check(v)]


def work_04(v: dict[str, Any], record: Callable[..., Recorder]) -> list[dict[str, Any]]:
    """Notebook 04: every model answers with `n_refs` references (gold included); judged with one or two key-fact
    sources."""
    work = answering(v, record, {"complete": lambda ex: with_gold(ex, v["n_refs"], v["seed"])})
    second = [dict(w, step="second key-fact source: judged", key="") for w in work if w["step"] == "complete: judged"]
    return work + (second if v.get("compare_key_facts") else [])


def work_05(v: dict[str, Any], record: Callable[..., Recorder]) -> list[dict[str, Any]]:
    """Notebook 05: every model answers with each count of references (2 gold and noise)."""
    return answering(v, record, {f"{n} references": (lambda ex, n=n: with_gold(ex, n, v["seed"], kind="noise"))
                                 for n in v["n_refs"]})


def work_06(v: dict[str, Any], record: Callable[..., Recorder]) -> list[dict[str, Any]]:
    """Notebook 06: closed book, partial references and complete ones (04's call)."""
    return answering(v, record, {"closed-book": closed_book, "partial": lambda ex: partial(ex, v["n_refs"], v["seed"]),
                                 "complete": lambda ex: with_gold(ex, v["n_refs"], v["seed"])})


def work_07(v: dict[str, Any], record: Callable[..., Recorder]) -> list[dict[str, Any]]:
    """Notebook 07: self-reflection, BM25's top `cap` and self-completion on the notebook's corpus."""
    examples = load_questions(v["questions"], v["n_questions"], v["seed"])
    key_facts(v, record, examples)
    _, retriever, _ = retrieval.open_corpus(v["corpus"])
    baseline = bm25_references(retriever, examples, k=v["cap"])
    work = []
    for model in v["models"]:
        with record(model).playing(SCRIPT) as rec:
            generate_answers(rec, examples, reflection_sets(examples, v["n_refs"], v["seed"]), reflection=True,
                             max_new_tokens=v["max_new_tokens"], progress=False, desc=f"reflect ({rec.name})")
            answer_runs([rec], examples, {"baseline": baseline}, max_new_tokens=v["max_new_tokens"], progress=False)
            self_complete(rec, examples, retriever, k_initial=v["k_initial"], cap=v["cap"], max_rounds=v["max_rounds"],
                          max_new_tokens=v["max_new_tokens"], progress=False)
        work += [judged(name, v, len(examples), model=model or None) for name in ("BM25 top cap", "self-completion")]
    return work + [judge_check(v)]
