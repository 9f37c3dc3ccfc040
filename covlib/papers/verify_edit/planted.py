"""What the simulated model (`sim:paper`, `sim:null`) plants for Verify-and-Edit, derived from the paper's tables.

Per question a latent *type* and a few answer *slots* (the gold answer, wrong candidates; FEVER: its three labels).
Each sampled CoT path states slot j with the type's share (`SHARES`; the last share is a path that never says "The
answer is"), so CoT-SC's vote, its consistency (majority, Wang's score on [0, n]) and its correctness follow:

| type   | its paths                                        | in Fig. 2                                  |
|--------|--------------------------------------------------|--------------------------------------------|
| knows  | the gold answer on 70%                           | correct, high consistency                  |
| unsure | five wrong answers 10% each, 45% no answer       | wrong, low consistency                     |
| misled | one wrong answer on 93%                          | the few wrong ones with high consistency   |

`misled` is `MISLED` of the questions not known; the share of `knows` is solved so that CoT-SC's vote is right as
often as the paper's CoT-SC row (Tables 1-3). Greedy CoT is one sampled path (a simulated model cannot tell a greedy
call from a sampled one), and Standard prompting is right with a path's chance scaled so that CoT − Standard is the
paper's. Editing (Algorithm 1): a wrong edited answer is fixed with a chance (`Plan.fix`) solved from the paper's
gain, a right one breaks with `BREAK` (§5.6: re-edited correct chains are disrupted; the paper gives no rate).
Answers' log-probabilities carry calibration: a latent x ~ N(d * correct, 1) with d solved from the paper's AUCs
(CoT-SC's row for its answers, the CoT-SC + VE row for the edited ones). `sim:null` keeps the shapes but puts the
gold answer in a slot drawn uniformly and apart from the paths, edits by drawing a slot afresh, gives every answer
the same log-probability law and no path fails to answer: no effect anywhere.

Everything the notebooks measure follows in closed form; `effects()` gives each claim's planted effect in its own
unit, which claims.py declares and `sim:paper` should give back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Iterator, Sequence

import numpy as np

from covlib.papers.verify_edit.paper import PAPER_TABLES

N_PATHS, THRESHOLD = 5, 3  # the paper's n (§4.2) and ceil(n/2)
DATASETS = ("hotpotqa", "2wikimultihop", "fever")
TYPES = ("knows", "unsure", "misled")
SHARES = {  # type -> path share per slot: the gold answer, the wrong ones, no answer (Fig. 2's shapes; not printed)
    "qa": {"knows": (0.7, 0.06, 0.05, 0.04, 0.03, 0.02, 0.1), "unsure": (0.05, 0.1, 0.1, 0.1, 0.1, 0.1, 0.45),
           "misled": (0.02, 0.93, 0.02, 0.01, 0.01, 0.005, 0.005)},
    "fever": {"knows": (0.7, 0.12, 0.08, 0.1), "unsure": (0.15, 0.22, 0.21, 0.42), "misled": (0.02, 0.93, 0.04, 0.01)},
}
MISLED = 0.15  # share of the questions not known that mislead (the rest: unsure)
PATH_LOGPROB = (-0.4, -0.8)  # mean log-prob per word of a path that answers, of one that does not (Wang's weights)
BREAK = 0.5  # chance that editing breaks a right answer (§5.6 gives none: chosen so that Fig. 3 falls after 3)
LP_LEVEL, LP_SLOPE = 0.4, 0.5  # an answer's total log-prob, -exp(LEVEL - SLOPE * x), rises with the latent x
# The paper rows each dataset's planted edit follows: HotpotQA's Dataset knowledge (the primary of notebooks 02-03),
# elsewhere the mean of Wiki. and DrQA (what our bm25 and tfidf stand in for: the simulated verifying answer reads
# the retrieved sentences, not which retriever found them)
EDIT_ROWS = {"hotpotqa": ("Dataset",), "2wikimultihop": ("Wiki.", "DrQA"), "fever": ("Wiki.", "DrQA")}
AUC_FROM = {"fever": "hotpotqa"}  # Table 3 gives no AUC: FEVER's answers are calibrated as HotpotQA's
GRID = np.linspace(-8.0, 8.0, 401)  # the latent x, for AUCs in closed form


def kind(dataset: str) -> str:
    """'fever' (three labels) or 'qa'."""
    return "fever" if dataset == "fever" else "qa"


def paper_row(dataset: str, method: str, knowledge: str = "-") -> tuple[float, float | None]:
    """(EM/acc in [0, 1], AUC in [0, 1] or None) of one row of Tables 1-3."""
    em, auc = PAPER_TABLES[dataset][(method, knowledge)]
    return em / 100, (None if auc is None else auc / 100)


def edit_row(dataset: str) -> tuple[float, float | None]:
    """(EM/acc, AUC or None) of the CoT-SC + VE row(s) the planted edit follows (a mean over two)."""
    rows = [paper_row(dataset, "CoT-SC + VE", k) for k in EDIT_ROWS[dataset]]
    aucs = [a for _, a in rows if a is not None]
    return sum(e for e, _ in rows) / len(rows), (sum(aucs) / len(aucs) if aucs else None)


# --------------------------------------------------------------------------- CoT-SC in closed form


def compositions(n: int, m: int) -> Iterator[tuple[int, ...]]:
    """Every way of n paths falling into m slots (counts)."""
    if m == 1:
        yield (n,)
        return
    for first in range(n + 1):
        for rest in compositions(n - first, m - 1):
            yield (first, *rest)


def multinomial(counts: tuple[int, ...], shares: tuple[float, ...]) -> float:
    """P(counts) of sum(counts) paths with these slot shares."""
    p = math.factorial(sum(counts))
    for c, s in zip(counts, shares):
        p *= s ** c / math.factorial(c)
    return p


@dataclass(frozen=True)
class Outcome:
    """One CoT-SC outcome: its chance, the chance that its answer is right, its consistency."""

    chance: float
    correct: float
    majority: int
    wang: float

    def score(self, consistency: str) -> float:
        """Its consistency on [0, n]: "wang" or "majority"."""
        return self.wang if consistency == "wang" else float(self.majority)


def shares(behaviour: str, dataset: str, type_: str) -> tuple[float, ...]:
    """A type's path share per slot; `null` has no unanswered path (its share spread over the answers)."""
    out = SHARES[kind(dataset)][type_]
    return tuple(a / sum(out[:-1]) for a in out[:-1]) + (0.0,) if behaviour == "null" else out


