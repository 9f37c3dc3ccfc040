"""CoV-RAG's per-example traces: Algorithm 1 step by step (`CovRagTrace`) and the standalone batches' records.

`cov_rag` feeds a `CovRagTrace` after each batched step (retrieve, answer, verify, σ, re-retrieve with
the revised query, re-answer) and each question's record is written as soon as its answer settles.
`answer_batch`, `closed_book_batch` and `verify_batch` write one run per call (`open_batch` and the
`write_*` helpers), `rank_answers` one run per judging call (`open_ranking`, `write_ranking`). Every
function here is a no-op when the writer is falsy (tracing off). Correctness is §3.3's containment
(`correctness.is_correct`, the one `metrics` uses).
"""

from __future__ import annotations

from typing import Any, Sequence

from covlib.core import traces
from covlib.core.records import Example, Passage
from covlib.generation import call_keys
from covlib.papers.covrag.correctness import is_correct
from covlib.papers.covrag.prompts import SCORES, qa_prompt, verification_prompt

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


def dataset_label(examples: Sequence[Example]) -> str:
    """The datasets the examples come from, in order of first appearance ('NQ+WebQ'; 'questions' when unknown)."""
    names = [DATASET_NAMES.get(str(ex.metadata.get("dataset", "")), str(ex.metadata.get("dataset", "")))
             for ex in examples]
    return "+".join(n for n in dict.fromkeys(names) if n) or "questions"


def correct(answer: str | None, gold: Sequence[str]) -> float | None:
    """§3.3's accuracy of one answer (a gold alias contained, citations stripped); None without a gold answer."""
    if not gold or answer is None:
        return None
    return float(is_correct(answer, gold))


def hits_out(hits: Sequence[Any]) -> list[dict[str, Any]]:
    """Retrieved hits (or passages) as the trace keeps them: rank, id, title, score, text capped."""
    out = []
    for rank, h in enumerate(hits, 1):
        p: Passage = getattr(h, "passage", h)
        out.append({"rank": rank, "id": p.id, "title": p.title, "score": getattr(h, "score", None),
                    "text": p.text[:TEXT_CAP]})
    return out


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


