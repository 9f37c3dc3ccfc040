"""The shapes of the papers' models and the embedded one, as data: a run's plan prices them without the hub.

Each is read off the model's `config.json` (layers, width, attention heads, vocabulary, feed-forward width, whether
the output layer shares the embedding's weights) and its parameter count from those; `tests/generation/test_shapes.py`
builds each LLaMA-family shape on the meta device and sums ChatGLM2's layers by hand, and checks the count. Any other model's shape is read from its config (a
folder, or the hub once, where the hub can be reached).
"""

from __future__ import annotations

from dataclasses import dataclass

from covlib.generation.embedded import EMBEDDED_MODEL


@dataclass(frozen=True)
class Shape:
    """A decoder's shape, from its config.json."""

    layers: int
    width: int  # hidden size
    heads: int  # attention heads (queries)
    kv_heads: int  # key/value heads
    vocabulary: int
    ffn: int  # the feed-forward layer's inner width
    tied: bool  # the output layer is the embedding's weights
    parameters: int  # in all


LLAMA_7B = Shape(32, 4096, 32, 32, 32000, 11008, False, 6_738_415_616)  # LLaMA-1/2 7B and the Vicunas on them
LLAMA_13B = Shape(40, 5120, 40, 40, 32000, 13824, False, 13_015_864_320)
SHAPES: dict[str, Shape] = {  # by hub id in lower case
    "huggyllama/llama-7b": LLAMA_7B,
    "meta-llama/llama-2-7b-hf": LLAMA_7B,  # the README's examples
    "meta-llama/llama-2-7b-chat-hf": LLAMA_7B,
    "lmsys/vicuna-7b-v1.3": LLAMA_7B,
    "huggyllama/llama-13b": LLAMA_13B,
    "meta-llama/llama-2-13b-hf": LLAMA_13B,
    "meta-llama/llama-2-13b-chat-hf": LLAMA_13B,
    "lmsys/vicuna-13b-v1.3": LLAMA_13B,
    "lmsys/vicuna-13b-v1.5": LLAMA_13B,
    # ChatGLM2 (GLM, not LLaMA): 2 key/value groups of 128 channels, padded vocabulary, biases on the QKV projection
    "thudm/chatglm2-6b": Shape(28, 4096, 32, 2, 65024, 13696, False, 6_243_584_000),
    EMBEDDED_MODEL.lower(): Shape(30, 576, 9, 3, 49152, 1536, True, 134_515_008),
}


def known_shape(model: str) -> Shape | None:
    """The shape of `model` ('' the embedded one, a hub id) when it is one of the papers', else None."""
    return SHAPES.get((model or EMBEDDED_MODEL).lower())
