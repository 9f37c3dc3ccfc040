"""What notebooks 08-11 declare to the one notebook door (`covlib.runs.session.start`), and what they start from.

Their caps (08-09 share one set, 10-11 another whose sizes agree so that 11 ranks 10's test questions with 10's cached
answers) and recorded settings are plain data in `NOTEBOOKS`; `derive` reads the test sets' names and sizes, σ's
thresholds, the models compared and the adapters; `load` adds the test questions, the BM25 corpus, the training
questions and the models each notebook's parameters name. `S.k`, `S.max_new_tokens`, ... are the parameters as the
profile runs them.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from covlib import data
from covlib.core import paths
from covlib.generation import EMBEDDED_LABEL, LM, is_simulated
from covlib.generation.simulated import with_persona
from covlib.papers import covrag as C
from covlib.papers.covrag import planted, simulation
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


def adapter_folder(slug: str, profile: str) -> str:
    """build/adapters/10-<profile>-<slug>: where notebook 10 writes a variant (a simulated model's is only named)."""
    return str(paths.build_dir() / "adapters" / f"10-{profile}-{slug}")


def adapter_or_default(given: str, slug: str, profile: str, simulated: bool = False) -> str:
    """The adapter asked for, else notebook 10's (same profile) when it was trained (for a simulated model, always:
    its variants are planted, named by the folder), else none."""
    if given:
        return given
    folder = adapter_folder(slug, profile)
    return folder if simulated or (Path(folder) / "adapter_config.json").is_file() else ""


def derive(v: dict[str, Any]) -> dict[str, Any]:
    """The test sets' names and sizes, σ's thresholds, the models compared (09) and the adapters (11)."""
    names = v["test_datasets"] if "test_datasets" in v else v["datasets"]  # split by the door (`lists`)
    per = v["n_test"] if "n_test" in v else v["n_per_dataset"]
    out: dict[str, Any] = {"sizes": {name: min(per, C.PAPER_COUNTS.get(name, per)) for name in names}}
    if "sigma_mode" in v:
        out["thresholds"] = C.Thresholds(**{t: v[t] for t in THRESHOLDS if t in v}, mode=v["sigma_mode"])
    if "models" in v:  # 09: the models compared ('' the embedded model), recorded by name
        out["model_ids"] = profiles.model_list(v["model"], v["models"], v["profile"], C.PAPER_MODELS)
        out["models"] = [m or EMBEDDED_LABEL for m in out["model_ids"]]
    if "qa_adapter" in v:  # 11: the RAG model and the CoV model share `model`, each with its adapter
        simulated = is_simulated(v["model"])
        out["qa_adapter"] = adapter_or_default(v["qa_adapter"], "qa-only", v["profile"], simulated)
        out["covrag_adapter"] = adapter_or_default(v["covrag_adapter"], "qa-verify-chain", v["profile"], simulated)
        if simulated and not v["ranker"]:  # the paper's judge, simulated: its ranks follow Table 3's (planted)
            out["ranker"] = with_persona(v["model"], planted.JUDGE_PERSONA)
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
    if "lora_rank" in v and is_simulated(S.base):  # 10 on a simulated model: its variants are planted, not trained
        S.data["planted_variants"] = [S.load_model(v["model"], adapter_folder(slug, v["profile"]))
                                      for slug in C.VARIANTS.values()]  # loaded here so that the door teaches them
    elif "lora_rank" in v and not isinstance(S.base, LM):  # 10 renders prompts, reads the weights, trains adapters
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


# Model work, for the plan of a run (`covlib.runs.plan`), in SmolLM2's tokens (measured on 40 NQ and WebQ questions):
# the QA prompt's frame and each reference paragraph, the verification prompt's frame (its head shared by all rows),
# the closed-book prompt, the chat template's wrapper, the rankers' prompts; a QA training sequence (a verification
# one is about twice as long).
QA_FRAME, PARAGRAPH, CHAT, SHARED_QA = 30, 90, 30, 37
VERIFY_FRAME, SHARED_VERIFY = 450, 183
CLOSED_BOOK, SHARED_CLOSED_BOOK = 58, 39
RANK_OTHERS, RANK_CITATION, SHARED_RANK = 300, 614, 112
QA_SEQUENCE = 367


def questions(v: dict[str, Any]) -> int:
    """Test questions that load: NQ and WebQ offline, TriviaQA and Mintaka when a file is given."""
    return sum(n for name, n in v["sizes"].items() if name in ("NQ", "WebQ") or v.get(name.lower()))


def cov_rag_work(name: str, v: dict[str, Any], model: str, n: int, chat: bool, rounds: int, key: str) -> list[dict]:
    """CoV-RAG on `n` questions: answers and verifications, and at most `rounds` re-answers of every question."""
    wrap = CHAT if chat else 0
    qa, verify = QA_FRAME + wrap + PARAGRAPH * v["k"], VERIFY_FRAME + wrap + PARAGRAPH * v["k"]
    t, vt = v["max_new_tokens"], v["verify_tokens"]
    tag = f"{key} {model} {chat} {v['k']} {t} {vt} {n}"
    work = [dict(step=f"{name}: answers", kind="generate", rows=n, prompt=qa, new=t, shared=SHARED_QA, key=f"{tag} a",
                 model=model),
            dict(step=f"{name}: verifications", kind="generate", rows=n, prompt=verify, new=vt, shared=SHARED_VERIFY,
                 key=f"{tag} v", model=model)]
    if rounds:
        bound = "at most: every question re-answered every round"
        work += [dict(step=f"{name}: re-answers", kind="generate", rows=n * rounds, prompt=qa, new=t, bound=bound,
                      key=f"{tag} r", model=model)]
        if rounds > 1:
            work += [dict(step=f"{name}: re-verifications", kind="generate", rows=n * (rounds - 1), prompt=verify,
                          new=vt, bound=bound, key=f"{tag} rv", model=model)]
    return work


def work_08(v: dict[str, Any]) -> list[dict[str, Any]]:
    """Notebook 08: one round of answers and their verifications (σ recorded, not acted on)."""
    return cov_rag_work("CoV-RAG", v, v["model"], questions(v), v["chat"], 0, "covrag")


def work_09(v: dict[str, Any]) -> list[dict[str, Any]]:
    """Notebook 09: per model, closed-book answers and CoV-RAG with `max_rounds` rounds (its first 08's call)."""
    n, work = questions(v), []
    for model in v["model_ids"]:
        work.append(dict(step="closed book", kind="generate", rows=n, prompt=CLOSED_BOOK, new=v["max_new_tokens"],
                         shared=SHARED_CLOSED_BOOK, model=model))
        first = cov_rag_work("CoV-RAG", v, model, n, v["chat"], 0, "covrag")
        more = cov_rag_work("CoV-RAG", v, model, n, v["chat"], v["max_rounds"], "covrag")[2:]
        work += first + more
    return work


def training_steps(v: dict[str, Any], pairs: int) -> int:
    """LoRA steps: `max_steps` when set, else the epochs over `pairs` in batches."""
    return v["max_steps"] if v["max_steps"] > 0 else math.ceil(v["epochs"] * math.ceil(pairs / v["batch_size"]))


def work_10(v: dict[str, Any]) -> list[dict[str, Any]]:
    """Notebook 10: three LoRA fine-tunings (QA only; QA and verification without and with the chain), the first
    model's training answers, and CoV-RAG evaluated on each model."""
    n_train, n, b = v["n_train"], questions(v), v["batch_size"]
    qa_len = min(QA_SEQUENCE, v["max_length"])
    both_len = min((QA_SEQUENCE + 2 * QA_SEQUENCE) // 2, v["max_length"])
    work = [dict(step="LoRA, QA only", kind="train", rows=training_steps(v, n_train) * b, prompt=qa_len),
            dict(step="training answers of the QA-only model", kind="generate", rows=n_train,
                 prompt=QA_FRAME + PARAGRAPH * v["k"], new=v["max_new_tokens"]),
            *[dict(step=f"LoRA, QA and verification {name}", kind="train", rows=training_steps(v, 2 * n_train) * b,
                   prompt=both_len) for name in ("without the chain", "with the chain")]]
    evaluated = (["base"] if v["evaluate_base"] else []) + ["QA only", "without the chain", "with the chain"]
    for name in evaluated:
        work += cov_rag_work(f"CoV-RAG, {name}", v, v["model"], n, v["chat"], 1, f"covrag-10 {name}")
    return work


def work_11(v: dict[str, Any]) -> list[dict[str, Any]]:
    """Notebook 11: the RAG and CoV-RAG answers (10's calls on the same adapters) and the two rankings."""
    n = questions(v)
    rag = cov_rag_work("CoV-RAG, QA only", v, v["model"], n, v["chat"], 1, "covrag-10 QA only")[:1]
    cov = cov_rag_work("CoV-RAG, with the chain", v, v["model"], n, v["chat"], 1, "covrag-10 with the chain")
    return rag + cov + [dict(step=f"ranking by {what}", kind="generate", rows=n, prompt=size, new=v["ranker_tokens"],
                             shared=SHARED_RANK, model=v["ranker"])
                        for what, size in (("the others", RANK_OTHERS), ("citations", RANK_CITATION))]


def notebook(name: str, caps: str, recorded: tuple, **extra: Any) -> dict[str, Any]:
    """One CoV-RAG notebook's spec."""
    return {"name": name, "traces": True, "caps": CAPS[caps], "derive": derive, "load": load, "recorded": recorded,
            "lists": {"datasets": tuple(C.PAPER_COUNTS), "test_datasets": tuple(C.PAPER_COUNTS)},
            "simulate": simulation.teach, **extra}


NOTEBOOKS: dict[str, dict[str, Any]] = {
    "08": notebook("08_covrag_verifier", "covrag", work=work_08, recorded=(
        "profile", EMBEDDED, "adapter", ("verifier", "same"), "datasets", "sizes", CORPUS, "k", "seed", "chat",
        "max_new_tokens", "verify_tokens", "thresholds")),
    "09": notebook("09_covrag_iterations", "covrag", work=work_09, recorded=(
        "profile", "models", "adapter", "datasets", "sizes", CORPUS, "k", "max_rounds", "seed", "chat",
        "max_new_tokens", "verify_tokens", "sigma_mode")),
    "10": notebook("10_covrag_finetune", "covrag-finetune", work=work_10, recorded=(
        "profile", EMBEDDED, ("teacher", "gold labels"), "n_train", "test_datasets", "n_test", CORPUS, "k", "seed",
        "chat", "lora_rank", "lora_alpha", "learning_rate", "epochs", "max_steps", "batch_size", "max_length",
        "evaluate_base")),
    "11": notebook("11_covrag_judge", "covrag-finetune", work=work_11, recorded=(
        "profile", EMBEDDED, ("qa_adapter", "none"), ("covrag_adapter", "none"), ("ranker", "embedded (not GPT-4)"),
        "datasets", "n_per_dataset", CORPUS, "k", "seed")),
}
