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
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable, TypeVar

T = TypeVar("T")
PROFILES = ("full", "cpu", "smoke")


def resolve(profile: str | None, device: str | None = None) -> str:
    """The concrete profile name for 'auto'/'' given the device (cuda -> full, else cpu)."""
    profile = (profile or "auto").strip().lower()
    if profile == "auto":
        if device:
            return "full" if device.startswith("cuda") else "cpu"
        import torch

        return "full" if torch.cuda.is_available() else "cpu"
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}: choose one of {', '.join(PROFILES)} or auto")
    return profile


def pick(profile: str, full: T, cpu: T | None = None, smoke: T | None = None) -> T:
    """The value for a resolved profile; `cpu`/`smoke` fall back to `full` when not given."""
    if profile not in PROFILES:
        raise ValueError(f"unresolved profile {profile!r}; call profiles.resolve first")
    value = {"full": full, "cpu": cpu, "smoke": smoke}[profile]
    return full if value is None else value


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
                     "judge_tokens", "n_train", "n_test", "lora_rank", "batch_size", "max_length"], _COUNT),
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


def check_parameters(**values: Any) -> None:
    """Raise one ValueError listing every parameter whose value breaks its rule in PARAMETER_RULES."""
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
