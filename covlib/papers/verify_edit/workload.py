"""The model work of notebooks 01-03 for a run's plan (`covlib.runs.plan`): their calls, made on a recorder.

`work_01`, `work_02` and `work_03` load the profile's questions as the notebooks do and run the paper's own methods
(`cot.run_standard`, `run_cot`, `run_cot_sc`, `method.compute_edits`, `verify_and_edit`) on the
`covlib.generation.recording.Recorder` standing in for the model, which keeps each call's prompts, tokens and cache
keys. What a model's reply decides is played by placeholders (`SCRIPT`), each a declared bound:

* a CoT path is a rationale of `SENTENCES` sentences filling `max_new_tokens`, and each sampled path answers
  differently: no answer has a majority, every question is below the threshold and edited;
* verifying questions and answers fill their `max_new_tokens`; an answer given again is one short word;
* knowledge: `dataset` is the real source (the question's own paragraphs); a retriever or web search is a stand-in
  (`Placeholder`) giving `RETRIEVED` sentences of at most `RETRIEVED_TOKENS` tokens; the sentences a verifying
  answer reads are the longest ones (`Longest`), so its prompt is at most what the embedding's top 3 would make it.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Sequence

import numpy as np

from covlib import data
from covlib.core.records import Example
from covlib.generation.recording import Recorder, Script
from covlib.papers.verify_edit.cot import FEVER_HEADER, run_cot, run_cot_sc, run_standard
from covlib.papers.verify_edit.knowledge import DatasetKnowledge, Knowledge, make_knowledge
from covlib.papers.verify_edit.method import compute_edits, verify_and_edit
from covlib.papers.verify_edit.prompts import RATIONALE_MARKERS
from covlib.retrieval.embedding import Encoder

SENTENCES = 3  # a rationale's sentences (declared: the shots have 2; the 135M model's rationales at most ~3)
RETRIEVED, RETRIEVED_TOKENS = 5, 40  # a stand-in retriever's sentences per verifying question, and their size
LABELS = ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")
EDITED = f"at most: every question edited, each rationale {SENTENCES} sentences (declared)"


def answer_word(prompt: str, sample: int) -> str:
    """An answer that parses for the prompt's dataset (a FEVER label, else a word), a different one per sample."""
    return LABELS[sample % len(LABELS)] if prompt.startswith(FEVER_HEADER) else f"a{sample}"


def rationale(rec: Recorder, prompt: str, tokens: int, sample: int) -> str:
    """A CoT path: `SENTENCES` marked sentences filling `tokens` tokens, then an answer of its own per sample."""
    body = " ".join(f"{m}{rec.filler(tokens // SENTENCES, prompt, SENTENCES * sample + i)}."
                    for i, m in enumerate(RATIONALE_MARKERS[:SENTENCES]))
    return f" {body} The answer is {answer_word(prompt, sample)}."


def again(rec: Recorder, prompt: str, tokens: int, sample: int) -> str:
    """An answer given again after an edited rationale: one word."""
    return f" {answer_word(prompt, 0)}."


SCRIPT = Script(
    replies={"CoT": rationale, "answering again": again},
    bounds={"cot answer log-probs": "at most: every answer parsed", "cot_sc answer log-probs": "at most: every answer "
            "parsed", "verifying questions": EDITED, "verifying answers": EDITED, "answering again": EDITED,
            "new answer log-probs": EDITED})


class Longest(Encoder):
    """An encoder's stand-in under which a longer sentence is nearer every question: the top sentences are the
    longest."""

    def __init__(self) -> None:
        super().__init__(None, "longest first")

    def encode(self, texts: Sequence[str] | str, batch_size: int = 64, progress: bool = False) -> np.ndarray:
        """One dimension: the text's length."""
        texts = [texts] if isinstance(texts, str) else list(texts)
        return np.array([[float(len(t))] for t in texts])


