"""A run's plan before it starts (`make reproduce PLAN=1`): per notebook, the model work its profile will do and the
time that takes at the rates `make bench` measured on this machine; after a run, the plan beside the times it took.

Each notebook's spec may declare `work`, a function `work(values, record)` of its resolved values (as
`session.resolve` gives them for the profile, model and device, no model loaded) and `record`, which gives the
`covlib.generation.recording.Recorder` standing in for a model (`record(model, adapter)`, built once a plan). The
function makes the notebook's model calls on the recorders, with its paper's own methods and prompt builders on the
profile's real questions (each paper's `workload` module): the recorder keeps every call, tokenised by the model's
own tokenizer and keyed by its backend's own cache keys. It returns the work no recorder sees, as plain dicts:

| key      | what                                                                                              |
|----------|---------------------------------------------------------------------------------------------------|
| `step`   | what the work is, in the notebook's words ("the judge's check")                                    |
| `kind`   | `judge` (NLI pairs: tokens are no decoder's)                                                       |
| `rows`   | judged pairs                                                                                       |
| `bound`  | (optional) where the data decides the count, the words saying how this bounds it                  |
| `key`    | (optional) the work's identity: work whose key an earlier notebook of the run had is done already |
| `model`  | (optional) the model whose answers are judged, when not the run's `model`                          |

Each recorded call is a `Work` row: `generate` (rows: completions, each at most `max_new_tokens` new tokens), `score`
(prefill only: continuations scored) or `train` (LoRA: each token a forward and a backward); its tokens are those the
backend prefills: each distinct prompt once (its `n` samples share it), the prefix the call's prompts share once.
A call's keys held by the call cache, or by an earlier call of the run (02 and 03 repeat 01's CoT-SC, 06 repeats
04's answers), cost nothing. Counts the data decides (σ firing, refusals, a rationale's sentences) are bounds said
in each row's `bound`; a prompt built from a model's reply holds a placeholder of `max_new_tokens` tokens (an upper
bound); `new` is `max_new_tokens`: the plan errs long, and the table after a run shows by how much. A model whose
tokenizer cannot be read offline has its tokens counted by the embedded model's (an estimate, said above the
table); a served one has unknown tokens and speed ('?'), and so has any total over them; a simulated model's work
costs nothing. A model's size comes from `covlib.generation.shapes` for the papers' models, else from its config
(the hub asked once, not at all where it cannot be reached). A plan prices any device it has rates for, present
here or not: `make bench`'s, else `REFERENCE_RATES` (an H200's for cuda). Time outside the model (kernel start, data, retrieval, plots) is counted as
`OVERHEAD_SECONDS` a notebook: what one with every call cached takes on the reference machine.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from covlib.core import paths
from covlib.generation import EMBEDDED_LABEL, is_simulated
from covlib.generation import spec as model_spec
from covlib.generation import recording
from covlib.generation.prefix import MIN_SHARED_TOKENS, cascade_fits
from covlib.generation.recording import Call, Recorder
from covlib.generation.shapes import known_shape
from covlib.runs import session

KINDS = ("generate", "score", "judge", "train")
TRAIN_FACTOR = 3.0  # a training token costs a forward and a backward: about three forward tokens
PLACEHOLDER = "prompts hold placeholder replies of max_new_tokens tokens: their tokens at most"
OVERHEAD_SECONDS = 12.0  # a notebook with every call cached, on the reference machine (01, 04-07 re-run: 10-15 s)

# Rates measured by `scripts/bench_decoder.py`, used until `make bench` has measured this machine's (docs/benchmarks.md,
# "The decoder on real shapes"): the 2-core reference machine (the embedded model's shape in fp32, 2026-11-27, means of
# two runs), and an
# H200 (a LLaMA-2-7B shape in bf16, random weights, 2026-11-27; the judge there at the CPU's rate, an upper bound).
REFERENCE_RATES: dict[str, dict[str, Any]] = {
    "cpu": {"source": "the 2-core reference machine (docs/benchmarks.md); run `make bench` for this machine's",
            "device": "cpu", "judge_pairs_s": 180.0,
            "shapes": {"smollm2": {"parameters": 134_515_008, "decode_tok_s": 145.0, "decode_shared_tok_s": 217.0,
                                   "prefill_tok_s": 523.0}}},
    "cuda": {"source": "an NVIDIA H200 (docs/benchmarks.md); run `make bench DEVICE=cuda` for this machine's",
             "device": "cuda", "judge_pairs_s": 180.0,
             "shapes": {"7b": {"parameters": 6_677_598_208, "decode_tok_s": 1948.1, "decode_shared_tok_s": 6072.9,
                               "prefill_tok_s": 9052.4}}},
}


@dataclass(frozen=True)
class Work:
    """One kind of model work of a notebook: a recorded call, or what its spec's `work` declared (see the module)."""

    notebook: str
    step: str
    kind: str
    rows: int
    prompt: int | None = 0  # tokens prefilled of the rows' own (after `shared`), in all; None: unknown
    new: int = 0  # (generate) new tokens a row at most
    shared: int | None = 0  # tokens of the prefix the rows share, prefilled once; None: unknown
    longest: int = 0  # the longest row's own tokens (the decoder's cascade attention needs it short)
    bound: str = ""
    key: str = ""
    model: str | None = None  # None: the run's model

    def tokens(self) -> tuple[int | None, int]:
        """(tokens prefilled, None when unknown; tokens generated at most)."""
        prefill = None if self.prompt is None or self.shared is None else self.shared + self.prompt
        return prefill, self.rows * self.new


