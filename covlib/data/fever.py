"""The FEVER reader: processed (Verify-and-Edit) and train claims, the paper's 1000 sampled ids, evidence paragraphs.

`ids="default"` keeps the order of sampled_ids.json; `ids=None` the whole file in file order. `FEVER_LABELS` are the
three verdicts a claim may carry.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from covlib.core import paths
from covlib.core.metrics import FEVER_LABELS
from covlib.core.records import DataError, Example, Paragraph
from covlib.data.readers import (SHARED_FILES, Loc, iter_records, read_json_value, require, require_text, str_list,
                                 unique_ids)


# --------------------------------------------------------------------------- FEVER


def _wiki_title(title: str) -> str:
    """A FEVER page id as a readable title: 'Psych_-LRB-season_2-RRB-' -> 'Psych (season 2)'."""
    for token, char in (("-LRB-", "("), ("-RRB-", ")"), ("-LSB-", "["), ("-RSB-", "]"), ("-COLON-", ":"), ("_", " ")):
        title = title.replace(token, char)
    return title


def _fever_facts(evidence: list, loc: Loc) -> list[tuple[str, int]]:
    """(readable title, sentence index) pairs of the evidence sets, without repeats."""
    facts: list[tuple[str, int]] = []
    for i, group in enumerate(evidence):
        if not isinstance(group, list):
            raise loc.error(f"field 'evidence[{i}]' should be a list of evidence items", field="evidence")
        for item in group:
            if not (isinstance(item, list) and len(item) == 4):
                message = f"an evidence item should be [annotation, evidence, page, sentence], got {item!r:.80}"
                raise loc.error(message, field="evidence")
            page, sentence = item[2], item[3]
            if isinstance(page, str) and isinstance(sentence, int) and (_wiki_title(page), sentence) not in facts:
                facts.append((_wiki_title(page), sentence))
    return facts


def _fever_row(row: dict, loc: Loc) -> Example:
    """A processed FEVER record `{id, question, label, evidence, pars}` or a train one `{id, claim, label, ...}`."""
    raw_id = require(row, "id", (int, str), loc)
    claim = require_text(row, "claim" if "claim" in row else "question", loc)
    label = require(row, "label", str, loc)
    if label not in FEVER_LABELS:
        raise loc.error(f"field 'label' should be one of {FEVER_LABELS}, got {label!r}", field="label")
    evidence = require(row, "evidence", list, loc)
    facts = _fever_facts(evidence, loc)
    metadata: dict[str, Any] = {"dataset": "fever", "evidence": evidence}
    if "verifiable" in row:
        metadata["verifiable"] = require(row, "verifiable", str, loc)
    paragraphs = []
    if "pars" in row:
        pars = str_list(require(row, "pars", list, loc), loc, "pars")
        if pars:
            title = "; ".join(dict.fromkeys(t for t, _ in facts)) or "evidence"
            paragraphs.append(Paragraph(title, pars, is_supporting=True))
    return Example(
        str(raw_id), claim, [], label=label, paragraphs=paragraphs, supporting_facts=facts, metadata=metadata
    )


def _fever_ids(ids: str | Path | Sequence[int | str]) -> tuple[Any, list[str]]:
    """(where the ids came from, the ids as strings), from a JSON-list file or a sequence."""
    if isinstance(ids, (str, Path)):
        values = read_json_value(ids)
        if not isinstance(values, list):
            raise DataError(ids, f"expected a JSON list of ids, got {type(values).__name__}")
        source: Any = Path(ids)
    else:
        values, source = list(ids), "ids argument"
    if not values:
        raise DataError(source, "no ids: an empty selection (use ids=None for the whole file)")
    first: dict[str, int] = {}
    for index, value in enumerate(values):
        if not isinstance(value, (int, str)) or isinstance(value, bool):
            raise DataError(source, f"record {index}: an id should be an integer or string, got {value!r:.80}")
        if str(value) in first:
            raise DataError(source, f"record {index}: id {value!r} is already selected at record {first[str(value)]}")
        first[str(value)] = index
    return source, [str(v) for v in values]


def load_fever(
    path: str | Path | None = None,
    ids: str | Path | Sequence[int | str] | None = "default",
    split: str = "paper_test",
) -> list[Example]:
    """FEVER claims: "paper_test" = the paper's 1000 sampled ids (sampled_ids.json order); "train" = few-shot claims."""
    if split not in ("paper_test", "train"):
        raise ValueError(f"split must be 'paper_test' or 'train', got {split!r}")
    if path is None:
        path = paths.dataset_path(*SHARED_FILES["fever" if split == "paper_test" else "fever_fewshot"])
    if ids == "default":
        ids = paths.dataset_path(*SHARED_FILES["fever_ids"]) if split == "paper_test" else None
    examples = unique_ids((_fever_row(row, loc), loc) for row, loc in iter_records(path))  # 7 and "7" collide
    if ids is None:
        return examples
    by_id = {example.id: example for example in examples}
    source, wanted = _fever_ids(ids)
    missing = [(i, x) for i, x in enumerate(wanted) if x not in by_id]
    if missing:
        index, value = missing[0]
        raise DataError(source, f"record {index}: id {value} not found in {path} ({len(missing)} ids missing)")
    return [by_id[x] for x in wanted]
