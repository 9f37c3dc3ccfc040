"""The trace format (covlib.traces) and its notebook views (covlib.traces.view)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from covlib import traces
from covlib.traces import view as trace_view

STEPS = [("Prompt", "few-shot prompt, Appendix C"), ("Sample reasoning paths", "n = 5 paths at temperature 0.7"),
         ("Vote", "the most consistent answer")]
SHOTS = "Q: who?\nA: First, x. The answer is x.\n" * 20  # a shared few-shot block (> MIN_SHARED_PREFIX)


@pytest.fixture
def tracer(tmp_path):
    return traces.Tracer("03_verify_and_edit_tables", folder=tmp_path / "traces")


@pytest.fixture
def folder(tracer):
    return tracer.folder


def _record(i: int, prompt, before: float, after: float, text: str = "x") -> dict:
    return {"id": f"q{i}", "question": f"question {i}?", "gold": ["x"], "prediction": text, "correct": after,
            "before": {"prediction": "y", "correct": before}, "flags": {"parse_failures": i % 2},
            "steps": [traces.step("Prompt", {"question": f"question {i}?"}, {}, [traces.call("generate", f"k{i}", prompt=prompt)]),
                      traces.step("Vote", {}, {"votes": {text: 3}, "consistency": 3.0, "logprob": float("-inf")})]}


def _write_run(tracer: traces.Tracer, n: int = 4, outcomes=((0, 1), (1, 0), (1, 1), (0, 0))) -> traces.Trace:
    with tracer.open_run("verify_edit", "verify_edit", "CoT-SC + VE, HotpotQA", STEPS, {"n": 5, "seed": 0},
                         model="smollm2", label="hotpotqa-bm25", compare=("CoT-SC", "CoT-SC + VE")) as tr:
        prompts = tr.prompts([f"{SHOTS}Q: question {i}?\nA:" for i in range(n)])
        for i in range(n):
            b, a = outcomes[i % len(outcomes)]
            tr.write(_record(i, prompts[i], b, a))
    return traces.read(tr.path)


def test_a_run_round_trips_valid_with_its_shared_block_stored_once(tracer, folder):
    trace = _write_run(tracer)
    assert traces.validate(trace.path) == []
    assert trace.complete and trace.damaged == 0 and len(trace.records) == 4
    assert [r["index"] for r in trace.records] == [0, 1, 2, 3]
    lines = trace.path.read_text().splitlines()
    assert sum('"type":"prefix"' in line for line in lines) == 1, "the few-shot block is written once"
    assert trace.path.read_text().count("Q: who?") == 20, "only in the prefix line"
    prompt = trace.records[2]["steps"][0]["calls"][0]["prompt"]
    assert trace.prompt_text(prompt) == f"{SHOTS}Q: question 2?\nA:"
    assert trace.records[0]["steps"][1]["outputs"]["logprob"] is None, "-inf is not JSON: stored as null"
    assert trace.header["steps"][1] == {"name": "Sample reasoning paths", "paper": "n = 5 paths at temperature 0.7"}
    assert trace.path.parent == folder and trace.path.name.startswith("verify-edit-hotpotqa-bm25-")


def test_the_same_run_again_replaces_its_file_and_start_empties_the_folder(tracer, folder, tmp_path):
    first = _write_run(tracer).path
    second = _write_run(tracer, n=2).path
    assert first == second and len(traces.read(second).records) == 2
    traces.Tracer("03_verify_and_edit_tables", folder=folder)
    assert traces.run_files(folder) == []


def test_tracing_keeps_no_state_outside_its_tracer(tmp_path):
    """Two notebooks' tracers at once write each into its own folder: nothing module-wide decides where traces go."""
    assert not any(hasattr(traces, name) for name in ("start", "stop", "active", "open_run", "NullWriter"))
    a = traces.Tracer("01_consistency_kde", folder=tmp_path / "a")
    b = traces.Tracer("02_threshold_ablation", folder=tmp_path / "b")
    for tracer in (a, b, a):
        with tracer.open_run("verify_edit", "cot", "CoT", STEPS, {"n": 1}) as tr:
            tr.write(_record(0, "p", 0, 1))
    assert [p.parent.name for p in (tmp_path / "a").glob("*.jsonl")] == ["a"]
    assert traces.read_header(next((tmp_path / "b").glob("*.jsonl")))["notebook"] == "02_threshold_ablation"


