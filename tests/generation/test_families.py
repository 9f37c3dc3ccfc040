"""The in-process decoder against transformers' own `generate`, family by family: tiny random models (2 layers, width 64,
seeded, float32, the embedded tokenizer) of each architecture, three prompts that share a few-shot block and are longer
than the short sliding windows, 12 greedy tokens, through `LM.generate` on each path (dynamic; fixed shapes, the CUDA
graphs' step run eagerly on the CPU; each with and without the shared prefix). A fast path that is not exact for a
family's cache layers is not taken (`lm.engine.reasons` says why): the completions are transformers' either way.
Gemma-2 and Gemma-3 run: their full-attention layers in place, their sliding-window layers in transformers' own cache.
A family with cache layers the decoder was not checked on (LFM2's convolutions) is refused before any forward."""

from __future__ import annotations

import pytest

from covlib import generation as lm_mod
from covlib.core.cache import Cache
from covlib.generation.engine import CASCADE

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
    "mistral": ("mistral", {"sliding_window": None}),
    "mistral-window": ("mistral", {"sliding_window": WINDOW}),
    "qwen2": ("qwen2", {}),
    "qwen3": ("qwen3", {}),
    "gemma2-window": ("gemma2", {"sliding_window": WINDOW, "query_pre_attn_scalar": 16}),
    "gemma3-window": ("gemma3_text", {"sliding_window": WINDOW, "query_pre_attn_scalar": 16}),
    "phi3": ("phi3", {}),
    "gpt2": ("gpt2", {"n_embd": 64, "n_layer": 2, "n_head": 4, "n_inner": 128, "n_positions": 512}),
}
PATHS = {"dynamic": (False, False), "dynamic+prefix": (False, True), "fixed": (True, False), "fixed+prefix": (True, True)}
ALL = {"in_place", "fixed", "share_prefix", "cascade"}
# the fast paths each family's engine takes when asked: all of them on full attention (cascade attention where it was
# checked); a sliding window keeps its layers in transformers' cache, at dynamic shapes, each prompt prefilled whole
FAST = {"llama": ALL, "mistral": ALL, "qwen2": ALL, "qwen3": ALL, "phi3": ALL, "gpt2": ALL - {"cascade"},
        "mistral-window": set(), "gemma2-window": {"in_place"}, "gemma3-window": set()}


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(lm_mod.embedded_model_dir())
    tok.padding_side = "left"
    tok.pad_token = tok.pad_token or tok.eos_token
    return tok


_BUILT: dict[str, tuple] = {}


def _model(model_type: str, tok, **config):
    """A random tiny causal LM of `model_type` (seeded, float32, eval mode) over the tokenizer `tok`."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    ids = dict(vocab_size=len(tok), bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
               pad_token_id=tok.pad_token_id)
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **ids, **config), dtype=torch.float32).eval()


def _family(name: str, tok) -> tuple:
    """(model, transformers' greedy tokens per prompt) of family `name`, built once per test session."""
    if name not in _BUILT:
        model_type, extra = FAMILIES[name]
        model = _model(model_type, tok, **({} if model_type == "gpt2" else SIZES), **extra)
        _BUILT[name] = model, [_reference(model, tok, p) for p in PROMPTS]
    return _BUILT[name]


def _lm(tmp_path, tok, model):
    """covlib's in-process `LM` with `model` injected (the tests' tiny models have no folder to load)."""
    lm = lm_mod.LM(cache=Cache(tmp_path / "calls.sqlite", table="lm"), device="cpu", dtype="float32", batch_size=2)
    lm._tok, lm._model = tok, model
    return lm


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
    lm = _lm(tmp_path, tokenizer, model)
    lm.cuda_graphs, lm.share_prefix = fixed, share = PATHS[path]
    engine = lm.engine
    asked = ALL - ({"fixed"} if not fixed else set()) - ({"share_prefix", "cascade"} if not share else set())
    taken = {p for p in ALL if getattr(engine, p)}
    assert taken == FAST[family] & asked and set(engine.reasons) == ALL - taken, engine.reasons
    got = [c[0].tokens for c in lm.generate(PROMPTS, max_new_tokens=NEW_TOKENS, progress=False)]
    wrong = [i for i, (a, b) in enumerate(zip(got, expected)) if a != b]
    assert not wrong, f"{family} on the {path} path: prompts {wrong} differ from transformers' generate"
    assert (model.config._attn_implementation == CASCADE) >= ("cascade" in taken)  # cascade attention did run


def test_cache_layers_the_decoder_was_not_checked_on_are_refused_before_any_forward(tokenizer, tmp_path):
    model = _model("lfm2", tokenizer, **SIZES, layer_types=["conv", "full_attention"])
    lm = _lm(tmp_path, tokenizer, model)
    with pytest.raises(ValueError, match=r"lfm2: cache layers \['LinearAttentionLayer'\]: the in-process decoder runs"):
        lm.generate(PROMPTS[:1], max_new_tokens=NEW_TOKENS, progress=False)
    assert lm.forward_calls == 0
