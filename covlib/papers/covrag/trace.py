"""CoV-RAG's per-example traces, written from what the methods return: `write(tracer, result)`.

The methods write nothing; each returns what its trace needs (the prompts sent, the decoding settings, the
outputs, its own settings) and `write` turns that into one run's file after the call:

| result | from | the run |
|---|---|---|
| `CovRagRun` | `cov_rag` | Algorithm 1 per question: retrieve, answer, verify, σ, re-retrieve with the revised query, re-answer; the records in the order the answers settled (σ did not fire in round 0 first, ...) |
| `AnswerBatch` | `answer_batch`, `closed_book_batch` | one record per answer |
| `VerifyBatch` | `verify_batch` | one record per verification |
| `Ranking` | `rank_answers` | one record per judged question |
| `TwoStages` | `train_two_stages` | M1's training predictions (an `AnswerBatch`), and the teacher's labels when a teacher labelled them |

A run of no questions writes no file, and `tracer=None` writes nothing. A trace is written when the method has
returned (a crash leaves no partial file): its generate calls are cached, so a run repeated after a crash costs no
model call for the steps done before it. Correctness is §3.3's containment (`correctness.is_correct`, the one
`metrics` uses).
"""

from __future__ import annotations

from typing import Any, Sequence

from covlib import traces
from covlib.core.records import Passage
from covlib.generation import call_keys
from covlib.papers.covrag.correctness import is_correct
from covlib.papers.covrag.method import AnswerBatch, CovRagRecord, CovRagRun, VerifyBatch
from covlib.papers.covrag.prompts import SCORES
from covlib.papers.covrag.ranking import Ranking
from covlib.papers.covrag.training import TwoStages

PAPER = "CoV-RAG"
TEXT_CAP = 500  # characters of a retrieved passage kept in the trace
COV_RAG_STEPS = (
    ("retrieve", "Algorithm 1 line 2: 'R retrieves relevant references k from external knowledge given x, where "
                 "k = [k_1, ..., k_5] are sorted by relevance to x'"),
    ("answer", "Algorithm 1 line 3: 'M predicts an answer ŷ given (x, k)' (Table 6's QA prompt)"),
    ("verify", "Algorithm 1 line 4: 'M predicts verification results (s_k, s_ŷ, n, x') given (x, k, ŷ)' "
               "(Table 6's verification prompt)"),
    ("σ", "Algorithm 1 line 5: 'Obtain a re-retrieval indicator σ(s_k, s_ŷ, n, x')' (footnote 2's thresholds)"),
    ("re-retrieve with the revised query", "Algorithm 1 line 7: 'R re-retrieves new relevant references k' given "
                                           "the new question x''"),
    ("re-answer", "Algorithm 1 lines 8-9: 'M re-predicts a new answer ŷ' given the initial question and new "
                  "references'; 'Update the 1st-answer as ŷ = ŷ''"),
)
DATASET_NAMES = {"nq_open": "NQ", "web_questions": "WebQ", "triviaqa": "TriviaQA", "mintaka": "Mintaka"}


def model_label(name: str) -> str:
    """A model's short name for a title: '<model>' or '<model>, adapter <folder>' (as `metrics.run_label`)."""
    model, sep, adapter = (name or "").partition("+adapter:")
    model = model.split("@")[0].rstrip("/").split("/")[-1].split(":")[-1] or "model"
    return f"{model}, adapter {adapter.rstrip('/').split('/')[-1]}" if sep else model


def name_part(name: str) -> str:
    """A model's part of a file name: its adapter folder, else the model without its parenthesised details."""
    model, sep, adapter = (name or "").partition("+adapter:")
    return adapter.rstrip("/").split("/")[-1] if sep else model_label(model).split(" (")[0]


def dataset_label(datasets: Sequence[str]) -> str:
    """The datasets questions come from (their `metadata["dataset"]`), in order of first appearance ('NQ+WebQ';
    'questions' when unknown)."""
    names = [DATASET_NAMES.get(d, d) for d in datasets]
    return "+".join(n for n in dict.fromkeys(names) if n) or "questions"


