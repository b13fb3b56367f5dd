"""A slot-based key/value cache: one row of preallocated tensors per running sequence.

Keys are stored at their absolute positions (already rotated), so a sequence's cache is just the
first `length` positions of its slot. Which of them a query may see is decided by the attention mask,
which is how the dual cache hides the stale keys of the block being denoised.
"""

from __future__ import annotations

import torch

from llm.config import ModelConfig


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

    def gather(self, spans: list[tuple[int, int]]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per layer, the first `length` positions of each (slot, length), packed one after another
        along the sequence axis: ([1, Hkv, sum of lengths, D]) * 2."""
        out = []
        for layer in range(self.k.shape[0]):
            k = torch.cat([self.k[layer, slot, :, :n] for slot, n in spans], dim=1)
            v = torch.cat([self.v[layer, slot, :, :n] for slot, n in spans], dim=1)
            out.append((k[None], v[None]))
        return out

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

    def write(
        self, slot: int, start: int, new_kv: list[tuple[torch.Tensor, torch.Tensor]], row: int, rows: slice
    ) -> None:
        """Store batch row `row`, query rows `rows` of each layer's new keys/values at `start`."""
        n = rows.stop - rows.start
        if start + n > self.max_len:
            raise ValueError(f"sequence longer than the cache ({start + n} > {self.max_len} positions)")
        for layer, (k, v) in enumerate(new_kv):
            self.k[layer, slot, :, start : start + n] = k[row, :, rows]
            self.v[layer, slot, :, start : start + n] = v[row, :, rows]
