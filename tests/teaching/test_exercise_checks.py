"""The exercises' check cells, without running a notebook: what the grader re-runs in its own process (the code below
`exercises.CHECKS_MARKER`) reads only the recorded values, and the visible checks (the student version of the cell)
catch the likely wrong answers on small literal inputs while the solution passes them."""

from __future__ import annotations

import ast
import builtins
import functools
import math
import re
import zlib
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from covlib.runs import exercises
from teaching.exercises import MARKERS, cell_role, read, strip_solutions

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK_OF = {
    "ex01-consistency": "01_consistency_kde", "ex01-threshold": "01_consistency_kde",
    "ex02-sentences": "02_threshold_ablation", "ex02-predictions": "02_threshold_ablation",
    "ex04-citations": "04_credibility_models", "ex04-recall": "04_credibility_models",
    "ex08-parser": "08_covrag_verifier", "ex08-sigma": "08_covrag_verifier",
    "ex09-avg": "09_covrag_iterations",
}
GRADER_NAMES = {"got", "ref", "math", "exercises"}  # what the grader's trusted process gives the code below the marker


@functools.cache
def cells(ex_id: str) -> tuple[str, str]:
    """(answer cell, checks cell) of one exercise in its solution notebook."""
    nb = read(ROOT / "notebooks" / f"{NOTEBOOK_OF[ex_id]}.ipynb")
    found = {role: cell.source for cell in nb.cells if (r := cell_role(cell)) and r[0] == ex_id for role in [r[1]]}
    return found["answer"], found["checks"]


def split(source: str) -> tuple[str, str]:
    """(above, below) the checks marker line."""
    lines = source.splitlines(keepends=True)
    (at,) = [i for i, line in enumerate(lines) if line.startswith(exercises.CHECKS_MARKER)]
    return "".join(lines[:at]), "".join(lines[at:])


def is_reference_call(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "reference"
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "exercises")


def without_references(code: str) -> ast.Module:
    """The code as the grader runs it in the student's sandbox: every `exercises.reference(...)` statement removed."""
    tree = ast.parse(code)
    tree.body = [s for s in tree.body if not (isinstance(s, (ast.Expr, ast.Assign)) and is_reference_call(s.value))]
    return tree


# --- the shape of every solution check cell --------------------------------------------------------------------------

@pytest.mark.parametrize("ex_id", NOTEBOOK_OF)
def test_checks_marker_once_and_whole_statements(ex_id):
    _, checks = cells(ex_id)
    for name, text in (("solution", checks), ("student version", strip_solutions(checks))):
        marks = [line for line in text.splitlines() if line.startswith(exercises.CHECKS_MARKER)]
        assert len(marks) == 1, f"{ex_id} ({name}): {len(marks)} lines start with {exercises.CHECKS_MARKER!r}, not 1"
        ast.parse(text)  # the student version, hidden blocks deleted, is still valid Python
    for block in re.findall(re.escape(MARKERS[1][0]) + r"\n(.*?)" + re.escape(MARKERS[1][1]), checks, re.S):
        ast.parse(block)  # whole statements


@pytest.mark.parametrize("ex_id", NOTEBOOK_OF)
def test_code_below_the_marker_uses_only_the_recorded_values(ex_id):
    above, below = split(cells(ex_id)[1])
    tree = ast.parse(below)
    bound = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    allowed = GRADER_NAMES | set(dir(builtins)) | bound
    offending = sorted({(n.id, n.lineno) for n in ast.walk(tree)
                        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in allowed})
    offset = above.count("\n")
    assert not offending, f"{ex_id}: below the checks marker, only got, ref, math, exercises and builtins exist in the " \
                          f"grader; found " + ", ".join(f"{name!r} (cell line {line + offset})" for name, line in offending)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("record", "reference"):
            raise AssertionError(f"{ex_id}: exercises.{node.func.attr} below the marker (line {node.lineno + offset})")


