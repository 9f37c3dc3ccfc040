"""Trace records of the credibility paper's runs: cited answers with their §4 metrics, self-reflection, self-completion, key facts.

The methods write no trace: they return what they did, and a notebook hands each result to `write(S.tracer,
result)`, which writes its trace file(s) once the method has returned (generation and NLI calls are cached, so a
rerun after a crash costs no model call). Answers are generated in one call (`answer_runs`) and scored in another
(`score_runs`): each answer carries its prompt and decoding (`answers.Answers`), so the scored run's trace
(`Scores`) shows the whole path of an answer.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from covlib import traces
from covlib.core.metrics import accuracy_contains
from covlib.core.records import Example
from covlib.core.references import cited_sentences, strip_citations
from covlib.generation import call_keys
from covlib.nli.scoring import pair_keys

from covlib.papers.credibility.answers import Answers, Reflection, Scores
from covlib.papers.credibility.improvements import SelfCompletion
from covlib.papers.credibility.key_facts import KeyFactExtraction, KeyFactList
from covlib.papers.credibility.prompts import is_refusal

PAPER = "credibility"
TEXT_CAP = 300  # characters of a reference's text kept in a trace (the prompt holds it whole)

ANSWER_STEPS = [
    ("references shown", "[Question], [References]: the numbered reference list C the answer may cite"),
    ("answer", "Please write a high-quality answer ...: a long-form answer with citations"),
    ("citations parsed", "C_m is the set of model's references; each sentence s_i with its citations C_i"),
    ("key facts", "Key-facts Recall: whether the model's response S^q entails each key-fact, f(S^q, k)"),
    ("metrics", "key-facts recall and precision, citation precision |Cm∩Cg|/|Cm| and recall |Cm∩Cg|/|Cg|, "
                "self-consistency f(Concat(C_i), s_i)"),
]
REFLECTION_STEPS = [
    ("references shown", "We categorize questions into groups with either complete or partial knowledge"),
    ("self-reflection", "Prompt-reflection: [Question], [References]. Please write a high-quality answer ... If the "
                        "references are insufficient to answer the question, respond with \"I'm sorry, I cannot "
                        "answer the question based on the provided references\""),
]
COMPLETION_STEPS = [
    ("references shown", "BM25 as the retriever to source relevant references"),
    ("self-reflection", "Prompt-reflection: ... If the references are insufficient to answer the question, respond "
                        "with \"I'm sorry, I cannot answer the question ...\""),
    ("search queries", "Prompt-completion: [Question], [References]. ... please start your query with \"I further "
                       "need to ask the search engine:\""),
    ("retrieval", "they are executed to fetch more information from a search engine. The newly retrieved references "
                  "are added into the previous reference list"),
    ("answer", "for LLMs to formulate a new response. This iterative process continues until the LLM believes that "
               "it possesses a comprehensive set of knowledge"),
]
KEY_FACT_STEPS = [
    ("reasoning steps", "[Question], [References], [Answer]. Please figure out the reasoning process towards the "
                        "answer step-by-step without other content."),
    ("key facts", "[Question], [Reasoning steps], [Answer]. Please identify 2 to 4 non-redundant key-facts within "
                  "the reasoning steps which are necessary to derive the final answer."),
]


def _number(value: Any) -> float | None:
    return float(value) if value is not None and math.isfinite(float(value)) else None


def _key(keys: Sequence[Any]) -> str | None:
    return keys[0] if keys else None


def _name(generator: Any) -> str:
    return getattr(generator, "name", type(generator).__name__)


def _keys(generator: Any, prompts: Sequence[str], decoding: dict[str, Any]) -> list[str | None]:
    """The cache key of each prompt's (greedy) reply, as the method called the generator."""
    return [_key(k) for k in call_keys(generator, list(prompts), **decoding)]


# --------------------------------------------------------------------------- the one entry point


