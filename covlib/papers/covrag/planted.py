"""What the simulated model plants in notebooks 08-11, as data: per behaviour, persona and trained variant, the rates
`simulation` answers by, derived from the paper's tables (`paper.PAPER_TABLE2-4`) and the claims' planted effects.

A *role* is what one simulated model is in the notebooks: the CoV-RAG model (w/ CoL: notebooks 08-09's model, the
`qa-verify-chain` adapter of 10-11), the w/o CoL adapter (`qa-verify-no-chain`), or the QA-only model (M1, the
`qa-only` adapter, and notebook 10's untuned base). `sim:paper` per role: accuracy after one round from Table 2 (the
persona's CoV-RAG or WebGLM row), the multi − single gain and the references' gain from revision (the claims', or
Table 4's w/o CoL row), judgment accuracy and format rate (Table 4). `sim:null`: one accuracy for every role and
persona, judgments independent of correctness, no gain anywhere. Rates marked "ours" are not in the paper.
"""

from __future__ import annotations

from dataclasses import dataclass

from covlib.papers.covrag.claims import TABLE3_COMPARISONS, claim
from covlib.papers.covrag.paper import PAPER_DATASETS, PAPER_TABLE2, PAPER_TABLE3, PAPER_TABLE4
from covlib.papers.covrag.training import VARIANTS, WITH_COL, WITHOUT_COL, M1

DEFAULT_PERSONA = "Llama2-13b"  # a bare sim:paper outside notebook 09: Table 4's w/ CoL Mi (67.3) is its NQ+WebQ 67.25
JUDGE_PERSONA = "GPT-4"  # the ranker notebook 11 uses when the answering model is simulated (the paper's judge)
CHURN = 0.2  # ours: share of questions whose outcome a variant draws on its own (the rest share one latent), so two
# variants disagree on some questions both ways, as real models do; the paper reports no per-question agreement
SIGMA_ON_WRONG = 0.5  # ours: σ fires on this share of the wrong answers whose references lack the gold (paper: none)
SIGMA_NULL = 0.2  # ours, sim:null: σ fires on this share of all answers, whatever their correctness
FMT_NULL = 99.5  # sim:null: every variant's format rate (Table 4's w/ CoL Fmt)
RANK_NOISE = 0.1  # ours: share of questions on which the judge ranks the QA-only answer above CoV-RAG's (reversed)
CLOSED_BOOK_ROWS = (("GPT-3", "text-davinci-003"), ("ChatGPT", "gpt-3.5-turbo-16k"))  # Table 2's LLMs without
# retrieval: a question's closed-book accuracy is the first row's, else (no number) the second's
COV, NO_COL, QA_ONLY = WITH_COL, WITHOUT_COL, M1


@dataclass(frozen=True)
class Role:
    """What one simulated model does: accuracy (fraction) per dataset, gains, its verifier, its answers' style."""

    name: str  # COV, NO_COL or QA_ONLY (the key of its own per-question draws)
    multi: dict[str, float]  # dataset -> share right after one round of revision (max_rounds=1)
    gain: float  # multi − single, a share of all questions
    ref_gain: float  # the references' gain from revision (a gold alias in the top-k), a share of all questions
    jdg: float | None  # judgment accuracy; None: writes no verification JSON (sim:paper's QA-only model)
    fmt: float  # share of verifications written well-formed (the rest in a code fence: parsed after a repair)
    chain: bool  # writes the chain of scores (w/ CoL)
    style: str  # how its answers open ("The answer is "), so that two variants never write the same text
    null: bool  # sim:null: judgments and σ independent of correctness, re-answers fresh draws

    def single(self, dataset: str) -> float:
        """The share right at the first answer."""
        return self.multi_at(dataset) - self.gain

    def multi_at(self, dataset: str) -> float:
        """`multi` for a dataset, the mean over the known ones for another (the training questions)."""
        return self.multi.get(dataset, sum(self.multi.values()) / len(self.multi))


def _row(method: str, persona: str) -> dict[str, float]:
    row = PAPER_TABLE2[(method, persona)]
    return {d: row[d] / 100 for d in PAPER_DATASETS if row[d] is not None}


