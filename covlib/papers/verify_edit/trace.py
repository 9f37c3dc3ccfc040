"""Verify-and-Edit's per-example traces: the records of Standard / CoT / CoT-SC runs and of Algorithm 1's edits.

`cot.run_standard`, `run_cot` and `run_cot_sc` open their run with `open_prompting` and write one record per
question (`write_prompting`): the few-shot prompt, every sampled path (text, parsed answer or
parse failure, mean token log-prob, finish reason, cache key), the vote and the answer log-prob call.
`verify_and_edit` and `compute_edits` open theirs with `open_edits`: every example first gets the consistency
check (`write_kept` writes the examples left as-is at once), then each edited one the steps of Algorithm 1
(`write_edits`), with the CoT-SC prediction as `before`. The file format is `covlib.core.traces`.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, Sequence

from covlib.core import traces
from covlib.generation import call_keys, score_keys
from covlib.papers.verify_edit.answers import answer_key, answer_score

PAPER = "verify_edit"
DATASET_NAMES = {"hotpotqa": "HotpotQA", "2wikimultihop": "2WikiMultihop", "fever": "FEVER"}
METHOD_NAMES = {"standard": "Standard", "cot": "CoT", "cot_sc": "CoT-SC"}
SOURCE_NAMES = {"dataset": "Dataset", "bm25": "BM25", "tfidf": "TF-IDF", "dense": "Dense", "web": "Web search"}
TEXT_CAP = 500  # characters of one retrieved sentence kept in a trace

_PROMPT_WORDS = {
    "standard": "Standard Prediction (Standard): Directly predicting the label based on input, given the same "
                "number of in-context learning examples (§4; prompt of Appendix C.x.1)",
    "cot": "Require: The original question q; An n-shot CoT prompt p_cot (Algorithm 1; Appendix C.x.2)",
}
_SAMPLE_WORDS = {
    "standard": "the answer, greedy (one path)",
    "cot": "Original CoT: Predicting the label after generating the explanation (§4; greedy, one path)",
    "cot_sc": "R, A <- f(p_cot, q, n, tau) ▷ Generate a set of reasonings (R) and answers (A). (Algorithm 1; "
              "'Sampling 5 CoT trajectories with a decoding temperature of 0.7', §4)",
}
_VOTE_WORDS = {
    "standard": "one greedy path: its answer is the prediction",
    "cot": "one greedy path: its answer is the prediction",
    "cot_sc": "r*, a* <- argmax P(a|p_cot, q), a in A ▷ Reasoning and answer with highest self-consistency. "
              "(Algorithm 1)",
}
_SCORE_WORDS = ("log P(' {answer}.' | prompt, chosen rationale, 'The answer is'): the official code's confidence "
                "for the accuracy-coverage AUC (Standard: the completion's own log-prob)")

EDIT_STEPS = [
    ("Consistency check", "if s*_sc < ceil(n/2) then ▷ Edit reasoning with a less-than-majority-agree consistency. "
                          "... else ▷ Answer with high consistency is left as-is. (Algorithm 1; §3.1)"),
    ("Split the rationale into sentences", "for o_i in r* do ▷ Edit each sentence in the reasoning. (Algorithm 1)"),
    ("Verifying questions", "u <- f(p_vq, q, o_i) ▷ Generate verifying question. (Algorithm 1; Appendix C.x.3)"),
    ("Retrieve", "v <- g(u) ▷ Retrieve external knowledge. '... we select the top 3 sentences most similar to the "
                 "query ranked by the pre-trained Sentence BERT model' (Algorithm 1; §4)"),
    ("Verifying answers", "w <- f(p_va, u, v) ▷ Generate verifying answer. (Algorithm 1; Appendix C.x.4)"),
    ("Edit the rationale", "o_i <- w ▷ Edit original reasoning sentence with verifying answer. (Algorithm 1)"),
    ("Answer again", "a* <- f(p_cot, q, r*) ▷ Generate final answer with edited reasoning. (Algorithm 1)"),
]


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _key(keys: list, i: int) -> str | None:
    """Path i's key: one key per distinct sample (greedy: one for all)."""
    return keys[i] if i < len(keys) else keys[0]


def _prediction(text: str | None) -> str | None:
    return text or None


def open_prompting(lm: Any, method: str, dataset: str, decoding: dict, shots: int, vote: str) -> Any:
    """The trace writer of one Standard / CoT / CoT-SC run ("CoT-SC (n=5), HotpotQA"; label = the dataset)."""
    name = METHOD_NAMES[method] + (f" (n={decoding['n']})" if method == "cot_sc" else "")
    steps = [("Prompt", _PROMPT_WORDS.get(method, _PROMPT_WORDS["cot"])),
             ("Sample reasoning paths", _SAMPLE_WORDS[method]), ("Vote", _VOTE_WORDS[method]),
             ("Answer log-prob", _SCORE_WORDS)]
    params = {"dataset": dataset, "shots": shots, "vote": vote, **decoding}
    return traces.open_run(PAPER, method, f"{name}, {DATASET_NAMES.get(dataset, dataset)}", steps, params,
                           model=getattr(lm, "name", None), label=dataset)


