"""Merge the blind labels of the key-fact test set into its shipped JSONL, and print the file's SHA-256.

Reads, in `--dir` (what scripts/keyfact_test_pairs.py wrote and the labellers filled):
- labeller.csv (pair_id, premise, hypothesis) and design.csv (pair_id, question_id, references, setting, stratum,
  share, weight);
- labels_A*.csv and labels_B*.csv (pair_id, label, why): the two independent labellings;
- adjudicated*.csv (pair_id, label, why): the third labeller's decision on every pair where A and B differ.

Writes covlib/resources/keyfact_nli_test-v1.jsonl (first line: {"provenance": KEYFACT_TEST_PROVENANCE}) and prints the
label counts, the agreement and Cohen's kappa of A and B, and the SHA-256 to record as KEYFACT_TEST_SHA256. Refuses to
overwrite the shipped file once its hash is recorded. Nothing here runs a judge.

    .venv/bin/python scripts/keyfact_test_merge.py --dir build/keyfact_test
"""

from __future__ import annotations

import argparse
import csv
import glob
import json
from collections import Counter
from pathlib import Path

from covlib.nli.base import LABELS
from covlib.nli.labelled import KEYFACT_TEST_PROVENANCE, KEYFACT_TEST_SHA256, file_sha256, keyfact_test_path


def read(pattern: str) -> dict[str, dict[str, str]]:
    """Rows of every CSV matching the pattern, by pair_id; a pair given twice or an unknown label is an error."""
    out: dict[str, dict[str, str]] = {}
    for path in sorted(glob.glob(pattern)):
        with open(path, encoding="utf-8", newline="") as handle:
            for row in csv.DictReader(handle):
                pid = row["pair_id"].strip()
                if pid in out:
                    raise ValueError(f"{path}: {pid} labelled twice")
                if "label" in row and row["label"].strip() not in LABELS:
                    raise ValueError(f"{path}: {pid} has label {row['label']!r}, not one of {LABELS}")
                out[pid] = {k: (v or "").strip() for k, v in row.items()}
    return out


def kappa(a: list[str], b: list[str]) -> float:
    """Cohen's kappa of two labellings of the same items."""
    n = len(a)
    observed = sum(x == y for x, y in zip(a, b)) / n
    ca, cb = Counter(a), Counter(b)
    expected = sum(ca[k] * cb[k] for k in LABELS) / (n * n)
    return (observed - expected) / (1 - expected) if expected < 1 else 1.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="build/keyfact_test")
    args = ap.parse_args()
    d = Path(args.dir)
    pairs, design = read(str(d / "labeller.csv")), read(str(d / "design.csv"))
    a, b, adj = read(str(d / "labels_A*.csv")), read(str(d / "labels_B*.csv")), read(str(d / "adjudicated*.csv"))
    missing = [p for p in pairs if p not in a or p not in b]
    if missing:
        raise SystemExit(f"{len(missing)} pairs lack a label from A or B, e.g. {missing[:5]}")
    split = [p for p in pairs if a[p]["label"] != b[p]["label"]]
    if [p for p in split if p not in adj]:
        raise SystemExit(f"{len([p for p in split if p not in adj])} disagreements not adjudicated")
    out = keyfact_test_path()
    if KEYFACT_TEST_SHA256 and out.is_file() and file_sha256(out) == KEYFACT_TEST_SHA256:
        raise SystemExit(f"{out} is frozen (its hash is recorded): make a new version instead")
    rows = []
    for pid, pair in pairs.items():
        final = adj[pid] if pid in split else a[pid]
        why = "; ".join(x for x in (a[pid]["why"], b[pid]["why"], adj.get(pid, {}).get("why", "") if pid in split else "") if x)
        g = design[pid]
        rows.append({"id": pid, "question_id": g["question_id"], "references": g["references"], "setting": g["setting"],
                     "stratum": g["stratum"], "share": float(g["share"]), "weight": float(g["weight"]),
                     "premise": pair["premise"], "hypothesis": pair["hypothesis"], "label": final["label"],
                     "labels": [a[pid]["label"], b[pid]["label"]], "why": why})
    with out.open("w", encoding="utf-8") as handle:
        handle.write(json.dumps({"provenance": KEYFACT_TEST_PROVENANCE}, ensure_ascii=False) + "\n")
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    la, lb = [a[p]["label"] for p in pairs], [b[p]["label"] for p in pairs]
    print(f"{len(rows)} pairs, labels {dict(Counter(r['label'] for r in rows))}; A and B agree on "
          f"{len(rows) - len(split)} (Cohen's kappa {kappa(la, lb):.2f}); {len(split)} adjudicated")
    print(f"by stratum: {dict(Counter((r['stratum'], r['label']) for r in rows))}")
    print(f"SHA-256 {file_sha256(out)}  {out}")


if __name__ == "__main__":
    main()