def write(tracer: traces.Tracer | None, result: Any) -> None:
    """Write the trace file(s) of what a credibility method returned (nothing when `tracer` is None):

    - `Scores` (`score_runs`): one cited-answer run per (model, setting);
    - `Reflection` (`generate_answers(reflection=True)`): a self-reflection run;
    - `SelfCompletion` (`self_complete`): a self-completion run;
    - `KeyFactList` (`llm_key_facts`, `build_key_facts`): a key-fact extraction run when the paper's prompts wrote
      some just now (its `extraction`), else nothing.

    Other `Answers` (`answer_runs`, `generate_answers`) are traced when `score_runs` scores them: nothing is written.
    """
    if not isinstance(result, (Scores, Answers, SelfCompletion, KeyFactList)):
        raise TypeError(f"no credibility trace for a {type(result).__name__}: pass what score_runs, "
                        "generate_answers(reflection=True), self_complete or build_key_facts returned")
    if tracer is None:
        return
    if isinstance(result, Scores):
        for (model, setting), rows in result.items():  # one trace per (model, reference set)
            answers, ref_sets = result.runs[(model, setting)]
            write_answer_run(tracer, model, setting, answers, ref_sets, result.examples, result.facts, rows,
                             result.details[(model, setting)], result.judge)
    elif isinstance(result, Reflection):
        write_reflection_run(tracer, result)
    elif isinstance(result, SelfCompletion):
        write_completion_run(tracer, result)
    elif isinstance(result, KeyFactList) and result.extraction is not None:
        write_key_fact_run(tracer, result.extraction)


# --------------------------------------------------------------------------- shared steps


def references_step(ex: Example, refs: Any, **inputs: Any) -> dict[str, Any]:
    """The numbered references a prompt showed: ids, titles, which are gold, text capped."""
    gold = set(refs.gold)
    shown = [{"n": n, "id": getattr(p, "id", None), "title": p.title, "gold": n in gold,
              "text": p.text[:TEXT_CAP]} for n, p in enumerate(refs.paragraphs, 1)]
    return traces.step("references shown", {"question": ex.question, "kind": refs.kind, **inputs},
                       {"references": shown, "gold_positions": list(refs.gold),
                        "gold_titles": list(dict.fromkeys(ex.supporting_titles))})


def insufficient(ex: Example, refs: Any) -> bool | None:
    """Whether the references miss a gold paragraph (None when the question names none)."""
    titles = set(ex.supporting_titles)
    return None if not titles else not titles <= {p.title for p in refs.paragraphs}


# --------------------------------------------------------------------------- cited answers with their §4 metrics


def _citations_step(answer: str, refs: Any) -> dict[str, Any]:
    gold, n_refs = set(refs.gold), len(refs)
    sentences = [{"text": s.text, "citations": list(s.citations),
                  "points_to": [{"n": c, "title": refs.paragraphs[c - 1].title, "gold": c in gold}
                                if 1 <= c <= n_refs else {"n": c, "title": None, "gold": False, "invalid": True}
                                for c in s.citations]} for s in cited_sentences(answer)]
    cited = list(dict.fromkeys(c for s in sentences for c in s["citations"]))
    return traces.step("citations parsed", {"n_refs": n_refs},
                       {"sentences": sentences, "cited (Cm)": cited, "gold (Cg)": sorted(gold),
                        "invalid": [c for c in cited if not 1 <= c <= n_refs]})


def _verdicts(pairs: Sequence[tuple], keys: Sequence[str], metric: str,
              where: Sequence[dict[str, Any]]) -> tuple[list, list]:
    items, calls = [], []
    for pair, key, at in zip(pairs, keys, where):
        probs, verdict = pair[-2], pair[-1]
        items.append({"entailed": verdict, "p_entailment": probs[0], "p_neutral": probs[1],
                      "p_contradiction": probs[2], "key": key})
        calls.append(traces.call("nli", key, metric=metric, **at, entailed=verdict))
    return items, calls


