"""A paper's directional claim as plain data: its sentence, its evidence, where we test it, its headline setting.

Each paper package declares its claims (`covlib.papers.<paper>.claims.CLAIMS`) and records its
notebooks' estimates with that module's `estimate` / `untestable` / `same_as` / `record` (a
`ClaimSet`); the claims ledger (`covlib.report.claims`) reads them with the estimates recorded. Declared
before any run, so that the verdict comes from one pre-declared comparison: `primary` names the
paper's headline setting, every other scope a notebook records is a secondary row.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

SIM_LABEL = "simulated (planted effects)"  # how every simulated model's name reads (`covlib.generation.simulated`)


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
    full_n: int | None = None  # the questions `full` runs: its notebook's declared default (per dataset: a record may
    # say `pooled=<datasets>`; `available=<n>` when the data holds fewer)
    planted: float | None = None  # what the simulated model `sim:paper` plants, in our unit (None: paper_effect;
    # NaN: nothing in this unit, `planted_source` says why)
    planted_source: str = ""  # where `planted` comes from in the paper, when it is not paper_effect
    planted_by: tuple[tuple[str, float], ...] = ()  # (persona, effect) where a claim recorded per model plants each
    # persona its own effect (the paper's number for that model); a persona not listed plants `planted_effect`
    about: str = ""  # a conditional claim: whom it is about (outside it: "not testable here")
    untestable: str = ""  # why no run here can test it (with notebook="")

    @property
    def planted_effect(self) -> tuple[float | None, str]:
        """(the effect `sim:paper` plants at the primary setting in our unit, its source in the paper), None if none."""
        if self.planted is not None:
            return (None if math.isnan(self.planted) else self.planted), self.planted_source
        return self.paper_effect, self.effect_source

    def planted_for(self, model: Any) -> float | None:
        """The effect `sim:paper` plants in the row of `model` (a simulated model's name: '<persona>, simulated ...')."""
        persona = str(model or "").split(f", {SIM_LABEL}")[0] if SIM_LABEL in str(model or "") else ""
        return {k.lower(): v for k, v in self.planted_by}.get(persona.lower(), self.planted_effect[0])  # 13B is 13b

    def planted_row(self, row: dict[str, Any]) -> dict[str, Any]:
        """Of a ledger row: its model's simulated behaviour, and for a simulated primary row the effect planted
        (`sim:null` plants none: 0) and whether its 95% interval ("low", "high") holds it (None for a row no test
        decided: "not testable here")."""
        behaviour = simulated_behaviour(row.get("model"))
        if behaviour is None or row.get("role") != "primary":
            return {"simulated": behaviour}
        effect = 0.0 if behaviour == "null" else self.planted_for(row["model"])
        low, high = (row.get(k) if isinstance(row.get(k), (int, float)) else math.nan for k in ("low", "high"))
        tested = row.get("verdict") != "not testable here" and not row.get("near_oracle")  # near-oracle: no verdict
        covers = low <= effect <= high if effect is not None and tested and math.isfinite(low + high) else None
        return {"simulated": behaviour, "planted": effect, "covers": covers}

    def is_primary(self, scope: str) -> bool:
        """Whether a recorded scope is this claim's headline setting ('' declares the first recorded one)."""
        want = [f.strip() for f in self.primary.split(",") if f.strip()]
        have = [f.strip() for f in scope.split(",")]
        return have[:len(want)] == want


def simulated_behaviour(model: Any) -> str | None:
    """The behaviour ('paper', 'null') of a simulated model from the name its rows carry; None for a language model."""
    found = re.search(re.escape(SIM_LABEL) + r", (\w+)", str(model or ""))
    return found.group(1) if found else None


_STAT_KEYS = ("value", "low", "high", "n", "p", "test")


class ClaimSet:
    """A paper's claims and the record builders its notebooks use (an unknown claim id is an error naming the ids)."""

    def __init__(self, claims: tuple[Claim, ...]):
        self.claims = tuple(claims)
        self._by_id = {c.id: c for c in self.claims}

    def claim(self, claim_id: str) -> Claim:
        """The claim with this id."""
        if claim_id not in self._by_id:
            raise KeyError(f"unknown claim {claim_id!r}; claims are {sorted(self._by_id)}")
        return self._by_id[claim_id]

    def estimate(self, claim_id: str, scope: str, est: dict[str, Any], unit: str, **meta: Any) -> dict[str, Any]:
        """One recorded estimate: a `covlib.core.stats` result (with its p and test) plus scope, unit and meta."""
        self.claim(claim_id)
        missing = set(_STAT_KEYS) - set(est)
        if missing:
            raise ValueError(f"estimate of {claim_id!r} lacks {sorted(missing)}: use a test of covlib.core.stats")
        return {"claim": claim_id, "scope": scope, "unit": unit, **est, **meta}

    def untestable(self, claim_id: str, reason: str, scope: str = "", **meta: Any) -> dict[str, Any]:
        """A record saying this run cannot test the claim in this scope, and why (with the counts that show it)."""
        self.claim(claim_id)
        return {"claim": claim_id, "scope": scope, "untestable": reason, **meta}

    def same_as(self, claim_id: str, scope: str, est: dict[str, Any], unit: str, other_id: str, other_scope: str,
                **meta: Any) -> dict[str, Any]:
        """An estimate that is the same comparison, on the same questions, as another claim's row: counted there."""
        self.claim(other_id)
        return {**self.estimate(claim_id, scope, est, unit, **meta), "same_as": [other_id, other_scope]}

    def record(self, comparison: dict[str, Any], **meta: Any) -> dict[str, Any]:
        """The record of a comparison {"claim", "scope", "est", "unit"} or {"claim", "scope", "untestable"} (other
        keys, such as near_oracle, kept; `meta` wins)."""
        extra = {k: v for k, v in comparison.items() if k not in ("claim", "scope", "est", "unit", "untestable")}
        if "untestable" in comparison:
            return self.untestable(comparison["claim"], comparison["untestable"], scope=comparison["scope"],
                                   **{**extra, **meta})
        return self.estimate(comparison["claim"], comparison["scope"], comparison["est"], comparison["unit"],
                             **{**extra, **meta})
