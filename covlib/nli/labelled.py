"""Labelled NLI pairs: the `NLIPair` record, balancing and counting, JSONL files, the agent-labelled sets.

The two labelled sets judges are measured on ship with the code: the credibility fixture
(tests/fixtures, answer / key-fact pairs written and labelled by AI coding agents) and the key-fact pairs
(covlib/resources, the embedded model's real answers against the shipped key facts' first wording, labelled by
AI coding agents without any judge's output: `KEYFACT_PAIRS_PROVENANCE`).
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from covlib.core import paths
from covlib.data import iter_records
from covlib.nli.base import LABELS

FIXTURE = "credibility_nli_pairs.jsonl"


@dataclass(frozen=True)
class NLIPair:
    """One judged pair; `source` names where it came from (e.g. 'fever:91721'), `kind` how it was built."""

    premise: str
    hypothesis: str
    label: str
    source: str = ""
    kind: str = ""
    extra: dict = field(default_factory=dict, compare=False, hash=False)


def balance_pairs(pairs: Sequence[NLIPair], seed: int = 0) -> list[NLIPair]:
    """Downsample every label to the rarest label's count (seeded), keeping the original order."""
    by_label: dict[str, list[int]] = {}
    for i, p in enumerate(pairs):
        by_label.setdefault(p.label, []).append(i)
    if not by_label:
        return []
    n = min(len(v) for v in by_label.values())
    rng = random.Random(seed)
    keep = {i for idx in by_label.values() for i in rng.sample(idx, n)}
    return [p for i, p in enumerate(pairs) if i in keep]


def label_counts(pairs: Iterable[NLIPair]) -> dict[str, int]:
    """How many pairs carry each label, in LABELS order."""
    counts = Counter(p.label for p in pairs)
    return {label: counts.get(label, 0) for label in LABELS}


# --------------------------------------------------------------------------- files


def pairs_hash(pairs: Iterable[NLIPair]) -> str:
    """SHA-256 over premise, hypothesis and label of each pair, in order."""
    h = hashlib.sha256()
    for p in pairs:
        h.update(json.dumps([p.premise, p.hypothesis, p.label], ensure_ascii=False).encode() + b"\n")
    return h.hexdigest()


def save_pairs(pairs: Iterable[NLIPair], path: str | Path) -> Path:
    """Write pairs as JSONL (one object per line), atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for p in pairs:
            f.write(json.dumps(asdict(p), ensure_ascii=False) + "\n")
    tmp.replace(path)
    return path


def load_pairs(path: str | Path) -> list[NLIPair]:
    """Read a pairs JSONL (save_pairs' format, or the fixture's with extra keys); errors name file, line and field."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no NLI pairs file at {path}")
    known = {"premise", "hypothesis", "label", "source", "kind", "extra"}
    pairs = []
    for row, loc in iter_records(path):
        if loc.line == 1 and isinstance(row, dict) and set(row) == {"provenance"}:
            continue  # the file's header: what made it
        for key in ("premise", "hypothesis", "label"):
            if not isinstance(row.get(key), str) or not row[key].strip():
                raise loc.error("missing or empty", field=key)
        if row["label"] not in LABELS:
            raise loc.error(f"label should be one of {LABELS}, got {row['label']!r}", field="label")
        extra = dict(row.get("extra") or {}, **{k: v for k, v in row.items() if k not in known})
        source = row.get("source") or row.get("id", "")
        pairs.append(NLIPair(row["premise"], row["hypothesis"], row["label"], str(source), str(row.get("kind", row.get("setting", ""))), extra))
    return pairs


def fixture_path() -> Path:
    """The credibility-setting pairs shipped with the tests (answer / answer sentence vs key fact; by AI coding agents)."""
    return paths.code_root() / "tests" / "fixtures" / FIXTURE


def load_credibility_fixture() -> list[NLIPair]:
    """The credibility fixture's NLI pairs (premise: an answer or answer sentence; hypothesis: a key fact)."""
    return load_pairs(fixture_path())


# --------------------------------------------------------------------------- the key-fact test set