@dataclass
class Rates:
    """What a second buys on this machine for one model: prefilled tokens, new tokens decoded (rows after a shared
    prefix decode more at once: `prefix.SHARED_ROW_FACTOR`), judged pairs."""

    source: str
    decode_tok_s: float | None
    prefill_tok_s: float | None
    judge_pairs_s: float | None
    note: str = ""
    decode_shared_tok_s: float | None = None

    def seconds(self, w: Work) -> float | None:
        """The time `w` takes at these rates (None: a rate it needs, or its tokens, unknown)."""
        prefill, new = w.tokens()
        if w.kind == "judge":
            return w.rows / self.judge_pairs_s if self.judge_pairs_s else None
        if self.decode_tok_s == math.inf:  # a simulated model
            return 0.0
        if not (self.decode_tok_s and self.prefill_tok_s) or prefill is None:
            return None
        factor = TRAIN_FACTOR if w.kind == "train" else 1.0
        cascade = w.shared >= MIN_SHARED_TOKENS and cascade_fits(w.shared, w.longest)  # as the decoder decides
        decode = (self.decode_shared_tok_s or self.decode_tok_s) if cascade else self.decode_tok_s
        return factor * prefill / self.prefill_tok_s + (new / decode if w.kind == "generate" else 0.0)


@dataclass
class Plan:
    """Every notebook's work and predicted seconds for one profile, model and device, at `measured` rates."""

    profile: str
    model: str  # the run's model spec ('' the embedded one)
    device: str
    measured: Mapping[str, Any]
    work: dict[str, list[Work]] = field(default_factory=dict)
    calls: dict[str, list[Call]] = field(default_factory=dict)  # each notebook's recorded calls, as it makes them
    _rates: dict[str, Rates] = field(default_factory=dict, repr=False)

    @property
    def label(self) -> str:
        """The run's model as run_times records it."""
        return self.model or EMBEDDED_LABEL

    def rates(self, model: str | None = None) -> Rates:
        """The rates of `model` (None: the run's) on the plan's device, worked out once."""
        model = self.model if model is None else model
        if model not in self._rates:
            self._rates[model] = rates_for(model, self.device, self.measured)
        return self._rates[model]

    def seconds(self, notebook: str) -> float | None:
        """The notebook's predicted seconds: its model work at the rates, plus `OVERHEAD_SECONDS`."""
        times = [self.rates(w.model).seconds(w) for w in self.work.get(notebook, [])]
        return None if any(t is None for t in times) else OVERHEAD_SECONDS + sum(times)


