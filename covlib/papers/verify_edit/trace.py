"""Verify-and-Edit's per-example traces: the records of Standard / CoT / CoT-SC runs and of Algorithm 1's edits.

The methods write no trace; `write(tracer, result)` writes one run's file from what a method returned:

* a `cot.PromptRun` (`cot.run_standard`, `run_cot`, `run_cot_sc`): one record per question, with the
  few-shot prompt, every sampled path (text, parsed answer or parse failure, mean token log-prob,
  finish reason, cache key), the vote and the answer log-prob call;
* `method.Edits` (`compute_edits`) or `method.VERecords` (`verify_and_edit`): the examples left
  as-is first (the consistency check alone), then each edited one with every step of Algorithm 1,
  the CoT-SC prediction as `before`; a sweep's check also says at which thresholds it is edited.

The file is written when the method has returned (its generate and score calls are cached, so a
rerun after a crash costs no model call). Cache keys come from the recorded prompts and decoding
settings (`generation.call_keys`, `score_keys`). The file format is `covlib.traces`.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, Sequence

from covlib import traces
from covlib.generation import call_keys, score_keys
from covlib.papers.verify_edit.answers import answer_key, answer_score
from covlib.papers.verify_edit.cot import PromptRun
from covlib.papers.verify_edit.method import Edits, EditSteps, VERecords

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


def write(tracer: traces.Tracer | None, result: PromptRun | Edits | VERecords) -> None:
    """Write the trace file of one method run from what it returned (nothing when `tracer` is None)."""
    if tracer is None:
        return
    if isinstance(result, PromptRun):
        write_prompting(tracer, result)
    elif isinstance(result, VERecords):
        write_edits(tracer, result.edits.steps, result.edits)
    elif isinstance(result, Edits):
        write_edits(tracer, result.steps, result)
    else:
        raise TypeError(f"no Verify-and-Edit trace for a {type(result).__name__}: pass what run_standard, run_cot, "
                        "run_cot_sc, compute_edits or verify_and_edit returned")


def write_prompting(tracer: traces.Tracer, run: PromptRun) -> None:
    """The run of one Standard / CoT / CoT-SC call ("CoT-SC (n=5), HotpotQA"; label = the dataset): one record
    per question."""
    method, dataset, decoding, vote, lm = run.method, run.dataset, run.decoding, run.vote, run.lm
    name = METHOD_NAMES[method] + (f" (n={decoding['n']})" if method == "cot_sc" else "")
    steps = [("Prompt", _PROMPT_WORDS.get(method, _PROMPT_WORDS["cot"])),
             ("Sample reasoning paths", _SAMPLE_WORDS[method]), ("Vote", _VOTE_WORDS[method]),
             ("Answer log-prob", _SCORE_WORDS)]
    params = {"dataset": dataset, "shots": run.shots, "vote": vote, **decoding}
    with tracer.open_run(PAPER, method, f"{name}, {DATASET_NAMES.get(dataset, dataset)}", steps, params,
                         model=getattr(lm, "name", None), label=dataset) as tr:
        prompts = [r.prompt for r in run]
        items = tr.prompts(prompts)
        keys = call_keys(lm, prompts, **decoding)
        scored = {i: (p, c) for i, p, c in run.scored}
        score_items = dict(zip(scored, tr.prompts([p for p, _ in scored.values()]))) if scored else {}
        skeys = dict(zip(scored, score_keys(lm, [p for p, _ in scored.values()], [c for _, c in scored.values()])))
        for i, r in enumerate(run):
            paths = []
            for p in range(len(r.texts)):
                paths.append({"text": r.texts[p], "answer": r.answers[p], "parsed": r.answers[p] is not None,
                              "mean_logprob": r.mean_logprobs[p], "finish_reason": r.finish_reasons[p],
                              "key": _key(keys[i], p)})
            gen_calls = [traces.call("generate", _key(keys[i], p), prompt=items[i], path=p)
                         for p in range(len(r.texts))]
            votes = Counter(k for k in (answer_key(a, r.dataset) for a in r.answers) if k is not None)
            weights: dict[str, float] = {}
            for a, m in zip(r.answers, r.mean_logprobs):
                k = answer_key(a, r.dataset)
                if k is not None:
                    weights[k] = weights.get(k, 0.0) + (0.0 if m is None or math.isnan(m) else math.exp(m))
            if i in scored:
                score_step = traces.step("Answer log-prob", {"continuation": scored[i][1]},
                                         {"answer_logprob": r.answer_logprob},
                                         [traces.call("score", skeys[i], prompt=score_items[i],
                                                      continuation=scored[i][1])])
            else:
                note = "the completion's log-prob" if r.chosen_path >= 0 else "no path parsed: -inf"
                score_step = traces.step("Answer log-prob", {}, {"answer_logprob": r.answer_logprob, "from": note})
            tr.write({
                "id": r.id, "question": r.question, "gold": list(r.gold),
                "prediction": _prediction(r.prediction), "correct": r.correct,
                "flags": {"parse_failures": r.parse_failures},
                "steps": [
                    traces.step("Prompt", {"question": r.question}, {"prompt": items[i]}),
                    traces.step("Sample reasoning paths", {"n": len(r.texts)}, {"paths": paths}, gen_calls),
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


def write_edits(tracer: traces.Tracer, steps: EditSteps, edits: dict) -> None:
    """The run of one Verify-and-Edit call (`steps.sweep`: compute_edits for a threshold sweep, whose records say
    which thresholds would edit each example): the examples left as-is first, the consistency check only, then the
    edited ones, every step of Algorithm 1."""
    b, lm, knowledge = steps, steps.lm, steps.knowledge
    kind = getattr(knowledge, "kind", "knowledge")
    retriever = getattr(knowledge, "label", str(knowledge))
    what = "CoT-SC + Verify-and-Edit" + (" (every edit of a threshold sweep)" if b.sweep else "")
    title = f"{what}, {DATASET_NAMES.get(b.dataset, b.dataset)}, {source_name(knowledge)}"
    params = {"dataset": b.dataset, "knowledge": retriever, "source": kind, "consistency": b.consistency,
              "top_k": b.top_k, "vq_max_new_tokens": b.vq_max_new_tokens, "va_max_new_tokens": b.va_max_new_tokens,
              "answer_max_new_tokens": b.answer_max_new_tokens, "n": b.n, "threshold": b.threshold, "shots": b.shots}
    with tracer.open_run(PAPER, b.method, title, EDIT_STEPS, params, model=getattr(lm, "name", None),
                         label=f"{b.dataset}-{kind}", compare=("CoT-SC", "CoT-SC + VE")) as tr:
        for r in b.results:  # left as-is: the check only
            if r.id in edits:
                continue
            check, flags = _check(r, b.consistency, b.threshold, b.n, b.sweep)
            tr.write({**_base(r), "prediction": _prediction(r.prediction), "correct": r.correct, "flags": flags,
                      "steps": [check]})
        todo = [r for r in b.results if r.id in edits]
        if not todo:
            return
        vq_items, va_items = tr.prompts(b.vq_prompts), tr.prompts(b.va_prompts)
        re_items = tr.prompts(b.reanswer_prompts)
        vq_keys = call_keys(lm, b.vq_prompts, **b.vq_decoding) if b.vq_prompts else []
        va_keys = call_keys(lm, b.va_prompts, **b.va_decoding)
        re_keys = call_keys(lm, b.reanswer_prompts, **b.reanswer_decoding)
        continuation = dict(zip(b.scored, b.score_continuations))
        s_keys = dict(zip(b.scored, score_keys(lm, [b.reanswer_prompts[i] for i in b.scored],
                                               b.score_continuations))) if b.scored else {}
        for i, r in enumerate(todo):
            e, js = edits[r.id], b.per_example[i]
            check, flags = _check(r, b.consistency, b.threshold, b.n, b.sweep)
            asked = [j for j in js if j < len(b.vq_prompts)]
            vq_calls = [traces.call("generate", vq_keys[j][0], prompt=vq_items[j]) for j in asked]
            found = [{"query": b.questions[j], "candidates": len(b.found[j])} for j in js]
            ret_calls = [traces.call("retrieve", None, query=b.questions[j], retriever=retriever, source=kind,
                                     k=b.top_k, sentences=[{"text": s[:TEXT_CAP], "score": round(sc, 4)}
                                                           for s, sc in b.ranked[j]])
                         for j in js]
            va_calls = [traces.call("generate", va_keys[j][0], prompt=va_items[j]) for j in js]
            re_calls = [traces.call("generate", re_keys[i][0], prompt=re_items[i])]
            if i in s_keys:
                re_calls.append(traces.call("score", s_keys[i], prompt=re_items[i], continuation=continuation[i]))
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
                traces.step("Retrieve", {"verifying_questions": e.verifying_questions, "top_k": b.top_k,
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
