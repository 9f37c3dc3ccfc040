"""Notebook parameters, each declared once by the paper that owns its notebook, as scikit-learn declares
`_parameter_constraints`: its default (whose type is the parameter's), one line of doc, its bounds or choices, and
what the cpu and smoke profiles do to it.

A notebook's spec holds its declaration as `parameters`: an ordered {name: `Param`}. The notebook's literal
`parameters` cell (kept for papermill) is `cell(declaration)`, line for line (a test holds them equal); the door
(`covlib.runs.session.start`) reads exactly the declared names from the notebook's namespace, so that a name
papermill was given that the notebook does not declare (`-p n_question 3`, which papermill only logs) is refused, and
`read` checks every value against its declaration, raising one ValueError naming every bad parameter.

What a profile does to a parameter (`cpu=`, `smoke=`): a plain value replaces it; ("at most", x) / ("at least", x)
bound it; ("if unset", x) replaces -1 ("by epochs"); ("among", xs) keeps the given values that are in xs (all of them
when none is); ("without", x) drops x from a list. The full profile keeps the paper's setting.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Mapping, TypeVar

T = TypeVar("T")
SIMPLE = (str, int, float, bool)


@dataclass(frozen=True)
class Param:
    """One notebook parameter: its default (the paper's setting where the paper gives one), a line of doc, its rule
    (bounds, choices, a comma-separated list's items, a file), and what the cpu and smoke profiles do to it."""

    default: Any
    doc: str
    low: float | None = None  # the least value (of each item, for a list of whole numbers)
    high: float | None = None
    above: bool = False  # `low` is excluded
    choices: tuple[str, ...] | None = None  # one of these (matched case-insensitively)
    items: tuple[str, ...] | str | None = None  # a comma-separated list: of these, or "int" (whole numbers), or "any"
    file: bool = False  # names an input file: refused before any work when no such file exists
    cpu: Any = None  # what the cpu profile does to it (None: nothing)
    smoke: Any = None  # what the smoke profile does to it (None: nothing)

    def line(self, name: str) -> str:
        """The parameter's line in the notebook's `parameters` cell."""
        value = json.dumps(self.default, ensure_ascii=False) if isinstance(self.default, str) else repr(self.default)
        return f"{name}: {type(self.default).__name__} = {value}  # {self.doc}"

    def rule(self, profile: str) -> Any:
        """What `profile` does to the parameter (None: nothing)."""
        return {"cpu": self.cpu, "smoke": self.smoke}.get(profile)

    def read(self, name: str, value: Any) -> Any:
        """The value checked against the declaration, a list split and a choice matched; a ValueError saying what
        is wrong and what is allowed."""
        kind = type(self.default)
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            what = {int: "a whole number", float: "a finite number", bool: "True or False", str: "a string"}[kind]
            raise ValueError(f"{name} must be {what}, got {value!r}")
        if self.items is not None:
            allowed = None if self.items in ("int", "any") else self.items
            value = split_list(name, value, allowed, int if self.items == "int" else str)
            for item in value if self.items == "int" else ():
                self._bounded(name, item)
            return value
        if self.choices is not None:
            return choice(name, value, self.choices)
        return self._bounded(name, value)

    def _bounded(self, name: str, value: Any) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number, got {value!r}")
        low, high = self.low, self.high
        if (low is not None and (value < low or (self.above and value == low))) or (high is not None and value > high):
            bounds = f"{'>' if self.above else '>='} {low}" if high is None else f"between {low} and {high}"
            raise ValueError(f"{name} must be {bounds}, got {value!r}")
        return value


def count(default: int, doc: str, **rule: Any) -> Param:
    """A count or a length: a whole number, at least 1."""
    return Param(default, doc, low=1, **rule)


def like(param: Param, **changes: Any) -> Param:
    """`param` with some of its fields changed (another notebook's doc or caps for the same setting)."""
    return replace(param, **changes)


def cell(declaration: Mapping[str, Param]) -> str:
    """The notebook's literal `parameters` cell for `declaration` (what papermill overrides)."""
    return "\n".join(p.line(name) for name, p in declaration.items())


def defaults(declaration: Mapping[str, Param]) -> dict[str, Any]:
    """Every declared parameter at its default."""
    return {name: p.default for name, p in declaration.items()}


def undeclared(declaration: Mapping[str, Param], namespace: Mapping[str, Any]) -> list[str]:
    """The plain values in a notebook's namespace at its door that its declaration does not name: a parameter
    papermill was given that the notebook does not have (lowercase names bound to a str, int, float or bool)."""
    return sorted(n for n, v in namespace.items() if n not in declaration and n[:1].islower()
                  and not n.startswith("_") and type(v) in SIMPLE)


def read(declaration: Mapping[str, Param], namespace: Mapping[str, Any]) -> dict[str, Any]:
    """Exactly the declared parameters from a notebook's namespace, each checked (one ValueError for every problem:
    a missing name, an undeclared one, a bad value)."""
    unknown = undeclared(declaration, namespace)
    if unknown:
        raise ValueError(f"unknown notebook parameter(s) {', '.join(unknown)}: this notebook declares no such name "
                         "(a typo? see its parameters cell); nothing was run")
    missing = [n for n in declaration if n not in namespace]
    if missing:
        raise ValueError(f"notebook parameter(s) {', '.join(missing)} not set: the parameters cell assigns every "
                         "declared name")
    values, problems = {}, []
    for name, param in declaration.items():
        try:
            values[name] = param.read(name, namespace[name])
        except ValueError as e:
            problems.append(str(e))
    if problems:
        raise ValueError("bad notebook parameters: " + "; ".join(problems))
    return values


def capped(declaration: Mapping[str, Param], profile: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """`values` as `profile` runs them (each declared parameter under its rule for the profile)."""
    return {n: apply_cap(declaration[n].rule(profile), v) if n in declaration else v for n, v in values.items()}


def apply_cap(rule: Any, value: Any) -> Any:
    """One parameter's value under one profile's rule (see the module's docstring); None leaves it."""
    if rule is None:
        return value
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


# The parameters every notebook that runs a model declares alike.
PROFILE = Param("auto", "smoke, cpu, full or auto (full on a GPU, cpu otherwise)")
MODEL = Param("", "hub id or local dir; empty for the embedded SmolLM2-135M-Instruct")
DEVICE = Param("", "cpu or cuda; empty picks cuda when available")