def answer_slots(dataset: str) -> int:
    """How many answers a question's paths choose from (the gold one and the wrong ones)."""
    return len(SHARES[kind(dataset)]["knows"]) - 1


@lru_cache(maxsize=None)
def outcomes(behaviour: str, dataset: str, type_: str, n: int = N_PATHS) -> tuple[Outcome, ...]:
    """Every CoT-SC outcome of one type at n paths (`cot.self_consistency`: most votes, then the larger weight sum,
    then the first sampled, which is each tied slot alike; a path without an answer weighs in Wang's total only)."""
    share, m = shares(behaviour, dataset, type_), answer_slots(dataset)
    weight = [math.exp(PATH_LOGPROB[0])] * m + [math.exp(PATH_LOGPROB[1])]
    out: dict[tuple[float, int, float], float] = {}  # the same outcome from several counts: one, chances summed
    for counts in compositions(n, m + 1):
        p = multinomial(counts, share)
        if p == 0:
            continue
        key = (0.0, 0, 0.0)
        if any(counts[:m]):
            best = max(counts[:m])
            tied = [j for j in range(m) if counts[j] == best]
            wang = round(n * best * weight[0] / sum(c * w for c, w in zip(counts, weight)), 12)
            key = (1 / m if behaviour == "null" else float(0 in tied) / len(tied), best, wang)
        out[key] = out.get(key, 0.0) + p
    return tuple(Outcome(p, *key) for key, p in out.items())


def path_correct(behaviour: str, dataset: str, type_: str) -> float:
    """Chance that one path (greedy CoT) is right."""
    return 1 / answer_slots(dataset) if behaviour == "null" else shares(behaviour, dataset, type_)[0]


