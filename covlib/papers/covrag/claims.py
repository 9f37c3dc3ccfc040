"""CoV-RAG's directional claims, each with the paper's sentence, its numbers, and its headline setting.

Read by the claims ledger (`covlib.report.claims`); notebooks 09-11 record the estimates.
Quotes are verbatim from the paper's extracted text (`../shared/papers/000_*.txt`).

Beside the claims, what decides whether a run can test them (a comparison whose step never ran is
"not testable here" with the count that shows it, not an estimate of 0): `no_revision` (σ never
re-retrieved) and `revision_comparison` (notebook 09's two claims), `judged_by_both` (Jdg on the
questions both verifiers judged), `finetune_comparisons` (notebook 10: Table 4's w/ CoL against w/o
CoL, primary and secondary scopes, CoV-RAG and CoV-RAG-S against the QA-only model), `table3_comparisons`
and `ranking_untestable` (notebook 11: Table 3, and why not without GPT-4). Each comparison is
{"claim", "scope", "est", "unit"} (`est` a `covlib.core.stats` test result) or {"claim", "scope",
"untestable"}, as this module's `record` takes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from covlib.core import stats
from covlib.core.claim import Claim, ClaimSet
from covlib.papers.covrag.method import CovRagRecord
from covlib.papers.covrag.metrics import question_flags
from covlib.papers.covrag.paper import PAPER_MODELS, PAPER_TABLE2, PAPER_TABLE4
from covlib.papers.covrag.parameters import PARAMETERS
from covlib.papers.covrag.training import M1, WITH_COL, WITHOUT_COL

PAPER = "CoV-RAG"


def _over_webglm(persona: str, less: float = 0.0) -> float:
    """Table 2, NQ+WebQ: the persona's CoV-RAG − WebGLM accuracy (points), less `less` (a planted variant's own)."""
    mean = {m: (PAPER_TABLE2[(m, persona)]["NQ"] + PAPER_TABLE2[(m, persona)]["WebQ"]) / 2
            for m in ("CoV-RAG", "WebGLM")}
    return round(mean["CoV-RAG"] - mean["WebGLM"] - less, 2)


_T4_GAIN = PAPER_TABLE4["w/ CoL"]["Mi"] - PAPER_TABLE4["w/ CoL"]["Si"]  # multi − single, w/ CoL (1.5)


def _by_persona(less: float = 0.0) -> tuple[tuple[str, float], ...]:
    """`Claim.planted_by` of notebook 10's Table 2 claims, for a run as `sim:paper/<persona>` (bare: Llama2-13b)."""
    return tuple((persona, _over_webglm(persona, less)) for persona in PAPER_MODELS)
FIG3 = ("Consistently across all models, CoV-RAG (green bars) demonstrates superior performance, followed by "
        "CoV-RAG-S (orange bars), while WebGLM (sky blue bars) performs less effectively.")

