"""A slot-based key/value cache: one row of preallocated tensors per running sequence.

Keys are stored at their absolute positions (already rotated), so a sequence's cache is just the
first `length` positions of its slot. Which of them a query may see is decided by the attention mask.
The engine keeps its running sequences in slots 0..B-1 so that attention reads slots[:B] in place.
"""

from __future__ import annotations

import torch

from llm.engine.config import ModelConfig


class KVCache:
    def __init__(self, cfg: ModelConfig, num_slots: int, max_len: int, device, dtype):
        shape = (cfg.num_layers, num_slots, cfg.num_kv_heads, max_len, cfg.head_dim)
        self.k = torch.zeros(shape, device=device, dtype=dtype)
        self.v = torch.zeros(shape, device=device, dtype=dtype)
        self.max_len = max_len
        self.free = list(range(num_slots))

    def allocate(self) -> int | None:
        return self.free.pop(0) if self.free else None

    def release(self, slot: int) -> None:
        self.free.append(slot)
        self.free.sort()

    def layers(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per layer, the whole cache ([slots, Hkv, max_len, D]) * 2, for the attention to write and read."""
        return list(zip(self.k, self.v, strict=True))

    def move(self, src: int, dst: int, length: int) -> None:
        """Copy a slot's first `length` positions into another slot."""
        self.k[:, dst, :, :length] = self.k[:, src, :, :length]
        self.v[:, dst, :, :length] = self.v[:, src, :, :length]

    def read(self, slot: int, length: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """A copy of a slot's first `length` positions, per layer ([Hkv, length, D]) * 2."""
        return [
            (self.k[i, slot, :, :length].clone(), self.v[i, slot, :, :length].clone())
            for i in range(len(self.k))
        ]

    def fill(self, slot: int, kv: list[tuple[torch.Tensor, torch.Tensor]], length: int) -> None:
        """Put the first `length` positions of saved keys/values at the start of a slot."""
        for i, (k, v) in enumerate(kv):
            self.k[i, slot, :, :length] = k[:, :length]
            self.v[i, slot, :, :length] = v[:, :length]