@pytest.mark.parametrize("ex_id", NOTEBOOK_OF)
def test_code_above_the_marker_records_for_its_exercise_and_never_reads_ref(ex_id):
    above, _ = split(cells(ex_id)[1])
    tree = ast.parse(above)
    reads = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == "ref" and isinstance(n.ctx, ast.Load)]
    assert not reads, f"{ex_id}: 'ref' is read above the marker (lines {reads}): the grader's sandbox has no reference values"
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and isinstance(n.func.value, ast.Name) and n.func.value.id == "exercises" and n.func.attr in ("record", "reference")]
    assert {n.func.attr for n in calls} >= {"record"}
    for n in calls:
        assert isinstance(n.args[0], ast.Constant) and n.args[0].value == ex_id, f"{ex_id}: line {n.lineno} records for another id"
    whole = {id(s.value) for s in tree.body if isinstance(s, (ast.Expr, ast.Assign))}
    for n in calls:
        if n.func.attr == "reference":  # the grader removes these statements: they must be whole top-level ones
            assert id(n) in whole, f"{ex_id}: exercises.reference on line {n.lineno} is not a statement of its own"


# --- running the visible checks on small stand-ins for the notebook's data -------------------------------------------

def bag_of_words(texts):
    """A stand-in for the MiniLM encoder: unit vectors of hashed word counts (deterministic across processes)."""
    texts = [texts] if isinstance(texts, str) else list(texts)
    out = np.zeros((len(texts), 4096))
    for row, text in zip(out, texts):
        for word in re.findall(r"[a-z]+", text.lower()):
            row[zlib.crc32(word.encode()) % 4096] += 1
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms > 0, norms, 1)


def toy_cot_sc():
    return [SimpleNamespace(id="a", prediction="x", majority=4, wang=3.5),
            SimpleNamespace(id="b", prediction="y", majority=1, wang=0.7)]


def stand_ins(ex_id: str) -> dict:
    """Small literal values for the notebook variables a visible check reads."""
    from covlib.papers import covrag
    from covlib.papers.verify_edit import cot

    if ex_id == "ex01-consistency":
        logprobs = [-1.5, -0.2, -0.3, -1.0, -0.5]  # a tie on votes that the second answer wins on weight
        wang = 5 * (math.exp(-0.2) + math.exp(-0.3)) / sum(map(math.exp, logprobs))
        return {"cot": cot, "r": SimpleNamespace(id="q-example", answers=["Paris", "Lyon", "lyon", "paris", None],
                                                 mean_logprobs=logprobs, majority=2, wang=wang)}
    if ex_id == "ex02-sentences":
        return {"encode": bag_of_words}
    if ex_id == "ex02-predictions":
        return {"cot": cot, "cot_sc": toy_cot_sc(), "S": SimpleNamespace(n_samples=5),
                "edits": {"a": SimpleNamespace(answer="z"), "b": SimpleNamespace(answer=None)}}
    if ex_id == "ex04-recall":
        from covlib import nli
        from covlib.papers import credibility

        answer, facts = "Paris is the capital of France [1]. It lies on the Seine [2].", ["Paris is the capital of France.",
                                                                                          "Paris lies on the Seine."]
        probs = nli.probabilities([credibility.plain_answer(answer)] * 2, facts, "overlap", progress=False)
        recall = float(nli.entailed(probs, "overlap").mean())
        return {"C": credibility, "S": SimpleNamespace(run=SimpleNamespace(judge="overlap")), "names": ["toy"],
                "answers": {"toy": [answer]},
                "facts": [SimpleNamespace(key_facts=facts)], "per_model": {"toy": [{"recall": recall}]}}
    if ex_id in ("ex08-sigma", "ex09-avg"):
        return {"C": covrag}
    return {}


def answer_prelude(answer: str) -> ast.Module:
    """The answer cell without what loads a model (`encode = load_encoder().encode`): imports, constants, the function."""
    tree = ast.parse(answer)
    tree.body = [s for s in tree.body if not (isinstance(s, ast.Assign) and any(isinstance(n, ast.Call) for n in ast.walk(s.value)))]
    return tree


def mutate(answer: str, edits: list[tuple[str, str]]) -> str:
    for old, new in edits:
        assert answer.count(old) == 1, f"the solution changed: {old!r} is not in it exactly once"
        answer = answer.replace(old, new)
    return answer