def solve(f: Callable[[float], float], target: float, low: float, high: float) -> float:
    """x in [low, high] with f(x) = target for an increasing f (bisection); an end when out of reach."""
    if f(low) >= target or f(high) <= target:
        return low if f(low) >= target else high
    for _ in range(50):
        mid = (low + high) / 2
        low, high = (mid, high) if f(mid) < target else (low, mid)
    return (low + high) / 2


def mix(knows: float) -> tuple[float, float, float]:
    """The types' weights (knows, unsure, misled) for a share of known questions."""
    return knows, (1 - knows) * (1 - MISLED), (1 - knows) * MISLED


@lru_cache(maxsize=None)
def weights(dataset: str) -> tuple[float, float, float]:
    """The types' weights whose CoT-SC vote is right as often as the paper's CoT-SC row."""
    votes = [sum(o.chance * o.correct for o in outcomes("paper", dataset, t)) for t in TYPES]
    knows = solve(lambda k: sum(w * v for w, v in zip(mix(k), votes)), paper_row(dataset, "CoT-SC")[0], 0.0, 1.0)
    return mix(knows)


@lru_cache(maxsize=None)
def joint(behaviour: str, dataset: str, n: int = N_PATHS) -> tuple[Outcome, ...]:
    """Every CoT-SC outcome over the types, chances weighted by the types' weights."""
    return tuple(Outcome(w * o.chance, o.correct, o.majority, o.wang)
                 for t, w in zip(TYPES, weights(dataset)) for o in outcomes(behaviour, dataset, t, n))


def em(outs: tuple[Outcome, ...]) -> float:
    """The expected accuracy of outcomes (in [0, 1])."""
    return sum(o.chance * o.correct for o in outs)


# --------------------------------------------------------------------------- the plan: what each prompt is told


@dataclass(frozen=True)
class Plan:
    """One behaviour's planted numbers for one dataset."""

    weights: tuple[float, float, float]  # of TYPES
    standard: float  # Standard prompting is right with a path's chance times this
    fix: float  # chance that an edited wrong answer is fixed (null: an edit draws a slot afresh)
    d_answer: float  # calibration of CoT-SC's (and CoT's, Standard's) answers: x ~ N(d * correct, 1)
    d_edit: float  # calibration of the answers given again after editing


def after_edit(behaviour: str, dataset: str, o: Outcome, fix: float) -> float:
    """Chance that an edited outcome's new answer is right."""
    if behaviour == "null":
        return 1 / answer_slots(dataset)
    return o.correct * (1 - BREAK) + (1 - o.correct) * fix


def em_at(behaviour: str, dataset: str, threshold: float, fix: float, consistency: str = "wang") -> float:
    """Expected EM of CoT-SC + VE editing below `threshold` (0: CoT-SC itself)."""
    return sum(o.chance * (after_edit(behaviour, dataset, o, fix) if o.score(consistency) < threshold else o.correct)
               for o in joint(behaviour, dataset))


@lru_cache(maxsize=None)
def plan(behaviour: str, dataset: str) -> Plan:
    """What `sim:<behaviour>` plants for one dataset (see the module doc)."""
    w = weights(dataset)
    path = sum(wi * path_correct("paper", dataset, t) for wi, t in zip(w, TYPES))
    gap = paper_row(dataset, "CoT")[0] - paper_row(dataset, "Standard")[0]
    if behaviour == "null":
        return Plan(w, 1.0, 0.0, 0.0, 0.0)
    source = AUC_FROM.get(dataset, dataset)
    d_answer = solve(lambda d: auc_cot_sc(source, d), paper_row(source, "CoT-SC")[1], -6.0, 6.0)
    d_edit = solve(lambda d: auc_edited(source, d_answer, d), edit_row(source)[1], -6.0, 6.0)
    return Plan(w, (path - gap) / path, fix_share(dataset), d_answer, d_edit)


@lru_cache(maxsize=None)
def fix_share(dataset: str) -> float:
    """The chance of fixing an edited wrong answer that gives the paper's gain at ceil(n/2)."""
    gain = edit_row(dataset)[0] - paper_row(dataset, "CoT-SC")[0]
    return solve(lambda f: em_at("paper", dataset, THRESHOLD, f) - em_at("paper", dataset, 0, f), gain, 0.0, 1.0)


