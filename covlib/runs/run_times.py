"""Notebook run times: results/run_times.json (read, migrated, written atomically), the ETA across notebooks, the table.

`make reproduce` (scripts/reproduce.py) records one entry per notebook it finishes:

    {"format": 2, "runs": [{"notebook": "01_consistency_kde", "profile": "cpu", "model": "embedded",
                            "device": "cpu", "seconds": 324.1, "finished_at": "2026-11-24T10:02:03+00:00",
                            "commit": "f690260"}, ...]}

There is one entry per (notebook, profile, model, device): a new run replaces only its own, so a smoke run keeps
the cpu timing. The flat file of earlier versions, {stem: {profile, model, seconds}}, is read as entries whose
device, time and commit are unknown (None); a later run of the same notebook, profile and model replaces them.

Two runs may share the file (two `make reproduce` at once): `write`, the only writer, holds an exclusive lock (flock
on the sibling run_times.json.lock) while it re-reads the file, merges the new entries into what is there (for the same
notebook, profile, model and device the later finished_at wins) and writes it atomically, so neither run loses the
other's entries. A file that is not readable JSON, or JSON of another shape (a list, {"runs": "oops"}, an entry that is not a
run), is never replaced: it is kept aside as run_times.unreadable.json (then .unreadable.1.json, ...) with a one-line
warning on stderr naming both paths, and a new file is started.

Before each notebook the runner prints the time left across the notebooks still to run: for each, the last
recorded time of the same profile, model and device (an entry of unknown device counts), else `REFERENCE_SECONDS`
of the profile when the model is the embedded one, else the run's plan (`covlib.runs.plan`: the notebook's model work
at the rates `make bench` measured); a notebook with none of these is counted as not yet timed.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

try:
    import fcntl
except ImportError:  # Windows: no flock; the file is then written without a lock (make reproduce needs a POSIX shell)
    fcntl = None  # type: ignore[assignment]

from covlib.core import paths
from covlib.generation import EMBEDDED_LABEL
from covlib.report import results

FORMAT = 2
EMBEDDED = EMBEDDED_LABEL  # the model label of a run on the default (embedded) model
FIELDS = ("notebook", "profile", "model", "device", "seconds", "finished_at", "commit")

# Expected seconds per notebook, per profile, with the embedded model on the 2-core CPU reference machine
# (docs/benchmarks.md, "The whole `cpu` reproduction", shows the same numbers in minutes; a test keeps them equal).
# None: NOT MEASURED YET. The ETA counts such a notebook as "not yet timed" until a run has recorded it.
# cpu: one fresh-clone `make reproduce` at 8b77c33 (2026-11-25/26, ONNX int8 judge), 00b re-run at caded6c after 6e86eff
# (the LLM judge's three options in one prefill; 488.3 s before).
REFERENCE_SECONDS: dict[str, dict[str, float | None]] = {
    "cpu": {
        "00_data_tour": 47.1,
        "00b_nli_judges": 190.2,
        "01_consistency_kde": 138.1,
        "02_threshold_ablation": 212.0,
        "03_verify_and_edit_tables": 692.5,
        "04_credibility_models": 96.0,
        "05_knowledge_precision": 218.0,
        "06_knowledge_recall": 125.1,
        "07_reflection_completion": 287.7,
        "08_covrag_verifier": 236.0,
        "09_covrag_iterations": 20.0,
        "10_covrag_finetune": 519.8,
        "11_covrag_judge": 90.1,
        "12_claims": 4.1,
    },
}


def times_path() -> Path:
    """Where the run times are kept: <root>/results/run_times.json."""
    return paths.results_dir() / "run_times.json"


def _number(value: Any) -> float | None:
    """A finite, non-negative number of seconds, or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return None
    return float(value)


def _clean(raw: Any) -> dict[str, Any] | None:
    """One entry with every field of FIELDS (missing ones None), or None when it names no notebook or time."""
    if not isinstance(raw, dict) or not isinstance(raw.get("notebook"), str) or _number(raw.get("seconds")) is None:
        return None
    out = {key: raw.get(key) for key in FIELDS}
    out["seconds"] = _number(raw["seconds"])
    out["model"] = out["model"] or EMBEDDED
    return out


