"""Sampling and stopping: the next token of each row (greedy or sampled) and where a completion ends.

Sampling is repeatable and counter-based, every row in one call: sample `i` of a prompt has its own stream of 32-bit
step keys (Philox keyed by `covlib.generation.base.sample_seed(seed, prompt, i)`), and its token at step `t` is the
Gumbel-max draw whose noise for token `v` is a hash of (the row's step-`t` key, `v`) (`gumbel_noise`). So a row's
samples do not depend on the batch it is decoded in, and a draw moves only where two tokens' perturbed scores tie, not
wherever a cumulative sum crosses a boundary: logits that differ in the last bits (another batch, the shared prefix)
give the same samples. `SAMPLER` names the scheme in the sampled calls' cache keys.
Log-probabilities are those of the model's own distribution (temperature 1), whatever temperature was
used to sample. A completion ends at an EOS token, at a stop string (cut where it starts, with the tokens
that make the text before it) or at `max_new_tokens`.
"""

from __future__ import annotations

from typing import Any, Sequence

from covlib.generation.base import Completion, first_stop, sample_seed


def eos_ids(tok, model) -> set[int]:
    """The token ids that end a completion: the model's generation config's EOS and the tokenizer's."""
    return set(_as_list(getattr(model.generation_config, "eos_token_id", None)) + _as_list(tok.eos_token_id))


# The sampling scheme, in the cache keys of sampled in-process calls: a new scheme draws other samples, so it must not
# read the old one's. Before it (no key field): torch.multinomial per row with a torch generator per sample.
SAMPLER = "gumbel-fmix32"
MASK = 0xFFFFFFFF
GOLDEN, MIX1, MIX2 = 0x9E3779B1, 0x85EBCA6B, 0xC2B2AE35  # murmur3's finaliser (fmix32) over the token id's golden-ratio spread


def row_keys(texts: Sequence[str], n: int, seed: int, steps: int, device: str):
    """Each row's 32-bit key per step (`n` rows per prompt, in prompt order), a (rows, steps) int64 tensor: row
    (text, i) reads Philox keyed by `sample_seed(seed, text, i)`, so its keys are the same in every batch."""
    import numpy as np
    import torch

    keys = [np.random.Generator(np.random.Philox(key=sample_seed(seed, text, i))).integers(0, 1 << 32, steps)
            for text in texts for i in range(n)]
    return torch.from_numpy(np.stack(keys).astype(np.int64)).to(device)


def noise_bits(keys, vocab: int):
    """(rows, vocab) int64 hashes in [0, 2**32): fmix32(spread(v) xor keys[r]) for row r and token v."""
    import torch

    h = (torch.arange(vocab, device=keys.device, dtype=torch.int64) * GOLDEN).bitwise_and_(MASK)
    h = h[None, :].bitwise_xor(keys[:, None])
    for shift, mix in ((16, MIX1), (13, MIX2)):
        h.bitwise_xor_(h >> shift).mul_(mix).bitwise_and_(MASK)  # values stay below 2**32: the shifts are logical
    return h.bitwise_xor_(h >> 16)


def gumbel_noise(keys, vocab: int):
    """Gumbel noise, (rows, vocab) float32: -log(-log(u)) with u the top 23 bits of `noise_bits` read as a uniform
    in (0, 1) that is never 0 or 1."""
    import torch

    u = ((noise_bits(keys, vocab) >> 9).to(torch.float32) + 0.5) * 2.0**-23
    return u.log_().neg_().log_().neg_()


def next_tokens(logits, greedy: bool, temperature: float, top_p: float, keys=None):
    """Each row's next token: the argmax, or a Gumbel-max draw at `temperature` within `top_p` from the row's step
    key (`keys`, one per row), all rows in one call."""
    import torch

    if greedy:
        return logits.argmax(dim=-1)
    scores = logits / temperature
    if top_p < 1.0:
        scores = torch.log(top_p_filter(torch.softmax(scores, dim=-1), top_p))  # -inf where filtered out
    return (scores + gumbel_noise(keys, scores.shape[-1])).argmax(dim=-1)


