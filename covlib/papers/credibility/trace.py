"""Trace records of the credibility paper's runs: cited answers with their §4 metrics, self-reflection, self-completion, key facts.

A run's records are built here from what the methods computed (`answers`, `improvements`, `key_facts` call these
only when a trace is open). Answers are generated in one call (`answer_runs`) and scored in another
(`score_runs`): `remember` keeps, while tracing is on, each generated answer's prompt and cache key so that the
scored run's trace shows the whole path of an answer.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from covlib.core import traces
from covlib.core.metrics import accuracy_contains
from covlib.core.records import Example
from covlib.core.references import cited_sentences, strip_citations
from covlib.generation import call_keys
from covlib.nli.scoring import pair_keys

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

_GENERATED: dict[str, Any] = {"folder": None, "items": {}}


def _ref_ids(paragraphs: Sequence[Any]) -> tuple[str, ...]:
    return tuple(getattr(p, "id", None) or p.title for p in paragraphs)


def _number(value: Any) -> float | None:
    return float(value) if value is not None and math.isfinite(float(value)) else None


def _key(keys: Sequence[Any]) -> str | None:
    return keys[0] if keys else None


def _name(generator: Any) -> str:
    return getattr(generator, "name", type(generator).__name__)


def remember(generator: Any, examples: Sequence[Example], ref_sets: Sequence[Any], prompts: Sequence[str],
             answers: Sequence[str], max_new_tokens: int) -> None:
    """Keep (while tracing) each answer's prompt and cache key, for the trace of the run that scores it."""
    folder = traces.active()
    if folder is None:
        return
    if _GENERATED["folder"] != folder:
        _GENERATED.update(folder=folder, items={})
    keys = call_keys(generator, list(prompts), max_new_tokens=max_new_tokens, chat=True)
    for ex, refs, prompt, answer, key in zip(examples, ref_sets, prompts, answers, keys):
        _GENERATED["items"][(_name(generator), ex.id, _ref_ids(refs.paragraphs), answer)] = (prompt, _key(key))


def generated(model: str, question_id: str, refs: Any, answer: str) -> tuple[str, str | None] | None:
    """The (prompt, cache key) `remember` kept for this answer, or None."""
    if _GENERATED["folder"] != traces.active():
        return None
    return _GENERATED["items"].get((model, question_id, _ref_ids(refs.paragraphs), answer))


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
                  detail: dict[str, list], judge: Any, prompt: Any) -> dict[str, Any]:
    """One cited answer's record: references, answer, citations, key facts with their NLI verdicts, §4 metrics."""
    kept = generated(model, ex.id, refs, answer)
    gen_call = traces.call("generate", kept[1] if kept else None, prompt=prompt)
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


def write_answer_run(model: str, setting: Any, answers: Sequence[str], ref_sets: Sequence[Any],
                     examples: Sequence[Example], facts: Sequence[Any], rows: Sequence[dict],
                     details: Sequence[dict], judge: Any) -> None:
    """One trace file for one (model, reference set): every answer's record, written as it is assembled."""
    name = setting_name(setting, ref_sets)
    sizes = sorted({len(r) for r in ref_sets})
    source = facts[0].source if facts else ""
    params = {"references": name, "kind": ref_sets[0].kind if ref_sets else "", "n_refs": sizes,
              "key_facts": source, "key_facts_author": facts[0].author if facts else "",
              "judge": getattr(judge, "name", str(judge)), "questions": len(examples)}
    title = f"Cited answers, {name} references, {model} (key facts: {source})"
    with traces.open_run(PAPER, "cited answer", title, ANSWER_STEPS, params, model=model,
                         label=f"{name}-{source}-{model}") as tr:
        if not tr:
            return
        prompts = []
        for ex, refs, a in zip(examples, ref_sets, answers):
            kept = generated(model, ex.id, refs, a)
            prompts.append(kept[0] if kept else None)
        stored = tr.prompts([p for p in prompts if p is not None])
        items = iter(stored)
        for ex, refs, kf, a, row, d, p in zip(examples, ref_sets, facts, answers, rows, details, prompts):
            tr.write(answer_record(model, ex, refs, kf, a, row, d, judge, next(items) if p is not None else None))


