"""Saving figures, tables and headline metrics, each with a provenance sidecar.

| writer          | files                                              | name rule            |
|-----------------|----------------------------------------------------|----------------------|
| `save_figure`   | figures/<name>.png (dpi 150), .pdf, .json          | fig-NN[x][-words]    |
| `save_table`    | tables/<name>.csv, .md (`tables.present`), .json   | tab-NN[x][-words]    |
| `record_metrics`| results/<name>.json = {metrics, params, meta}      | any plain file name  |

`meta` always gets a UTC timestamp and the git commit of the code (when
available) on top of what the caller passes (model, judge, n, ...); a judge
or LM object passed as meta is recorded by its `.name`. Every file is written
to a temporary file in the same folder and renamed into place, so a crash
never leaves half a file. `read_record` reads a results file back (`load_metrics`, the claims ledger),
refusing one of another shape or holding a p, interval or count no test gives, by file, record and field.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import functools
import io
import json
import math
import os
import re
import subprocess
import tempfile
import textwrap
from pathlib import Path
from typing import Any, Sequence

from covlib.core import paths
from covlib.core.claim import SIM_LABEL
from covlib.report import tables

_FIGURE_NAME = re.compile(r"^fig-\d{2}[a-z]?(?:[-_.][A-Za-z0-9_.-]*)?$")
_TABLE_NAME = re.compile(r"^tab-\d{2}[a-z]?(?:[-_.][A-Za-z0-9_.-]*)?$")
_PLAIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


# --------------------------------------------------------------------------- helpers


def _check_name(name: str, pattern: re.Pattern, what: str) -> str:
    if not isinstance(name, str) or not pattern.match(name) or name.endswith((".json", ".png", ".pdf", ".csv", ".md")):
        raise ValueError(f"bad {what} name {name!r}: expected {pattern.pattern} without an extension")
    return name


def to_jsonable(value: Any) -> Any:
    """Numpy/pandas scalars and arrays, paths, sets and named objects -> plain JSON values (NaN -> None)."""
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=str) if isinstance(value, (set, frozenset)) else value
        return [to_jsonable(v) for v in items]
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "tolist") and callable(value.tolist):  # numpy scalars/arrays, pandas Series
        return to_jsonable(value.tolist())
    if hasattr(value, "item") and callable(value.item):
        return to_jsonable(value.item())
    if isinstance(getattr(value, "name", None), str):  # judges, LMs
        return value.name
    return str(value)


@functools.lru_cache(maxsize=1)
def git_commit() -> str | None:
    """The code's git commit (with '-dirty' when tracked files changed), or None outside git."""
    repo = paths.code_root()
    try:
        commit = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("-dirty" if dirty else "") if commit else None


def provenance(**meta: Any) -> dict[str, Any]:
    """Caller meta plus timestamp (UTC) and git commit, as plain JSON values."""
    out = to_jsonable(meta)
    out.setdefault("timestamp", _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))
    out.setdefault("git_commit", git_commit())
    return out


