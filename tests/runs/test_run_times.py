"""Run times of `make reproduce`: results/run_times.json (migration, one entry per profile, atomic writes, two runs
at once, files of another shape kept aside), the ETA across notebooks, the printed table, and the script's loop with
papermill replaced (no notebook runs)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from covlib.core import paths
from covlib.runs import run_times as R

OLD_FLAT = {"01_consistency_kde": {"profile": "cpu", "model": "embedded", "seconds": 324.1},
            "02_threshold_ablation": {"profile": "smoke", "model": "embedded", "seconds": 20.0}}


def _entry(notebook: str, profile: str = "cpu", seconds: float = 100.0, model: str = "embedded",
           device: str = "cpu", finished_at: str = "2026-11-24T10:00:00+00:00") -> dict:
    return R.entry(notebook, profile, model, device, seconds, finished_at=finished_at, commit="abc1234")


def test_the_old_flat_file_is_migrated_and_a_new_run_replaces_its_entry(tmp_path):
    path = tmp_path / "run_times.json"
    path.write_text(json.dumps(OLD_FLAT))
    entries = R.read(path)
    assert sorted((e["notebook"], e["profile"], e["seconds"], e["device"], e["commit"]) for e in entries) == [
        ("01_consistency_kde", "cpu", 324.1, None, None), ("02_threshold_ablation", "smoke", 20.0, None, None)]
    assert R.estimate(["01_consistency_kde"], entries, "cpu", "embedded", "cpu").seconds == 324.1  # still used
    entries = R.record(entries, _entry("01_consistency_kde", "cpu", 300.0))
    R.write(entries, path)
    written = json.loads(path.read_text())
    assert written["format"] == R.FORMAT
    cpu = [e for e in written["runs"] if e["profile"] == "cpu"]
    assert cpu == [{"notebook": "01_consistency_kde", "profile": "cpu", "model": "embedded", "device": "cpu",
                    "seconds": 300.0, "finished_at": "2026-11-24T10:00:00+00:00", "commit": "abc1234"}]
    assert R.read(path) == R.migrate(written)


def test_a_smoke_run_does_not_overwrite_the_cpu_timing(tmp_path):
    path = tmp_path / "run_times.json"
    R.write(R.record([], _entry("03_verify_and_edit_tables", "cpu", 1020.0)), path)
    entries = R.record(R.read(path), _entry("03_verify_and_edit_tables", "smoke", 55.0))
    entries = R.record(entries, _entry("03_verify_and_edit_tables", "smoke", 50.0))  # a second smoke run: replaced
    R.write(entries, path)
    kept = {(e["profile"], e["seconds"]) for e in R.read(path)}
    assert kept == {("cpu", 1020.0), ("smoke", 50.0)}
    other_model = R.record(R.read(path), _entry("03_verify_and_edit_tables", "cpu", 90.0, model="openai:m@http://h/v1"))
    assert {(e["model"], e["seconds"]) for e in other_model if e["profile"] == "cpu"} == {
        ("embedded", 1020.0), ("openai:m@http://h/v1", 90.0)}


def test_the_estimate_prefers_earlier_runs_then_the_reference_table(monkeypatch):
    monkeypatch.setitem(R.REFERENCE_SECONDS, "cpu", {"a": 100.0, "b": 200.0, "c": None, "d": None})
    entries = [_entry("a", "cpu", 30.0), _entry("c", "cpu", 40.0), _entry("d", "smoke", 5.0)]
    est = R.estimate(["a", "b", "c", "d"], entries, "cpu", "embedded", "cpu")
    assert est == R.Estimate(seconds=30.0 + 200.0 + 40.0, from_runs=2, from_reference=1, unknown=1)
    # another model: neither the embedded model's runs nor the reference table apply
    assert R.estimate(["a", "b"], entries, "cpu", "openai:m@http://h/v1", "cpu") == R.Estimate(0.0, 0, 0, 2)
    # another device: the reference table applies, the cpu runs do not
    assert R.estimate(["a", "b"], entries, "cpu", "embedded", "cuda") == R.Estimate(300.0, 0, 2, 0)
    # the smoke profile has no reference table here: only its own run counts
    assert R.estimate(["a", "d"], entries, "smoke", "embedded", "cpu") == R.Estimate(5.0, 1, 0, 1)


def test_the_latest_run_of_a_notebook_is_the_one_the_estimate_uses():
    older = {**_entry("a", seconds=10.0), "finished_at": "2026-01-01T00:00:00+00:00", "device": None}
    newer = _entry("a", seconds=20.0, finished_at="2026-02-01T00:00:00+00:00")
    assert R.previous_seconds([newer, older], "a", "cpu", "embedded", "cpu") == 20.0


def test_the_progress_line_says_how_many_notebooks_are_not_yet_timed():
    line = R.progress_line(3, 13, "02_threshold_ablation", 754.2, R.Estimate(1500.0, 4, 6, 1))
    assert line == ("[3/13] 02_threshold_ablation: 12:34 elapsed; remaining ~25:00 "
                    "(4 from earlier runs, 6 from the reference table) + 1 notebook not yet timed")
    assert R.progress_line(1, 2, "00_data_tour", 0.0, R.Estimate(0.0, 0, 0, 2)) == \
        "[1/2] 00_data_tour: 00:00 elapsed; remaining: unknown (2 notebooks not yet timed)"
    assert R.mmss(5400) == "90:00" and R.mmss(59.6) == "01:00"


def test_a_write_that_fails_leaves_the_old_file_whole(tmp_path, monkeypatch):
    path = tmp_path / "results" / "run_times.json"
    R.write([_entry("a", seconds=1.0)], path)
    before = path.read_text()

    def crash(*_args, **_kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        R.write([_entry("a", seconds=1.0), _entry("b", seconds=2.0)], path)
    assert path.read_text() == before and [e["notebook"] for e in R.read(path)] == ["a"]
    # no temporary file left behind (the lock file stays: deleting it would let two runs hold two locks)
    assert sorted(p.name for p in path.parent.iterdir()) == ["run_times.json", "run_times.json.lock"]


def test_an_unreadable_file_is_reported_not_silently_replaced(tmp_path):
    path = tmp_path / "run_times.json"
    path.write_text('{"01_consistency_kde": {"seconds": 3')
    with pytest.raises(ValueError, match="not readable JSON"):
        R.read(path)
    assert R.read(tmp_path / "missing.json") == []


def test_the_table_lists_each_notebook_its_total_and_a_failed_one():
    text = R.table([("00_data_tour", 12.3), ("01_consistency_kde", 324.0)],
                   ("02_threshold_ablation", 61.0, "FAILED"), judge="judge build (from card.json): 25.0 min")
    lines = text.splitlines()
    assert re.fullmatch(r"notebook\s+seconds\s+mm:ss", lines[0])
    assert re.fullmatch(r"00_data_tour\s+12\.3\s+00:12", lines[2])
    assert re.fullmatch(r"01_consistency_kde\s+324\.0\s+05:24", lines[3])
    assert re.fullmatch(r"02_threshold_ablation\s+61\.0\s+01:01\s+FAILED \(not in the total\)", lines[4])
    assert re.fullmatch(r"total \(2 notebooks\)\s+336\.3\s+05:36", lines[6])
    assert lines[7] == "judge build (from card.json): 25.0 min"
    assert re.fullmatch(r"total \(0 notebooks\)\s+0\.0\s+00:00", R.table([]).splitlines()[-1])
    one = R.table([("00_data_tour", 49.2)]).splitlines()  # the columns line up, the total's longer label included
    assert len({len(line) for line in one}) == 1 and one[-1].startswith("total (1 notebook)  ")


def test_the_judge_line_reads_the_training_time_from_the_card(tmp_path):
    assert "no trained judge" in R.judge_line(tmp_path / "absent")
    (tmp_path / "card.json").write_text(json.dumps({"train_seconds": 1500.0, "resumed_from_checkpoint": False}))
    line = R.judge_line(tmp_path)
    assert line.startswith("judge build (from card.json): 25.0 min of training, measured when it was trained, 20")
    assert "resumed" not in line
    (tmp_path / "card.json").write_text(json.dumps({"train_seconds": 600, "resumed_from_checkpoint": True}))
    assert "10.0 min" in R.judge_line(tmp_path) and "resumed from a checkpoint" in R.judge_line(tmp_path)


def _notebook_stems() -> set[str]:
    folder = paths.code_root() / "notebooks"
    return {p.stem for p in folder.glob("[0-9][0-9]*_*.ipynb") if re.match(r"^\d{2}[a-z]?_\w+$", p.stem)}


def test_the_reference_table_names_every_notebook_and_the_docs_show_the_same_minutes():
    reference = R.REFERENCE_SECONDS["cpu"]
    assert set(reference) == _notebook_stems()
    doc = (paths.code_root() / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    section = doc.split("## The whole `cpu` reproduction", 1)[1].split("\n## ", 1)[0]
    rows = {m.group(1): m.group(2).strip() for m in re.finditer(r"^\| (\d{2}[a-z]?) [^|]+\| ([^|]+)\|", section, re.M)}
    for stem, seconds in reference.items():
        number = stem.split("_", 1)[0]
        assert number in rows, f"docs/benchmarks.md has no row for {stem}"
        if seconds is None:
            assert rows[number] == "to be measured", f"{stem}: the reference table has no time; docs say {rows[number]}"
        else:
            shown = re.match(r"[\d.]+", rows[number])
            assert shown and abs(float(shown.group()) - seconds / 60) <= 0.05, \
                f"{stem}: REFERENCE_SECONDS says {seconds / 60:.1f} min, docs/benchmarks.md says {rows[number]!r}"


def test_reproduce_records_each_notebook_and_prints_the_table_when_one_fails(tmp_path, monkeypatch, capsys):
    import papermill as pm

    monkeypatch.syspath_prepend(str(paths.code_root() / "scripts"))
    import reproduce

    monkeypatch.setenv("COVLIB_DATA", str(paths.data_dir()))  # the plan reads the questions, as the notebooks would
    monkeypatch.setenv("COVLIB_ROOT", str(tmp_path))
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "run_times.json").write_text(json.dumps({"00_data_tour": {"profile": "cpu", "seconds": 9}}))
    ran = []

    def fake_execute(source, target, **_kwargs):
        ran.append(os.path.basename(source))
        _executed(target, [("import covlib", 0.5), ("# the slow part\nruns = score(everything)", 6.0)])
        if len(ran) == 2:
            raise pm.PapermillExecutionError(3, 7, "x = 1/0", "ZeroDivisionError", "division by zero", [])

    monkeypatch.setattr(reproduce.pm, "execute_notebook", fake_execute)
    monkeypatch.setattr(reproduce, "default_device", lambda: "cpu")
    monkeypatch.setattr(reproduce, "executed_dir", lambda: tmp_path / "executed")  # not the repository's
    monkeypatch.setattr(sys, "argv", ["reproduce.py", "--profile", "smoke", "--only", "00,00b,01"])
    with pytest.raises(SystemExit, match="00b_nli_judges.ipynb failed in cell 7"):
        reproduce.main()
    out = capsys.readouterr().out
    assert ran == ["00_data_tour.ipynb", "00b_nli_judges.ipynb"]
    assert re.search(r"\[1/3\] 00_data_tour: 00:00 elapsed; remaining ~\d\d:\d\d \(3 from the plan\)", out)
    assert "the plan against the run:" in out and re.search(r"\| 00_data_tour \|.*\| 0\.\d \|", out)
    assert "slowest cells: cell 3 6 s" in out and "runs = score(everything)" in out
    assert "[2/3] 00b_nli_judges" in out and re.search(r"00_data_tour\s+\d+\.\d\s+00:00\n", out)
    assert re.search(r"00b_nli_judges\s+\d+\.\d\s+00:00\s+FAILED", out) and "total (1 notebook)" in out
    entries = R.read(tmp_path / "results" / "run_times.json")
    assert {(e["notebook"], e["profile"], e["device"]) for e in entries} == {
        ("00_data_tour", "cpu", None), ("00_data_tour", "smoke", "cpu")}  # the old cpu timing is kept



def test_a_run_goes_on_without_its_plan_when_the_plan_cannot_read_its_data(tmp_path, monkeypatch, capsys):
    """The plan reads the profile's questions; where they are missing, `--plan` says so and a real run goes on without
    its time estimates (the notebooks report the missing data themselves)."""
    monkeypatch.syspath_prepend(str(paths.code_root() / "scripts"))
    import reproduce

    monkeypatch.setenv("COVLIB_ROOT", str(tmp_path))
    monkeypatch.setenv("COVLIB_DATA", str(tmp_path / "no-data"))
    ran = []
    monkeypatch.setattr(reproduce.pm, "execute_notebook", lambda source, target, **_: ran.append(os.path.basename(source))
                        or _executed(target, [("import covlib", 0.1)]))
    monkeypatch.setattr(reproduce, "default_device", lambda: "cpu")
    monkeypatch.setattr(reproduce, "executed_dir", lambda: tmp_path / "executed")
    monkeypatch.setattr(sys, "argv", ["reproduce.py", "--profile", "smoke", "--only", "01"])
    reproduce.main()
    assert ran == ["01_consistency_kde.ipynb"] and "no plan (the run goes on without its time estimates)" in capsys.readouterr().out
    monkeypatch.setattr(sys, "argv", ["reproduce.py", "--profile", "smoke", "--only", "01", "--plan"])
    with pytest.raises(SystemExit, match="no plan: .*no-data"):
        reproduce.main()


# A `make reproduce` in a process of its own, papermill replaced (no notebook runs): before each "notebook" it waits
# until the other run has reached the same step, so the two runs read, then write the file in turn, interleaved.
LOCKSTEP_RUN = textwrap.dedent("""
    import sys, time
    from pathlib import Path

    scripts, me, other, only, meeting = sys.argv[1:6]
    sys.path.insert(0, scripts)
    import reproduce

    steps = []

    def in_lockstep(source, target, **_kwargs):
        steps.append(source)
        Path(meeting, f"{me}-{len(steps)}").touch()
        deadline = time.time() + 120
        while not Path(meeting, f"{other}-{len(steps)}").exists():
            if time.time() > deadline:
                raise RuntimeError(f"{other} never reached step {len(steps)}")
            time.sleep(0.01)

    reproduce.pm.execute_notebook = in_lockstep
    reproduce.executed_dir = lambda: Path(meeting, f"executed-{me}")
    sys.argv = ["reproduce.py", "--profile", "smoke", "--device", "cpu", "--only", only]
    reproduce.main()
