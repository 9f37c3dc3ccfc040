"""What notebooks 08-11 declare to the one notebook door (`covlib.runs.session.start`), and what they start from.

Each notebook's parameters are declared once in `NOTEBOOKS` (`covlib.runs.parameters`: 08-09 share one set of caps,
10-11 another whose sizes agree so that 11 ranks 10's test questions with 10's cached answers), with its recorded
settings; its `derive` functions add the test sets' sizes, σ's thresholds, the models compared (09) and the adapters
(11); `load` adds the test questions and the BM25 corpus, and the notebook's own models (`answering`, `fine_tuned`,
`ranked`). `S.k`, `S.max_new_tokens`, ... are the parameters as the profile runs them.
"""

from __future__ import annotations

import math
from functools import partial
from pathlib import Path
from typing import Any, Callable

from covlib import data
from covlib.core import paths
from covlib.generation import EMBEDDED_LABEL, LM, is_simulated
from covlib.generation.simulated import with_persona
from covlib.papers import covrag as C
from covlib.papers.covrag import planted, simulation
from covlib.retrieval import open_corpus
from covlib.runs import profiles
from covlib.runs.parameters import DEVICE, MODEL, PROFILE, Param, count, like
from covlib.runs.session import Session

THRESHOLDS = ("reference_correctness_max", "correctness_below", "bias_above", "truthfulness_max")
CORPUS = ("corpus", "offline HotpotQA paragraphs")
EMBEDDED = ("model", EMBEDDED_LABEL)


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
    loaded = C.load_datasets(triviaqa=v.get("triviaqa", ""), mintaka=v.get("mintaka", ""), sizes=v["sizes"],
                             seed=v["seed"])
    S.data["names"] = names
    S.data["sets"] = {n: loaded[n] for n in names if n in loaded}
    S.data["examples"] = [ex for exs in S.sets.values() for ex in exs]
    S.data["missing"] = [n for n in names if n not in S.sets]
    S.data["passages"], S.data["retriever"], S.data["corpus_name"] = open_corpus(v["corpus"])
    models(S)
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


# Each notebook's parameters, declared once (`covlib.runs.parameters`).
CORPUS_DOC = ("DPR psgs_w100.tsv or {id, contents} JSONL; empty: the offline HotpotQA paragraphs; or a `make index` "
              "folder")
SETS = tuple(C.PAPER_COUNTS)
P = {
    "adapter": Param("", "a LoRA adapter folder for `model` (notebook 10 trains one); empty for none"),
    "k": count(5, "references per question (paper: top-5)", smoke=("at most", 2)),
    "seed": Param(0, "question samples"),
    "triviaqa": Param("", "TriviaQA validation: DPR trivia-dev.qa.csv, HF JSONL or hub id"),
    "mintaka": Param("", "Mintaka test: official mintaka_test.json or hub id"),
    "chat": Param(True, "wrap prompts in the model's chat template"),
    "corpus": Param("", CORPUS_DOC),
    "n_per_dataset": count(400, "questions per dataset", cpu=("at most", 20), smoke=4),
    "max_new_tokens": count(128, "longest answer", cpu=("at most", 48), smoke=24),
    "verify_tokens": count(160, "longest verification", cpu=("at most", 128), smoke=48),
    "sigma_mode": Param("all", "σ: all (footnote 2) or any", choices=("all", "any")),
}
FINETUNE = {  # 10-11's sizes agree, so that 11 ranks 10's test questions with 10's cached answers
    "n_per_dataset": like(P["n_per_dataset"], cpu=("at most", 5), smoke=2),
    "k": like(P["k"], doc="references per question"),
    "chat": Param(False, "raw prompts for the answering models (as notebook 10 trained them)"),
    "max_new_tokens": like(P["max_new_tokens"], smoke=16),
    "verify_tokens": like(P["verify_tokens"], cpu=("at most", 96), smoke=40),
}


def score(default: float, doc: str) -> Param:
    """One of σ's thresholds: CoV-RAG's scores lie in [0, 1]."""
    return Param(default, doc, low=0.0, high=1.0)


