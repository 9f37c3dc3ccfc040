"""One prefill for the block many prompts share: the key/value cache of their common token prefix, reused per batch.

Every CoT / CoT-SC / verifying-question prompt of a notebook starts with the same few-shot block (about 450-490
tokens for the 6-shot HotpotQA prompt) and adds a few dozen tokens of its own. `SharedPrefix` prefills that common
prefix once per `generate` or `score` call (batch 1) and hands each batch a copy expanded to its rows; the batch
then prefills only its own suffixes, laid out as

    [shared prefix][left padding][suffix]       attention mask 1 ... 1 0 ... 0 1 ... 1

with positions continuing from the prefix, so each row sees exactly the tokens it would see alone. The prefix is
the common prefix of the prompts' *token ids* (tokenised whole, as without sharing), never of their text, and it
stops at least one token before the shortest prompt, so every row has a token of its own to predict from.
vLLM's automatic prefix caching and llama.cpp's prompt cache do the same across requests. A call shares a prefix, and
reads it through cascade attention, where its `Engine` says these are exact for the model (`covlib.generation.engine`).
"""

from __future__ import annotations

import copy
from typing import Sequence

from covlib.generation.engine import CASCADE, Engine
from covlib.generation.loading import cache_kwarg, cache_of

MIN_SHARED_TOKENS = 16  # below this a shared prefill saves less than the copy costs
# With cascade attention a row holds only its own tokens (a few dozen, not ~500), so a batch can hold more rows for the
# same memory; on the 2-core CPU, CoT-SC decodes 1.9x faster with 64 rows than with 16 (docs/benchmarks.md)
SHARED_ROW_FACTOR = 4
# Cascade attention materialises each row's scores over its own tokens (SDPA's fused kernels do not return what the
# two halves need to be merged); it is used where the rows' own parts are short: a question after a few-shot block,
# not a question after ten reference paragraphs (notebook 05: 64 rows x 1,500 own tokens would need ~5 GB).
CASCADE_MAX_OWN = 256


def cascade_fits(shared: int, own: int) -> bool:
    """Whether rows of at most `own` tokens after a `shared`-token prefix are short enough for cascade attention."""
    return own <= min(shared, CASCADE_MAX_OWN)


def common_prefix(seqs: Sequence[Sequence[int]], keep: int = 1) -> int:
    """Length of the longest token prefix all `seqs` share, leaving at least `keep` tokens of the shortest."""
    if not seqs:
        return 0
    limit = min(len(s) for s in seqs) - keep
    low, high = min(seqs), max(seqs)  # what every sequence shares, the lexicographic first and last share
    n = 0
    while n < limit and low[n] == high[n]:
        n += 1
    return max(n, 0)


class SharedPrefix:
    """The key/value cache of one token prefix, computed once, copied per batch."""

    def __init__(self, ids: Sequence[int], longest_own: int = 0):
        self.ids = list(ids)
        self.longest_own = longest_own  # the most tokens a row adds to the prefix before decoding
        self._kv = None
        self.cascade = False  # set on first use: whether the model reads the prefix through `cascade_attention`
        self.layers = None  # the prefix's (keys, values) per layer, for cascade attention

    def __len__(self) -> int:
        return len(self.ids)

    @classmethod
    def of(cls, seqs: Sequence[Sequence[int]], keep: int = 1, longest: int | None = None) -> "SharedPrefix | None":
        """The shared prefix of `seqs` when two or more share enough tokens to be worth a prefill of its own, else None;
        `longest`: the longest sequence a row will prefill (a prompt and its scored continuation), if longer."""
        if len(seqs) < 2:
            return None
        n = common_prefix(seqs, keep)
        longest = max(longest or 0, max(len(s) for s in seqs))
        return cls(seqs[0][:n], longest_own=longest - n) if n >= MIN_SHARED_TOKENS else None

    def prepare(self, engine: Engine) -> "SharedPrefix":
        """Prefill the prefix (once) and switch the model to cascade attention where `engine.cascade` allows."""
        import torch

        if self._kv is None:
            ids = torch.tensor([self.ids], device=engine.device)
            pos = torch.arange(len(self.ids), device=engine.device)[None]
            with torch.inference_mode():
                self._kv = cache_of(engine.model(input_ids=ids, position_ids=pos, use_cache=True, logits_to_keep=1))
            engine.forward_calls += 1
            engine.check(self._kv)
            # cascade attention computes a row's own scores unfused: only for short own parts after a longer prefix
            self.cascade = engine.cascade and cascade_fits(len(self.ids), self.longest_own)
            if self.cascade:
                enable_cascade(engine.model)
            self.layers = [(layer.keys[0], layer.values[0]) for layer in self._kv.layers] if self.cascade else None
        return self

    def rows(self, batch_size: int) -> int:
        """Rows to decode together: `SHARED_ROW_FACTOR` times `batch_size` with cascade attention, where a row's
        cache and prefill are its own few dozen tokens, else `batch_size`."""
        return batch_size * SHARED_ROW_FACTOR if self.cascade else batch_size

    def batch(self, engine: Engine, seqs: Sequence[Sequence[int]]) -> tuple[dict, dict, int]:
        """The forward arguments of the prefill of `seqs` after the prefix, the extra arguments every later decoding
        step takes, and the position offset of a row's own tokens (the prefix is prefilled on first use).

        With cascade attention (`enable_cascade`), each row's cache holds its own tokens only and every forward reads
        the prefix's keys and values once for all rows; otherwise each row gets a copy of the prefix's cache."""
        import torch

        self.prepare(engine)
        model, pad, device = engine.model, engine.pad, engine.device
        n = len(self.ids)
        suffixes = [list(s[n:]) for s in seqs]
        width = max(len(s) for s in suffixes)
        input_ids = torch.tensor([[pad] * (width - len(s)) + s for s in suffixes], device=device)
        own = torch.tensor([[0] * (width - len(s)) + [1] * len(s) for s in suffixes], device=device)
        pos = (n + own.cumsum(-1) - 1).clamp(min=n)
        if self.cascade:
            extra = {"prefix_kv": self.layers}
            return dict(input_ids=input_ids, attention_mask=own, position_ids=pos, **cache_kwarg(model, None), **extra), extra, n
        kv = copy.deepcopy(self._kv)
        if len(seqs) > 1:
            kv.batch_repeat_interleave(len(seqs))
        attn = torch.cat([own.new_ones((len(seqs), n)), own], dim=1)
        return dict(input_ids=input_ids, attention_mask=attn, position_ids=pos, **cache_kwarg(model, kv)), {}, 0


