"""The §5 improvements: self-reflection (refuse when the references are insufficient) and self-completion.

`self_complete` returns every question's path (prompts, replies, hits, round by round) for its trace
(`credibility.trace.write`); it writes none itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from covlib.core import stats
from covlib.core.records import Example
from covlib.generation import Generator
from covlib.retrieval import Hit, Retriever

from covlib.papers.credibility.answers import Answers, Run, generate_answers
from covlib.papers.credibility.claims import (INSTRUCTION_SCOPE, JUDGE_BOUND, RLHF_SCOPE, estimate, outside, parameter_count,
                                              size_label, size_tiers, untestable)
from covlib.papers.credibility.intervals import reflection_correct
from covlib.papers.credibility.prompts import QUERY_MARKER, completion_prompt, is_refusal
from covlib.papers.credibility.references import ReferenceSet, hits_set, partial, rng, with_gold


# --------------------------------------------------------------------------- self-reflection (§5.1)


def reflection_sets(examples: Sequence[Example], n_refs: int = 5, seed: int = 0) -> list[ReferenceSet]:
    """Half the questions (seeded) get complete references, half partial ones: equal groups, as §6.4 says."""
    order = list(range(len(examples)))
    rng(seed, "reflection-groups").shuffle(order)
    partial_ids = set(order[: len(examples) // 2])
    return [partial(ex, n_refs, seed) if i in partial_ids else with_gold(ex, n_refs, seed)
            for i, ex in enumerate(examples)]


def reflection_scores(refused: Sequence[bool], insufficient: Sequence[bool]) -> dict[str, float]:
    """Accuracy and F1 (%) of refusing exactly when the references are partial; refusal is the positive class."""
    from sklearn.metrics import accuracy_score, f1_score, precision_score, recall_score

    y, p = [bool(x) for x in insufficient], [bool(x) for x in refused]
    if len(y) != len(p) or not y:
        raise ValueError(f"{len(p)} decisions against {len(y)} labels")
    return {"accuracy": 100 * accuracy_score(y, p), "f1": 100 * f1_score(y, p, zero_division=0),
            "precision": 100 * precision_score(y, p, zero_division=0),
            "recall": 100 * recall_score(y, p, zero_division=0), "refusal_rate": 100 * float(np.mean(p)), "n": len(y)}


# --------------------------------------------------------------------------- self-completion (§5.2)


def _clean_query(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line.strip().strip("\"'“”*").strip()


def parse_queries(text: str, limit: int = 3) -> tuple[list[str], bool]:
    """(queries, whether the marker was used): the text after each "I further need to ask the search engine:",
    or, when the model left the marker out, its first line (a model that ignores the format still gets a search)."""
    parts = re.split(re.escape(QUERY_MARKER), text or "", flags=re.IGNORECASE)
    marked = len(parts) > 1
    found = [_clean_query(p) for p in (parts[1:] if marked else parts[:1])]
    return list(dict.fromkeys(q for q in found if re.search(r"\w", q)))[:limit], marked


@dataclass
class CompletionRound:
    """One ask-and-retrieve round of one question: the prompt asking for search queries and the model's reply, the
    queries parsed from it (`marked`: the reply used the query marker), each query's hits, the references after the
    round, and the answer prompt and answer over them (`may_refuse`: the prompt still let the model refuse)."""

    query_prompt: str
    reply: str
    queries: list[str]
    marked: bool
    hits: list[list[Hit]]
    references: ReferenceSet
    answer_prompt: str = ""
    answer: str = ""
    may_refuse: bool = True


@dataclass
class Completed:
    """One question through the improved pipeline: the references it ended with, the queries asked, per round; and
    how it got there (BM25's first hits, the reflection prompt, every round), which its trace shows."""

    question_id: str
    references: ReferenceSet
    answer: str
    queries: list[list[str]] = field(default_factory=list)
    reflected_answer: str = ""
    refused: bool = False
    rounds: int = 0  # completion rounds used: 0 answered at once, max_rounds reached the cap
    unmarked: int = 0  # rounds whose reply lacked the query marker (its first line was searched instead)
    reflected_references: ReferenceSet | None = None  # what the reflection saw: BM25's top k_initial for the question
    initial_hits: list[Hit] = field(default_factory=list)  # those BM25 hits, with their scores
    reflection_prompt: str = ""
    history: list[CompletionRound] = field(default_factory=list)

    @property
    def prompt(self) -> str:
        """The prompt `answer` replies to: the last round's answer prompt, or the reflection prompt (answered at once)."""
        return self.history[-1].answer_prompt if self.history else self.reflection_prompt


COMPLETION_ROUNDS = 3  # default cap on self-completion rounds (ours: §5.2 iterates until the model is satisfied, no cap given)
QUERY_DECODING = {"max_new_tokens": 64, "chat": True}  # the prompt-completion call (search queries)


class SelfCompletion(list):
    """`self_complete`'s records (a list of `Completed`, one per question) and the run's settings: the generator,
    questions, retriever (its name), k_initial, cap, max_rounds and the decoding of the answer and query calls."""

    def __init__(self, records: Sequence[Completed], generator: Generator, examples: Sequence[Example], retriever: str,
                 k_initial: int, cap: int, max_rounds: int, decoding: dict[str, Any],
                 query_decoding: dict[str, Any]) -> None:
        super().__init__(records)
        self.generator = generator
        self.examples = list(examples)
        self.retriever = retriever
        self.k_initial, self.cap, self.max_rounds = k_initial, cap, max_rounds
        self.decoding = dict(decoding)
        self.query_decoding = dict(query_decoding)

    @property
    def model(self) -> str:
        """The generator's name."""
        return getattr(self.generator, "name", type(self.generator).__name__)

    def run(self) -> Run:
        """The final answers as a run for `score_runs` (each with the prompt it replies to) and their references."""
        refs = [r.references for r in self]
        return Answers([r.answer for r in self], self.generator, self.examples, refs, [r.prompt for r in self],
                       self.decoding), refs


def self_complete(generator: Generator, examples: Sequence[Example], retriever: Retriever, k_initial: int = 5,
                  cap: int = 10, max_rounds: int = COMPLETION_ROUNDS, max_new_tokens: int = 160,
                  progress: bool = True) -> SelfCompletion:
    """Self-completion (§5.2), iterated "until the LLM believes that it possesses a comprehensive set of knowledge".

    The model reflects on BM25's top `k_initial` references for the question. Where it refuses,
    a round asks it for search queries (prompt-completion), adds their passages and asks again,
    still free to refuse; rounds repeat while it refuses, at most `max_rounds` (>= 1). The last
    allowed round's answer is asked without the refusal clause: at the cap the model must answer.
    `Completed.rounds` is the number of rounds a question used (0: it answered at once).

    References (ours where the paper is silent; it caps every pipeline at 10): each round adds at
    most ceil((cap - k_initial) / max_rounds) new passages from its queries (their rankings
    interleaved), so that later rounds have room; after every round the question's own BM25
    ranking fills the list up to `cap`, and a later round's finds take that filler's place.
    With `max_rounds=1` one round adds up to cap - k_initial passages. One batched generate
    call per step and round over the questions still refusing.

    Each record keeps its prompts, replies and hits round by round (`Completed.history`), so that
    `credibility.trace.write` can trace the run once it returns (generation is cached: a rerun after a
    crash costs no model call); `.run()` gives the final answers for `score_runs`.
    """
    if not 1 <= k_initial <= cap or max_rounds < 1:
        raise ValueError(f"need 1 <= k_initial <= cap and max_rounds >= 1, got k_initial={k_initial}, cap={cap}, "
                         f"max_rounds={max_rounds}")
    ranked = retriever.search_batch([ex.question for ex in examples], k=cap)
    refs = [hits_set(ex, "self-completion", [h.passage for h in hs[:k_initial]]) for ex, hs in zip(examples, ranked)]
    reflected = generate_answers(generator, examples, refs, reflection=True, max_new_tokens=max_new_tokens,
                                 progress=progress, desc="reflect")
    records = [Completed(ex.id, r, a, reflected_answer=a, refused=is_refusal(a), reflected_references=r,
                         initial_hits=list(hs[:k_initial]), reflection_prompt=p)
               for ex, r, a, hs, p in zip(examples, refs, reflected, ranked, reflected.prompts)]
    todo = [i for i, rec in enumerate(records) if rec.refused]
    budget = -(-(cap - k_initial) // max_rounds)  # new passages a round may add
    found_by: dict[int, list[Any]] = {i: [] for i in todo}  # what the queries brought, in round order
    for round_ in range(1, max_rounds + 1):
        if not todo:
            break
        asked_prompts = [completion_prompt(examples[i].question, records[i].references.paragraphs) for i in todo]
        asked = generator.generate(asked_prompts, **QUERY_DECODING, progress=progress, desc=f"queries (round {round_})")
        parsed = {i: parse_queries(c[0].text) for i, c in zip(todo, asked)}
        queries = {i: q for i, (q, _) in parsed.items()}
        flat = [(i, q) for i in todo for q in queries[i]]
        found = retriever.search_batch([q for _, q in flat], k=cap) if flat else []
        hits_of: dict[int, list[list[Hit]]] = {}
        for (i, _), hs in zip(flat, found):
            hits_of.setdefault(i, []).append(list(hs))
        for i, prompt, c in zip(todo, asked_prompts, asked):
            rec = records[i]
            rec.queries.append(queries[i])
            rec.unmarked += not parsed[i][1]
            rec.rounds = round_
            initial, mine = list(refs[i].paragraphs), found_by[i]
            seen = {getattr(p, "id", None) or p.title for p in initial + mine}
            room = min(budget, cap - len(initial) - len(mine))
            lists = [[h.passage for h in hs] for hs in hits_of.get(i, [])]
            for rank in range(cap):  # interleave the queries' rankings
                for hits in lists:
                    if room > 0 and rank < len(hits) and hits[rank].id not in seen:
                        mine.append(hits[rank]); seen.add(hits[rank].id); room -= 1
            have = initial + mine
            for h in ranked[i]:  # the question's own ranking fills what is left
                if len(have) >= cap:
                    break
                if h.passage.id not in seen:
                    have.append(h.passage); seen.add(h.passage.id)
            rec.references = hits_set(examples[i], "self-completion", have)
            rec.history.append(CompletionRound(prompt, c[0].text, queries[i], parsed[i][1], hits_of.get(i, []),
                                               rec.references))
        last = round_ == max_rounds
        final = generate_answers(generator, [examples[i] for i in todo], [records[i].references for i in todo],
                                 reflection=not last, max_new_tokens=max_new_tokens, progress=progress,
                                 desc=f"answer (round {round_})")
        for i, a, p in zip(todo, final, final.prompts):
            records[i].answer = a
            step = records[i].history[-1]
            step.answer_prompt, step.answer, step.may_refuse = p, a, not last
        todo = [] if last else [i for i in todo if is_refusal(records[i].answer)]
    return SelfCompletion(records, generator, examples, getattr(retriever, "name", type(retriever).__name__), k_initial,
                          cap, max_rounds, reflected.decoding, QUERY_DECODING)


# --------------------------------------------------------------------------- the claims ledger's records (notebook 07)


def _above_chance(g: Generator, replies: Sequence[str], insufficient: Sequence[bool], scope: str,
                  meta: dict[str, Any]) -> dict[str, Any]:
    """`cred-reflection-above-chance` for one model: outside the claim, no reply, or an exact binomial test (a
    constant decision too: it is a measured absence of discrimination, said in the record's note)."""
    name, n = g.name, len(replies)
    refused = [is_refusal(a) for a in replies]
    k, partial_share = sum(refused), float(np.mean(insufficient))
    why = outside(INSTRUCTION_SCOPE, g)
    if not why and not any((a or "").strip() for a in replies):
        why = f"{name} replied with no text to any of the {n} questions: self-reflection produced no answer"
    if why:
        return untestable("cred-reflection-above-chance", why, scope=scope, model=name, refused=k, **meta)
    chance = max(partial_share, 1 - partial_share)  # the better constant decision (0.5 with equal groups)
    est = stats.above_chance(reflection_correct(refused, insufficient), chance=chance, scale=100)
    if k in (0, n):  # a constant decision is measured: no discrimination at all, not a missing measurement
        meta = {**meta, "constant_decision": True, "note": (f"{name} refused {k} of {n} questions ({sum(map(bool, insufficient))} had partial "
                                 "references): the same decision every time, so self-reflection did not "
                                 "discriminate; " + str(meta.get("note", ""))).rstrip("; ")}
    return estimate("cred-reflection-above-chance", scope, est, "accuracy points above chance", model=name,
                           refused=k, **meta)


def _by_size(generators: Sequence[Generator], correct: dict[str, list[float]], scope: str, seed: int,
             meta: dict[str, Any]) -> list[dict[str, Any]]:
    """`cred-reflection-tracks-strength`: the largest models − the smallest (and each size − the next smaller)."""
    counted = {g.name: parameter_count(g) for g in generators}  # listed smallest first, whatever the given order
    sizes = dict(sorted(counted.items(), key=lambda kv: (kv[1][0] is None, kv[1][0] or 0.0, kv[0])))
    ran = "; ".join(f"{n} {size_label(s) if s is not None else 'of unknown size'} ({how})" for n, (s, how) in sizes.items())
    tiers = size_tiers({n: s for n, (s, _) in sizes.items()})
    meta = {"model": ", ".join(m for _, ms in tiers for m in ms) or ", ".join(sizes), "sizes": ran, **meta}
    if len(tiers) < 2:
        return [untestable("cred-reflection-tracks-strength", f"needs models of 2 or more distinct known sizes "
                                  f"(ran {len(sizes)}: {ran})", scope=f"strongest vs weakest, {scope}", **meta)]

    def compare(role: str, hi: tuple[str, list[str]], lo: tuple[str, list[str]]) -> dict[str, Any]:
        pooled = [np.mean([correct[m] for m in ms], axis=0) for _, ms in (hi, lo)]
        where = f"{hi[0]} ({', '.join(hi[1])}) − {lo[0]} ({', '.join(lo[1])})"
        return estimate("cred-reflection-tracks-strength", f"{role}, {scope}, {where}",
                               stats.paired_difference(*pooled, scale=100, seed=seed), "accuracy points", **meta)

    out = [compare("strongest vs weakest", tiers[-1], tiers[0])]
    if len(tiers) > 2:
        out += [compare("next size up", tiers[i + 1], tiers[i]) for i in range(len(tiers) - 1)]
    return out


def reflection_claims(generators: Sequence[Generator], replies: dict[str, Sequence[str]],
                      insufficient: Sequence[bool], scope: str, seed: int = 0, **meta: Any) -> list[dict[str, Any]]:
    """Self-reflection's records: `cred-reflection-above-chance` per model, `cred-reflection-tracks-strength` by size."""
    out = [_above_chance(g, replies[g.name], insufficient, scope, meta) for g in generators]
    correct = {g.name: reflection_correct([is_refusal(a) for a in replies[g.name]], insufficient) for g in generators}
    return out + _by_size(generators, correct, scope, seed, meta)


def completion_claims(generators: Sequence[Generator], completed: dict[str, Sequence[Completed]],
                      gain: dict[str, dict[str, Any]], scope: str, k_initial: int, cap: int,
                      **meta: Any) -> list[dict[str, Any]]:
    """`cred-self-completion-helps` per model: the paired F1 gain `gain[name]`, or why it is not testable here.

    Not testable: a model outside the claim (not RLHF-tuned by its card, or no card), or one on
    which self-completion never ran (it refused no question, or no round yielded a query).
    """
    out = []
    for g in generators:
        done = completed[g.name]
        refused, asked = sum(d.refused for d in done), sum(any(q for q in d.queries) for d in done)
        why = outside(RLHF_SCOPE, g)
        if not why and not refused:
            why = (f"{g.name} refused 0 of {len(done)} questions, so self-completion never ran (a gap here would "
                   f"come from answering from the top {k_initial} references, not the top {cap})")
        if not why and not asked:
            why = (f"{g.name} refused {refused} of {len(done)} questions but no completion round yielded a search "
                   "query (0 asked), so self-completion retrieved nothing")
        counts = {"model": g.name, "refused": refused, "asked": asked, **meta}
        out.append(untestable("cred-self-completion-helps", why, scope=scope, **counts) if why else
                   estimate("cred-self-completion-helps", scope, gain[g.name],
                                   "key-fact F1 points (per-question mean)", judge_bound=JUDGE_BOUND, **counts))
    return out
