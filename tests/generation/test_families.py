"""The in-process decoder against transformers' own `generate`, family by family: tiny random models (2 layers, width 64,
seeded, float32, the embedded tokenizer) of each architecture, three prompts that share a few-shot block and are longer
than the short sliding windows, 12 greedy tokens, through `LM.generate` on each path (dynamic; fixed shapes, the CUDA
graphs' step run eagerly on the CPU; each with and without the shared prefix). A family the decoder's fast paths cannot
run exactly takes the plain path (`lm.engine.reasons` says why): the completions are transformers' either way."""

from __future__ import annotations

import pytest

from covlib import generation as lm_mod
from covlib.core.cache import Cache

WINDOW = 8  # a sliding window shorter than every prompt (and than the shared block)
BLOCK = ("Answer each question with a short phrase. Q: Which river flows through Paris? A: The Seine.\n"
         "Q: Who painted the Mona Lisa? A: Leonardo da Vinci.\n")
PROMPTS = [BLOCK + "Q: Who wrote Hamlet? A:", BLOCK + "Q: What is the capital city of Italy, in Europe? A:",
           BLOCK + "Q: Why? A:"]
NEW_TOKENS = 12
SIZES = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             head_dim=16, max_position_embeddings=512)
# family -> (model type, config beyond SIZES); GPT-2 names its sizes its own way
FAMILIES = {
    "llama": ("llama", {}),
    "mistral-window": ("mistral", {"sliding_window": WINDOW}),
    "qwen2": ("qwen2", {}),
    "qwen3": ("qwen3", {}),
    "gemma2-window": ("gemma2", {"sliding_window": WINDOW, "query_pre_attn_scalar": 16}),
    "gemma3-window": ("gemma3_text", {"sliding_window": WINDOW, "query_pre_attn_scalar": 16}),
    "phi3": ("phi3", {}),
    "gpt2": ("gpt2", {"n_embd": 64, "n_layer": 2, "n_head": 4, "n_inner": 128, "n_positions": 512}),
}
PATHS = {"dynamic": (False, False), "dynamic+prefix": (False, True), "fixed": (True, False), "fixed+prefix": (True, True)}


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(lm_mod.embedded_model_dir())
    tok.padding_side = "left"
    tok.pad_token = tok.pad_token or tok.eos_token
    return tok


_BUILT: dict[str, tuple] = {}


def _family(name: str, tok) -> tuple:
    """(model, transformers' greedy tokens per prompt) of family `name`, built once per test session."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    if name not in _BUILT:
        model_type, extra = FAMILIES[name]
        sizes = {} if model_type == "gpt2" else SIZES
        ids = dict(vocab_size=len(tok), bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                   pad_token_id=tok.pad_token_id)
        config = AutoConfig.for_model(model_type, **sizes, **ids, **extra)
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
        _BUILT[name] = model, [_reference(model, tok, p) for p in PROMPTS]
    return _BUILT[name]


def _reference(model, tok, prompt: str) -> list[str]:
    """transformers' own greedy continuation of `prompt` alone, up to its first EOS."""
    import torch

    ids = tok(prompt, add_special_tokens=False, return_tensors="pt").input_ids
    with torch.inference_mode():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=NEW_TOKENS, do_sample=False,
                             eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    new = out[0, ids.shape[1]:].tolist()
    new = new[: new.index(tok.eos_token_id)] if tok.eos_token_id in new else new
    return tok.convert_ids_to_tokens(new)


def test_the_prompts_share_a_block_and_outgrow_the_window(tokenizer):
    lengths = [len(tokenizer(p, add_special_tokens=False).input_ids) for p in PROMPTS]
    own = [n - len(tokenizer(BLOCK, add_special_tokens=False).input_ids) for n in lengths]
    assert min(lengths) > 3 * WINDOW and len(set(own)) == 3  # rows of different lengths: padding in each batch


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("family", FAMILIES)
def test_greedy_completions_are_transformers_own(family, path, tokenizer, tmp_path):
    model, expected = _family(family, tokenizer)
    lm = lm_mod.LM(cache=Cache(tmp_path / "calls.sqlite", table="lm"), device="cpu", dtype="float32", batch_size=2)
    lm._tok, lm._model = tokenizer, model
    lm.cuda_graphs, lm.share_prefix = PATHS[path]
    got = [c[0].tokens for c in lm.generate(PROMPTS, max_new_tokens=NEW_TOKENS, progress=False)]
    wrong = [i for i, (a, b) in enumerate(zip(got, expected)) if a != b]
    assert not wrong, f"{family} on the {path} path: prompts {wrong} differ from transformers' generate"