def answer_record(model: str, ex: Example, refs: Any, facts: Any, answer: str, row: dict[str, Any],
                  detail: dict[str, list], judge: Any, prompt: Any, key: str | None) -> dict[str, Any]:
    """One cited answer's record: references, answer (its prompt as the trace stores it, and its cache key),
    citations, key facts with their NLI verdicts, §4 metrics."""
    gen_call = traces.call("generate", key, prompt=prompt)
    steps = [references_step(ex, refs),
             traces.step("answer", {"model": model}, {"completion": answer}, [gen_call]),
             _citations_step(answer, refs)]
    rec = detail["recall"]
    keys = pair_keys([p[1] for p in rec], [p[2] for p in rec], judge) if rec else []
    by_fact = {p[2]: i for i, p in enumerate(rec)}
    items, calls = _verdicts(rec, keys, "recall", [{"k": facts.key_facts.index(p[2])} for p in rec])
    facts_out = []
    for k, fact in enumerate(facts.key_facts):
        hit = items[by_fact[fact]] if fact in by_fact else {"entailed": False, "p_entailment": None,
                                                             "p_neutral": None, "p_contradiction": None, "key": None,
                                                             "note": "empty answer: not judged"}
        facts_out.append({"k": k, "fact": fact, **hit})
    steps.append(traces.step("key facts", {"premise (answer without citation marks)": rec[0][1] if rec else "",
                                           "key_facts": list(facts.key_facts), "source": facts.source,
                                           "judge": getattr(judge, "name", str(judge))},
                             {"key_facts": facts_out, "recalled": sum(bool(f["entailed"]) for f in facts_out),
                              "of": len(facts.key_facts)}, calls))
    n_facts = max(len(facts.key_facts), 1)
    pre, sc = detail["precision"], detail["sc"]
    pre_keys = pair_keys([p[2] for p in pre], [p[3] for p in pre], judge) if pre else []
    sc_keys = pair_keys([p[2] for p in sc], [p[3] for p in sc], judge) if sc else []
    _, pre_calls = _verdicts(pre, pre_keys, "precision", [{"sentence": p[1], "k": n % n_facts}
                                                          for n, p in enumerate(pre)])
    _, sc_calls = _verdicts(sc, sc_keys, "self-consistency", [{"sentence": p[1]} for p in sc])
    n_s = row["n_sentences"]
    per_sentence = [{"sentence": j, "entails key facts": [c["k"] for c in pre_calls if c["sentence"] == j
                                                          and c["entailed"]],
                     "self_consistent": next((c["entailed"] for c in sc_calls if c["sentence"] == j), None)}
                    for j in range(n_s)]
    metrics = {k: v for k, v in row.items() if k not in ("question_id", "judge")}
    steps.append(traces.step("metrics", {"correct is": "key-fact recall R (§4.1), in [0, 1]"},
                             {**metrics, "sentences": per_sentence}, pre_calls + sc_calls))
    return {"id": ex.id, "question": ex.question, "gold": list(ex.answers), "prediction": answer,
            "correct": _number(row["recall"]),
            "flags": {"invalid_citations": int(row["invalid_citations"]), "no_citation": not row["n_cited_sentences"],
                      "refused": is_refusal(answer)},
            "steps": steps}


def setting_name(setting: Any, refs: Sequence[Any]) -> str:
    """A run's reference-set name: the notebook's setting ('complete', 'closed-book', 'baseline', ...), or '<n> refs'."""
    return setting if isinstance(setting, str) else f"{setting} refs"


def write_answer_run(tracer: traces.Tracer, model: str, setting: Any, answers: Sequence[str],
                     ref_sets: Sequence[Any], examples: Sequence[Example], facts: Sequence[Any],
                     rows: Sequence[dict], details: Sequence[dict], judge: Any) -> None:
    """One trace file for one (model, reference set) that `score_runs` scored: every answer's record. The answers'
    prompts and cache keys come from the `Answers` (plain strings have none: prompt and key are None)."""
    name = setting_name(setting, ref_sets)
    sizes = sorted({len(r) for r in ref_sets})
    source = facts[0].source if facts else ""
    params = {"references": name, "kind": ref_sets[0].kind if ref_sets else "", "n_refs": sizes,
              "key_facts": source, "key_facts_author": facts[0].author if facts else "",
              "judge": getattr(judge, "name", str(judge)), "questions": len(examples)}
    title = f"Cited answers, {name} references, {model} (key facts: {source})"
    prompts = getattr(answers, "prompts", None)
    keys = _keys(answers.generator, prompts, answers.decoding) if prompts is not None else [None] * len(answers)
    with tracer.open_run(PAPER, "cited answer", title, ANSWER_STEPS, params, model=model,
                         label=f"{name}-{source}-{model}") as tr:
        stored = tr.prompts(prompts) if prompts is not None else [None] * len(answers)
        for ex, refs, kf, a, row, d, p, key in zip(examples, ref_sets, facts, answers, rows, details, stored, keys):
            tr.write(answer_record(model, ex, refs, kf, a, row, d, judge, p, key))


