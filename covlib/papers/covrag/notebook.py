"""The one set-up door of the CoV-RAG notebooks (08-11): `setup(...)` reads a notebook's parameters once.

It checks them, resolves the profile and its caps (`profiles.CAPS["covrag"]` for 08-09, `"covrag-finetune"` for
10-11, whose sizes agree so that 11 reuses 10's cached answers), and loads what the notebooks start from: the test
questions, the BM25 corpus, σ's thresholds, and the models each notebook's parameters name. A notebook calls it
right after its parameters cell and goes on with the experiment; `S.k`, `S.max_new_tokens`, ... are the
parameters as the profile runs them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from covlib import data
from covlib.core import paths
from covlib.core.records import Example, Passage
from covlib.generation import LM, Generator
from covlib.papers import covrag as C
from covlib.retrieval import BaseRetriever, open_corpus
from covlib.runs import plotting, profiles

# The parameters a CoV-RAG notebook may pass, and what `setup` does with them.
PARAMETERS = {
    "profile": "smoke, cpu, full or auto", "device": "cpu or cuda; '' picks cuda when available",
    "model": "the answering (08, 09) or base (10, 11) model; '' the embedded one",
    "adapter": "a LoRA folder for `model`",
    "models": "09: models to compare (profiles.model_list)", "verifier": "08: the verifying model ('' the answering one)",
    "teacher": "10: the labelling model ('' gold labels)", "qa_adapter": "11: the RAG row's adapter ('' notebook 10's)",
    "covrag_adapter": "11: the CoV rows' adapter ('' notebook 10's)", "ranker": "11: the LLM judge that ranks the answers",
    "datasets": "test sets", "test_datasets": "10: test sets", "n_per_dataset": "questions per test set",
    "n_test": "10: questions per test set", "n_train": "10: training questions", "triviaqa": "a file or hub id",
    "mintaka": "a file or hub id", "corpus": "'' the offline paragraphs, a passage file or a `make index` folder",
    "k": "references per question", "seed": "samples", "chat": "chat template", "max_rounds": "09: re-retrievals",
    "max_new_tokens": "answer", "verify_tokens": "verification", "ranker_tokens": "11: ranking",
    "reference_correctness_max": "σ", "correctness_below": "σ", "bias_above": "σ", "truthfulness_max": "σ",
    "sigma_mode": "σ: all or any", "lora_rank": "10", "lora_alpha": "10", "learning_rate": "10", "epochs": "10",
    "max_steps": "10", "batch_size": "10", "max_length": "10", "evaluate_base": "10",
}
THRESHOLDS = ("reference_correctness_max", "correctness_below", "bias_above", "truthfulness_max")


@dataclass
class Setup:
    """What a CoV-RAG notebook starts from; the models a notebook's parameters do not name stay empty.

    `S.k`, `S.max_new_tokens`, ... give every parameter passed to `setup` as the profile runs it."""

    profile: str
    values: dict[str, Any]  # every parameter as the profile runs it
    names: list[str]  # the test sets asked for
    sizes: dict[str, int]  # questions per test set asked for
    sets: dict[str, list[Example]]  # the test sets loaded (TriviaQA / Mintaka only with a file), in `names` order
    passages: Sequence[Passage]
    retriever: BaseRetriever
    corpus_name: str
    thresholds: C.Thresholds | None = None  # σ, for notebooks with `sigma_mode`
    model_ids: list[str] = field(default_factory=list)  # `models` (09) or [`model`]; '' the embedded model
    generators: list[Generator] = field(default_factory=list)  # one per model id, `adapter` on `model`
    checker: Generator | None = None  # 08: the verifier (the answering model unless `verifier` names one)
    labeller: Generator | None = None  # 10: the teacher, None for gold labels
    train: list[Example] = field(default_factory=list)  # 10: the training questions
    qa_adapter: str = ""  # 11: the adapters as resolved ('' none)
    covrag_adapter: str = ""
    rag_model: Generator | None = None  # 11: `model` with qa_adapter, with covrag_adapter, and the ranker
    cov_model: Generator | None = None
    ranker: Generator | None = None

    def __getattr__(self, name: str) -> Any:
        """A parameter as the profile runs it (`S.k`)."""
        values = self.__dict__.get("values", {})
        if name in values:
            return values[name]
        raise AttributeError(f"{type(self).__name__} has no {name!r} (not a parameter passed to setup)")

    @property
    def examples(self) -> list[Example]:
        """Every loaded test question, set by set."""
        return [ex for exs in self.sets.values() for ex in exs]

    @property
    def missing(self) -> list[str]:
        """The test sets asked for that were not loaded (no file given, none offline)."""
        return [n for n in self.names if n not in self.sets]

    @property
    def base(self) -> Generator:
        """The (first) answering model: `model` with `adapter`."""
        return self.generators[0]


def adapter_or_default(given: str, slug: str, profile: str) -> str:
    """The adapter asked for, else notebook 10's (same profile) when it was trained, else none."""
    if given:
        return given
    folder = paths.build_dir() / "adapters" / f"10-{profile}-{slug}"
    return str(folder) if (folder / "adapter_config.json").is_file() else ""


