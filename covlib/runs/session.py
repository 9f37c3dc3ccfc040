"""The one door every notebook starts through: `start(spec, **parameters)` checks, caps and records its parameters.

A notebook's spec is plain data declared where its subject lives (`covlib.papers.<paper>.notebook`,
`covlib.runs.project` for 00, 00b and 12):

| key        | what it holds                                                                                    |
|------------|--------------------------------------------------------------------------------------------------|
| `name`     | the notebook ("08_covrag_verifier"): its traces go to results/traces/<name>/                      |
| `lists`    | comma-separated parameters read as lists: name -> allowed values (None: any; "int": whole numbers)|
| `choices`  | one-of parameters: name -> allowed values                                                        |
| `caps`     | what the cpu and smoke profiles do to a parameter (`profiles.apply_cap`); full keeps the paper's |
| `recorded` | the settings its tables and results record, in order: a name, or (name, what an empty value reads as) |
| `models`   | the parameters naming a model the door loads on `device` ('' the embedded model); `adapter` rides on `model` |
| `files`    | the parameters naming an input file: refused before any work when no such file exists         |
| `judge`    | True when the notebook has a `judge` parameter: loaded once, on `device`                         |
| `traces`   | True when its methods' runs are traced (`S.tracer`)                                              |
| `derive`   | (optional) the paper's function adding values that follow from the others (σ's thresholds, sizes) |
| `load`     | (optional) the paper's function loading its data into the session (questions, corpus, key facts) |
| `work`     | (optional) the paper's function giving its model work for a run's plan (`covlib.runs.plan`)        |
| `simulate` | (optional) the paper's function teaching a simulated model (`sim:...`) its prompts: (S, lm) -> None |

`start` checks every parameter by name before any work (`profiles.check_parameters`), resolves the profile and the
device, caps, derives, records, loads the models and the judge on the device, makes the `Tracer`, prints what the
profile chose and sets the plot style; the notebook reads `S.params` (recorded), `S.<parameter>` (as the profile runs
it), `S.lm` and `S.judge`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from covlib import generation, nli, traces
from covlib.generation import Generator
from covlib.report import plotting
from covlib.runs import profiles

Spec = Mapping[str, Any]


@dataclass
class Session:
    """What a notebook starts from: its resolved profile and device, its parameters as the profile runs them
    (`S.k`), the recorded ones (`S.params`), its models (`S.lm`, `S.lms`), judge and tracer, and what its paper's `load` added."""

    notebook: str
    profile: str
    device: str
    values: dict[str, Any]
    params: dict[str, Any] = field(default_factory=dict)
    lms: dict[str, Generator] = field(default_factory=dict)  # by the parameter naming each: 'model', 'verifier'
    judge: Any = None
    tracer: traces.Tracer | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        """What the paper's `load` added (`S.examples`, `S.ranker` the model), else a parameter as the profile runs it
        (`S.k`)."""
        for box in ("data", "values"):
            found = self.__dict__.get(box, {})
            if name in found:
                return found[name]
        raise AttributeError(f"{type(self).__name__} has no {name!r} (not a parameter of this notebook, nor loaded)")

    @property
    def lm(self) -> Generator:
        """The notebook's (first) model: `model` with its `adapter`."""
        return self.lms["model"]

    def load_model(self, model: str = "", adapter: str = "") -> Generator:
        """A generator for a model spec ('' the embedded model) on the session's device, with a LoRA `adapter`."""
        return generation.load_lm(model, device=self.device, adapter=adapter)


def read_parameters(spec: Spec, given: dict[str, Any]) -> dict[str, Any]:
    """The parameters checked by name and rule, their lists split and their choices matched (no profile yet)."""
    lists = spec.get("lists", {})
    profiles.check_parameters(**{k: v for k, v in given.items() if k in profiles.PARAMETER_RULES and k not in lists})
    values = dict(given)
    for name, allowed in lists.items():
        if name in values:
            cast = int if allowed == "int" else str
            values[name] = profiles.split_list(name, values[name], None if allowed in (None, "int") else allowed, cast)
            if name in profiles.PARAMETER_RULES:  # a list of counts (05's n_refs): each one by the count's rule
                profiles.check_parameters(**{name: min(values[name])})
    for name, allowed in spec.get("choices", {}).items():
        if name in values:
            values[name] = profiles.choice(name, values[name], allowed)
    return values


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


def resolve(spec: Spec, **given: Any) -> tuple[str, str, dict[str, Any]]:
    """(profile, device, every parameter as the profile runs it, derived values included); loads nothing."""
    values = read_parameters(spec, given)
    for name in spec.get("files", ()):
        profiles.check_input_file(name, values.get(name))
    device = values.get("device", "") or ""
    profile = profiles.resolve(values.get("profile", "auto"), device or None)
    values = {**profiles.capped_by(spec.get("caps", {}).get(profile, {}), **values), "profile": profile}
    if spec.get("derive"):
        values.update(spec["derive"](values))
    return profile, device, values


def start(spec: Spec, **given: Any) -> Session:
    """Open a notebook: check and cap its parameters, record them, load its models and judge on its device, make its
    tracer, and let its paper load its data (see the module's table for `spec`)."""
    profile, device, values = resolve(spec, **given)
    S = Session(spec["name"], profile, device, values, recorded(spec, values))
    if spec.get("judge"):
        S.judge = nli.get_judge(values["judge"], device=device or None)
    for name in spec.get("models", ()):
        S.lms[name] = S.load_model(values.get(name, ""), values.get("adapter", "") if name == "model" else "")
    if spec.get("traces"):
        S.tracer = traces.Tracer(spec["name"])
    print(profiles.describe(profile, **{k: values[k] for k in spec.get("caps", {}).get(profile, {}) if k in values}))
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