def write_reflection_run(generator: Any, examples: Sequence[Example], ref_sets: Sequence[Any],
                         prompts: Sequence[str], answers: Sequence[str], max_new_tokens: int) -> None:
    """Self-reflection (§5.1): per question the references, the reflection prompt and reply, refused or not;
    correct = 1 when it refused exactly when a gold reference was missing (reflection accuracy)."""
    model = _name(generator)
    params = {"kinds": sorted({r.kind for r in ref_sets}), "n_refs": sorted({len(r) for r in ref_sets}),
              "max_new_tokens": max_new_tokens, "questions": len(examples)}
    with traces.open_run(PAPER, "self-reflection", f"Self-reflection (§5.1), {model}", REFLECTION_STEPS, params,
                         model=model, label=model) as tr:
        if not tr:
            return
        keys = call_keys(generator, list(prompts), max_new_tokens=max_new_tokens, chat=True)
        for ex, refs, item, key, a in zip(examples, ref_sets, tr.prompts(prompts), keys, answers):
            short = insufficient(ex, refs)
            refused = is_refusal(a)
            right = "refuse (a gold reference is missing)" if short else "answer (every gold reference is shown)"
            step = traces.step("self-reflection", {"insufficient": short},
                               {"completion": a, "refused": refused, "right decision": right if short is not None
                                else None}, [traces.call("generate", _key(key), prompt=item)])
            tr.write({"id": ex.id, "question": ex.question, "gold": [right] if short is not None else [],
                      "prediction": a, "correct": None if short is None else float(refused == short),
                      "flags": {"refused": refused}, "steps": [references_step(ex, refs), step]})


def _retrieve(query: str, retriever: Any, hits: Sequence[Any], text: bool = True) -> dict[str, Any]:
    return traces.call("retrieve", None, query=query, retriever=getattr(retriever, "name", type(retriever).__name__),
                       passages=[{"id": h.passage.id, "title": h.passage.title, "score": float(h.score),
                                  **({"text": h.passage.text[:TEXT_CAP]} if text else {})} for h in hits])


def em(answer: str, ex: Example) -> float:
    """EM-recall of one answer: a gold answer string inside it, citation marks stripped."""
    return float(accuracy_contains(strip_citations(answer), ex.answers))


def completion_start(tr: Any, generator: Any, examples: Sequence[Example], retriever: Any, ranked: Sequence[Any],
                     refs: Sequence[Any], prompts: Sequence[str], answers: Sequence[str],
                     max_new_tokens: int) -> list[list[dict]]:
    """Each question's first two self-completion steps: BM25's references for the question, the reflection."""
    keys = call_keys(generator, list(prompts), max_new_tokens=max_new_tokens, chat=True)
    out = []
    for ex, hs, r, item, key, a in zip(examples, ranked, refs, tr.prompts(prompts), keys, answers):
        shown = references_step(ex, r)
        shown["calls"] = [_retrieve(ex.question, retriever, hs[:len(r)], text=False)]  # texts: in the outputs
        out.append([shown, traces.step("self-reflection", {}, {"completion": a, "refused": is_refusal(a)},
                                       [traces.call("generate", _key(key), prompt=item)])])
    return out