def namespace(ex_id: str, answer: str) -> dict:
    exercises._RECORDED.clear()
    ns = {"__name__": "__checks__", "math": math, **stand_ins(ex_id)}
    exec(compile(answer_prelude(answer), f"<{ex_id}-answer>", "exec"), ns)
    return ns


def run_visible(ex_id: str, answer: str) -> None:
    """The student's view: the answer, then the check cell with its hidden tests stripped, top to bottom."""
    ns = namespace(ex_id, answer)
    exec(compile(strip_solutions(cells(ex_id)[1]), f"<{ex_id}-checks>", "exec"), ns)


@pytest.fixture(autouse=True)
def _isolated(isolated_cache, monkeypatch):
    monkeypatch.delenv(exercises.ANSWERS_ENV, raising=False)
    yield
    exercises._RECORDED.clear()


@pytest.mark.parametrize("ex_id", NOTEBOOK_OF)
def test_solution_passes_the_visible_checks_in_the_notebook_and_in_the_grader(ex_id):
    answer, checks = cells(ex_id)
    run_visible(ex_id, answer)
    reference = dict(exercises._RECORDED.get((ex_id, "reference"), {}))
    # the grader: the part above the marker in the sandbox (no reference statements), the rest on the JSON alone
    above, below = split(strip_solutions(checks))
    ns = namespace(ex_id, answer)
    exec(compile(without_references(above), f"<{ex_id}-sandbox>", "exec"), ns)
    assert (ex_id, "reference") not in exercises._RECORDED
    got = dict(exercises._RECORDED[(ex_id, "answers")])
    exec(compile(below, f"<{ex_id}-grader>", "exec"),
         {"__builtins__": builtins, "got": got, "ref": reference, "math": math, "exercises": exercises})