# --------------------------------------------------------------------------- log-probabilities and AUC in closed form


def logprob(x: float | np.ndarray) -> np.ndarray:
    """An answer's total log-probability for its latent x (always below 0; x a number or an array)."""
    return -np.exp(LP_LEVEL - LP_SLOPE * np.asarray(x, dtype=float))


def by_logprob(x: np.ndarray) -> np.ndarray:
    """Notebook 03's confidence: the log-probability."""
    return logprob(x)


def by_probability(x: np.ndarray) -> np.ndarray:
    """Notebook 02's confidence of an edited answer: n * P(new answer)."""
    return N_PATHS * np.exp(logprob(x))


@lru_cache(maxsize=None)
def profile(mean: float) -> np.ndarray:
    """The chance of each GRID cell for a latent N(mean, 1) (the ends take the tails)."""
    cdf = [0.5 * (1 + math.erf((e - mean) / math.sqrt(2))) for e in (GRID[1:] + GRID[:-1]) / 2]
    return np.diff([0.0, *cdf, 1.0])


Cells = tuple[np.ndarray, np.ndarray, np.ndarray]  # (confidence, mass, right mass) of groups of answers


def cells(confidence: Sequence[float], mass: Sequence[float], right: Sequence[float]) -> Cells:
    """Cells from columns."""
    return tuple(np.asarray(c, dtype=float) for c in (confidence, mass, right))


def join(*parts: Cells) -> Cells:
    """One set of cells from several."""
    return tuple(np.concatenate([p[i] for p in parts]) for i in range(3))


def normal_cells(mass: float, right: float, mean: float, confidence: Callable) -> Cells:
    """Cells of answers (`right` of them right) whose latent is N(mean, 1), ranked by `confidence`(latent)."""
    e = mass * profile(mean)
    return confidence(GRID), e, right * e


def population_auc(c: Cells) -> float:
    """The accuracy-coverage AUC (x100) of answers in cells, most confident first, a cell's answers in random order
    (`metrics.accuracy_coverage_auc` in expectation, ties aside): the integral of accuracy over coverage."""
    conf, index = np.unique(-c[0], return_inverse=True)
    mass, right = np.bincount(index, c[1], conf.size), np.bincount(index, c[2], conf.size)
    keep = mass > 0
    mass, right = mass[keep], right[keep]
    covered = np.cumsum(mass) - mass
    hits = np.cumsum(right) - right
    share = right / mass
    with np.errstate(divide="ignore", invalid="ignore"):
        area = np.where(covered > 0, (hits - share * covered) * np.log((covered + mass) / np.where(covered > 0, covered,
                                                                                                        1)), 0.0)
    return float(100 * (area.sum() + right.sum()) / mass.sum())


def answer_cells(outs: Sequence[Outcome], d: float, confidence: Callable) -> Cells:
    """Cells of CoT-SC answers ranked by their latent (no answer: -inf, last)."""
    none = sum(o.chance for o in outs if o.majority == 0)
    right = sum(o.chance * o.correct for o in outs if o.majority)
    wrong = sum(o.chance for o in outs if o.majority) - right
    return join(cells([-np.inf], [none], [0.0]), normal_cells(right, 1.0, d, confidence),
                normal_cells(wrong, 0.0, 0.0, confidence))


def auc_cot_sc(dataset: str, d: float) -> float:
    """CoT-SC's AUC (answers ranked by log-probability) with calibration d, in [0, 1]."""
    return population_auc(answer_cells(joint("paper", dataset), d, by_logprob)) / 100


def edited_cells(behaviour: str, dataset: str, p: Plan, threshold: float, consistency: str,
                 by_consistency: bool) -> Cells:
    """Cells of CoT-SC + VE at `threshold`. Notebook 02 (`by_consistency`) ranks a kept answer by its consistency and an
    edited one by n * P(new answer); notebook 03 ranks every answer by its log-probability."""
    atoms, kept, mass, right = [], [], 0.0, 0.0
    for o in joint(behaviour, dataset):
        if o.score(consistency) < threshold:
            mass, right = mass + o.chance, right + o.chance * after_edit(behaviour, dataset, o, p.fix)
        elif by_consistency:
            atoms.append((o.score(consistency), o.chance, o.chance * o.correct))
        else:
            kept.append(o)
    confidence = by_probability if by_consistency else by_logprob
    out = cells(*zip(*atoms)) if atoms else answer_cells(kept, p.d_answer, by_logprob) if kept else cells([], [], [])
    return join(out, normal_cells(right, 1.0, p.d_edit, confidence), normal_cells(mass - right, 0.0, 0.0, confidence))


