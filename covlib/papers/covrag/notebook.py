"""What notebooks 08-11 declare to the one notebook door (`covlib.runs.session.start`), and what they start from.

Each notebook's parameters are declared once in `parameters` (`covlib.runs.parameters`: 08-09 share one set of caps,
10-11 another whose sizes agree so that 11 ranks 10's test questions with 10's cached answers); `NOTEBOOKS` holds
each one's recorded settings; its `derive` functions add the test sets' sizes, σ's thresholds, the models compared (09) and the adapters
(11); `load` adds the test questions and the BM25 corpus, and the notebook's own models (`answering`, `fine_tuned`,
`ranked`). `S.k`, `S.max_new_tokens`, ... are the parameters as the profile runs them.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any, Callable

from covlib import data
from covlib.generation import EMBEDDED_LABEL, LM, is_simulated
from covlib.generation.simulated import with_persona
from covlib.papers import covrag as C
from covlib.papers.covrag import planted, simulation, workload
from covlib.papers.covrag.training import adapter_folder
from covlib.retrieval import open_corpus
from covlib.runs import profiles
from covlib.papers.covrag.parameters import PARAMETERS
from covlib.runs.parameters import Param
from covlib.runs.session import Session

THRESHOLDS = ("reference_correctness_max", "correctness_below", "bias_above", "truthfulness_max")
CORPUS = ("corpus", "offline HotpotQA paragraphs")
EMBEDDED = ("model", EMBEDDED_LABEL)


def adapter_or_default(given: str, slug: str, profile: str, simulated: bool = False) -> str:
    """The adapter asked for, else notebook 10's (same profile) when it was trained (for a simulated model, always:
    its variants are planted, named by the folder), else none."""
    if given:
        return given
    folder = adapter_folder(slug, profile)
    return folder if simulated or (Path(folder) / "adapter_config.json").is_file() else ""


def sizes(v: dict[str, Any]) -> dict[str, Any]:
    """The test sets' sizes: `n_per_dataset` (or 10's `n_test`) each, at most the paper's count."""
    names, per = v.get("test_datasets", v.get("datasets")), v.get("n_test", v.get("n_per_dataset"))
    return {"sizes": {name: min(per, C.PAPER_COUNTS.get(name, per)) for name in names}}


def sigma(v: dict[str, Any]) -> dict[str, Any]:
    """σ's thresholds (08: as given; 09: the paper's, with `sigma_mode`)."""
    return {"thresholds": C.Thresholds(**{t: v[t] for t in THRESHOLDS if t in v}, mode=v["sigma_mode"])}


def compared(v: dict[str, Any]) -> dict[str, Any]:
    """09: the models compared ('' the embedded model), recorded by name."""
    ids = profiles.model_list(v["model"], v["models"], v["profile"], C.PAPER_MODELS)
    return {"model_ids": ids, "models": [m or EMBEDDED_LABEL for m in ids]}


def adapters(v: dict[str, Any]) -> dict[str, Any]:
    """11: the RAG model's and the CoV model's adapters on `model` (notebook 10's when none is given), and the ranker
    (for a simulated model, the paper's judge simulated: its ranks follow Table 3's)."""
    simulated = is_simulated(v["model"])
    out = {"qa_adapter": adapter_or_default(v["qa_adapter"], "qa-only", v["profile"], simulated),
           "covrag_adapter": adapter_or_default(v["covrag_adapter"], "qa-verify-chain", v["profile"], simulated)}
    if simulated and not v["ranker"]:
        out["ranker"] = with_persona(v["model"], planted.JUDGE_PERSONA)
    return out


def answering(S: Session) -> None:
    """08-10: the answering models (`model` with `adapter`, and 09's others); 08's verifier."""
    v = S.values
    S.data["generators"] = [S.load_model(m, v.get("adapter", "") if m == v["model"] else "")
                            for m in v.get("model_ids", [v["model"]])]
    S.data["base"] = S.generators[0]
    if "verifier" in v:
        S.data["checker"] = S.load_model(v["verifier"]) if v["verifier"] else S.base


