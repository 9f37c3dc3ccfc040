"""The key/value cache written in place (covlib.generation.kvcache): the same keys and values as transformers'
`DynamicCache`, without a copy of the whole cache per step, and the same completions."""

from __future__ import annotations

import pytest

from covlib import generation as lm_mod
from covlib.core.cache import Cache
from covlib.generation import decoding
from covlib.generation.kvcache import GROW, in_place_layer, reserve


def _cache(batch: int = 3, length: int = 5, layers: int = 2):
    import torch
    from transformers import DynamicCache

    torch.manual_seed(0)
    kv = DynamicCache()
    for i in range(layers):
        kv.update(torch.randn(batch, 2, length, 4), torch.randn(batch, 2, length, 4), i)
    return kv


def _steps(kv, steps: int, batch: int = 3):
    import torch

    torch.manual_seed(1)
    for _ in range(steps):
        for i in range(len(kv.layers)):
            kv.update(torch.randn(batch, 2, 1, 4), torch.randn(batch, 2, 1, 4), i)
    return kv


def test_a_reserved_cache_holds_what_a_dynamic_cache_holds_and_writes_each_step_in_place():
    import torch

    plain, reserved = _steps(_cache(), 4), _steps(reserve(_cache(), 4), 0)
    buffers = [layer.buffers[0].data_ptr() for layer in reserved.layers]
    reserved = _steps(reserved, 4)
    assert all(isinstance(layer, in_place_layer()) for layer in reserved.layers)
    assert [layer.buffers[0].data_ptr() for layer in reserved.layers] == buffers  # no new buffer: written in place
    for a, b in zip(plain.layers, reserved.layers):
        assert torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)
    assert reserved.get_seq_length() == plain.get_seq_length() == 9


def test_a_full_buffer_grows_and_rows_are_selected_and_repeated_as_in_a_dynamic_cache():
    import torch

    plain, reserved = _cache(), reserve(_cache(), 2)
    for kv in (plain, reserved):
        _steps(kv, 3)  # one more than reserved: the buffer grows
        kv.batch_select_indices(torch.tensor([2, 0]))
        kv.batch_repeat_interleave(2)
        _steps(kv, 1, batch=4)
    assert reserved.layers[0].buffers[0].shape[2] == 5 + 3 + GROW
    for a, b in zip(plain.layers, reserved.layers):
        assert torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)


@pytest.mark.slow
def test_completions_are_the_same_with_the_cache_written_in_place_or_grown_by_concatenation(tmp_path, monkeypatch):
    prompts = ["Q: Who wrote Hamlet?\nA:", "Q: What is the capital of Italy?\nA: The capital", "Count: one, two,"]

    def run(name):
        lm = lm_mod.LM(cache=Cache(tmp_path / f"{name}.sqlite", table="lm"), batch_size=2)
        return (lm.generate(prompts, max_new_tokens=20, stop=["\n"], progress=False)
                + lm.generate(prompts, n=3, temperature=0.8, max_new_tokens=20, seed=3, progress=False))

    in_place = run("in_place")
    monkeypatch.setattr(decoding, "reserve", lambda kv, extra: kv)
    assert run("dynamic") == in_place  # texts, tokens, log-probabilities and finish reasons
