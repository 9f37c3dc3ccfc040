"""A paper's directional claim as plain data: its sentence, its evidence, where we test it, its headline setting.

Each paper package declares its claims (`covlib.papers.<paper>.claims.CLAIMS`); the claims
ledger (`covlib.runs.claims`) reads them with the estimates the notebooks recorded. Declared
before any run, so that the verdict comes from one pre-declared comparison: `primary` names the
paper's headline setting, every other scope a notebook records is a secondary row.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Claim:
    """One directional claim of a paper, the paper's own sentence and numbers, and where this project tests it."""

    id: str
    paper: str  # "Verify-and-Edit", "Credibility", "CoV-RAG"
    text: str  # the claim, stated strictly, in the paper's terms
    quote: str  # the paper's own sentence, verbatim (the extracted text's spelling)
    evidence: str  # the paper's numbers and where they are
    notebook: str  # the results file (notebook name) that records our estimate; "" when no run here can
    measure: str  # what our estimate is, oriented so that the claim says > 0
    primary: str = ""  # the headline setting: the leading ", "-separated fields of the primary scope
    paper_effect: float | None = None  # the paper's effect at the primary setting, in our unit (for power)
    effect_source: str = ""  # where paper_effect comes from
    n_parameter: str = ""  # the notebook parameter whose default is the number of questions `full` runs
    about: str = ""  # a conditional claim: whom it is about (outside it: "not testable here")
    untestable: str = ""  # why no run here can test it (with notebook="")

    def is_primary(self, scope: str) -> bool:
        """Whether a recorded scope is this claim's headline setting ('' declares the first recorded one)."""
        want = [f.strip() for f in self.primary.split(",") if f.strip()]
        have = [f.strip() for f in scope.split(",")]
        return have[:len(want)] == want