# --------------------------------------------------------------------------- self-reflection (§5.1)


def write_reflection_run(tracer: traces.Tracer, answers: Reflection) -> None:
    """Self-reflection (§5.1), from a `Reflection`: per question the references, the reflection prompt and reply,
    refused or not; correct = 1 when it refused exactly when a gold reference was missing (reflection accuracy)."""
    model, examples, ref_sets = answers.model, answers.examples, answers.ref_sets
    params = {"kinds": sorted({r.kind for r in ref_sets}), "n_refs": sorted({len(r) for r in ref_sets}),
              "max_new_tokens": answers.decoding["max_new_tokens"], "questions": len(examples)}
    with tracer.open_run(PAPER, "self-reflection", f"Self-reflection (§5.1), {model}", REFLECTION_STEPS, params,
                         model=model, label=model) as tr:
        keys = _keys(answers.generator, answers.prompts, answers.decoding)
        for ex, refs, item, key, a in zip(examples, ref_sets, tr.prompts(answers.prompts), keys, answers):
            short = insufficient(ex, refs)
            refused = is_refusal(a)
            right = "refuse (a gold reference is missing)" if short else "answer (every gold reference is shown)"
            step = traces.step("self-reflection", {"insufficient": short},
                               {"completion": a, "refused": refused, "right decision": right if short is not None
                                else None}, [traces.call("generate", key, prompt=item)])
            tr.write({"id": ex.id, "question": ex.question, "gold": [right] if short is not None else [],
                      "prediction": a, "correct": None if short is None else float(refused == short),
                      "flags": {"refused": refused}, "steps": [references_step(ex, refs), step]})


# --------------------------------------------------------------------------- self-completion (§5.2)


def _retrieve(query: str, retriever: str, hits: Sequence[Any], text: bool = True) -> dict[str, Any]:
    return traces.call("retrieve", None, query=query, retriever=retriever,
                       passages=[{"id": h.passage.id, "title": h.passage.title, "score": float(h.score),
                                  **({"text": h.passage.text[:TEXT_CAP]} if text else {})} for h in hits])


def em(answer: str, ex: Example) -> float:
    """EM-recall of one answer: a gold answer string inside it, citation marks stripped."""
    return float(accuracy_contains(strip_citations(answer), ex.answers))


