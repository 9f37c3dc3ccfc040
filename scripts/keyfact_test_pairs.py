"""Unlabelled key-fact pairs for the judge's frozen test set: the notebooks' own answers, sampled by stratum, with weights.

The test set (`covlib.nli.labelled.KEYFACT_TEST_PAIRS`) measures a judge once, at the end, on pairs no judge decision
shaped. This script writes its candidates, with nothing a labeller could take a judge's view from:

- questions: the shared HotpotQA questions that the development pairs (keyfact_nli_pairs-v1.jsonl) do not use;
- answers: the embedded model's, with the credibility notebooks' settings (seed 0, 160 new tokens; notebook 04/06's
  complete, partial and closed-book sets of 5 references, notebook 05's 2 and 10);
- pairs: (whole answer, key fact) as key-fact recall asks and (answer sentence, key fact) as key-fact precision asks,
  against today's shipped key facts;
- strata (`covlib.nli.judge_error.stratum`), so that entailed and contradicted pairs are not rare: the share of the
  key fact's content words the premise holds (`high` >= 0.6, `mid` >= 0.3, `low` below), and `conflict` (share >= 0.4
  and the fact has a number the premise lacks while the premise has another). Each pair carries its stratum and weight (stratum size / pairs
  drawn from it), so a judge's precision and recall can be weighted back to the notebooks' mix of pairs.

It writes `labeller.csv` (pair_id, premise, hypothesis: what labellers see) and `design.csv` (pair_id, question_id,
references, setting, stratum, share, weight). Nothing here calls a judge.

    .venv/bin/python scripts/keyfact_test_pairs.py --out build/keyfact_test
"""

from __future__ import annotations

import argparse
import csv
import random
from collections import Counter
from pathlib import Path

from covlib import generation
from covlib.core import references
from covlib.nli.judge_error import share, stratum
from covlib.nli.labelled import load_keyfact_pairs
from covlib.papers import credibility as C

SETTINGS = {"complete-5": lambda ex, s: C.with_gold(ex, 5, s), "partial-5": lambda ex, s: C.partial(ex, 5, s),
            "closed-book": lambda ex, s: C.closed_book(ex), "complete-2": lambda ex, s: C.with_gold(ex, 2, s),
            "complete-10": lambda ex, s: C.with_gold(ex, 10, s)}
TARGET = {"conflict": 80, "high": 280, "mid": 150, "low": 100}  # pairs drawn per stratum (all there are, if fewer)


def candidates(max_new_tokens: int, seed: int) -> list[tuple]:
    """Every (question_id, setting, premise kind, premise, fact) of the non-development questions, first of each kind."""
    dev = {p.extra.get("question_id") for p in load_keyfact_pairs()}
    examples = [ex for ex in C.load_questions("", n=10 ** 9, seed=seed) if ex.id not in dev]
    facts = {f.question_id: f.key_facts for f in C.build_key_facts("agents", examples)}
    generator = generation.load_lm(generation.EMBEDDED)
    out: dict[tuple[str, str], tuple] = {}
    for name, make in SETTINGS.items():
        refs = [make(ex, seed) for ex in examples]
        answers = C.generate_answers(generator, examples, refs, max_new_tokens=max_new_tokens, desc=name)
        for ex, answer in zip(examples, answers):
            plain = C.plain_answer(answer)
            for k in facts[ex.id]:
                if plain.strip():
                    out.setdefault((plain, k), (ex.id, name, "answer", plain, k))
                for s in references.cited_sentences(answer):
                    out.setdefault((s.text, k), (ex.id, name, "sentence", s.text, k))
    return list(out.values())


def draw(pool: list[tuple], seed: int) -> list[tuple]:
    """A seeded sample per stratum (TARGET), each pair with its stratum, share and weight, in a shuffled order."""
    rng = random.Random(seed)
    by: dict[str, list[tuple]] = {}
    for c in pool:
        name = stratum(c[3], c[4])
        by.setdefault(name, []).append((*c, name, round(share(c[3], c[4]), 3)))
    chosen = []
    for name, target in TARGET.items():
        members = by.get(name, [])
        picked = rng.sample(members, min(target, len(members)))
        chosen += [(*c, round(len(members) / len(picked), 4)) for c in picked]
    rng.shuffle(chosen)
    return chosen


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0, help="the notebooks' seed (references) and the sample's")
    ap.add_argument("--max-new-tokens", type=int, default=160, help="the credibility notebooks' max_new_tokens")
    ap.add_argument("--out", default="build/keyfact_test")
    args = ap.parse_args()
    pool = candidates(args.max_new_tokens, args.seed)
    chosen = draw(pool, args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with (out / "labeller.csv").open("w", encoding="utf-8", newline="") as lab, \
            (out / "design.csv").open("w", encoding="utf-8", newline="") as des:
        lw, dw = csv.writer(lab), csv.writer(des)
        lw.writerow(["pair_id", "premise", "hypothesis"])
        dw.writerow(["pair_id", "question_id", "references", "setting", "stratum", "share", "weight"])
        for i, (qid, refs, kind, premise, fact, name, s, weight) in enumerate(chosen, 1):
            lw.writerow([f"kt-{i:03d}", premise, fact])
            dw.writerow([f"kt-{i:03d}", qid, refs, kind, name, s, weight])
    sizes = Counter(stratum(c[3], c[4]) for c in pool)
    print(f"{len(chosen)} pairs of {len(pool)} candidates (strata {dict(sizes)}) -> {out}")


if __name__ == "__main__":
    main()
