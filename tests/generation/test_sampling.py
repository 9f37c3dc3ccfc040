"""Sampling (covlib.generation.sampling): every row's token in one call, a Gumbel-max draw from its own counter-based
noise; the distribution it draws from; its indifference to last-bit differences in the logits; and the sampling scheme
in the cache keys of sampled calls."""

from __future__ import annotations

import numpy as np
import pytest

from covlib import generation as lm_mod
from covlib.core.cache import Cache, make_key
from covlib.generation.base import sample_seed
from covlib.generation.sampling import (GOLDEN, MIX1, MIX2, SAMPLER, gumbel_noise, next_tokens, noise_bits, row_keys,
                                        top_p_filter)


def _fmix32_reference(key: int, vocab: int) -> np.ndarray:
    """The noise's 32-bit hashes, written out in numpy's unsigned arithmetic (the spec `gumbel_noise` follows)."""
    h = (np.arange(vocab, dtype=np.uint64) * np.uint64(GOLDEN)) & np.uint64(0xFFFFFFFF)
    h ^= np.uint64(key)
    h ^= h >> np.uint64(16)
    h = (h * np.uint64(MIX1)) & np.uint64(0xFFFFFFFF)
    h ^= h >> np.uint64(13)
    h = (h * np.uint64(MIX2)) & np.uint64(0xFFFFFFFF)
    return h ^ (h >> np.uint64(16))


def test_the_noise_is_the_hash_written_out_and_never_infinite():
    import torch

    keys = torch.tensor([0, 1, 0xFFFFFFFF, 123456789])
    bits, noise = noise_bits(keys, 5000), gumbel_noise(keys, 5000)
    for r, key in enumerate(keys.tolist()):
        reference = _fmix32_reference(key, 5000)
        assert np.array_equal(bits[r].numpy(), reference.astype(np.int64))  # the same bits on every device
        u = ((reference >> np.uint64(9)).astype(np.float32) + np.float32(0.5)) * np.float32(2.0**-23)
        assert np.allclose(noise[r].numpy(), -np.log(-np.log(u)), rtol=1e-6, atol=1e-6)
    assert torch.isfinite(noise).all() and len({tuple(row.tolist()[:20]) for row in noise}) == 4


def test_draws_follow_the_distribution_and_never_pick_a_filtered_token():
    import torch

    logits = torch.tensor([2.0, 1.0, 0.0, -1.0, -30.0])
    keys = torch.arange(20000) * 7919 + 11  # 20000 different keys: 20000 independent draws
    for temperature, top_p in [(1.0, 1.0), (0.7, 1.0), (1.0, 0.8)]:
        drawn = next_tokens(logits.expand(len(keys), -1), False, temperature, top_p, keys)
        probs = torch.softmax(logits / temperature, dim=-1)
        probs = top_p_filter(probs[None], top_p)[0] if top_p < 1 else probs
        counts = torch.bincount(drawn, minlength=5).double() / len(keys)
        assert torch.allclose(counts, probs.double(), atol=0.012), (temperature, top_p, counts, probs)
        assert probs[drawn].min() > 0  # a filtered-out token never comes


def test_logits_that_differ_in_the_last_bits_give_the_same_draws_even_from_a_flat_distribution():
    """Another batch or the shared prefix changes the logits by about 1e-6: the draws must not move. (Drawing by the
    inverse of the cumulative distribution moved about 1 draw in 1,300 of this nearly flat 49,152-token distribution:
    about 6 of these 8,192.)"""
    import torch

    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(64, 49152, generator=gen) * 0.02  # a random-weights model's nearly flat distribution
    nudged = logits * (1 + 1e-6 * torch.randn(64, 49152, generator=gen))
    moved = 0
    for step in range(128):
        keys = torch.arange(64) * 104729 + step * 7
        moved += int((next_tokens(logits, False, 0.7, 1.0, keys) != next_tokens(nudged, False, 0.7, 1.0, keys)).sum())
    assert moved == 0


def test_greedy_is_the_argmax_whatever_the_keys():
    import torch

    logits = torch.randn(6, 50, generator=torch.Generator().manual_seed(0))
    assert torch.equal(next_tokens(logits, True, 0.0, 1.0), logits.argmax(-1))


def test_a_rows_keys_are_its_own_stream_whatever_the_batch():
    alone = row_keys(["b"], 2, 7, 10, "cpu")
    batch = row_keys(["a", "b", "c"], 2, 7, 10, "cpu")
    assert alone.shape == (2, 10) and (alone >= 0).all() and (alone < 2**32).all()
    assert np.array_equal(alone.numpy(), batch[2:4].numpy())
    assert not np.array_equal(batch[0].numpy(), batch[1].numpy())  # the samples of a prompt differ
    longer = row_keys(["b"], 2, 7, 25, "cpu")
    assert np.array_equal(longer[:, :10].numpy(), alone.numpy())  # step t reads the stream's t-th key
    expected = np.random.Generator(np.random.Philox(key=sample_seed(7, "b", 1))).integers(0, 1 << 32, 10)
    assert np.array_equal(alone[1].numpy(), expected)


@pytest.fixture
def lm(tmp_path):
    return lm_mod.LM(cache=Cache(tmp_path / "calls.sqlite", table="lm"))


def test_sampled_calls_name_the_sampling_scheme_in_their_keys_and_greedy_keys_are_as_before(lm):
    decoding = dict(temperature=0.0, top_p=1.0, max_new_tokens=8, stop=[], seed=0)
    as_before = make_key(kind="generate", model=lm.name, dtype=lm.dtype, prompt="p", sample=0, **decoding)
    assert lm.cache_keys(["p"], max_new_tokens=8) == [[as_before]]
    sampled = dict(decoding, temperature=0.7)
    old_scheme = make_key(kind="generate", model=lm.name, dtype=lm.dtype, prompt="p", sample=0, **sampled)
    new_scheme = make_key(kind="generate", model=lm.name, dtype=lm.dtype, prompt="p", sample=0, **sampled,
                          sampler=SAMPLER)
    (keys,) = lm.cache_keys(["p"], n=2, temperature=0.7, max_new_tokens=8)
    assert keys[0] == new_scheme != old_scheme  # samples drawn the old way are never read as the new scheme's