def write_completion_run(tracer: traces.Tracer, done: SelfCompletion) -> None:
    """Self-completion (§5.2), from a `SelfCompletion`: per question BM25's references and the reflection, then per
    round the search queries, the retrieval and the new answer. Records go in the order the questions settled
    (answered at once first, then round by round), each round's prompts stored as one batch, as the method ran;
    before = the answer after self-reflection alone; correct = EM-recall (the gold answer string in the answer; the
    key-fact metrics are in the scored run)."""
    model, examples = done.model, done.examples
    params = {"k_initial": done.k_initial, "cap": done.cap, "max_rounds": done.max_rounds,
              "max_new_tokens": done.decoding["max_new_tokens"], "retriever": done.retriever,
              "questions": len(examples)}
    with tracer.open_run(PAPER, "self-completion", f"Self-completion (§5.2), {model}", COMPLETION_STEPS, params,
                         model=model, label=model,
                         compare=(f"self-reflection on BM25 top {done.k_initial}", "self-completion")) as tr:
        first = [rec.reflection_prompt for rec in done]
        steps = []
        for ex, rec, item, key in zip(examples, done, tr.prompts(first), _keys(done.generator, first, done.decoding)):
            shown = references_step(ex, rec.reflected_references)
            shown["calls"] = [_retrieve(ex.question, done.retriever, rec.initial_hits, text=False)]  # texts: outputs
            steps.append([shown, traces.step("self-reflection", {}, {"completion": rec.reflected_answer,
                                                                     "refused": is_refusal(rec.reflected_answer)},
                                             [traces.call("generate", key, prompt=item)])])
        _completion_write(tr, examples, done, steps, [i for i, rec in enumerate(done) if rec.rounds == 0])
        for round_ in range(1, max((rec.rounds for rec in done), default=0) + 1):
            todo = [i for i, rec in enumerate(done) if rec.rounds >= round_]
            rounds = [done[i].history[round_ - 1] for i in todo]
            asked = [r.query_prompt for r in rounds]
            for i, r, item, key in zip(todo, rounds, tr.prompts(asked),
                                       _keys(done.generator, asked, done.query_decoding)):
                steps[i].append(traces.step("search queries", {"round": round_},
                                            {"completion": r.reply, "queries": r.queries, "marker used": r.marked},
                                            [traces.call("generate", key, prompt=item)]))
                gold = set(r.references.gold)
                steps[i].append(traces.step("retrieval", {"round": round_, "queries": r.queries},
                                            {"references": [{"n": n, "id": getattr(p, "id", None), "title": p.title,
                                                             "gold": n in gold}
                                                            for n, p in enumerate(r.references.paragraphs, 1)]},
                                            [_retrieve(q, done.retriever, hs) for q, hs in zip(r.queries, r.hits)]))
            answered = [r.answer_prompt for r in rounds]
            for i, r, item, key in zip(todo, rounds, tr.prompts(answered),
                                       _keys(done.generator, answered, done.decoding)):
                steps[i].append(traces.step("answer", {"round": round_, "may refuse": r.may_refuse},
                                            {"completion": r.answer, "refused": is_refusal(r.answer)},
                                            [traces.call("generate", key, prompt=item)]))
            _completion_write(tr, examples, done, steps, [i for i in todo if done[i].rounds == round_])


def _completion_write(tr: Any, examples: Sequence[Example], records: Sequence[Any], steps: list[list[dict]],
                      done: Sequence[int]) -> None:
    """Write the self-completion records of the questions `done` (settled in the same round)."""
    for i in done:
        ex, rec, st = examples[i], records[i], steps[i]
        tr.write({"id": ex.id, "question": ex.question, "gold": list(ex.answers), "prediction": rec.answer,
                  "correct": em(rec.answer, ex),
                  "before": {"prediction": rec.reflected_answer, "correct": em(rec.reflected_answer, ex)},
                  "flags": {"refused": rec.refused, "rounds": rec.rounds, "parse_failures": rec.unmarked,
                            "still refusing": is_refusal(rec.answer)},
                  "steps": st})


# --------------------------------------------------------------------------- key facts by the paper's prompts (§3)


def write_key_fact_run(tracer: traces.Tracer, run: KeyFactExtraction) -> None:
    """The paper's two-step key-fact construction (§3) per question, from a `KeyFactExtraction`: reasoning steps,
    then the key facts parsed."""
    model, examples = _name(run.generator), run.examples
    with tracer.open_run(PAPER, "key-fact extraction", f"Key facts by the paper's prompts (§3), {model}",
                         KEY_FACT_STEPS, {"max_new_tokens": run.decoding["max_new_tokens"], "questions": len(examples)},
                         model=model, label=model) as tr:
        k1 = _keys(run.generator, run.prompts, run.decoding)
        k2 = _keys(run.generator, run.fact_prompts, run.decoding)
        rows = zip(examples, tr.prompts(run.prompts), k1, run.reasoning, tr.prompts(run.fact_prompts), k2,
                   run.replies, run.key_facts)
        for ex, p1, key1, r, p2, key2, reply, facts in rows:
            tr.write({"id": ex.id, "question": ex.question, "gold": list(ex.answers), "prediction": "\n".join(facts),
                      "correct": None, "flags": {"parse_failures": int(not facts)},
                      "steps": [traces.step("reasoning steps", {"answer": ex.answer}, {"completion": r},
                                            [traces.call("generate", key1, prompt=p1)]),
                                traces.step("key facts", {}, {"completion": reply, "key_facts": facts,
                                                              "parsed": len(facts)},
                                            [traces.call("generate", key2, prompt=p2)])]})
