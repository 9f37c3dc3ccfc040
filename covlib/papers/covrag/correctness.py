"""Whether one answer is right (§3.3, as WebGLM: a gold alias inside the answer, citations stripped): below the trace and the metrics."""

from __future__ import annotations

from typing import Sequence

from covlib.core.metrics import accuracy_contains
from covlib.core.references import strip_citations


def is_correct(answer: str, gold: Sequence[str]) -> bool:
    """Accuracy by containment (§3.3, as WebGLM): a normalised gold alias inside the normalised answer."""
    return bool(accuracy_contains(strip_citations(answer), list(gold)))