def completion_round(tr: Any, generator: Any, steps: list[list[dict]], todo: Sequence[int], round_: int,
                     prompts: Sequence[str], replies: Sequence[str], parsed: dict[int, tuple[list[str], bool]],
                     flat: Sequence[tuple[int, str]], found: Sequence[Any], retriever: Any,
                     references: Sequence[Any]) -> None:
    """A round's query and retrieval steps for the questions still refusing (appended to `steps`)."""
    keys = call_keys(generator, list(prompts), max_new_tokens=64, chat=True)
    for i, item, key, reply in zip(todo, tr.prompts(prompts), keys, replies):
        queries, marked = parsed[i]
        steps[i].append(traces.step("search queries", {"round": round_},
                                    {"completion": reply, "queries": queries, "marker used": marked},
                                    [traces.call("generate", _key(key), prompt=item)]))
        calls = [_retrieve(q, retriever, hs) for (j, q), hs in zip(flat, found) if j == i]
        refs = references[i]
        steps[i].append(traces.step("retrieval", {"round": round_, "queries": queries},
                                    {"references": [{"n": n, "id": getattr(p, "id", None), "title": p.title,
                                                     "gold": n in set(refs.gold)}
                                                    for n, p in enumerate(refs.paragraphs, 1)]}, calls))


def completion_answers(tr: Any, generator: Any, steps: list[list[dict]], todo: Sequence[int], round_: int,
                       prompts: Sequence[str], answers: Sequence[str], reflection: bool, max_new_tokens: int) -> None:
    """A round's new answers over the completed references (appended to `steps`)."""
    keys = call_keys(generator, list(prompts), max_new_tokens=max_new_tokens, chat=True)
    for i, item, key, a in zip(todo, tr.prompts(prompts), keys, answers):
        steps[i].append(traces.step("answer", {"round": round_, "may refuse": reflection},
                                    {"completion": a, "refused": is_refusal(a)},
                                    [traces.call("generate", _key(key), prompt=item)]))


def completion_write(tr: Any, examples: Sequence[Example], records: Sequence[Any], steps: list[list[dict]],
                     done: Sequence[int]) -> None:
    """Write the self-completion records of the questions `done` settled: before = the answer after self-reflection
    alone; correct = EM-recall (the gold answer string in the answer; the key-fact metrics are in the scored run)."""
    for i in done:
        ex, rec, st = examples[i], records[i], steps[i]
        tr.write({"id": ex.id, "question": ex.question, "gold": list(ex.answers), "prediction": rec.answer,
                  "correct": em(rec.answer, ex),
                  "before": {"prediction": rec.reflected_answer, "correct": em(rec.reflected_answer, ex)},
                  "flags": {"refused": rec.refused, "rounds": rec.rounds, "parse_failures": rec.unmarked,
                            "still refusing": is_refusal(rec.answer)},
                  "steps": st})


def write_key_fact_run(generator: Any, examples: Sequence[Example], prompts: Sequence[str], reasoning: Sequence[str],
                       fact_prompts: Sequence[str], replies: Sequence[str], parsed: Sequence[list[str]],
                       max_new_tokens: int) -> None:
    """The paper's two-step key-fact construction (§3) per question: reasoning steps, then the key facts parsed."""
    model = _name(generator)
    with traces.open_run(PAPER, "key-fact extraction", f"Key facts by the paper's prompts (§3), {model}",
                         KEY_FACT_STEPS, {"max_new_tokens": max_new_tokens, "questions": len(examples)},
                         model=model, label=model) as tr:
        if not tr:
            return
        k1 = call_keys(generator, list(prompts), max_new_tokens=max_new_tokens, chat=True)
        k2 = call_keys(generator, list(fact_prompts), max_new_tokens=max_new_tokens, chat=True)
        rows = zip(examples, tr.prompts(prompts), k1, reasoning, tr.prompts(fact_prompts), k2, replies, parsed)
        for ex, p1, key1, r, p2, key2, reply, facts in rows:
            tr.write({"id": ex.id, "question": ex.question, "gold": list(ex.answers), "prediction": "\n".join(facts),
                      "correct": None, "flags": {"parse_failures": int(not facts)},
                      "steps": [traces.step("reasoning steps", {"answer": ex.answer}, {"completion": r},
                                            [traces.call("generate", _key(key1), prompt=p1)]),
                                traces.step("key facts", {}, {"completion": reply, "key_facts": facts,
                                                              "parsed": len(facts)},
                                            [traces.call("generate", _key(key2), prompt=p2)])]})
