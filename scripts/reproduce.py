"""Run every notebook in order with papermill (what `make reproduce` calls).

Executed copies go to <root>/notebooks/executed/ (git-ignored); each notebook writes its
own figures/, tables/ and results/. Each notebook's run time is recorded in results/run_times.json as it
finishes (covlib.runs.run_times: merged, under a lock, into what the file holds by then, so two runs at once keep each
other's times; a file of another shape is kept aside with a warning, never replaced); before each notebook the script
prints the time left across the rest, and at the end (or when one fails) a table of the times with the judge's
training time from its card.json, and the plan (`covlib.runs.plan`: the model work each notebook's profile does, at the
rates `make bench` measured) beside the times taken. After each notebook it prints its slowest cells (papermill's
per-cell timings): where the time went. `--plan` (make reproduce PLAN=1) prints the plan, with the last recorded times
beside it, and runs nothing. `--judge` (make reproduce JUDGE=overlap) runs the credibility notebooks' NLI oracle `judge`,
and 00b's judges with it in the trained judge's place, so a run need not train the judge first.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

import papermill as pm

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from covlib.core import paths  # noqa: E402
from covlib.generation import default_device, spec  # noqa: E402
from covlib.generation.simulated import is_simulated, parse_sim  # noqa: E402
from covlib.nli.registry import TRAINED_JUDGE, check_judge, trained_judge_dir  # noqa: E402
from covlib.papers.covrag.notebook import NOTEBOOKS as COVRAG  # noqa: E402
from covlib.papers.credibility.notebook import NOTEBOOKS as CREDIBILITY  # noqa: E402
from covlib.papers.verify_edit.notebook import NOTEBOOKS as VERIFY_EDIT  # noqa: E402
from covlib.runs import plan, profiles, run_times  # noqa: E402
from covlib.runs.project import NOTEBOOKS as PROJECT  # noqa: E402


SPECS = {spec["name"]: spec for table in (PROJECT, VERIFY_EDIT, CREDIBILITY, COVRAG) for spec in table.values()}
NUMBERED = re.compile(r"^\d{2}[a-z]?_\w+\.ipynb$")  # 00_data_tour, 00b_nli_judges, 01_...


def notebooks(only: str = "") -> list[Path]:
    """The numbered notebooks in order, or only those whose number ('00', '00b', '3') is listed (comma-separated)."""
    found = sorted(nb for nb in (ROOT / "notebooks").glob("[0-9][0-9]*_*.ipynb") if NUMBERED.match(nb.name))
    if only:
        wanted = {x.strip().zfill(2) for x in only.split(",") if x.strip()}
        numbers = {nb.name.split("_", 1)[0] for nb in found}
        unknown = sorted(wanted - numbers)
        if unknown or not wanted:
            raise SystemExit(f"ONLY={only!r}: no notebook numbered {', '.join(unknown) or '(none given)'}; "
                             f"choose from {', '.join(sorted(numbers))}")
        found = [nb for nb in found if nb.name.split("_", 1)[0] in wanted]
    return found


def executed_dir() -> Path:
    """Where the executed copies go (git-ignored): <root>/notebooks/executed, beside the run's own results (a run
    into another COVLIB_ROOT, such as a `make planted` seed, leaves the repository's executed notebooks alone)."""
    return paths.root() / "notebooks" / "executed"


def check_outputs() -> None:
    """Stop before the first notebook when a folder the run writes (executed notebooks, figures, tables, results,
    build) cannot be created or written to, naming it (a read-only mount would otherwise fail inside a notebook)."""
    problem = paths.unwritable([executed_dir(), paths.figures_dir(), paths.tables_dir(), paths.results_dir(),
                                paths.build_dir()])
    if problem:
        raise SystemExit(f"{problem}. The run writes its executed notebooks, figures, tables and results under "
                         f"{paths.root()}: make that folder writable (moving aside any file in the way), or point COVLIB_ROOT "
                         "at a writable folder (export COVLIB_ROOT=/path/to/output)")


def check_arguments(model: str, device: str, judge: str = "") -> None:
    """Stop before the first notebook on a model that is neither a folder, a hub id, a server spec
    (`openai:<model>@<base_url>`) nor a simulated model (`sim:<behaviour>`), an unknown device, or a judge that names
    none."""
    try:
        check_judge(judge) if judge else None
    except ValueError as err:
        raise SystemExit(f"JUDGE={judge!r}: {err}") from None
    if is_simulated(model):
        try:
            parse_sim(model)
        except ValueError as err:
            raise SystemExit(f"MODEL={model!r}: {err}") from None
    elif spec.is_endpoint(model):
        try:
            spec.parse_spec(model)
        except ValueError as err:
            raise SystemExit(f"MODEL={model!r}: {err}") from None
    elif model:
        try:
            spec.model_source(model)
        except FileNotFoundError as err:
            raise SystemExit(f"MODEL={model!r}: {err}") from None
    if device and not re.fullmatch(r"cpu|cuda(:\d+)?|mps", device):
        raise SystemExit(f"DEVICE={device!r}: use cpu, cuda, cuda:N or mps (or leave it empty)")