def correct(answer: str | None, gold: Sequence[str]) -> float | None:
    """§3.3's accuracy of one answer (a gold alias contained, citations stripped); None without a gold answer."""
    if not gold or answer is None:
        return None
    return float(is_correct(answer, gold))


def hits_out(passages: Sequence[Passage], scores: Sequence[float | None]) -> list[dict[str, Any]]:
    """Retrieved passages and their scores as the trace keeps them: rank, id, title, score, text capped."""
    return [{"rank": rank, "id": p.id, "title": p.title, "score": score, "text": p.text[:TEXT_CAP]}
            for rank, (p, score) in enumerate(zip(passages, scores), 1)]


def verification_out(v: Any) -> dict[str, Any]:
    """A parsed verification: the chain of scores, judgment, revised query, parse status and every repair."""
    return {**{name: getattr(v, name) for name in SCORES}, "judgment": v.judgment, "revised_query": v.revised_query,
            "status": v.status, "parsed": v.parsed, "repairs": list(v.repairs), "chain": v.chain}


def sigma_out(v: Any, t: Any, conditions: dict[str, bool], fired: bool) -> dict[str, Any]:
    """Footnote 2's conditions one by one (value, test, threshold, holds), the mode and whether σ fired."""
    tests = {"reference_low": ("reference_correctness", v.reference_correctness, "<=", t.reference_correctness_max),
             "judged_false": ("judgment", v.judgment, "==", "false"),
             "has_revision": ("revised_query", v.revised_query, "non-empty", None),
             "correctness_low": ("correctness", v.correctness, "<", t.correctness_below),
             "bias_high": ("bias", v.bias, ">", t.bias_above),
             "truthfulness_low": ("truthfulness", v.truthfulness, "<=", t.truthfulness_max)}
    rows = [{"condition": name, "field": f, "value": value, "test": op, "threshold": th, "holds": conditions.get(name)}
            for name, (f, value, op, th) in tests.items()]
    rule = ("unparsed: never fires" if not v.parsed else "w/o CoL: judged false and a revised query" if not v.chain
            else "all six" if t.mode == "all" else "a revised query and any one of the other five")
    return {"conditions": rows, "mode": t.mode, "rule": rule, "fired": fired}


def _key(keys: Sequence[Any]) -> str | None:
    return keys[0] if keys else None


def write(tracer: traces.Tracer | None, result: Any) -> None:
    """The trace of one returned result (`CovRagRun`, `AnswerBatch`, `VerifyBatch`, `Ranking`, `TwoStages`) in
    `tracer`'s folder: one run's file, exactly as the method's steps ran. Nothing without a tracer."""
    if tracer is None:
        return
    if isinstance(result, CovRagRun):
        write_cov_rag(tracer, result)
    elif isinstance(result, AnswerBatch):
        write_answers(tracer, result)
    elif isinstance(result, VerifyBatch):
        write_verifications(tracer, result)
    elif isinstance(result, Ranking):
        write_ranking(tracer, result)
    elif isinstance(result, TwoStages):
        write_answers(tracer, result.predictions)
        if result.with_chain.teacher_checks is not None:  # the same call labelled both sets: one run
            write_verifications(tracer, result.with_chain.teacher_checks)
    else:
        raise TypeError(f"no CoV-RAG trace for a {type(result).__name__}: give what cov_rag, answer_batch, "
                        "closed_book_batch, verify_batch, rank_answers or train_two_stages returned")


# --------------------------------------------------------------------------- Algorithm 1 (cov_rag)


def settled_at(rec: CovRagRecord) -> float:
    """When `cov_rag` settled a question's answer: the round whose verification did not fire σ, else after the last
    round (σ fired on the last verified round, or the last answer was taken unverified)."""
    last = rec.rounds[-1]
    return len(rec.rounds) - 1 if last.verification is not None and not last.fired else float("inf")


