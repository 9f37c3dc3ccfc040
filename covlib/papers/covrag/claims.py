"""CoV-RAG's directional claims, each with the paper's sentence, its numbers, and its headline setting.

Read by the claims ledger (`covlib.runs.claims`); notebooks 08-11 record the estimates.
Quotes are verbatim from the paper's extracted text (`../shared/papers/000_*.txt`).
"""

from __future__ import annotations

from covlib.core.claim import Claim

PAPER = "CoV-RAG"

CLAIMS: tuple[Claim, ...] = (
    Claim("covrag-multi-round-beats-single", PAPER,
          "Multi-round CoV-RAG is more accurate than a single round (CoV-RAG-S)",
          "Consistently across all models, CoV-RAG (green bars) demonstrates superior performance, followed by "
          "CoV-RAG-S (orange bars), while WebGLM (sky blue bars) performs less effectively.",
          "Fig. 3 / Table 4: multi 63.6-67.3 vs single 62.5-65.8",
          "09_covrag_iterations", "accuracy (multi round) − (single round), paired", primary="NQ",
          paper_effect=1.5, effect_source="Table 4 w/ CoL: 67.3 − 65.8", n_parameter="n_per_dataset"),
    Claim("covrag-revision-raises-ref-acc", PAPER,
          "Verifier-guided query revision raises reference accuracy",
          "This suggests that multi-iteration retrieval can more effectively gain correct and factual contextual "
          "knowledge for generator to answer.",
          "Table 5: NQ 65.0 → 66.8 (Bing), 69.3 → 71.3 (Chrome); WebQ 69.8 → 71.0, 76.0 → 76.0",
          "09_covrag_iterations", "reference accuracy after revision − before, paired", primary="NQ",
          paper_effect=2.0, effect_source="Table 5, NQ, Chrome: 71.3 − 69.3", n_parameter="n_per_dataset"),
    Claim("covrag-col-beats-no-col", PAPER,
          "Verification training with the chain of scores (w/ CoL) beats it without (w/o CoL)",
          "The results in Ta-376 ble 4 showed that chain of verification (w/ CoL), 377 surpassed the one without "
          "chain mechanism (w/o CoL) in most key evaluation metrics.",
          "Table 4: Jdg 60.0 vs 56.0, Si 65.8 vs 62.5, Mi 67.3 vs 63.6, Dlt 2.5 vs 0.9",
          "10_covrag_finetune", "accuracy (w/ CoL adapter) − (w/o CoL adapter), paired over test questions",
          n_parameter="n_test"),
)