class CovRagTrace:
    """The trace of one `cov_rag` call: fed after each batched step, one record written as each question settles."""

    def __init__(self, lm: Any, verifier: Any, examples: Sequence[Example], retriever: Any, *, k: int,
                 max_rounds: int, thresholds: Any, chat: bool, chain: bool, max_new_tokens: int, verify_tokens: int,
                 qa_stop: Sequence[str], verify_stop: Sequence[str]) -> None:
        self.lm, self.verifier, self.examples, self.thresholds, self.chat = lm, verifier, list(examples), thresholds, chat
        self.decoding = {"answer": (lm, max_new_tokens, tuple(qa_stop)), "verify": (verifier, verify_tokens,
                                                                                    tuple(verify_stop))}
        self.retriever = getattr(retriever, "name", type(retriever).__name__)
        data, model = dataset_label(examples), model_label(lm.name)
        checker = "" if verifier is lm else f", verifier {model_label(verifier.name)}"
        rounds = f"{max_rounds} round{'s' if max_rounds != 1 else ''}" + (" (verify only)" if max_rounds == 0 else "")
        title = f"CoV-RAG, {data}, {rounds}, {model}{checker}" + ("" if chain else ", w/o CoL")
        label = "-".join([data, f"{max_rounds}-rounds", "chain" if chain else "no-chain", name_part(lm.name),
                          *(["verifier", name_part(verifier.name)] if checker else [])])
        params = {"k": k, "max_rounds": max_rounds, "thresholds": dict(thresholds.__dict__), "chat": chat,
                  "chain": chain, "max_new_tokens": max_new_tokens, "verify_tokens": verify_tokens,
                  "retriever": self.retriever, "verifier": verifier.name, "datasets": data, "n": len(examples)}
        self.writer = traces.open_run(PAPER, "cov_rag", title, COV_RAG_STEPS, params, model=lm.name, label=label,
                                      compare=("round 1", "final round")) if self.examples else traces.NullWriter()
        self.steps: dict[int, list[dict[str, Any]]] = {i: [] for i in range(len(self.examples))}

    def __bool__(self) -> bool:
        return bool(self.writer)

    def __enter__(self) -> "CovRagTrace":
        self.writer.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.writer.__exit__(*exc)

    def _calls(self, kind: str, prompts: list[str]) -> tuple[list[Any], list[str | None]]:
        lm, tokens, stop = self.decoding[kind]
        keys = call_keys(lm, prompts, max_new_tokens=tokens, stop=stop, chat=self.chat)
        return self.writer.prompts(prompts), [_key(k) for k in keys]

    def retrieved(self, indices: Sequence[int], queries: Sequence[str], hits: Sequence[Sequence[Any]],
                  round_no: int) -> None:
        """Step 1 (or 4's re-retrieval with the revised query) for the questions `indices`."""
        if not self:
            return
        name = "retrieve" if round_no == 0 else "re-retrieve with the revised query"
        for i, q, hs in zip(indices, queries, hits):
            found = hits_out(hs)
            self.steps[i].append(traces.step(
                name, {"query": q, "retriever": self.retriever, "k": len(found), "round": round_no},
                {"ids": [p["id"] for p in found], "titles": [p["title"] for p in found]},
                [traces.call("retrieve", None, query=q, retriever=self.retriever, passages=found)]))

    def answered(self, indices: Sequence[int], references: Sequence[Sequence[Passage]], answers: Sequence[str],
                 round_no: int) -> None:
        """Step 2 (or the re-answer of the original question) for the questions `indices`."""
        if not self:
            return
        questions = [self.examples[i].question for i in indices]
        items, keys = self._calls("answer", [qa_prompt(q, refs) for q, refs in zip(questions, references)])
        name = "answer" if round_no == 0 else "re-answer"
        for i, refs, a, item, key in zip(indices, references, answers, items, keys):
            gold = self.examples[i].answers
            self.steps[i].append(traces.step(
                name, {"question": self.examples[i].question, "references": [p.id for p in refs], "round": round_no},
                {"answer": a, "correct": correct(a, gold)},
                [traces.call("generate", key, model=self.lm.name, prompt=item, completion=a)]))

    def verified(self, indices: Sequence[int], answers: Sequence[str], references: Sequence[Sequence[Passage]],
                 verifications: Sequence[Any], round_no: int, conditions: Sequence[dict[str, bool]],
                 fired: Sequence[bool]) -> None:
        """Step 3 and σ for the questions `indices`: the verifier's raw output, what was parsed, each condition."""
        if not self:
            return
        prompts = [verification_prompt(self.examples[i].question, a, refs)
                   for i, a, refs in zip(indices, answers, references)]
        items, keys = self._calls("verify", prompts)
        for i, a, v, c, f, item, key in zip(indices, answers, verifications, conditions, fired, items, keys):
            self.steps[i].append(traces.step(
                "verify", {"question": self.examples[i].question, "answer": a, "round": round_no},
                {"raw": v.raw, **verification_out(v)},
                [traces.call("generate", key, model=self.verifier.name, prompt=item, completion=v.raw)]))
            self.steps[i].append(traces.step("σ", {"round": round_no}, sigma_out(v, self.thresholds, c, f)))

    def settled(self, records: Sequence[Any], indices: Sequence[int]) -> None:
        """Write the records of the questions `indices`, whose answers are final."""
        if not self:
            return
        for i in indices:
            self.writer.write(self.record(records[i], i))

    def record(self, rec: Any, i: int) -> dict[str, Any]:
        """One question's trace record from its `CovRagRecord` and the steps fed so far."""
        first, final = rec.rounds[0].answer, rec.answer
        v = rec.rounds[0].verification
        label = v.judgment if v is not None and v.parsed and v.judgment else "none"
        first_ok = correct(first, rec.gold)
        right = None if first_ok is None else float(label in ("true", "false") and (label == "true") == bool(first_ok))
        flags = {"fired": bool(rec.rounds[0].fired), "rounds": len(rec.rounds) - 1,
                 "parse_failures": sum(1 for r in rec.rounds if r.verification is not None and not r.verification.parsed),
                 "judgment": label, "judgment_right": right,
                 "dataset": DATASET_NAMES.get(str(self.examples[i].metadata.get("dataset", "")), "")}
        return {"id": rec.id, "question": rec.question, "gold": list(rec.gold), "prediction": final,
                "correct": correct(final, rec.gold), "before": {"prediction": first, "correct": first_ok},
                "flags": flags, "steps": self.steps[i]}


# --------------------------------------------------------------------------- the standalone batches

BATCH_STEPS = {
    "answer": [("answer", "Algorithm 1 line 3: 'M predicts an answer ŷ given (x, k)' (Table 6's QA prompt)")],
    "closed-book answer": [("answer", "Table 2's naive LLM row: the answer without references (ours: Table 6's QA "
                                      "prompt without its references)")],
    "verify": [("verify", "Algorithm 1 line 4: 'M predicts verification results (s_k, s_ŷ, n, x') given (x, k, ŷ)' "
                          "(Table 6's verification prompt)")],
}


def open_batch(kind: str, lm: Any, desc: str, n: int, **params: Any) -> Any:
    """The run of one batched call of `kind` ('answer', 'closed-book answer', 'verify'); falsy when tracing is off."""
    if not n:
        return traces.NullWriter()  # no questions, no run
    model = model_label(lm.name)
    title = f"CoV-RAG {kind}" + ("" if desc == kind else f": {desc}") + f"; {model}, {n} questions"
    return traces.open_run(PAPER, f"{kind} batch", title, BATCH_STEPS[kind], {"desc": desc, "n": n, **params},
                           model=lm.name, label=f"{desc}-{name_part(lm.name)}")