def write_prompting(tr: Any, lm: Any, results: Sequence[Any], completions: Sequence[Sequence[Any]], decoding: dict,
                    to_score: Sequence[tuple[int, str, str]], vote: str) -> None:
    """One record per question of a Standard / CoT / CoT-SC run (after its one batched score call)."""
    items = tr.prompts([r.prompt for r in results])
    keys = call_keys(lm, [r.prompt for r in results], **decoding)
    scored = {i: (p, c) for i, p, c in to_score}
    score_items = dict(zip(scored, tr.prompts([p for p, _ in scored.values()]))) if scored else {}
    skeys = dict(zip(scored, score_keys(lm, [p for p, _ in scored.values()], [c for _, c in scored.values()])))
    for i, (r, comps) in enumerate(zip(results, completions)):
        paths = []
        for p, c in enumerate(comps):
            paths.append({"text": r.texts[p], "answer": r.answers[p], "parsed": r.answers[p] is not None,
                          "mean_logprob": r.mean_logprobs[p], "finish_reason": c.finish_reason,
                          "key": _key(keys[i], p)})
        gen_calls = [traces.call("generate", _key(keys[i], p), prompt=items[i], path=p) for p in range(len(comps))]
        votes = Counter(k for k in (answer_key(a, r.dataset) for a in r.answers) if k is not None)
        weights: dict[str, float] = {}
        for a, m in zip(r.answers, r.mean_logprobs):
            k = answer_key(a, r.dataset)
            if k is not None:
                weights[k] = weights.get(k, 0.0) + (0.0 if m is None or math.isnan(m) else math.exp(m))
        if i in scored:
            score_step = traces.step("Answer log-prob", {"continuation": scored[i][1]}, {"answer_logprob": r.answer_logprob},
                                     [traces.call("score", skeys[i], prompt=score_items[i], continuation=scored[i][1])])
        else:
            note = "the completion's log-prob" if r.chosen_path >= 0 else "no path parsed: -inf"
            score_step = traces.step("Answer log-prob", {}, {"answer_logprob": r.answer_logprob, "from": note})
        tr.write({
            "id": r.id, "question": r.question, "gold": list(r.gold),
            "prediction": _prediction(r.prediction), "correct": r.correct, "flags": {"parse_failures": r.parse_failures},
            "steps": [
                traces.step("Prompt", {"question": r.question}, {"prompt": items[i]}),
                traces.step("Sample reasoning paths", {"n": len(comps)}, {"paths": paths}, gen_calls),
                traces.step("Vote", {"vote": vote, "answers": r.answers},
                            {"votes": dict(votes), "weights": weights, "chosen_path": r.chosen_path,
                             "prediction": _prediction(r.prediction), "majority": r.majority, "wang": r.wang,
                             "wang_raw": r.wang_raw, "f1": r.f1}),
                score_step,
            ],
        })


def source_name(knowledge: Any) -> str:
    """A knowledge source's short name ("BM25", "Dataset") from its kind."""
    kind = getattr(knowledge, "kind", "knowledge")
    return SOURCE_NAMES.get(kind, kind)


def open_edits(lm: Any, method: str, dataset: str, knowledge: Any, params: dict, sweep: bool) -> Any:
    """The trace writer of one Verify-and-Edit run; `sweep`: compute_edits for a threshold sweep (records which
    thresholds would edit each example)."""
    kind = getattr(knowledge, "kind", "knowledge")
    what = "CoT-SC + Verify-and-Edit" + (" (every edit of a threshold sweep)" if sweep else "")
    title = f"{what}, {DATASET_NAMES.get(dataset, dataset)}, {source_name(knowledge)}"
    params = {"dataset": dataset, "knowledge": getattr(knowledge, "label", str(knowledge)), "source": kind, **params}
    return traces.open_run(PAPER, method, title, EDIT_STEPS, params, model=getattr(lm, "name", None),
                           label=f"{dataset}-{kind}", compare=("CoT-SC", "CoT-SC + VE"))


