"""A key/value cache written in place: each layer's keys and values in a buffer with room for the tokens to come.

transformers' `DynamicCache` appends a step's keys and values with `torch.cat`, copying every layer's whole cache at
every step (quadratic in the length). `reserve(kv, extra)` moves a prefilled cache's layers into buffers with room for
`extra` more tokens; a step then writes its token's keys and values in place and attention reads a view of the filled
part: the same numbers, without the copies. Only full-attention layers move (`covlib.generation.engine` says when).

`fix(kv, at)` turns the same buffers to fixed shapes, for decoding steps replayed as CUDA graphs
(`covlib.generation.graphs`): attention reads each whole buffer (a mask hides what is not written yet) and a step writes
at the column the device tensor `at` holds, so the step's shapes and addresses never change.
"""

from __future__ import annotations

import functools
from typing import Any

GROW = 64  # tokens of room added when a buffer is full (a call that decodes past what was reserved)


def reserve(kv: Any, extra: int) -> Any:
    """`kv` (a prefilled `DynamicCache`) with each full-attention layer (a `DynamicLayer`, not a subclass: a
    sliding-window layer keeps its own) moved into a buffer with room for `extra` more tokens."""
    from transformers.cache_utils import DynamicLayer

    kv.layers = [in_place_layer().of(layer, extra) if type(layer) is DynamicLayer and layer.keys is not None else layer
                 for layer in kv.layers]
    return kv


def fix(kv: Any, at: Any) -> Any:
    """`kv` (after `reserve`, every layer in place) at fixed shapes: each layer reads its whole buffer and writes at
    column `at` (a one-element long tensor on the device, which the caller advances)."""
    if not all(isinstance(layer, in_place_layer()) for layer in kv.layers):
        raise ValueError(f"fixed shapes need every cache layer in place, not {[type(x).__name__ for x in kv.layers]}")
    for layer in kv.layers:
        layer.at = at
        layer._views()
    return kv


@functools.lru_cache(maxsize=None)
def in_place_layer() -> type:
    """The cache layer class (a `DynamicLayer` of transformers, made on first use) that writes into its buffer."""
    from transformers.cache_utils import DynamicLayer

    class InPlaceLayer(DynamicLayer):
        """A `DynamicLayer` whose keys and values are views of the filled part of a larger buffer."""

        @classmethod
        def of(cls, layer: Any, extra: int) -> "InPlaceLayer":
            """A copy of `layer`'s keys and values with room for `extra` more tokens."""
            new = cls()
            new.at = None  # set by `fix`: the column a step writes at, on the device
            new.device, new.is_initialized, new.length = layer.keys.device, True, layer.keys.shape[-2]
            new.buffers = [_room(t, t.shape[-2] + extra) for t in (layer.keys, layer.values)]
            new._views()
            return new

        def _views(self) -> None:
            self.keys, self.values = self.buffers if self.at is not None else (b[:, :, : self.length] for b in self.buffers)

        def update(self, key_states, value_states, *args, **kwargs):
            """Write the new keys and values after the filled part (growing the buffers when full); the filled part.
            Fixed (`fix`): write them at column `at` and return the whole buffers."""
            if self.at is not None:
                for buf, new in zip(self.buffers, (key_states, value_states)):
                    buf.index_copy_(2, self.at, new)
                return self.keys, self.values
            end = self.length + key_states.shape[-2]
            if end > self.buffers[0].shape[-2]:
                self.buffers = [_room(b[:, :, : self.length], end + GROW) for b in self.buffers]
            for buf, new in zip(self.buffers, (key_states, value_states)):
                buf[:, :, self.length : end].copy_(new)
            self.length = end
            self._views()
            return self.keys, self.values

        def batch_repeat_interleave(self, repeats: int) -> None:
            self.buffers = [b.repeat_interleave(repeats, dim=0) for b in self.buffers]
            self._views()

        def batch_select_indices(self, indices) -> None:
            self.buffers = [b[indices] for b in self.buffers]
            self._views()

        def crop(self, tokens_to_remove: int) -> None:
            super().crop(tokens_to_remove)
            self.length = self.keys.shape[-2]

    return InPlaceLayer


def _room(t: Any, size: int) -> Any:
    """A buffer of `size` positions (dimension 2) holding `t` at the start, zeros after it (attention at fixed shapes
    reads the whole buffer: a masked score is 0, but 0 times whatever an empty buffer held can be NaN)."""
    buf = t.new_zeros((*t.shape[:2], size, *t.shape[3:]))
    buf[:, :, : t.shape[-2]].copy_(t)
    return buf
