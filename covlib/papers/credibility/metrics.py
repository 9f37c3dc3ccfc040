"""The §4 metrics of one cited answer: key-fact recall and precision, citation precision and recall, self-consistency."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from covlib import nli
from covlib.core.metrics import accuracy_contains
from covlib.core.records import passage_string
from covlib.core.references import CitedSentence, cited_ids, cited_sentences, strip_citations

from covlib.papers.credibility.key_facts import KeyFacts
from covlib.papers.credibility.references import ReferenceSet


# --------------------------------------------------------------------------- metrics (§4)


def citation_scores(cited: Sequence[int], gold: Sequence[int], n_refs: int) -> dict[str, float]:
    """Citation precision |Cm∩Cg|/|Cm| (0 when nothing is cited) and recall |Cm∩Cg|/|Cg| (NaN without gold refs).

    Cm is the union of cited ids, invalid ones included (they lower precision); `invalid` counts
    the distinct cited ids outside 1..n_refs.
    """
    cm, cg = set(cited), set(gold)
    hit = len(cm & cg)
    return {
        "cit_precision": hit / len(cm) if cm else 0.0,
        "cit_recall": hit / len(cg) if cg else float("nan"),
        "invalid_citations": float(sum(1 for i in cm if not 1 <= i <= n_refs)),
    }


def f1(p: float, r: float) -> float:
    """Harmonic mean of two rates (0 when both are 0)."""
    return 2 * p * r / (p + r) if p + r > 0 else 0.0


def plain_answer(answer: str) -> str:
    """The answer as key-fact recall reads it: its sentences without citation marks."""
    return " ".join(s.text for s in cited_sentences(answer)) or strip_citations(answer)


def score_answers(answers: Sequence[str], ref_sets: Sequence[ReferenceSet], key_facts: Sequence[KeyFacts],
                  golds: Sequence[Sequence[str]], judge: nli.Judge | str | None = None,
                  progress: bool = True) -> list[dict[str, Any]]:
    """Per-answer metrics of §4 with three batched, cached NLI calls (one per metric).

    - key-fact recall R = (1/|K|) Σ_k f(answer, k): premise the whole answer (citations
      stripped), hypothesis each key fact;
    - key-fact precision P = (1/|S|) Σ_s [∃k f(s, k)]: premise the answer sentence s,
      hypothesis each key fact (0 for an answer with no sentence; R and P are NaN, left out
      of the means, for a question with no key fact);
    - self-consistency SC = (1/n) Σ_i f(concat(refs cited by s_i), s_i): premise the
      concatenated cited references as the model saw them ('Title: text', as ALCE judges),
      hypothesis the sentence; `sc_cited` averages over
      sentences with a citation (NaN when none has one), `sc_all` over all sentences
      (an uncited sentence, or one citing only missing references, scores 0);
    - citation precision / recall (`citation_scores`) and EM-recall (a gold answer string
      contained in the answer as whole words, citation marks stripped first).

    f is the judge's own decision (`nli.entailed`: argmax, P > 0.5 for a two-label judge, or the
    judge's calibrated threshold when it has one).
    """
    return score_details(answers, ref_sets, key_facts, golds, judge, progress)[0]


def score_details(answers: Sequence[str], ref_sets: Sequence[ReferenceSet], key_facts: Sequence[KeyFacts],
                  golds: Sequence[Sequence[str]], judge: nli.Judge | str | None = None,
                  progress: bool = True) -> tuple[list[dict[str, Any]], list[dict[str, list]]]:
    """`score_answers`' rows and, per answer, the NLI pairs it judged by metric (`recall`, `precision`, `sc`):
    (indices, premise, hypothesis, probabilities, decision) tuples, for a trace."""
    n = len(answers)
    if not n == len(ref_sets) == len(key_facts) == len(golds):
        raise ValueError(f"{n} answers, {len(ref_sets)} reference sets, {len(key_facts)} key-fact records, "
                         f"{len(golds)} gold answer lists: they must line up")
    for refs, kf in zip(ref_sets, key_facts):
        if refs.question_id != kf.question_id:
            raise ValueError(f"reference set of {refs.question_id!r} lined up with key facts of {kf.question_id!r}")
    judge = nli.get_judge(judge)
    sentences: list[list[CitedSentence]] = [cited_sentences(a) for a in answers]
    plain = [plain_answer(a) for a in answers]
    # 1. recall: (answer, key fact)
    rec_pairs = [(i, plain[i], k) for i in range(n) if plain[i].strip() for k in key_facts[i].key_facts]
    # 2. precision: (sentence, key fact)
    pre_pairs = [(i, j, s.text, k) for i in range(n) for j, s in enumerate(sentences[i]) for k in key_facts[i].key_facts]
    # 3. self-consistency: (concat cited refs, sentence)
    sc_pairs = []
    for i, (ss, refs) in enumerate(zip(sentences, ref_sets)):
        for j, s in enumerate(ss):
            cited = [refs.paragraphs[c - 1] for c in s.citations if 1 <= c <= len(refs)]
            if cited:
                sc_pairs.append((i, j, " ".join(passage_string(p) for p in cited), s.text))  # 'Title: text', as shown
    rec_p = nli.probabilities([p[1] for p in rec_pairs], [p[2] for p in rec_pairs], judge, progress)
    pre_p = nli.probabilities([p[2] for p in pre_pairs], [p[3] for p in pre_pairs], judge, progress)
    sc_p = nli.probabilities([p[2] for p in sc_pairs], [p[3] for p in sc_pairs], judge, progress)
    rec, pre, sc = (nli.entailed(p, judge) for p in (rec_p, pre_p, sc_p))
    details: list[dict[str, list]] = [{"recall": [], "precision": [], "sc": []} for _ in range(n)]
    for name, pairs, probs, got in (("recall", rec_pairs, rec_p, rec), ("precision", pre_pairs, pre_p, pre),
                                    ("sc", sc_pairs, sc_p, sc)):
        for pair, p, v in zip(pairs, np.asarray(probs, dtype=float).reshape(-1, 3), got):
            details[pair[0]][name].append((*pair, [float(x) for x in p], bool(v)))
    rec_by: dict[int, list[float]] = {}
    for (i, *_), v in zip(rec_pairs, rec):
        rec_by.setdefault(i, []).append(v)
    sent_hit: dict[tuple[int, int], float] = {}
    for (i, j, *_), v in zip(pre_pairs, pre):
        sent_hit[(i, j)] = max(sent_hit.get((i, j), 0.0), v)
    sc_hit = {(i, j): v for (i, j, *_), v in zip(sc_pairs, sc)}
    judged: list[dict[str, list]] = [{"recall_pairs": [], "precision_pairs": []} for _ in range(n)]
    for (i, premise, fact), v in zip(rec_pairs, rec):  # each decision with its pair's stratum, for `judge_corrected`
        judged[i]["recall_pairs"].append([nli.stratum(premise, fact), bool(v)])
    for (i, j, premise, fact), v in zip(pre_pairs, pre):
        judged[i]["precision_pairs"].append([j, nli.stratum(premise, fact), bool(v)])
    rows = []
    for i in range(n):
        ss, refs = sentences[i], ref_sets[i]
        n_s, cited_n = len(ss), sum(1 for s in ss if s.citations)
        if key_facts[i].key_facts:
            recall = float(np.mean(rec_by.get(i, [0.0])))
            precision = sum(sent_hit.get((i, j), 0.0) for j in range(n_s)) / n_s if n_s else 0.0
        else:  # nothing to recall (an LLM list that parsed to nothing): left out of the means
            recall = precision = float("nan")
        sc_sum = sum(sc_hit.get((i, j), 0.0) for j in range(n_s))
        rows.append({
            "question_id": refs.question_id,
            "recall": recall,
            "precision": precision,
            "f1": f1(precision, recall) if key_facts[i].key_facts else float("nan"),
            "sc_cited": sc_sum / cited_n if cited_n else float("nan"),
            "sc_all": sc_sum / n_s if n_s else 0.0,
            **citation_scores(cited_ids(ss), refs.gold, len(refs)),
            "em_recall": accuracy_contains(strip_citations(answers[i]), golds[i]),
            "n_sentences": n_s,
            "n_cited_sentences": cited_n,
            "n_key_facts": len(key_facts[i].key_facts),
            "judge": judge.name,
            **judged[i],
        })
    return rows, details


def _nanmean(values: Sequence[float]) -> float:
    v = np.asarray(values, dtype=float)
    return float(np.nanmean(v)) if np.isfinite(v).any() else float("nan")


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Means in % over questions: P, R, F1 two ways, SC two ways, citation P/R, EM-recall; and counts.

    `f1_mean` is the mean of per-question F1, `f1_of_means` the F1 of mean P and mean R
    (the paper's Table 1 matches neither exactly; both are shown).
    """
    if not rows:
        raise ValueError("nothing to summarize")
    m = {k: 100 * _nanmean([r[k] for r in rows]) for k in
         ("precision", "recall", "f1", "sc_cited", "sc_all", "cit_precision", "cit_recall", "em_recall")}
    return {
        "P": m["precision"], "R": m["recall"], "F1_mean": m["f1"], "F1_of_means": f1(m["precision"], m["recall"]),
        "SC_cited": m["sc_cited"], "SC_all": m["sc_all"], "CitP": m["cit_precision"], "CitR": m["cit_recall"],
        "EM_recall": m["em_recall"], "n": len(rows),
        "invalid_citations": int(sum(r["invalid_citations"] for r in rows)),
        "mean_sentences": float(np.mean([r["n_sentences"] for r in rows])),
        "judge": rows[0]["judge"],
    }
