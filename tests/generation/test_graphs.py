"""Decoding at fixed shapes (covlib.generation.graphs), the path CUDA graphs replay: on the CPU it runs eagerly, and must
give the completions of the decoder's dynamic path (texts, tokens, finish reasons; log-probabilities to float error,
since attention sums over the whole cache buffer)."""

from __future__ import annotations

import pytest

from covlib import generation as lm_mod
from covlib.core.cache import Cache
from covlib.generation import graphs
from covlib.generation.engine import graphs_asked
from covlib.generation.kvcache import fix, reserve

PROMPTS = ["Q: Who wrote Hamlet?\nA:", "Q: What is the capital of Italy?\nA: The capital", "Count: one, two,",
           "The first law of motion says"]
FEWSHOT = "Q: Which river flows through Paris?\nA: The Seine. So the answer is the Seine.\n\nQ: Who painted the Mona Lisa?\nA:"


def _cache():
    import torch
    from transformers import DynamicCache

    torch.manual_seed(0)
    kv = DynamicCache()
    for i in range(2):
        kv.update(torch.randn(3, 2, 5, 4), torch.randn(3, 2, 5, 4), i)
    return kv


def test_a_fixed_cache_writes_at_the_column_the_device_holds_and_reads_its_whole_buffer():
    import torch

    plain, fixed = _cache(), reserve(_cache(), 3)
    at = torch.tensor([5])
    fix(fixed, at)
    assert fixed.layers[0].keys.shape[2] == 8  # the whole buffer, written or not
    assert torch.count_nonzero(fixed.layers[0].keys[:, :, 5:]) == 0  # zeros, never an empty buffer's NaNs
    torch.manual_seed(1)
    for _ in range(2):
        new = [(torch.randn(3, 2, 1, 4), torch.randn(3, 2, 1, 4)) for _ in range(2)]
        for i, (k, v) in enumerate(new):
            plain.update(k, v, i)
            keys, _ = fixed.update(k, v, i)
        at.add_(1)
    assert keys.shape[2] == 8
    for a, b in zip(plain.layers, fixed.layers):
        assert torch.equal(a.keys, b.keys[:, :, :7]) and torch.equal(a.values, b.values[:, :, :7])
    fixed.batch_select_indices(torch.tensor([2, 0]))
    assert torch.equal(fixed.layers[1].keys[:, :, :7], plain.layers[1].keys[[2, 0]])


def test_fixed_shapes_are_the_default_on_cuda_only_and_can_be_turned_off(monkeypatch):
    monkeypatch.delenv("COVLIB_CUDA_GRAPHS", raising=False)
    assert graphs_asked("cuda", None) and graphs_asked("cuda:1", None)
    assert not graphs_asked("cpu", None)
    assert graphs_asked("cpu", True) and not graphs_asked("cuda", False)
    monkeypatch.setenv("COVLIB_CUDA_GRAPHS", "0")
    assert not graphs_asked("cuda", None)


def _same(a, b) -> None:
    for row_a, row_b in zip(a, b, strict=True):
        for x, y in zip(row_a, row_b, strict=True):
            assert (x.text, x.tokens, x.finish_reason) == (y.text, y.tokens, y.finish_reason)
            assert x.token_logprobs == pytest.approx(y.token_logprobs, abs=1e-4)


@pytest.mark.slow
def test_fixed_shapes_give_the_dynamic_paths_completions(tmp_path, monkeypatch):
    selected = []
    original = graphs.StepGraph.select
    monkeypatch.setattr(graphs.StepGraph, "select", lambda self, idx: selected.append(len(idx)) or original(self, idx))
    shots = [FEWSHOT + p for p in PROMPTS]  # a shared few-shot block: cascade attention over the prefix

    def run(name, fixed):
        lm = lm_mod.LM(cache=Cache(tmp_path / f"{name}.sqlite", table="lm"), batch_size=3)
        lm.cuda_graphs = fixed
        return (lm.generate(PROMPTS, max_new_tokens=20, stop=["\n"], progress=False)
                + lm.generate(PROMPTS, n=3, temperature=0.8, max_new_tokens=20, stop=["."], seed=3, progress=False)
                + lm.generate(shots, n=2, temperature=0.7, max_new_tokens=16, stop=["\n"], seed=1, progress=False)
                + lm.generate(shots, max_new_tokens=12, progress=False))

    fixed = run("fixed", True)
    assert selected, "rows that finished early were never moved out of the batch"
    _same(run("dynamic", False), fixed)
