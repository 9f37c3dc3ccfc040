"""The judge-corrected key-fact recall against the truth, by reference condition, on held-out key-fact test questions.

The frozen key-fact test set's whole-answer pairs carry their reference condition (closed book, 5 references with a
gold one dropped, 2, 5 and 10 with both gold). For each of two seeded splits of its 40 questions into halves, the
judge's sensitivity and specificity are measured on one half, and each condition's recall on the other half is
corrected with them (`covlib.papers.credibility.intervals.judge_corrected`: each held-out question one row, its pairs
the row's judged key facts) and printed beside its truth, the mean of the labels (docs/judges.md quotes the output).

    .venv/bin/python scripts/check_correction.py --judge minilm-fever-nli
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import numpy as np

from covlib.nli.judge_error import rates_from_decisions
from covlib.nli.labelled import load_keyfact_test_pairs
from covlib.nli.registry import get_judge
from covlib.nli.scoring import entailed, probabilities
from covlib.papers.credibility.intervals import judge_corrected

CONDITIONS = ("closed-book", "partial-5", "complete-2", "complete-5", "complete-10")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--judge", default="", help="a judge name (default: the project's default judge)")
    ap.add_argument("--splits", type=int, default=2, help="seeded halvings of the test questions")
    args = ap.parse_args()
    judge = get_judge(args.judge or None)
    pairs = [p for p in load_keyfact_test_pairs() if p.kind == "answer"]
    said = entailed(probabilities([p.premise for p in pairs], [p.hypothesis for p in pairs], judge, True), judge)
    questions = sorted({p.extra["question_id"] for p in pairs})
    print(f"judge {judge.name}; {len(pairs)} whole-answer pairs of {len(questions)} questions")
    print("| split | condition | questions | raw | corrected [95% CI] | truth |\n|---|---|---|---|---|---|")
    for split in range(args.splits):
        fit = set(np.random.default_rng(split).permutation(questions)[: len(questions) // 2])
        mine = [i for i, p in enumerate(pairs) if p.extra["question_id"] in fit]
        rates = rates_from_decisions(judge.name, said[mine].astype(bool), [pairs[i] for i in mine])
        held: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
        for i, p in enumerate(pairs):
            if p.extra["question_id"] not in fit:
                held[p.extra["references"]][p.extra["question_id"]].append((p.extra["stratum"], bool(said[i]),
                                                                             p.label == "entailment"))
        for condition in CONDITIONS:
            by_q = held[condition].values()
            rows = [{"recall": float(np.mean([s for _, s, _ in v])), "recall_pairs": [[st, s] for st, s, _ in v],
                     "precision": 0.0, "precision_pairs": []} for v in by_q]
            truth = 100 * np.mean([np.mean([e for *_, e in v]) for v in by_q])
            est = judge_corrected(rows, {"answer": rates, "sentence": rates}, seed=split)["R_corrected"]
            print(f"| {split} | {condition} | {len(rows)} | {est['observed']:.1f} | {est['value']:.1f} "
                  f"[{est['low']:.1f}, {est['high']:.1f}] | {truth:.1f} |")


if __name__ == "__main__":
    main()
