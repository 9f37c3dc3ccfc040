"""Notebook parameters (covlib.runs.profiles): checked by name before anything runs, in every notebook."""

from __future__ import annotations

import re
import time

import pytest

from covlib.core import paths
from covlib.runs import profiles


def test_parameters_are_checked_by_name():
    from covlib.runs import profiles

    with pytest.raises(ValueError) as err:
        profiles.check_parameters(n_questions=-5, k="abc", temperature=float("nan"), epochs=0.0, seed=3,
                                  bias_above=1.5, max_steps=-1, n_rating=0)
    message = str(err.value)
    for part in ("n_questions must be >= 1, got -5", "k must be a whole number, got 'abc'",
                 "temperature must be a finite number, got nan", "epochs must be > 0.0", "bias_above must be between"):
        assert part in message
    assert "seed" not in message and "max_steps" not in message and "n_rating" not in message
    with pytest.raises(KeyError, match="PARAMETER_RULES"):
        profiles.check_parameters(n_typo=3)
    assert profiles.split_list("datasets", "nq, WebQ,nq", ["NQ", "WebQ", "TriviaQA"]) == ["NQ", "WebQ"]
    for args, match in [(("datasets", "NQ,Foo", ["NQ", "WebQ"]), "unknown 'Foo'; choose from NQ, WebQ"),
                        (("judges", " , "), "parameter judges is empty"), (("ks", 5), "comma-separated string")]:
        with pytest.raises(ValueError, match=match):
            profiles.split_list(*args)
    with pytest.raises(ValueError, match="not a valid int"):
        profiles.split_list("ks", "1,x", cast=int)
    with pytest.raises(ValueError, match="takes one value"):
        profiles.choice("knowledge", "bm25,tfidf", ["bm25", "tfidf"])


def _parameters_cell(source: str) -> tuple[dict[str, str], str]:
    """(name -> annotated type of each parameter, the source of the cell after the parameters cell)."""
    cells = source.split("\n# %%")
    index = next(i for i, c in enumerate(cells) if 'tags=["parameters"]' in c.split("\n", 1)[0])
    names = dict(re.findall(r"^(\w+): (int|float|str|bool) =", cells[index], flags=re.M))
    return names, cells[index + 1]


@pytest.mark.parametrize("notebook", sorted(paths.code_root().glob("notebooks/[0-9]*_*.py")), ids=lambda p: p.stem)
def test_every_numeric_notebook_parameter_is_checked(notebook):
    names, derived = _parameters_cell(notebook.read_text(encoding="utf-8"))
    numeric = {n for n, t in names.items() if t in ("int", "float")}
    door = re.match(r"\s*S = session\.start\((.*?)\)(?:  #[^\n]*)?\n", derived, flags=re.S)
    assert door, f"{notebook.name}: the cell after the parameters opens the notebook through the one door"
    passed = set(re.findall(r"(\w+)=\1\b", door.group(1)))
    assert numeric - passed == set(), f"{notebook.name}: numeric parameters not given to the door"
    assert numeric - set(profiles.PARAMETER_RULES) - {"n_refs"} == set(), "a numeric parameter without a rule"


@pytest.mark.notebook
def test_a_bad_parameter_stops_the_notebook_at_once(tmp_path):
    import papermill as pm

    start = time.perf_counter()
    notebook = paths.code_root() / "notebooks" / "01_consistency_kde.ipynb"
    with pytest.raises(pm.PapermillExecutionError, match="n_questions must be >= 1, got -5"):
        pm.execute_notebook(str(notebook), str(tmp_path / "out.ipynb"), cwd=str(notebook.parent), progress_bar=False,
                            parameters={"profile": "smoke", "n_questions": -5, "n_samples": 0}, kernel_name="python3")
    assert time.perf_counter() - start < 120, "stopped before loading any model"


