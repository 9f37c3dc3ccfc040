"""The batched decoding loop of the in-process `LM`: prompts in batches, one prefill each, a token at a time to the end.

Each prompt is prefilled once and its key/value cache expanded to its `n` samples; the token prefix all prompts of a
call share (a few-shot block) is prefilled once per call and copied to each batch (`covlib.generation.prefix`).
The functions take the call's `Engine` (`covlib.generation.engine`): the loaded model and tokenizer, device and batch
size, the fast paths that apply to the model (the in-place cache, fixed shapes, the shared prefix), its forward count.
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict
from typing import Any, Iterator

from covlib.generation.base import Completion
from covlib.generation.engine import Engine
from covlib.generation.graphs import fixed_state
from covlib.generation.loading import cache_kwarg, cache_of
from covlib.generation.prefix import SharedPrefix, padded_inputs
from covlib.generation.kvcache import reserve
from covlib.generation.sampling import RowText, advance, eos_ids, next_tokens, row_keys, token_values


def generate_missing(engine: Engine, samples: dict[str, list[str]], greedy: bool, decoding: dict, progress: bool,
                     desc: str) -> Iterator[dict[str, Any]]:
    """The completions of each rendered prompt of `samples` (prompt -> its samples' cache keys), yielded batch by
    batch as {cache key: completion record}."""
    from tqdm.auto import tqdm

    tok, model = engine.tokenizer, engine.model
    texts = sorted(samples)
    n = len(samples[texts[0]])  # distinct samples per prompt (greedy: 1)
    ids = {t: tok(t, add_special_tokens=False).input_ids for t in texts}
    limit = getattr(model.config, "max_position_embeddings", None)
    for t, seq in ids.items():
        if limit and len(seq) + decoding["max_new_tokens"] > limit:
            raise ValueError(f"prompt of {len(seq)} tokens + {decoding['max_new_tokens']} new tokens exceeds "
                             f"the model's context of {limit}: {t[:80]!r}...")
    texts = sorted(texts, key=lambda t: -len(ids[t]))  # batches of similar length waste little padding
    shared = SharedPrefix.of(list(ids.values())) if engine.share_prefix else None
    rows = shared.prepare(engine).rows(engine.batch_size) if shared else engine.batch_size
    per_batch = max(1, rows // n)
    bar = tqdm(total=len(texts), desc=desc, disable=not progress, unit="prompt")
    for start in range(0, len(texts), per_batch):
        batch = texts[start : start + per_batch]
        comps = decode(engine, batch, [ids[t] for t in batch], n, greedy, decoding, shared)
        yield {samples[text][i]: asdict(comps[j * n + i]) for j, text in enumerate(batch) for i in range(n)}
        bar.update(len(batch))
    bar.close()


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


def prefill(engine: Engine, seqs: list[list[int]], shared: SharedPrefix | None, keep: int):
    """One forward over `seqs` (after the shared prefix when there is one): (output, attention mask, the input ids
    that ran, the extra arguments of later steps, the position offset of the rows' own tokens)."""
    if shared is None:
        input_ids, attn, pos = padded_inputs(seqs, engine.pad, engine.device)
        args, extra, offset = dict(input_ids=input_ids, attention_mask=attn, position_ids=pos), {}, 0
    else:
        args, extra, offset = shared.batch(engine, seqs)
    out = engine.model(**args, use_cache=True, logits_to_keep=keep)
    engine.forward_calls += 1
    engine.check(cache_of(out))
    return out, args["attention_mask"], args["input_ids"], extra, offset


class Rows:
    """The rows of a decoding call: each row's tokens so far, and the completions of the rows that ended."""

    def __init__(self, tok: Any, rows: int, stops: list[str], eos: set[int], steps: int):
        self.tok, self.stops, self.eos, self.steps = tok, stops, eos, steps
        self.ids: list[list[int]] = [[] for _ in range(rows)]
        self.logps: list[list[float]] = [[] for _ in range(rows)]
        self.ends: list[list[int]] = [[] for _ in range(rows)]  # decoded text length after each token
        self.texts = [RowText(tok) for _ in range(rows)]
        self.done: dict[int, Completion] = {}

    def advance(self, rows: list[int | None], values: Any, step: int) -> list[int]:
        """Add step `step`'s token to the row at each batch position (`rows`; None: a finished row still in the
        batch, skipped) from `values` (a (2, positions) tensor: the tokens, their log-probabilities); the positions
        still going."""
        tokens, logps = values.tolist()  # on the device: the step's one wait for it
        keep = []
        for b, r in enumerate(rows):
            if r is None:
                continue
            finished = advance(self.tok, self.ids[r], self.logps[r], self.ends[r], int(tokens[b]), logps[b], self.stops,
                               self.eos, step == self.steps - 1, self.texts[r])
            if finished is None:
                keep.append(b)
            else:
                self.done[r] = finished
        return keep

    def completions(self) -> list[Completion]:
        """Every row's completion, in row order."""
        return [self.done[r] for r in range(len(self.ids))]


def decode(engine: Engine, texts: list[str], seqs: list[list[int]], n: int, greedy: bool, decoding: dict,
           shared: SharedPrefix | None = None) -> list[Completion]:
    """Prefill once per prompt (after the shared prefix), expand the KV cache to n rows per prompt, decode: at fixed
    shapes (CUDA graphs) where `engine.fixed`, else a step of the rows still going at a time."""
    import torch

    tok, model = engine.tokenizer, engine.model
    rows = len(texts) * n
    steps = decoding["max_new_tokens"]
    sampling = (greedy, decoding["temperature"], decoding["top_p"])
    keys = None if greedy else row_keys(texts, n, decoding["seed"], steps, engine.device)
    book = Rows(tok, rows, decoding["stop"], eos_ids(tok, model), steps)
    with torch.inference_mode(), attention_context(engine.device):
        out, attn, _, extra, offset = prefill(engine, seqs, shared, keep=1)
        kv = cache_of(out)
        logits = out.logits[:, -1, :].float()
        if n > 1:
            kv.batch_repeat_interleave(n)
            logits = logits.repeat_interleave(n, dim=0)
            attn = attn.repeat_interleave(n, dim=0)
        if engine.in_place:
            kv = reserve(kv, steps)  # later steps write their full-attention keys and values in place
        nxt = next_tokens(logits, greedy, *sampling[1:], None if greedy else keys[:, 0])
        going = book.advance(list(range(rows)), token_values(nxt, logits), 0)
        if going and steps > 1:
            if engine.fixed:
                _fixed(engine, book, kv, nxt, attn, offset, keys, extra, sampling)
            else:
                _dynamic(engine, book, kv, nxt, attn, offset, keys, extra, sampling, going)
    return book.completions()


def _dynamic(engine: Engine, book: Rows, kv: Any, nxt: Any, attn: Any, offset: int, keys: Any, extra: dict,
             sampling: tuple, going: list[int]) -> None:
    """Steps 1.. of `decode`, each over the rows still going (finished rows leave the batch at once)."""
    import torch

    active = list(range(len(book.ids)))  # row index of each batch position
    live = torch.arange(len(active), device=engine.device)  # the same, on the device
    for step in range(1, book.steps):
        if len(going) < len(active):
            idx = torch.tensor(going, device=engine.device)
            kv.batch_select_indices(idx)
            attn, nxt, live = attn[idx], nxt[idx], live[idx]
            active = [active[b] for b in going]
        attn = torch.cat([attn, attn.new_ones((attn.shape[0], 1))], dim=1)
        pos = attn.long().sum(-1, keepdim=True) - 1 + offset
        out = engine.model(input_ids=nxt[:, None], attention_mask=attn, position_ids=pos, use_cache=True,
                           **cache_kwarg(engine.model, kv), **extra)
        engine.forward_calls += 1
        kv = cache_of(out)
        logits = out.logits[:, -1, :].float()
        nxt = next_tokens(logits, *sampling, None if sampling[0] else keys[live, step])
        going = book.advance(active, token_values(nxt, logits), step)
        if not going:
            return


def _fixed(engine: Engine, book: Rows, kv: Any, nxt: Any, attn: Any, offset: int, keys: Any, extra: dict,
           sampling: tuple) -> None:
    """Steps 1.. of `decode` at fixed shapes (`covlib.generation.graphs`), replayed as a CUDA graph on CUDA. Each step
    is launched before the previous one's stop checks run (their results come back without a wait); finished rows stay
    in the batch until half have finished, then the rows still going move to a state (and graph) of their own."""
    import torch

    state = fixed_state(engine.model, kv, nxt, attn, offset, keys, extra, sampling)
    capture = str(engine.device).startswith("cuda")
    slots = list(range(len(book.ids)))  # the row at each position of the state (finished ones: in book.done)

    def launch() -> tuple[list[int], Any]:
        nonlocal state, slots
        live = [b for b, r in enumerate(slots) if r not in book.done]
        if len(live) <= len(slots) // 2:
            state = state.select(torch.tensor(live, device=engine.device))
            slots = [slots[b] for b in live]
        if capture and state.graph is None:
            state.capture()
        engine.forward_calls += 1
        return list(slots), state.launch()

    pending = launch()
    for step in range(1, book.steps):
        rows, landing = pending
        pending = launch() if step + 1 < book.steps else None  # runs while this step's stops are checked
        if not book.advance([None if r in book.done else r for r in rows], landing.values(), step):
            return