""")


def test_two_reproduce_runs_at_once_keep_every_entry_of_both(tmp_path, scratch_root):
    results_dir = scratch_root / "results"
    results_dir.mkdir(parents=True)
    path = results_dir / "run_times.json"
    R.write([_entry("00_data_tour", "cpu", 47.0)], path)  # an earlier cpu run: neither smoke run may drop it
    script, meeting = tmp_path / "lockstep_run.py", tmp_path / "meeting"
    script.write_text(LOCKSTEP_RUN)
    meeting.mkdir()
    scripts = str(paths.code_root() / "scripts")
    runs = {"a": ("b", "00,01,02"), "b": ("a", "03,04,05")}
    procs = {me: subprocess.Popen([sys.executable, str(script), scripts, me, other, only, str(meeting)],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for me, (other, only) in runs.items()}
    outputs = {me: proc.communicate(timeout=300)[0] for me, proc in procs.items()}
    for me, proc in procs.items():
        assert proc.returncode == 0, f"run {me} failed:\n{outputs[me]}"
    met = sorted(p.name for p in meeting.iterdir() if p.name[0] in "ab")
    assert met == [f"{x}-{i}" for x in "ab" for i in (1, 2, 3)]  # both runs reached each step
    got = {(e["notebook"][:2], e["profile"], e["device"]) for e in R.read(path)}
    assert got == {("00", "cpu", "cpu")} | {(f"0{i}", "smoke", "cpu") for i in range(6)}, \
        "entries lost when two runs wrote run_times.json at once"
    assert not list(results_dir.glob("run_times.unreadable*"))


WRONG_SHAPES = {
    "a list": '[{"notebook": "00_data_tour", "profile": "cpu", "seconds": 47.0}]\n',
    "runs not a list": '{"runs": "oops"}',
    "an entry not a dict": '{"format": 2, "runs": [{"notebook": "01_consistency_kde", "profile": "cpu", '
                           '"seconds": 138.1}, "not a run"]}',
    "a flat value not a dict": '{\n  "01_consistency_kde": 138.1\n}\n',
    "a future format": '{"format": 3, "runs": [{"notebook": "01_consistency_kde", "seconds": 138.1}]}',
    "truncated": '{"format": 2, "runs": [{"notebook": "01_consistency_kde", "seconds": 13',
}


@pytest.mark.parametrize("shape", list(WRONG_SHAPES))
def test_reproduce_keeps_a_file_of_another_shape_aside_and_says_where(tmp_path, monkeypatch, capsys, shape):
    monkeypatch.syspath_prepend(str(paths.code_root() / "scripts"))
    import reproduce

    monkeypatch.setenv("COVLIB_ROOT", str(tmp_path))
    path = tmp_path / "results" / "run_times.json"
    path.parent.mkdir()
    path.write_text(WRONG_SHAPES[shape])
    monkeypatch.setattr(reproduce.pm, "execute_notebook", lambda source, target, **_kwargs: None)
    monkeypatch.setattr(reproduce, "executed_dir", lambda: tmp_path / "executed")
    monkeypatch.setattr(sys, "argv", ["reproduce.py", "--profile", "smoke", "--device", "cpu", "--only", "00"])
    reproduce.main()
    kept = tmp_path / "results" / "run_times.unreadable.json"
    assert kept.read_text() == WRONG_SHAPES[shape]  # moved aside whole, not replaced
    captured = capsys.readouterr()
    warnings = [line for line in (captured.out + captured.err).splitlines() if "run_times.unreadable.json" in line]
    assert len(warnings) == 1 and warnings[0].startswith("warning: ") and str(path) in warnings[0] \
        and str(kept) in warnings[0], warnings
    assert [(e["notebook"], e["profile"]) for e in R.read(path)] == [("00_data_tour", "smoke")]  # a new file


def test_two_writers_that_read_the_file_before_either_wrote_keep_both_entries(tmp_path):
    path = tmp_path / "run_times.json"
    R.write([_entry("00_data_tour", "cpu", 47.0)], path)
    first, second = R.load(path), R.load(path)  # two runs read the file, then each writes what it holds plus its own
    R.write(R.record(first, _entry("01_consistency_kde", "smoke", 20.0)), path)
    R.write(R.record(second, _entry("03_verify_and_edit_tables", "smoke", 55.0)), path)
    assert {(e["notebook"], e["profile"]) for e in R.read(path)} == {
        ("00_data_tour", "cpu"), ("01_consistency_kde", "smoke"), ("03_verify_and_edit_tables", "smoke")}
    assert [name for name in dir(R) if "write" in name and not name.startswith("_")] == ["write"]  # no other writer


def test_a_second_refused_file_does_not_overwrite_the_first_kept_one(tmp_path, capsys):
    path = tmp_path / "run_times.json"
    path.write_text('{"runs": "first"}')
    assert R.load(path) == [] and not path.exists()
    path.write_text("[2]")
    assert R.write([_entry("a")], path)[0]["notebook"] == "a"
    assert (tmp_path / "run_times.unreadable.json").read_text() == '{"runs": "first"}'
    assert (tmp_path / "run_times.unreadable.1.json").read_text() == "[2]"
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and "a JSON list, not an object" in err[1] and "run_times.unreadable.1.json" in err[1]


def test_write_merges_into_the_file_and_the_later_run_of_a_notebook_wins(tmp_path):
    path = tmp_path / "run_times.json"
    path.write_text(json.dumps(OLD_FLAT))  # 01 (cpu, unknown device and time) and 02 (smoke)
    later = _entry("01_consistency_kde", seconds=300.0, finished_at="2026-11-24T12:00:00+00:00")
    merged = R.write([later], path)
    assert R.read(path) == sorted(merged, key=lambda e: e["notebook"])
    assert {(e["notebook"], e["seconds"]) for e in R.read(path)} == {("01_consistency_kde", 300.0),
                                                                      ("02_threshold_ablation", 20.0)}
    earlier = _entry("01_consistency_kde", seconds=999.0, finished_at="2026-11-24T11:00:00+00:00")
    R.write([earlier], path)  # another run that finished this notebook earlier: the later time stays
    assert {(e["notebook"], e["seconds"]) for e in R.read(path)} == {("01_consistency_kde", 300.0),
                                                                      ("02_threshold_ablation", 20.0)}
    R.write([_entry("01_consistency_kde", seconds=280.0, finished_at="2026-11-24T12:30:00+01:00")], path)
    assert {e["seconds"] for e in R.read(path) if e["notebook"] == "01_consistency_kde"} == {300.0}  # 11:30 UTC
    R.write([_entry("01_consistency_kde", seconds=250.0, finished_at="2026-11-24T13:00:00+00:00")], path)
    assert {e["seconds"] for e in R.read(path) if e["notebook"] == "01_consistency_kde"} == {250.0}


def _executed(path, cells: list[tuple[str, float | None]]) -> None:
    """An executed notebook as papermill leaves it: each code cell with its duration in metadata.papermill."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# title")]
    for source, seconds in cells:
        cell = nbformat.v4.new_code_cell(source)
        cell.metadata["papermill"] = {"duration": seconds, "status": "completed"}
        nb.cells.append(cell)
    nbformat.write(nb, str(path))


