"""Run profiles: the paper's settings, a CPU-sized subsample, or a smoke test.

| profile | when                          | what                                              |
|---------|-------------------------------|---------------------------------------------------|
| full    | default on a GPU              | the paper's settings (every notebook's defaults)  |
| cpu     | default without a GPU         | subsamples sized so all notebooks finish in ~1 h  |
| smoke   | CI (`make test`)              | a dozen examples, short generations               |

`auto` (or an empty string) picks `full` on a GPU and `cpu` otherwise.

Notebook parameters arrive from papermill (`-p n_questions -5`, `-p k abc`) or from a student's
edit. `check_parameters` checks them by name against `PARAMETER_RULES` before any work starts,
and `split_list` reads a comma-separated parameter against its allowed values; both raise one
ValueError naming every bad parameter, its value and what is allowed.

What the cpu and smoke profiles cut is plain data in each notebook's spec, applied by `capped_by`; `model_list` turns
a notebook's `model` / `models` parameters into the models it compares ('' is the embedded model). The one door
that reads all of it is `covlib.runs.session.start`.
"""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence, TypeVar

from covlib.core.devices import cuda_available
from covlib.generation.simulated import is_simulated, parse_sim, with_persona


T = TypeVar("T")
PROFILES = ("full", "cpu", "smoke")


def check_device(device: str | None) -> None:
    """Refuse, before any work, a device this machine does not have: '' (the default), 'cpu', 'cuda', 'cuda:N', 'mps'."""
    if not device:
        return
    if not isinstance(device, str) or not re.fullmatch(r"cpu|cuda(:\d+)?|mps", device.strip().lower()):
        raise ValueError(f"unknown device {device!r}: choose cpu, cuda, cuda:N or mps (empty: the default)")
    wanted = device.strip().lower()
    if wanted == "cpu":
        return
    import torch

    if wanted == "mps":
        if not torch.backends.mps.is_available():
            raise ValueError(f"device={device!r}, but this machine has no MPS (Apple GPU) backend: use device='' or 'cpu'")
        return
    if not cuda_available():
        raise ValueError(f"device={device!r}, but no CUDA GPU is visible here (torch.cuda.is_available() is False): "
                         "use device='' (the default: cuda where there is one, else cpu) or 'cpu'")
    index = int(wanted.split(":")[1]) if ":" in wanted else 0
    if index >= torch.cuda.device_count():
        raise ValueError(f"device={device!r}, but only {torch.cuda.device_count()} CUDA GPU(s) are visible")


def check_input_file(name: str, path: str | None) -> None:
    """Refuse, before any work, a file parameter that names no file ('' or None: not given)."""
    if path and not Path(path).expanduser().is_file():
        raise FileNotFoundError(f"{name}={path!r}: no such file (checked before the run starts)")


def resolve(profile: str | None, device: str | None = None) -> str:
    """The concrete profile name for 'auto'/'' given the device (cuda -> full, else cpu); the device is checked."""
    check_device(device)
    profile = (profile or "auto").strip().lower()
    if profile == "auto":
        if device:
            return "full" if device.startswith("cuda") else "cpu"
        return "full" if cuda_available() else "cpu"
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}: choose one of {', '.join(PROFILES)} or auto")
    return profile


def pick(profile: str, full: T, cpu: T | None = None, smoke: T | None = None) -> T:
    """The value for a resolved profile; `cpu`/`smoke` fall back to `full` when not given."""
    if profile not in PROFILES:
        raise ValueError(f"unresolved profile {profile!r}; call profiles.resolve first")
    value = {"full": full, "cpu": cpu, "smoke": smoke}[profile]
    return full if value is None else value


# What the cpu and smoke profiles do to a notebook parameter is data in each notebook's spec (`covlib.runs.session`):
# a plain value replaces the parameter; ("at most", x) / ("at least", x) bound it; ("if unset", x) replaces -1
# ("by epochs"); ("among", xs) keeps the given values that are in xs (all of them when none is); ("without", x) drops
# x from a list.


def apply_cap(rule: Any, value: Any) -> Any:
    """One parameter's value under one rule of CAPS (see there)."""
    if not isinstance(rule, tuple):
        return rule
    kind, bound = rule
    if kind == "at most":
        return min(value, bound)
    if kind == "at least":
        return max(value, bound)
    if kind == "if unset":
        return bound if value < 0 else value
    if kind == "among":
        return [v for v in value if v in bound] or value
    if kind == "without":
        return [v for v in value if v != bound]
    raise ValueError(f"unknown cap {rule!r}")


def capped_by(rules: dict[str, Any], /, **values: Any) -> dict[str, Any]:
    """The parameters `values` under one profile's `rules` (a notebook spec's caps for it; others as given)."""
    return {name: apply_cap(rules[name], value) if name in rules else value for name, value in values.items()}


def model_list(model: str, models: str, profile: str, paper_models: Mapping[str, str]) -> list[str]:
    """The models a notebook compares: `models` (comma-separated), else `model`; `paper_models` (the paper's name:
    hub id) when neither is given in the full profile (a GPU box with the hub), else the embedded model (''). A
    simulated `model` without a persona stands for every paper model, simulated, in any profile."""
    listed = [m.strip() for m in models.split(",") if m.strip()]
    if listed:
        return listed
    if is_simulated(model) and not parse_sim(model)[1]:
        return [with_persona(model, name) for name in paper_models]
    if model:
        return [model]
    return list(paper_models.values()) if profile == "full" else [""]