CLAIMS: tuple[Claim, ...] = (
    Claim("covrag-beats-qa-only", PAPER,
          "CoV-RAG (multi-iteration) answers more accurately than the same backbone trained on QA alone (WebGLM)",
          "When compared to the state-of-the-art WebGLM method with identical model configurations (including "
          "Llama2-13b, Vicuna-13b, and ChatGLM2-6b), CoV-RAG's Chain of Verification mechanism facilitated higher "
          "accuracy rates.",
          "Table 2, NQ / WebQ accuracy: Llama2-13b 66.0 / 68.5 vs WebGLM 62.8 / 68.3; Vicuna-13b 63.5 / 69.3 vs "
          "59.5 / 67.5; ChatGLM2-6b 59.8 / 68.8 vs 59.3 / 67.0 (averages over four datasets 70.0 vs 68.1, 69.1 vs "
          "65.3, 66.4 vs 65.1)",
          "10_covrag_finetune", "multi-iteration accuracy (w/ CoL adapter) − accuracy of the QA-only adapter, paired "
          "over the test questions", primary="multi-iteration accuracy", paper_effect=1.7,
          effect_source="Table 2 Llama2-13b, NQ+WebQ: (66.0 + 68.5) / 2 − (62.8 + 68.3) / 2", full_n=PARAMETERS["10"]["n_test"].default,
          planted_by=_by_persona()),
    Claim("covrag-multi-round-beats-single", PAPER,
          "Multi-round CoV-RAG is more accurate than a single round (CoV-RAG-S)",
          FIG3,
          "Fig. 3 (bars, per model and dataset); Table 4 w/ CoL: Mi 67.3 vs Si 65.8, w/o CoL: 63.6 vs 62.5",
          "09_covrag_iterations", "accuracy (multi round) − (single round), paired", primary="NQ",
          paper_effect=1.5, effect_source="Table 4 w/ CoL: 67.3 − 65.8", full_n=PARAMETERS["09"]["n_per_dataset"].default),
    Claim("covrag-revision-raises-ref-acc", PAPER,
          "Verifier-guided query revision raises reference accuracy",
          "In summary, CoV-RAG led to an improvement in retrieval accuracy on both datasets and retrieval tools.",
          "Table 5: NQ 65.0 → 66.8 (Bing), 69.3 → 71.3 (Chrome); WebQ 69.8 → 71.0, 76.0 → 76.0",
          "09_covrag_iterations", "reference accuracy after revision − before, paired", primary="NQ",
          paper_effect=2.0, effect_source="Table 5, NQ, Chrome: 71.3 − 69.3", full_n=PARAMETERS["09"]["n_per_dataset"].default),
    Claim("covrag-col-beats-no-col", PAPER,
          "Verification training with the chain of scores (w/ CoL) gives more accurate multi-iteration answers than "
          "training without it (w/o CoL)",
          "The verification group with chain of thinking demonstrated superior performance over the group without "
          "chain of thinking.",
          "Table 4: Mi 67.3 vs 63.6, Si 65.8 vs 62.5, Jdg 60.0 vs 56.0, Dlt 2.5 vs 0.9 (Fmt 99.5 vs 99.8 goes the "
          "other way: 'in most key evaluation metrics', §4.3)",
          "10_covrag_finetune", "accuracy (w/ CoL adapter) − (w/o CoL adapter), paired over the test questions; "
          "secondary: Si, Jdg on the questions both judged, Dlt",
          primary="multi-iteration accuracy", paper_effect=3.7, effect_source="Table 4 Mi: 67.3 − 63.6",
          full_n=PARAMETERS["10"]["n_test"].default),
    Claim("covrag-s-beats-qa-only", PAPER,
          "At one iteration, the verification-trained model (CoV-RAG-S) answers more accurately than the same "
          "backbone trained on QA alone (WebGLM-like)",
          FIG3,
          "Fig. 3 (bars only, no numbers); Table 2 Llama2-13b over NQ+WebQ: CoV-RAG 67.25 vs WebGLM 65.55, and "
          "Fig. 3 puts CoV-RAG-S between them",
          "10_covrag_finetune", "single-iteration accuracy (w/ CoL adapter) − (QA-only adapter), paired over the "
          "test questions", primary="single-iteration accuracy", paper_effect=1.7,
          effect_source="at most: Table 2 Llama2-13b, NQ+WebQ, CoV-RAG − WebGLM (67.25 − 65.55), so the n is a "
                        "lower bound", full_n=PARAMETERS["10"]["n_test"].default,
          planted=_over_webglm("Llama2-13b", less=_T4_GAIN), planted_by=_by_persona(less=_T4_GAIN),
          planted_source="Table 2 Llama2-13b NQ+WebQ CoV-RAG − WebGLM (1.7) less Table 4's w/ CoL multi − single "
                         "gain (67.3 − 65.8 = 1.5): CoV-RAG-S 65.75 vs WebGLM 65.55"),
    Claim("covrag-gpt4-ranking", PAPER,
          "An LLM judge (GPT-4 in the paper) ranks CoV-RAG's answers above the QA-only (WebGLM) system's on "
          "correctness, truthfulness and citation accuracy",
          "As depicted in Table 3, our method surpasses other methods in all dimensions, which underscores the "
          "effectiveness of our structure and training methodology.",
          "Table 3 (mean rank, lower is better): Correct 1.20 (CoV-RAG) vs 1.25 / 1.34 (WebGLM-13b / -10b); Truthful "
          "1.15 vs 1.17 / 1.22; Citation 1.50 (CoV-RAG-S) vs 1.90 / 1.51",
          "11_covrag_judge", "mean rank (QA-only system) − mean rank (CoV-RAG), paired per question (> 0: CoV-RAG "
          "ranked better)", primary="Correctness", paper_effect=0.05,
          effect_source="Table 3 Correct: WebGLM-13b 1.25 − CoV-RAG 1.20 (the paper ranks 4 systems, ours 3)",
          full_n=PARAMETERS["11"]["n_per_dataset"].default),
)


# --------------------------------------------------------------------------- when a run can test them


def _parsed(records: Sequence[CovRagRecord]) -> int:
    return sum(1 for r in records if r.rounds[0].verification is not None and r.rounds[0].verification.parsed)


