"""The folder tree is the architecture: subject packages on layers, every import pointing down, no cycles.

Read from the source with `ast` (nothing is imported), so a violation names the file and line.
"""

from __future__ import annotations

import ast
from pathlib import Path

import importlib.util

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("library_map", ROOT / "scripts" / "library_map.py")
library_map = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(library_map)

# A package may import its own modules and any package on a lower layer, never one on its layer or above.
LAYERS = {folder.replace("/", ".").replace("covlib.papers.", "covlib.papers|").split("|")[0]: layer
          for folder, layer, _ in library_map.LAYERS}
MAX_LINES = 400  # "no module over ~400 lines"
# Modules still over MAX_LINES; each one here is a known debt, and the list may only shrink.
OVERSIZE: dict[str, int] = {}


def _modules() -> dict[str, Path]:
    out = {}
    for top in ("covlib", "teaching"):
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def _package(module: str) -> str:
    """The subject package a module belongs to: covlib.<pkg>, covlib.papers.<paper>, or teaching."""
    parts = module.split(".")
    if parts[0] == "teaching":
        return "teaching"
    if len(parts) >= 3 and parts[1] == "papers":
        return ".".join(parts[:3])
    return ".".join(parts[:2])


def _layer(package: str) -> int:
    return LAYERS["covlib.papers" if package.startswith("covlib.papers.") else package]


def _imports(module: str, path: Path, known: set[str]) -> list[tuple[str, int, bool]]:
    """(imported project module, line, inside a function or class) for every import of covlib or teaching."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nested = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
              for n in ast.walk(f) if n is not f}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known else node.module
                     for a in node.names]
        else:
            continue
        for name in names:
            if name.split(".")[0] in ("covlib", "teaching"):
                out.append((name, node.lineno, id(node) in nested))
    return out


def _relative_imports(path: Path) -> list[int]:
    """The lines of every relative import (`from . import x`, `from .x import y`), which the layer check cannot place."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return sorted(node.lineno for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level)


MODULES = _modules()
EDGES = {m: _imports(m, p, set(MODULES)) for m, p in MODULES.items()}


def test_the_packages_are_the_ones_on_the_layer_map():
    packages = {_package(m) for m in MODULES if m not in ("covlib", "covlib.papers")}
    unknown = sorted(p for p in packages if not (p in LAYERS or p.startswith("covlib.papers.")))
    assert not unknown, f"packages without a layer: {unknown}; add them to LAYERS"
    assert not [m for m in MODULES if m.count(".") == 1 and m.startswith("covlib.") and m.split(".")[1] not in
                {p.split(".")[1] for p in LAYERS if p.startswith("covlib.")}], "a flat module under covlib/"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down_and_sit_at_the_top(module):
    here = _package(module)
    bad = []
    for name, line, nested in EDGES[module]:
        there = _package(name) if name not in ("covlib", "covlib.papers") else name
        if nested:
            bad.append(f"line {line}: `{name}` imported inside a function (import it at the top)")
        elif there in ("covlib", "covlib.papers"):
            bad.append(f"line {line}: `{name}`: import a subject package, not the top")
        elif there != here and _layer(there) >= _layer(here):
            why = "another paper" if there.startswith("covlib.papers.") and here.startswith("covlib.papers.") else \
                "a package on the same layer or above"
            bad.append(f"line {line}: `{name}` is {why}")
    assert not bad, f"{MODULES[module].relative_to(ROOT)}:\n" + "\n".join(bad)


def test_no_relative_imports():
    bad = {str(p.relative_to(ROOT)): lines for p in MODULES.values() if (lines := _relative_imports(p))}
    assert not bad, f"relative imports (write them absolute, `from covlib.<package>.<module> import ...`): {bad}"


def test_no_import_cycles_between_modules():
    graph = {m: {n for n, _, _ in EDGES[m] if n in MODULES and n != m} for m in MODULES}
    # a package's __init__ may import its own modules; a module importing its parent package back is the cycle
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                return stack[stack.index(n):] + [n]
            if n not in state and (cycle := visit(n)):
                return cycle
        state[m] = 2
        stack.pop()
        return None

    for m in sorted(graph):
        if m not in state and (cycle := visit(m)):
            pytest.fail("import cycle: " + " -> ".join(cycle))


