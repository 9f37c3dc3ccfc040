"""Decoding steps at fixed shapes, replayed as CUDA graphs on a GPU.

An eager decoding step launches about 1,100 kernels (the 7B shape); on an H200 the CPU side of a step took several
times the GPU's own work (issue 36). A CUDA graph records a step's kernels once and replays them with one launch, but
only a step whose shapes and addresses never change: `StepGraph` holds a batch's whole decoding state in tensors of
fixed shape (the key/value cache at full length, `kvcache.fix`; the attention mask over all of it, a column switched on
per step; the rows' last tokens, positions, the step number and each row's sampling keys). One step, a forward, the
log-softmax and each row's next token (`sampling.next_tokens`), then advances that state on the device, so a replay
needs nothing from the CPU but the launch; the tokens and their log-probabilities come back for the stop checks
(`launch`: copied to the host without waiting, so the next step can be launched before this one's stops are checked).

Rows that finish stay in the batch (what they decode is not read); `select` moves the rows still going into a state of
their own, to be captured anew (`decoding` does so when half have finished). On a CPU the same step runs eagerly (what the
tests check against the decoder's dynamic path: the same completions); graphs are captured on CUDA only.
"""

from __future__ import annotations

from typing import Any

from covlib.generation.kvcache import fix
from covlib.generation.loading import cache_kwarg
from covlib.generation.sampling import next_tokens, token_values

WARMUP = 1  # eager runs of a step (on a side stream) before it is captured: lazy initialisations happen outside it


class StepGraph:
    """A batch's decoding state at fixed shapes and its step: replayed as a CUDA graph on CUDA, run eagerly elsewhere."""

    def __init__(self, model: Any, kv: Any, state: dict[str, Any], extra: dict, sampling: tuple):
        # state: tokens (rows, 1) the rows' last tokens; pos (rows, 1) their positions; mask (rows, 1, 1, length) bool,
        # the cache columns each row attends to; at (1,) the column this step writes; step (1,) the step number;
        # keys (rows, steps) the rows' sampling keys or None (greedy)
        self.model, self.kv, self.state, self.extra, self.sampling = model, fix(kv, state["at"]), state, extra, sampling
        self.graph = None
        self.out = None  # the captured step's output: its tokens and their log-probabilities, (2, rows)
        self.flip = 0  # which of the two host buffers the next `launch` copies into
        self.host = [_host_buffer(state["tokens"]) for _ in range(2)]

    def _step(self) -> Any:
        """One decoding step on the state, advancing it: each row's next token and its log-probability, (2, rows)."""
        s = self.state
        s["mask"].index_fill_(3, s["at"], True)
        out = self.model(input_ids=s["tokens"], attention_mask=s["mask"], position_ids=s["pos"], use_cache=True,
                         **cache_kwarg(self.model, self.kv), **self.extra)
        logits = out.logits[:, -1, :].float()
        greedy, temperature, top_p = self.sampling
        keys = None if greedy else s["keys"].index_select(1, s["step"])[:, 0]
        nxt = next_tokens(logits, greedy, temperature, top_p, keys)
        s["tokens"].copy_(nxt[:, None])
        for name in ("pos", "at", "step"):
            s[name].add_(1)
        return token_values(nxt, logits)

    def capture(self) -> None:
        """Record the step as a CUDA graph after `WARMUP` eager runs whose effect on the state is undone (the cache
        column they wrote is written again, with the same values, by the first replay)."""
        import torch

        saved = {k: v.clone() for k, v in self.state.items() if k != "keys"}
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(WARMUP):
                self._step()
                self._restore(saved)
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.out = self._step()
        self._restore(saved)  # capturing runs nothing, but keep the state exactly as it was

    def _restore(self, saved: dict[str, Any]) -> None:
        for k, v in saved.items():
            self.state[k].copy_(v)

    def run(self) -> Any:
        """One step: each row's next token and its log-probability, a (2, rows) tensor on the device (a graph's own
        output, overwritten by the next step)."""
        if self.graph is None:
            return self._step()
        self.graph.replay()
        return self.out

    def launch(self) -> "Landing":
        """Run one step and start copying its tokens and log-probabilities (a (2, rows) float64 tensor) to the host
        without waiting: the caller can launch the next step before it reads this one's (the state is on the device)."""
        import torch

        host, self.flip = self.host[self.flip], 1 - self.flip
        host.copy_(self.run(), non_blocking=True)
        event = None
        if host.is_pinned():
            event = torch.cuda.Event()
            event.record()
        return Landing(host, event)

    def select(self, idx: Any) -> "StepGraph":
        """The state of the rows `idx` only (a device index tensor), as a step of its own (not captured yet)."""
        self.kv.batch_select_indices(idx)
        state = {k: (v if k in ("at", "step") else None if v is None else v[idx]) for k, v in self.state.items()}
        self.graph = self.out = None  # the old graph's memory goes with it
        return StepGraph(self.model, self.kv, state, self.extra, self.sampling)


class Landing:
    """A step's tokens and log-probabilities on their way to the host (a buffer that the step after next overwrites)."""

    def __init__(self, host: Any, event: Any):
        self.host, self.event = host, event

    def values(self) -> Any:
        """The (2, rows) host tensor, once the copy is done."""
        if self.event is not None:
            self.event.synchronize()
        return self.host


def _host_buffer(tokens: Any) -> Any:
    """A (2, rows) float64 host buffer for a step's tokens and log-probabilities: pinned for a CUDA state, so the copy
    runs while the CPU goes on."""
    import torch

    return torch.empty((2, tokens.shape[0]), dtype=torch.float64, pin_memory=tokens.is_cuda)


def fixed_state(model: Any, kv: Any, first: Any, attn: Any, offset: int, keys: Any, extra: dict, sampling: tuple) -> StepGraph:
    """The fixed-shape state after a batch's prefill (`kv` reserved for the steps to come) and its first token `first`
    (rows,): the prefill's mask `attn` (rows, prefilled columns) widened to the whole cache, positions after it."""
    import torch

    length = kv.layers[0].buffers[0].shape[2]
    mask = torch.zeros((attn.shape[0], 1, 1, length), dtype=torch.bool, device=attn.device)
    mask[:, 0, 0, : attn.shape[1]] = attn.bool()
    state = {"tokens": first[:, None].clone(), "pos": attn.long().sum(-1, keepdim=True) + offset, "mask": mask,
             "at": torch.tensor([attn.shape[1]], device=attn.device), "step": torch.tensor([1], device=attn.device),
             "keys": keys}
    return StepGraph(model, kv, state, extra, sampling)
