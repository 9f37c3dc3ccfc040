"""Run every notebook in order with papermill (what `make reproduce` calls).

Executed copies go to notebooks/executed/ (git-ignored); each notebook writes its
own figures/, tables/ and results/. Run times are recorded in results/run_times.json.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

import papermill as pm

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from covlib.core import paths  # noqa: E402
from covlib.generation import spec  # noqa: E402
from covlib.runs import profiles  # noqa: E402


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


def check_arguments(model: str, device: str) -> None:
    """Stop before the first notebook on a model that is neither a folder, a hub id nor a server spec
    (`openai:<model>@<base_url>`), or an unknown device."""
    if spec.is_endpoint(model):
        try:
            spec.parse_spec(model)
        except ValueError as err:
            raise SystemExit(f"MODEL={model!r}: {err}") from None
    elif model:
        try:
            spec.model_source(model)
        except FileNotFoundError:
            raise SystemExit(f"MODEL={model!r} is not a model folder here and not a hub id (`owner/name`)") from None
    if device and not re.fullmatch(r"cpu|cuda(:\d+)?|mps", device):
        raise SystemExit(f"DEVICE={device!r}: use cpu, cuda, cuda:N or mps (or leave it empty)")


def read_times(path: Path) -> dict:
    """results/run_times.json, or {} (with a note) when it is missing or unreadable."""
    if not path.exists():
        return {}
    try:
        times = json.loads(path.read_text(encoding="utf-8"))
        return times if isinstance(times, dict) else {}
    except (json.JSONDecodeError, UnicodeDecodeError):
        print(f"note: {path} is unreadable; starting a new one")
        return {}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--profile", default="", help="smoke, cpu or full (default: full on a GPU, cpu otherwise)")
    ap.add_argument("--model", default="", help="hub id, local directory or openai:<model>@<base_url> (default: embedded SmolLM2)")
    ap.add_argument("--device", default="", help="cpu or cuda (default: cuda when available)")
    ap.add_argument("--only", default="", help="comma-separated notebook numbers, e.g. 00,03")
    args = ap.parse_args()
    check_arguments(args.model, args.device)
    try:
        profile = profiles.resolve(args.profile, args.device or None)
    except ValueError as err:
        raise SystemExit(f"PROFILE: {err}") from None
    selected = notebooks(args.only)
    print(f"profile: {profile}; model: {args.model or 'embedded SmolLM2-135M-Instruct'}; device: {args.device or 'auto'}")
    if profile == "cpu":
        print("  (CPU subsample: every notebook is sized to finish within the hour; PROFILE=full forces the paper's settings)")
    out_dir = ROOT / "notebooks" / "executed"
    out_dir.mkdir(parents=True, exist_ok=True)
    times_path = paths.results_dir() / "run_times.json"
    times = read_times(times_path)
    for nb in selected:
        print(f"\n=== {nb.name} ===", flush=True)
        start = time.time()
        try:
            pm.execute_notebook(
                str(nb),
                str(out_dir / nb.name),
                parameters={"profile": profile, "model": args.model, "device": args.device},
                cwd=str(ROOT / "notebooks"),
                progress_bar=True,
            )
        except pm.PapermillExecutionError as err:
            reason = " ".join(str(err.evalue).split())[:500]
            raise SystemExit(f"\n{nb.name} failed in cell {err.exec_count} ({err.ename}: {reason}).\n"
                             f"The executed copy, with the traceback, is {out_dir / nb.name}. Finished calls are "
                             "cached: fix the cause and run the same command again to resume.") from None
        elapsed = time.time() - start
        times[nb.stem] = {"profile": profile, "model": args.model or "embedded", "seconds": round(elapsed, 1)}
        paths.results_dir().mkdir(parents=True, exist_ok=True)
        times_path.write_text(json.dumps(times, indent=2))
        print(f"{nb.name}: {elapsed:.0f} s")
    print(f"\nfigures: {paths.figures_dir()}\ntables:  {paths.tables_dir()}")


if __name__ == "__main__":
    main()