def test_no_module_is_over_400_lines():
    sizes = {m: len(p.read_text(encoding="utf-8").splitlines()) for m, p in MODULES.items()}
    over = {m: n for m, n in sizes.items() if n > MAX_LINES and m not in OVERSIZE}
    assert not over, f"modules over {MAX_LINES} lines (split them by what they do): {over}"
    grown = {m: sizes.get(m) for m, n in OVERSIZE.items() if sizes.get(m, 0) > n}
    assert not grown, f"known oversize modules grew: {grown}"


def test_the_library_map_in_docs_is_current():
    written = (ROOT / "docs" / "library.md").read_text(encoding="utf-8")
    assert written == library_map.render(), "docs/library.md is stale: run make docs"
    documented = {m for m in MODULES if f"`{m}`" in written}
    assert documented == set(MODULES) - {"covlib", "covlib.papers"}, "every module has a row in the library map"


def test_every_module_says_what_it_holds():
    missing = [m for m, p in MODULES.items() if not library_map.summary(p)]
    assert not missing, f"modules without a docstring: {missing}"


# A run's plan counts a notebook's tokens from the calls its paper's methods make on a recorder (covlib.runs.plan):
# the modules that say what a notebook runs declare no token count of their own (no `prompt=`, `shared=`, `new=` or
# `longest=` in a dict or a Work they build, no such dict key), so a prompt edit cannot leave the plan behind.
PLAN_MODULES = sorted(m for m in MODULES if m.startswith("covlib.papers.") and m.endswith((".workload", ".notebook"))) \
    + ["covlib.runs.project"]
TOKEN_KEYS = {"prompt", "shared", "new", "longest"}


def _declared_tokens(path: Path) -> list[int]:
    """The lines where a module declares tokens for the plan: such a keyword of `dict(...)` or `Work(...)`, or such a
    key of a dict literal."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) in ("dict", "Work"):
            lines += [node.lineno for k in node.keywords if k.arg in TOKEN_KEYS]
        elif isinstance(node, ast.Dict):
            lines += [node.lineno for k in node.keys if isinstance(k, ast.Constant) and k.value in TOKEN_KEYS]
    return sorted(lines)


def test_the_plans_tokens_come_from_the_recorder_alone():
    assert len(PLAN_MODULES) == 7, PLAN_MODULES  # three papers' workload and notebook modules, and the project's
    bad = {str(MODULES[m].relative_to(ROOT)): lines for m in PLAN_MODULES if (lines := _declared_tokens(MODULES[m]))}
    assert not bad, f"token counts declared by hand (record the calls instead: covlib.generation.recording): {bad}"


def test_the_token_rule_catches_a_hand_written_count(tmp_path):
    """The checker itself: a template's tokens declared beside a notebook's work are reported, a judged pair is not."""
    bad = tmp_path / "bad.py"
    bad.write_text("QA = 30\n\ndef work(v):\n    return [dict(step='a', kind='judge', rows=3),\n"
                   "            dict(step='b', kind='generate', rows=1, prompt=QA), {'shared': 2}]\n")
    assert _declared_tokens(bad) == [5, 5]


def test_the_architecture_check_catches_an_upward_import(tmp_path):
    """The checker itself: a core module importing a paper is reported."""
    bad = tmp_path / "bad.py"
    bad.write_text("from covlib.papers import covrag\n\ndef f():\n    from covlib import data\n")
    found = _imports("covlib.core.bad", bad, set(MODULES))
    assert [(n, nested) for n, _, nested in found] == [("covlib.papers.covrag", False), ("covlib.data", True)]
    assert _layer(_package("covlib.papers.covrag")) > _layer(_package("covlib.core.bad"))


def test_the_architecture_check_catches_a_relative_import(tmp_path):
    """The checker itself: both forms of a relative import are reported, an absolute one is not."""
    bad = tmp_path / "bad.py"
    bad.write_text("from covlib.core import paths\nfrom . import base\n\ndef f():\n    from .base import Hit\n")
    assert _relative_imports(bad) == [2, 5]


DEVICE_MODULE = "covlib.core.devices"  # the one module that asks torch whether there is a GPU


def _untyped_lm(path: Path) -> list[int]:
    """The lines of functions with an `lm` parameter that is not annotated, or annotated `Any`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    args = [(f.lineno, a) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
            for a in f.args.posonlyargs + f.args.args + f.args.kwonlyargs]
    return [line for line, a in args if a.arg == "lm" and (a.annotation is None or ast.unparse(a.annotation) == "Any")]