def token_values(nxt, logits):
    """Each row's token `nxt` and its log-probability under `logits` (temperature 1), as one (2, rows) float64 tensor:
    what a decoding step hands back for the stop checks, in one transfer."""
    import torch

    chosen = torch.log_softmax(logits, dim=-1).gather(1, nxt[:, None])[:, 0]
    return torch.stack([nxt.double(), chosen.double()])


def top_p_filter(probs, top_p: float):
    """Nucleus filtering: keep the most probable tokens whose probabilities sum to `top_p`, renormalised."""
    import torch

    sorted_p, order = torch.sort(probs, descending=True, dim=-1)
    cum = sorted_p.cumsum(-1)
    drop = cum - sorted_p > top_p
    sorted_p = sorted_p.masked_fill(drop, 0.0)
    filtered = torch.zeros_like(probs).scatter(-1, order, sorted_p)
    return filtered / filtered.sum(-1, keepdim=True)


class RowText:
    """A row's decoded text, grown a token at a time: `tok.decode(ids, skip_special_tokens=True)`, computed from the
    tokens since the last point where the text ended in a whole character, so a step decodes a token or two instead of
    the whole continuation at every step (on a GPU, where a step's CPU work is the bottleneck, issue 36 counted that
    decode among the per-step costs; on the 2-core CPU the decoder spends about 1 % of its time outside the model's
    forward either way).

    Exact for byte-level BPE tokenizers that do not tidy spaces (`clean_up_tokenization_spaces` off), SmolLM2's kind:
    their text is the UTF-8 reading of the tokens' bytes, and after a whole character (no trailing U+FFFD) that
    reading starts afresh. Any other tokenizer (SentencePiece drops a leading space at the start of a decode; a tidy
    decode joins " ." across tokens) decodes everything at every step, as before."""

    def __init__(self, tok: Any) -> None:
        self.tok, self.head, self.start = tok, "", 0
        decoder = getattr(getattr(tok, "backend_tokenizer", None), "decoder", None)
        self.incremental = type(decoder).__name__ == "ByteLevel" and not getattr(tok, "clean_up_tokenization_spaces", True)

    def text(self, ids: list[int]) -> str:
        """The decoded text of all of `ids` (the row's tokens so far, grown by appending)."""
        if not self.incremental:
            return self.tok.decode(ids, skip_special_tokens=True)
        tail = self.tok.decode(ids[self.start:], skip_special_tokens=True)
        if tail.endswith("\ufffd"):  # an unfinished character (or a stray byte): keep decoding from the same point
            return self.head + tail
        self.head, self.start = self.head + tail, len(ids)
        return self.head


def advance(tok, ids: list[int], logps: list[float], ends: list[int], token: int, logp: float, stops: list[str],
            eos: set[int], last: bool, text: RowText | None = None) -> Completion | None:
    """Add `token` to a row (its ids, their log-probabilities, the decoded length after each; `text` decodes them a
    token at a time); the finished Completion when the row ends here (EOS, a stop string, the `last` step), else None."""
    if token in eos:
        return finish(tok, ids, logps, ends, None, "stop")
    ids.append(token)
    logps.append(logp)
    hit = None
    if stops:  # the decoded text is needed for the stop strings only
        decoded = (text or RowText(tok)).text(ids)
        ends.append(len(decoded))
        hit = first_stop(decoded, stops)
    if hit is not None:
        return finish(tok, ids, logps, ends, hit, "stop")
    if last:
        return finish(tok, ids, logps, ends, None, "length")
    return None


def finish(tok, ids: list[int], logps: list[float], ends: list[int], cut: int | None, reason: str) -> Completion:
    """The Completion of a row's tokens, its text cut at `cut` (where a stop string starts) when there is one."""
    text = tok.decode(ids, skip_special_tokens=True)
    if cut is not None:  # keep the tokens that contribute text before the stop string
        text = text[:cut]
        kept = 0
        while kept < len(ids) and (ends[kept - 1] if kept else 0) < cut:
            kept += 1
        ids, logps = ids[:kept], logps[:kept]
    tokens = tok.convert_ids_to_tokens(ids)
    return Completion(text=text, tokens=list(tokens), token_logprobs=[float(x) for x in logps], finish_reason=reason)


def _as_list(x: Any) -> list[int]:
    return [] if x is None else list(x) if isinstance(x, (list, tuple, set)) else [int(x)]