def test_the_slowest_cells_of_an_executed_notebook_say_where_its_time_went(tmp_path):
    path = tmp_path / "03.ipynb"
    _executed(path, [("import x", 1.0), ("# comment\n\nruns = run_all(examples)\nmore()", 300.0), ("plot()", 20.0),
                     ("never_ran()", None), ("table()", 5.0)])
    cells = R.slowest_cells(path, top=2)
    assert cells == [(300.0, 3, "runs = run_all(examples)"), (20.0, 4, "plot()")]  # cell 1 is the markdown title
    line = R.cells_line(cells, total=400.0)
    assert line == "  slowest cells: cell 3 300 s (75%): runs = run_all(examples); cell 4 20 s (5%): plot()"


def test_a_missing_or_damaged_executed_notebook_gives_no_cells(tmp_path):
    assert R.slowest_cells(tmp_path / "absent.ipynb") == []
    (tmp_path / "bad.ipynb").write_text("{not json")
    assert R.slowest_cells(tmp_path / "bad.ipynb") == []
    (tmp_path / "odd.ipynb").write_text(json.dumps({"cells": [{"cell_type": "code", "metadata": {"papermill": {"duration": "x"}}}, 5]}))
    assert R.slowest_cells(tmp_path / "odd.ipynb") == []
    assert R.cells_line([], 10.0) == "  slowest cells: no cell timings recorded"


def test_a_notebook_without_a_recorded_or_reference_time_is_estimated_by_the_plan():
    """Another model (a 7B on a GPU) has no reference table: the run's plan prices what it has not timed."""
    entries = [R.entry("01_consistency_kde", "full", "meta-llama/Llama-2-7b-hf", "cuda", 600.0)]
    planned = {"01_consistency_kde": 100.0, "02_threshold_ablation": 250.0, "03_verify_and_edit_tables": None}
    est = R.estimate(list(planned), entries, "full", "meta-llama/Llama-2-7b-hf", "cuda", planned)
    assert est == R.Estimate(seconds=600.0 + 250.0, from_runs=1, from_reference=0, unknown=1, from_plan=1)
    line = R.progress_line(1, 3, "01_consistency_kde", 0.0, est)
    assert "1 from earlier runs, 1 from the plan" in line and "+ 1 notebook not yet timed" in line
    # the embedded model's reference table comes before the plan
    cpu = R.estimate(["01_consistency_kde"], [], "cpu", "embedded", "cpu", {"01_consistency_kde": 1.0})
    assert (cpu.from_reference, cpu.from_plan) == (1, 0)
