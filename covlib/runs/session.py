"""The one door every notebook starts through: `start(spec, globals())` reads, checks, caps and records the parameters
its paper declared.

A notebook's spec is plain data declared where its subject lives (`covlib.papers.<paper>.notebook`,
`covlib.runs.project` for 00, 00b and 12):

| key          | what it holds                                                                                  |
|--------------|------------------------------------------------------------------------------------------------|
| `name`       | the notebook ("08_covrag_verifier"): its traces go to results/traces/<name>/                    |
| `parameters` | its parameters, each declared once: {name: `covlib.runs.parameters.Param`}, in the cell's order  |
| `recorded`   | the settings its tables and results record, in order: a name, or (name, what an empty value reads as) |
| `models`     | the parameters naming a model the door loads on `device` ('' the embedded model)               |
| `judge`      | True when the notebook has a `judge` parameter: loaded once, on `device`                       |
| `traces`     | True when its methods' runs are traced (`S.tracer`)                                            |
| `derive`     | (optional) the paper's function(s) adding values that follow from the others (σ's thresholds, sizes) |
| `load`       | (optional) the paper's function loading its data and models into the session                   |
| `work`       | (optional) the paper's function giving its model work for a run's plan (`covlib.runs.plan`)     |
| `simulate`   | (optional) the paper's function teaching a simulated model (`sim:...`) its prompts: (S, lm) -> None |

`start` reads exactly the declared names from the notebook's namespace (an undeclared one, such as a parameter
papermill was given that the notebook does not have, or a missing one is an error), checks each against its
declaration before any work, resolves the profile and the device, caps, derives, records, loads the models and the
judge on the device, makes the `Tracer`, prints what the profile chose and sets the plot style. The notebook reads
`S.<parameter>` (as the profile runs it: a field of the frozen, typed `S.run`), `S.params` (recorded), `S.lm` and
`S.judge`.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from covlib import generation, nli, traces
from covlib.generation import Generator
from covlib.nli import evaluation as nli_eval
from covlib.report import plotting
from covlib.runs import parameters, profiles

Spec = Mapping[str, Any]


@dataclass
class Session:
    """What a notebook starts from: its resolved profile and device, its parameters as the profile runs them (`S.run`,
    frozen and typed, read as `S.k`), the recorded ones (`S.params`), its models (`S.lm`, `S.lms`), judge and tracer,
    and what its paper's `load` added."""

    notebook: str
    profile: str
    device: str
    run: Any  # the frozen `run_type` of the notebook: every parameter as the profile runs it, and the derived values
    params: dict[str, Any] = field(default_factory=dict)
    lms: dict[str, Generator] = field(default_factory=dict)  # by the parameter naming each: 'model', 'verifier'
    judge: Any = None
    tracer: traces.Tracer | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        """What the paper's `load` added (`S.examples`, `S.ranker` the model), else a parameter as the profile runs it
        (`S.k`)."""
        found = self.__dict__.get("data", {})
        if name in found:
            return found[name]
        run = self.__dict__.get("run")
        if run is not None and name in run.__dataclass_fields__:
            return getattr(run, name)
        raise AttributeError(f"{type(self).__name__} has no {name!r} (not a parameter of this notebook, nor loaded)")

    @property
    def values(self) -> dict[str, Any]:
        """Every parameter as the profile runs it, and the derived values, by name (a copy)."""
        return {name: getattr(self.run, name) for name in self.run.__dataclass_fields__}

    @functools.cached_property
    def provenance(self) -> dict[str, Any]:
        """What the run's tables, figures and results name beside its parameters (`results.save_table(..., run=S)`):
        its model, and its judge with the judge's agreement with the key-fact pairs' labels (worked out once)."""
        out: dict[str, Any] = {"model": self.lm.name} if "model" in self.lms else {}
        if self.judge is not None:
            out.update(judge=self.judge.name, judge_agreement=nli_eval.judge_note(self.judge))
        return out

    @property
    def lm(self) -> Generator:
        """The notebook's (first) model: `model` with its `adapter`."""
        return self.lms["model"]

    def load_model(self, model: str = "", adapter: str = "") -> Generator:
        """A generator for a model spec ('' the embedded model) on the session's device, with a LoRA `adapter`."""
        return generation.load_lm(model, device=self.device, adapter=adapter)