def migrate(raw: Any) -> list[dict[str, Any]]:
    """The entries of a parsed run_times.json, in this format or the old flat {stem: {profile, model, seconds}}."""
    if isinstance(raw, dict) and isinstance(raw.get("runs"), list):
        found = [_clean(item) for item in raw["runs"]]
    elif isinstance(raw, dict):  # the flat format: one entry per notebook stem
        found = [_clean({**value, "notebook": stem}) if isinstance(value, dict) else None for stem, value in raw.items()]
    else:
        found = []
    return [e for e in found if e is not None]


def _problem(raw: Any) -> str | None:
    """Why a parsed run_times.json is of neither known shape (this format, the old flat one), or None when it is one."""
    if not isinstance(raw, dict):
        return f"a JSON {type(raw).__name__}, not an object"
    if "runs" in raw or "format" in raw:
        if "format" in raw and raw["format"] != FORMAT:
            return f"format {json.dumps(raw['format'])[:40]}, not {FORMAT}"
        if not isinstance(raw.get("runs"), list):
            return f'"runs" is {json.dumps(raw.get("runs"))[:40]}, not a list'
        items = [(f"runs[{i}]", item) for i, item in enumerate(raw["runs"])]
    else:  # the flat format
        items = [(json.dumps(stem), {**value, "notebook": stem} if isinstance(value, dict) else value)
                 for stem, value in raw.items()]
    bad = next((where for where, item in items if _clean(item) is None), None)
    return f"entry {bad} is not a run (an object with a notebook and its seconds)" if bad else None


def read(path: Path | None = None) -> list[dict[str, Any]]:
    """The entries of run_times.json ([] when absent); ValueError when it is not readable JSON or of another shape."""
    path = path or times_path()
    if not path.exists():
        return []
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path} is not readable JSON ({err})") from None
    problem = _problem(raw)
    if problem:
        raise ValueError(f"{path} is not a run-times file ({problem})")
    return migrate(raw)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `path` (flock on its sibling <name>.lock, never deleted) while the block runs."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a", encoding="utf-8") as handle:
        if fcntl is not None:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)  # released when the handle closes
        yield


def _kept_name(path: Path) -> Path:
    """The first free name to keep a refused file under: run_times.unreadable.json, then .unreadable.1.json, ..."""
    kept, n = path.with_name(f"{path.stem}.unreadable{path.suffix}"), 0
    while kept.exists():
        n += 1
        kept = path.with_name(f"{path.stem}.unreadable.{n}{path.suffix}")
    return kept


def _load_locked(path: Path) -> list[dict[str, Any]]:
    """`read`, the caller holding the lock; a file it refuses is moved aside (a one-line warning) and [] returned."""
    try:
        return read(path)
    except ValueError as err:
        kept = _kept_name(path)
        os.replace(path, kept)
        print(f"warning: {err}; kept it as {kept}, starting a new one", file=sys.stderr, flush=True)
        return []


def load(path: Path | None = None) -> list[dict[str, Any]]:
    """The entries of run_times.json, read under its lock; a file `read` refuses is kept aside, with a warning."""
    path = path or times_path()
    with _locked(path):
        return _load_locked(path)


def _write_locked(entries: Iterable[dict[str, Any]], path: Path) -> Path:
    """Write the entries, sorted, through a temporary file renamed into place; the caller holds the lock."""
    rows = sorted((e for e in (_clean(x) for x in entries) if e is not None),
                  key=lambda e: (e["notebook"], str(e["profile"]), str(e["model"]), str(e["device"])))
    return results._atomic_write(path, json.dumps({"format": FORMAT, "runs": rows}, indent=2) + "\n")


def _when(e: dict[str, Any]) -> float:
    """An entry's finished_at in seconds since the epoch (-inf when unknown or unreadable; no zone means UTC)."""
    try:
        when = _dt.datetime.fromisoformat(str(e.get("finished_at")))
    except ValueError:
        return -math.inf
    return (when if when.tzinfo else when.replace(tzinfo=_dt.timezone.utc)).timestamp()


def merge(entries: Sequence[dict[str, Any]], new: dict[str, Any]) -> list[dict[str, Any]]:
    """`record`, unless the entries hold a later run of the same notebook, profile, model and device (it stays)."""
    if any(_same(e, new["notebook"], new["profile"], new["model"], new["device"]) and _when(e) > _when(new)
           for e in entries):
        return list(entries)
    return record(entries, new)


