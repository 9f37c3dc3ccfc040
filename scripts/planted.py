"""Does the measuring chain give back what was planted? The notebooks and the ledger run on the simulated model over
many world seeds (`make planted`): with `sim:null`, how often each claim comes out "supported" (a false positive: about
5% or fewer at the ledger's level); with `sim:paper`, how often each primary row's 95% interval holds the planted effect
(its coverage: about 95%) and how often the claim is found ("supported": the power at this profile's n).

Each seed is one `scripts/reproduce.py` run in its own output root (`<out>/<behaviour>-<seed>/`, its results, tables
and figures, and its executed notebooks), `MODEL=sim:<behaviour>@<seed>`: the questions stay the profile's, the
simulated draws change. A seed whose results this code wrote (its commit is HEAD, unchanged) is read, not run again;
one written by other code runs again (`--reuse` tallies it as it is, `--rerun` runs every seed anew). Writes
`<out>/planted.{md,json}`, with the commits that ran the seeds.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from covlib.core import paths, stats  # noqa: E402
from covlib.report import claims, results  # noqa: E402

NOTEBOOKS = "01,02,03,04,05,06,07,08,09,10,11,12"


def run_seed(behaviour: str, seed: int, profile: str, only: str, out: Path, rerun: bool, reuse: bool = False) -> Path:
    """The ledger of one seed (`results/12_claims.json` of its own output root), run when missing or written by
    other code (unless `reuse`)."""
    root = out / f"{behaviour}-{seed}"
    ledger = root / "results" / "12_claims.json"
    if ledger.is_file() and not rerun and (reuse or _same_code(ledger)):
        return ledger
    env = {**os.environ, "COVLIB_ROOT": str(root), "COVLIB_DATA": str(paths.data_dir()), "PYTHONPATH": str(ROOT),
           "COVLIB_MODELS": str(paths.models_dir()), "COVLIB_CACHE": str(paths.cache_dir())}  # shared: the judge too
    began = time.time()
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "reproduce.py"), "--profile", profile, "--model",
                           f"sim:{behaviour}@{seed}", "--only", only], env=env, cwd=ROOT, capture_output=True,
                          text=True)
    root.mkdir(parents=True, exist_ok=True)
    (root / "run.log").write_text(done.stdout + done.stderr, encoding="utf-8")
    if done.returncode:
        raise SystemExit(f"sim:{behaviour}@{seed} failed (its log: {root / 'run.log'}):\n{done.stdout[-3000:]}"
                         f"{done.stderr[-3000:]}")
    print(f"sim:{behaviour}@{seed}: {time.time() - began:.0f} s", flush=True)
    return ledger


def _commit(ledger: Path) -> str:
    """The commit a seed's ledger was written at ('' when it does not say)."""
    try:
        return str(json.loads(ledger.read_text(encoding="utf-8")).get("meta", {}).get("git_commit") or "")
    except (OSError, ValueError):
        return ""


def _same_code(ledger: Path) -> bool:
    """Whether a seed's ledger was written by this code (its commit is HEAD, and neither had uncommitted changes):
    else it runs again, so that no tally mixes seeds of two versions of the chain."""
    commit = _commit(ledger)
    return bool(commit) and not commit.endswith("-dirty") and commit == results.git_commit()


def primary_rows(ledger: Path) -> list[dict]:
    """The simulated primary rows of one seed's ledger."""
    rows = json.loads(ledger.read_text(encoding="utf-8"))["metrics"]["ledger"]
    return [r for r in rows if r.get("role") == "primary" and r.get("simulated")]


def _model(row: dict) -> str:
    """A row's model without its behaviour and world: the same persona and variant in every seed."""
    return re.sub(r"simulated \(planted effects\), \w+(, world \d+)?", "simulated", row["model"])


def tally(by_seed: dict[str, dict[int, list[dict]]]) -> list[dict]:
    """Per claim and model: seeds with an estimate, the share supported under each behaviour, coverage of `paper`."""
    keys = sorted({(r["id"], _model(r)) for seeds in by_seed.values() for rows in seeds.values() for r in rows})
    out = []
    for claim, persona in keys:
        row = {"claim": claim, "model": persona}
        for behaviour, seeds in by_seed.items():
            found = [r for rows in seeds.values() for r in rows if r["id"] == claim and _model(r) == persona]
            tested = [r for r in found if r["verdict"] not in claims.SHOWN_ONLY]
            flags = [float(r["verdict"] == "supported") for r in tested]
            share = stats.mean_interval(flags, scale=100) if tested else None
            row[f"{behaviour}: tested"] = f"{len(tested)} of {len(found)}"
            row[f"{behaviour}: supported"] = stats.format_interval(share) if share else "—"
            if behaviour == "paper":
                covered = [r["covers"] for r in tested if r.get("covers") is not None]
                cov = stats.mean_interval([float(c) for c in covered], scale=100) if covered else None
                row["paper: planted"] = next((r["planted"] for r in found if r.get("planted") is not None), None)
                row["paper: coverage"] = stats.format_interval(cov) if cov else "—"
        out.append(row)
    return out


def markdown(rows: list[dict], profile: str, seeds: list[int], commits: list[str]) -> str:
    """The tally as a markdown table with what it measures above it, and the commits whose code ran the seeds."""
    cols = list(dict.fromkeys(k for r in rows for k in r))
    lines = [f"Simulated model, profile {profile}, world seeds {seeds[0]}-{seeds[-1]} ({len(seeds)} seeds; code "
             f"{', '.join(commits) or 'unknown'}). "
             "'supported' under null is a false positive (want about 5% or fewer); 'coverage' is the share of paper "
             "seeds whose primary 95% interval holds the planted effect (want about 95%); shares with their Wilson "
             "95% intervals over seeds.", "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join("" if r.get(c) is None else str(r.get(c)) for c in cols) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", type=int, default=20, help="world seeds per behaviour (1..N)")
    ap.add_argument("--profile", default="cpu", help="smoke, cpu or full")
    ap.add_argument("--behaviours", default="null,paper", help="comma-separated: null, paper")
    ap.add_argument("--only", default=NOTEBOOKS, help="the notebooks each seed runs (12, the ledger, always)")
    ap.add_argument("--out", default=str(ROOT / "build" / "planted"), help="where the seeds' runs and the tally go")
    ap.add_argument("--rerun", action="store_true", help="run seeds whose results already exist again")
    ap.add_argument("--reuse", action="store_true", help="tally seeds whose results exist whatever code wrote them "
                                                         "(their commits are listed); by default those run again")
    args = ap.parse_args()
    only = ",".join(dict.fromkeys([*args.only.split(","), "12"]))
    out, seeds = Path(args.out) / args.profile, list(range(1, args.seeds + 1))
    ledgers = {b: {s: run_seed(b, s, args.profile, only, out, args.rerun, args.reuse) for s in seeds}
               for b in args.behaviours.split(",")}
    by_seed = {b: {s: primary_rows(path) for s, path in found.items()} for b, found in ledgers.items()}
    commits = sorted({_commit(path) for found in ledgers.values() for path in found.values()})
    rows = tally(by_seed)
    (out / "planted.json").write_text(json.dumps({"profile": args.profile, "seeds": seeds, "commits": commits,
                                                  "rows": rows}, indent=1), encoding="utf-8")
    text = markdown(rows, args.profile, seeds, commits)
    (out / "planted.md").write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
