"""What every NLI judge module shares: the three labels, the `Judge` protocol, the verdict on an empty pair.

A judge returns, per (premise, hypothesis) pair, three probabilities in `LABELS` order summing to 1.
`two_label` tells the judges that only separate entailment from not-entailment (TRUE, two-label
classifiers), whose not-entailment mass is split over the last two columns; `JUDGE_CHOICES` is the
list of judge specs that error messages offer.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

LABELS = ("entailment", "neutral", "contradiction")
EMPTY_PAIR = (0.0, 1.0, 0.0)  # what a pair with an empty premise or hypothesis is judged
ONNX_DIR = "onnx"  # the subfolder of a trained judge holding its ONNX exports (covlib.nli.onnx_judge)
JUDGE_CHOICES = "'minilm-fever-nli' (after `make judge`), 'overlap', 'llm', 'llm:<model>', 'true', an HF NLI model id " \
    "'owner/name' or a local model folder"


class Judge(Protocol):
    """What `probabilities` needs from a backend."""

    name: str

    @property
    def config(self) -> dict[str, Any]: ...

    def probabilities(self, premises: list[str], hypotheses: list[str]) -> np.ndarray: ...


def two_label(judge: Judge) -> bool:
    """Whether the judge only tells entailment from not-entailment (TRUE, 2-label classifiers)."""
    return bool(getattr(judge, "two_label", False))
