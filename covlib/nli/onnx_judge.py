"""The trained cross-encoder on ONNX Runtime: its export, its int8 quantisation, and the judge that runs it.

`export_onnx(folder)` writes `<folder>/onnx/model.onnx` (fp32, torch.onnx's TorchScript exporter, batch and sequence
axes dynamic, checked against the torch model) and `model.int8.onnx` (onnxruntime's dynamic quantisation: int8
weights with a scale per output channel, activations quantised as it runs), each into a temporary file renamed into
place. Each file carries in its metadata (`MADE_FROM`) the content fingerprints of the config.json (labels) and
weights it was exported from: files made by the same `RECIPE` from the folder's own weights are kept ("up to date"),
whatever their modification times; an export copied in from another judge is stale, and `ONNXNLIJudge` refuses it
(`export_problem` says why). `ONNXNLIJudge` runs one of them with the torch judge's tokenisation, label mapping and
threshold; its `config` names the backend and the ONNX file's SHA-256, so its cache entries never mix with the torch
judge's (int8 probabilities differ from torch's by about 0.02 on average). That SHA-256 is taken once per judge and
kept: the session runs the very bytes it names, so a file re-exported while a judge lives never gets the old
session's outputs under its key (the judge keeps its old key; a new judge takes the new file's). `resolve_backend`
picks torch or ONNX for `load_trained_judge`: `backend=` or `COVLIB_NLI_BACKEND` ('auto', 'torch', 'onnx',
'onnx-int8', 'onnx-fp32').
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import logging
import os
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from covlib.core.cache import fingerprint_dir, fingerprint_file
from covlib.core.devices import cuda_available
from covlib.nli.base import ONNX_DIR
from covlib.nli.judges import check_unchanged, length_batches, map_nli_labels, pin_files, three_way

FILES = {"fp32": "model.onnx", "int8": "model.int8.onnx"}  # under <judge folder>/onnx/
BACKENDS = {"fp32": "onnx-fp32", "int8": "onnxruntime-int8"}  # what `config` and the judge's name say
DEFAULT_PRECISION = "int8"  # what backend 'onnx' (and 'auto') runs; why: docs/judges.md#the-onnx-backend
ONNX_BATCH = 8  # pairs per run: the fastest on a 2-core CPU (int8: 182 pairs/s at 1, 215 at 4, 210 at 8, 121 at 64)
BACKEND_ENV = "COVLIB_NLI_BACKEND"
BACKEND_CHOICES = ("auto", "torch", "onnx", "onnx-int8", "onnx-fp32")
WEIGHT_FILES = ("config.json", "model.safetensors", "pytorch_model.bin")  # what the export is made from
MADE_FROM = "covlib.made_from"  # ONNX metadata key: {weight file: SHA-256[:16]} of what the file was exported from
OPSET = 17
RECIPE = {"opset": OPSET, "int8": "dynamic, int8 weights per channel", "version": 1}  # a change re-exports
EXPORT_TOLERANCE = 1e-3  # the fp32 export's largest logit difference from torch that is accepted


def onnx_path(folder: str | Path, precision: str = DEFAULT_PRECISION) -> Path:
    """Where `export_onnx` writes a judge's ONNX file of this precision ('int8' or 'fp32')."""
    if precision not in FILES:
        raise ValueError(f"unknown ONNX precision {precision!r}; choose {sorted(FILES)}")
    return Path(folder) / ONNX_DIR / FILES[precision]


def onnxruntime_available() -> bool:
    """Whether onnxruntime can be imported (without importing it)."""
    return importlib.util.find_spec("onnxruntime") is not None


def _made_from(folder: Path) -> dict[str, str]:
    """The SHA-256 (first 16 hex digits) of each of the folder's `WEIGHT_FILES`: what an export is made from."""
    made = {f: fingerprint_file(folder / f)[:16] for f in WEIGHT_FILES if (folder / f).is_file()}
    if not made:
        raise FileNotFoundError(f"{folder} holds no model to export (none of {WEIGHT_FILES}): run `make judge`")
    return made


def _recorded(path: Path) -> dict[str, str] | None:
    """What an ONNX file says it was exported from (`MADE_FROM` in its metadata); None where it says nothing. Parsed
    once per path, size and modification time, as `fingerprint_file` hashes: a judge's load asks twice."""
    stat = path.stat()
    made = _recorded_at(str(path), stat.st_size, stat.st_mtime_ns)
    return dict(made) if made is not None else None


