"""What notebooks 08-11 declare to the one notebook door (`covlib.runs.session.start`), and what they start from.

Their caps (08-09 share one set, 10-11 another whose sizes agree so that 11 ranks 10's test questions with 10's cached
answers) and recorded settings are plain data in `NOTEBOOKS`; `derive` reads the test sets' names and sizes, σ's
thresholds, the models compared and the adapters; `load` adds the test questions, the BM25 corpus, the training
questions and the models each notebook's parameters name. `S.k`, `S.max_new_tokens`, ... are the parameters as the
profile runs them.
"""

from __future__ import annotations

from typing import Any

from covlib import data
from covlib.core import paths
from covlib.generation import EMBEDDED_LABEL, LM
from covlib.papers import covrag as C
from covlib.retrieval import open_corpus
from covlib.runs import profiles
from covlib.runs.session import Session

THRESHOLDS = ("reference_correctness_max", "correctness_below", "bias_above", "truthfulness_max")
CORPUS = ("corpus", "offline HotpotQA paragraphs")
EMBEDDED = ("model", EMBEDDED_LABEL)
CAPS = {
    "covrag": {  # notebooks 08-09
        "cpu": {"n_per_dataset": ("at most", 20), "max_new_tokens": ("at most", 48), "verify_tokens": ("at most", 128)},
        "smoke": {"n_per_dataset": 4, "k": ("at most", 2), "max_new_tokens": 24, "verify_tokens": 48},
    },
    "covrag-finetune": {  # notebooks 10-11
        "cpu": {"n_train": ("at most", 32), "n_test": ("at most", 5), "n_per_dataset": ("at most", 5),
                "max_steps": ("if unset", 8), "batch_size": 2, "learning_rate": ("at least", 1e-3),
                "max_length": ("at most", 384), "max_new_tokens": ("at most", 48), "verify_tokens": ("at most", 96),
                "ranker_tokens": ("at most", 160)},
        "smoke": {"n_train": 6, "n_test": 2, "n_per_dataset": 2, "k": ("at most", 2), "max_steps": 2, "batch_size": 2,
                  "learning_rate": 2e-3, "max_length": 192, "max_new_tokens": 16, "verify_tokens": 40,
                  "evaluate_base": False, "ranker_tokens": 48},
    },
}


def adapter_or_default(given: str, slug: str, profile: str) -> str:
    """The adapter asked for, else notebook 10's (same profile) when it was trained, else none."""
    if given:
        return given
    folder = paths.build_dir() / "adapters" / f"10-{profile}-{slug}"
    return str(folder) if (folder / "adapter_config.json").is_file() else ""


def derive(v: dict[str, Any]) -> dict[str, Any]:
    """The test sets' names and sizes, σ's thresholds, the models compared (09) and the adapters (11)."""
    names = v["test_datasets"] if "test_datasets" in v else v["datasets"]  # split by the door (`lists`)
    per = v["n_test"] if "n_test" in v else v["n_per_dataset"]
    out: dict[str, Any] = {"sizes": {name: min(per, C.PAPER_COUNTS.get(name, per)) for name in names}}
    if "sigma_mode" in v:
        out["thresholds"] = C.Thresholds(**{t: v[t] for t in THRESHOLDS if t in v}, mode=v["sigma_mode"])
    if "models" in v:  # 09: the models compared ('' the embedded model), recorded by name
        out["model_ids"] = profiles.model_list(v["model"], v["models"], v["profile"], C.PAPER_MODELS.values())
        out["models"] = [m or EMBEDDED_LABEL for m in out["model_ids"]]
    if "qa_adapter" in v:  # 11: the RAG model and the CoV model share `model`, each with its adapter
        out["qa_adapter"] = adapter_or_default(v["qa_adapter"], "qa-only", v["profile"])
        out["covrag_adapter"] = adapter_or_default(v["covrag_adapter"], "qa-verify-chain", v["profile"])
    return out