def report(finished: list[tuple[str, float]], stopped: tuple[str, float, str] | None, profile: str, model: str,
           device: str, planned: plan.Plan | None = None) -> None:
    """Print the run-time table of the finished notebooks (and the one that stopped), with the judge's training time,
    and the plan beside the times they took."""
    print(f"\nrun times (profile {profile}, model {model}, device {device}; recorded in {run_times.times_path()}):")
    print(run_times.table(finished, stopped, judge=run_times.judge_line(trained_judge_dir())), flush=True)
    if planned is not None and finished:
        print(f"\nthe plan against the run:\n{plan.table(planned, dict(finished))}", flush=True)


def make_plan(selected: list[Path], profile: str, model: str, device: str) -> plan.Plan:
    """The plan of running `selected` (`covlib.runs.plan`): work from each notebook's spec, rates from make bench."""
    return plan.make([SPECS[nb.stem] for nb in selected], profile, model, device)


def judge_parameters(nb: Path, judge: str) -> dict[str, str]:
    """JUDGE=: the notebook's NLI oracle `judge`, or its `judges` with `judge` in the trained judge's place (00b)."""
    declared = pm.inspect_notebook(str(nb)) if judge else {}
    if "judge" in declared:
        return {"judge": judge}
    if "judges" in declared:
        default = [s.strip() for s in declared["judges"]["default"].strip("\"'").split(",")]
        return {"judges": ",".join(dict.fromkeys(judge if s == TRAINED_JUDGE else s for s in default))}
    return {}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--profile", default="", help="smoke, cpu or full (default: full on a GPU, cpu otherwise)")
    ap.add_argument("--model", default="", help="hub id, local directory, openai:<model>@<base_url> or sim:paper / sim:null (default: embedded SmolLM2)")
    ap.add_argument("--device", default="", help="cpu or cuda (default: cuda when available)")
    ap.add_argument("--judge", default="", help="the NLI judge of notebooks 00b and 04-07, e.g. overlap (default: the "
                                                "trained judge `make judge` builds)")
    ap.add_argument("--only", default="", help="comma-separated notebook numbers, e.g. 00,03")
    ap.add_argument("--plan", action="store_true", help="print the model work and predicted time per notebook, "
                                                        "and the last recorded times beside them; run nothing")
    args = ap.parse_args()
    check_arguments(args.model, args.device, args.judge)
    try:
        profile = profiles.resolve(args.profile, args.device or None, present=not args.plan)  # plan any device
    except ValueError as err:
        raise SystemExit(f"PROFILE: {err}") from None
    selected = notebooks(args.only)
    if not args.plan:
        check_outputs()
    print(f"profile: {profile}; model: {args.model or 'embedded SmolLM2-135M-Instruct'}; device: {args.device or 'auto'}")
    if profile == "cpu":
        print("  (CPU subsample: every notebook is sized to finish within the hour; PROFILE=full forces the paper's settings)")
    model, device = args.model or run_times.EMBEDDED, args.device or default_device()
    try:
        planned = make_plan(selected, profile, args.model, device)
    except (OSError, ValueError) as err:  # a data file or tokenizer the plan reads is missing: the run decides
        if args.plan:
            raise SystemExit(f"no plan: {err}") from None
        print(f"no plan (the run goes on without its time estimates): {err}", flush=True)
        planned = None
    predicted = {name: planned.seconds(name) for name in planned.work} if planned else {}  # the model's size, read once
    times = run_times.load()  # a damaged or wrong-shape file is kept aside, with a warning
    if args.plan:
        print(f"{plan.describe(planned)}\n\n{plan.table(planned, plan.actual_seconds(times, planned))}")
        return
    out_dir = executed_dir()  # made by check_outputs
    mine: list[dict] = []  # this run's entries, merged again into the file as it is on disk after each notebook
    finished: list[tuple[str, float]] = []
    began = time.time()
    for index, nb in enumerate(selected, start=1):
        ahead = run_times.estimate([n.stem for n in selected[index - 1:]], times, profile, model, device, predicted)
        print(f"\n=== {nb.name} ===\n{run_times.progress_line(index, len(selected), nb.stem, time.time() - began, ahead)}",
              flush=True)
        start = time.time()
        try:
            pm.execute_notebook(
                str(nb),
                str(out_dir / nb.name),
                parameters={"profile": profile, "model": args.model, "device": args.device,
                            **judge_parameters(nb, args.judge)},
                cwd=str(ROOT / "notebooks"),
                progress_bar=True,
            )
        except pm.PapermillExecutionError as err:
            report(finished, (nb.stem, time.time() - start, "FAILED"), profile, model, device, planned)
            reason = " ".join(str(err.evalue).split())[:500]
            raise SystemExit(f"\n{nb.name} failed in cell {err.exec_count} ({err.ename}: {reason}).\n"
                             f"The executed copy, with the traceback, is {out_dir / nb.name}. Finished calls are "
                             "cached: fix the cause and run the same command again to resume.") from None
        except BaseException:  # interrupted, or papermill itself failed: show what finished, then stop
            report(finished, (nb.stem, time.time() - start, "stopped"), profile, model, device, planned)
            raise
        elapsed = time.time() - start
        finished.append((nb.stem, elapsed))
        mine.append(run_times.entry(nb.stem, profile, model, device, elapsed))
        times = run_times.write(mine)  # re-read under the lock: another run's entries are kept
        print(f"{nb.name}: {elapsed:.0f} s\n{run_times.cells_line(run_times.slowest_cells(out_dir / nb.name), elapsed)}")
    report(finished, None, profile, model, device, planned)
    print(f"\nfigures: {paths.figures_dir()}\ntables:  {paths.tables_dir()}")


if __name__ == "__main__":
    main()