class Placeholder(Knowledge):
    """A retriever's or web search's stand-in: `RETRIEVED` placeholder sentences for each verifying question."""

    def __init__(self, kind: str, rec: Recorder) -> None:
        self.kind = self.label = kind
        self.rec = rec

    def retrieve_batch(self, questions: Sequence[str], examples: Sequence[Example]) -> list[list[str]]:
        """Sentences of `RETRIEVED_TOKENS` tokens, tagged by question and rank."""
        return [[f"{self.kind}{self.rec.filler(RETRIEVED_TOKENS, q, j)}." for j in range(RETRIEVED)] for q in questions]


def knowledge(kind: str, dataset: str, examples: Sequence[Example], rec: Recorder) -> Knowledge | None:
    """The source notebooks 02-03 edit with (None: it does not run): the dataset's paragraphs where every question has
    them (not FEVER: the paper ran none), web search where an endpoint is set, a stand-in for the rest."""
    if kind == "dataset":
        return DatasetKnowledge() if dataset != "fever" and all(e.paragraphs for e in examples) else None
    if kind == "web":
        try:
            make_knowledge("web")
        except RuntimeError:  # no search endpoint: the notebook says so and goes on
            return None
    return Placeholder(kind, rec)


def examples(dataset: str, n: int, seed: int) -> list[Example]:
    """The questions of one table as notebooks 01-03 load them (FEVER: a seeded sample, its file runs in label
    blocks)."""
    if dataset == "hotpotqa":
        return data.load_adv_hotpotqa(split="test")[:n]
    if dataset == "2wikimultihop":
        return data.load_2wikimultihop(split="dev")[:n]
    claims = data.load_fever()
    return claims if n >= len(claims) else random.Random(seed).sample(claims, n)


def cot_sc(rec: Recorder, questions: list[Example], dataset: str, v: dict[str, Any]) -> Any:
    """CoT-SC as every notebook here calls it."""
    return run_cot_sc(rec, questions, dataset, n=v["n_samples"], temperature=v["temperature"], seed=v["seed"],
                      max_new_tokens=v["max_new_tokens"], progress=False)


def playing(work: Callable[[dict[str, Any], Recorder], None]) -> Callable[[dict[str, Any], Callable], list]:
    """`work(values, recorder)` as a spec's `work`: on the run model's recorder, with `SCRIPT`; nothing declared."""
    def run(values: dict[str, Any], record: Callable[..., Recorder]) -> list[dict[str, Any]]:
        with record(values["model"]).playing(SCRIPT) as rec:
            work(values, rec)
        return []
    run.__doc__ = work.__doc__
    return run


@playing
def work_01(v: dict[str, Any], rec: Recorder) -> None:
    """Notebook 01: CoT-SC on Adversarial HotpotQA."""
    cot_sc(rec, examples("hotpotqa", v["n_questions"], v["seed"]), "hotpotqa", v)


@playing
def work_02(v: dict[str, Any], rec: Recorder) -> None:
    """Notebook 02: 01's CoT-SC and every question edited with its knowledge source (the sweep edits all)."""
    questions = examples("hotpotqa", v["n_questions"], v["seed"])
    run = cot_sc(rec, questions, "hotpotqa", v)
    source = knowledge(v["knowledge"], "hotpotqa", questions, rec)
    if source is not None:
        compute_edits(rec, run, questions, "hotpotqa", source, max_threshold=v["n_samples"] + 1,
                      consistency=v["consistency"], encoder=Longest(), progress=False)


@playing
def work_03(v: dict[str, Any], rec: Recorder) -> None:
    """Notebook 03: per dataset, standard prompting, CoT, CoT-SC and Algorithm 1 with each source that runs."""
    for dataset in v["datasets"]:
        questions = examples(dataset, v["sizes"][dataset], v["seed"])
        run_standard(rec, questions, dataset, progress=False)
        run_cot(rec, questions, dataset, max_new_tokens=v["max_new_tokens"], progress=False)
        run = cot_sc(rec, questions, dataset, v)
        for kind in v["knowledge"]:
            source = knowledge(kind, dataset, questions, rec)
            if source is not None:
                verify_and_edit(rec, run, questions, dataset, source, threshold=v["threshold"], encoder=Longest(),
                                progress=False)