def _check(r: Any, consistency: str, threshold: float, n: int, sweep: bool) -> tuple[dict, dict]:
    """The consistency step of one example and its flags."""
    score = float(getattr(r, consistency))
    below = score < threshold
    outputs: dict[str, Any] = {"score": score, "uncertain": below, "edited": below}
    flags: dict[str, Any] = {"edited": below}
    if sweep:
        outputs["edited at thresholds"] = [t for t in range(0, n + 2) if score < t <= threshold]
        flags["lowest_edit_threshold"] = math.floor(score) + 1
    inputs = {"consistency": consistency, "threshold": threshold, "n": n,
              "scores": {"majority": r.majority, "wang": r.wang, "wang_raw": r.wang_raw},
              "chosen_path": r.chosen_path, "cot_sc_prediction": _prediction(r.prediction)}
    return traces.step("Consistency check", inputs, outputs), flags


def _base(r: Any) -> dict:
    return {"id": r.id, "question": r.question, "gold": list(r.gold),
            "before": {"prediction": _prediction(r.prediction), "correct": r.correct}}


def write_kept(tr: Any, results: Sequence[Any], edited_ids: set, consistency: str, threshold: float, n: int,
               sweep: bool) -> None:
    """The records of the examples left as-is (consistency at or above the threshold): the check only."""
    for r in results:
        if r.id in edited_ids:
            continue
        check, flags = _check(r, consistency, threshold, n, sweep)
        tr.write({**_base(r), "prediction": _prediction(r.prediction), "correct": r.correct, "flags": flags,
                  "steps": [check]})


def write_edits(tr: Any, lm: Any, todo: Sequence[Any], edits: dict, b: dict) -> None:
    """The records of the edited examples, every step of Algorithm 1; `b` holds the batched calls' inputs."""
    vq_items, va_items, re_items = tr.prompts(b["vq_prompts"]), tr.prompts(b["va_prompts"]), tr.prompts(b["re_prompts"])
    vq_keys = call_keys(lm, b["vq_prompts"], **b["vq"]) if b["vq_prompts"] else []
    va_keys = call_keys(lm, b["va_prompts"], **b["va"])
    re_keys = call_keys(lm, b["re_prompts"], **b["re"])
    scored = b["scored"]
    s_keys = dict(zip(scored, score_keys(lm, [b["re_prompts"][i] for i in scored],
                                         [f" {b['raws'][i]}." for i in scored]))) if scored else {}
    retriever = getattr(b["knowledge"], "label", str(b["knowledge"]))
    for i, r in enumerate(todo):
        e, js = edits[r.id], b["per_example"][i]
        check, flags = _check(r, b["consistency"], b["threshold"], b["n"], b["sweep"])
        asked = [j for j in js if j < len(b["vq_prompts"])]
        vq_calls = [traces.call("generate", vq_keys[j][0], prompt=vq_items[j]) for j in asked]
        found = [{"query": b["questions"][j], "candidates": len(b["found"][j])} for j in js]
        ret_calls = [traces.call("retrieve", None, query=b["questions"][j], retriever=retriever,
                                 source=getattr(b["knowledge"], "kind", "knowledge"), k=b["top_k"],
                                 sentences=[{"text": s[:TEXT_CAP], "score": round(sc, 4)} for s, sc in b["ranked"][j]])
                     for j in js]
        va_calls = [traces.call("generate", va_keys[j][0], prompt=va_items[j]) for j in js]
        re_calls = [traces.call("generate", re_keys[i][0], prompt=re_items[i])]
        if i in s_keys:
            re_calls.append(traces.call("score", s_keys[i], prompt=re_items[i], continuation=f" {b['raws'][i]}."))
        prediction = e.answer if e.answer is not None else r.prediction
        correct = answer_score(e.answer, r.gold, r.dataset) if e.answer is not None else r.correct
        flags.update(reanswer_failed=e.answer is None, sentences=len(e.sentences))
        tr.write({**_base(r), "prediction": _prediction(prediction), "correct": correct, "flags": flags, "steps": [
            check,
            traces.step("Split the rationale into sentences", {"rationale": e.original_rationale},
                        {"sentences": e.sentences} if e.sentences else
                        {"sentences": [], "note": "no sentence: the question itself is the verifying question"}),
            traces.step("Verifying questions", {"question": r.question, "sentences": e.sentences},
                        {"verifying_questions": e.verifying_questions}, vq_calls),
            traces.step("Retrieve", {"verifying_questions": e.verifying_questions, "top_k": b["top_k"],
                                     "knowledge": retriever}, {"found": found}, ret_calls),
            traces.step("Verifying answers", {"verifying_questions": e.verifying_questions},
                        {"verifying_answers": e.verifying_answers}, va_calls),
            traces.step("Edit the rationale", {"original_rationale": e.original_rationale,
                                               "verifying_answers": e.verifying_answers},
                        {"edited_rationale": e.edited_rationale}),
            traces.step("Answer again", {"question": r.question, "edited_rationale": e.edited_rationale},
                        {"text": e.text, "answer": e.answer, "reanswer_failed": e.answer is None,
                         "answer_logprob": e.answer_logprob, "prediction": _prediction(prediction)}, re_calls),
        ]})
