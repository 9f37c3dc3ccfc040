"""The papers' models' shapes as data (covlib.generation.shapes): each count is what its shape builds."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM, LlamaConfig

from covlib.generation import embedded_model_dir
from covlib.generation.shapes import SHAPES, Shape, known_shape


def built(shape: Shape) -> int:
    """The parameters of a LLaMA-family decoder of `shape`, built on the meta device."""
    cfg = LlamaConfig(num_hidden_layers=shape.layers, hidden_size=shape.width, num_attention_heads=shape.heads,
                      num_key_value_heads=shape.kv_heads, vocab_size=shape.vocabulary, intermediate_size=shape.ffn,
                      tie_word_embeddings=shape.tied)
    with torch.device("meta"):
        return sum(p.numel() for p in AutoModelForCausalLM.from_config(cfg).parameters())


@pytest.mark.parametrize("hub_id", [h for h in SHAPES if not h.startswith("thudm/")])
def test_each_llama_family_shape_builds_its_count(hub_id):
    assert built(SHAPES[hub_id]) == SHAPES[hub_id].parameters


def test_chatglm2s_count_is_its_layers_sum():
    s = SHAPES["thudm/chatglm2-6b"]
    head = s.width // s.heads
    qkv = s.width * (s.width + 2 * s.kv_heads * head) + s.width + 2 * s.kv_heads * head  # with its bias
    layer = qkv + s.width * s.width + s.width * 2 * s.ffn + s.ffn * s.width + 2 * s.width
    assert s.layers * layer + s.width + 2 * s.vocabulary * s.width == s.parameters  # 6.24B, its card's


def test_the_embedded_models_shape_is_its_configs():
    cfg = AutoConfig.from_pretrained(embedded_model_dir())
    s = known_shape("")
    assert (s.layers, s.width, s.heads, s.kv_heads, s.vocabulary, s.ffn, s.tied) == (
        cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.vocab_size,
        cfg.intermediate_size, cfg.tie_word_embeddings)
    assert known_shape("HuggingFaceTB/SmolLM2-135M-Instruct") is s and known_shape("someone/else") is None
