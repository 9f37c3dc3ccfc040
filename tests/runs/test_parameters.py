"""Notebook parameters declared once (covlib.runs.parameters): each notebook's literal parameters cell is its paper's
declaration, the door reads exactly the declared names, and every value is checked against its declaration."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from covlib.papers.covrag.notebook import NOTEBOOKS as COVRAG
from covlib.papers.credibility.notebook import NOTEBOOKS as CREDIBILITY
from covlib.papers.verify_edit.notebook import NOTEBOOKS as VERIFY_EDIT
from covlib.runs import parameters, session
from covlib.runs.parameters import Param, count
from covlib.runs.project import NOTEBOOKS as OWN

ROOT = Path(__file__).resolve().parents[2]
SPECS = {spec["name"]: spec for table in (OWN, VERIFY_EDIT, CREDIBILITY, COVRAG) for spec in table.values()}
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]*_*.py"))


def _cells(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n# %%")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_each_parameters_cell_is_its_declaration(path):
    cells = _cells(path)
    cell = next(c for c in cells if c.startswith(' tags=["parameters"]')).split("\n", 1)[1].strip()
    assert cell == parameters.cell(SPECS[path.stem]["parameters"]), (
        f"{path.name}: its parameters cell differs from its paper's declaration; write it as "
        f"parameters.cell(NOTEBOOKS[...]['parameters'])")
    for node in ast.parse(cell).body:  # a literal of the declared type, as papermill needs it
        assert isinstance(node, ast.AnnAssign) and type(ast.literal_eval(node.value)).__name__ == node.annotation.id


def _after_the_door(path: Path) -> ast.Module:
    text = path.read_text(encoding="utf-8")
    start = text.index("\n", text.index("session.start(NOTEBOOKS"))
    lines = ["" if line.startswith(("%", "!")) else line for line in text[start:].split("\n")]
    return ast.parse("\n".join(lines))


def _locals(tree: ast.AST) -> set[str]:
    """Names a function, lambda or comprehension binds for itself (its arguments, its loop targets)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.Lambda)):
            found |= {a.arg for a in node.args.args + node.args.kwonlyargs}
        elif isinstance(node, ast.comprehension):
            found |= {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_after_the_door_a_parameter_is_read_only_from_the_run(path):
    """One spelling: `S.k` (as the profile runs it), never the raw `k` the parameters cell bound, nor a rebinding."""
    declared = set(SPECS[path.stem]["parameters"])
    tree = _after_the_door(path)
    own = _locals(tree)
    module_level = [n for n in tree.body if not isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    bad = sorted({n.id for stmt in module_level for n in ast.walk(stmt) if isinstance(n, ast.Name)
                  and n.id in declared and n.id not in own})
    assert not bad, f"{path.name} reads or rebinds parameter(s) {bad} after the door: read S.<name>"


def test_the_door_reads_exactly_the_declared_names(tmp_path, monkeypatch):
    monkeypatch.setenv("COVLIB_ROOT", str(tmp_path))
    spec = {"name": "12_claims", "recorded": ("profile",), "parameters": OWN["12"]["parameters"]}
    namespace = {**parameters.defaults(spec["parameters"]), "session": session, "NOTEBOOKS": OWN, "profile": "smoke"}
    S = session.start(spec, namespace)
    assert S.profile == "smoke" and S.results_folder == "" and S.params == {"profile": "smoke"}
    with pytest.raises(Exception):  # frozen: a run's parameters are not changed after the door
        S.run.results_folder = "elsewhere"
    with pytest.raises(ValueError, match="unknown notebook parameter.*results_foldr"):  # papermill -p results_foldr x
        session.start(spec, {**namespace, "results_foldr": "x"})
    with pytest.raises(ValueError, match="results_folder not set"):
        session.start(spec, {k: v for k, v in namespace.items() if k != "results_folder"})
    with pytest.raises(ValueError, match="declares no parameter"):
        session.start(spec, n_questions=5)


def test_every_value_is_checked_against_its_declaration():
    declaration = {
        "n_questions": count(500, "questions"), "k": count(5, "references"),
        "temperature": Param(0.7, "temperature", low=0.0), "epochs": Param(2.0, "epochs", low=0.0, above=True),
        "bias_above": Param(0.7, "σ", low=0.0, high=1.0), "seed": Param(0, "seed"),
        "max_steps": Param(-1, "steps", low=-1), "chat": Param(True, "chat"), "model": Param("", "model"),
        "datasets": Param("NQ", "sets", items=("NQ", "WebQ", "TriviaQA")), "ks": Param("1,5", "cut-offs", items="int", low=1),
        "knowledge": Param("bm25", "source", choices=("bm25", "tfidf"))}
    bad = dict(n_questions=-5, k="abc", temperature=float("nan"), epochs=0.0, bias_above=1.5, chat=1, model=3,
               datasets="NQ,Foo", ks="1,0", knowledge="bm25,tfidf")
    with pytest.raises(ValueError) as err:
        parameters.read(declaration, {**parameters.defaults(declaration), **bad})
    for part in ("n_questions must be >= 1, got -5", "k must be a whole number, got 'abc'",
                 "temperature must be a finite number, got nan", "epochs must be > 0.0", "bias_above must be between",
                 "chat must be True or False, got 1", "model must be a string, got 3", "unknown 'Foo'; choose from NQ",
                 "ks must be >= 1, got 0", "takes one value"):
        assert part in str(err.value)
    assert "seed" not in str(err.value) and "max_steps" not in str(err.value)
    good = parameters.read(declaration, {**parameters.defaults(declaration), "datasets": "nq, WebQ,nq", "epochs": 3})
    assert good["datasets"] == ["NQ", "WebQ"] and good["ks"] == [1, 5] and good["epochs"] == 3.0
    with pytest.raises(ValueError, match="parameter datasets is empty"):
        parameters.read(declaration, {**parameters.defaults(declaration), "datasets": " , "})


def test_the_profiles_caps_are_declared_with_each_parameter():
    assert {n: p.smoke for n, p in VERIFY_EDIT["03"]["parameters"].items() if p.smoke is not None} == {
        "knowledge": ("without", "tfidf"), "n_hotpotqa": 8, "n_2wikimultihop": 4, "n_fever": 4, "max_new_tokens": 48}
    _, _, values = session.resolve(COVRAG["10"], profile="cpu", max_steps=-1, learning_rate=1e-4)
    assert values["max_steps"] == 8 and values["learning_rate"] == 1e-3 and values["batch_size"] == 2
    _, _, values = session.resolve(COVRAG["10"], profile="full")
    assert values["max_steps"] == -1 and values["n_test"] == 400  # the paper's settings
