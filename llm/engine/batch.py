"""How one engine step's requests become one forward pass.

The dense layers (projections, MLP) see the requests packed into one row with no padding, so a
prefill costs only its own tokens. Attention reads the cache in place: request i lives in cache slot
i, and runs of neighbouring requests with similar query lengths share one padded attention call (the
8-16 queries of decoding requests go together; a long prefill gets a call of its own). Padding stays
under half of each call's queries, and the number of calls stays small whatever the batch size.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from llm.engine.layers.attention import CacheBatch, Part
from llm.engine.sequence import Work


@dataclass
class Packed:
    ids: torch.Tensor  # [1, T]
    positions: torch.Tensor  # [1, T]
    batch: CacheBatch
    rows: torch.Tensor  # packed rows whose outputs give the logits, request after request
    splits: list[int]  # how many of them each request has


def runs(q_lens: list[int]) -> list[tuple[int, int]]:
    """Split requests into runs [a, b) whose padded size is at most twice their real size."""
    out: list[tuple[int, int]] = []
    for i, q in enumerate(q_lens):
        if out:
            a, _ = out[-1]
            if (i + 1 - a) * max(*q_lens[a:i], q) <= 2 * (sum(q_lens[a:i]) + q):
                out[-1] = (a, i + 1)
                continue
        out.append((i, i + 1))
    return out


def pack(works: list[Work], device: torch.device) -> Packed:
    q_lens = torch.tensor([w.ids.numel() for w in works])
    offsets = q_lens.cumsum(0) - q_lens  # where each request starts in the packed row
    starts = torch.tensor([int(w.positions[0]) for w in works])
    ends = starts + q_lens
    cache_lens = torch.tensor([w.cache_len for w in works])
    positions = torch.cat([w.positions for w in works])
    blocks = torch.cat([w.block_ids for w in works])
    slots = torch.arange(len(works)).repeat_interleave(q_lens)
    row = torch.arange(slots.numel()) - offsets[slots]  # each token's row within its request
    parts, unpad, done = [], torch.empty_like(positions), 0
    for a, b in runs(q_lens.tolist()):
        q, q_max = q_lens[a:b], int(q_lens[a:b].max())
        key_len = int(torch.maximum(cache_lens[a:b], ends[a:b]).max())
        pad_index = offsets[a:b, None] + torch.minimum(torch.arange(q_max)[None], q[:, None] - 1)
        mine = slice(int(offsets[a]), int(offsets[b - 1] + q_lens[b - 1]))
        unpad[mine] = done + (slots[mine] - a) * q_max + row[mine]
        key_blocks = torch.zeros((b - a, key_len), dtype=torch.long)
        key_blocks[slots[mine] - a, positions[mine]] = blocks[mine]
        keys = torch.arange(key_len)[None]
        fresh = (keys >= starts[a:b, None]) & (keys < ends[a:b, None])  # this step's own keys
        cached = (keys < cache_lens[a:b, None]) & ~fresh  # (the dual cache's stale block is overwritten)
        mask = cached[:, None] | fresh[:, None] & (key_blocks[:, None] <= blocks[pad_index][:, :, None])
        parts.append(Part(a, b - a, pad_index.flatten().to(device), mask[:, None].to(device), key_len))
        done += (b - a) * q_max
    rows = torch.cat([o + w.rows for w, o in zip(works, offsets.tolist(), strict=True)])
    return Packed(
        ids=torch.cat([w.ids for w in works])[None].to(device),
        positions=positions[None].to(device),
        batch=CacheBatch(slots.to(device), positions.to(device), parts, unpad.to(device)),
        rows=rows.to(device),
        splits=[w.rows.numel() for w in works],
    )