@functools.lru_cache(maxsize=16)
def _recorded_at(path: str, size: int, mtime_ns: int) -> dict[str, str] | None:
    import onnx

    props = {p.key: p.value for p in onnx.load(path, load_external_data=False).metadata_props}
    made = json.loads(props[MADE_FROM]) if MADE_FROM in props else None
    if made is not None and not isinstance(made, dict):
        raise ValueError(f"its {MADE_FROM} metadata is a JSON {type(made).__name__}, not an object")
    return made


def export_problem(folder: str | Path, precision: str = DEFAULT_PRECISION) -> str:
    """Why the folder's ONNX file of this precision is not an export of its own weights by `RECIPE` ('' if it is)."""
    folder = Path(folder)
    path, recipe = onnx_path(folder, precision), folder / ONNX_DIR / "recipe.json"
    redo = f"`python scripts/build_judge.py --onnx-only --name {folder.name}` or `nli.export_onnx('{folder}')`"
    if not path.is_file():
        return f"{path} is missing ({redo} writes it)"
    try:
        recorded = _recorded(path)
    except ImportError:
        raise
    except Exception as err:  # onnx's DecodeError and the like share no base class but Exception
        return (f"{path} cannot be read ({type(err).__name__}: {str(err)[:200]}): a file truncated, damaged or "
                f"written by another tool; {redo} exports it again")
    try:
        same_recipe = json.loads(recipe.read_text()) == RECIPE
    except (OSError, ValueError):
        same_recipe = False
    made = _made_from(folder)
    differ = sorted(f for f in set(made) | set(recorded or {}) if made.get(f) != (recorded or {}).get(f))
    cause = ("it was made by another export recipe than this covlib's" if not same_recipe
             else "it does not record which weights it was exported from" if recorded is None
             else f"it was exported from another model than the one in {folder} ({', '.join(differ)} differ: copied "
                  "from another judge, or the judge was retrained since)" if differ else "")
    return f"{path} is stale: {cause}; {redo} exports it again" if cause else ""


def onnx_up_to_date(folder: str | Path) -> bool:
    """Whether both ONNX files exist, follow `RECIPE` and were exported from the folder's weights (by content)."""
    return not any(export_problem(folder, precision) for precision in FILES)


def _stamp(path: Path, made: dict[str, str]) -> None:
    """Write into an ONNX file's metadata what it was exported from (`MADE_FROM`)."""
    import onnx

    model = onnx.load(str(path))
    onnx.helper.set_model_props(model, {MADE_FROM: json.dumps(made, sort_keys=True)})
    onnx.save(model, str(path))


@contextmanager
def _atomic(target: Path) -> Iterator[Path]:
    """A temporary path beside `target`, renamed onto it when the block succeeds, removed when it fails."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def export_onnx(folder: str | Path, force: bool = False) -> dict[str, Any]:
    """Write a judge's fp32 and int8 ONNX files unless up to date: {'fp32': path, 'int8': path, 'written': bool}."""
    folder = Path(folder)
    made = _made_from(folder)
    fp32, int8 = onnx_path(folder, "fp32"), onnx_path(folder, "int8")
    if not force and onnx_up_to_date(folder):
        return {"fp32": fp32, "int8": int8, "written": False}
    with _atomic(fp32) as tmp:
        _export_fp32(folder, tmp)
        _stamp(tmp, made)
    with _atomic(int8) as tmp:
        _quantise(fp32, tmp)
        _stamp(tmp, made)
    with _atomic(folder / ONNX_DIR / "recipe.json") as tmp:
        tmp.write_text(json.dumps(RECIPE, indent=2))
    return {"fp32": fp32, "int8": int8, "written": True}


