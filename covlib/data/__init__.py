"""Dataset loaders: every dataset becomes a `list[Example]`, every corpus a `list[Passage]`.

Defaults read the shared data folder (`paths.dataset_path`, see ../shared/data/README.md).
Formats accepted, and the decisions a notebook needs to know:

| loader               | formats                                                        | ids                  |
|----------------------|----------------------------------------------------------------|----------------------|
| load_adv_hotpotqa    | Ye & Durrett JSON list (sim_dev.json / sim_train.json)         | qas_id               |
| load_hotpotqa        | HF `hotpot_qa` JSONL rows, official HotpotQA JSON list, hub id | id / _id             |
| load_2wikimultihop   | official 2Wiki JSON, question-only `{test_id, question, answer}` | _id / `2wiki-0007`   |
| load_fever           | Verify-and-Edit processed JSONL, FEVER train JSONL             | str(id)              |
| load_nq_open         | `{question, answer[]}` JSONL (WebGLM 400), HF `nq_open`, DPR `nq-*.qa.csv`, hub id | `nq-0000` (line order) |
| load_web_questions   | `{question, answer[]}` JSONL, HF `web_questions` (`answers`), DPR TSV, hub id | `webq-0000`  |
| load_triviaqa        | HF `trivia_qa` rc.nocontext (JSONL / JSON list), DPR TSV, hub id | question_id / `tqa-0000` |
| load_mintaka         | official Mintaka JSON list, HF `AmazonScience/mintaka` rows, hub id | id               |

* `Example.answers` is gold first, then aliases, without repeats. Every example's
  `metadata["dataset"]` names its loader's dataset.
* Adversarial HotpotQA: split "calibration" = first 58 records, "test" = last 250,
  "all" = every record. Paragraph contexts are split with `split_sentences`; the
  `rationale` is kept in metadata and located sentence by sentence to give
  `supporting_facts` (sentences that cannot be located are listed in
  `metadata["unlocated_rationale"]`). Adversarial paragraphs keep their title "added".
* FEVER: `ids="default"` loads the paper's 1000 sampled claims **in the order of
  sampled_ids.json** (not file order); `ids=None` loads the whole file in file order.
  Evidence sentences (`pars`, kept verbatim, PTB-tokenised) become one supporting
  Paragraph titled by the evidence pages ("Psych (season 2)").
* Mintaka: entity answers use each entity's label in `lang` (fallback "en"), then the
  annotator's `mention`; an answer with several entities has the labels joined by ", "
  as gold (single labels go to `metadata["answer_entities"]`); count questions put
  `answerNum` first; booleans give "Yes"/"No" then "True"/"False"; numbers and dates
  are strings. The HF rows (`id, lang, question, answerText, category,
  complexityType, questionEntity, answerEntity[{name, label}]`) have no answer type:
  gold = entity label(s) as above, then `answerText`.
* Hub ids: a string that is not an existing path and looks like `owner/name` or
  `name` (optionally `:config`) goes through `datasets.load_dataset` with the
  loader's `split`; rows are converted by the same code as local files. The `split`
  argument of the QA loaders applies to hub loading only.
* Corpora: `build_corpus` keeps the first paragraph of each title (ids are the titles);
  adversarial "added" paragraphs are all distinct texts, so they are deduplicated by
  text and get ids "added-<sha1 of text, 10 hex>" while keeping the title "added".
* DPR `*.qa.csv` files (NQ-open, TriviaQA, WebQuestions) are read with the `csv` module as DPR
  wrote them: tab-separated, quoted fields with doubled quotes, the answers column the Python
  repr of a list (a JSON list also reads). Empty questions and empty answer lists are errors.
* `sample(examples, n, seed)` draws a seeded sample kept in file order.
* Bad input raises `DataError` naming the file, the 1-based line (JSONL/TSV/txt) or
  "record N" (0-based index into a JSON list) and the field; nothing is skipped.

Modules (the public API is re-exported here, so `data.X` works for all of it): `readers` (records, `Loc`, hub rows,
field checks, `SHARED_FILES`), `multihop` (adversarial HotpotQA, HotpotQA, 2Wiki), `fever`, `open_qa` (NQ,
WebQuestions, TriviaQA, Mintaka), `fewshot` (rationale pools), `corpora` (DPR TSV, JSONL, the offline corpus).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Callable, Sequence

from covlib.core import paths
from covlib.core.records import DataError, Example, Paragraph, Passage
from covlib.core.text import split_sentences
from covlib.data.corpora import (build_corpus, default_corpus, iter_dpr_tsv, iter_jsonl_corpus, load_corpus,
                                 read_dpr_tsv, read_jsonl_corpus)
from covlib.data.fever import FEVER_LABELS, load_fever
from covlib.data.fewshot import load_fewshot, load_fewshot_answers
from covlib.data.multihop import (ADVERSARIAL_TITLE, CALIBRATION_SIZE, TEST_SIZE, load_2wikimultihop, load_adv_hotpotqa,
                                  load_hotpotqa)
from covlib.data.open_qa import load_mintaka, load_nq_open, load_triviaqa, load_web_questions
from covlib.data.readers import SHARED_FILES, Loc, iter_records

__all__ = [
    # constants
    "ADVERSARIAL_TITLE", "CALIBRATION_SIZE", "FEVER_LABELS", "TEST_SIZE",
    # the registry
    "available_datasets", "load", "sample",
    # dataset loaders
    "load_2wikimultihop", "load_adv_hotpotqa", "load_fever", "load_hotpotqa", "load_mintaka", "load_nq_open",
    "load_triviaqa", "load_web_questions",
    # few-shot pools
    "load_fewshot", "load_fewshot_answers",
    # corpora
    "build_corpus", "default_corpus", "iter_dpr_tsv", "iter_jsonl_corpus", "load_corpus", "read_dpr_tsv",
    "read_jsonl_corpus",
    # records
    "Loc", "iter_records",
    # from covlib.core, for `data.X` in notebooks and tests
    "DataError", "Example", "Paragraph", "Passage", "split_sentences",
]


# --------------------------------------------------------------------------- samples


def sample(examples: Sequence[Example], n: int | None, seed: int = 0) -> list[Example]:
    """A seeded sample of n examples, kept in their original order (all of them when n is None or >= len)."""
    if n is None or n >= len(examples):
        return list(examples)
    if n < 0:
        raise ValueError(f"sample size must be >= 0, not {n}")
    keep = sorted(random.Random(seed).sample(range(len(examples)), n))
    return [examples[i] for i in keep]


# --------------------------------------------------------------------------- catalogue


def available_datasets() -> dict[str, Path]:
    """The shared data files that exist here, by short name (for the data tour)."""
    found = {name: paths.dataset_path(*parts) for name, parts in SHARED_FILES.items()}
    return {name: path for name, path in found.items() if path.is_file()}


def load(name: str, **kwargs: Any) -> list[Example]:
    """Load a dataset by short name ("adv_hotpotqa", "hotpotqa", "2wikimultihop", "fever", "nq_open", ...)."""
    loaders: dict[str, Callable[..., list[Example]]] = {
        "adv_hotpotqa": load_adv_hotpotqa,
        "hotpotqa": load_hotpotqa,
        "2wikimultihop": load_2wikimultihop,
        "fever": load_fever,
        "nq_open": load_nq_open,
        "web_questions": load_web_questions,
        "triviaqa": load_triviaqa,
        "mintaka": load_mintaka,
    }
    if name not in loaders:
        raise ValueError(f"unknown dataset {name!r}; known: {', '.join(loaders)}")
    return loaders[name](**kwargs)
