"""The notebook sent back to a student: the hand-out with their answer cells, those cells' outputs and each verdict.

It is built from the notebook as it was handed out (no solution, no hidden check), the student's answer cells (the
only cells graded), the outputs those cells produced in the graded run (plain text and PNG only, capped), and the
checks' verdicts and messages. Nothing of the solution notebook, of the hidden checks or of the grader's environment
is put in it.
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


def verdict_text(rows: Sequence[Any], exercise: str) -> str:
    """What the grade says of one exercise, as plain text."""
    row = next(r for r in rows if r.exercise == exercise)
    mark = "passed" if not row.error else "failed"
    text = f"[grader] {exercise}: {row.points:g} / {row.max_points:g} points, {mark}"
    return text + (f"\n  {row.error}" if row.error else "") + (f"\n  note: {row.note}" if row.note else "") + "\n"


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
    """The notebook as handed out, with the student's answer cells (and their outputs from the graded run) in place
    and each exercise's verdict under its check cell; outputs that quote one of the `secrets` (lines of the solutions
    and hidden checks) are withheld."""
    from nbformat import from_dict, v4

    nb = copy.deepcopy(handout)
    ran = {cell_role(c): c for c in (executed.cells if executed is not None else []) if isinstance(c, dict) and cell_role(c)}
    for cell in nb.cells:
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
        role = cell_role(cell)
        if not role or cell.get("cell_type") != "code" or role[0] not in {r.exercise for r in rows}:
            continue
        if role[1] == "answer":
            cell["source"] = answers.get(role[0], cell["source"])
            if role in ran:
                cell["outputs"] = redact(clean_outputs(ran[role].get("outputs")), secrets)
        elif role[1] == "checks":
            cell["outputs"] = [from_dict({"output_type": "stream", "name": "stdout",
                                          "text": verdict_text(rows, role[0])})]
    got, of = sum(r.points for r in rows), sum(r.max_points for r in rows)
    cell = v4.new_code_cell("# the grade of this notebook")
    cell.outputs = [from_dict({"output_type": "stream", "name": "stdout", "text": "\n".join(
        [f"[grader] {got:g} / {of:g} points"] + [verdict_text(rows, r.exercise).rstrip() for r in rows]) + "\n"})]
    nb.cells.insert(0, cell)
    return nb
