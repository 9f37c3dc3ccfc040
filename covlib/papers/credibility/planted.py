"""What the simulated model (`sim:paper`, `sim:null`) plants, as data derived from the paper's tables (`paper.py`).

Per persona (one of the paper's models): the chance that an answer states each key fact with complete, partial and
no references (Table 3; Table 1 for the complete setting) and how it falls as noise references are added (§6.3,
Fig. 3); the answers' precision and citations (Tables 1, 3); how often the model refuses partial and complete
references (Table 4's reflection accuracy and F1); how often its search query names the missing gold paragraph; how
often it states the answer string (Table 2's EM-recall). `sim:null` pools them into one distribution: every
setting, every model and both reflection groups the same. `effects` gives each claim's planted effect per persona,
in the claim's unit: what `sim:paper` should give back (`claims.PLANTED_BY_MODEL`).
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import mean

from covlib.papers.credibility.paper import (PAPER_MODELS, PAPER_RECALL_DROP_5_TO_10, PAPER_TABLE1, PAPER_TABLE2,
                                             PAPER_TABLE3, PAPER_TABLE4)

SETTINGS = ("closed-book", "partial", "complete")  # no gold reference (or none at all), one of the two, both
BASE_REFS = 5  # the references of Tables 1 and 3: the noise drop is counted from here
SHARED = 0.5  # share of a key fact's latent that is the question's own, shared by every arm (the rest is the arm's)


@dataclass(frozen=True)
class Rates:
    """One persona's planted behaviour; shares in [0, 1]."""

    recall: dict[str, float]  # setting -> chance that the answer states each key fact (at BASE_REFS references)
    precision: dict[str, float]  # setting -> share of the answer's sentences that state a key fact
    noise_drop: float  # recall lost, relative, from 5 to 10 references (linear in the references added)
    refuse_partial: float  # self-reflection: refusals with one gold reference missing (true positives)
    refuse_complete: float  # refusals with both gold references present (false positives)
    cite_gold: float  # chance that a key-fact sentence cites its own gold reference (Table 1 CitP)
    says_answer: float  # chance that the answer ends with "So the answer is <gold>." (Table 2 EM-recall)
    query_hits: float  # chance that a self-completion query names the missing gold paragraph


def personas() -> tuple[str, ...]:
    """The paper's models a simulated model can stand for: those of Table 1 (`sim:paper/<name>`)."""
    return tuple(PAPER_TABLE1)


def _settings(persona: str) -> dict[str, tuple[float, float]]:
    """(P, R) per setting in [0, 1]: Table 3's row, else Table 1's complete row scaled by Table 3's mean ratios."""
    if persona in PAPER_TABLE3:
        return {s: (p / 100, r / 100) for s, (p, r) in PAPER_TABLE3[persona].items()}
    p, r = PAPER_TABLE1[persona][:2]
    ratio = {s: [mean(row[s][i] / row["complete"][i] for row in PAPER_TABLE3.values()) for i in (0, 1)]
             for s in SETTINGS}
    return {s: (p / 100 * ratio[s][0], r / 100 * ratio[s][1]) for s in SETTINGS}


def noise_drop(persona: str) -> float:
    """§6.3's relative drop from 5 to 10 references for the persona's family (LLaMA and Llama 2: LLaMA's)."""
    family = (persona if persona in PAPER_RECALL_DROP_5_TO_10 else "Vicuna" if persona.startswith("Vicuna")
              else "LLaMA" if persona.lower().startswith("llama") else None)
    if family is None:
        raise ValueError(f"§6.3 gives no noise drop for {persona!r}")
    return PAPER_RECALL_DROP_5_TO_10[family] / 100


