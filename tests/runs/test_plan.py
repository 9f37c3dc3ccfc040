"""A run's plan (covlib.runs.plan, `make reproduce PLAN=1`): each notebook's model work from its profile, without a
model; its time at the rates `make bench` measured; repeated calls counted once; the plan beside a run's times."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from covlib.core import paths
from covlib.papers.covrag.notebook import NOTEBOOKS as COVRAG
from covlib.papers.credibility.notebook import NOTEBOOKS as CREDIBILITY
from covlib.papers.verify_edit.notebook import NOTEBOOKS as VERIFY_EDIT
from covlib.runs import plan
from covlib.runs.project import NOTEBOOKS as PROJECT

SPECS = {spec["name"]: spec for table in (PROJECT, VERIFY_EDIT, CREDIBILITY, COVRAG) for spec in table.values()}
WITH_WORK = [name for name, spec in SPECS.items() if spec.get("work")]


def test_the_notebooks_that_run_a_model_declare_their_work():
    idle = {"00_data_tour", "12_claims"}  # retrieval and statistics alone
    assert set(SPECS) - set(WITH_WORK) == idle


@pytest.mark.parametrize("name", WITH_WORK)
def test_each_notebooks_work_grows_from_smoke_to_cpu_to_full_and_loads_no_model(name, monkeypatch):
    from covlib import generation

    monkeypatch.setattr(generation, "load_lm", lambda *a, **k: pytest.fail("the plan loaded a model"))
    rows = {}
    for profile in ("smoke", "cpu", "full"):
        work = plan.work_of(SPECS[name], profile, "", "cpu")
        assert work and all(w.rows > 0 and w.kind in plan.KINDS and w.step for w in work), (name, profile)
        rows[profile] = sum(w.rows for w in work)
    assert rows["smoke"] <= rows["cpu"] <= rows["full"] and rows["smoke"] < rows["full"], (name, rows)


def test_a_call_an_earlier_notebook_made_is_counted_once():
    alone = plan.make([SPECS["02_threshold_ablation"]], "cpu", "", "cpu", plan.REFERENCE_RATES["cpu"])
    after = plan.make([SPECS["01_consistency_kde"], SPECS["02_threshold_ablation"]], "cpu", "", "cpu",
                      plan.REFERENCE_RATES["cpu"])
    steps = lambda p: [w.step for w in p.work["02_threshold_ablation"]]  # noqa: E731
    assert "CoT-SC paths, hotpotqa" in steps(alone) and "CoT-SC paths, hotpotqa" not in steps(after)
    assert after.seconds("02_threshold_ablation") < alone.seconds("02_threshold_ablation")
    n = plan.work_of(SPECS["01_consistency_kde"], "cpu", "", "cpu")[0]
    assert (n.rows, n.new) == (60 * 5, 96)  # cpu: 60 questions x 5 paths of at most 96 tokens


def test_seconds_follow_the_rates_and_a_model_of_another_size_is_scaled():
    w = plan.Work("x", "s", "generate", rows=10, prompt=20, new=30, shared=100)
    r = plan.Rates("test", decode_tok_s=100.0, prefill_tok_s=1000.0, judge_pairs_s=50.0)
    assert r.seconds(w) == pytest.approx((100 + 10 * 20) / 1000 + 10 * 30 / 100)
    assert r.seconds(plan.Work("x", "s", "judge", rows=100, prompt=60)) == pytest.approx(2.0)
    assert r.seconds(plan.Work("x", "s", "train", rows=10, prompt=100)) == pytest.approx(3 * 1000 / 1000)
    measured = {"source": "bench", "shapes": {"smollm2": {"parameters": 10, "decode_tok_s": 100.0,
                                                          "prefill_tok_s": 1000.0}}, "judge_pairs_s": 5.0}
    local = plan.rates_for("", "cpu", measured)
    assert "scaled from the smollm2 shape" in local.note  # the embedded model's 135M against a 10-parameter shape
    assert local.decode_tok_s == pytest.approx(100.0 * 10 / plan.model_parameters(""))
    served = plan.rates_for("openai:m@http://127.0.0.1:9/v1", "cpu", measured)
    assert served.decode_tok_s is None and "served" in served.note
    p = plan.make([SPECS["01_consistency_kde"]], "cpu", "openai:m@http://127.0.0.1:9/v1", "cpu", measured)
    assert p.seconds("01_consistency_kde") is None and "| ? |" in plan.table(p)
    simulated = plan.make([SPECS["01_consistency_kde"]], "cpu", "sim:paper", "cpu", measured)
    assert simulated.seconds("01_consistency_kde") == pytest.approx(plan.OVERHEAD_SECONDS)  # no model work to time
    assert "simulated model" in simulated.rates().note


def test_rates_are_read_per_device_and_a_damaged_file_falls_back_to_the_reference(tmp_path):
    path = tmp_path / "bench_rates.json"
    assert plan.read_rates("cpu", path) is plan.REFERENCE_RATES["cpu"]
    assert plan.read_rates("cuda", path) is plan.REFERENCE_RATES["cuda"]  # an H200's, until make bench ran here
    assert plan.read_rates("mps", path)["shapes"] == {}
    entry = {"source": "make bench", "device": "cuda", "shapes": {"7b": {"parameters": 6_700_000_000,
                                                                        "decode_tok_s": 1700.0, "prefill_tok_s": 9e4}}}
    path.write_text(json.dumps({"cuda": entry}))
    assert plan.read_rates("cuda:0", path) == entry and plan.read_rates("cpu", path) is plan.REFERENCE_RATES["cpu"]
    path.write_text("{not json")
    assert plan.read_rates("cuda", path) is plan.REFERENCE_RATES["cuda"]


def test_the_table_puts_actual_minutes_beside_the_prediction():
    p = plan.make([SPECS["01_consistency_kde"], SPECS["11_covrag_judge"]], "cpu", "", "cpu", plan.REFERENCE_RATES["cpu"])
    entries = [{"notebook": "01_consistency_kde", "profile": "cpu", "model": "embedded", "device": "cpu",
                "seconds": 120.0}, {"notebook": "01_consistency_kde", "profile": "smoke", "model": "embedded",
                                    "device": "cpu", "seconds": 5.0}]
    actual = plan.actual_seconds(entries, p)
    assert actual == {"01_consistency_kde": 120.0}
    text = plan.table(p, actual)
    row = next(line for line in text.splitlines() if line.startswith("| 01_consistency_kde"))
    predicted = p.seconds("01_consistency_kde")
    assert f"| {predicted / 60:.1f} | 2.0 | {120 / predicted:.2f} |" in row
    assert f"| timed (1 of 2) | | | | {predicted / 60:.1f} | 2.0 | {120 / predicted:.2f} |" in text  # like for like
    assert "| 11_covrag_judge |" in text and text.splitlines()[-1].startswith("| all |")
    assert "predicted" in plan.describe(p) and "reference machine" in plan.describe(p)


def test_make_reproduce_plan_prints_the_plan_and_runs_nothing(tmp_path):
    env = {"COVLIB_ROOT": str(tmp_path), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, str(paths.code_root() / "scripts" / "reproduce.py"), "--plan", "--profile",
                          "cpu", "--only", "01,10"], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "| 01_consistency_kde | 300 / 60 / 0 / 0 |" in out.stdout and "10_covrag_finetune" in out.stdout
    assert not (tmp_path / "results" / "run_times.json").exists()  # nothing ran, nothing recorded
