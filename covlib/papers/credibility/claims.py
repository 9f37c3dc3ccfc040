"""The credibility paper's directional claims (sentence, numbers, headline setting) and the model facts they depend on.

Read by the claims ledger (`covlib.report.claims`); notebooks 04-07 record the estimates.
Quotes are verbatim from the paper's extracted text (`../shared/papers/001_*.txt`). A paper
effect is the smallest the paper reports for a model the claim covers, in our unit (the power
calculation sizes a study to detect it); a claim on kinds of models uses the kinds' means.

Three claims depend on what a model *is*: self-completion helps models "enhanced with
techniques like RLHF", instruction-tuned models self-reflect, and self-reflection improves "as
the models become more powerful". Whether a model is instruction-tuned or tuned with RLHF is
declared, model by model, from its card (`MODEL_CARDS`), never guessed from its name; its size
is read from the model's own config (`parameter_count`), else from the card. A model without a
card is outside every conditional claim ("not testable here", with the reason).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from statistics import mean
from typing import Any

from covlib.core.claim import Claim, ClaimSet
from covlib.generation import EMBEDDED_MODEL, EMBEDDED_NAME, ENDPOINT_PREFIX
from covlib.generation.embedded import embedded_model_dir

from covlib.papers.credibility.planted import effects as planted_effects
from covlib.papers.credibility.paper import PAPER_MODELS, PAPER_TABLE1, PAPER_TABLE4
from covlib.papers.credibility.parameters import PARAMETERS

PAPER = "Credibility"
RLHF_SCOPE = "models tuned on human preference feedback (RLHF), as the paper's ChatGPT and ChatGLM"
INSTRUCTION_SCOPE = "instruction-tuned models"

# Why a raw key-fact F1 (or citation) difference cannot decide a claim (its records carry it as `judge_bound`: shown, not counted).
JUDGE_BOUND = ("raw key-fact and citation metrics count the judge's own decisions, whose error differs between the arms' answers (on "
               "held-out key-fact test questions raw recall's bias ranges from +19 to +61 points by reference "
               "condition), and no judge-corrected F1 or citation rate is computed")
# Why a judge-corrected difference between reference conditions cannot decide a claim when one measurement of the
# judge's error corrects both arms (records carry it as `judge_bound`); `{}`: what the rates were measured on.
CONDITIONS_BOUND = ("the judge's error was measured once, on {}, not on this model's answers in each reference "
                    "condition, and it differs between conditions (in a simulated run the same judge rejected 62% of "
                    "one stratum's non-entailed closed-book pairs but 14% with partial references, whose answers copy "
                    "reference sentences), so the corrected difference could still be the judge's; rates measured on "
                    "labelled answers of each condition would make it testable")

# --------------------------------------------------------------------------- what each model is (declared)


@dataclass(frozen=True)
class ModelCard:
    """What a model's card (or paper) says it is: its size, whether it is instruction-tuned, whether RLHF-tuned."""

    name: str  # the paper's name for it (or the card's)
    ids: tuple[str, ...]  # hub ids and served names it goes by (matched case-insensitively)
    parameters: float | None  # billions, from the card; None: not published
    instruction_tuned: bool
    rlhf: bool  # tuned on human preference feedback (RLHF, or the human-preference alignment stage its card names)
    training: str  # how it was tuned, in the card's words
    source: str  # where that is said