def _atomic_write(path: Path, data: bytes | str) -> Path:
    """Write to a temp file beside `path`, then rename it over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _sidecar(path: Path, name: str, params: dict | None, meta: dict[str, Any]) -> Path:
    record = {"name": name, "params": to_jsonable(params or {}), "meta": meta}
    return _atomic_write(path, json.dumps(record, indent=2, ensure_ascii=False) + "\n")


def _provenance_line(meta: dict[str, Any]) -> str:
    parts = [f"{k}={v}" for k, v in meta.items() if k not in ("timestamp", "git_commit") and v is not None]
    commit = meta.get("git_commit")
    parts.append(f"commit {commit[:12]}{'-dirty' if commit.endswith('-dirty') else ''}" if commit else "commit n/a")
    parts.append(str(meta.get("timestamp")))
    return "_Provenance: " + "; ".join(parts) + "_"


_STAMP_GID = "covlib-provenance-stamp"
_STAMPED_META = ("model", "judge")


def _figure_texts(fig: Any) -> str:
    """Every text already on the figure (titles, captions, annotations; legends and tick labels aside), joined."""
    texts = [t.get_text() for t in fig.texts if t.get_gid() != _STAMP_GID]
    for ax in fig.axes:
        texts += [ax.get_title(loc) for loc in ("left", "center", "right")]
        texts += [t.get_text() for t in ax.texts]  # plotting.caption's annotations are among them
    return "\n".join(texts)


def stamp_text(params: dict | None, meta: dict[str, Any], shown: str = "") -> str:
    """The figure footer: profile, the run's size (meta n, else params n, n_* and sizes) and model/judge, where known.

    A part already in `shown` (what a caption on the figure says, e.g. "n=12" or "model=smollm2")
    is left out; "" when nothing is left.
    """
    params = to_jsonable(params or {})
    parts = []
    profile = meta.get("profile", params.get("profile"))
    if profile is not None and f"profile={profile}" not in shown and f"profile: {profile}" not in shown:
        parts.append(f"profile: {profile}")
    if meta.get("n") is not None:
        sizes = {"n": meta["n"]}
    else:
        per_set = params.get("sizes") if isinstance(params.get("sizes"), dict) else {}  # {test set: questions}
        sizes = {**{k: v for k, v in params.items() if k == "n" or k.startswith("n_")},
                 **{f"n_{k}": v for k, v in per_set.items()}}
        sizes = {k: v for k, v in sizes.items() if isinstance(v, int) and not isinstance(v, bool)}
    for key, value in sizes.items():
        if not re.search(rf"(?<![\w.-]){re.escape(f'{key}={value}')}(?![\w.])", shown):  # "n=12", not "n=120"
            parts.append(f"{key}={value}")
    for key in _STAMPED_META:
        value = meta.get(key, params.get(key))
        if isinstance(value, (str, int, float)) and f"{key}={value}" not in shown:
            simulated = isinstance(value, str) and value.startswith("sim:") and SIM_LABEL not in shown
            parts.append(f"{key}={value}" + (f" ({SIM_LABEL})" if simulated else ""))  # never read as a real model's
    return " · ".join(parts)


def _fit_texts(fig: Any) -> None:
    """Wrap each title, caption and annotation wider than the room the figure gives it, so that no text widens the
    saved figure past the size it was drawn at (the full provenance is in the sidecar); the plots' texts first, then
    the figure's, a wrapped title over the plots (a suptitle) moved up above them."""
    fig.draw_without_rendering()  # lays out captions placed relative to axis labels
    width = fig.bbox.width
    for text in [t for ax in fig.axes for t in (ax.title, *ax.texts, ax.xaxis.label)] + list(fig.texts):
        box = text.get_window_extent()
        if not text.get_text() or text.get_rotation() or box.width <= 0:
            continue
        middle = (box.x0 + box.x1) / 2
        room = {"left": width - box.x0, "right": box.x1}.get(text.get_ha(), 2 * min(middle, width - middle))
        room = max(min(room, width), 0.4 * width)
        if box.width <= room:
            continue
        lines = text.get_text().split("\n")
        chars = max(20, int(max(map(len, lines)) * 0.95 * room / box.width))
        text.set_text("\n".join(textwrap.fill(line, chars) for line in lines))
        if text in fig.texts and text.get_va() == "top" and box.y0 >= max(a.bbox.y1 for a in fig.axes):
            top = max(a.get_tightbbox().y1 for a in fig.axes) / fig.bbox.height
            text.set(va="bottom", y=max(text.get_position()[1], top))


def _stamp(fig: Any, text: str) -> None:
    """Put `text` in small grey type under everything already drawn, right-aligned (replacing an earlier stamp)."""
    for old in [t for t in fig.texts if t.get_gid() == _STAMP_GID]:
        old.remove()
    if not text:
        return
    fig.draw_without_rendering()  # lays out captions placed relative to axis labels
    box = fig.get_tightbbox()  # inches
    below = box.y0 - 4 / 72  # 4 points under the lowest text
    fig.text(box.x1 / fig.get_figwidth(), below / fig.get_figheight(), text, ha="right", va="top", fontsize=7,
             color="0.4", gid=_STAMP_GID)


# --------------------------------------------------------------------------- public writers


def _of_run(run: Any, params: dict | None, meta: dict[str, Any]) -> tuple[dict | None, dict[str, Any]]:
    """(params, meta) of an output: a notebook's `run` (its session: `params`, `provenance`) under what the call gives."""
    if run is None:
        return params, provenance(**meta)
    return (run.params if params is None else params), provenance(**{**run.provenance, **meta})