def _export_fp32(folder: Path, target: Path) -> None:
    """torch.onnx's TorchScript exporter (no onnxscript needed), then a check of its logits against torch's."""
    import inspect

    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder, attn_implementation="eager").eval()
    sample = tokenizer(["The Nile flows north into the Mediterranean, past Cairo.", "Paris is in France."],
                       ["The Nile ends in the sea.", "Paris is a city."], padding=True, return_tensors="pt")
    names = [p for p in inspect.signature(model.forward).parameters if p in sample]  # positional order
    axes = {name: {0: "batch", 1: "sequence"} for name in names}
    with warnings.catch_warnings(), torch.inference_mode():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation and tracer notes
        torch.onnx.export(model, tuple(sample[n] for n in names), str(target), input_names=names,
                          output_names=["logits"], dynamic_axes={**axes, "logits": {0: "batch"}},
                          opset_version=OPSET, dynamo=False)
        expected = model(**sample).logits.numpy()
    session = _session(target, threads=1)
    got = session.run(["logits"], {n: sample[n].numpy() for n in names})[0]
    gap = float(np.abs(got - expected).max())
    if gap > EXPORT_TOLERANCE:
        raise RuntimeError(f"the ONNX export of {folder} differs from the torch model by {gap:.2g} in a logit "
                           f"(> {EXPORT_TOLERANCE}); not written")