MODEL_CARDS: tuple[ModelCard, ...] = (
    ModelCard("LLaMA-7B", ("huggyllama/llama-7b",), 6.74, False, False, "pre-trained only, not tuned further",
              "Touvron et al. 2023a; the paper's Table 1 'Foundation LLMs'"),
    ModelCard("LLaMA-13B", ("huggyllama/llama-13b",), 13.0, False, False, "pre-trained only, not tuned further",
              "Touvron et al. 2023a; the paper's Table 1 'Foundation LLMs'"),
    ModelCard("Llama2-13B", ("meta-llama/llama-2-13b-hf",), 13.0, False, False, "pre-trained only, not tuned further",
              "Touvron et al. 2023b; the paper's Table 1 'Foundation LLMs'"),
    ModelCard("ChatGLM2-6B", ("thudm/chatglm2-6b",), 6.24, True, True,
              "pre-trained, then tuned with human preference alignment training (its predecessor ChatGLM-6B: "
              "SFT, feedback bootstrap and RLHF)", "the THUDM/chatglm2-6b model card"),
    ModelCard("Vicuna-7B", ("lmsys/vicuna-7b-v1.3",), 6.74, True, False,
              "tuned by supervised instruction fine-tuning of LLaMA on ShareGPT conversations, no preference tuning",
              "the lmsys/vicuna-7b-v1.3 model card"),
    ModelCard("Vicuna-13B", ("lmsys/vicuna-13b-v1.3",), 13.0, True, False,
              "tuned by supervised instruction fine-tuning of LLaMA on ShareGPT conversations, no preference tuning",
              "the lmsys/vicuna-13b-v1.3 model card"),
    ModelCard("Llama2-chat-13B", ("meta-llama/llama-2-13b-chat-hf",), 13.0, True, True,
              "tuned by supervised fine-tuning, then RLHF", "Touvron et al. 2023b (Llama 2-Chat)"),
    ModelCard("ChatGPT", ("gpt-3.5-turbo", "chatgpt"), None, True, True, "tuned by supervised fine-tuning, then RLHF",
              "OpenAI, 'Introducing ChatGPT' (2022); its size is not published"),
    ModelCard("SmolLM2-135M-Instruct", (EMBEDDED_MODEL.lower(), EMBEDDED_NAME.lower()), 0.135, True, False,
              "tuned by supervised fine-tuning, then DPO on UltraFeedback, whose preferences GPT-4 rated: preference "
              "tuning on AI feedback, without reinforcement learning or human raters, which we do not count as RLHF",
              "the HuggingFaceTB/SmolLM2-135M-Instruct model card"),
)


def _served_name(name: str) -> str:
    """'openai:<model>@<url>' -> '<model>'; any other name as it is."""
    if name.startswith(ENDPOINT_PREFIX):
        return name[len(ENDPOINT_PREFIX):].rsplit("@", 1)[0]
    return name


def model_card(generator: Any) -> ModelCard | None:
    """The declared card of a generator (by hub id, served model or name), None when unknown or adapter-tuned."""
    if getattr(generator, "adapter", None):
        return None  # further fine-tuned: no longer the card's model
    persona = getattr(generator, "persona", "")  # a simulated model stands for a paper's model: that model's card
    if persona:
        return next((c for c in MODEL_CARDS if c.name == persona), None)
    names = {str(getattr(generator, "model_id", "") or "").lower(), _served_name(str(generator.name)).lower()}
    return next((c for c in MODEL_CARDS if names & set(c.ids)), None)


def parameter_count(generator: Any) -> tuple[float | None, str]:
    """(billions of parameters, where that number comes from): the model's own config, else its card, else None."""
    model_id = getattr(generator, "model_id", None)
    if model_id and not str(generator.name).startswith(ENDPOINT_PREFIX):
        source = embedded_model_dir() if model_id == EMBEDDED_MODEL else model_id
        try:
            import torch
            from transformers import AutoConfig, AutoModelForCausalLM

            config = AutoConfig.from_pretrained(source, local_files_only=True)
            with torch.device("meta"):  # the architecture without its weights: nothing is loaded
                model = AutoModelForCausalLM.from_config(config)
            return sum(p.numel() for p in model.parameters()) / 1e9, "counted from the model's config"
        except (OSError, ValueError, KeyError, ImportError):
            pass  # not on this machine, or custom code: the card's number, if any
    card = model_card(generator)
    if card is not None and card.parameters is not None:
        return card.parameters, f"declared ({card.source})"
    return None, "unknown: no config on this machine and no card with a published size"