def no_revision(records: Sequence[CovRagRecord], consequence: str = "the multi-round run is the single-round run"
                ) -> str | None:
    """Why nothing about re-retrieval can be tested on these records (no question was re-retrieved), else None.

    The reason gives the counts that show it: how often σ fired and how many verifications parsed.
    """
    n = len(records)
    if n and any(len(r.rounds) > 1 for r in records):
        return None
    fired = sum(r.rounds[0].fired for r in records)
    why = f"σ fired on {fired} of {n} questions (the verifier's output parsed on {_parsed(records)} of {n})"
    if fired:
        why += " and no question was re-retrieved (max_rounds=0)"
    return f"{why}: {consequence}"


def _comparison(claim_id: str, scope: str, est: dict[str, Any] | None, unit: str, why: str | None = None,
                **extra: Any) -> dict[str, Any]:
    if why:
        return {"claim": claim_id, "scope": scope, "untestable": why, **extra}
    return {"claim": claim_id, "scope": scope, "est": est, "unit": unit, **extra}


def revision_comparison(claim_id: str, scope: str, records: Sequence[CovRagRecord], after: Sequence[float],
                        before: Sequence[float], unit: str,
                        consequence: str = "the multi-round run is the single-round run", scale: float = 100.0,
                        seed: int = 0) -> dict[str, Any]:
    """after − before on the same questions (`stats.paired_difference`), or "untestable" when no question of
    `records` was re-retrieved (`no_revision`, with the counts): then the comparison is of a run with itself."""
    why = no_revision(records, consequence)
    est = None if why else stats.paired_difference(after, before, scale=scale, seed=seed)
    return _comparison(claim_id, scope, est, unit, why)


def judged_by_both(a: dict[str, Sequence[float]], b: dict[str, Sequence[float]], names: tuple[str, str]
                   ) -> tuple[np.ndarray, np.ndarray, str | None]:
    """Judgment accuracy (0/1) of two verifiers on the questions both judged true/false (`question_flags`'
    `judgment_judged`), and why none is left (the counts per side) or None."""
    x = np.asarray(a["judgment_judged"], dtype=np.float64)
    y = np.asarray(b["judgment_judged"], dtype=np.float64)
    both = np.isfinite(x) & np.isfinite(y)
    if both.any():
        return x[both], y[both], None
    counts = ", ".join(f"{name} {int(np.isfinite(v).sum())} of {v.size}" for name, v in zip(names, (x, y)))
    return x[both], y[both], f"no question was judged true/false by both verifiers ({counts}): no judgment to compare"


def _gain(flags: dict[str, Sequence[float]]) -> np.ndarray:
    return np.asarray(flags["reference_multi"], dtype=np.float64) - np.asarray(flags["reference_single"],
                                                                                dtype=np.float64)


def _fired(records: Sequence[CovRagRecord]) -> int:
    return sum(r.rounds[0].fired for r in records)


