"""Unlabelled (premise, key fact) pairs from the embedded model's real answers, to be labelled as a judge test set.

The credibility metrics ask the NLI judge two kinds of question: does the whole answer entail a key
fact (recall), does one answer sentence entail it (precision). This script writes such pairs from
answers the embedded model gives to the shared HotpotQA questions, with complete, partial and no
references (so entailed, missing and contradicted facts all occur), against the shipped key facts
(source "agents"). Nothing here calls a judge or writes a label: the `label` column is left empty. The
shipped pairs were labelled afterwards, without any judge's output; who labelled them is their file's
header, `covlib.nli.labelled.KEYFACT_PAIRS_PROVENANCE` (labelled twice by AI coding agents).

    .venv/bin/python scripts/keyfact_pairs.py --questions 60 --pairs 360 --out build/keyfact_pairs/unlabelled.csv
"""

from __future__ import annotations

import argparse
import csv
import random
from pathlib import Path

from covlib import generation
from covlib.core import references
from covlib.papers import credibility as C


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=60, help="shared HotpotQA questions to answer (seeded sample)")
    ap.add_argument("--pairs", type=int, default=360, help="pairs to write: half recall, half precision pairs")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-new-tokens", type=int, default=96)
    ap.add_argument("--out", default="build/keyfact_pairs/unlabelled.csv")
    args = ap.parse_args()
    examples = C.load_questions("", n=args.questions, seed=args.seed)
    facts = {f.question_id: f for f in C.build_key_facts("agents", examples)}
    generator = generation.load_lm(generation.EMBEDDED)
    sets = {"complete": [C.with_gold(ex, 5, args.seed) for ex in examples],
            "partial": [C.partial(ex, 5, args.seed) for ex in examples],
            "closed-book": [C.closed_book(ex) for ex in examples]}
    recall, precision = [], []
    for kind, refs in sets.items():
        answers = C.generate_answers(generator, examples, refs, max_new_tokens=args.max_new_tokens, desc=kind)
        for ex, answer in zip(examples, answers):
            plain = C.plain_answer(answer)
            sentences = [s.text for s in references.cited_sentences(answer)]
            for k in facts[ex.id].key_facts:
                if plain.strip():
                    recall.append((ex.id, kind, "answer", plain, k))
                precision += [(ex.id, kind, "sentence", s, k) for s in sentences]
    rng = random.Random(args.seed)
    half = args.pairs // 2
    chosen = rng.sample(recall, min(half, len(recall)))
    chosen += rng.sample(precision, min(args.pairs - len(chosen), len(precision)))
    chosen = list(dict.fromkeys(chosen))
    rng.shuffle(chosen)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["pair_id", "question_id", "references", "premise_kind", "premise", "hypothesis", "label"])
        for i, (qid, kind, pkind, premise, fact) in enumerate(chosen, 1):
            writer.writerow([f"kf-{i:03d}", qid, kind, pkind, premise, fact, ""])
    print(f"{len(chosen)} pairs ({len(recall)} recall and {len(precision)} precision candidates) -> {out}")


if __name__ == "__main__":
    main()