def rates_path() -> Path:
    """Where `make bench` writes this machine's rates: results/bench_rates.json."""
    return paths.results_dir() / "bench_rates.json"


def read_rates(device: str, path: Path | None = None) -> dict[str, Any]:
    """The rates `make bench` measured on `device` (cpu or cuda), else `REFERENCE_RATES` of its kind (none for mps)."""
    path = path or rates_path()
    try:
        measured = json.loads(path.read_text()).get(device.split(":")[0])
    except (OSError, ValueError, AttributeError):
        measured = None
    if isinstance(measured, dict) and isinstance(measured.get("shapes"), dict):
        return measured
    kind = device.split(":")[0]
    return REFERENCE_RATES.get(kind) or {"source": f"none: run `make bench DEVICE={device}` first", "device": device,
                                         "shapes": {}, "judge_pairs_s": None}


def model_parameters(model: str) -> int | None:
    """The parameter count of a model ('' the embedded one, a folder, a hub id): the papers' models' from their
    shapes (`covlib.generation.shapes`), another's from its config (no weights read; the hub asked once, and where
    it cannot be reached, `spec.hub_reachable`, only the files on this machine); None if unknown."""
    known = known_shape(model)
    if known is not None:
        return known.parameters
    return _config_parameters(model_spec.model_source(model), not model_spec.hub_reachable())


@functools.lru_cache(maxsize=None)
def _config_parameters(source: str, local_only: bool) -> int | None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    try:
        cfg = AutoConfig.from_pretrained(source, local_files_only=local_only)
        with torch.device("meta"):  # the shapes without memory
            return sum(p.numel() for p in AutoModelForCausalLM.from_config(cfg).parameters())
    except Exception:  # noqa: BLE001 - an unreadable or unknown model only loses the time column
        return None


def rates_for(model: str, device: str, measured: Mapping[str, Any]) -> Rates:
    """The rates for `model` on `device`: the measured shape nearest in size, scaled by parameters (a step's cost
    grows with the weights it reads), or none for a served model (its server's speed is not ours to measure)."""
    source, judge = measured.get("source", "make bench"), measured.get("judge_pairs_s")
    if model_spec.is_endpoint(model):
        return Rates(source, None, None, judge, "served model: its server's speed is unknown here")
    if is_simulated(model):  # replies computed from gold data: its model work costs nothing worth predicting
        return Rates(source, math.inf, math.inf, judge, "simulated model: no model work, only the judge's")
    shapes = measured.get("shapes", {})
    if not shapes:
        return Rates(source, None, None, judge, f"no decoder rates measured on {device}")
    size = model_parameters(model)
    if size is None:
        where = "here" if Path(model).expanduser().is_dir() or model_spec.hub_reachable() else \
            "on this machine, and the hub cannot be reached (HF_HUB_OFFLINE, or its name does not resolve)"
        return Rates(source, None, None, judge, f"size of {model!r} unknown (no config readable {where})")
    name, shape = min(shapes.items(), key=lambda kv: abs(math.log(kv[1]["parameters"] / size)))
    scale = shape["parameters"] / size
    note = "" if scale == 1 else f"scaled from the {name} shape ({shape['parameters'] / 1e6:.0f}M) to {size / 1e6:.0f}M"
    shared = shape.get("decode_shared_tok_s")
    return Rates(source, shape["decode_tok_s"] * scale, shape["prefill_tok_s"] * scale, judge, note,
                 shared * scale if shared else None)


