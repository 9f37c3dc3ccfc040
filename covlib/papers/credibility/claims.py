"""The credibility paper's directional claims, each with the paper's sentence, its numbers, and its headline setting.

Read by the claims ledger (`covlib.runs.claims`); notebooks 04-07 record the estimates.
Quotes are verbatim from the paper's extracted text (`../shared/papers/001_*.txt`).
"""

from __future__ import annotations

from covlib.core.claim import Claim

PAPER = "Credibility"

CLAIMS: tuple[Claim, ...] = (
    Claim("cred-noise-lowers-recall", PAPER,
          "More noise references lower key-fact recall",
          "It's clear that as noise levels in references increased, all models showed a decrease in perfor-",
          "Fig. 3: from 5 to 10 references recall drops by 4.3% (ChatGPT) to about 30% (LLaMA, Vicuna), relative",
          "05_knowledge_precision", "key-fact recall with the fewest references − with the most, paired",
          n_parameter="n_questions"),
    Claim("cred-complete-beats-partial", PAPER,
          "Complete references give higher key-fact recall than partial ones",
          "We examined the impact of knowledge completeness on the LLM outputs in MHQA scenarios.",
          "Table 3: complete R > partial R for every model (e.g. ChatGPT 56.55 vs 35.34)",
          "06_knowledge_recall", "key-fact recall (complete) − (partial), paired", n_parameter="n_questions"),
    Claim("cred-partial-beats-closed", PAPER,
          "Partial references give higher key-fact recall than none (closed book)",
          "We examined the impact of knowledge completeness on the LLM outputs in MHQA scenarios.",
          "Table 3: partial R > closed-book R for 4 of 5 models (ChatGPT 35.34 vs 39.17 is the exception)",
          "06_knowledge_recall", "key-fact recall (partial) − (closed book), paired", n_parameter="n_questions"),
    Claim("cred-self-completion-helps", PAPER,
          "Self-completion raises key-fact F1 over BM25's top 10 for models tuned with RLHF",
          "Models enhanced with techniques like RLHF show self-completion capabilities, allowing them to benefit "
          "from the improved pipeline.",
          "Table 4: ChatGPT F1 42.66 → 48.18, ChatGLM2-6B 25.84 → 30.41; weak models do not gain",
          "07_reflection_completion", "key-fact F1 with self-completion − with BM25 top 10, paired",
          about="models tuned with RLHF", n_parameter="n_questions"),
    Claim("cred-reflection-tracks-strength", PAPER,
          "Self-reflection accuracy grows with model strength",
          "As the models become more powerful, their self-reflection capability seems to improve.",
          "Table 4: reflection accuracy 50.0-51.8 for LLaMA models, 70.2 for ChatGPT",
          "07_reflection_completion", "needs two or more models of known strength", n_parameter="n_questions"),
    Claim("cred-human-correlation", PAPER,
          "Key-fact precision and recall correlate with human ratings better than EM-recall",
          "While there's only a moderate correlation of 0.54 between human evaluations and the \"EM recall\" metric, "
          "our key-factsfocused evaluation method shows a much more consistent alignment with human feedback, with "
          "coefficients exceeding 0.87 for precision and 0.88 for r",
          "Table 2: Pearson over 5 models, P 0.87, R 0.88, EM-recall 0.54",
          "04_credibility_models", "needs human ratings of the answers"),
)
