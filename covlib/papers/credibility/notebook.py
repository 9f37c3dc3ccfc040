"""The one set-up door of the credibility notebooks (04-07): `setup(...)` reads a notebook's parameters once.

It checks them, resolves the profile and its caps (`profiles.CAPS["credibility"]`), picks the models, records the
run's settings, and loads what every notebook starts from: the questions, the generators and the key facts (plus
notebook 04's second key-fact source and notebook 07's BM25 corpus). A notebook calls it right after its
parameters cell and goes on with the experiment.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Sequence

from covlib import nli, retrieval
from covlib.core import traces
from covlib.core.records import Example, Passage
from covlib.generation import Generator
from covlib.papers import credibility as C
from covlib.retrieval import BaseRetriever
from covlib.runs import plotting, profiles

# The settings a table's provenance records, in this order (those the notebook has).
RECORDED = ("profile", "models", "questions", "n_questions", "seed", "n_refs", "cap", "k_initial", "max_rounds",
            "corpus", "key_facts", "compare_key_facts", "judge", "max_new_tokens")
OFFLINE_MAKEUP = ("offline HotpotQA paragraphs: Adversarial HotpotQA (sim_dev, sim_train, the few-shot file) and the "
                  "shared HotpotQA sample, which holds every evaluated question's own 10 context paragraphs (2 gold + "
                  "8 distractors)")


@dataclass
class Setup:
    """What a credibility notebook starts from: the resolved profile and capped sizes, the recorded settings, the
    questions, generators and key facts; the optional parts are filled for the notebooks that have the parameter."""

    profile: str
    params: dict[str, Any]
    models: list[str]  # model ids, '' for the embedded model
    n_questions: int
    max_new_tokens: int
    examples: list[Example] = field(default_factory=list)
    generators: list[Generator] = field(default_factory=list)
    facts: list[C.KeyFacts] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)  # notebook 05: its n_refs sweep, capped
    cap: int | None = None  # notebook 07
    k_initial: int | None = None  # notebook 07
    compare: str = ""  # notebook 04: a second key-fact source ('' when none or the same as key_facts)
    other_facts: list[C.KeyFacts] | None = None
    passages: Sequence[Passage] = ()  # notebook 07: the BM25 corpus
    retriever: BaseRetriever | None = None
    corpus_name: str = ""
    corpus_meta: dict[str, Any] = field(default_factory=dict)


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


def read_sizes(profile: str, sweep: str | None) -> list[int]:
    """Notebook 05's sweep (its `n_refs`): comma-separated reference counts, checked, sorted and capped."""
    if sweep is None:
        return []
    sizes = sorted(profiles.split_list("n_refs", sweep, cast=int))
    profiles.check_parameters(n_refs=min(sizes))
    return profiles.capped("credibility", profile, sizes=sizes)["sizes"]


def record(given: dict[str, Any]) -> dict[str, Any]:
    """The settings a table records: the RECORDED ones the notebook has, in that order."""
    return {name: given[name] for name in RECORDED if given.get(name) is not None}


def setup(profile: str = "auto", model: str = "", models: str = "", device: str = "", questions: str = "",
          n_questions: int = 500, seed: int = 0, n_refs: int = 5, key_facts: str = "hand",
          judge: str = nli.DEFAULT_JUDGE, max_new_tokens: int = 160, compare_key_facts: str | None = None,
          cap: int | None = None, k_initial: int | None = None, max_rounds: int | None = None,
          corpus: str | None = None, n_rating: int | None = None, n_refs_sweep: str | None = None,
          notebook: str = "") -> Setup:
    """Check a credibility notebook's parameters, apply its profile, start its traces (`notebook`: its name) and load
    its questions, models and key facts (notebook 05 passes its comma-separated `n_refs` as `n_refs_sweep`)."""
    nli.check_judge(judge)  # a typo fails here, not after every answer has been generated
    numbers = dict(n_questions=n_questions, seed=seed, n_refs=None if n_refs_sweep is not None else n_refs, cap=cap,
                   k_initial=k_initial, max_rounds=max_rounds, max_new_tokens=max_new_tokens, n_rating=n_rating)
    profiles.check_parameters(**{k: v for k, v in numbers.items() if v is not None})
    profile = profiles.resolve(profile, device or None)
    sizes = read_sizes(profile, n_refs_sweep)
    extra = {k: v for k, v in dict(cap=cap, k_initial=k_initial).items() if v is not None}
    caps = profiles.capped("credibility", profile, n_questions=n_questions, max_new_tokens=max_new_tokens, **extra)
    model_ids = profiles.model_list(model, models, profile, C.PAPER_MODELS.values())
    if max_rounds is not None and max_rounds < 1:
        raise ValueError(f"max_rounds must be at least 1 (one ask-and-retrieve round), not {max_rounds}")
    compare = compare_key_facts if compare_key_facts and compare_key_facts != key_facts else ""
    params = record(dict(caps, profile=profile, models=model_ids, questions=questions or "shared sample", seed=seed,
                         n_refs=sizes or n_refs, max_rounds=max_rounds, key_facts=key_facts, judge=judge,
                         compare_key_facts=None if compare_key_facts is None else compare,
                         corpus=None if corpus is None else corpus or "offline HotpotQA paragraphs"))
    print(profiles.describe(profile, **caps, **({"n_refs": sizes} if sizes else {}), models=model_ids))
    plotting.set_style()
    if notebook:
        traces.start(notebook)  # before `load`: key facts by the paper's prompts (key_facts="llm") are traced too
    S = Setup(profile, params, model_ids, caps["n_questions"], caps["max_new_tokens"], sizes=sizes,
              cap=caps.get("cap"), k_initial=caps.get("k_initial"), compare=compare)
    return load(S, questions, seed, key_facts, device, corpus)


def load(S: Setup, questions: str, seed: int, key_facts: str, device: str, corpus: str | None) -> Setup:
    """Load into `S` the questions, generators and key facts (and the BM25 corpus when `corpus` is not None)."""
    S.examples = C.load_questions(questions, S.n_questions, seed)
    S.generators = profiles.load_models(S.models, device)
    S.facts = C.build_key_facts(key_facts, S.examples, S.generators[0])
    S.other_facts = C.build_key_facts(S.compare, S.examples, S.generators[0]) if S.compare else None
    if corpus is not None:
        S.passages, S.retriever, S.corpus_name = retrieval.open_corpus(corpus)
        makeup = corpus_makeup(corpus, S.corpus_name, S.passages, S.examples)
        S.corpus_meta = {"corpus": S.corpus_name, "corpus_size": len(S.passages), "corpus_makeup": makeup}
        print(f"{len(S.examples)} questions; BM25 over {len(S.passages)} passages ({makeup})")
    return S
