"""The one notebook door (covlib.runs.session): every notebook starts through it, and what it records for each notebook
and profile equals what the notebooks recorded before the door existed (tests/fixtures/recorded_params.json, made by
running each notebook's old set-up cells at 2d80f33 with its default parameters)."""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path

import pytest

from covlib.papers.covrag.notebook import NOTEBOOKS as COVRAG
from covlib.papers.credibility.notebook import NOTEBOOKS as CREDIBILITY
from covlib.papers.verify_edit.notebook import NOTEBOOKS as VERIFY_EDIT
from covlib.runs import session
from covlib.runs.project import NOTEBOOKS as OWN

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]*_*.py"))
SPECS = {spec["name"]: spec for table in (OWN, VERIFY_EDIT, CREDIBILITY, COVRAG) for spec in table.values()}
BEFORE = json.loads((ROOT / "tests" / "fixtures" / "recorded_params.json").read_text())


def _cells(path: Path) -> list[str]:
    return [c for c in path.read_text(encoding="utf-8").split("\n# %%") if c.strip()]


def _setup_cell(path: Path) -> str:
    """The cell right after the parameters cell."""
    cells = _cells(path)
    return cells[next(i for i, c in enumerate(cells) if c.startswith(' tags=["parameters"]')) + 1]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_notebook_starts_through_the_one_door(path):
    setup = _setup_cell(path)
    calls = [n for n in ast.walk(ast.parse(setup.split("\n", 1)[1])) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Attribute) and n.func.attr == "start" and getattr(n.func.value, "id", "") == "session"]
    assert len(calls) == 1, f"{path.name}: the cell after the parameters calls session.start once"
    (call,) = calls
    assert [ast.unparse(a) for a in call.args[1:]] == ["globals()"] and not call.keywords, (
        f"{path.name}: the door reads the declared parameters from the notebook itself")
    for old in ("profiles.resolve", "profiles.pick", "traces.Tracer", "params = dict("):
        assert old not in setup, f"{path.name}: its set-up still does {old!r} itself"
    key = ast.literal_eval(call.args[0].slice)
    assert any(t.get(key, {}).get("name") == path.stem for t in (OWN, VERIFY_EDIT, CREDIBILITY, COVRAG)), (
        f"{path.name}: NOTEBOOKS[{key!r}] is not its own spec")


@pytest.mark.parametrize("profile", ["smoke", "cpu", "full"])
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_recorded_params_equal_the_notebooks_own_before_the_door(path, profile, tmp_path, monkeypatch):
    monkeypatch.setenv("COVLIB_ROOT", str(tmp_path))  # no adapter of notebook 10 here, as when the fixture was made
    spec = SPECS[path.stem]
    _, _, values = session.resolve(spec, profile=profile)  # the declared defaults: the parameters cell's
    got = json.loads(json.dumps(session.recorded(spec, values),
                                default=lambda o: dataclasses.asdict(o) if dataclasses.is_dataclass(o) else str(o)))
    assert got == BEFORE[path.stem][profile]
    assert list(got) == list(BEFORE[path.stem][profile]), "in the same order (the tables' provenance lists them so)"


def test_the_door_refuses_bad_parameters_before_any_work():
    spec = VERIFY_EDIT["01"]
    with pytest.raises(ValueError, match="n_questions must be"):
        session.resolve(spec, profile="smoke", n_questions=-5, n_samples=5, temperature=0.7, seed=0, max_new_tokens=9)
    with pytest.raises(ValueError, match="knowledge"):
        session.resolve(VERIFY_EDIT["02"], profile="smoke", knowledge="wikipedia", consistency="wang", n_samples=5)
    with pytest.raises(ValueError, match="unknown profile"):
        session.resolve(spec, profile="fast", n_samples=5)


def test_a_session_without_traces_has_no_tracer_and_keeps_no_state(tmp_path, monkeypatch):
    monkeypatch.setenv("COVLIB_ROOT", str(tmp_path))
    S = session.start(OWN["12"], profile="smoke", model="", device="", results_folder="")
    assert S.tracer is None and S.params == {"profile": "smoke", "results_folder": "results/"}
    with pytest.raises(AttributeError, match="not a parameter"):
        S.n_questions


def test_the_judge_is_loaded_once_on_the_notebooks_device(tmp_path, monkeypatch):
    """Issue 36, item 5: `device` reaches the judge (before the door, a notebook's `device=cpu` left a torch judge on a
    visible GPU, and each credibility function loaded the judge again from its spec)."""
    monkeypatch.setenv("COVLIB_ROOT", str(tmp_path))
    spec = {"name": "04_credibility_models", "judge": True, "recorded": ("judge",),
            "parameters": {n: CREDIBILITY["04"]["parameters"][n] for n in ("profile", "device", "judge")}}
    S = session.start(spec, profile="smoke", device="cpu", judge="llm")
    assert S.judge.lm.device == "cpu" and S.params == {"judge": "llm"}
    assert session.start(spec, profile="smoke", device="cpu", judge="llm").judge.lm is S.judge.lm  # loaded once per process


def test_a_table_of_a_run_names_its_judge_and_the_judges_agreement_itself(tmp_path, monkeypatch):
    """Issue 50: the judge's name and agreement were read back out of result rows and passed by hand to every table;
    now `save_table(..., run=S)` reads them from the session, with its recorded parameters."""
    from covlib.report import results

    monkeypatch.setenv("COVLIB_ROOT", str(tmp_path))
    spec = {"name": "04_credibility_models", "judge": True, "recorded": ("profile", "judge"),
            "parameters": {n: CREDIBILITY["04"]["parameters"][n] for n in ("profile", "device", "judge")}}
    S = session.start(spec, profile="smoke", device="cpu", judge="overlap")
    import pandas as pd

    results.save_table(pd.DataFrame({"x": [1.0]}), "tab-04-test", run=S, n=1)
    meta = json.loads((tmp_path / "tables" / "tab-04-test.json").read_text())
    assert meta["params"] == {"profile": "smoke", "judge": "overlap"}
    assert meta["meta"]["judge"] == S.judge.name and meta["meta"]["n"] == 1
    assert meta["meta"]["judge_agreement"].startswith(f"judge {S.judge.name}") and "key-fact pairs" in meta["meta"]["judge_agreement"]
    results.record_metrics("04_test", {"a": 1}, run=S, judge="another")  # what a call gives wins
    assert json.loads((tmp_path / "results" / "04_test.json").read_text())["meta"]["judge"] == "another"