def write(new: Iterable[dict[str, Any]], path: Path | None = None) -> list[dict[str, Any]]:
    """Under the file's lock: re-read run_times.json, merge the entries into it, write it atomically; the merged
    entries. The only writer: what another run wrote meanwhile is kept."""
    path = path or times_path()
    with _locked(path):
        entries = _load_locked(path)
        for item in filter(None, map(_clean, new)):
            entries = merge(entries, item)
        _write_locked(entries, path)
    return entries


def short_commit() -> str | None:
    """The code's git HEAD as a short sha ('-dirty' when tracked files changed), or None outside git."""
    commit = results.git_commit()
    if not commit:
        return None
    return commit[:7] + ("-dirty" if commit.endswith("-dirty") else "")


def entry(notebook: str, profile: str, model: str, device: str, seconds: float, *,
          finished_at: str | None = None, commit: str | None = None) -> dict[str, Any]:
    """One notebook's run; `finished_at` defaults to now (ISO, UTC) and `commit` to `short_commit()`."""
    return {"notebook": notebook, "profile": profile, "model": model or EMBEDDED, "device": device,
            "seconds": round(float(seconds), 1),
            "finished_at": finished_at or _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "commit": commit if commit is not None else short_commit()}


def _same(old: dict[str, Any], notebook: str, profile: str, model: str, device: str | None) -> bool:
    """Whether `old` times this notebook, profile and model on this device (an old entry of unknown device counts)."""
    return (old["notebook"] == notebook and old["profile"] == profile and (old["model"] or EMBEDDED) == (model or EMBEDDED)
            and (old["device"] is None or device is None or old["device"] == device))


def record(entries: Sequence[dict[str, Any]], new: dict[str, Any]) -> list[dict[str, Any]]:
    """The entries with `new` in place of any earlier run of the same notebook, profile, model and device."""
    kept = [e for e in entries if not _same(e, new["notebook"], new["profile"], new["model"], new["device"])]
    return [*kept, new]


def previous_seconds(entries: Sequence[dict[str, Any]], notebook: str, profile: str, model: str,
                     device: str) -> float | None:
    """The recorded time of the notebook in this profile, model and device (the latest), or None."""
    found = [e for e in entries if _same(e, notebook, profile, model, device)]
    found.sort(key=lambda e: (e["device"] is not None, e["finished_at"] or ""))
    return found[-1]["seconds"] if found else None


@dataclass(frozen=True)
class Estimate:
    """The expected seconds for a list of notebooks and where each estimate came from."""

    seconds: float
    from_runs: int  # notebooks timed by an earlier run of the same profile, model and device
    from_reference: int  # notebooks estimated from REFERENCE_SECONDS
    unknown: int  # notebooks with none of these: not counted in `seconds`
    from_plan: int = 0  # notebooks estimated by the run's plan (covlib.runs.plan: their model work at measured rates)


def estimate(notebooks: Sequence[str], entries: Sequence[dict[str, Any]], profile: str, model: str,
             device: str, planned: Mapping[str, float | None] | None = None) -> Estimate:
    """The time the notebooks (stems) should take: earlier runs first, else the profile's reference table (the
    embedded model), else the run's plan (`planned`: predicted seconds by notebook)."""
    reference = REFERENCE_SECONDS.get(profile, {}) if (model or EMBEDDED) == EMBEDDED else {}
    planned = planned or {}
    seconds, runs, table, unknown, plan = 0.0, 0, 0, 0, 0
    for stem in notebooks:
        earlier = previous_seconds(entries, stem, profile, model, device)
        if earlier is not None:
            seconds, runs = seconds + earlier, runs + 1
        elif reference.get(stem) is not None:
            seconds, table = seconds + float(reference[stem]), table + 1
        elif planned.get(stem) is not None:
            seconds, plan = seconds + float(planned[stem]), plan + 1
        else:
            unknown += 1
    return Estimate(seconds, runs, table, unknown, plan)


def mmss(seconds: float) -> str:
    """Seconds as minutes:seconds, e.g. 754.2 -> '12:34' (minutes go past 59: 5400 -> '90:00')."""
    whole = int(round(seconds))
    return f"{whole // 60:02d}:{whole % 60:02d}"