def test_outcomes_within_a_run_and_across_two_runs(tracer, folder):
    trace = _write_run(tracer)
    assert [o for _, _, o in traces.pairs(trace)] == ["fixed", "broken", "both right", "both wrong"]
    assert traces.count_outcomes(traces.pairs(trace)) == {"fixed": 1, "broken": 1, "both right": 1, "both wrong": 1}
    with tracer.open_run("credibility", "answer", "closed book", STEPS, {"refs": 0}) as tr:
        for i in range(3):
            tr.write({**_record(i, "p", 0, 1.0), "correct": (0.8, 0.9, 0.0)[i]})
    closed = traces.read(tr.path)
    rows = traces.pairs(closed, trace)  # joined on id: q0..q2 only
    assert [(b["id"], o) for b, _, o in rows] == [("q0", "both right"), ("q1", "broken"), ("q2", "fixed")]
    assert traces.outcome(None, 1) is None


@pytest.mark.parametrize("bad, expected", [
    ({"type": "example", "index": 0, "id": "a", "question": "q", "gold": ["x"], "prediction": "x", "correct": 2,
      "flags": {}, "steps": [traces.step("Prompt")]}, "correct: 2 is not valid"),
    ({"type": "example", "index": 0, "id": "a", "question": "q", "gold": ["x"], "prediction": "x", "correct": 1,
      "flags": {}, "steps": [{"name": "Prompt"}]}, "steps/0: 'inputs' is a required property"),
    ({"type": "mystery"}, "not a line of a trace (type 'mystery'"),
])
def test_validate_names_the_bad_line(tracer, folder, bad, expected):
    path = _write_run(tracer, n=1).path
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-1] + [json.dumps(bad), lines[-1]]) + "\n")
    problems = traces.validate(path)
    assert problems and problems[0].startswith(f"line {len(lines)}:") and expected in problems[0]


def test_a_file_that_is_not_a_trace_or_of_another_version_is_refused(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"type": "example"}\n')
    with pytest.raises(ValueError, match="not a covlib trace"):
        traces.read(path)
    path.write_text(json.dumps({"type": "run", "format": traces.FORMAT, "version": 99}) + "\n")
    with pytest.raises(ValueError, match="version 99"):
        traces.read(path)


KILLED = """
import sys, time
from covlib import traces
tr = traces.Tracer("09_covrag_iterations", folder=sys.argv[1]).open_run("covrag", "cov_rag", "CoV-RAG", [("retrieve", "top-5")], {"k": 5})
for i in range(1000):
    tr.write({"id": str(i), "question": "q", "gold": ["a"], "prediction": "a", "correct": 1.0, "flags": {},
              "steps": [traces.step("retrieve", {"query": "q"}, {"passages": ["p" * 200]})]})
    time.sleep(0.02)
"""