def size_label(billions: float) -> str:
    """A parameter count at two significant figures: '0.13B', '6.7B', '13B' (two models of one label are one size)."""
    digits = 1 - int(math.floor(math.log10(abs(billions))))
    return f"{round(billions, digits):g}B"


def size_tiers(sizes: dict[str, float | None]) -> list[tuple[str, list[str]]]:
    """The models of known size grouped by `size_label`, smallest first: [(label, [model, ...]), ...]."""
    known = sorted((s, m) for m, s in sizes.items() if s is not None)
    tiers: dict[str, list[str]] = {}
    for s, m in known:
        tiers.setdefault(size_label(s), []).append(m)
    return list(tiers.items())


def outside(scope: str, generator: Any) -> str:
    """Why a model is outside a conditional claim ('' when inside): `RLHF_SCOPE` or `INSTRUCTION_SCOPE`."""
    if scope not in (RLHF_SCOPE, INSTRUCTION_SCOPE):
        raise ValueError(f"unknown scope {scope!r}; expected {RLHF_SCOPE!r} or {INSTRUCTION_SCOPE!r}")
    card = model_card(generator)
    head = f"not testable here (the claim is about {scope})"
    if card is None:
        return f"{head}: {generator.name} has no declared model card, so how it was tuned is unknown"
    inside = card.rlhf if scope == RLHF_SCOPE else card.instruction_tuned
    return "" if inside else f"{head}: {card.name} is {card.training} ({card.source})"



# --------------------------------------------------------------------------- the claims


def _card(name: str) -> ModelCard:
    return next(c for c in MODEL_CARDS if c.name == name)


def _kind_gap() -> float:
    """Table 1 F1 of the simulated personas (PAPER_MODELS): the instruction-tuned ones' mean − the foundation ones'."""
    return (mean(PAPER_TABLE1[m][2] for m in PAPER_MODELS if _card(m).instruction_tuned)
            - mean(PAPER_TABLE1[m][2] for m in PAPER_MODELS if not _card(m).instruction_tuned))


def _size_gap() -> float:
    """Table 4 reflection accuracy of the simulated personas: the largest size's mean − the smallest's (cards)."""
    tiers = size_tiers({m: _card(m).parameters for m in PAPER_MODELS})
    return mean(PAPER_TABLE4[m][6] for m in tiers[-1][1]) - mean(PAPER_TABLE4[m][6] for m in tiers[0][1])


