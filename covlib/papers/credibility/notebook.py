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


# Model work, for the plan of a run (`covlib.runs.plan`), in SmolLM2's tokens (chat template applied): a reference
# paragraph, the question and instruction around them, the closed-book prompt; judged pairs per answer (key facts
# x (1 + sentences) + cited sentences: 10-11 measured at 96 new tokens); the judge's own check (dev + test pairs,
# the same in every notebook); questions in the shared sample. Every answer is greedy without stop strings: it runs
# to `max_new_tokens` or EOS.
PARAGRAPH, FRAME, CLOSED_BOOK = 150, 35, 68
PAIRS_PER_ANSWER, JUDGE_CHECK_PAIRS, SHARED_SAMPLE = 10, 940, 100
QUERY_TOKENS = 64  # self-completion's search queries (improvements.QUERY_DECODING)


def answers(step: str, values: dict[str, Any], refs: int, key: str, prompt: int = 0) -> list[dict[str, Any]]:
    """Each model's answers with `refs` reference paragraphs (or a `prompt` of that many tokens), and their judging."""
    q = values["n_questions"] if values.get("questions") else min(values["n_questions"], SHARED_SAMPLE)
    t = values["max_new_tokens"]
    work = []
    for model in values["models"]:
        tag = f"{key} {model} {q} {t} {values['seed']}"
        work += [dict(step=f"{step}: answers", kind="generate", rows=q, prompt=prompt or FRAME + refs * PARAGRAPH,
                      new=t, key=tag, model=model),
                 dict(step=f"{step}: judged", kind="judge", rows=q * PAIRS_PER_ANSWER, prompt=0, key=f"{tag} judged",
                      model=model)]
    return work


def judge_check(values: dict[str, Any]) -> list[dict[str, Any]]:
    """The judge's check on its dev and test pairs, the same in 04-07: paid once a run."""
    return [dict(step="the judge's check", kind="judge", rows=JUDGE_CHECK_PAIRS, prompt=0,
                 key=f"judge check {values['judge']}")]


def work_04(values: dict[str, Any]) -> list[dict[str, Any]]:
    """Notebook 04: every model answers with 5 references (gold included); judged with one or two key-fact sources."""
    work = answers("5 references", values, values["n_refs"], "refs-5") + judge_check(values)
    if values.get("compare_key_facts"):
        q = sum(w["rows"] for w in work if w["kind"] == "generate")
        work.append(dict(step="second key-fact source: judged", kind="judge", rows=q * PAIRS_PER_ANSWER, prompt=0))
    return work


def work_05(values: dict[str, Any]) -> list[dict[str, Any]]:
    """Notebook 05: every model answers with each count of references (5 is 04's call)."""
    return [w for n in values["n_refs"] for w in answers(f"{n} references", values, n, f"refs-{n}")] + judge_check(values)


def work_06(values: dict[str, Any]) -> list[dict[str, Any]]:
    """Notebook 06: closed book, partial references and complete ones (04's call)."""
    n = values["n_refs"]
    return (answers("closed book", values, 0, "closed-book", prompt=CLOSED_BOOK) + answers("partial", values, n, "partial")
            + answers("complete", values, n, "refs-5" if n == 5 else f"complete-{n}") + judge_check(values))


def work_07(values: dict[str, Any]) -> list[dict[str, Any]]:
    """Notebook 07: self-reflection, BM25's top `cap` and self-completion (at most `max_rounds` rounds of queries and
    answers for every question, where the model refuses every time)."""
    cap, k, rounds = values["cap"], values["k_initial"], values["max_rounds"]
    work = (answers("self-reflection", values, values["n_refs"], "reflection")
            + answers("BM25 top cap", values, cap, "bm25") + answers("self-completion start", values, k, "completion"))
    for w in [w for w in work if w["step"] == "self-completion start: answers"]:
        work.append(dict(w, step="self-completion rounds: queries", rows=w["rows"] * rounds, new=QUERY_TOKENS,
                         prompt=FRAME + cap * PARAGRAPH, key="", bound="at most: every question refused every round"))
        work.append(dict(w, step="self-completion rounds: answers", rows=w["rows"] * rounds,
                         prompt=FRAME + cap * PARAGRAPH, key="", bound="at most: every question refused every round"))
    return [w for w in work if w["step"] != "self-completion start: judged"] + judge_check(values)


def notebook(name: str, parameters: dict[str, Param], *derive: Callable, **extra: Any) -> dict[str, Any]:
    """One credibility notebook's spec: its parameters, the models compared and its own `derive` steps, the recorded
    settings, and `load`."""
    return {"name": name, "judge": True, "traces": True, "derive": (compared, *derive), "recorded": RECORDED,
            "load": load, "simulate": teach, "parameters": parameters, **extra}


NOTEBOOKS: dict[str, dict[str, Any]] = {
    "04": notebook("04_credibility_models", PARAMETERS["04"], second_source, work=work_04),
    "05": notebook("05_knowledge_precision", PARAMETERS["05"], sweep, work=work_05),  # n_refs: the sweep
    "06": notebook("06_knowledge_recall", PARAMETERS["06"], work=work_06),
    "07": notebook("07_reflection_completion", PARAMETERS["07"], work=work_07),
}
