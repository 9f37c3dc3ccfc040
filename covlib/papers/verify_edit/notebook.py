"""What notebooks 01-03 declare to the one notebook door, as plain data.

Their parameters, each declared once (`covlib.runs.parameters`: default, doc, rule, what the cpu and smoke profiles do
to it), and what their tables record, read by `covlib.runs.session.start`."""

from __future__ import annotations

import os
from typing import Any

from covlib.papers.verify_edit import default_threshold, simulation
from covlib.papers.verify_edit.parameters import DATASETS, PARAMETERS

COT_SC = ("n_samples", "temperature", "seed", "max_new_tokens")  # the CoT-SC sampling every notebook here records


def threshold(values: dict[str, Any]) -> dict[str, Any]:
    """Algorithm 1's default consistency threshold, ceil(n/2) (§3.1), from `n_samples`."""
    return {"threshold": default_threshold(values["n_samples"])}


def sizes(values: dict[str, Any]) -> dict[str, Any]:
    """Notebook 03: the questions per table (as the profile runs them) and the threshold."""
    return {"sizes": {d: values[f"n_{d}"] for d in DATASETS}, **threshold(values)}


# Model work, for the plan of a run (`covlib.runs.plan`): tokens of the prompts' parts in SmolLM2's tokenizer (the
# templates' characters / 3.3), per dataset: the few-shot block every CoT prompt shares, the standard prompt's, the
# verifying-question and verifying-answer headers; a row's own part; sentences per rationale (the shots have 2).
COT_BLOCK = {"hotpotqa": 470, "2wikimultihop": 385, "fever": 230}
STANDARD_BLOCK = {"hotpotqa": 205, "2wikimultihop": 155, "fever": 90}
VQ_BLOCK = {"hotpotqa": 170, "2wikimultihop": 155, "fever": 125}
VA_BLOCK = {"hotpotqa": 815, "2wikimultihop": 390, "fever": 200}
QUESTION, SENTENCE, RATIONALE, SENTENCES = 27, 15, 50, 2
VQ_TOKENS, VA_TOKENS, ANSWER_TOKENS, STANDARD_TOKENS = 40, 64, 24, 32  # their calls' max_new_tokens


def cot_sc_work(dataset: str, n: int, values: dict[str, Any]) -> list[dict[str, Any]]:
    """CoT-SC on `n` questions of `dataset`: n x n_samples sampled paths, and the chosen answer of each scored."""
    m, k = values["max_new_tokens"], values["n_samples"]
    key = f"cot-sc {dataset} {n} {m} {k} {values['temperature']} {values['seed']}"  # 01, 02 and 03's are one call
    block = COT_BLOCK[dataset]
    return [dict(step=f"CoT-SC paths, {dataset}", kind="generate", rows=n * k, prompt=QUESTION, new=m, shared=block,
                 key=key),
            dict(step=f"CoT-SC answers scored, {dataset}", kind="score", rows=n, prompt=QUESTION + RATIONALE,
                 shared=block, key=key + " score", bound="at most: questions with an answer")]


def edit_work(dataset: str, edited: int, kinds: list[str], values: dict[str, Any], bound: str) -> list[dict[str, Any]]:
    """Algorithm 1 on `edited` questions with each knowledge kind: verifying questions (once), verifying answers,
    answers again and their scores (per kind)."""
    m = values["max_new_tokens"]
    units, key = edited * SENTENCES, f"{dataset} {edited} {m}"
    work = [dict(step=f"verifying questions, {dataset}", kind="generate", rows=units, prompt=QUESTION + SENTENCE,
                 new=VQ_TOKENS, shared=VQ_BLOCK[dataset], key=f"vq {key}", bound=bound)]
    for kind in kinds:
        work += [dict(step=f"verifying answers ({kind}), {dataset}", kind="generate", rows=units,
                      prompt=3 * 2 * SENTENCE + QUESTION, new=VA_TOKENS, shared=VA_BLOCK[dataset],
                      key=f"va {kind} {key}", bound=bound),
                 dict(step=f"answers again ({kind}), {dataset}", kind="generate", rows=edited,
                      prompt=QUESTION + RATIONALE, new=ANSWER_TOKENS, shared=COT_BLOCK[dataset],
                      key=f"again {kind} {key}", bound=bound),
                 dict(step=f"new answers scored ({kind}), {dataset}", kind="score", rows=edited,
                      prompt=QUESTION + RATIONALE, shared=COT_BLOCK[dataset], key=f"rescore {kind} {key}", bound=bound)]
    return work


def work_01(values: dict[str, Any]) -> list[dict[str, Any]]:
    """Notebook 01: CoT-SC on Adversarial HotpotQA."""
    return cot_sc_work("hotpotqa", values["n_questions"], values)


def work_02(values: dict[str, Any]) -> list[dict[str, Any]]:
    """Notebook 02: 01's CoT-SC (the same call) and every question edited (its threshold sweep edits all)."""
    n = values["n_questions"]
    return cot_sc_work("hotpotqa", n, values) + edit_work("hotpotqa", n, [values["knowledge"]], values, "")


def work_03(values: dict[str, Any]) -> list[dict[str, Any]]:
    """Notebook 03: per dataset, standard prompting, CoT, CoT-SC and Algorithm 1 with each knowledge kind that runs
    offline (`dataset` has passages for HotpotQA alone; `web` needs COVLIB_SEARCH_ENDPOINT)."""
    work = []
    for d in values["datasets"]:
        n, m = values["sizes"][d], values["max_new_tokens"]
        kinds = [k for k in values["knowledge"] if (k != "dataset" or d == "hotpotqa")
                 and (k != "web" or os.environ.get("COVLIB_SEARCH_ENDPOINT"))]
        work += [dict(step=f"standard prompting, {d}", kind="generate", rows=n, prompt=QUESTION, new=STANDARD_TOKENS,
                      shared=STANDARD_BLOCK[d]),
                 dict(step=f"CoT, {d}", kind="generate", rows=n, prompt=QUESTION, new=m, shared=COT_BLOCK[d]),
                 dict(step=f"CoT answers scored, {d}", kind="score", rows=n, prompt=QUESTION + RATIONALE,
                      shared=COT_BLOCK[d]),
                 *cot_sc_work(d, n, values),
                 *edit_work(d, n, kinds, values, "at most: every question below the threshold")]
    return work


NOTEBOOKS: dict[str, dict[str, Any]] = {
    "01": {
        "name": "01_consistency_kde", "models": ("model",), "traces": True, "derive": threshold, "work": work_01,
        "simulate": simulation.teach,
        "parameters": PARAMETERS["01"],
        "recorded": ("profile", "n_questions", *COT_SC, "threshold"),
    },
    "02": {
        "name": "02_threshold_ablation", "models": ("model",), "traces": True, "derive": threshold, "work": work_02,
        "simulate": simulation.teach,
        "parameters": PARAMETERS["02"],
        "recorded": ("profile", "n_questions", *COT_SC, "knowledge", "consistency"),
    },
    "03": {
        "name": "03_verify_and_edit_tables", "models": ("model",), "traces": True, "derive": sizes, "work": work_03,
        "simulate": simulation.teach,
        "parameters": PARAMETERS["03"],
        "recorded": ("profile", "sizes", "datasets", "knowledge", *COT_SC, "threshold"),
    },
}
