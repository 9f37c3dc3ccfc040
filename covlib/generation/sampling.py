"""Sampling and stopping: the next token of each row (greedy or sampled) and where a completion ends.

Sampling is repeatable: sample `i` of a prompt draws from its own torch generator seeded from
(seed, prompt, i) (`covlib.generation.base.sample_seed`), so it does not depend on batch composition.
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


def sample_generators(texts: Sequence[str], n: int, seed: int, device: str) -> list:
    """One torch generator per row, `n` per prompt in prompt order, sample `i` seeded by `sample_seed(seed, text, i)`."""
    import torch

    gens = []
    for text in texts:
        for i in range(n):
            g = torch.Generator(device=device)
            g.manual_seed(sample_seed(seed, text, i))
            gens.append(g)
    return gens


def next_tokens(logits, greedy: bool, temperature: float, top_p: float, gens: list | None, active: list[int]):
    """Each live row's next token: the argmax, or a draw at `temperature` within `top_p` from row `active[b]`'s
    own generator."""
    import torch

    if greedy:
        return logits.argmax(dim=-1)
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_p < 1.0:
        probs = top_p_filter(probs, top_p)
    return torch.stack([torch.multinomial(probs[b], 1, generator=gens[r])[0] for b, r in enumerate(active)])


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