def test_a_run_killed_mid_way_keeps_every_finished_record(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", KILLED, str(tmp_path)])
    deadline = time.time() + 60
    files = []
    while time.time() < deadline:
        files = list(tmp_path.glob("*.jsonl"))
        if files and files[0].read_text().count('"type":"example"') >= 5:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    trace = traces.read(files[0])
    assert not trace.complete, "no end line: the reader knows the run was interrupted"
    assert len(trace.records) >= 5 and [r["id"] for r in trace.records] == [str(i) for i in range(len(trace.records))]
    assert [p for p in traces.validate(files[0]) if "not JSON" not in p] == []


def test_the_step_view_shows_the_papers_steps_and_escapes_model_output(tracer, folder):
    trace = _write_run(tracer)
    record = trace.records[0]
    record["prediction"] = "<script>alert('x')</script><img src=x onerror=alert(1)>"
    page = trace_view.example_html(trace, record)
    assert "<script" not in page and "<img" not in page and "&lt;script&gt;" in page
    assert "Step 1. Prompt" in page and "Step 3. Vote" in page, "numbered as in the paper's list of steps"
    assert "The paper: few-shot prompt, Appendix C" in page
    assert f": example 1 of {len(trace.records)} <code>" in page  # counted from 1, as the explorer counts (issue 52)
    assert "<b>fixed</b>" in page and "shared block (" in page
    record["steps"][1]["calls"].append(traces.call("retrieve", None, query="who <b>?", retriever="bm25",
                                                   passages=[{"id": "d1", "text": "Paris is the capital", "score": 3.5}]))
    page = trace_view.example_html(trace, record)
    assert "<b>retrieved</b> for <i>who &lt;b&gt;?</i> (bm25)" in page and "Paris is the capital" in page
    view = trace_view.show(trace.path, example="q1")
    assert view._repr_html_() == str(view) and "question 1?" in view


@pytest.mark.parametrize("value, shown", [
    (3.234498191626014, "3.234"), (-1.9166629612445831, "-1.917"), (0.27, "0.27"), (1.0, "1"), (0.0, "0"), (3, "3"),
    (123456, "123456"), (0.000123456, "0.000123"), (-0.0004, "-0.0004"), (True, "True"), ("3.14159265", "3.14159265")])
def test_a_number_reads_to_3_decimals_and_an_integer_stays_one(value, shown):
    assert trace_view.number_text(value) == shown


def test_a_step_shows_floats_shortened_with_the_full_value_in_the_tooltip():
    page = trace_view.value_html({"wang": 3.234498191626014, "threshold": 3, "p": 0.5, "text": "0.123456789"})
    assert "<span title='3.234498191626014'>3.234</span>" in page and "<td>3</td>" in page and "<td>0.5</td>" in page
    assert "<td>0.123456789</td>" in page, "text is text, even when it looks like a number"


def test_why_an_examples_steps_end_early_comes_from_what_its_last_step_records(tracer, folder):
    steps = [("Consistency check", "if s*_sc < ceil(n/2) then edit"), ("Answer again", "a* <- f(p_cot, q, r*)")]
    with tracer.open_run("verify_edit", "verify_edit", "VE", steps, {"threshold": 3, "consistency": "wang"}) as tr:
        for i, (inputs, outputs) in enumerate([({"threshold": 3.5}, {"score": 3.5, "edited": False}),
                                               ({}, {"score": 4.649123456, "edited": False}),
                                               ({}, {"score": "<b>", "edited": False}),
                                               ({}, {"score": 1.2, "edited": True})]):
            tr.write({"id": f"q{i}", "question": "?", "gold": [], "prediction": None, "correct": None, "flags": {},
                      "steps": [traces.step("Consistency check", inputs, outputs)]})
        tr.write({"id": "done", "question": "?", "gold": [], "prediction": None, "correct": None, "flags": {},
                  "steps": [traces.step("Consistency check"), traces.step("Answer again")]})
    trace = traces.read(tr.path)
    said = [trace_view.stop_reason(trace, r) for r in trace.records]
    assert said[0].startswith("not edited: consistency (wang) 3.5 ≥ threshold 3.5 (Algorithm 1 leaves")
    assert said[1].startswith("not edited: consistency (wang) 4.649 ≥ threshold 3 "), "the run's params: no threshold in the step"
    assert said[3:] == ["", ""], "edited, or every step ran: nothing to say"
    page = trace_view.example_html(trace, trace.records[2])
    assert "consistency (wang) &lt;b&gt; ≥ threshold 3" in page and "Stops here</b> (step 2 not run)" in page


def test_the_comparison_counts_and_filters_by_outcome(tracer, folder):
    trace = _write_run(tracer, n=8)
    page = trace_view.compare(trace)
    assert "<th>fixed</th><th>broken</th><th>both right</th><th>both wrong</th>" in page
    assert "<tr><td>2</td><td>2</td><td>2</td><td>2</td></tr>" in page
    fixed = trace_view.compare(trace, outcome="fixed")
    assert "<code>q0</code>" in fixed and "<code>q4</code>" in fixed and "<code>q1</code>" not in fixed
    with pytest.raises(ValueError, match="outcome must be one of"):
        trace_view.compare(trace, outcome="improved")


def test_runs_are_found_by_notebook_and_name(tracer, folder, monkeypatch):
    _write_run(tracer)
    monkeypatch.setattr(traces, "folder_of", lambda notebook: folder)
    assert trace_view.load("03_verify_and_edit_tables", "hotpotqa").title == "CoT-SC + VE, HotpotQA"
    with pytest.raises(ValueError, match="0 runs of .* match 'fever'; its runs: verify-edit-hotpotqa-bm25"):
        trace_view.load("03_verify_and_edit_tables", "fever")


def test_pick_finds_a_telling_example(tracer, folder):
    trace = _write_run(tracer, n=4, outcomes=((1, 1), (0, 0), (1, 0), (0, 1)))
    assert trace_view.pick(trace) == "q3", "fixed first"
    assert trace_view.pick(trace, outcomes=("broken",)) == "q2"
    assert trace_view.pick(trace, outcomes=(), flag="parse_failures") == "q1"
    assert trace_view.pick(trace, outcomes=(), flag="fired") == "q0", "no such flag: the first example"
    with tracer.open_run("credibility", "cited answer", "closed book", STEPS, {}) as tr:
        for i in range(4):
            tr.write({**_record(i, "p", 0, 1.0), "correct": 0.0})
    assert trace_view.pick(traces.read(tr.path), ("fixed",), b=trace) == "q0", "wrong closed-book, right after"


def test_find_picks_a_run_by_its_header(tracer, folder, monkeypatch):
    _write_run(tracer)
    with tracer.open_run("credibility", "cited answer", "closed book", STEPS, {"references": "closed-book"}, model="m"):
        pass
    monkeypatch.setattr(traces, "folder_of", lambda notebook: folder)
    assert trace_view.find("06_knowledge_recall", method="cited answer", references="closed-book").title == "closed book"
    assert trace_view.find("06_knowledge_recall", model="smollm2").title == "CoT-SC + VE, HotpotQA"
    with pytest.raises(ValueError, match="0 runs of '06_knowledge_recall' have method='cited answer', references='complete'"):
        trace_view.find("06_knowledge_recall", method="cited answer", references="complete")


def _lines_of(path) -> list[str]:
    return path.read_text().splitlines()


def test_a_hostile_or_damaged_file_reads_as_what_the_views_can_show(tracer, folder):
    path = _write_run(tracer, n=2).path
    head, prefix, first, second, end = _lines_of(path)
    bad = [json.dumps({**json.loads(first), "before": "x"}),                       # wrong shapes: skipped
           json.dumps({**json.loads(first), "gold": 3}),
           json.dumps({**json.loads(first), "correct": "abc"}),
           first.replace('"correct":1', '"correct":NaN'),                             # NaN is no number: null
           '{"type": [1]}', "[1, 2]", '{"type": "example", "id"']                     # not a trace line at all
    path.write_text("\ufeff" + "\n".join([head, prefix, first, *bad, second, end, first]) + "\n")
    trace = traces.read(path)
    assert [r["id"] for r in trace.records] == ["q0", "q0", "q1"], "the NaN record kept, with correct None"
    assert trace.records[1]["correct"] is None and trace.damaged == 7, "6 bad lines and one after the end line"
    assert trace.complete
    problems = traces.validate(path)  # no crash on a list as type, and every bad line named
    assert len(problems) == 7 and "lines after the end line" in problems[-1]


def test_a_run_line_that_is_not_first_is_not_a_trace(tracer, folder):
    path = _write_run(tracer, n=1).path
    lines = _lines_of(path)
    path.write_text("\n".join([lines[2], *lines[:2], *lines[3:]]) + "\n")
    with pytest.raises(ValueError, match="not a covlib trace"):
        traces.read(path)


def test_a_line_separator_inside_a_text_stays_in_its_line(tracer, folder):
    with tracer.open_run("verify_edit", "cot", "CoT", STEPS, {}) as tr:
        tr.write({**_record(0, "p", 0, 1), "question": "a\u2028b\x85c"})
    raw = tr.path.read_text().replace("\\u2028", "\u2028").replace("\\u0085", "\x85")  # as a writer of raw UTF-8 would
    tr.path.write_text(raw)
    assert "\u2028" in tr.path.read_text()
    assert traces.validate(tr.path) == [] and traces.read(tr.path).records[0]["question"] == "a\u2028b\x85c"


def test_repeated_ids_pair_as_find_shows_them_and_a_lost_prefix_says_so(tracer, folder):
    with tracer.open_run("verify_edit", "cot", "A", STEPS, {"a": 1}) as tr:
        tr.write({**_record(0, {"prefix": "p-gone", "text": "Q: x"}, 0, 0.0), "id": "x", "prediction": "first"})
        tr.write({**_record(1, "p", 0, 1.0), "id": "x", "prediction": "second"})
    a = traces.read(tr.path)
    with tracer.open_run("verify_edit", "cot", "B", STEPS, {"b": 1}) as tr:
        tr.write({**_record(0, "p", 0, 1.0), "id": "x"})
    (before, _, outcome), = traces.pairs(a, traces.read(tr.path))
    assert before is a.find("x") and before["prediction"] == "first" and outcome == "fixed"
    assert a.prompt_text(a.records[0]["steps"][0]["calls"][0]["prompt"]) == "[shared block p-gone missing from the file]\nQ: x"


def test_a_tracer_checks_the_name_and_empties_only_trace_files(tmp_path):
    keep = tmp_path / "notes.jsonl"
    keep.write_text('{"mine": true}\n')
    with pytest.raises(ValueError, match="a notebook name like"):
        traces.Tracer("../../etc", folder=tmp_path)
    old = _write_run(traces.Tracer("03_verify_and_edit_tables", folder=tmp_path), n=1).path
    traces.Tracer("03_verify_and_edit_tables", folder=tmp_path)
    assert keep.exists() and not old.exists()