def cov_rag_record(rec: CovRagRecord, steps: list[dict[str, Any]]) -> dict[str, Any]:
    """One question's trace record from its `CovRagRecord` and its steps."""
    first, final = rec.rounds[0].answer, rec.answer
    v = rec.rounds[0].verification
    label = v.judgment if v is not None and v.parsed and v.judgment else "none"
    first_ok = correct(first, rec.gold)
    right = None if first_ok is None else float(label in ("true", "false") and (label == "true") == bool(first_ok))
    flags = {"fired": bool(rec.rounds[0].fired), "rounds": len(rec.rounds) - 1,
             "parse_failures": sum(1 for r in rec.rounds if r.verification is not None and not r.verification.parsed),
             "judgment": label, "judgment_right": right, "dataset": DATASET_NAMES.get(rec.dataset, "")}
    return {"id": rec.id, "question": rec.question, "gold": list(rec.gold), "prediction": final,
            "correct": correct(final, rec.gold), "before": {"prediction": first, "correct": first_ok},
            "flags": flags, "steps": steps}


def write_cov_rag(tracer: traces.Tracer, run: CovRagRun) -> None:
    """`cov_rag`'s run: round by round, the steps of the questions still active, and each question's record as soon
    as its answer settled (the order `cov_rag` settles them in); a shared prompt prefix is written before its
    first use."""
    if not run:
        return  # no questions, no run
    lm, verifier, t = run.lm, run.verifier, run.thresholds
    data, model = dataset_label([rec.dataset for rec in run]), model_label(lm.name)
    checker = "" if verifier is lm else f", verifier {model_label(verifier.name)}"
    rounds = f"{run.max_rounds} round{'s' if run.max_rounds != 1 else ''}" + \
        (" (verify only)" if run.max_rounds == 0 else "")
    title = f"CoV-RAG, {data}, {rounds}, {model}{checker}" + ("" if run.chain else ", w/o CoL")
    label = "-".join([data, f"{run.max_rounds}-rounds", "chain" if run.chain else "no-chain", name_part(lm.name),
                      *(["verifier", name_part(verifier.name)] if checker else [])])
    params = {"k": run.k, "max_rounds": run.max_rounds, "thresholds": dict(t.__dict__), "chat": run.chat,
              "chain": run.chain, "max_new_tokens": run.max_new_tokens, "verify_tokens": run.verify_tokens,
              "retriever": run.retriever, "verifier": verifier.name, "datasets": data, "n": len(run)}
    steps: list[list[dict[str, Any]]] = [[] for _ in run]
    settled = [settled_at(rec) for rec in run]
    with tracer.open_run(PAPER, "cov_rag", title, COV_RAG_STEPS, params, model=lm.name, label=label,
                         compare=("round 1", "final round")) as tr:
        for round_no in range(max(len(rec.rounds) for rec in run)):
            at = [i for i, rec in enumerate(run) if len(rec.rounds) > round_no]
            rounds_now = [run[i].rounds[round_no] for i in at]
            retrieve = "retrieve" if round_no == 0 else "re-retrieve with the revised query"
            for i, r in zip(at, rounds_now):
                found = hits_out(r.references, r.scores)
                steps[i].append(traces.step(
                    retrieve, {"query": r.query, "retriever": run.retriever, "k": len(found), "round": round_no},
                    {"ids": [p["id"] for p in found], "titles": [p["title"] for p in found]},
                    [traces.call("retrieve", None, query=r.query, retriever=run.retriever, passages=found)]))
            prompts = [r.answer_prompt for r in rounds_now]
            items, keys = tr.prompts(prompts), call_keys(lm, prompts, **run.answer_decoding)
            for i, r, item, key in zip(at, rounds_now, items, keys):
                steps[i].append(traces.step(
                    "answer" if round_no == 0 else "re-answer",
                    {"question": run[i].question, "references": [p.id for p in r.references], "round": round_no},
                    {"answer": r.answer, "correct": correct(r.answer, run[i].gold)},
                    [traces.call("generate", _key(key), model=lm.name, prompt=item, completion=r.answer)]))
            checked = [(i, r) for i, r in zip(at, rounds_now) if r.verification is not None]
            prompts = [r.verify_prompt for _, r in checked]
            items, keys = tr.prompts(prompts), call_keys(verifier, prompts, **run.verify_decoding)
            for (i, r), item, key in zip(checked, items, keys):
                v = r.verification
                steps[i].append(traces.step(
                    "verify", {"question": run[i].question, "answer": r.answer, "round": round_no},
                    {"raw": v.raw, **verification_out(v)},
                    [traces.call("generate", _key(key), model=verifier.name, prompt=item, completion=v.raw)]))
                steps[i].append(traces.step("σ", {"round": round_no}, sigma_out(v, t, r.conditions, r.fired)))
            for i in range(len(run)):
                if settled[i] == round_no:
                    tr.write(cov_rag_record(run[i], steps[i]))
        for i in range(len(run)):
            if settled[i] == float("inf"):
                tr.write(cov_rag_record(run[i], steps[i]))