class Recorders:
    """The recorder of each model (and adapter) a plan's notebooks call, built once (`recording.recorder`)."""

    def __init__(self, device: str) -> None:
        self.device, self.made = device, {}

    def __call__(self, model: str = "", adapter: str = "") -> Recorder:
        """The recorder standing in for `model` with `adapter`."""
        if (model, adapter) not in self.made:
            self.made[(model, adapter)] = recording.recorder(model, adapter, self.device)
        return self.made[(model, adapter)]


def values_of(spec: Mapping[str, Any], profile: str, model: str, device: str) -> dict[str, Any]:
    """The notebook's parameters as `profile` runs them with `model` on `device`, here or not (its others at their
    declared defaults; `session.resolve`), loading nothing."""
    declared = spec.get("parameters", {})
    given = {k: v for k, v in (("profile", profile), ("model", model), ("device", device)) if k in declared}
    return session.resolve(spec, None, False, **given)[2]  # the device need not be this machine's


def work_of(spec: Mapping[str, Any], profile: str, model: str, device: str, record: Recorders | None = None,
            done: set[str] | None = None) -> tuple[list[Work], list[Call]]:
    """A notebook's model work in `profile` with `model` on `device` and the calls it records (no `work`: none);
    keys in `done` (an earlier notebook's) or in the call cache cost nothing, and this notebook's join `done`."""
    record, done = record or Recorders(device), done if done is not None else set()
    before = {r: len(r.calls) for r in record.made.values()}
    declared = (spec.get("work") or (lambda v, r: []))(values_of(spec, profile, model, device), record)
    made = [(c, r) for r in record.made.values() for c in r.calls[before.get(r, 0):]]
    work = []
    for call, rec in made:
        done.update(cached(rec, call))
        rows, own, shared, longest = call.cost(done)
        if rows:
            bound = "; ".join(w for w in (call.bound, PLACEHOLDER if call.placeholder else "") if w)
            work.append(Work(spec["name"], call.step, call.kind, rows, own, call.new, shared, longest or 0, bound,
                             model=None if call.model == model else call.model))
    for item in declared:
        w = Work(spec["name"], **_checked(item, spec["name"]))
        if not (w.key and w.key in done):
            work.append(w)
            done.update([w.key] if w.key else [])
    return work, [c for c, _ in made]


def cached(rec: Recorder, call: Call) -> set[str]:
    """The keys of `call` the call cache holds already (none where the backend keeps no cache)."""
    cache = getattr(rec.keyer, "cache", None)
    return set(cache.get_many(k for ks in call.keys for k in ks)) if cache is not None and call.keys else set()


def _checked(item: Mapping[str, Any], notebook: str) -> dict[str, Any]:
    if item.get("kind") != "judge" or not (isinstance(item.get("rows"), int) and item["rows"] >= 0):
        raise ValueError(f"{notebook}: declared work {item!r} needs kind 'judge' and rows >= 0 (the model's calls are "
                         "recorded, not declared)")
    unknown = set(item) - {"step", "kind", "rows", "bound", "key", "model"}
    if unknown:
        raise ValueError(f"{notebook}: work {item!r} has keys {sorted(unknown)}: tokens come from the recorder alone")
    return dict(item)


def make(specs: Sequence[Mapping[str, Any]], profile: str, model: str, device: str,
         measured: Mapping[str, Any] | None = None) -> Plan:
    """The plan of running `specs` (in order) in `profile` with `model` on `device`."""
    plan, record, done = Plan(profile, model, device, measured if measured is not None else read_rates(device)), \
        Recorders(device), set()
    for spec in specs:
        plan.work[spec["name"]], plan.calls[spec["name"]] = work_of(spec, profile, model, device, record, done)
    return plan


def _count(n: float | None) -> str:
    if n is None:
        return "?"
    return f"{n / 1e6:.1f}M" if n >= 1e6 else f"{n / 1e3:.0f}k" if n >= 1e4 else f"{n:.0f}"


def _minutes(seconds: float | None) -> str:
    return "?" if seconds is None else f"{seconds / 60:.1f}"


