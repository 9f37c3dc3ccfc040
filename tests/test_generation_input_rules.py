"""Input rules of the in-process generator (covlib.generation): changed weights, empty prompts, stop strings, decoding values, missing model folders."""

from __future__ import annotations


import numpy as np
import pytest

from covlib import nli
from covlib import retrieval as R
from covlib.core.cache import Cache, make_key



def test_local_model_overwritten_gets_fresh_completions(tmp_path):
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from covlib.generation import LM, embedded_model_dir

    tok = AutoTokenizer.from_pretrained(embedded_model_dir())
    folder = tmp_path / "tiny-llama"

    def write_weights(seed: int) -> None:
        torch.manual_seed(seed)
        config = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                             num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=128)
        LlamaForCausalLM(config).save_pretrained(folder)
        tok.save_pretrained(folder)

    cache = Cache(tmp_path / "calls.sqlite", table="lm")
    write_weights(0)
    first = LM(str(folder), cache=cache, device="cpu").generate(["Hello there"], max_new_tokens=8, progress=False)
    write_weights(1)
    retrained = LM(str(folder), cache=cache, device="cpu")
    again = retrained.generate(["Hello there"], max_new_tokens=8, progress=False)
    assert retrained.forward_calls > 0, "new weights under the same folder were served the old cached text"
    assert again[0][0].tokens != first[0][0].tokens
    same = LM(str(folder), cache=cache, device="cpu")
    assert same.generate(["Hello there"], max_new_tokens=8, progress=False) == again and same.forward_calls == 0


def test_empty_prompt_is_refused_and_nothing_cached(lm):
    before = len(lm.cache)
    for prompts in (["", "The capital of Italy is"], [""]):
        with pytest.raises(ValueError, match="prompt 0 is empty"):
            lm.generate(prompts, max_new_tokens=8, progress=False)
    assert len(lm.cache) == before
    assert lm.generate(["\n"], max_new_tokens=4, progress=False)[0][0].tokens  # whitespace is a token: fine


def test_one_stop_string(lm):
    prompt = ["Question: What is the capital of France?\nAnswer: Paris.\nQuestion: What is the capital of Italy?\nAnswer:"]
    as_string = lm.generate(prompt, max_new_tokens=24, stop="Question:", progress=False)[0][0]
    as_list = lm.generate(prompt, max_new_tokens=24, stop=["Question:"], progress=False)[0][0]
    assert as_string == as_list and len(as_string.text) > 3


def test_bad_decoding_values_and_prompts(lm):
    from covlib.generation import check_prompts
    from tests.scripted import ScriptedGenerator

    for kwargs in ({"temperature": float("nan")}, {"temperature": float("inf")}, {"top_p": float("nan")}):
        with pytest.raises(ValueError, match="finite temperature"):
            lm.generate(["Hi"], progress=False, **kwargs)
    with pytest.raises(ValueError, match=r"prompt 1 is not valid Unicode text \(surrogates not allowed"):
        lm.generate(["fine", "lone \ud800 surrogate"], progress=False)
    with pytest.raises(TypeError, match="prompt 0 is NoneType, not str"):
        lm.generate([None], progress=False)
    with pytest.raises(TypeError, match="continuation 0 is int"):
        lm.score(["a"], [3], progress=False)
    with pytest.raises(TypeError, match="stop must be a string or a list of strings"):
        lm.generate(["Hi"], stop=[None], progress=False)
    with pytest.raises(ValueError, match="prompt 0 is empty"):  # the tests' scripted generator keeps the same rules
        ScriptedGenerator({}).generate([""])
    assert check_prompts(np.array(["a", "b"]), "generate") == ["a", "b"]  # any iterable of strings
    assert make_key(prompt="\ud800") != make_key(prompt="\ud801")  # the cache key itself never crashes
    with pytest.raises(ValueError, match=r"probabilities\(\): hypothesis 0 is not valid Unicode"):
        nli.probabilities(["a"], ["\ud800"], judge="overlap")
    with pytest.raises(TypeError, match=r"top_sentences_batch\(\) takes a list of queries"):
        R.top_sentences_batch("q", [["a."]])


def test_missing_local_model_folder_is_not_a_hub_lookup(tmp_path):
    from covlib.generation import LM

    with pytest.raises(FileNotFoundError, match="does not exist, and it is not a hub id"):
        LM(str(tmp_path / "models" / "mine"))
