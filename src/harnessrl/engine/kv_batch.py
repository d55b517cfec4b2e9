"""A running decode batch over a transformers DynamicCache, with rows joining and leaving per step.

Rows are left-aligned to a common length: a row whose history is shorter than the batch is padded
on the left with zero keys/values and attention-mask 0. Each row keeps its own position counter,
so padding never shifts rotary positions. A new row is prefilled alone (no padding at all) and
then merged; finished rows are dropped; leading columns that every row masks out are trimmed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F


def _cache_layers(cache: Any) -> list[Any]:
    layers = getattr(cache, "layers", None)
    if layers is None or any(not hasattr(layer, "keys") for layer in layers):
        raise TypeError(f"unsupported KV cache type {type(cache).__name__}: need a DynamicCache with .layers")
    return layers


def _left_pad(x: torch.Tensor, n: int) -> torch.Tensor:
    """Pad a [B, H, L, D] tensor with n zero columns on the left of L."""
    return x if n == 0 else F.pad(x, (0, 0, n, 0))


@dataclass
class KVBatch:
    """Cache + mask + per-row positions of the rows currently decoding together."""

    cache: Any  # transformers DynamicCache
    mask: torch.Tensor  # [B, L] long, 1 = real token
    positions: torch.Tensor  # [B] long, the position of the next token of each row

    @property
    def size(self) -> int:
        return int(self.mask.shape[0])

    @property
    def length(self) -> int:
        return int(self.mask.shape[1])

    @classmethod
    def from_prefill(cls, cache: Any, prompt_len: int) -> KVBatch:
        mask = torch.ones(1, prompt_len, dtype=torch.long)
        return cls(cache=cache, mask=mask, positions=torch.tensor([prompt_len], dtype=torch.long))

    def merge(self, other: KVBatch) -> None:
        """Append other's rows (in place), left-padding whichever side is shorter."""
        length = max(self.length, other.length)
        pad_self, pad_other = length - self.length, length - other.length
        for mine, theirs in zip(_cache_layers(self.cache), _cache_layers(other.cache)):
            mine.keys = torch.cat([_left_pad(mine.keys, pad_self), _left_pad(theirs.keys, pad_other)], dim=0)
            mine.values = torch.cat(
                [_left_pad(mine.values, pad_self), _left_pad(theirs.values, pad_other)], dim=0
            )
        self.mask = torch.cat([F.pad(self.mask, (pad_self, 0)), F.pad(other.mask, (pad_other, 0))], dim=0)
        self.positions = torch.cat([self.positions, other.positions])

    def keep(self, rows: list[int]) -> None:
        """Keep only the given row indices (in that order), then trim all-padding leading columns."""
        index = torch.tensor(rows, dtype=torch.long)
        for layer in _cache_layers(self.cache):
            layer.keys = layer.keys.index_select(0, index)
            layer.values = layer.values.index_select(0, index)
        self.mask = self.mask.index_select(0, index)
        self.positions = self.positions.index_select(0, index)
        self._trim_left()

    def _trim_left(self) -> None:
        used = self.mask.any(dim=0).nonzero()
        start = int(used[0]) if used.numel() else 0
        if start == 0:
            return
        for layer in _cache_layers(self.cache):
            layer.keys = layer.keys[:, :, start:]
            layer.values = layer.values[:, :, start:]
        self.mask = self.mask[:, start:]

    def decode_inputs(self, next_tokens: torch.Tensor) -> dict[str, Any]:
        """Model kwargs for one decode step feeding next_tokens [B]; extends the mask by one column."""
        self.mask = torch.cat([self.mask, torch.ones(self.size, 1, dtype=torch.long)], dim=1)
        inputs = {
            "input_ids": next_tokens.view(-1, 1),
            "attention_mask": self.mask,
            "position_ids": self.positions.view(-1, 1).clone(),
            "past_key_values": self.cache,
            "cache_position": torch.tensor([self.length - 1], dtype=torch.long),
            "use_cache": True,
        }
        self.positions = self.positions + 1
        return inputs