def padded_inputs(seqs: Sequence[Sequence[int]], pad: int, device: str):
    """`seqs` left-padded, without a shared prefix: (input_ids, attention_mask, position_ids)."""
    import torch

    width = max(len(s) for s in seqs)
    input_ids = torch.tensor([[pad] * (width - len(s)) + list(s) for s in seqs], device=device)
    attn = torch.tensor([[0] * (width - len(s)) + [1] * len(s) for s in seqs], device=device)
    pos = (attn.cumsum(-1) - 1).clamp(min=0)
    return input_ids, attn, pos


def cascade_attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling: float | None = None,
                      prefix_kv=None, **kwargs):
    """Attention of each row's queries over the shared prefix's keys (one copy for all rows: one matrix product) and
    over its own keys, in one softmax; without `prefix_kv`, transformers' own SDPA attention."""
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if prefix_kv is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    pk, pv = prefix_kv[module.layer_idx]  # (kv heads, prefix, dim)
    b, h, q, d = query.shape
    kvh, p = pk.shape[0], pk.shape[1]
    g = h // kvh
    scaling = scaling if scaling is not None else d**-0.5
    grouped = query.reshape(b, kvh, g, q, d)  # query head i reads kv head i // g, as repeat_kv does
    # scores laid out (kv head, row x group x query, key): the prefix's part is one matrix product per kv head, and its
    # probabilities multiply the prefix's values as they lie, without a copy
    on_prefix = torch.matmul(grouped.transpose(0, 1).reshape(kvh, b * g * q, d), pk.transpose(1, 2))
    own = torch.matmul(grouped, key[:, :, None].transpose(-1, -2))  # (b, kvh, g, q, own)
    s = key.shape[2]
    if attention_mask is None:  # SDPA's mask was skipped: causal over the row's own tokens
        attention_mask = torch.ones(q, s, dtype=torch.bool, device=query.device).tril(s - q)[None, None]
    if attention_mask.dtype == torch.bool:
        own = own.masked_fill(~attention_mask[:, :, None], float("-inf"))
    else:
        own = own + attention_mask[:, :, None]
    own = own.transpose(0, 1).reshape(kvh, b * g * q, s)
    probs = torch.softmax(torch.cat([on_prefix, own], dim=-1).float() * scaling, dim=-1).to(value.dtype)
    out = torch.matmul(probs[..., p:].reshape(kvh, b, g * q, s).transpose(0, 1), value)  # (b, kvh, g x q, dim)
    out = out + torch.matmul(probs[..., :p], pv).reshape(kvh, b, g * q, d).transpose(0, 1)
    return out.reshape(b, h, q, d).transpose(1, 2).contiguous(), None


def enable_cascade(model) -> None:
    """Switch `model` (SDPA, an architecture `engine.CASCADE_MODELS` names) to `cascade_attention`: SDPA unless a call
    passes `prefix_kv`."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    if model.config._attn_implementation != CASCADE:
        AttentionInterface.register(CASCADE, cascade_attention)
        ALL_MASK_ATTENTION_FUNCTIONS.register(CASCADE, sdpa_mask)
        model.set_attn_implementation(CASCADE)