# --------------------------------------------------------------------------- the standalone batches

BATCH_STEPS = {
    "answer": [("answer", "Algorithm 1 line 3: 'M predicts an answer ŷ given (x, k)' (Table 6's QA prompt)")],
    "closed-book answer": [("answer", "Table 2's naive LLM row: the answer without references (ours: Table 6's QA "
                                      "prompt without its references)")],
    "verify": [("verify", "Algorithm 1 line 4: 'M predicts verification results (s_k, s_ŷ, n, x') given (x, k, ŷ)' "
                          "(Table 6's verification prompt)")],
}


def open_batch(tracer: traces.Tracer, kind: str, lm: Any, desc: str, n: int, **params: Any) -> traces.TraceWriter:
    """The run of one batched call of `kind` ('answer', 'closed-book answer', 'verify')."""
    model = model_label(lm.name)
    title = f"CoV-RAG {kind}" + ("" if desc == kind else f": {desc}") + f"; {model}, {n} questions"
    return tracer.open_run(PAPER, f"{kind} batch", title, BATCH_STEPS[kind], {"desc": desc, "n": n, **params},
                           model=lm.name, label=f"{desc}-{name_part(lm.name)}")


def write_answers(tracer: traces.Tracer, batch: AnswerBatch) -> None:
    """`answer_batch`'s / `closed_book_batch`'s run: one record per answer (gold and correctness when `golds` were
    given)."""
    if not batch:
        return  # no questions, no run
    lm = batch.lm
    with open_batch(tracer, batch.kind, lm, batch.desc, len(batch), max_new_tokens=batch.max_new_tokens,
                    chat=batch.chat) as tr:
        items, keys = tr.prompts(batch.prompts), call_keys(lm, batch.prompts, **batch.decoding)
        for i, (q, a, item, key) in enumerate(zip(batch.questions, batch, items, keys)):
            gold = list(batch.golds[i]) if batch.golds else []
            inputs: dict[str, Any] = {"question": q}
            if batch.references is not None:
                inputs["references"] = [{"id": p.id, "title": p.title} for p in batch.references[i]]
            tr.write({"id": batch.ids[i] if batch.ids else str(i), "question": q, "gold": gold, "prediction": a,
                      "correct": correct(a, gold),
                      "flags": {}, "steps": [traces.step("answer", inputs, {"answer": a}, [
                          traces.call("generate", _key(key), model=lm.name, prompt=item, completion=a)])]})


def write_verifications(tracer: traces.Tracer, batch: VerifyBatch) -> None:
    """`verify_batch`'s run: one record per verification; the prediction is the judgment, right when it matches
    whether the answer holds a gold label (Table 4's Jdg); None without labels."""
    if not batch:
        return  # no questions, no run
    lm = batch.lm
    with open_batch(tracer, "verify", lm, batch.desc, len(batch), max_new_tokens=batch.max_new_tokens,
                    chat=batch.chat, chain=batch.chain, labels=bool(batch.labels)) as tr:
        items, keys = tr.prompts(batch.prompts), call_keys(lm, batch.prompts, **batch.decoding)
        for i, (q, a, v, item, key) in enumerate(zip(batch.questions, batch.answers, batch, items, keys)):
            gold = list(batch.labels[i]) if batch.labels else []
            ok = correct(a, gold)
            label = v.judgment if v.parsed and v.judgment else "none"
            right = None if ok is None else float(label in ("true", "false") and (label == "true") == bool(ok))
            tr.write({"id": str(i), "question": q, "gold": gold, "prediction": v.judgment, "correct": right,
                      "flags": {"parse_failures": int(not v.parsed), "answer_correct": ok},
                      "steps": [traces.step("verify", {"question": q, "answer": a},
                                            {"raw": v.raw, **verification_out(v)},
                                            [traces.call("generate", _key(key), model=lm.name, prompt=item,
                                                         completion=v.raw)])]})


