"""Profiles and notebook parameters: checked by name before anything runs, in every notebook."""

from __future__ import annotations

import time

import pytest

from covlib.core import paths
from covlib.runs import profiles


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


@pytest.mark.slow
def test_a_typo_in_a_papermill_parameter_stops_the_notebook_at_once(tmp_path):
    import nbformat
    import papermill as pm
    from nbformat import v4

    cells = [v4.new_code_cell("from covlib.runs import session\nfrom covlib.runs.parameters import count"),
             v4.new_code_cell("n_questions: int = 500  # questions", metadata={"tags": ["parameters"]}),
             v4.new_code_cell("spec = {'name': 'nb', 'recorded': (), 'parameters': {'n_questions': count(500, 'questions')}}\n"
                              "S = session.start(spec, globals())\nran = True")]
    nbformat.write(v4.new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "language": "python",
                                                                          "display_name": "Python 3"}}),
                   tmp_path / "nb.ipynb")
    with pytest.raises(pm.PapermillExecutionError, match="unknown notebook parameter.*n_question"):
        pm.execute_notebook(str(tmp_path / "nb.ipynb"), str(tmp_path / "out.ipynb"), parameters={"n_question": 3},
                            progress_bar=False, cwd=str(tmp_path))
    pm.execute_notebook(str(tmp_path / "nb.ipynb"), str(tmp_path / "ok.ipynb"), parameters={"n_questions": 3},
                        progress_bar=False, cwd=str(tmp_path))
