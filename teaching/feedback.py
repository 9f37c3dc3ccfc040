"""The notebook sent back to a student: the hand-out with their answer cells, those cells' outputs and each verdict.

It is built from the notebook as it was handed out (no solution, no hidden check), the student's answer cells (the
only cells graded), the outputs those cells produced in the run without hidden inputs (plain text and PNG only,
capped, under a label saying they are the student's), and the checks' verdicts and messages in markdown cells of the grader's, headed
"Grader's verdict": a student's code can only write outputs, so nothing it prints can pass for a verdict. Nothing of
the solution notebook, of the hidden checks or of the grader's environment is put in it.
"""

from __future__ import annotations

import base64
import copy
import json
from typing import Any, Sequence

from teaching.exercises import cell_role
from teaching.safe_html import is_png

TEXT_CAP = 20_000  # characters of an answer cell's output kept in the feedback
PNG_CAP = 2 * 2**20  # bytes of one PNG kept in the feedback


def _text(value: Any, cap: int = TEXT_CAP) -> str:
    text = "".join(value) if isinstance(value, list) else str(value)
    return text if len(text) <= cap else text[:cap] + f"\n[cut: over {cap:,} characters]\n"


def _png(value: Any) -> str | None:
    if not isinstance(value, str) or len(value) > PNG_CAP * 4 // 3 + 4:
        return None
    try:
        return value if is_png(base64.b64decode(value, validate=False)) else None
    except ValueError:
        return None


def clean_outputs(outputs: Any) -> list[dict]:
    """An executed cell's outputs as plain text, error lines and PNG images; HTML, scripts and the rest are dropped."""
    from nbformat import from_dict

    kept: list[dict] = []
    for out in outputs if isinstance(outputs, list) else []:
        kind = out.get("output_type") if isinstance(out, dict) else None
        if kind == "stream":
            name = out.get("name") if out.get("name") in ("stdout", "stderr") else "stdout"
            kept.append({"output_type": "stream", "name": name, "text": _text(out.get("text", ""))})
        elif kind == "error":
            kept.append({"output_type": "stream", "name": "stderr",
                         "text": _text(f"{out.get('ename', '')}: {out.get('evalue', '')}", 2000)})
        elif kind in ("execute_result", "display_data") and isinstance(out.get("data"), dict):
            data = {}
            if isinstance(out["data"].get("text/plain"), (str, list)):
                data["text/plain"] = _text(out["data"]["text/plain"])
            if (png := _png(out["data"].get("image/png"))) is not None:
                data["image/png"] = png
            if data:
                kept.append({"output_type": "display_data", "data": data, "metadata": {}})
    return [from_dict(o) for o in kept]


VERDICT_HEADING = "Grader's verdict"  # only the grader's markdown cells carry it: a student's code writes outputs only
OUTPUT_LABEL = "[your cell's output in the graded run; the grade is in the markdown cells headed \"Grader's verdict\"]\n"
REASON_CAP = 2000  # characters of a reason shown


def _quoted(text: str) -> str:
    """`text` (which may hold the student's values) as an indented code block: no markdown or HTML of it is read."""
    text = text if len(text) <= REASON_CAP else text[:REASON_CAP] + " [cut]"
    return "\n".join("    " + line for line in text.splitlines() or [""])


def label(row: Any) -> str:
    """An exercise as the grade names it: its id, and its title as the notebook says it."""
    return f"{row.exercise} ({row.title})" if row.title else row.exercise


def verdict_text(rows: Sequence[Any], exercise: str) -> str:
    """What the grade says of one exercise, as the markdown of the grader's own cell."""
    row = next(r for r in rows if r.exercise == exercise)
    mark = "passed" if not row.error else "failed"
    text = f"#### {VERDICT_HEADING} · {label(row)}: {row.points:g} / {row.max_points:g} points, {mark}\n"
    if row.error:
        text += f"\nWhy:\n\n{_quoted(row.error)}\n"
    if row.note:
        text += f"\nNote:\n\n{_quoted(row.note)}\n"
    return text


def summary_text(rows: Sequence[Any]) -> str:
    """The markdown of the grader's cell at the top: the notebook's points, then each exercise's."""
    got, of = sum(r.points for r in rows), sum(r.max_points for r in rows)
    lines = [f"## {VERDICT_HEADING}: {got:g} / {of:g} points", "",
             "Written by the grader. Only the markdown cells headed \"Grader's verdict\" give your grade; the outputs "
             "under your answer cells are what your own code printed in the graded run, and are labelled so.", ""]
    lines += [f"- {label(r)}: {r.points:g} / {r.max_points:g} points, {'failed' if r.error else 'passed'}" for r in rows]
    return "\n".join(lines) + "\n"


def redact(outputs: list[dict], secrets: Sequence[str]) -> list[dict]:
    """Outputs that quote a line of the solutions or hidden checks (a run can read its own cells' source) are withheld."""
    from nbformat import from_dict

    def quotes(out: dict) -> bool:
        text = json.dumps(out)
        return any(s in text or json.dumps(s)[1:-1] in text for s in secrets)

    withheld = {"output_type": "stream", "name": "stderr", "text": "[output withheld: it quotes the hidden checks]\n"}
    return [from_dict(withheld) if quotes(o) else o for o in outputs]


def feedback_notebook(handout: Any, answers: dict[str, str], executed: Any | None, rows: Sequence[Any],
                      secrets: Sequence[str] = ()) -> Any:
    """The notebook as handed out, with the student's answer cells (and their outputs from the run without hidden inputs, labelled as
    theirs) in place, and the verdicts in markdown cells of the grader's: the notebook's at the top, each exercise's
    under its check cell. Outputs that quote one of the `secrets` (lines of the solutions and hidden checks) are
    withheld."""
    from nbformat import from_dict, v4

    nb = copy.deepcopy(handout)
    ran = {cell_role(c): c for c in (executed.cells if executed is not None else []) if isinstance(c, dict) and cell_role(c)}
    graded = {r.exercise for r in rows}
    cells = []
    for cell in nb.cells:
        cells.append(cell)
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
        role = cell_role(cell)
        if not role or cell.get("cell_type") != "code" or role[0] not in graded:
            continue
        if role[1] == "answer":
            cell["source"] = answers.get(role[0], cell["source"])
            outputs = redact(clean_outputs(ran[role].get("outputs")), secrets) if role in ran else []
            if outputs:  # labelled as the student's: nothing printed can pass for the grader's verdict
                cell["outputs"] = [from_dict({"output_type": "stream", "name": "stdout", "text": OUTPUT_LABEL}), *outputs]
        elif role[1] == "checks":
            cells.append(v4.new_markdown_cell(verdict_text(rows, role[0]), metadata={"grader": "verdict"}))
    nb.cells = [v4.new_markdown_cell(summary_text(rows), metadata={"grader": "verdict"}), *cells]
    return nb