def test_a_device_this_machine_lacks_is_refused_by_name_before_any_work():
    import torch

    from covlib.runs import profiles

    profiles.check_device("")  # the default
    profiles.check_device("cpu")
    with pytest.raises(ValueError, match="unknown device 'gpu': choose cpu, cuda, cuda:N or mps"):
        profiles.resolve("smoke", "gpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match=r"device='cuda', but no CUDA GPU is visible here"):
            profiles.resolve("auto", "cuda")
    else:
        with pytest.raises(ValueError, match="CUDA GPU"):
            profiles.check_device(f"cuda:{torch.cuda.device_count()}")


def test_a_missing_input_file_is_refused_before_the_run(tmp_path):
    from covlib.runs import profiles

    profiles.check_input_file("ratings", "")
    (tmp_path / "r.csv").write_text("question_id,model\n")
    profiles.check_input_file("ratings", str(tmp_path / "r.csv"))
    with pytest.raises(FileNotFoundError, match=r"ratings='/missing.csv': no such file \(checked before the run starts\)"):
        profiles.check_input_file("ratings", "/missing.csv")
    from covlib.papers.credibility.notebook import NOTEBOOKS
    from covlib.runs import session

    with pytest.raises(FileNotFoundError, match="ratings='/missing.csv'"):  # the door checks it before loading anything
        session.resolve(NOTEBOOKS["04"], profile="smoke", ratings="/missing.csv")


def test_a_judge_typo_is_refused_before_any_generation(monkeypatch):
    from covlib import nli
    from covlib.papers import credibility as C
    from covlib.papers.credibility import notebook
    from covlib.runs import session

    assert nli.check_judge("overlap") == "overlap" and nli.check_judge("llm:foo") == "llm"
    assert nli.check_judge("owner/model") == "hub"
    with pytest.raises(ValueError, match="unknown judge 'overlapp'"):
        nli.check_judge("overlapp")

    def reached(*args, **kwargs):
        raise AssertionError("the questions were loaded before the judge was checked")

    monkeypatch.setattr(C, "load_questions", reached)
    started = time.monotonic()
    with pytest.raises(ValueError, match="unknown judge 'overlapp'"):
        session.start(notebook.NOTEBOOKS["04"], profile="smoke", model="", models="", questions="", judge="overlapp")
    assert time.monotonic() - started < 5


def test_unknown_papermill_parameters_are_found_in_the_cells_run():
    from covlib.runs import profiles

    params = "profile: str = 'auto'  # profile\nn_questions: int = 500  # questions\n"
    assert profiles.unknown_injected(["import x", params, "# Parameters\nn_question = 3\nprofile = 'smoke'\n"]) == \
        ["n_question"]
    assert profiles.unknown_injected(["import x", params, "# Parameters\nn_questions = 3\n"]) == []
    assert profiles.unknown_injected(["import x", params]) == []  # not a papermill run: nothing injected


@pytest.mark.slow
def test_a_typo_in_a_papermill_parameter_stops_the_notebook_at_once(tmp_path):
    import nbformat
    import papermill as pm
    from nbformat import v4

    cells = [v4.new_code_cell("from covlib.runs import profiles"),
             v4.new_code_cell("n_questions: int = 500  # questions", metadata={"tags": ["parameters"]}),
             v4.new_code_cell("profiles.check_parameters(n_questions=n_questions)\nran = True")]
    nbformat.write(v4.new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "language": "python",
                                                                          "display_name": "Python 3"}}),
                   tmp_path / "nb.ipynb")
    with pytest.raises(pm.PapermillExecutionError, match="unknown notebook parameter.*n_question"):
        pm.execute_notebook(str(tmp_path / "nb.ipynb"), str(tmp_path / "out.ipynb"), parameters={"n_question": 3},
                            progress_bar=False, cwd=str(tmp_path))
    pm.execute_notebook(str(tmp_path / "nb.ipynb"), str(tmp_path / "ok.ipynb"), parameters={"n_questions": 3},
                        progress_bar=False, cwd=str(tmp_path))