def effect(claim_id: str) -> float:
    """A claim's planted effect (`Claim.planted_effect`), in its unit: points of accuracy or of mean rank."""
    value = claim(claim_id).planted_effect[0]
    if value is None:
        raise ValueError(f"{claim_id} declares no planted effect")
    return value


def closed_book(dataset: str) -> float:
    """sim:paper's closed-book accuracy (fraction): Table 2's first LLM row with a number for the dataset."""
    for row in CLOSED_BOOK_ROWS:
        value = PAPER_TABLE2[row].get(dataset)
        if value is not None:
            return value / 100
    return sum(_row(*CLOSED_BOOK_ROWS[0]).values()) / len(_row(*CLOSED_BOOK_ROWS[0]))


def role_of(variant: str, notebook: str) -> str:
    """The role of a simulated model from its adapter folder's name (`10-<profile>-<slug>`, `training.VARIANTS`) and
    the notebook it runs in: no adapter is the CoV-RAG model, except notebook 10's untuned base (QA-only)."""
    if not variant:
        return QA_ONLY if notebook.startswith("10_") else COV
    for name, slug in sorted(VARIANTS.items(), key=lambda item: -len(item[1])):  # "qa-verify-no-chain" first
        if variant.endswith(slug):
            return name
    raise ValueError(f"{variant!r}: no planted variant of that name; a simulated model's adapter folder ends with one "
                     f"of {', '.join(VARIANTS.values())} (notebook 10's names)")


def role(behaviour: str, persona: str, variant: str = "", notebook: str = "") -> Role:
    """What `sim:<behaviour>/<persona>` with this adapter does in this notebook (no persona, or the ranker's:
    `DEFAULT_PERSONA`'s rates; a persona Table 2 does not name is an error)."""
    name = role_of(variant, notebook)
    personas = {m.lower(): m for s, m in PAPER_TABLE2 if s == "CoV-RAG"}  # Vicuna-13B (credibility's) is Vicuna-13b
    if persona.lower() not in ("", JUDGE_PERSONA.lower(), *personas):
        raise ValueError(f"no simulated CoV-RAG persona {persona!r}: choose one of {', '.join(personas.values())} "
                         "(Table 2)")
    persona = personas.get(persona.lower(), DEFAULT_PERSONA)
    if behaviour == "null":
        return Role(name, _row("WebGLM", DEFAULT_PERSONA), 0.0, 0.0, None, FMT_NULL / 100, name != NO_COL,
                    _STYLE[name], True)
    if name == QA_ONLY:
        return Role(name, _row("WebGLM", persona), 0.0, 0.0, None, 0.0, True, _STYLE[name], False)
    cov = _row("CoV-RAG", persona)
    if name == COV:
        t4 = PAPER_TABLE4["w/ CoL"]
        return Role(name, cov, effect("covrag-multi-round-beats-single") / 100,
                    effect("covrag-revision-raises-ref-acc") / 100, t4["Jdg"] / 100, t4["Fmt"] / 100, True,
                    _STYLE[name], False)
    t4, drop = PAPER_TABLE4["w/o CoL"], effect("covrag-col-beats-no-col") / 100
    return Role(name, {d: v - drop for d, v in cov.items()}, (t4["Mi"] - t4["Si"]) / 100, t4["Dlt"] / 100,
                t4["Jdg"] / 100, t4["Fmt"] / 100, False, _STYLE[name], False)


_STYLE = {COV: "The answer is ", NO_COL: "Answer: ", QA_ONLY: ""}


def rank_effects(behaviour: str) -> dict[str, float]:
    """Per criterion of Table 16, the planted mean-rank difference (QA-only system − CoV-RAG; > 0: CoV-RAG ranked
    better): Table 3's WebGLM-13b row minus the row each of ours stands for (`claims.TABLE3_COMPARISONS`); 0 for
    Conciseness (Table 3 has none) and everywhere under sim:null."""
    out = {"Conciseness": 0.0}
    for criterion, (_, paper_row) in TABLE3_COMPARISONS.items():
        out[criterion] = 0.0 if behaviour == "null" else round(
            PAPER_TABLE3["WebGLM-13b"][criterion] - PAPER_TABLE3[paper_row][criterion], 4)
    return out