def load_test_sets(values: dict[str, Any]) -> tuple[list[str], dict[str, int], dict[str, list[Example]]]:
    """(names asked for, sizes, loaded sets in that order) from `datasets` or `test_datasets`."""
    key = "test_datasets" if "test_datasets" in values else "datasets"
    names = profiles.split_list(key, values[key], allowed=C.PAPER_COUNTS)
    per = values["n_test"] if "n_test" in values else values["n_per_dataset"]
    sizes = {name: min(per, C.PAPER_COUNTS.get(name, per)) for name in names}
    loaded = C.load_datasets(triviaqa=values.get("triviaqa", ""), mintaka=values.get("mintaka", ""), sizes=sizes,
                             seed=values.get("seed", 0))
    return names, sizes, {n: loaded[n] for n in names if n in loaded}


def add_models(S: Setup, v: dict[str, Any]) -> None:
    """Load the models the parameters `v` name into `S`."""
    model, device = v.get("model", ""), v.get("device", "")
    if "qa_adapter" in v:  # 11: the RAG model and the CoV model share `model`, each with its adapter
        S.qa_adapter = adapter_or_default(v["qa_adapter"], "qa-only", S.profile)
        S.covrag_adapter = adapter_or_default(v.get("covrag_adapter", ""), "qa-verify-chain", S.profile)
        S.rag_model = profiles.load_model(model, device, S.qa_adapter)
        S.cov_model = profiles.load_model(model, device, S.covrag_adapter)
    else:
        S.model_ids = profiles.model_list(model, v["models"], S.profile, C.PAPER_MODELS.values()) if "models" in v else [model]
        S.generators = [profiles.load_model(m, device, v.get("adapter", "") if m == model else "") for m in S.model_ids]
    if "lora_rank" in v and not isinstance(S.base, LM):  # 10 renders prompts, reads the weights, trains adapters
        raise TypeError(f"{S.base.name} is served: notebook 10 trains LoRA adapters and measures losses, which need "
                        "the model in this process; give MODEL=<hub id or folder> (a served model can be evaluated "
                        "with an adapter the server loads, in notebooks 08, 09 and 11)")
    if "verifier" in v:
        S.checker = profiles.load_model(v["verifier"], device) if v["verifier"] else S.base
    if v.get("teacher"):
        S.labeller = profiles.load_model(v["teacher"], device)
    if "ranker" in v:
        S.ranker = profiles.load_model(v["ranker"], device)


def chosen(S: Setup, caps: str) -> dict[str, Any]:
    """What the profile chose, for `profiles.describe`: the sizes, the capped parameters and the models."""
    capped = {k: S.values[k] for rules in profiles.CAPS[caps].values() for k in rules if k in S.values}
    models = {"models": S.model_ids} if "models" in S.values else {}
    adapters = {"qa_adapter": S.qa_adapter or "none", "covrag_adapter": S.covrag_adapter or "none"} \
        if "qa_adapter" in S.values else {}
    return {"sizes": S.sizes, **capped, **models, **adapters}


def setup(caps: str = "covrag", **params: Any) -> Setup:
    """Check a CoV-RAG notebook's parameters (names as in PARAMETERS), apply the profile's caps `CAPS[caps]`, and
    load its test questions, corpus and models."""
    unknown = sorted(set(params) - set(PARAMETERS))
    if unknown:
        raise TypeError(f"setup() got parameter(s) it does not know: {unknown}; see covrag.notebook.PARAMETERS")
    profiles.check_parameters(**{k: v for k, v in params.items() if k in profiles.PARAMETER_RULES
                                 or (isinstance(v, (int, float)) and not isinstance(v, bool))})
    profile = profiles.resolve(params.get("profile", "auto"), params.get("device") or None)
    values = {**profiles.capped(caps, profile, **params), "profile": profile}
    thresholds = C.Thresholds(**{t: values[t] for t in THRESHOLDS if t in values}, mode=values["sigma_mode"]) \
        if "sigma_mode" in values else None
    names, sizes, sets = load_test_sets(values)
    passages, retriever, corpus_name = open_corpus(values.get("corpus", ""))
    S = Setup(profile, values, names, sizes, sets, passages, retriever, corpus_name, thresholds)
    if "n_train" in values:
        S.train = data.sample(data.load_adv_hotpotqa(split="all"), values["n_train"], values.get("seed", 0))
    add_models(S, values)
    print(profiles.describe(profile, **chosen(S, caps)))
    if S.missing:
        print(f"left out (no file given, none offline): {S.missing}; pass triviaqa= / mintaka= a path or hub id")
    print(f"corpus: {corpus_name}, {len(passages)} passages")
    plotting.set_style()
    return S