def notebook(name: str, parameters: dict[str, Param], models: Callable[[Session], None], **extra: Any) -> dict:
    """One CoV-RAG notebook's spec: its parameters, and `load` with the models it loads."""
    return {"name": name, "traces": True, "load": partial(load, models=models), "simulate": simulation.teach,
            "parameters": parameters, **extra}


NOTEBOOKS: dict[str, dict[str, Any]] = {
    "08": notebook("08_covrag_verifier", {
        "profile": PROFILE,
        "model": like(MODEL, doc="answering model: hub id or local dir; empty for the embedded SmolLM2-135M-Instruct"),
        "adapter": P["adapter"],
        "verifier": Param("", "verifying model; empty: the answering model (the paper's one CoV-augmented model)"),
        "device": DEVICE,
        "datasets": Param("NQ,WebQ", "which of NQ, WebQ, TriviaQA, Mintaka (TriviaQA / Mintaka need a path or hub id "
                          "below)", items=SETS),
        "n_per_dataset": like(P["n_per_dataset"], doc="questions per dataset (paper: NQ 400, WebQ 400; TriviaQA and "
                              "Mintaka 100)"),
        "triviaqa": like(P["triviaqa"], doc="TriviaQA validation: DPR trivia-dev.qa.csv, HF JSONL or hub id (test "
                         "answers are not public)"),
        "mintaka": P["mintaka"],
        "corpus": like(P["corpus"], doc="passages to retrieve from: DPR psgs_w100.tsv or {id, contents} JSONL; empty: "
                       "offline corpus; or a `make index` folder"),
        "k": P["k"], "seed": P["seed"],
        "chat": like(P["chat"], doc="wrap prompts in the model's chat template (instruction-tuned models)"),
        "max_new_tokens": P["max_new_tokens"], "verify_tokens": P["verify_tokens"],
        "reference_correctness_max": score(0.27, "σ: s_k <= this (footnote 2)"),
        "correctness_below": score(0.26, "σ: correctness < this"),
        "bias_above": score(0.7, "σ: bias > this"),
        "truthfulness_max": score(0.92, "σ: truthfulness <= this"),
        "sigma_mode": like(P["sigma_mode"], doc='all (footnote 2\'s "and") or any (a revised query and any one other '
                           'condition)')},
        derive=(sizes, sigma), models=answering, work=work_08, recorded=(
            "profile", EMBEDDED, "adapter", ("verifier", "same"), "datasets", "sizes", CORPUS, "k", "seed", "chat",
            "max_new_tokens", "verify_tokens", "thresholds")),
    "09": notebook("09_covrag_iterations", {
        "profile": PROFILE, "model": MODEL,
        "models": Param("", "comma-separated models to compare; empty: `model` (full profile: the paper's backbones)"),
        "adapter": P["adapter"], "device": DEVICE,
        "datasets": Param("NQ,WebQ,Mintaka,TriviaQA", "Table 2's columns (TriviaQA / Mintaka only with a path or hub "
                          "id)", items=SETS),
        "n_per_dataset": like(P["n_per_dataset"], doc="cap per dataset (paper: NQ 400, WebQ 400, Mintaka 100, "
                              "TriviaQA 100)"),
        "triviaqa": P["triviaqa"], "mintaka": P["mintaka"], "corpus": P["corpus"], "k": P["k"],
        "max_rounds": Param(1, "re-retrievals allowed (paper: 1)", low=0),  # 0: retrieve once, never again
        "seed": P["seed"], "chat": P["chat"], "max_new_tokens": P["max_new_tokens"],
        "verify_tokens": P["verify_tokens"], "sigma_mode": P["sigma_mode"]},
        derive=(sizes, sigma, compared), models=answering, work=work_09, recorded=(
            "profile", "models", "adapter", "datasets", "sizes", CORPUS, "k", "max_rounds", "seed", "chat",
            "max_new_tokens", "verify_tokens", "sigma_mode")),
    "10": notebook("10_covrag_finetune", {
        "profile": PROFILE,
        "model": like(MODEL, doc="base model to fine-tune: hub id or local dir; empty for the embedded "
                      "SmolLM2-135M-Instruct"),
        "device": DEVICE,
        "teacher": Param("", "verification labels from this model (hub id / dir); empty: from the gold answers"),
        "n_train": count(308, "training questions (Adversarial HotpotQA; the paper: 24,824 QA + 22,170 verification "
                         "samples)", cpu=("at most", 32), smoke=6),
        "test_datasets": Param("NQ,WebQ", "evaluation sets (Table 4's QA columns)", items=SETS),
        "n_test": count(400, "test questions per dataset", cpu=("at most", 5), smoke=2),
        "corpus": P["corpus"], "k": FINETUNE["k"],
        "seed": like(P["seed"], doc="samples, LoRA initialisation, shuffling"),
        "chat": like(FINETUNE["chat"], doc="train and infer on raw prompts (a fine-tuned model learns the format "
                     "itself)"),
        "lora_rank": count(16, "LoRA r (ours: the paper names no method)"),
        "lora_alpha": Param(32, "LoRA alpha", low=0, above=True),
        "learning_rate": Param(2e-4, "AdamW learning rate", low=0.0, above=True, cpu=("at least", 1e-3), smoke=2e-3),
        "epochs": Param(2.0, "passes over the training pairs", low=0.0, above=True),
        "max_steps": Param(-1, "stop after this many steps (-1: by epochs)", low=-1, cpu=("if unset", 8), smoke=2),
        "batch_size": count(8, "pairs per step", cpu=2, smoke=2),
        "max_length": count(1024, "tokens per training pair (the prompt loses its start first)", cpu=("at most", 384),
                            smoke=192),
        "max_new_tokens": like(FINETUNE["max_new_tokens"], doc="longest answer at test time"),
        "verify_tokens": like(FINETUNE["verify_tokens"], doc="longest verification at test time"),
        "evaluate_base": Param(True, "also run the untuned base model on the test questions (a reference row of "
                               "Table 4)", smoke=False)},
        derive=(sizes,), models=fine_tuned, work=work_10, recorded=(
            "profile", EMBEDDED, ("teacher", "gold labels"), "n_train", "test_datasets", "n_test", CORPUS, "k", "seed",
            "chat", "lora_rank", "lora_alpha", "learning_rate", "epochs", "max_steps", "batch_size", "max_length",
            "evaluate_base")),
    "11": notebook("11_covrag_judge", {
        "profile": PROFILE,
        "model": like(MODEL, doc="base model: hub id or local dir; empty for the embedded SmolLM2-135M-Instruct"),
        "qa_adapter": Param("", "the QA-only adapter (RAG row); empty: notebook 10's when present, else the base "
                            "model"),
        "covrag_adapter": Param("", "the QA + verification adapter; empty: notebook 10's w/ CoL adapter when present"),
        "ranker": Param("", "the LLM judge that ranks the answers (the paper: GPT-4); empty for the embedded model, "
                        "labelled as such"),
        "device": DEVICE,
        "datasets": Param("NQ,WebQ", "questions to rank on", items=SETS),
        "n_per_dataset": FINETUNE["n_per_dataset"], "corpus": P["corpus"], "k": FINETUNE["k"],
        "seed": like(P["seed"], doc="question samples and the order answers are shown in"),
        "chat": FINETUNE["chat"], "max_new_tokens": FINETUNE["max_new_tokens"],
        "verify_tokens": FINETUNE["verify_tokens"],
        "ranker_tokens": count(200, "longest ranking", cpu=("at most", 160), smoke=48)},
        derive=(sizes, adapters), models=ranked, work=work_11, recorded=(
            "profile", EMBEDDED, ("qa_adapter", "none"), ("covrag_adapter", "none"), ("ranker", "embedded (not GPT-4)"),
            "datasets", "n_per_dataset", CORPUS, "k", "seed")),
}