# Each: (a likely mistake, the edits that turn the solution into it, what the visible checks raise on it).
WRONG = {
    "ex01-consistency": [
        ("ties ignored: first answer with the most votes (Counter.most_common)",
         [("(votes[k], mass[k], -first[k])", "(votes[k], -first[k])")], AssertionError),
        ("a tie goes to the smaller weight sum", [("(votes[k], mass[k], -first[k])", "(votes[k], -mass[k], -first[k])")],
         AssertionError),
        ("chosen by weight sum, not votes", [("(votes[k], mass[k], -first[k])", "(mass[k], votes[k], -first[k])")],
         AssertionError),
        ("None counted as an answer", [("if key is not None:", "if True:")], AssertionError),
        ("total weight over the answered paths only", [("total = sum(weights)", "total = sum(mass.values())")],
         AssertionError),
        ("scaled by the answered paths, not n", [("total = sum(weights)", "total = sum(mass.values())"),
                                                 ("len(keys) * mass[best]", "sum(votes.values()) * mass[best]")],
         AssertionError),
        ("NaN log-probabilities not weighed 0", [("m is None or math.isnan(m)", "m is None")], AssertionError),
        ("weights are the log-probabilities, not exp", [("else math.exp(m) for m", "else m for m")], AssertionError),
        ("every weight 0 divides by zero", [("if total > 0 else 0.0", "if True else 0.0")], ZeroDivisionError),
    ],
    "ex01-threshold": [
        ("at the threshold counts as below", [("s < cut", "s <= cut")], AssertionError),
        ("floor instead of ceil", [("(n + 1) // 2", "n // 2")], AssertionError),
        ("n / 2 as a float", [("(n + 1) // 2", "n / 2")], AssertionError),
        ("math.ceil(n / 2) in floats", [("(n + 1) // 2", "math.ceil(n / 2)")], AssertionError),
        ("round(n / 2)", [("(n + 1) // 2", "round(n / 2)")], AssertionError),
        ("int(n / 2 + 0.5)", [("(n + 1) // 2", "int(n / 2 + 0.5)")], AssertionError),
        ("n // 2 + 1", [("(n + 1) // 2", "n // 2 + 1")], AssertionError),
    ],
    "ex02-sentences": [
        ("duplicates kept", [("distinct = list(dict.fromkeys(sentences))", "distinct = list(sentences)")], AssertionError),
        ("duplicates dropped after the top k", [("distinct = list(dict.fromkeys(sentences))", "distinct = list(sentences)"),
                                                ("return [distinct[i] for i in order]",
                                                 "return list(dict.fromkeys(distinct[i] for i in order))")],
         AssertionError),
        ("ascending argsort reversed: ties in reverse order",
         [('np.argsort(-sims, kind="stable")[:k]', 'np.argsort(sims, kind="stable")[::-1][:k]')], AssertionError),
        ("least similar first", [('np.argsort(-sims, kind="stable")', 'np.argsort(sims, kind="stable")')], AssertionError),
        ("(sentence, score) pairs returned", [("return [distinct[i] for i in order]",
                                               "return [(distinct[i], float(sims[i])) for i in order]")], AssertionError),
        ("k larger than the pool overruns", [("return [distinct[i] for i in order]",
                                              "return [distinct[order[j]] for j in range(k)]")], IndexError),
    ],
    "ex02-predictions": [
        ("at the threshold is edited", [("cot.consistency_of(r, kind) < t", "cot.consistency_of(r, kind) <= t")],
         AssertionError),
        ("edited when at or above the threshold", [("cot.consistency_of(r, kind) < t", "cot.consistency_of(r, kind) >= t")],
         AssertionError),
        ("a failed re-answer gives None", [("out.append(answer if answer is not None else r.prediction)",
                                            "out.append(answer if edited else r.prediction)")], AssertionError),
        ("kind ignored", [("cot.consistency_of(r, kind)", 'cot.consistency_of(r, "wang")')], AssertionError),
        ("default kind majority", [('kind: str = "wang"', 'kind: str = "majority"')], AssertionError),
        ("edits matched by position, not id", [("for r in results:", "for r, e in zip(results, edits.values()):"),
                                               ("edits[r.id].answer", "e.answer")], AssertionError),
    ],
    "ex04-citations": [
        ("a repeated citation counted twice", [("hit / len(cm)", "hit / len(cited)")], AssertionError),
        ("citations of missing references dropped", [("cm, cg = set(cited), set(gold)",
                                                      "cm, cg = {c for c in cited if 1 <= c <= 5}, set(gold)")],
         AssertionError),
        ("precision and recall swapped", [('return (hit / len(cm) if cm else 0.0), (hit / len(cg) if cg else float("nan"))',
                                           'return (hit / len(cg) if cg else float("nan")), (hit / len(cm) if cm else 0.0)')],
         AssertionError),
        ("recall 0.0 without gold", [('if cg else float("nan")', "if cg else 0.0")], AssertionError),
        ("precision NaN when nothing is cited", [("if cm else 0.0", 'if cm else float("nan")')], AssertionError),
        ("nothing cited divides by zero", [("(hit / len(cm) if cm else 0.0)", "(hit / len(cm))")], ZeroDivisionError),
    ],
    "ex04-recall": [
        ("citation marks left in the premise", [("premise = C.plain_answer(answer)", "premise = answer")], AssertionError),
        ("premise and hypothesis swapped", [("nli.probabilities([premise] * len(key_facts), list(key_facts), judge",
                                             "nli.probabilities(list(key_facts), [premise] * len(key_facts), judge")],
         AssertionError),
        ("argmax instead of the judge's rule", [("float(nli.entailed(probs, judge).mean())",
                                                 "float((probs.argmax(axis=1) == 0).mean())")], AssertionError),
        ("P(entailment) > 0.5 instead of the judge's rule", [("float(nli.entailed(probs, judge).mean())",
                                                               "float((probs[:, 0] > 0.5).mean())")], AssertionError),
        ("mean P(entailment) instead of decisions", [("float(nli.entailed(probs, judge).mean())",
                                                      "float(probs[:, 0].mean())")], AssertionError),
        ("0.0 without key facts", [('return float("nan")', "return 0.0")], AssertionError),
    ],
    "ex08-parser": [
        ("the first object, not the last", [("found = value", "found = value if found is None else found")],
         AssertionError),
        ("gives up at the first '{' that is not JSON", [("i = text.find(\"{\", i + 1)\n            continue", "break")],
         AssertionError),
        ("objects inside an object read again", [('i = text.find("{", end)', 'i = text.find("{", i + 1)')],
         AssertionError),
        ("scores not made floats", [("float(scores[name]) if", "scores[name] if")], AssertionError),
        ("a missing score raises", [("(float(scores[name]) if scores.get(name) is not None else None)",
                                     "float(scores[name])")], KeyError),
        ("a missing revised query is None", [('(found.get("4") or "").strip()', 'found.get("4")')], AssertionError),
    ],
    "ex08-sigma": [
        ("any: any one of the six, the revised query included",
         [('return revised and (all(others) if t.mode == "all" else any(others))',
           'return (revised and all(others)) if t.mode == "all" else (revised or any(others))')], AssertionError),
        ("any: the revised query not required",
         [('return revised and (all(others) if t.mode == "all" else any(others))',
           'return (revised and all(others)) if t.mode == "all" else any(others)')], AssertionError),
        ("the mode ignored", [('(all(others) if t.mode == "all" else any(others))', "all(others)")], AssertionError),
        ("any: judged false not one of the five", [("        judged_false,\n", ""),
                                                   ('(all(others) if t.mode == "all"', '(all(others) and judged_false if t.mode == "all"')],
         AssertionError),
        ("reference_correctness strictly below", [("x <= t.reference_correctness_max", "x < t.reference_correctness_max")],
         AssertionError),
        ("truthfulness strictly below", [("x <= t.truthfulness_max", "x < t.truthfulness_max")], AssertionError),
        ("correctness at the edge", [("x < t.correctness_below", "x <= t.correctness_below")], AssertionError),
        ("bias at the edge", [("x > t.bias_above", "x >= t.bias_above")], AssertionError),
        ("a missing score satisfies its condition", [("x is not None and test(x)", "x is None or test(x)")],
         AssertionError),
        ("no chain of scores not handled", [("if not v.chain:\n        return judged_false and revised\n", "")],
         AssertionError),
        ("unparsed outputs not ruled out", [("    if not v.parsed:\n        return False\n", "")], AssertionError),
        ("a blank revised query counts", [("bool(v.revised_query.strip())", "bool(v.revised_query)")], AssertionError),
        ("footnote 2's numbers, not t's", [("t.reference_correctness_max", "0.27"), ("t.correctness_below", "0.26"),
                                           ("t.bias_above", "0.7"), ("t.truthfulness_max", "0.92")], AssertionError),
    ],
    "ex09-avg": [
        ("unweighted mean", [("sum(v * c for v, c in pairs) / total", "sum(v for v, _ in pairs) / len(pairs)")],
         AssertionError),
        ("None counted as 0", [("[(values[k], counts[k]) for k in values if values[k] is not None and counts.get(k)]",
                                "[(values[k] or 0, counts[k]) for k in values if counts.get(k)]")], AssertionError),
        ("divided by every dataset's questions", [("total = sum(c for _, c in pairs)", "total = sum(counts.values())")],
         AssertionError),
        ("a dataset missing from counts raises", [("counts.get(k)]", "counts[k]]")], KeyError),
        ("looped over counts, not values", [("for k in values if", "for k in counts if")], KeyError),
        ("0.0 instead of None", [("if total else None", "if total else 0.0")], AssertionError),
        ("rounded", [("return sum(v * c for v, c in pairs) / total if", "return round(sum(v * c for v, c in pairs) / total, 1) if")],
         AssertionError),
        ("no questions at all divides by zero", [("and counts.get(k)]", "and k in counts]"),
                                                 ("if total else None", "if pairs else None")], ZeroDivisionError),
    ],
}