KEYFACT_PAIRS = "keyfact_nli_pairs-v1.jsonl"  # in paths.resources_dir(); its first line is {"provenance": ...}
# What made the file, in the words its header, the notebooks and the docs quote (a test keeps them equal).
KEYFACT_PAIRS_PROVENANCE = (
    "Premises: the embedded model's answers and answer sentences with complete, partial and no references, written "
    "unlabelled by scripts/keyfact_pairs.py. Hypotheses: key facts of key_facts_agents-v1.jsonl in their wording "
    "before an AI coding assistant rewrote 50 of them (the review sheet's v1_key_fact; 67 of the 359 pairs hold a "
    "fact since reworded), kept frozen as a development set. Labelled twice by AI coding agents without any "
    "judge's output (both labels in `labels`: they agree on 357 pairs, Cohen's kappa 0.96; the 2 splits "
    "adjudicated, the reason in `why`); the project's history names no human labeller.")


def load_keyfact_pairs() -> list[NLIPair]:
    """The key-fact pairs: the embedded model's real answers (or answer sentences) vs the shipped key facts' first
    wording, labelled by AI coding agents (`KEYFACT_PAIRS_PROVENANCE`).

    Labelled without any judge's output and kept apart from every training pair; the judge's
    accuracy on them is what the credibility tables print beside their numbers (`decision_accuracy`).
    """
    return load_pairs(paths.resources_dir() / KEYFACT_PAIRS)


# --------------------------------------------------------------------------- the frozen key-fact test set

KEYFACT_TEST_PAIRS = "keyfact_nli_test-v1.jsonl"  # in paths.resources_dir(); its first line is {"provenance": ...}
KEYFACT_TEST_GUIDELINE = "docs/keyfact_labelling.md"  # the labelling guideline, committed with the labels
# SHA-256 of the test file's bytes, committed before any judge ran on it (git log shows the order).
KEYFACT_TEST_SHA256 = "07924e5571cd41a7eb389ccd15f73d2499c1fe656ab21297d335bac7adc6cc98"
# Its header is frozen with the file's bytes (KEYFACT_TEST_SHA256), so it still names the shipped key facts by their
# file's old name, key_facts_hand-v1.jsonl: the same facts, now key_facts_agents-v1.jsonl (source "agents").
KEYFACT_TEST_PROVENANCE = (
    "Premises: the embedded model's answers and answer sentences (160 new tokens, seed 0; 2, 5 and 10 references "
    "with both gold, 5 with one gold dropped, and none) to the 40 shared HotpotQA questions the development pairs do "
    "not use, written unlabelled by scripts/keyfact_test_pairs.py and drawn by stratum of the key fact's content words "
    "in the premise (each pair's weight brings its stratum back to its share). Hypotheses: the shipped key facts of "
    "key_facts_hand-v1.jsonl. Labelled twice, independently, by AI coding agents following "
    "docs/keyfact_labelling.md, each seeing only the pair and the guideline, without any judge's output (both labels "
    "in `labels`: they agree on 577 of 581 pairs, Cohen's kappa 0.98); the 4 splits adjudicated by a third AI coding "
    "agent, the reason in `why`. Committed with its SHA-256 before any judge ran on it; the project's history names "
    "no human labeller.")


def keyfact_test_path() -> Path:
    """Where the frozen key-fact test set lives (covlib/resources)."""
    return paths.resources_dir() / KEYFACT_TEST_PAIRS


def file_sha256(path: str | Path) -> str:
    """SHA-256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def load_keyfact_test_pairs() -> list[NLIPair]:
    """The frozen key-fact test set (`KEYFACT_TEST_PROVENANCE`), refused if its bytes are not the ones hashed before any
    judge ran on it (`KEYFACT_TEST_SHA256`). Each pair's extra holds question_id, stratum and weight."""
    path = keyfact_test_path()
    if not path.is_file():
        raise FileNotFoundError(f"no key-fact test set at {path}")
    got = file_sha256(path)
    if got != KEYFACT_TEST_SHA256:
        raise ValueError(f"{path} has SHA-256 {got}, not the frozen test set's {KEYFACT_TEST_SHA256}: the test set "
                         "must not change after judges have been scored on it (make a new version instead)")
    return load_pairs(path)
