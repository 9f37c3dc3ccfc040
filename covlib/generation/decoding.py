"""The batched decoding loop of the in-process `LM`: prompts in batches, one prefill each, a token at a time to the end.

Each prompt is prefilled once and its key/value cache expanded to its `n` samples; the token prefix all prompts of a
call share (a few-shot block) is prefilled once per call and copied to each batch (`covlib.generation.prefix`).
The functions take the `LM` (`covlib.generation.decoder`) for its loaded model and tokenizer, device and batch
size, and count its forward passes in `lm.forward_calls`.
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict
from typing import Any, Iterator

from covlib.generation.base import Completion
from covlib.generation.loading import cache_kwarg, cache_of
from covlib.generation.prefix import SharedPrefix, padded_inputs
from covlib.generation.kvcache import reserve
from covlib.generation.sampling import RowText, advance, eos_ids, next_tokens, row_keys


def generate_missing(lm: Any, samples: dict[str, list[str]], greedy: bool, decoding: dict, progress: bool,
                     desc: str) -> Iterator[dict[str, Any]]:
    """The completions of each rendered prompt of `samples` (prompt -> its samples' cache keys), yielded batch by
    batch as {cache key: completion record}."""
    from tqdm.auto import tqdm

    tok, model = lm.tokenizer, lm.model
    texts = sorted(samples)
    n = len(samples[texts[0]])  # distinct samples per prompt (greedy: 1)
    ids = {t: tok(t, add_special_tokens=False).input_ids for t in texts}
    limit = getattr(model.config, "max_position_embeddings", None)
    for t, seq in ids.items():
        if limit and len(seq) + decoding["max_new_tokens"] > limit:
            raise ValueError(f"prompt of {len(seq)} tokens + {decoding['max_new_tokens']} new tokens exceeds "
                             f"the model's context of {limit}: {t[:80]!r}...")
    texts = sorted(texts, key=lambda t: -len(ids[t]))  # batches of similar length waste little padding
    shared = SharedPrefix.of(list(ids.values())) if lm.share_prefix else None
    rows = shared.prepare(model, lm.device).rows(lm.batch_size) if shared else lm.batch_size
    per_batch = max(1, rows // n)
    bar = tqdm(total=len(texts), desc=desc, disable=not progress, unit="prompt")
    for start in range(0, len(texts), per_batch):
        batch = texts[start : start + per_batch]
        comps = decode(lm, batch, [ids[t] for t in batch], n, greedy, decoding, shared)
        yield {samples[text][i]: asdict(comps[j * n + i]) for j, text in enumerate(batch) for i in range(n)}
        bar.update(len(batch))
    bar.close()
    lm.forward_calls += shared.forward_calls if shared else 0


def attention_backends(device: str) -> list | None:
    """The SDPA backends decoding uses on `device`: on CUDA every one but cuDNN's, which builds a new plan for each key
    length, i.e. at every step and layer (on an H200, 64% of a step's CPU time; a step took 36.6 ms without it instead of
    55-65, with the same logits: issue 36); elsewhere None, torch's own choice."""
    from torch.nn.attention import SDPBackend

    if not str(device).startswith("cuda"):
        return None
    return [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


def attention_context(device: str) -> Any:
    """A context that restricts SDPA to `attention_backends(device)` (nothing to restrict on a CPU)."""
    from torch.nn.attention import sdpa_kernel

    backends = attention_backends(device)
    return sdpa_kernel(backends) if backends else contextlib.nullcontext()


def prefill(lm: Any, seqs: list[list[int]], shared: SharedPrefix | None, keep: int):
    """One forward over `seqs` (after the shared prefix when there is one): (output, attention mask, the input ids
    that ran, the extra arguments of later steps, the position offset of the rows' own tokens)."""
    pad = lm.tokenizer.pad_token_id
    if shared is None:
        input_ids, attn, pos = padded_inputs(seqs, pad, lm.device)
        args, extra, offset = dict(input_ids=input_ids, attention_mask=attn, position_ids=pos), {}, 0
    else:
        args, extra, offset = shared.batch(lm.model, seqs, pad, lm.device)
    out = lm.model(**args, use_cache=True, logits_to_keep=keep)
    lm.forward_calls += 1
    return out, args["attention_mask"], args["input_ids"], extra, offset


def decode(lm: Any, texts: list[str], seqs: list[list[int]], n: int, greedy: bool, decoding: dict,
           shared: SharedPrefix | None = None) -> list[Completion]:
    """Prefill once per prompt (after the shared prefix), expand the KV cache to n rows per prompt, decode."""
    import torch

    tok, model = lm.tokenizer, lm.model
    rows = len(texts) * n
    stops = decoding["stop"]
    temperature, top_p = decoding["temperature"], decoding["top_p"]
    eos = eos_ids(tok, model)
    steps = decoding["max_new_tokens"]
    keys = None if greedy else row_keys(texts, n, decoding["seed"], steps, lm.device)
    ids = [[] for _ in range(rows)]
    logps = [[] for _ in range(rows)]
    ends = [[] for _ in range(rows)]  # decoded text length after each token
    texts_so_far = [RowText(tok) for _ in range(rows)]
    done: dict[int, Completion] = {}
    with torch.inference_mode(), attention_context(lm.device):
        out, attn, _, extra, offset = prefill(lm, seqs, shared, keep=1)
        kv = cache_of(out)
        logits = out.logits[:, -1, :].float()
        if n > 1:
            kv.batch_repeat_interleave(n)
            logits = logits.repeat_interleave(n, dim=0)
            attn = attn.repeat_interleave(n, dim=0)
        kv = reserve(kv, steps)  # later steps write their keys and values in place
        active = list(range(rows))  # row index of each live batch position
        live = torch.arange(rows, device=lm.device)  # the same, on the device
        for step in range(steps):
            logp = torch.log_softmax(logits, dim=-1)
            nxt = next_tokens(logits, greedy, temperature, top_p, None if greedy else keys[live, step])
            chosen = logp.gather(1, nxt[:, None])[:, 0]
            # the step's one wait for the device: the tokens and their log-probabilities, for the stop checks
            nxt_list, chosen = torch.stack([nxt.double(), chosen.double()]).tolist()
            nxt_list = [int(t) for t in nxt_list]
            keep = []
            last = step == steps - 1
            for b, r in enumerate(active):
                finished = advance(tok, ids[r], logps[r], ends[r], nxt_list[b], chosen[b], stops, eos, last,
                                   texts_so_far[r])
                if finished is None:
                    keep.append(b)
                else:
                    done[r] = finished
            if not keep:
                break
            if len(keep) < len(active):
                idx = torch.tensor(keep, device=lm.device)
                kv.batch_select_indices(idx)
                attn = attn[idx]
                nxt = nxt[idx]
                live = live[idx]
                active = [active[b] for b in keep]
            attn = torch.cat([attn, attn.new_ones((attn.shape[0], 1))], dim=1)
            pos = attn.long().sum(-1, keepdim=True) - 1 + offset
            out = model(input_ids=nxt[:, None], attention_mask=attn, position_ids=pos, use_cache=True,
                        **cache_kwarg(model, kv), **extra)
            lm.forward_calls += 1
            kv = cache_of(out)
            logits = out.logits[:, -1, :].float()
    return [done[r] for r in range(rows)]
