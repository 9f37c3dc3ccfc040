"""Notebooks 08-11's parameters, each declared once (`covlib.runs.parameters`): default, doc, rule, and what the cpu
and smoke profiles do to it (08-09 share one set of caps, 10-11 another whose sizes agree so that 11 ranks 10's test
questions with 10's cached answers); read by their specs (`notebook`) and by the claims ledger (the questions `full`
runs)."""

from __future__ import annotations

from covlib.papers.covrag.paper import PAPER_COUNTS
from covlib.runs.parameters import DEVICE, MODEL, PROFILE, Param, count, like

CORPUS_DOC = ("DPR psgs_w100.tsv or {id, contents} JSONL; empty: the offline HotpotQA paragraphs; or a `make index` "
              "folder")
SETS = tuple(PAPER_COUNTS)
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



PARAMETERS: dict[str, dict[str, Param]] = {
    "08": {
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
    "09": {
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
    "10": {
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
    "11": {
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
}