def finetune_comparisons(records_of: dict[str, Sequence[CovRagRecord]], tested: str, scale: float = 100.0,
                         seed: int = 0) -> list[dict[str, Any]]:
    """Notebook 10's claims, paired over the same test questions, each scope "<measure>, `tested`", with "baseline"
    (the variant compared against). `covrag-col-beats-no-col` (Table 4, w/ CoL − w/o CoL): multi-iteration
    accuracy (the primary), single-iteration accuracy, judgment accuracy on the questions both judged, Dlt (the
    gain in reference accuracy from re-retrieval); when M1 (QA only) ran, `covrag-beats-qa-only` (Table 2, the
    paper's headline: the w/ CoL adapter's multi-iteration accuracy − M1's; not testable when σ never re-retrieved)
    and `covrag-s-beats-qa-only` (Fig. 3: its single-iteration accuracy − M1's). `records_of`: per variant (`training.VARIANTS`)."""
    with_col, without_col = records_of[WITH_COL], records_of[WITHOUT_COL]
    for name, other in records_of.items():
        if [r.id for r in other] != [r.id for r in with_col]:
            raise ValueError(f"{name}: every variant's records must be on the same questions, in the same order")
    a, b, n = question_flags(with_col), question_flags(without_col), len(with_col)
    neither = no_revision(with_col, "") and no_revision(without_col, "")
    fired = f"σ fired on {_fired(with_col)} (w/ CoL) and {_fired(without_col)} (w/o CoL) of {n} questions"

    def col(measure: str, est: dict[str, Any] | None, unit: str, why: str | None = None) -> dict[str, Any]:
        return _comparison("covrag-col-beats-no-col", f"{measure}, {tested}", est, unit, why, baseline=WITHOUT_COL)

    accuracy = "accuracy points"
    # σ never fired for either adapter: the multi-iteration run is the single-iteration one (item 11a), and
    # its comparison would be the single-iteration row counted twice
    out = [col("multi-iteration accuracy",
               None if neither else stats.paired_difference(a["multi"], b["multi"], scale=scale, seed=seed), accuracy,
               f"{fired}, none re-retrieved: the multi-iteration run is the single-iteration run" if neither else None),
           col("single-iteration accuracy", stats.paired_difference(a["single"], b["single"], scale=scale, seed=seed),
               accuracy)]
    x, y, why = judged_by_both(a, b, ("w/ CoL", "w/o CoL"))
    jdg = None if why else {**stats.paired_difference(x, y, scale=scale, seed=seed),
                            "note": f"{x.size} of {n} questions judged true/false by both (Jdg without the format rate)"}
    out.append(col("judgment accuracy on the questions both judged", jdg, "judgment-accuracy points", why))
    out.append(col("Dlt", None if neither else stats.paired_difference(_gain(a), _gain(b), scale=scale, seed=seed),
                   "reference-accuracy points (ours: a gold alias in the top-k)",
                   f"{fired}, none re-retrieved: Dlt is 0 for both by construction" if neither else None))
    if M1 in records_of:
        m1 = question_flags(records_of[M1])
        why = no_revision(with_col, "the multi-iteration run is the single-iteration one, so this is "
                                    "covrag-s-beats-qa-only's comparison")
        out.append(_comparison("covrag-beats-qa-only", f"multi-iteration accuracy, {tested}",
                               None if why else stats.paired_difference(a["multi"], m1["single"], scale=scale,
                                                                        seed=seed), accuracy, why, baseline=M1))
        out.append(_comparison("covrag-s-beats-qa-only", f"single-iteration accuracy, {tested}",
                               stats.paired_difference(a["single"], m1["single"], scale=scale, seed=seed), accuracy,
                               baseline=M1))
    return out


def ranking_untestable(judge: str, stand_in: bool, ranked: int, n: int) -> str | None:
    """Why Table 3's ranking claim cannot be tested with this judge, or None: the offline stand-in is not the
    paper's judge (GPT-4), and a judge that finished no ranking ranked nothing."""
    if stand_in:
        return (f"the claim is GPT-4's ranking; the judge here is the offline stand-in {judge} (not GPT-4), which "
                f"ranked {ranked} of {n} questions completely: its ranks say nothing about GPT-4's (give `ranker` a "
                "strong instruct model)")
    if ranked == 0:
        return f"the judge {judge} finished no ranking of the {n} questions (0 parsed)"
    return None


TABLE3_COMPARISONS = {  # criterion -> (our system standing for the paper's row, that row); Table 3 has no
    "Correctness": ("CoV, multi-iteration", "CoV-RAG"),  # citation rank for CoV-RAG, so citation compares CoV-RAG-S
    "Truthfulness": ("CoV, multi-iteration", "CoV-RAG"),
    "Citation Accuracy": ("CoV, single iteration", "CoV-RAG-S"),
}


def table3_comparisons(per_question: dict[str, dict[str, Sequence[float]]], ranked: dict[str, int], judge: str,
                       stand_in: bool, n: int, other: str = "RAG", seed: int = 0) -> list[dict[str, Any]]:
    """`covrag-gpt4-ranking` per criterion (Correctness first, the primary): the other system's rank minus
    CoV-RAG's on each question the judge ranked completely (`rank_values`; > 0: CoV-RAG ranked better), or
    "untestable" (`ranking_untestable`). `ranked`: per criterion, the questions ranked completely."""
    out = []
    for criterion, (system, paper_row) in TABLE3_COMPARISONS.items():
        why = ranking_untestable(judge, stand_in, ranked.get(criterion, 0), n)
        est = None if why else stats.paired_difference(per_question[criterion][other], per_question[criterion][system],
                                                       seed=seed)
        out.append(_comparison("covrag-gpt4-ranking", f"{criterion}, {paper_row} ({system}) vs {other}, judge {judge}",
                               est, "mean rank (lower is better; ranks among the systems shown)", why))
    return out


_SET = ClaimSet(CLAIMS)  # the record builders notebooks use; an id of another paper is an error
claim, estimate, untestable, same_as, record = _SET.claim, _SET.estimate, _SET.untestable, _SET.same_as, _SET.record
