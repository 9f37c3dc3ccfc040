"""Where the submissions are: one folder per student, notebooks found by name below it, links never followed."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Sequence

from teaching.exercises import CourseError

SUBMISSION_CAP = 50 * 2**20  # bytes: a larger submitted notebook is not read


def _regular(path: Path) -> bool:
    """A plain file: not a link, a pipe (reading one would wait forever) or a device."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _notebooks(student: Path) -> list[Path]:
    """The student's notebooks, shallowest first; links (to files or folders), pipes and devices are skipped, so a
    submission can never be a link to the teacher's solution or to another student's file, nor hang the grader."""
    found = []
    for top, dirs, files in os.walk(student, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d != ".ipynb_checkpoints" and not (Path(top) / d).is_symlink())
        found += [Path(top) / f for f in files if f.endswith(".ipynb") and _regular(Path(top) / f)]
    return sorted(found, key=lambda p: (len(p.parts), str(p)))


def find_submissions(folder: str | Path, names: Sequence[str]) -> dict[str, dict[str, tuple[Path, str]]]:
    """Per student (a subfolder of `folder`): for each expected notebook name, the file to grade and a note.

    Searched recursively (nbgrader's `submitted/<student>/<assignment>/` works). Of several copies the
    shallowest, then the first by path, is graded; a renamed copy (`01_x-Copy1.ipynb`, `01_x (1).ipynb`)
    is graded when the name itself is missing. Either way the note says so.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"submissions folder not found: {folder}")
    out: dict[str, dict[str, tuple[Path, str]]] = {}
    for student in sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink() and not p.name.startswith(".")):
        files = _notebooks(student)
        found = {}
        for name in names:
            stem = Path(name).stem
            exact = [p for p in files if p.name == name]
            renamed = [p for p in files if p.name != name and p.stem.startswith(stem) and p.stem[len(stem):][:1] in "-_ ("]
            chosen = (exact or renamed or [None])[0]
            if chosen is None:
                continue
            note = ""
            if not exact:
                note = f"graded {chosen.relative_to(student)} (renamed)"
            elif len(exact) > 1:
                note = f"{len(exact)} copies; graded {chosen.relative_to(student)}"
            found[name] = (chosen, note)
        out[student.name] = found
    if not out:
        raise ValueError(f"no student folders in {folder}: expected {folder}/<student>/<notebook>.ipynb")
    return out


def notebook_id(name: str) -> str:
    """The number a notebook goes by: '01' for 01_consistency_kde(.ipynb), '00b' for 00b_nli_judges."""
    return Path(name).stem.split("_")[0]


def select(solutions: Sequence[Path], assignments: Sequence[str]) -> list[Path]:
    """The solution notebooks of the chosen assignments, each named by its number ('01', '00b') or its whole name
    ('01_consistency_kde', with or without .ipynb), in course order and each once; all of them when none is chosen.
    Anything else (a prefix such as '0', a partial name) is refused with the list."""
    if not assignments:
        return list(solutions)
    chosen, unknown = set(), []
    for a in assignments:
        hits = [p for p in solutions if a in (notebook_id(p.name), p.stem, p.name)]
        if hits:
            chosen.update(hits)
        elif a not in unknown:
            unknown.append(a)
    if unknown or not chosen:
        raise CourseError(f"no assignment {', '.join(unknown) or '(none)'}: the assignments are "
                          + ", ".join(p.stem for p in solutions)
                          + " (name one by its number, such as 01, or by its whole name)")
    return [p for p in solutions if p in chosen]


BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


MARKUP = {"<": "&lt;", ">": "&gt;", "&": "&amp;", "[": "\\[", "]": "\\]", "\\": "\\\\", "|": "\\|"}
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")  # a spreadsheet evaluates a cell that starts so (OWASP, CSV injection)


def table_cell(text: object) -> str:
    """`text` as a cell of a Markdown table: bidi controls shown as <U+202E>, every line break (and other control
    character) as a space, `|` and `\\` escaped, and HTML (`<`, `>`, `&`) and link or image brackets made inert, so a
    name or message can neither add a row, display reversed, run a script nor load a remote image."""
    out = []
    for ch in str(text):
        if ch in BIDI_CONTROLS:
            out.append(f"&lt;U+{ord(ch):04X}&gt;")
        elif ch in MARKUP:
            out.append(MARKUP[ch])
        elif ch.isspace() or not ch.isprintable():
            out.append(" ")
        else:
            out.append(ch)
    return "".join(out)


def csv_cell(text: object) -> object:
    """A text cell of the grade CSV that a spreadsheet will not evaluate: one starting with `=`, `+`, `-`, `@`, a tab
    or a carriage return gets a leading `'` (OWASP's advice); numbers and other text are kept as recorded."""
    return "'" + text if isinstance(text, str) and text.startswith(FORMULA_START) else text


def console_text(text: object) -> str:
    """`text` for the teacher's terminal: control characters (escape sequences, line breaks) and bidi controls shown
    as escapes (`\\x1b`, `\\n`, `\\u202e`), so a student's folder name can neither forge a line nor restyle it."""
    return "".join(ch if ch.isprintable() and ch not in BIDI_CONTROLS
                   else ch.encode("unicode_escape").decode("ascii") for ch in str(text))
