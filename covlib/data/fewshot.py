"""Few-shot pools: the hand-written rationales (and HotpotQA's full-sentence answers) joined to their examples.

Files are `id<TAB>text` lines; ids must be unique and each must name an example of the pool's dataset.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from covlib.core import paths
from covlib.core.records import DataError, Example
from covlib.data.fever import load_fever
from covlib.data.multihop import load_2wikimultihop, load_adv_hotpotqa
from covlib.data.readers import SHARED_FILES, numbered_lines, read_text


# --------------------------------------------------------------------------- few-shot pools


def _rationale_lines(path: str | Path, what: str = "rationale") -> Iterator[tuple[str, str, int]]:
    """(id, text, line) from `id<TAB>text` lines (hand-written rationales or answers)."""
    path = Path(path)
    count = 0
    for number, raw in numbered_lines(read_text(path)):
        if not raw.strip():
            continue
        qid, tab, text = raw.partition("\t")
        if not tab or not qid.strip() or not text.strip():
            raise DataError(path, f"expected 'id<TAB>{what}'", line=number)
        count += 1
        yield qid.strip(), text.strip(), number
    if not count:
        raise DataError(path, f"empty file: no 'id<TAB>{what}' lines")


def load_fewshot_answers(path: str | Path | None = None) -> dict[str, str]:
    """id -> hand-written full-sentence answer of the HotpotQA few-shot pool (manual_answer.txt); ids unique."""
    path = Path(path) if path is not None else paths.dataset_path(*SHARED_FILES["adv_hotpotqa_fewshot_answers"])
    answers: dict[str, str] = {}
    for qid, answer, line in _rationale_lines(path, "answer"):
        if qid in answers:
            raise DataError(path, f"id {qid!r} has a second answer", line=line)
        answers[qid] = answer
    return answers


def load_fewshot(dataset: str) -> list[tuple[Example, str]]:
    """Few-shot pool with hand-written rationales, in rationale-file order: "hotpotqa", "2wikimultihop" or "fever"."""
    if dataset == "hotpotqa":
        examples_path = paths.dataset_path(*SHARED_FILES["adv_hotpotqa_fewshot"])
        rationale_path = paths.dataset_path(*SHARED_FILES["adv_hotpotqa_rationales"])
        examples = load_adv_hotpotqa(examples_path, split="all")
    elif dataset == "2wikimultihop":
        examples_path = paths.dataset_path(*SHARED_FILES["2wikimultihop_fewshot"])
        rationale_path = paths.dataset_path(*SHARED_FILES["2wikimultihop_rationales"])
        examples = load_2wikimultihop(examples_path)
    elif dataset == "fever":
        examples_path = paths.dataset_path(*SHARED_FILES["fever_fewshot"])
        rationale_path = paths.dataset_path(*SHARED_FILES["fever_rationales"])
        examples = load_fever(examples_path, ids=None, split="train")
    else:
        raise ValueError(f"no few-shot pool for {dataset!r}; choose 'hotpotqa', '2wikimultihop' or 'fever'")
    by_id = {example.id: example for example in examples}
    pool, seen = [], set()
    for qid, rationale, line in _rationale_lines(rationale_path):
        if qid not in by_id:
            raise DataError(rationale_path, f"id {qid!r} has no example in {examples_path}", line=line)
        if qid in seen:
            raise DataError(rationale_path, f"id {qid!r} has a second rationale", line=line)
        seen.add(qid)
        pool.append((by_id[qid], rationale))
    return pool