def write_answers(tr: Any, lm: Any, questions: Sequence[str], prompts: list[str], answers: Sequence[str],
                  references: Sequence[Sequence[Passage]] | None, golds: Sequence[Sequence[str]] | None,
                  ids: Sequence[str] | None = None, **decoding: Any) -> None:
    """One record per answer of `answer_batch` / `closed_book_batch` (gold and correctness when `golds` is given)."""
    if not tr:
        return
    items, keys = tr.prompts(prompts), call_keys(lm, prompts, **decoding)
    for i, (q, a, item, key) in enumerate(zip(questions, answers, items, keys)):
        gold = list(golds[i]) if golds else []
        inputs = {"question": q}
        if references is not None:
            inputs["references"] = [{"id": p.id, "title": p.title} for p in references[i]]
        tr.write({"id": str(ids[i]) if ids else str(i), "question": q, "gold": gold, "prediction": a,
                  "correct": correct(a, gold),
                  "flags": {}, "steps": [traces.step("answer", inputs, {"answer": a}, [
                      traces.call("generate", _key(key), model=lm.name, prompt=item, completion=a)])]})


def write_verifications(tr: Any, lm: Any, questions: Sequence[str], answers: Sequence[str], prompts: list[str],
                        verifications: Sequence[Any], labels: Sequence[Sequence[str]] | None, **decoding: Any) -> None:
    """One record per verification of `verify_batch`: the prediction is the judgment, right when it matches whether
    the answer holds a gold label (Table 4's Jdg); None without labels."""
    if not tr:
        return
    items, keys = tr.prompts(prompts), call_keys(lm, prompts, **decoding)
    for i, (q, a, v, item, key) in enumerate(zip(questions, answers, verifications, items, keys)):
        gold = list(labels[i]) if labels else []
        ok = correct(a, gold)
        label = v.judgment if v.parsed and v.judgment else "none"
        right = None if ok is None else float(label in ("true", "false") and (label == "true") == bool(ok))
        tr.write({"id": str(i), "question": q, "gold": gold, "prediction": v.judgment, "correct": right,
                  "flags": {"parse_failures": int(not v.parsed), "answer_correct": ok},
                  "steps": [traces.step("verify", {"question": q, "answer": a}, {"raw": v.raw, **verification_out(v)},
                                        [traces.call("generate", _key(key), model=lm.name, prompt=item,
                                                     completion=v.raw)])]})


# --------------------------------------------------------------------------- LLM-as-judge ranking (Table 3, Table 16)

RANKING_STEPS = (
    ("rank", "Table 16: '1. Score the answer based on the evaluation criteria. 2. Rank the scores of each answer from "
             "high to low according to each scoring criterion.' (answers shown in a seeded random order)"),
    ("parse ranks", "Table 3: each answer's rank x_i per criterion, 'rank = Σ x_i / N' over the questions"),
)


def open_ranking(judge: Any, kind: str, systems: Sequence[str], criteria: Sequence[str], n: int, **params: Any) -> Any:
    """The run of one `rank_answers` call (Table 16's `kind` prompt); falsy when tracing is off."""
    if not n:
        return traces.NullWriter()  # no questions, no run
    model = model_label(judge.name)
    title = f"LLM-as-judge ranking ({kind}: {', '.join(criteria)}), judge {model}, {len(systems)} systems"
    return traces.open_run(PAPER, "rank_answers", title, RANKING_STEPS,
                           {"kind": kind, "systems": list(systems), "criteria": list(criteria), "n": n, **params},
                           model=judge.name, label=f"{kind}-{name_part(judge.name)}")


def write_ranking(tr: Any, judge: Any, i: int, question: str, gold: Sequence[str], systems: Sequence[str],
                  order: Sequence[int], shown: Sequence[str], prompt: Any, key: str | None, raw: str,
                  shown_ranks: dict[str, list[int] | None], ranks: dict[str, list[int] | None]) -> None:
    """One question's ranking record: the prompt as shown, the judge's raw output, its ranks per system."""
    if not tr:
        return
    by_system = {c: (dict(zip(systems, r)) if r else None) for c, r in ranks.items()}
    prediction = "; ".join(f"{c}: " + (", ".join(f"{s} {x}" for s, x in r.items()) if r else "unparsed")
                           for c, r in by_system.items())
    tr.write({"id": str(i), "question": question, "gold": list(gold), "prediction": prediction, "correct": None,
              "flags": {"parse_failures": sum(1 for r in ranks.values() if r is None)},
              "steps": [traces.step("rank", {"question": question, "shown": [
                  {"slot": f"answer{j}", "system": systems[s], "answer": a}
                  for j, (s, a) in enumerate(zip(order, shown), 1)]}, {"raw": raw},
                  [traces.call("generate", key, model=judge.name, prompt=prompt, completion=raw)]),
                  traces.step("parse ranks", {"criteria": list(ranks), "answers": len(systems)},
                              {"shown_ranks": shown_ranks, "ranks": by_system,
                               "unparsed": [c for c, r in ranks.items() if r is None]})]})


def prompts_and_keys(tr: Any, lm: Any, prompts: list[str], **decoding: Any) -> tuple[list[Any], list[str | None]]:
    """The prompts as the trace stores them and one cache key per prompt (empty lists when tracing is off)."""
    if not tr:
        return [], []
    return tr.prompts(prompts), [_key(k) for k in call_keys(lm, prompts, **decoding)]



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