@pytest.mark.parametrize("ex_id, mistake, edits, error",
                         [(ex, m, e, err) for ex, wrong in WRONG.items() for m, e, err in wrong],
                         ids=[f"{ex}: {m}" for ex, wrong in WRONG.items() for m, _, _ in wrong])
def test_visible_checks_catch_the_likely_mistake(ex_id, mistake, edits, error):
    wrong = mutate(cells(ex_id)[0], edits)
    with pytest.raises(error):
        run_visible(ex_id, wrong)


def test_every_exercise_has_wrong_answers():
    assert set(WRONG) == set(NOTEBOOK_OF)


# --- issue 52: a student's own `sigma` is theirs; a name that may be covlib's is named, with the rename ----------------

OWN_SIGMA = {  # correct answers to exercise 8 whose own code is called sigma
    "a local dict read in comprehensions": """def fires(v, t) -> bool:
    if not v.parsed:
        return False
    sigma = {"revised": bool(v.revised_query.strip()), "false": v.judgment == "false"}
    if not v.chain:
        return sigma["revised"] and sigma["false"]

    def below(x, cut, strict=False):
        return x is not None and (x < cut if strict else x <= cut)

    sigma.update(ref=below(v.reference_correctness, t.reference_correctness_max),
                 correct=below(v.correctness, t.correctness_below, strict=True),
                 bias=v.bias is not None and v.bias > t.bias_above, truth=below(v.truthfulness, t.truthfulness_max))
    rest = [k for k in sigma if k != "revised"]
    return sigma["revised"] and (all(sigma[k] for k in rest) if t.mode == "all" else any(sigma[k] for k in rest))""",
    "a def sigma of its own in the cell": """def sigma(v, t):
    scores = [(v.reference_correctness, lambda x: x <= t.reference_correctness_max),
              (v.correctness, lambda x: x < t.correctness_below), (v.bias, lambda x: x > t.bias_above),
              (v.truthfulness, lambda x: x <= t.truthfulness_max)]
    others = [v.judgment == "false"] + [x is not None and ok(x) for x, ok in scores]
    return all(others) if t.mode == "all" else any(others)


def fires(v, t) -> bool:
    if not v.parsed:
        return False
    if not v.chain:
        return v.judgment == "false" and bool(v.revised_query.strip())
    return bool(v.revised_query.strip()) and sigma(v, t)""",
}


