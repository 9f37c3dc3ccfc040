"""Natural-language-inference judges: P(premise entails hypothesis), cached.

The credibility paper scores key-facts recall/precision and self-consistency
with TRUE (Honovich et al., 2022), a T5-11B NLI model, as the oracle
f(premise, hypothesis) in {0, 1}. Every judge here returns three columns
(entailment, neutral, contradiction) summing to 1, and every call goes
through one caching function, `probabilities`, keyed by judge name + judge
config + premise + hypothesis, so all backends are cached the same way.

Backends (pick with `load_judge(spec, device)`; `device` reaches every judge that runs a model):

| spec              | judge                                              | needs           |
|-------------------|----------------------------------------------------|-----------------|
| "minilm-fever-nli"| the cross-encoder `make judge` trains offline on   | `make judge`    |
|                   | FEVER (`load_trained_judge`): `ONNXNLIJudge`, int8 | (~25 min CPU)   |
|                   | on ONNX Runtime, once exported; else `HFNLIJudge`  |                 |
| "overlap"         | `OverlapJudge` -- approximate, NOT an NLI model    | nothing         |
| "llm", "llm:<m>"  | `LLMJudge(load_lm(m))` -- LLM-as-judge via scores  | covlib.generation model |
| "true"            | `TrueT5Judge` -- google/t5_xxl_true_nli_mixture    | the TRUE weights|
| "owner/name", dir | `HFNLIJudge(spec)` -- any HF sequence-classifier   | those weights   |

Any other spec (a bare word that names no judge, a path that does not exist, "") is refused at
once with the list of choices, instead of a slow hub lookup and a transformers error.

Input rules (`probabilities`, for every judge): premises and hypotheses are lists of strings of
the same length (a lone string is refused, not judged character by character). A pair whose
premise or hypothesis is empty or whitespace only is judged neutral (0, 1, 0) without calling
the judge: nothing is entailed by, or entails, an empty text (an empty model answer, say).

The default judge (`judge=None`) is `DEFAULT_JUDGE`, the trained judge, or the overlap heuristic
(`FALLBACK_JUDGE`) where `make judge` has not built it. Notebook 00b measures
every judge on held-out FEVER pairs, the credibility fixture and the
359 key-fact pairs (the metrics' real input; both labelled by AI coding agents), and against people's FACTUAL labels
(`people`); the default is the judge whose own decision agrees best with the people's labels (`people.PRIMARY`), as
it did with the key-fact pairs' (F1 of "entailed"). Every result records the judge's name; local model folders
(the trained judge included) also enter cache keys by a hash of their files'
contents, so retraining never returns the old model's cached probabilities.

Modules (everything public is re-exported here, so `nli.X` works for all of them):
`base` (LABELS, the `Judge` protocol, EMPTY_PAIR, `two_label`), `judges` (HF, TRUE, LLM judges),
`overlap` (the heuristic; its method and limits are in its docstring), `onnx_judge` (the trained judge's
ONNX export, int8 quantisation and `ONNXNLIJudge`; `backend=` or `COVLIB_NLI_BACKEND` picks torch or ONNX),
`registry` (`load_judge`, `get_judge`, the offline defaults), `scoring` (`probabilities` with the cache, the
decision `entailed`),
`evaluation` (scores on gold-labelled pairs; the decision against the key-fact pairs' labels).
The pair data and people's labels are submodules, not re-exported: `people` (every judge against people's FACTUAL
labels of GPT-3 rationales, Ye & Durrett 2022, by whole questions), `labelled` (NLIPair, pair files, the agent-labelled
sets), `fever`, `paragraphs` and `pairs` (training pairs, `make judge`'s input).
"""

from __future__ import annotations

from covlib.nli.base import EMPTY_PAIR, JUDGE_CHOICES, LABELS, ONNX_DIR, Judge, two_label
from covlib.nli.evaluation import (confusion_columns, decision_accuracy, evaluate, f1_difference, judge_note,
                                   nli_confusion, nli_scores)
from covlib.nli.judge_error import MIN_CELL, STRATA, JudgeRates, judge_rates, rates_from_decisions, stratum, weighted_difference
from covlib.nli.labelled import KEYFACT_TEST_SHA256, load_keyfact_test_pairs
from covlib.nli.judges import LLM_TEMPLATE, HFNLIJudge, LLMJudge, TrueT5Judge, map_nli_labels, true_input
from covlib.nli.onnx_judge import (BACKEND_ENV, ONNXNLIJudge, export_onnx, onnx_path, onnx_up_to_date,
                                   resolve_backend)
from covlib.nli.overlap import NEGATIONS, STOPWORDS, WORD_NUMBERS, OverlapJudge
from covlib.nli.registry import (DEFAULT_JUDGE, FALLBACK_JUDGE, TRAINED_JUDGE, check_judge, get_judge, load_judge,
                                 load_trained_judge, offline_judge, trained_judge_dir)
from covlib.nli.scoring import (CACHE_TABLE, CHUNK, decided_labels, decision_rule, entailed, entailment,
                                entailment_labels, probabilities)

__all__ = [
    # base
    "EMPTY_PAIR", "JUDGE_CHOICES", "LABELS", "ONNX_DIR", "Judge", "two_label",
    # registry
    "DEFAULT_JUDGE", "FALLBACK_JUDGE", "TRAINED_JUDGE", "check_judge", "get_judge", "load_judge", "load_trained_judge",
    "offline_judge", "trained_judge_dir",
    # scoring
    "CACHE_TABLE", "CHUNK", "decided_labels", "decision_rule", "entailed", "entailment", "entailment_labels",
    "probabilities",
    # judges and the heuristic
    "LLM_TEMPLATE", "HFNLIJudge", "LLMJudge", "TrueT5Judge", "map_nli_labels", "true_input",
    "NEGATIONS", "STOPWORDS", "WORD_NUMBERS", "OverlapJudge",
    # the trained judge on ONNX Runtime
    "BACKEND_ENV", "ONNXNLIJudge", "export_onnx", "onnx_path", "onnx_up_to_date", "resolve_backend",
    # evaluation
    "confusion_columns", "decision_accuracy", "evaluate", "f1_difference", "judge_note", "nli_confusion", "nli_scores",
    # the judge's error on the frozen key-fact test set, and rates corrected for it
    "MIN_CELL", "STRATA", "JudgeRates", "judge_rates", "rates_from_decisions", "stratum", "weighted_difference", "KEYFACT_TEST_SHA256",
    "load_keyfact_test_pairs",
]