def save_figure(fig: Any, name: str, params: dict | None = None, run: Any = None, **meta: Any) -> list[Path]:
    """Write figures/<name>.png (dpi 150), .pdf and a .json provenance sidecar; return the paths. `run` (a notebook's
    session) gives the parameters and the provenance (model, judge and its agreement) when the call does not.

    The figure gets a small footer from `params` and `meta` (see `stamp_text`), e.g.
    "profile: smoke · n_questions=12 · model=smollm2", less what its captions already say. A title, caption or
    annotation wider than the figure is wrapped to its width: the PNG stays about the size the figure was drawn at.
    """
    _check_name(name, _FIGURE_NAME, "figure")
    folder = paths.figures_dir()
    params, meta = _of_run(run, params, meta)
    stamp = stamp_text(params, meta, _figure_texts(fig))
    _fit_texts(fig)
    _stamp(fig, stamp)
    _fit_texts(fig)  # the stamp too
    written = []
    for ext, kwargs in (("png", {"dpi": 150}), ("pdf", {"metadata": {"CreationDate": None}})):
        buffer = io.BytesIO()
        fig.savefig(buffer, format=ext, bbox_inches="tight", **kwargs)
        written.append(_atomic_write(folder / f"{name}.{ext}", buffer.getvalue()))
    written.append(_sidecar(folder / f"{name}.json", name, params, meta))
    return written


def save_table(df: Any, name: str, params: dict | None = None, index: bool = False, floatfmt: str = ".3f",
               caption: str = "", run: Any = None, shown: Sequence[str] = (), notes: Sequence[str] = (),
               **meta: Any) -> tables.Table:
    """Write tables/<name>.csv (the numbers, every column), .md (the table as `tables.present` shows it: the `shown`
    columns if given, then the `notes` lines, a provenance line) and a .json sidecar; return the presented table
    (what a notebook displays; its `paths` are the files written). `run`: as in `save_figure`."""
    _check_name(name, _TABLE_NAME, "table")
    folder = paths.tables_dir()
    params, meta = _of_run(run, params, meta)
    frame = df.reset_index() if index else df
    presented = tables.present(frame[list(shown)] if shown else frame, floatfmt=floatfmt, caption=caption,
                               params=params or {}, **meta)
    rest = {k: v for k, v in meta.items() if k not in tables.CAPTION_META}
    markdown = (f"**{name}**\n\n" + presented.to_markdown() + "\n" + "".join(f"{line}\n\n" for line in notes)
                + _provenance_line(rest) + "\n")
    written = (
        _atomic_write(folder / f"{name}.csv", frame.to_csv(index=False)),
        _atomic_write(folder / f"{name}.md", markdown),
        _sidecar(folder / f"{name}.json", name, params, meta),
    )
    return dataclasses.replace(presented, paths=written)