# --------------------------------------------------------------------------- LLM-as-judge ranking (Table 3, Table 16)

RANKING_STEPS = (
    ("rank", "Table 16: '1. Score the answer based on the evaluation criteria. 2. Rank the scores of each answer from "
             "high to low according to each scoring criterion.' (answers shown in a seeded random order)"),
    ("parse ranks", "Table 3: each answer's rank x_i per criterion, 'rank = Σ x_i / N' over the questions"),
)


def write_ranking(tracer: traces.Tracer, ranking: Ranking) -> None:
    """`rank_answers`' run: per question, the prompt as shown, the judge's raw output, its ranks per system."""
    if not ranking:
        return  # no questions, no run
    judge, systems, criteria = ranking.judge, ranking.systems, ranking.criteria
    title = (f"LLM-as-judge ranking ({ranking.kind}: {', '.join(criteria)}), judge {model_label(judge.name)}, "
             f"{len(systems)} systems")
    params = {"kind": ranking.kind, "systems": list(systems), "criteria": list(criteria), "n": len(ranking),
              "seed": ranking.seed, "max_new_tokens": ranking.max_new_tokens, "chat": ranking.chat}
    with tracer.open_run(PAPER, "rank_answers", title, RANKING_STEPS, params, model=judge.name,
                         label=f"{ranking.kind}-{name_part(judge.name)}") as tr:
        items, keys = tr.prompts(ranking.prompts), call_keys(judge, ranking.prompts, **ranking.decoding)
        for i, (question, order, shown, item, key, raw, shown_ranks, ranks) in enumerate(zip(
                ranking.questions, ranking.orders, ranking.shown, items, keys, ranking.raw, ranking.shown_ranks,
                ranking)):
            by_system = {c: (dict(zip(systems, r)) if r else None) for c, r in ranks.items()}
            prediction = "; ".join(f"{c}: " + (", ".join(f"{s} {x}" for s, x in r.items()) if r else "unparsed")
                                   for c, r in by_system.items())
            tr.write({"id": str(i), "question": question, "gold": list(ranking.golds[i]) if ranking.golds else [],
                      "prediction": prediction, "correct": None,
                      "flags": {"parse_failures": sum(1 for r in ranks.values() if r is None)},
                      "steps": [traces.step("rank", {"question": question, "shown": [
                          {"slot": f"answer{j}", "system": systems[s], "answer": a}
                          for j, (s, a) in enumerate(zip(order, shown), 1)]}, {"raw": raw},
                          [traces.call("generate", _key(key), model=judge.name, prompt=item, completion=raw)]),
                          traces.step("parse ranks", {"criteria": list(ranks), "answers": len(systems)},
                                      {"shown_ranks": shown_ranks, "ranks": by_system,
                                       "unparsed": [c for c, r in ranks.items() if r is None]})]})


# --------------------------------------------------------------------------- reading


def sigma_counts(trace: traces.Trace) -> list[dict[str, Any]]:
    """From a `cov_rag` trace: how many first verifications met each of footnote 2's conditions, how many σ fired,
    and of those how many the revision fixed and broke (round 1 against the final answer)."""
    firsts = [next((s["outputs"] for s in r["steps"] if s["name"] == "σ"), None) for r in trace.records]
    firsts = [f for f in firsts if f]
    names = [c["condition"] for c in firsts[0]["conditions"]] if firsts else []
    rows = [{"condition": name, "questions meeting it": sum(bool(c["holds"]) for f in firsts for c in f["conditions"]
                                                             if c["condition"] == name), "of": len(firsts)}
            for name in names]
    outcomes = [o for _, after, o in traces.pairs(trace) if after.get("flags", {}).get("fired")]
    rows.append({"condition": f"σ fired ({firsts[0]['rule'] if firsts else 'no verification'})",
                 "questions meeting it": sum(bool(f["fired"]) for f in firsts), "of": len(firsts),
                 "fixed by the revision": outcomes.count("fixed"), "broken by it": outcomes.count("broken")})
    return rows