def load_models(S: Session) -> None:
    """The models the parameters name: answering (with `adapter`), verifier, teacher, the two adapted models, ranker."""
    v = S.values
    if "qa_adapter" in v:
        S.data["rag_model"] = S.load_model(v["model"], v["qa_adapter"])
        S.data["cov_model"] = S.load_model(v["model"], v["covrag_adapter"])
        S.data["ranker"] = S.load_model(v["ranker"])
        return
    ids = v.get("model_ids", [v["model"]])
    S.data["generators"] = [S.load_model(m, v.get("adapter", "") if m == v["model"] else "") for m in ids]
    S.data["base"] = S.generators[0]
    if "lora_rank" in v and not isinstance(S.base, LM):  # 10 renders prompts, reads the weights, trains adapters
        raise TypeError(f"{S.base.name} is served: notebook 10 trains LoRA adapters and measures losses, which need "
                        "the model in this process; give MODEL=<hub id or folder> (a served model can be evaluated "
                        "with an adapter the server loads, in notebooks 08, 09 and 11)")
    if "verifier" in v:
        S.data["checker"] = S.load_model(v["verifier"]) if v["verifier"] else S.base
    if "teacher" in v:
        S.data["labeller"] = S.load_model(v["teacher"]) if v["teacher"] else None


def load(S: Session) -> None:
    """Add the test questions, the BM25 corpus, the training questions (10) and the models to `S`."""
    v = S.values
    names = v.get("test_datasets", v.get("datasets"))
    loaded = C.load_datasets(triviaqa=v.get("triviaqa", ""), mintaka=v.get("mintaka", ""), sizes=v["sizes"],
                             seed=v.get("seed", 0))
    S.data["names"] = names
    S.data["sets"] = {n: loaded[n] for n in names if n in loaded}
    S.data["examples"] = [ex for exs in S.sets.values() for ex in exs]
    S.data["missing"] = [n for n in names if n not in S.sets]
    S.data["passages"], S.data["retriever"], S.data["corpus_name"] = open_corpus(v.get("corpus", ""))
    if "n_train" in v:
        S.data["train"] = data.sample(data.load_adv_hotpotqa(split="all"), v["n_train"], v.get("seed", 0))
    load_models(S)
    if S.missing:
        print(f"left out (no file given, none offline): {S.missing}; pass triviaqa= / mintaka= a path or hub id")
    print(f"corpus: {S.corpus_name}, {len(S.passages)} passages")


def notebook(name: str, caps: str, recorded: tuple, **extra: Any) -> dict[str, Any]:
    """One CoV-RAG notebook's spec."""
    return {"name": name, "traces": True, "caps": CAPS[caps], "derive": derive, "load": load, "recorded": recorded,
            "lists": {"datasets": tuple(C.PAPER_COUNTS), "test_datasets": tuple(C.PAPER_COUNTS)}, **extra}


NOTEBOOKS: dict[str, dict[str, Any]] = {
    "08": notebook("08_covrag_verifier", "covrag", (
        "profile", EMBEDDED, "adapter", ("verifier", "same"), "datasets", "sizes", CORPUS, "k", "seed", "chat",
        "max_new_tokens", "verify_tokens", "thresholds")),
    "09": notebook("09_covrag_iterations", "covrag", (
        "profile", "models", "adapter", "datasets", "sizes", CORPUS, "k", "max_rounds", "seed", "chat",
        "max_new_tokens", "verify_tokens", "sigma_mode")),
    "10": notebook("10_covrag_finetune", "covrag-finetune", (
        "profile", EMBEDDED, ("teacher", "gold labels"), "n_train", "test_datasets", "n_test", CORPUS, "k", "seed",
        "chat", "lora_rank", "lora_alpha", "learning_rate", "epochs", "max_steps", "batch_size", "max_length",
        "evaluate_base")),
    "11": notebook("11_covrag_judge", "covrag-finetune", (
        "profile", EMBEDDED, ("qa_adapter", "none"), ("covrag_adapter", "none"), ("ranker", "embedded (not GPT-4)"),
        "datasets", "n_per_dataset", CORPUS, "k", "seed")),
}