def fine_tuned(S: Session) -> None:
    """10: the base model (in this process: it is trained), its planted variants when simulated, the teacher."""
    answering(S)
    v = S.values
    if is_simulated(S.base):  # its variants are planted, not trained; loaded here so that the door teaches them
        S.data["planted_variants"] = [S.load_model(v["model"], adapter_folder(slug, v["profile"]))
                                      for slug in C.VARIANTS.values()]
    elif not isinstance(S.base, LM):  # 10 renders prompts, reads the weights, trains adapters
        raise TypeError(f"{S.base.name} is served: notebook 10 trains LoRA adapters and measures losses, which need "
                        "the model in this process; give MODEL=<hub id or folder> (a served model can be evaluated "
                        "with an adapter the server loads, in notebooks 08, 09 and 11)")
    S.data["labeller"] = S.load_model(v["teacher"]) if v["teacher"] else None
    S.data["train"] = data.sample(data.load_adv_hotpotqa(split="all"), v["n_train"], v["seed"])


def ranked(S: Session) -> None:
    """11: the RAG model and the CoV model (`model` with each adapter) and the ranker."""
    v = S.values
    S.data["rag_model"] = S.load_model(v["model"], v["qa_adapter"])
    S.data["cov_model"] = S.load_model(v["model"], v["covrag_adapter"])
    S.data["ranker"] = S.load_model(v["ranker"])


def load(S: Session, models: Callable[[Session], None]) -> None:
    """Add the test questions and the BM25 corpus to `S`, and the models (`models`: the notebook's own)."""
    v = S.values
    names = v.get("test_datasets", v.get("datasets"))
    S.data["names"] = names
    S.data["sets"] = workload.test_sets(v)
    S.data["examples"] = [ex for exs in S.sets.values() for ex in exs]
    S.data["missing"] = [n for n in names if n not in S.sets]
    S.data["passages"], S.data["retriever"], S.data["corpus_name"] = open_corpus(v["corpus"])
    models(S)
    if S.missing:
        print(f"left out (no file given, none offline): {S.missing}; pass triviaqa= / mintaka= a path or hub id")
    print(f"corpus: {S.corpus_name}, {len(S.passages)} passages")


def notebook(name: str, parameters: dict[str, Param], models: Callable[[Session], None], **extra: Any) -> dict:
    """One CoV-RAG notebook's spec: its parameters, and `load` with the models it loads."""
    return {"name": name, "traces": True, "load": partial(load, models=models), "simulate": simulation.teach,
            "parameters": parameters, **extra}


NOTEBOOKS: dict[str, dict[str, Any]] = {
    "08": notebook("08_covrag_verifier", PARAMETERS["08"],
        derive=(sizes, sigma), models=answering, work=workload.work_08, recorded=(
            "profile", EMBEDDED, "adapter", ("verifier", "same"), "datasets", "sizes", CORPUS, "k", "seed", "chat",
            "max_new_tokens", "verify_tokens", "thresholds")),
    "09": notebook("09_covrag_iterations", PARAMETERS["09"],
        derive=(sizes, sigma, compared), models=answering, work=workload.work_09, recorded=(
            "profile", "models", "adapter", "datasets", "sizes", CORPUS, "k", "max_rounds", "seed", "chat",
            "max_new_tokens", "verify_tokens", "sigma_mode")),
    "10": notebook("10_covrag_finetune", PARAMETERS["10"],
        derive=(sizes,), models=fine_tuned, work=workload.work_10, recorded=(
            "profile", EMBEDDED, ("teacher", "gold labels"), "n_train", "test_datasets", "n_test", CORPUS, "k", "seed",
            "chat", "lora_rank", "lora_alpha", "learning_rate", "epochs", "max_steps", "batch_size", "max_length",
            "evaluate_base")),
    "11": notebook("11_covrag_judge", PARAMETERS["11"],
        derive=(sizes, adapters), models=ranked, work=workload.work_11, recorded=(
            "profile", EMBEDDED, ("qa_adapter", "none"), ("covrag_adapter", "none"), ("ranker", "embedded (not GPT-4)"),
            "datasets", "n_per_dataset", CORPUS, "k", "seed")),
}