def describe(profile: str, **chosen: object) -> str:
    """A one-line note of what the profile chose, with how to force the paper's settings."""
    parts = ", ".join(f"{k}={v}" for k, v in chosen.items())
    note = f"profile '{profile}': {parts}"
    if profile != "full":
        note += "  (paper settings: `make reproduce PROFILE=full`, or papermill -p profile full)"
    return note


# name -> (type, minimum, maximum); None: no bound; a float minimum of 0.0 in POSITIVE is exclusive.
# Counts and lengths are whole numbers >= 1.
_COUNT = (int, 1, None)
POSITIVE = frozenset({"learning_rate", "lora_alpha", "epochs"})
PARAMETER_RULES: dict[str, tuple[type, float | None, float | None]] = {
    **dict.fromkeys(["n_questions", "n_samples", "max_new_tokens", "n_fever", "n_fever_slow", "n_hotpotqa",
                     "n_2wikimultihop", "n_refs", "cap", "k_initial", "n_per_dataset", "k", "verify_tokens",
                     "ranker_tokens", "n_train", "n_test", "lora_rank", "batch_size", "max_length"], _COUNT),
    "n_rating": (int, 0, None),  # 0: no rating sheet
    "max_rounds": (int, 0, None),  # 0: retrieve once, never again
    "max_steps": (int, -1, None),  # -1: by epochs
    "seed": (int, None, None),
    "temperature": (float, 0.0, None),
    **dict.fromkeys(POSITIVE, (float, 0.0, None)),
    **dict.fromkeys(["reference_correctness_max", "correctness_below", "bias_above", "truthfulness_max"],
                    (float, 0.0, 1.0)),  # CoV-RAG's scores lie in [0, 1]
}


def _problem(name: str, value: Any) -> str | None:
    """What is wrong with one parameter's value, or None."""
    kind, low, high = PARAMETER_RULES[name]
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        return f"{name} must be a whole number, got {value!r}"
    if kind is float and (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)):
        return f"{name} must be a finite number, got {value!r}"
    strict = name in POSITIVE
    if (low is not None and (value < low or (strict and value == low))) or (high is not None and value > high):
        bounds = f"{'>' if strict else '>='} {low}" if high is None else f"between {low} and {high}"
        return f"{name} must be {bounds}, got {value!r}"
    return None


def _assigned(source: str, annotated: bool) -> set[str]:
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return set()
    if annotated:
        return {n.target.id for n in body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    return {t.id for n in body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}


def unknown_injected(history: Sequence[str]) -> list[str]:
    """The names papermill injected (its `# Parameters` cell) that the notebook's parameters cell (typed assignments)
    does not declare, from the cells run so far, in order."""
    last = max((i for i, src in enumerate(history) if src.lstrip().startswith("# Parameters\n")), default=None)
    if last is None:
        return []
    declared = next((_assigned(src, True) for src in reversed(history[:last]) if _assigned(src, True)), None)
    if not declared:
        return []
    return sorted(_assigned(history[last], False) - declared)


def check_injected() -> None:
    """Refuse parameters papermill was given that the notebook does not declare (`-p n_question 3`: papermill only
    logs "Passed unknown parameter" and runs the defaults). Outside a papermill run, nothing to check."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    history = list(shell.user_ns.get("In", [])) if shell is not None else []
    unknown = unknown_injected([h for h in history if isinstance(h, str)])
    if unknown:
        raise ValueError(f"unknown notebook parameter(s) {', '.join(unknown)}: this notebook declares no such name "
                         "(a typo? see its parameters cell); nothing was run")


def check_parameters(**values: Any) -> None:
    """Raise one ValueError listing every parameter whose value breaks its rule in PARAMETER_RULES (and, in a papermill
    run, for any parameter the notebook does not declare)."""
    check_injected()
    unknown = [name for name in values if name not in PARAMETER_RULES]
    if unknown:
        raise KeyError(f"no rule for parameter(s) {unknown}: add them to profiles.PARAMETER_RULES")
    problems = [p for p in (_problem(name, value) for name, value in values.items()) if p]
    if problems:
        raise ValueError("bad notebook parameters: " + "; ".join(problems))


def split_list(name: str, text: Any, allowed: Iterable[str] | None = None, cast: Callable[[str], T] = str) -> list[T]:
    """A comma-separated parameter as a list without repeats; items matched to `allowed` case-insensitively."""
    if not isinstance(text, str):
        raise ValueError(f"parameter {name} must be a comma-separated string, got {text!r}")
    items = list(dict.fromkeys(x.strip() for x in text.split(",") if x.strip()))
    choices = {a.lower(): a for a in allowed} if allowed is not None else None
    if not items:
        hint = f": one or more of {', '.join(choices.values())}" if choices else ""
        raise ValueError(f"parameter {name} is empty{hint}")
    if choices is not None:
        unknown = [x for x in items if x.lower() not in choices]
        if unknown:
            raise ValueError(f"parameter {name}: unknown {', '.join(map(repr, unknown))}; "
                             f"choose from {', '.join(choices.values())}")
        items = list(dict.fromkeys(choices[x.lower()] for x in items))
    out = []
    for x in items:
        try:
            out.append(cast(x))
        except ValueError:
            raise ValueError(f"parameter {name}: {x!r} is not a valid {getattr(cast, '__name__', 'value')}") from None
    return out


def choice(name: str, value: Any, allowed: Iterable[str]) -> str:
    """One value of `allowed` (matched case-insensitively), or a ValueError naming the parameter and the choices."""
    items = split_list(name, value, allowed)
    if len(items) != 1:
        raise ValueError(f"parameter {name} takes one value, got {', '.join(items)}")
    return items[0]