def _cuda_checks(path: Path) -> list[int]:
    """The lines that call `<...>.cuda.is_available()`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr == "is_available" and isinstance(n.func.value, ast.Attribute) and n.func.value.attr == "cuda"]


def test_the_in_process_decoder_takes_a_typed_engine_not_an_untyped_lm():
    bad = {str(p.relative_to(ROOT)): lines for m, p in MODULES.items()
           if m.startswith("covlib.generation") and (lines := _untyped_lm(p))}
    assert not bad, f"`lm` parameters without a type (take `engine.Engine`, or a `Generator`): {bad}"


def test_only_the_device_module_asks_whether_there_is_a_gpu():
    bad = {str(p.relative_to(ROOT)): lines for m, p in MODULES.items() if m != DEVICE_MODULE and (lines := _cuda_checks(p))}
    assert not bad, f"torch.cuda.is_available() outside {DEVICE_MODULE} (use its cuda_available or default_device): {bad}"


def test_the_typing_and_device_checks_catch_what_they_are_for(tmp_path):
    """The checkers themselves: an untyped or `Any` `lm` and a GPU question are reported, a typed `lm` is not."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f(lm, x):\n    pass\n\ndef g(lm: Any):\n    pass\n\ndef h(*, lm: Generator):\n    pass\n\n"
                   "def i():\n    import torch\n    return torch.cuda.is_available()\n")
    assert _untyped_lm(bad) == [1, 4] and _cuda_checks(bad) == [12]


CROSS_CUTTING = {"test_architecture.py", "test_notebooks.py", "test_scripts.py", "test_fidelity.py"}


def test_the_tests_mirror_the_packages():
    """A test file sits in the folder of the package it tests (tests/generation/ for covlib.generation,
    tests/papers/covrag/ for covlib.papers.covrag, tests/teaching/); only checks across packages stay at the top."""
    tests = ROOT / "tests"
    packages = {_package(m) for m in MODULES if m not in ("covlib", "covlib.papers")}
    folders = {"teaching" if p == "teaching" else p.removeprefix("covlib.").replace(".", "/") for p in packages}
    found = {f.parent.relative_to(tests).as_posix() for f in tests.rglob("test_*.py")} - {"."}
    assert found <= folders, f"test folders that name no package: {sorted(found - folders)}"
    top = {f.name for f in tests.glob("test_*.py")}
    assert top <= CROSS_CUTTING, f"tests at the top of tests/ that belong in a package's folder: {sorted(top - CROSS_CUTTING)}"


DECLARING = ("covlib.runs.parameters", "covlib.runs.project", "covlib.papers.verify_edit.parameters",
             "covlib.papers.credibility.parameters", "covlib.papers.covrag.parameters")


def test_notebook_parameters_are_declared_only_by_the_notebooks_owners():
    """A parameter's rule, default and caps live in one `Param` on its notebook's owner: no table of rules by name
    elsewhere (as `profiles.PARAMETER_RULES` was), no `Param` made outside the declarations."""
    found = []
    for module, path in _modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            made = isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "Param"
            makers = isinstance(node, ast.ImportFrom) and node.module == "covlib.runs.parameters" and any(
                a.name in ("count", "like") for a in node.names)
            if (made or makers) and module not in DECLARING:
                found.append(f"{module}:{node.lineno}")
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "").endswith("PARAMETER_RULES") for t in node.targets):
                found.append(f"{module}:{node.lineno} (a table of rules by name)")
    assert not found, f"parameters declared outside their notebooks' owners: {found}"
