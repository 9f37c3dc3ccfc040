"""What notebooks 04-07 declare to the one notebook door (`covlib.runs.session.start`), and what they start from.

Their parameters are declared once in `parameters`; their recorded settings are plain data in `NOTEBOOKS`; `compared`,
`sweep` (05) and `second_source` (04) derive the models compared, notebook 05's sweep in order and a second key-fact
source; `load` adds the questions, generators and key facts (plus notebook 04's second key-fact source and notebook
07's BM25 corpus) to the session.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Sequence

from covlib import retrieval
from covlib.core.records import Example, Passage
from covlib.generation.simulated import SimLM
from covlib.papers import credibility as C
from covlib.papers.credibility import workload
from covlib.papers.credibility.simulation import teach
from covlib.runs import profiles
from covlib.papers.credibility.parameters import PARAMETERS
from covlib.runs.parameters import Param
from covlib.runs.session import Session

OFFLINE_MAKEUP = ("offline HotpotQA paragraphs: Adversarial HotpotQA (sim_dev, sim_train, the few-shot file) and the "
                  "shared HotpotQA sample, which holds every evaluated question's own 10 context paragraphs (2 gold + "
                  "8 distractors)")
# The settings a table's provenance records, in this order (those the notebook has).
RECORDED = ("profile", "models", ("questions", "shared sample"), "n_questions", "seed", "n_refs", "cap", "k_initial",
            "max_rounds", ("corpus", "offline HotpotQA paragraphs"), "key_facts", "compare_key_facts", "judge",
            "max_new_tokens")



def compared(values: dict[str, Any]) -> dict[str, Any]:
    """The models compared (`profiles.model_list`: '' the embedded model)."""
    return {"models": profiles.model_list(values["model"], values["models"], values["profile"], C.PAPER_MODELS)}


def sweep(values: dict[str, Any]) -> dict[str, Any]:
    """05: the reference counts in order."""
    return {"n_refs": sorted(values["n_refs"])}


def second_source(values: dict[str, Any]) -> dict[str, Any]:
    """04: a second key-fact source that repeats the first is none ('')."""
    return {"compare_key_facts": "" if values["compare_key_facts"] == values["key_facts"] else values["compare_key_facts"]}


def corpus_makeup(corpus: str, corpus_name: str, passages: Sequence[Passage], examples: Sequence[Example]) -> str:
    """What the BM25 corpus holds, and (in memory) for how many questions both gold paragraphs are in it."""
    if not corpus:
        makeup = OFFLINE_MAKEUP
    elif os.path.isdir(corpus):
        makeup = f"`make index` folder {corpus_name}"
    else:
        makeup = f"passage file {corpus}"
    if isinstance(passages, list):  # in memory: check how many questions have their gold paragraphs in the corpus
        titles = {p.title for p in passages}
        gold_in = sum(set(ex.supporting_titles) <= titles for ex in examples)
        makeup += f"; both gold paragraphs present for {gold_in} of {len(examples)} questions"
    return makeup


def load(S: Session) -> None:
    """Add the questions, generators and key facts to `S` (and the BM25 corpus when the notebook has `corpus`)."""
    v = S.values
    S.data["examples"] = C.load_questions(v["questions"], v["n_questions"], v["seed"])
    S.data["generators"] = [S.load_model(m) for m in v["models"]]
    for g in S.generators:  # taught now (the door teaches them again after `load`): key_facts="llm" asks them
        if isinstance(g, SimLM):
            teach(S, g)
    S.data["facts"] = C.build_key_facts(v["key_facts"], S.examples, S.generators[0])
    C.trace.write(S.tracer, S.facts)  # traced when the paper's prompts wrote key facts just now (key_facts="llm")
    compare = v.get("compare_key_facts") or ""
    S.data["compare"] = compare
    S.data["other_facts"] = C.build_key_facts(compare, S.examples, S.generators[0]) if compare else None
    if S.other_facts is not None:
        C.trace.write(S.tracer, S.other_facts)
    if "corpus" in v:
        corpus = v["corpus"]
        S.data["passages"], S.data["retriever"], S.data["corpus_name"] = retrieval.open_corpus(corpus)
        makeup = corpus_makeup(corpus, S.corpus_name, S.passages, S.examples)
        S.data["corpus_meta"] = {"corpus": S.corpus_name, "corpus_size": len(S.passages), "corpus_makeup": makeup}
        print(f"{len(S.examples)} questions; BM25 over {len(S.passages)} passages ({makeup})")


def notebook(name: str, parameters: dict[str, Param], *derive: Callable, **extra: Any) -> dict[str, Any]:
    """One credibility notebook's spec: its parameters, the models compared and its own `derive` steps, the recorded
    settings, and `load`."""
    return {"name": name, "judge": True, "traces": True, "derive": (compared, *derive), "recorded": RECORDED,
            "load": load, "simulate": teach, "parameters": parameters, **extra}


NOTEBOOKS: dict[str, dict[str, Any]] = {
    "04": notebook("04_credibility_models", PARAMETERS["04"], second_source, work=workload.work_04),
    "05": notebook("05_knowledge_precision", PARAMETERS["05"], sweep, work=workload.work_05),  # n_refs: the sweep
    "06": notebook("06_knowledge_recall", PARAMETERS["06"], work=workload.work_06),
    "07": notebook("07_reflection_completion", PARAMETERS["07"], work=workload.work_07),
}