def _quantise(source: Path, target: Path) -> None:
    """onnxruntime's dynamic quantisation: weights to int8 with a scale per output channel (one scale per tensor
    changed 8% of the fixture's labels), activations quantised at run time; no pre-processing (its shape inference
    fails on this graph, and it changed neither speed nor labels)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)  # its advice to pre-process, logged on the root logger
    try:
        quantize_dynamic(str(source), str(target), weight_type=QuantType.QInt8, per_channel=True)
    finally:
        logging.disable(previous)


def cores() -> int:
    """The CPU cores this process may use (its affinity where the system tells it)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _session(model: Path | bytes, threads: int | None = None, path: Path | None = None) -> Any:
    """An ONNX Runtime CPU session of a file, or of the bytes of the file `path` (what `ONNXNLIJudge` hashed: no
    external data); a file ONNX Runtime cannot read (truncated, damaged) is an error naming it and the rebuild."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or cores()
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3  # errors only
    try:
        return ort.InferenceSession(model if isinstance(model, bytes) else str(model), options,
                                    providers=["CPUExecutionProvider"])
    except Exception as err:  # onnxruntime's InvalidProtobuf, InvalidGraph, Fail, ... share no base class but Exception
        raise RuntimeError(f"ONNX Runtime cannot load {path or (model if isinstance(model, Path) else 'the ONNX bytes')} "
                           f"({type(err).__name__}: {str(err)[:300]}); a file truncated, damaged or written for another "
                           "ONNX Runtime is rebuilt by `python scripts/build_judge.py --onnx-only` (or `make judge`)") from err


def resolve_backend(folder: str | Path, backend: str | None = None, device: str | None = None) -> tuple[str, str]:
    """('torch' | 'onnx-int8' | 'onnx-fp32', a note or '') for a trained judge's folder.

    `backend` (else `COVLIB_NLI_BACKEND`, else 'auto'): 'auto' runs ONNX where onnxruntime is installed, the file is
    an export of the folder's weights (`export_problem`) and the device is the CPU (a GPU runs torch), and torch
    otherwise, with a note saying why; 'onnx' runs DEFAULT_PRECISION; a forced ONNX backend that cannot run raises.
    """
    chosen = (backend or os.environ.get(BACKEND_ENV) or "auto").strip().lower()
    if chosen not in BACKEND_CHOICES:
        raise ValueError(f"unknown NLI backend {chosen!r} (backend= or {BACKEND_ENV}); choose {BACKEND_CHOICES}")
    if chosen == "torch" or (chosen == "auto" and (device not in (None, "cpu") or (device is None and cuda_available()))):
        return "torch", ""
    precision = DEFAULT_PRECISION if chosen in ("auto", "onnx") else chosen.split("-")[1]
    problem = ("onnxruntime is not installed (`pip install onnxruntime`)" if not onnxruntime_available()
               else f"the ONNX backend runs on the CPU, not {device!r}" if device not in (None, "cpu")
               else export_problem(folder, precision))
    if problem and chosen != "auto":
        raise RuntimeError(f"NLI backend {chosen!r} cannot run: {problem}")
    return ("torch", f"runs on torch, not ONNX Runtime: {problem}") if problem else (f"onnx-{precision}", "")


class ONNXNLIJudge:
    """A trained sequence-classification judge exported by `export_onnx`, run by ONNX Runtime on the CPU.

    The same tokenisation (premise first, longest-first truncation to `max_length`), length-sorted batches,
    label mapping (`map_nli_labels` of config.json's id2label) and threshold as `HFNLIJudge` on that folder.
    Its cache key is pinned, not re-read: the folder's and the ONNX file's fingerprints are taken at its first key
    or its load, whichever comes first, and kept for its life; the session is made from the bytes that were hashed,
    and a judge whose files changed between its first key and its load refuses to load, as does one whose ONNX file
    was not exported from the folder's own weights and labels (an `onnx/` copied from another judge). A file replaced
    on disk (`build_judge.py --onnx-only` while a kernel holds the judge) is not reloaded: load a new judge to run it.
    """

    def __init__(self, folder: str | Path, precision: str = DEFAULT_PRECISION, batch_size: int = ONNX_BATCH,
                 max_length: int = 512, labels: dict[int, str] | None = None, name: str | None = None,
                 threshold: float | None = None, threads: int | None = None):
        self.folder = Path(folder)
        self.path = onnx_path(self.folder, precision)
        if not self.path.is_file():
            raise FileNotFoundError(f"no ONNX export at {self.path}: `python scripts/build_judge.py --onnx-only` "
                                    "(or `make judge`) writes it")
        if batch_size < 1 or max_length < 8:
            raise ValueError(f"batch_size must be >= 1 and max_length >= 8, got {batch_size} and {max_length}")
        self.precision, self.backend = precision, BACKENDS[precision]
        self.batch_size, self.max_length, self.labels, self.threads = batch_size, max_length, labels, threads
        self.threshold = threshold  # entailed when P(entailment) > threshold; None: the argmax label
        self.device = "cpu"
        self.name = name or f"{self.folder.name} ({self.backend})"
        self._session = None
        self._tokenizer = None
        self._inputs: list[str] = []
        self._mapping = map_nli_labels(labels or json.loads((self.folder / "config.json").read_text())["id2label"])

    @property
    def config(self) -> dict[str, Any]:
        """What, besides the name, changes the output: the backend, tokenisation, the weights and the ONNX file
        (the two fingerprints pinned at the judge's first key or load)."""
        files, onnx = self._fingerprints()
        return {"backend": self.backend, "max_length": self.max_length, "labels": self.labels,
                "files": files, "onnx": onnx}

    def _fingerprints(self) -> tuple[str | None, str]:
        """(the folder's fingerprint, onnx/ aside; the ONNX file's SHA-256[:16]), taken once (`pin_files`) and only
        for an ONNX file exported from the folder's own weights and labels (`export_problem`)."""
        return pin_files(self, self._checked_fingerprints)

    def _checked_fingerprints(self) -> tuple[str | None, str]:
        problem = export_problem(self.folder, self.precision)
        if problem:
            raise RuntimeError(f"the ONNX judge of {self.folder} cannot run {self.path.name}: {problem}")
        return fingerprint_dir(self.folder, exclude=(ONNX_DIR,)), fingerprint_file(self.path)[:16]

    @property
    def mapping(self) -> dict[int, str]:
        """Class id -> NLI label."""
        return dict(self._mapping)

    @property
    def two_label(self) -> bool:
        """Whether the model is entailment / not_entailment only."""
        return "not_entailment" in self._mapping.values()

    def _load(self) -> None:
        if self._session is not None:
            return
        from transformers import AutoTokenizer

        pinned = self._fingerprints()  # the key's files: the session is made from bytes checked against it
        model = self.path.read_bytes()
        tokenizer = AutoTokenizer.from_pretrained(self.folder)
        loaded = (fingerprint_dir(self.folder, exclude=(ONNX_DIR,)), hashlib.sha256(model).hexdigest()[:16])
        check_unchanged(self.path, pinned, loaded)
        self._tokenizer, self._session = tokenizer, _session(model, self.threads, self.path)
        self._inputs = [i.name for i in self._session.get_inputs()]

    def probabilities(self, premises: list[str], hypotheses: list[str]) -> np.ndarray:
        """(N, 3) entailment/neutral/contradiction probabilities, in batches of similar length (less padding)."""
        self._load()
        probs = np.zeros((len(premises), len(self._mapping)))
        for idx in length_batches(premises, hypotheses, self.batch_size):
            enc = self._tokenizer([premises[i] for i in idx], [hypotheses[i] for i in idx], truncation=True,
                                  max_length=self.max_length, padding=True, return_tensors="np")
            logits = self._session.run(["logits"], {n: enc[n].astype(np.int64) for n in self._inputs})[0]
            z = logits.astype(np.float64) - logits.max(axis=1, keepdims=True)
            probs[idx] = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
        return three_way(probs, self._mapping)