def progress_line(index: int, total: int, notebook: str, elapsed: float, remaining: Estimate) -> str:
    """Before notebook `index` (1-based) of `total`: elapsed time and the estimate for it and the rest."""
    head = f"[{index}/{total}] {notebook}: {mmss(elapsed)} elapsed"
    left = total - index + 1
    if remaining.from_runs + remaining.from_reference + remaining.from_plan == 0:
        return f"{head}; remaining: unknown ({left} notebook{'s' if left != 1 else ''} not yet timed)"
    sources = [f"{n} from {what}" for n, what in ((remaining.from_runs, "earlier runs"),
                                                   (remaining.from_reference, "the reference table"),
                                                   (remaining.from_plan, "the plan")) if n]
    line = f"{head}; remaining ~{mmss(remaining.seconds)} ({', '.join(sources)})"
    if remaining.unknown:
        line += f" + {remaining.unknown} notebook{'s' if remaining.unknown != 1 else ''} not yet timed"
    return line


def table(finished: Sequence[tuple[str, float]], stopped: tuple[str, float, str] | None = None,
          judge: str | None = None) -> str:
    """The run-time table: one row per finished notebook (seconds, mm:ss), the total, then the notebook that stopped
    (name, seconds, why: 'FAILED', 'stopped') and the judge line when given."""
    total_label = f"total ({len(finished)} notebook{'s' if len(finished) != 1 else ''})"
    width = max([len(name) for name, _ in finished] + ([len(stopped[0])] if stopped else []) + [len(total_label)])
    lines = [f"{'notebook':<{width}}  {'seconds':>8}  {'mm:ss':>6}", "-" * (width + 18)]
    lines += [f"{name:<{width}}  {seconds:>8.1f}  {mmss(seconds):>6}" for name, seconds in finished]
    if stopped:
        name, seconds, why = stopped
        lines.append(f"{name:<{width}}  {seconds:>8.1f}  {mmss(seconds):>6}  {why} (not in the total)")
    total = sum(seconds for _, seconds in finished)
    lines += ["-" * (width + 18), f"{total_label:<{width}}  {total:>8.1f}  {mmss(total):>6}"]
    if judge:
        lines.append(judge)
    return "\n".join(lines)


def judge_line(model_dir: Path) -> str:
    """What the trained judge's card.json says its training took and when, as one line (or why it cannot say)."""
    card_path = model_dir / "card.json"
    if not card_path.is_file():
        return f"judge build: no trained judge at {model_dir} (make judge builds it)"
    try:
        card = json.loads(card_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return f"judge build: {card_path} is not readable JSON"
    seconds = _number(card.get("train_seconds")) if isinstance(card, dict) else None
    if seconds is None:
        return f"judge build: no training time in {card_path}"
    weights = model_dir / "config.json"  # written by the training run; the card is rewritten on recalibration too
    stamp = weights if weights.is_file() else card_path
    when = _dt.datetime.fromtimestamp(stamp.stat().st_mtime, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    resumed = "; resumed from a checkpoint: the time after resuming only" if card.get("resumed_from_checkpoint") else ""
    return (f"judge build (from card.json): {seconds / 60:.1f} min of training, measured when it was trained, {when} "
            f"(pair building and held-out evaluation not included{resumed})")


def slowest_cells(executed: Path, top: int = 3) -> list[tuple[float, int, str]]:
    """The `top` slowest code cells of a notebook papermill executed: (seconds, cell number from 1, first code line);
    empty when the file or its timings cannot be read."""
    try:
        cells = json.loads(Path(executed).read_text(encoding="utf-8")).get("cells", [])
    except (OSError, ValueError, AttributeError):
        return []
    timed = []
    for number, cell in enumerate(cells if isinstance(cells, list) else [], start=1):
        meta = cell.get("metadata") if isinstance(cell, dict) else None
        timing = meta.get("papermill") if isinstance(meta, dict) else None
        seconds = _number(timing.get("duration")) if isinstance(timing, dict) else None
        if seconds is None or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        first = next((line.strip() for line in source.splitlines() if line.strip() and not line.startswith("#")), "")
        timed.append((seconds, number, first[:70]))
    return sorted(timed, key=lambda t: -t[0])[:top]


def cells_line(cells: Sequence[tuple[float, int, str]], total: float) -> str:
    """Where a notebook's time went, one line: its slowest cells with their share of the notebook's wall time."""
    if not cells:
        return "  slowest cells: no cell timings recorded"
    parts = [f"cell {n} {s:.0f} s ({s / total:.0%}): {first}" if total > 0 else f"cell {n} {s:.0f} s: {first}"
             for s, n, first in cells]
    return "  slowest cells: " + "; ".join(parts)