def record_metrics(name: str, metrics: dict[str, Any], params: dict | None = None, run: Any = None,
                   **meta: Any) -> Path:
    """Write results/<name>.json = {"metrics", "params", "meta"} with numpy types converted; `run`: as in
    `save_figure`."""
    _check_name(name, _PLAIN_NAME, "metrics")
    params, meta = _of_run(run, params, meta)
    record = {"metrics": to_jsonable(metrics), "params": to_jsonable(params or {}), "meta": meta}
    text = json.dumps(record, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    return _atomic_write(paths.results_dir() / f"{name}.json", text)


def load_metrics(name: str) -> dict[str, Any]:
    """The full record {"metrics", "params", "meta"} written by `record_metrics`, checked (`read_record`)."""
    _check_name(name, _PLAIN_NAME, "metrics")
    path = paths.results_dir() / f"{name}.json"
    if not path.exists():
        raise FileNotFoundError(f"no recorded metrics {name!r} at {path}; {_remedy(path)}")
    return read_record(path)


# --------------------------------------------------------------------------- reading a results file back


NOTEBOOK_FILE = re.compile(r"(\d{2}[a-z]?)_\w+\.json$")  # a notebook's results file, by its number


def _remedy(path: Path) -> str:
    number = NOTEBOOK_FILE.match(path.name)
    return "run the notebook that records it" + (f" (make reproduce ONLY={number.group(1)})" if number else "")


def _real(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


_COUNTS = ("n", "better", "worse", "both")


def _estimate_problem(e: dict[str, Any]) -> tuple[str, str] | None:
    """(field, why) of the first field of an estimate {value, low, high, n, p, ...} that no test gives, or None."""
    for key in ("value", "low", "high", "p", *_COUNTS):
        if e.get(key) is not None and not _real(e[key]):
            return key, "is not a number"
    got = {k: e[k] for k in ("value", "low", "high", "p", *_COUNTS) if _real(e.get(k)) and math.isfinite(e[k])}
    p = e.get("p")
    if p is not None and not math.isnan(p) and not 0 <= p <= 1:  # NaN: no p (the interval decides); inf: none
        return "p", "is not a p-value in [0, 1]"
    for key in _COUNTS:
        if key in e and e[key] is not None and (key not in got or got[key] < 0 or got[key] != int(got[key])):
            return key, "is not a whole number >= 0"
    low, value, high = (got.get(k) for k in ("low", "value", "high"))
    if low is not None and high is not None and low > high:
        return "low", f"is above high = {high}"
    if got.get("n") == 0 and value is not None:
        return "n", "is 0 beside an estimate"
    if sum(got.get(k, 0) for k in _COUNTS[1:]) > got.get("n", math.inf):
        return "n", f"is below better + worse + both = {sum(got.get(k, 0) for k in _COUNTS[1:])}"
    inside = e.get("test") and "interval decides" not in str(e["test"])  # a percentile bootstrap's point may be out
    slack = 1e-9 * (1 + abs(value or 0))  # rounding
    if inside and None not in (low, value, high) and not low - slack <= value <= high + slack:
        return "value", f"is outside its 95% interval [{low}, {high}]"
    return None


def _claim_problem(r: Any) -> tuple[str, str] | None:
    """(field, why) of what is wrong with one record of metrics["claims"] (`ClaimSet.estimate`), or None."""
    if not isinstance(r, dict):
        return "", f"is a JSON {type(r).__name__}, not an object"
    if not isinstance(r.get("claim"), str):
        return "claim", "is not a claim id"
    for key in ("scope", "unit", "test", "model"):
        if key in r and not isinstance(r[key], str) and not (key == "model" and r[key] is None):
            return key, "is not a string"
    same = r.get("same_as")
    if same is not None and not (isinstance(same, list) and len(same) == 2 and all(isinstance(x, str) for x in same)):
        return "same_as", "is not [claim id, scope]"
    if r.get("test") == "exact McNemar" and not r.get("untestable"):
        missing = next((k for k in ("better", "worse", "n") if r.get(k) is None), None)
        if missing:
            return missing, "is missing: an exact McNemar record carries its discordant counts and n"
    return _estimate_problem(r)


def _estimates(node: Any, where: str) -> Any:
    """(where, dict) of every estimate (a dict with value, low and high) under `node`."""
    if isinstance(node, dict):
        if all(k in node for k in ("value", "low", "high")):
            yield where, node
        for key, value in node.items():
            yield from _estimates(value, f"{where}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _estimates(value, f"{where}[{i}]")


def _refusal(path: Path, where: str, obj: Any, problem: tuple[str, str]) -> ValueError:
    field, why = problem
    shown = json.dumps(obj.get(field) if field else obj, ensure_ascii=False)
    shown = "" if field and field not in obj else " = " + (shown if len(shown) <= 60 else shown[:57] + "...")
    return ValueError(f"results file {path}: {where}{f', field {field!r}' if field else ''}{shown} {why}; "
                      f"the file is damaged or was edited by hand: re-{_remedy(path)}")


def _validated(record: Any, path: Path) -> dict[str, Any]:
    """`record` if it has the shape `record_metrics` writes and every claim record and estimate in it is one a test
    could give; else ValueError naming the file, the record, the field and the remedy."""
    if not isinstance(record, dict):
        raise _refusal(path, "its root", record, ("", 'is not an object {"metrics", "params", "meta"}'))
    for key in ("metrics", "params", "meta"):
        if not isinstance(record.get(key, {}), dict):
            raise _refusal(path, "its root", record, (key, "is not an object"))
    metrics = record.get("metrics", {})
    if not isinstance(metrics.get("claims", []), list):
        raise _refusal(path, "metrics", metrics, ("claims", "is not a list of claim records"))
    for i, r in enumerate(metrics.get("claims", [])):
        problem = _claim_problem(r)
        if problem:
            name = f"claim {r['claim']!r} " if isinstance(r, dict) and isinstance(r.get("claim"), str) else ""
            raise _refusal(path, f"{name}(metrics.claims[{i}])" if name else f"metrics.claims[{i}]", r, problem)
    for where, est in _estimates(metrics, "metrics"):
        problem = _estimate_problem(est)
        if problem:
            raise _refusal(path, f"metric {where}", est, problem)
    return record


def read_record(path: str | Path) -> dict[str, Any]:
    """A results file (`record_metrics`'s) parsed and checked: ValueError naming the file, the record and the field
    when it is unreadable, of another shape, or holds a p, interval or count no test gives."""
    path = Path(path)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"results file {path} is unreadable ({err}); re-{_remedy(path)}") from err
    return _validated(record, path)
