"""One prefill for the block many prompts share: the key/value cache of their common token prefix, reused per batch.

Every CoT / CoT-SC / verifying-question prompt of a notebook starts with the same few-shot block (about 450-490
tokens for the 6-shot HotpotQA prompt) and adds a few dozen tokens of its own. `SharedPrefix` prefills that common
prefix once per `generate` or `score` call (batch 1) and hands each batch a copy expanded to its rows; the batch
then prefills only its own suffixes, laid out as

    [shared prefix][left padding][suffix]       attention mask 1 ... 1 0 ... 0 1 ... 1

with positions continuing from the prefix, so each row sees exactly the tokens it would see alone. The prefix is
the common prefix of the prompts' *token ids* (tokenised whole, as without sharing), never of their text, and it
stops at least one token before the shortest prompt, so every row has a token of its own to predict from.
vLLM's automatic prefix caching and llama.cpp's prompt cache do the same across requests.
"""

from __future__ import annotations

import copy
from typing import Any, Sequence

MIN_SHARED_TOKENS = 16  # below this a shared prefill saves less than the copy costs


def common_prefix(seqs: Sequence[Sequence[int]], keep: int = 1) -> int:
    """Length of the longest token prefix all `seqs` share, leaving at least `keep` tokens of the shortest."""
    if not seqs:
        return 0
    limit = min(len(s) for s in seqs) - keep
    first = seqs[0]
    n = 0
    while n < limit and all(s[n] == first[n] for s in seqs):
        n += 1
    return max(n, 0)


class SharedPrefix:
    """The key/value cache of one token prefix, computed once, copied per batch."""

    def __init__(self, ids: Sequence[int]):
        self.ids = list(ids)
        self._kv = None
        self.forward_calls = 0

    def __len__(self) -> int:
        return len(self.ids)

    @classmethod
    def of(cls, seqs: Sequence[Sequence[int]], keep: int = 1) -> "SharedPrefix | None":
        """The shared prefix of `seqs` when two or more share enough tokens to be worth a prefill of its own, else None."""
        if len(seqs) < 2:
            return None
        n = common_prefix(seqs, keep)
        return cls(seqs[0][:n]) if n >= MIN_SHARED_TOKENS else None

    def cache_for(self, model: Any, rows: int, device: str):
        """A fresh key/value cache of the prefix for `rows` rows (the prefix is prefilled on first use)."""
        import torch

        if self._kv is None:
            ids = torch.tensor([self.ids], device=device)
            pos = torch.arange(len(self.ids), device=device)[None]
            with torch.inference_mode():
                self._kv = model(input_ids=ids, position_ids=pos, use_cache=True, logits_to_keep=1).past_key_values
            self.forward_calls += 1
        kv = copy.deepcopy(self._kv)
        if rows > 1:
            kv.batch_repeat_interleave(rows)
        return kv

    def inputs(self, seqs: Sequence[Sequence[int]], pad: int, device: str):
        """The suffixes of `seqs` after the prefix, left-padded: (input_ids, attention_mask over prefix + suffix,
        position_ids of the suffix)."""
        import torch

        n = len(self.ids)
        suffixes = [list(s[n:]) for s in seqs]
        width = max(len(s) for s in suffixes)
        input_ids = torch.tensor([[pad] * (width - len(s)) + s for s in suffixes], device=device)
        own = torch.tensor([[0] * (width - len(s)) + [1] * len(s) for s in suffixes], device=device)
        attn = torch.cat([own.new_ones((len(seqs), n)), own], dim=1)
        pos = (n + own.cumsum(-1) - 1).clamp(min=n)
        return input_ids, attn, pos


def padded_inputs(seqs: Sequence[Sequence[int]], pad: int, device: str):
    """`seqs` left-padded, without a shared prefix: (input_ids, attention_mask, position_ids)."""
    import torch

    width = max(len(s) for s in seqs)
    input_ids = torch.tensor([[pad] * (width - len(s)) + list(s) for s in seqs], device=device)
    attn = torch.tensor([[0] * (width - len(s)) + [1] * len(s) for s in seqs], device=device)
    pos = (attn.cumsum(-1) - 1).clamp(min=0)
    return input_ids, attn, pos