def auc_edited(dataset: str, d_answer: float, d_edit: float) -> float:
    """CoT-SC + VE's AUC at ceil(n/2) (x100, ranked by log-probability as notebook 03 ranks), in [0, 1]."""
    p = Plan(weights(dataset), 1.0, fix_share(dataset), d_answer, d_edit)
    return population_auc(edited_cells("paper", dataset, p, THRESHOLD, "wang", False)) / 100


# --------------------------------------------------------------------------- each claim's planted effect


def sweep(behaviour: str, dataset: str, consistency: str = "wang", n: int = N_PATHS) -> dict[int, float]:
    """Expected EM (%) at each threshold 0..n (Fig. 3)."""
    return {t: 100 * em_at(behaviour, dataset, t, plan(behaviour, dataset).fix, consistency) for t in range(n + 1)}


def auc_by_confidence(behaviour: str, dataset: str, threshold: float, consistency: str = "wang") -> float:
    """CoT-SC + VE's AUC (x100) at `threshold`, ranked as notebook 02 ranks: a kept answer by its consistency, an
    edited one by n * P(new answer)."""
    return population_auc(edited_cells(behaviour, dataset, plan(behaviour, dataset), threshold, consistency, True))


def separation(behaviour: str, dataset: str, consistency: str = "wang") -> float:
    """Mean consistency of right CoT-SC answers − of wrong ones (Fig. 2), on [0, n]."""
    outs = joint(behaviour, dataset)
    right, wrong = em(outs), 1 - em(outs)
    return (sum(o.chance * o.correct * o.score(consistency) for o in outs) / right
            - sum(o.chance * (1 - o.correct) * o.score(consistency) for o in outs) / wrong)


def gain(behaviour: str, dataset: str) -> float:
    """CoT-SC + VE − CoT-SC at ceil(n/2), EM points."""
    return sweep(behaviour, dataset)[THRESHOLD] - sweep(behaviour, dataset)[0]


def auc_gain(behaviour: str, dataset: str) -> float:
    """AUC (x100, by log-probability) of CoT-SC + VE at ceil(n/2) − of CoT-SC."""
    p = plan(behaviour, dataset)
    return (population_auc(edited_cells(behaviour, dataset, p, THRESHOLD, "wang", False))
            - population_auc(answer_cells(joint(behaviour, dataset), p.d_answer, by_logprob)))


def effects(behaviour: str = "paper") -> dict[str, float]:
    """Each claim's planted effect at its primary setting, in its unit (null: what `sim:null` gives, 0 throughout)."""
    em_by = sweep(behaviour, "hotpotqa")
    cot = paper_row("hotpotqa", "CoT")[0] - paper_row("hotpotqa", "Standard")[0]
    found = {
        "ve-consistency-separates": separation(behaviour, "hotpotqa"),
        "ve-edit-below-half-helps": em_by[THRESHOLD] - em_by[0],
        "ve-half-beats-edit-all": em_by[THRESHOLD] - em_by[N_PATHS],
        "ve-auc-follows-em": (auc_by_confidence(behaviour, "hotpotqa", THRESHOLD)
                              - auc_by_confidence(behaviour, "hotpotqa", N_PATHS)),
        "ve-beats-cot-sc": gain(behaviour, "hotpotqa"),
        "ve-raises-auc": auc_gain(behaviour, "hotpotqa"),
        "ve-cot-beats-standard": 0.0 if behaviour == "null" else 100 * cot,
        "ve-dataset-largest-gain": 0.0,  # the simulated verifying answer cannot tell the sources apart
        "ve-fever-gains-less": gain(behaviour, "hotpotqa") - gain(behaviour, "fever"),
    }
    return {k: round(v, 3) + 0.0 for k, v in found.items()}
