"""Scoring by the in-process `LM`: the log-probability of each continuation, one prefill per prompt for all of them.

A prompt is prefilled once however many continuations it scores (an LLM judge's three options), after the token
prefix the call's prompts share (`covlib.generation.prefix`); each continuation's first token is read from that
prefill and the rest from one right-padded forward on copies of the prompt's key/value cache. The functions take
the call's `Engine` (`covlib.generation.engine`): the loaded model and tokenizer, device and batch size, whether the
prefix is shared, and the count of forward passes.
"""

from __future__ import annotations

import copy
from typing import Iterator

from covlib.generation.decoding import attention_context, prefill
from covlib.generation.engine import Engine
from covlib.generation.loading import cache_kwarg, cache_of
from covlib.generation.prefix import SharedPrefix


def score_missing(engine: Engine, todo: dict[str, tuple[str, str]], progress: bool, desc: str) -> Iterator[dict[str, float]]:
    """The log-probability of each (rendered prompt, continuation) of `todo` (by cache key), yielded batch by batch
    as {cache key: value}."""
    from tqdm.auto import tqdm

    pairs = sorted(set(todo.values()), key=lambda rc: -len(rc[0]))
    key_of = {pair: key for key, pair in todo.items()}
    tok = engine.tokenizer
    bar = tqdm(total=len(pairs), desc=desc, disable=not progress, unit="pair")
    branches: dict[str, list[str]] = {}  # each prompt once, with all its continuations (an LLM judge's options)
    for r, c in pairs:
        branches.setdefault(r, []).append(c)
    prompts = list(branches)
    ids = {r: tok(r, add_special_tokens=False).input_ids for r in prompts}
    conts = {c: continuation_ids(tok, c) for c in {c for _, c in pairs}}  # each distinct one tokenised once
    longest = max(len(ids[r]) + len(conts[c]) for r, c in pairs)
    shared = SharedPrefix.of([ids[r] for r in prompts], longest=longest) if engine.share_prefix else None
    for start in range(0, len(prompts), engine.batch_size):
        batch = prompts[start : start + engine.batch_size]
        values = score_prompts(engine, [ids[r] for r in batch], [[conts[c] for c in branches[r]] for r in batch], shared)
        done = [(r, c) for r in batch for c in branches[r]]
        yield {key_of[rc]: v for rc, v in zip(done, values)}
        bar.update(len(done))
    bar.close()


def continuation_ids(tok, cont: str) -> list[int]:
    """A continuation's token ids (tokenised alone, as it follows the prompt); an empty one raises."""
    c = tok(cont, add_special_tokens=False).input_ids
    if not c:
        raise ValueError(f"empty continuation {cont!r}")
    return c


def score_prompts(engine: Engine, prompts: list[list[int]], conts: list[list[list[int]]],
                  shared: SharedPrefix | None = None) -> list[float]:
    """Each prompt's continuations' log-probabilities, flattened: one prefill per prompt, `_continue` for the rest."""
    import torch

    owner = [b for b, cs in enumerate(conts) for _ in cs]
    flat = [c for cs in conts for c in cs]
    with torch.inference_mode(), attention_context(engine.device):
        out, attn, _, extra, offset = prefill(engine, prompts, shared, keep=1)
        first = torch.log_softmax(out.logits[:, -1].float(), dim=-1)
        values = [float(first[b, c[0]]) for b, c in zip(owner, flat)]
        longer = [r for r, c in enumerate(flat) if len(c) > 1]  # the rest are done: their token follows the prompt
        for start in range(0, len(longer), engine.batch_size):
            rows = longer[start : start + engine.batch_size]
            kv = cache_of(out) if start + engine.batch_size >= len(longer) else copy.deepcopy(cache_of(out))
            rest = _continue(engine, kv, attn, extra, offset, [owner[r] for r in rows], [flat[r] for r in rows])
            for r, lp in zip(rows, rest):
                values[r] += lp
    return values


def _continue(engine: Engine, kv, attn, extra: dict, offset: int, owner: list[int], flat: list[list[int]]) -> list[float]:
    """Log-probability of each continuation's tokens after its first: one right-padded forward on prompt caches."""
    import torch

    width = max(len(c) for c in flat) - 1
    if owner != list(range(attn.shape[0])):  # one copy of its prompt's cache per continuation (none: rows as they are)
        idx = torch.tensor(owner, device=engine.device)
        kv.batch_select_indices(idx)
        attn = attn[idx]
    pos = attn.sum(-1, keepdim=True) + offset + torch.arange(width, device=engine.device)
    attn = torch.cat([attn, attn.new_ones((len(flat), width))], dim=1)  # right padding: never attended to
    feed = torch.tensor([c[:-1] + [c[-1]] * (width + 1 - len(c)) for c in flat], device=engine.device)
    logits = engine.model(input_ids=feed, attention_mask=attn, position_ids=pos, use_cache=True,
                          **cache_kwarg(engine.model, kv), **extra).logits.float()
    engine.forward_calls += 1
    nxt = torch.tensor([c[1:] + [0] * (width + 1 - len(c)) for c in flat], device=engine.device)
    logp = torch.log_softmax(logits, dim=-1).gather(2, nxt[..., None])[..., 0]
    return [float(logp[r, : len(c) - 1].sum()) for r, c in enumerate(flat)]