def run_type(name: str, values: Mapping[str, Any]) -> type:
    """The frozen dataclass of one notebook's run: a field per parameter and derived value, typed by its value."""
    return dataclasses.make_dataclass(f"Run_{name}", [(k, type(v)) for k, v in values.items()], frozen=True)


def recorded(spec: Spec, values: dict[str, Any]) -> dict[str, Any]:
    """The settings a notebook's tables record, in the spec's order: (name, label) reads an empty value as `label`."""
    out = {}
    for item in spec["recorded"]:
        name, label = item if isinstance(item, tuple) else (item, None)
        value = values.get(name)
        if value is not None:
            value = dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value
            out[name] = (value or label) if label is not None else value
    return out


def given(spec: Spec, namespace: Mapping[str, Any] | None, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The declared parameters from a notebook's namespace, else their defaults, with `overrides` (declared names)."""
    declaration = spec.get("parameters", {})
    unknown = sorted(set(overrides) - set(declaration))
    if unknown:
        raise ValueError(f"{spec['name']} declares no parameter(s) {', '.join(unknown)}")
    base = dict(namespace) if namespace is not None else parameters.defaults(declaration)
    return parameters.read(declaration, {**base, **overrides})


def resolve(spec: Spec, namespace: Mapping[str, Any] | None = None, present: bool = True, /,
            **overrides: Any) -> tuple[str, str, dict]:
    """(profile, device, every parameter as the profile runs it, derived values included); loads nothing. The
    parameters come from `namespace` (a notebook's globals) or the declared defaults, with `overrides`; the device
    is one this machine has unless `present` is False (a plan for another machine)."""
    declaration = spec.get("parameters", {})
    values = given(spec, namespace, overrides)
    for name, param in declaration.items():
        if param.file:
            profiles.check_input_file(name, values[name])
    device = values.get("device", "") or ""
    profile = profiles.resolve(values.get("profile", "auto"), device or None, present)
    values = {**parameters.capped(declaration, profile, values), "profile": profile}
    derive = spec.get("derive") or ()
    for step in derive if isinstance(derive, tuple) else (derive,):
        values.update(step(values))
    return profile, device, values


def start(spec: Spec, namespace: Mapping[str, Any] | None = None, /, **overrides: Any) -> Session:
    """Open a notebook (`start(spec, globals())`): read and check its declared parameters, cap and record them, load
    its models and judge on its device, make its tracer, and let its paper load its data (see the module's table)."""
    profile, device, values = resolve(spec, namespace, **overrides)
    run = run_type(spec["name"], values)(**values)
    S = Session(spec["name"], profile, device, run, recorded(spec, values))
    if spec.get("judge"):
        S.judge = nli.get_judge(values["judge"], device=device or None)
    for name in spec.get("models", ()):
        S.lms[name] = S.load_model(values.get(name, ""), values.get("adapter", "") if name == "model" else "")
    if spec.get("traces"):
        S.tracer = traces.Tracer(spec["name"])
    chosen = {k: values[k] for k, p in spec.get("parameters", {}).items() if p.rule(profile) is not None}
    print(profiles.describe(profile, **chosen))
    plotting.set_style()
    load: Callable[[Session], None] | None = spec.get("load")
    if load:
        load(S)
    teach(spec, S)
    return S


def simulated(S: Session) -> list[generation.SimLM]:
    """The simulated models a session holds: its `lms` and those its paper's `load` added (alone or in a list)."""
    found = [*S.lms.values()]
    for value in S.data.values():
        found += value if isinstance(value, list) else [value]
    return list({id(m): m for m in found if isinstance(m, generation.SimLM)}.values())


def teach(spec: Spec, S: Session) -> None:
    """Let the notebook's paper teach each simulated model the prompts it sends; a paper without one refuses them."""
    models = simulated(S)
    if models and not spec.get("simulate"):
        raise ValueError(f"{spec['name']} sends no prompt a simulated model answers; give a language model")
    for lm in models:
        spec["simulate"](S, lm)