CLAIMS: tuple[Claim, ...] = (
    Claim("cred-instruction-beats-foundation", PAPER,
          "Instruction-tuned models give answers of higher key-fact F1 than foundation models",
          "However, once instruction tuning is performed, we observe a marked improvement in the quality of answers "
          "in terms of both correctness and groundedness.",
          "Table 1: F1 46.48-68.22 for the five instruction-tuned models, 7.60-9.54 for the three foundation ones",
          "04_credibility_models",
          "key-fact F1 (mean over the instruction-tuned models) − (mean over the foundation models), paired over "
          "questions", primary="F1",
          paper_effect=46.2, effect_source="Table 1 F1: mean of the instruction-tuned 54.63 − of the foundation 8.44",
          planted=math.nan, planted_source="none in this unit: the simulation plants each persona's Table 1 P and R, "
          f"whose F1 of means differ by {_kind_gap():.1f} (instruction-tuned − foundation; ChatGPT has none); the "
          "measure, a mean of per-question F1, runs below that by an amount nothing plants",
          full_n=PARAMETERS["04"]["n_questions"].default),
    Claim("cred-human-correlation", PAPER,
          "Key-fact recall correlates with people's recall ratings more closely than EM-recall does",
          "While there's only a moderate correlation of 0.54 between human evaluations and the \"EM recall\" metric, "
          "our key-factsfocused evaluation method shows a much more consistent alignment with human feedback, with "
          "coefficients exceeding 0.87 for precision and 0.88 for recall.",
          "Table 2: Pearson over 5 models, P 0.87, R 0.88, EM-recall 0.54",
          "04_credibility_models",
          "r(key-fact R, human recall) − r(EM-recall, human recall) across models (Zou's interval); both r recorded",
          primary="recall", paper_effect=0.34, effect_source="Table 2: 0.88 − 0.54"),
    Claim("cred-noise-lowers-recall", PAPER,
          "More noise references lower key-fact recall",
          "RaLLMs are highly sensitive to the signal-tonoise ratio in retrieved knowledge; a lower ratio leads to "
          "decreased accuracy.",
          "§6.3 / Fig. 3: from 5 to 10 references recall drops by 4.3% (ChatGPT), 14.3% (ChatGLM2) and about 30% "
          "(LLaMA, Vicuna), relative",
          "05_knowledge_precision", "key-fact recall with fewer references − with more, paired",
          primary="hotpotqa, 5 vs 10 references", paper_effect=2.4,
          effect_source="§6.3: ChatGPT's 4.3% of its 56.55 recall at 5 references (Table 1), the smallest drop",
          full_n=PARAMETERS["05"]["n_questions"].default),
    Claim("cred-strong-models-robust-to-noise", PAPER,
          "ChatGPT's and ChatGLM2's key-fact recall falls less than LLaMA's and Vicuna's as noise references are "
          "added",
          "In contrast, models like LLaMA and Vicuna saw a significant 30% plunge in recall, underscoring the "
          "comparative robustness of ChatGPT and ChatGLM against noise.",
          "§6.3 / Fig. 3: from 5 to 10 references recall drops by 4.3% (ChatGPT), 14.3% (ChatGLM2), about 30% "
          "(LLaMA, Vicuna), relative",
          "", "relative recall drop (5 → 10 references) of LLaMA and Vicuna − of ChatGPT and ChatGLM2",
          untestable="needs ChatGPT (OpenAI's API) and ChatGLM2-6B, LLaMA and Vicuna (hub models): none runs offline "
                     "here, and a run with only some of them cannot compare the two groups"),
    Claim("cred-chatgpt-fills-gaps", PAPER,
          "ChatGPT loses less key-fact recall than other models when references are missing, filling gaps from its "
          "own knowledge",
          "Notably, ChatGPT exhibits higher adaptability to variations in knowledge recall, leveraging its built-in "
          "knowledge to fill reference gaps.",
          "Table 3, R closed book / partial / complete: ChatGPT 39.17 / 35.34 / 56.55 (closed book above partial, "
          "and the smallest loss without references: 17.4); ChatGLM2-6B 13.72 / 25.87 / 48.06, Vicuna-7B 15.51 / "
          "34.95 / 45.96, Vicuna-13B 21.58 / 44.80 / 48.69, Llama2-chat-13B 26.83 / 34.37 / 47.97 (losses 34.3, 30.5, "
          "27.1, 21.1)",
          "", "key-fact recall lost from complete references to none (closed book): the other models' mean − "
          "ChatGPT's",
          untestable="needs ChatGPT (OpenAI's API), which no offline run here has"),
    Claim("cred-complete-beats-partial", PAPER,
          "Complete references give higher key-fact recall than partial ones",
          "The completeness of knowledge significantly impacts RaLLMs' efficacy on complex QA tasks.",
          "Table 3: complete R > partial R for every model (from Vicuna-13B 48.69 vs 44.80 to ChatGLM2 48.06 vs 25.87)",
          "06_knowledge_recall", "key-fact recall (complete) − (partial), paired", primary="hotpotqa",
          paper_effect=3.89, effect_source="Table 3 R, Vicuna-13B: 48.69 − 44.80, the smallest gap",
          full_n=PARAMETERS["06"]["n_questions"].default),
    Claim("cred-partial-beats-closed", PAPER,
          "Partial references give higher key-fact recall than none (closed book)",
          "The completeness of knowledge significantly impacts RaLLMs' efficacy on complex QA tasks.",
          "Table 3: partial R > closed-book R for 4 of 5 models (ChatGPT 35.34 vs 39.17 is the exception)",
          "06_knowledge_recall", "key-fact recall (partial) − (closed book), paired", primary="hotpotqa",
          paper_effect=7.54, effect_source="Table 3 R, Llama2-chat-13B: 34.37 − 26.83, the smallest positive gap",
          full_n=PARAMETERS["06"]["n_questions"].default),
    Claim("cred-self-completion-helps", PAPER,
          "Self-completion raises key-fact F1 over BM25's top 10 for models tuned with RLHF",
          "Models enhanced with techniques like RLHF show self-completion capabilities, allowing them to benefit "
          "from the improved pipeline.",
          "Table 4: ChatGPT F1 42.66 → 48.18, ChatGLM2-6B 25.84 → 30.41; Llama2-chat-13B (RLHF by its card) "
          "28.45 → 25.76; the weaker models do not gain",
          "07_reflection_completion", "key-fact F1 with self-completion − with BM25 top 10, paired",
          primary="hotpotqa", paper_effect=4.57,
          effect_source="Table 4 F1, ChatGLM2-6B: 30.41 − 25.84, the smallest gain of the models that gain",
          planted=math.nan, planted_source="none in this unit: the simulation plants how often a self-completion "
          "query names the missing gold paragraph (planted.Rates.query_hits) and each reference setting's recall, "
          "not an F1 gain",
          about=RLHF_SCOPE, full_n=PARAMETERS["07"]["n_questions"].default),
    Claim("cred-reflection-above-chance", PAPER,
          "Instruction-tuned models refuse on partial and answer on complete references more often than chance",
          "Instruction-tuned models exhibit multi-hop reasoning and self-reflection abilities.",
          "Table 4: reflection accuracy 51.4-70.2 for the instruction-tuned models on equal groups (chance 50)",
          "07_reflection_completion", "self-reflection accuracy − chance (the better constant decision), exact binomial",
          primary="hotpotqa", paper_effect=1.4, effect_source="Table 4, Vicuna-7B: 51.4 − 50, the smallest",
          about=INSTRUCTION_SCOPE, full_n=PARAMETERS["07"]["n_questions"].default),
    Claim("cred-reflection-tracks-strength", PAPER,
          "Self-reflection accuracy grows with model size (parameter count)",
          "As the models become more powerful, their self-reflection capability seems to improve.",
          "Table 4: reflection accuracy LLaMA 51.2 (7B) → 51.8 (13B), Vicuna 51.4 (7B) → 55.2 (13B); ChatGPT 70.2",
          "07_reflection_completion",
          "self-reflection accuracy of the largest models − of the smallest (per question, pooled within a size), "
          "paired", primary="strongest vs weakest", paper_effect=0.6,
          effect_source="Table 4, LLaMA 13B − 7B: 51.8 − 51.2, the smaller of the two same-family gaps",
          planted=_size_gap(), planted_source="Table 4 reflection accuracy of the simulated personas, sizes by their "
          "cards: the 13B ones' mean (51.8, 50.0, 55.2, 60.2) − ChatGLM2-6B's 57.6 (6.2B, the smallest)",
          full_n=PARAMETERS["07"]["n_questions"].default),
)

# What `sim:paper/<persona>` plants for the claims recorded per model, in each claim's unit (`planted.effects`, once per claim): the
# claim's `planted` (or `paper_effect`) is one persona's; a simulated row of another persona should give back its own.
PLANTED_BY_MODEL: dict[str, dict[str, float]] = {c.id: e for c in CLAIMS if (e := planted_effects(c.id))}
CLAIMS = tuple(replace(c, planted_by=tuple(PLANTED_BY_MODEL.get(c.id, {}).items())) for c in CLAIMS)  # per persona


_SET = ClaimSet(CLAIMS)  # the record builders notebooks use; an id of another paper is an error
claim, estimate, untestable, same_as, record = _SET.claim, _SET.estimate, _SET.untestable, _SET.same_as, _SET.record