def refusals(persona: str) -> tuple[float, float]:
    """(refusals on partial, on complete references) whose accuracy and F1 on equal groups are Table 4's:
    Acc = (a + 1 - b) / 2 and F1 = 2a / (1 + a + b) give a = F1 (1 - Acc) / (1 - F1), b = a + 1 - 2 Acc."""
    acc, f1 = PAPER_TABLE4[persona][6] / 100, PAPER_TABLE4[persona][7] / 100
    a = min(1.0, f1 * (1 - acc) / (1 - f1))
    return a, min(1.0, max(0.0, a + 1 - 2 * acc))


def says_answer(persona: str) -> float:
    """Table 2's EM-recall of the persona; a model it did not rate gets the rated models' mean."""
    row = PAPER_TABLE2.get(persona)
    return (row[2] if row else mean(v[2] for v in PAPER_TABLE2.values())) / 100


def paper_rates(persona: str) -> Rates:
    """The persona's behaviour from the paper's tables (a name of `personas()`)."""
    if persona not in PAPER_TABLE1:
        raise ValueError(f"no simulated persona {persona!r}: choose one of {', '.join(personas())}")
    table = _settings(persona)
    a, b = refusals(persona)
    return Rates({s: table[s][1] for s in SETTINGS}, {s: table[s][0] for s in SETTINGS}, noise_drop(persona), a, b,
                 PAPER_TABLE1[persona][4] / 100, says_answer(persona), a)


def _pooled(effects: bool) -> Rates:
    """The paper's models (PAPER_MODELS) pooled; without `effects` every setting and reflection group the same."""
    each = [paper_rates(p) for p in PAPER_MODELS]

    def avg(field: str) -> float:
        return mean(getattr(r, field) for r in each)

    by = {k: {s: mean(getattr(r, k)[s] for r in each) for s in SETTINGS} for k in ("recall", "precision")}
    if not effects:
        by = {k: dict.fromkeys(SETTINGS, mean(v.values())) for k, v in by.items()}
        refuse = mean((r.refuse_partial + r.refuse_complete) / 2 for r in each)
        return Rates(by["recall"], by["precision"], 0.0, refuse, refuse, avg("cite_gold"), avg("says_answer"),
                     avg("query_hits"))
    return Rates(by["recall"], by["precision"], avg("noise_drop"), avg("refuse_partial"), avg("refuse_complete"),
                 avg("cite_gold"), avg("says_answer"), avg("query_hits"))


def rates(behaviour: str, persona: str = "") -> Rates:
    """What `sim:<behaviour>/<persona>` plants: the persona's rates (`paper`; no persona: the paper's models
    pooled), or one distribution for every persona, setting and group (`null`)."""
    if behaviour == "null":
        return _pooled(effects=False)
    if behaviour != "paper":
        raise ValueError(f"unknown behaviour {behaviour!r}: paper or null")
    return paper_rates(persona) if persona else _pooled(effects=True)


def recall_at(r: Rates, setting: str, n_refs: int) -> float:
    """The chance of stating each key fact in `setting` with `n_refs` references (noise lowers it linearly)."""
    base = r.recall[setting]
    if setting == "closed-book" or not n_refs:
        return base
    return min(1.0, max(0.0, base * (1 - r.noise_drop * (n_refs - BASE_REFS) / BASE_REFS)))


def effects(claim_id: str) -> dict[str, float]:
    """Per persona, the effect `sim:paper` plants for a per-model claim, in the claim's unit ({} for others)."""
    out = {}
    for p in personas():
        r = paper_rates(p)
        out[p] = {"cred-complete-beats-partial": 100 * (r.recall["complete"] - r.recall["partial"]),
                  "cred-partial-beats-closed": 100 * (r.recall["partial"] - r.recall["closed-book"]),
                  "cred-noise-lowers-recall": 100 * (recall_at(r, "complete", 5) - recall_at(r, "complete", 10)),
                  "cred-reflection-above-chance": 100 * ((r.refuse_partial + 1 - r.refuse_complete) / 2 - 0.5),
                  }.get(claim_id)
    return {p: v for p, v in out.items() if v is not None}