def table(plan: Plan, actual: Mapping[str, float] | None = None) -> str:
    """The plan as a markdown table, one row per notebook and a total; with `actual` (seconds by notebook), the minutes
    taken and their ratio to the prediction, and a total over the notebooks timed."""
    head = "| notebook | calls (generate / score / judge / train rows) | tokens prefilled | new tokens (at most) | predicted min |"
    rule = "|---|---|---|---|---|"
    if actual is not None:
        head, rule = head + " actual min | actual / predicted |", rule + "---|---|"
    lines, predicted_all, timed = [head, rule], 0.0, []
    for name, work in plan.work.items():
        rows = {k: sum(w.rows for w in work if w.kind == k) for k in KINDS}
        prefills = [w.tokens()[0] for w in work if w.kind != "judge"]
        prefill = None if None in prefills else sum(prefills)
        new = sum(w.tokens()[1] for w in work)
        predicted = plan.seconds(name)
        predicted_all = None if predicted is None or predicted_all is None else predicted_all + predicted
        line = (f"| {name} | {' / '.join(_count(rows[k]) for k in KINDS)} | {_count(prefill)} | {_count(new)} | "
                f"{_minutes(predicted)} |")
        if actual is not None:
            took = actual.get(name)
            if took and predicted:
                timed.append((predicted, took))
            line += f" {_minutes(took)} | {f'{took / predicted:.2f}' if took and predicted else ''} |"
        lines.append(line)
    last = f"| all | | | | {_minutes(predicted_all)} |" + (" | |" if actual is not None else "")
    if timed:
        p, t = (sum(x) for x in zip(*timed))
        lines.append(f"| timed ({len(timed)} of {len(plan.work)}) | | | | {_minutes(p)} | {_minutes(t)} | {t / p:.2f} |")
    return "\n".join(lines + [last])


def describe(plan: Plan) -> str:
    """The lines above the table: what ran the numbers, and what they leave out."""
    r = plan.rates()
    rates = (f"{r.decode_tok_s:.0f} generated and {r.prefill_tok_s:.0f} prefilled tokens/s"
             if r.decode_tok_s and r.prefill_tok_s else "no decoder rates")
    judge = f", {r.judge_pairs_s:.0f} judged pairs/s" if r.judge_pairs_s else ""
    note = f" ({r.note})" if r.note else ""
    others = sorted({w.model for work in plan.work.values() for w in work if w.model not in (None, plan.model)})
    more = f"\nother models' rows at their own sizes' rates: {', '.join(m or EMBEDDED_LABEL for m in others)}" if others else ""
    unknown = sorted({w.model or plan.label for work in plan.work.values() for w in work if w.tokens()[0] is None})
    if unknown:
        more += f"\ntokens unknown ('?': a served model): {', '.join(unknown)}"
    estimated = sorted({c.model or plan.label for calls in plan.calls.values() for c in calls if c.estimated})
    if estimated:
        more += (f"\ntokens estimated with the embedded model's tokenizer (theirs is not on this machine): "
                 f"{', '.join(estimated)}")
    return (f"plan: profile {plan.profile}, model {plan.label}, device {plan.device}\n"
            f"rates: {rates}{judge}{note}; from {r.source}{more}\n"
            f"predicted: the notebooks' calls as their methods make them (tokens in the model's tokenizer; a call the "
            f"call cache holds, or an earlier notebook made, costs nothing; data-decided counts and max_new_tokens "
            f"as upper bounds) at these rates, plus {OVERHEAD_SECONDS:.0f} s a notebook outside the model")


def actual_seconds(entries: Iterable[Mapping[str, Any]], plan: Plan) -> dict[str, float]:
    """The recorded seconds (results/run_times.json's entries) of the plan's notebooks, profile, model and device."""
    return {e["notebook"]: e["seconds"] for e in entries
            if e.get("notebook") in plan.work and e.get("profile") == plan.profile and e.get("model") == plan.label
            and e.get("device") in (plan.device, None) and isinstance(e.get("seconds"), (int, float))}
