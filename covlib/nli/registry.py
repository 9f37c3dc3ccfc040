"""Which judge a spec names: `load_judge(spec, device)`, `get_judge`, and the offline defaults.

`judge=None` means `offline_judge()`: `DEFAULT_JUDGE`, the cross-encoder `make judge` trains on FEVER
(`load_trained_judge`, with the decision threshold its card.json may carry; run by ONNX Runtime, int8, once
exported, `covlib.nli.onnx_judge`), or `FALLBACK_JUDGE`, the overlap heuristic, where it is not built. `device`
goes to every judge that runs a model (the trained and HF judges, TRUE, the LLM judge's generator); it never
enters a cache key.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

from covlib.core import paths
from covlib.generation import EMBEDDED, load_lm
from covlib.nli.base import JUDGE_CHOICES, Judge
from covlib.nli.judges import HFNLIJudge, LLMJudge, TrueT5Judge
from covlib.nli.onnx_judge import BACKENDS, ONNX_BATCH, ONNXNLIJudge, resolve_backend
from covlib.nli.overlap import OverlapJudge

TRAINED_JUDGE = "minilm-fever-nli"  # the cross-encoder `make judge` trains on FEVER (covlib.nli.pairs)
# The judge `judge=None` means offline: the one whose own entailment decision (`entailed`) best agrees with
# the labels of the key-fact pairs (labelled by AI coding agents; F1 of "entailed", notebook 00b): the trained
# judge, 59.6 against the overlap heuristic's 46.3 (paired difference +13.3 [2.9, 23.1]); see docs/judges.md.
DEFAULT_JUDGE = TRAINED_JUDGE
FALLBACK_JUDGE = "overlap"  # what judge=None gets where `make judge` has not built DEFAULT_JUDGE (a fresh clone, CI)


def trained_judge_dir(name: str = TRAINED_JUDGE) -> Path:
    """Folder of a judge built by `make judge` (scripts/build_judge.py) under the models folder."""
    return paths.models_dir() / name


def offline_judge() -> str:
    """The judge `judge=None` means (smoke runs and grading too): DEFAULT_JUDGE once `make judge` built it, else
    FALLBACK_JUDGE. Every result and every credibility table names the judge that ran."""
    return DEFAULT_JUDGE if (trained_judge_dir(DEFAULT_JUDGE) / "config.json").is_file() else FALLBACK_JUDGE


def load_trained_judge(name: str = TRAINED_JUDGE, device: str | None = None, batch_size: int | None = None,
                       backend: str | None = None) -> HFNLIJudge | ONNXNLIJudge:
    """The cross-encoder trained offline on FEVER by `make judge`, on ONNX Runtime (int8) where it was exported and
    onnxruntime is installed, else on torch; `backend` (else $COVLIB_NLI_BACKEND) forces 'torch', 'onnx',
    'onnx-int8' or 'onnx-fp32'. Named `name` (the torch path) or `name (<backend>)` in every cache key and result.
    `batch_size` defaults to each backend's fastest measured on a 2-core CPU (torch 64, as ever; ONNX 8)."""
    folder = trained_judge_dir(name)
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(
            f"the trained NLI judge {name!r} is not built (no {folder / 'config.json'}): run `make judge` "
            "(about 25 min on a 2-core CPU), or pick another judge: 'overlap', 'llm', 'true' or an HF NLI model id"
        )
    threshold = _card_threshold(folder)
    chosen, note = resolve_backend(folder, backend, device)
    if note:
        warnings.warn(f"{name}: {note}", stacklevel=2)
    if chosen == "torch":
        return HFNLIJudge(folder, device=device, batch_size=batch_size or 64, max_length=256, name=name,
                          threshold=threshold)
    precision = chosen.split("-")[1]
    return ONNXNLIJudge(folder, precision=precision, batch_size=batch_size or ONNX_BATCH, max_length=256,
                        name=f"{name} ({BACKENDS[precision]})", threshold=threshold)


def _card_threshold(folder: Path) -> float | None:
    """The decision threshold `make judge` calibrated and wrote to the judge's card.json (None: argmax)."""
    card = folder / "card.json"
    value = json.loads(card.read_text()).get("decision_threshold") if card.is_file() else None
    if value is not None and not (isinstance(value, (int, float)) and 0 < value < 1):
        raise ValueError(f"{card}: decision_threshold must be a number in (0, 1), got {value!r}")
    return None if value is None else float(value)


NAMED = {"trained": (TRAINED_JUDGE, "trained"), "overlap": ("overlap", "approx", "approx-overlap"),
         "true": ("true", "t5-true", "true-t5")}  # the spellings of the judges known by name


def check_judge(spec: str) -> str:
    """The kind of judge a spec names ('trained', 'overlap', 'llm', 'true', 'folder', 'hub'), loading nothing: a
    notebook checks its `judge` parameter with it before any generation. Raises for a spec that names no judge."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"empty judge spec {spec!r}; choose {JUDGE_CHOICES}")
    spec = spec.strip()
    low = spec.lower()
    kind = next((k for k, names in NAMED.items() if low in names), None)
    if kind:
        return kind
    if "/" not in spec and (trained_judge_dir(spec) / "card.json").is_file():
        return "trained"  # any judge build_judge.py wrote in the models folder, by name
    if low == "llm" or low.startswith("llm:"):
        return "llm"
    if Path(spec).expanduser().is_dir():
        return "folder"
    if "/" in spec and paths.is_hub_id(spec):
        return "hub"
    if Path(spec).expanduser().exists():
        raise ValueError(f"judge spec {spec!r} is a file; a local judge is a model folder. Choose {JUDGE_CHOICES}")
    if "/" in spec or "\\" in spec or spec.startswith((".", "~")):
        raise FileNotFoundError(f"judge folder {spec!r} does not exist (and it is not a hub id `owner/name`)")
    raise ValueError(f"unknown judge {spec!r}; choose {JUDGE_CHOICES}")


def load_judge(spec: str, device: str | None = None) -> Judge:
    """The judge a spec names ('minilm-fever-nli', 'overlap', 'llm[:<model>]', 'true', an HF model id/dir), on `device`."""
    kind = check_judge(spec)
    spec = spec.strip()
    if kind == "trained":
        return load_trained_judge(TRAINED_JUDGE if spec.lower() in NAMED["trained"] else spec, device=device)
    if kind == "overlap":
        return OverlapJudge()
    if kind == "llm":
        model = spec.split(":", 1)[1] if ":" in spec else EMBEDDED
        return LLMJudge(load_lm(model, device=device))
    if kind == "true":
        return TrueT5Judge(device=device)
    return HFNLIJudge(str(Path(spec).expanduser()) if kind == "folder" else spec, device=device)


def get_judge(judge: Judge | str | None = None, device: str | None = None) -> Judge:
    """Resolve None (-> `offline_judge()`: DEFAULT_JUDGE, or FALLBACK_JUDGE until it is built), a spec (loaded on
    `device`), or a judge (returned as it is)."""
    if judge is None:
        return load_judge(offline_judge(), device=device)
    if isinstance(judge, str):
        return load_judge(judge, device=device)
    return judge