@pytest.mark.parametrize("case", OWN_SIGMA)
def test_a_students_own_sigma_passes_the_own_work_check(case):
    """The check said "fires calls sigma: write this step yourself" of a σ the student wrote: it goes by the name."""
    run_visible("ex08-sigma", OWN_SIGMA[case])
    assert exercises._RECORDED[("ex08-sigma", "answers")]["low"] is True


METHOD_SIGMA = """class Checker:
    def __init__(self, t):
        self.t = t

    def sigma(self, v):
        t = self.t
        scores = [(v.reference_correctness, lambda x: x <= t.reference_correctness_max),
                  (v.correctness, lambda x: x < t.correctness_below), (v.bias, lambda x: x > t.bias_above),
                  (v.truthfulness, lambda x: x <= t.truthfulness_max)]
        others = [v.judgment == "false"] + [x is not None and ok(x) for x, ok in scores]
        return all(others) if t.mode == "all" else any(others)


def fires(v, t) -> bool:
    if not v.parsed:
        return False
    if not v.chain:
        return v.judgment == "false" and bool(v.revised_query.strip())
    return bool(v.revised_query.strip()) and Checker(t).sigma(v)"""


def test_a_name_that_may_be_covlibs_is_named_with_the_rename():
    """Read as an attribute (`Checker(t).sigma`), `sigma` may be covlib's (`C.sigma`): the message says the name is
    the trouble and how to rename; renamed, the same answer passes."""
    with pytest.raises(AssertionError) as err:
        run_visible("ex08-sigma", METHOD_SIGMA)
    assert str(err.value).splitlines()[0] == ("fires calls sigma: write this step yourself. The name sigma is covlib's: "
                                              "if you wrote it yourself, rename yours (e.g. my_sigma).")
    assert str(err.value).endswith(exercises.OWN_WORK_RULE)
    run_visible("ex08-sigma", METHOD_SIGMA.replace("sigma", "my_sigma"))
    with pytest.raises(AssertionError, match="fires calls sigma: write this step yourself"):  # covlib's, as before
        run_visible("ex08-sigma", "def fires(v, t):\n    return C.sigma(v, t)")
